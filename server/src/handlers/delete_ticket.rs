//! `planwire/deleteTicket`: delete a ticket and everything recorded for it. A ticket being
//! planned is busy: stop it first. Clients hear `planwire/ticketDeleted`, and a
//! `ticketChanged` for each ticket that depended on it.

use std::sync::Arc;

use planwire_protocol::{DeleteTicketResult, TicketRef};

use super::HandlerResult;
use crate::runner::{notify_ticket, store_error};
use crate::session::Session;
use crate::store::tickets;

pub async fn handle(s: Arc<Session>, p: TicketRef) -> HandlerResult<DeleteTicketResult> {
    let id = p.ticket_id;
    let dependents = s
        .store
        .write(move |c| tickets::delete(c, id))
        .await
        .map_err(store_error)?;
    s.outbox
        .notify("planwire/ticketDeleted", TicketRef { ticket_id: id })
        .await;
    for t in dependents {
        notify_ticket(&s, t).await;
    }
    Ok(DeleteTicketResult { deleted: true })
}

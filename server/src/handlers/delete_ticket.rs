//! `planwire/deleteTicket`: delete a ticket and everything recorded for it. A ticket being
//! planned is busy: stop it first.

use std::sync::Arc;

use planwire_protocol::{DeleteTicketResult, TicketRef};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::tickets;

pub async fn handle(s: Arc<Session>, p: TicketRef) -> HandlerResult<DeleteTicketResult> {
    let id = p.ticket_id;
    s.store
        .write(move |c| tickets::delete(c, id))
        .await
        .map_err(store_error)?;
    Ok(DeleteTicketResult { deleted: true })
}

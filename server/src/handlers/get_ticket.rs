//! `planwire/getTicket`: the ticket with its conversation, questions and runs (newest first),
//! and the usage and cost of all its runs.

use std::sync::Arc;

use planwire_protocol::{GetTicketResult, TicketRef};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::{memory, questions, runs, tickets, transcript};

pub async fn handle(s: Arc<Session>, p: TicketRef) -> HandlerResult<GetTicketResult> {
    let id = p.ticket_id;
    s.store
        .read(move |c| {
            Ok(GetTicketResult {
                ticket: tickets::get(c, id)?,
                messages: tickets::messages(c, id)?,
                questions: questions::for_ticket(c, id)?,
                runs: runs::for_ticket(c, id)?,
                usage: transcript::ticket_usage(c, id)?,
                memory_suggestions: memory::for_ticket(c, id)?,
            })
        })
        .await
        .map_err(store_error)
}

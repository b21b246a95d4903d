//! `planwire/listTickets`: every ticket, or those of one root.

use std::sync::Arc;

use planwire_protocol::{ListTicketsParams, ListTicketsResult};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::tickets;

pub async fn handle(s: Arc<Session>, p: ListTicketsParams) -> HandlerResult<ListTicketsResult> {
    let initiative = p.initiative_run_id;
    // Roots are stored canonical; match what the client names the same way.
    let root = p
        .root
        .map(|r| std::fs::canonicalize(&r).map(|p| p.display().to_string()).unwrap_or(r));
    let tickets = s
        .store
        .read(move |c| tickets::list(c, root.as_deref(), initiative))
        .await
        .map_err(store_error)?;
    Ok(ListTicketsResult { tickets })
}

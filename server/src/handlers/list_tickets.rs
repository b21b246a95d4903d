//! `planwire/listTickets`: every ticket, or those of one root or one breakdown, oldest
//! first; paged with `limit` and `afterId` when the list is large.

use std::sync::Arc;

use planwire_protocol::{ListTicketsParams, ListTicketsResult};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::tickets::{self, Filter};

pub async fn handle(s: Arc<Session>, p: ListTicketsParams) -> HandlerResult<ListTicketsResult> {
    // Roots are stored canonical; match what the client names the same way.
    let root = p
        .root
        .map(|r| std::fs::canonicalize(&r).map(|p| p.display().to_string()).unwrap_or(r));
    let (initiative, after_id, limit) = (p.initiative_run_id, p.after_id, p.limit.map(|l| l.max(1)));
    let tickets = s
        .store
        .read(move |c| {
            tickets::list(
                c,
                Filter {
                    root: root.as_deref(),
                    initiative,
                    after_id,
                    limit,
                },
            )
        })
        .await
        .map_err(store_error)?;
    let full = limit.is_some_and(|l| tickets.len() == l as usize);
    let next_after_id = if full { tickets.last().map(|t| t.id) } else { None };
    Ok(ListTicketsResult { tickets, next_after_id })
}

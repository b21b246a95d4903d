//! `planwire/stop`: stop a ticket's active run, or a run by id (a breakdown has no ticket);
//! answers once its process group is gone. A run driven by another sidecar on the same
//! database is stopped through its recorded process group; that sidecar records it as
//! cancelled.

use std::sync::Arc;
use std::time::Duration;

use planwire_protocol::{RunId, StopParams, StopResult};
use rusqlite::params;

use super::{invalid_params, HandlerResult};
use crate::runner::store_error;
use crate::session::Session;
use crate::store::{runs, tickets};
use crate::supervisor;

pub async fn handle(s: Arc<Session>, p: StopParams) -> HandlerResult<StopResult> {
    let own = match (p.ticket_id, p.run_id) {
        (_, Some(run)) => s.handle(run),
        (Some(ticket), None) => s.run_of_ticket(ticket).map(|(_, h)| h),
        (None, None) => return Err(invalid_params("planwire/stop needs `ticketId` or `runId`")),
    };
    if let Some(handle) = own {
        Session::stop_run(&handle).await;
        return Ok(StopResult { stopped: true });
    }
    let (ticket, run_id) = (p.ticket_id, p.run_id);
    let active = s
        .store
        .write(move |c| {
            let run = match (run_id, ticket) {
                (Some(id), _) => Some(runs::get(c, id)?).filter(|r| r.status.is_active()),
                (None, Some(t)) => {
                    tickets::status(c, t)?; // not found → error
                    runs::active(c, Some(t))?.into_iter().next()
                }
                (None, None) => None,
            };
            let Some(run) = run else { return Ok(None) };
            c.execute("UPDATE runs SET stop_requested = 1 WHERE id = ?1", params![run.id])?;
            let group: (Option<i32>, Option<u64>) =
                c.query_row("SELECT pgid, child_start FROM runs WHERE id = ?1", [run.id], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
            Ok(Some((run.id, group)))
        })
        .await
        .map_err(store_error)?;
    let Some((run_id, (Some(pgid), Some(start)))) = active else {
        return Ok(StopResult { stopped: false });
    };
    supervisor::stop_recorded_group(pgid, start, s.config.stop_grace).await;
    wait_recorded(&s, run_id).await?;
    Ok(StopResult { stopped: true })
}

/// Waits (briefly) for the owning sidecar to record the end.
async fn wait_recorded(s: &Session, run_id: RunId) -> HandlerResult<()> {
    for _ in 0..100 {
        let run = s.store.read(move |c| runs::get(c, run_id)).await.map_err(store_error)?;
        if !run.status.is_active() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

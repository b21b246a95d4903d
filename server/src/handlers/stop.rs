//! `planwire/stop`: stop the ticket's active run; answers once its process group is gone.
//! A run driven by another sidecar on the same database is stopped through its recorded
//! process group; that sidecar records it as cancelled.

use std::sync::Arc;
use std::time::Duration;

use planwire_protocol::{RunStatus, StopResult, TicketRef};
use rusqlite::params;

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::runs;
use crate::util::{group_members, same_process_alive};

pub async fn handle(s: Arc<Session>, p: TicketRef) -> HandlerResult<StopResult> {
    if let Some((_, handle)) = s.run_of_ticket(p.ticket_id) {
        Session::stop_run(&handle).await;
        return Ok(StopResult { stopped: true });
    }
    let id = p.ticket_id;
    let active = s
        .store
        .write(move |c| {
            crate::store::tickets::status(c, id)?; // not found → error
            let Some(run) = runs::active(c, Some(id))?.into_iter().next() else {
                return Ok(None);
            };
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
    stop_foreign_group(pgid, start, s.config.stop_grace).await;
    // Wait (briefly) for the owning sidecar to record the end.
    for _ in 0..100 {
        let run = s.store.read(move |c| runs::get(c, run_id)).await.map_err(store_error)?;
        if run.status != RunStatus::Running && run.status != RunStatus::Queued {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(StopResult { stopped: true })
}

async fn stop_foreign_group(pgid: i32, start: u64, grace: Duration) {
    if !same_process_alive(pgid, start) && group_members(pgid, start).is_empty() {
        return;
    }
    // SAFETY: plain syscalls on a group identified by its leader's pid and start time.
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline && !group_members(pgid, start).is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !group_members(pgid, start).is_empty() {
        crate::supervisor::kill_leftover_group(pgid, start);
    }
}

//! `planwire/getTranscript`: a page of a run's events after a seq, for catching up.

use std::sync::Arc;

use planwire_protocol::{GetTranscriptParams, GetTranscriptResult};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::{runs, transcript};

/// A page's default and largest size: a 1,000-event page answers within a few ms.
const MAX_PAGE: u32 = 1000;

pub async fn handle(s: Arc<Session>, p: GetTranscriptParams) -> HandlerResult<GetTranscriptResult> {
    let limit = p.limit.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
    s.store
        .read(move |c| {
            let run = runs::get(c, p.run_id)?;
            let (events, last_seq) = transcript::page(c, p.run_id, p.after_seq, limit)?;
            let reached = events.last().map_or(p.after_seq, |e| e.seq) >= last_seq;
            Ok(GetTranscriptResult {
                events,
                last_seq,
                done: !run.status.is_active() && reached,
            })
        })
        .await
        .map_err(store_error)
}

//! `planwire/getTranscript`: a page of a run's events after a seq, for catching up.
//! The events are sent as the JSON the store holds (the same bytes that were notified),
//! without parsing them into types and serializing them again.

use std::sync::Arc;

use planwire_protocol::GetTranscriptParams;
use serde::Serialize;
use serde_json::value::RawValue;

use super::{HandlerResult, RawResult};
use crate::runner::store_error;
use crate::session::Session;
use crate::store::{runs, transcript};
use crate::transport::ResponseError;

/// A page's default and largest size: a 1,000-event page answers within a few ms.
const MAX_PAGE: u32 = 1000;

/// [`planwire_protocol::GetTranscriptResult`], with events already serialized.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    events: Vec<Box<RawValue>>,
    last_seq: u64,
    done: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    open_blocks: Vec<planwire_protocol::OpenBlock>,
}

pub async fn handle(s: Arc<Session>, p: GetTranscriptParams) -> HandlerResult<RawResult> {
    let limit = p.limit.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
    let (payloads, last_seq, reached, done) = s
        .store
        .read(move |c| {
            let run = runs::get(c, p.run_id)?;
            let (payloads, page_end, last_seq) = transcript::page_raw(c, p.run_id, p.after_seq, limit)?;
            let reached = page_end.unwrap_or(p.after_seq) >= last_seq;
            Ok((payloads, last_seq, reached, !run.status.is_active() && reached))
        })
        .await
        .map_err(store_error)?;
    // Taken after the page: a block closed by an event of the page is no longer open.
    let open_blocks = match (reached && !done, s.handle(p.run_id)) {
        (true, Some(h)) => {
            let blocks = h.open_blocks.lock().expect("open blocks");
            blocks.iter().filter(|b| !b.text.is_empty()).cloned().collect()
        }
        _ => Vec::new(),
    };
    let events = payloads
        .into_iter()
        .filter_map(|p| RawValue::from_string(p).ok())
        .collect();
    let internal =
        |e: serde_json::Error| ResponseError::new(planwire_protocol::ErrorCode::InternalError, e.to_string());
    let page = Page {
        events,
        last_seq,
        done,
        open_blocks,
    };
    serde_json::value::to_raw_value(&page).map_err(internal)
}

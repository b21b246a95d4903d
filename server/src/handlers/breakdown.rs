//! `planwire/breakdown`: break an initiative into dependent tickets (see runner/breakdown.rs).

use std::sync::Arc;

use planwire_protocol::{BreakdownParams, BreakdownResult};

use super::HandlerResult;
use crate::runner;
use crate::session::Session;

pub async fn handle(s: Arc<Session>, p: BreakdownParams) -> HandlerResult<BreakdownResult> {
    let run_id = runner::start_breakdown(&s, p).await?;
    Ok(BreakdownResult { run_id })
}

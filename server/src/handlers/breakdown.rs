//! `planwire/breakdown`: break an initiative into dependent tickets (see runner/breakdown.rs).
//! Its outline, repair, expansion and research prompts carry the project's prompt settings,
//! which the run records.

use std::sync::Arc;

use planwire_protocol::{BreakdownParams, BreakdownResult};

use super::create_ticket::check_root;
use super::{settings, HandlerResult};
use crate::runner;
use crate::session::Session;

pub async fn handle(s: Arc<Session>, p: BreakdownParams) -> HandlerResult<BreakdownResult> {
    let root = check_root(&p.root)?;
    let used = settings::prompt_settings(&s, &root).await;
    let run_id = runner::start_breakdown(&s, p, used.clone()).await?;
    settings::record(&s, run_id, &used).await;
    Ok(BreakdownResult { run_id })
}

//! `planwire/getRun`: a run with its agent runs; where a breakdown's status lives.

use std::sync::Arc;

use planwire_protocol::{GetRunParams, GetRunResult};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::{runs, transcript};

pub async fn handle(s: Arc<Session>, p: GetRunParams) -> HandlerResult<GetRunResult> {
    let id = p.run_id;
    s.store
        .read(move |c| {
            Ok(GetRunResult {
                run: runs::get(c, id)?,
                agent_runs: transcript::agent_runs(c, id)?,
            })
        })
        .await
        .map_err(store_error)
}

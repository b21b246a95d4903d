//! `planwire/status`: active runs, the planners found, and facts about the store.

use std::sync::Arc;

use planwire_protocol::{StatusParams, StatusResult, StoreFacts};

use super::HandlerResult;
use crate::planners::detect;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::{runs, schema, tickets};

pub async fn handle(s: Arc<Session>, p: StatusParams) -> HandlerResult<StatusResult> {
    let planners = detect::detect_all(&s.config, Some(&s.store)).await;
    *s.planners.lock().expect("planners") = planners.clone();
    let ticket = p.ticket_id;
    let (active_runs, (ticket_count, run_count)) = s
        .store
        .read(move |c| {
            if let Some(id) = ticket {
                tickets::status(c, id)?;
            }
            Ok((runs::active(c, ticket)?, tickets::counts(c)?))
        })
        .await
        .map_err(store_error)?;
    Ok(StatusResult {
        active_runs,
        planners,
        store: StoreFacts {
            path: s.store.path().display().to_string(),
            schema_version: schema::VERSION,
            tickets: ticket_count,
            runs: run_count,
        },
    })
}

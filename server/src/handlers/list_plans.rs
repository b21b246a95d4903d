//! `planwire/listPlans`: every plan version of a ticket, oldest first, each with its markdown.

use std::sync::Arc;

use planwire_protocol::{ListPlansResult, PlanVersion, TicketRef};

use super::HandlerResult;
use crate::planners::plan::plan_markdown;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::plans;

pub async fn handle(s: Arc<Session>, p: TicketRef) -> HandlerResult<ListPlansResult> {
    let id = p.ticket_id;
    let stored = s.store.read(move |c| plans::list(c, id)).await.map_err(store_error)?;
    Ok(ListPlansResult {
        plans: stored.into_iter().map(wire).collect(),
    })
}

/// A stored version as the wire shows it, with its rendered markdown.
pub(super) fn wire(v: plans::Stored) -> PlanVersion {
    PlanVersion {
        version: v.version,
        run_id: v.run_id,
        created_at: v.created_at,
        markdown: plan_markdown(&v.plan),
        plan: v.plan,
    }
}

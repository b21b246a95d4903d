//! `planwire/getPlan`: one plan version of a ticket.

use std::sync::Arc;

use planwire_protocol::{GetPlanParams, PlanVersion};

use super::{list_plans, HandlerResult};
use crate::runner::store_error;
use crate::session::Session;
use crate::store::plans;

pub async fn handle(s: Arc<Session>, p: GetPlanParams) -> HandlerResult<PlanVersion> {
    let (id, version) = (p.ticket_id, p.version);
    let stored = s
        .store
        .read(move |c| plans::get(c, id, Some(version)))
        .await
        .map_err(store_error)?;
    Ok(list_plans::wire(stored))
}

//! `planwire/plan`: start planning a ticket (creating it first when given root, title and
//! description). A ticket planned before resumes its provider session unless `fresh`;
//! `retryOf` re-runs exactly that run's tool, model, variant and prompt settings.

use std::sync::Arc;

use planwire_protocol::{CreateTicketParams, PlanParams, PlanResult, Ticket};

use super::create_ticket::{check_tool, create};
use super::{invalid_params, settings, HandlerResult};
use crate::planners::prompt::{self, PromptSettings};
use crate::runner::{self, store_error, RunSpec};
use crate::session::Session;
use crate::store::{runs, tickets};

pub async fn handle(s: Arc<Session>, p: PlanParams) -> HandlerResult<PlanResult> {
    let ticket = match (p.ticket_id, &p.root, &p.title) {
        (Some(id), _, _) => s.store.read(move |c| tickets::get(c, id)).await.map_err(store_error)?,
        (None, Some(root), Some(title)) => {
            let Some(description) = p.description.clone() else {
                return Err(invalid_params(
                    "invalid params for planwire/plan: missing field `description` (it may be empty)",
                ));
            };
            // Refuse before creating anything, so a missing planner leaves no stray draft.
            let tool = check_tool(p.tool.as_deref().unwrap_or(&s.config.default_tool))?;
            runner::planner_program(&s, tool, p.model.as_deref())?;
            let params = CreateTicketParams {
                root: root.clone(),
                title: title.clone(),
                description,
                tool: p.tool.clone(),
                model: p.model.clone(),
                variant: p.variant.clone(),
            };
            create(&s, params).await?
        }
        _ => {
            return Err(invalid_params(
                "planwire/plan needs `ticketId`, or `root`, `title` and `description`",
            ))
        }
    };
    let (spec, used) = run_spec(&s, &ticket, &p).await?;
    let run_id = runner::start(&s, &ticket, spec).await?;
    settings::record(&s, run_id, &used).await;
    Ok(PlanResult {
        ticket_id: ticket.id,
        run_id,
    })
}

async fn run_spec(s: &Session, ticket: &Ticket, p: &PlanParams) -> HandlerResult<(RunSpec, PromptSettings)> {
    let (tool, model, variant) = match p.retry_of {
        Some(run_id) => {
            let run = s.store.read(move |c| runs::get(c, run_id)).await.map_err(store_error)?;
            if run.ticket_id != Some(ticket.id) {
                return Err(invalid_params(format!(
                    "field `retryOf`: run {run_id} is not a run of ticket {}",
                    ticket.id
                )));
            }
            (run.tool, run.model, run.variant)
        }
        None => (
            p.tool.clone().unwrap_or_else(|| ticket.tool.clone()),
            p.model.clone().or_else(|| ticket.model.clone()),
            p.variant.clone().or_else(|| ticket.variant.clone()),
        ),
    };
    let tool = check_tool(&tool)?;
    let id = ticket.id;
    let session = s
        .store
        .read(move |c| tickets::session(c, id))
        .await
        .map_err(store_error)?;
    let (resume, fresh_reason) = match session {
        _ if p.fresh => (None, Some("a fresh plan was asked for".to_owned())),
        Some((session_tool, _)) if session_tool != tool.name() => (
            None,
            Some(format!(
                "the ticket's planner changed from {session_tool} to {}",
                tool.name()
            )),
        ),
        Some((_, session_id)) if ticket.plan.is_some() => (Some(session_id), None),
        _ => (None, None),
    };
    // A retry uses the settings its run recorded; otherwise the project's current ones.
    let recorded = match p.retry_of {
        Some(run_id) => settings::of_run(s, run_id).await,
        None => None,
    };
    let used = match recorded {
        Some(used) => used,
        None => settings::prompt_settings(s, &ticket.root).await,
    };
    let prompt = match &resume {
        Some(_) => prompt::continuation_prompt(
            &format!(
                "The user asked to plan this ticket again. It now reads:\n\nTitle: {}\n\nDescription:\n{}",
                ticket.title, ticket.description
            ),
            &used,
        ),
        None => prompt::plan_prompt(&ticket.title, &ticket.description, &used),
    };
    let spec = RunSpec {
        tool,
        model,
        variant,
        prompt,
        fresh_prompt: resume
            .is_some()
            .then(|| prompt::plan_prompt(&ticket.title, &ticket.description, &used)),
        resume,
        retry_of: p.retry_of,
        fresh_reason,
        supersede_questions: true,
    };
    Ok((spec, used))
}

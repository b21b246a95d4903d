//! `planwire/plan`: start planning a ticket (creating it first when given root, title and
//! description). A ticket planned before resumes its provider session unless `fresh` or the
//! session's authority does not hold (`authority.rs`), and the resumed prompt says what the
//! user edited since; `retryOf` re-runs exactly that run's tool, model, variant, prompt
//! settings and feedback. The ticket's branch decides where the plan runs: its worktree, or
//! the root with the branch named in the prompt; a missing branch is -32013 before any run.
//!
//! `feedback` requests changes: the resumed session gets it as the user's next message. With
//! no session to resume (another CLI, none yet), a fresh run gets the previous plan and the
//! feedback in its prompt, and records why it started fresh. Either way the run's plan
//! becomes the ticket's next version.

use std::sync::Arc;

use planwire_protocol::{CreateTicketParams, PlanParams, PlanResult, RunId, Ticket};

use super::authority::{self, Resume};
use super::create_ticket::{check_tool, create, locate};
use super::{invalid_params, settings, HandlerResult};
use crate::planners::plan::plan_markdown;
use crate::planners::prompt::{self, PromptSettings, TicketSince};
use crate::runner::{self, store_error, RunSpec};
use crate::session::Session;
use crate::store::{runs, tickets};

pub async fn handle(s: Arc<Session>, p: PlanParams) -> HandlerResult<PlanResult> {
    let feedback = match p.feedback.as_deref().map(str::trim) {
        Some("") => return Err(invalid_params("field `feedback` must not be empty")),
        f => f.map(str::to_owned),
    };
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
                branch: None,
            };
            create(&s, params).await?
        }
        _ => {
            return Err(invalid_params(
                "planwire/plan needs `ticketId`, or `root`, `title` and `description`",
            ))
        }
    };
    // A retry of a run that asked for changes asks for them again.
    let feedback = match (feedback, p.retry_of) {
        (None, Some(run)) => s
            .store
            .read(move |c| runs::feedback_of(c, run))
            .await
            .map_err(store_error)?,
        (f, _) => f,
    };
    let (spec, used) = run_spec(&s, &ticket, &p, feedback.as_deref()).await?;
    let run_id = match &feedback {
        Some(text) => start_with_feedback(&s, &ticket, spec, text).await?,
        None => runner::start(&s, &ticket, spec).await?,
    };
    settings::record(&s, run_id, &used).await;
    let (title, description) = (ticket.title.clone(), ticket.description.clone());
    let recorded = s
        .store
        .write(move |c| runs::set_ticket_text(c, run_id, &title, &description))
        .await;
    if let Err(e) = recorded {
        tracing::error!("run {run_id}: cannot record the ticket text it planned: {e}");
    }
    Ok(PlanResult {
        ticket_id: ticket.id,
        run_id,
    })
}

/// Starts a run that asks for changes. The feedback is a message of the conversation before
/// the run starts (so it comes before the run's answer), and is taken back if the run cannot
/// start: a refused request leaves nothing behind.
async fn start_with_feedback(s: &Arc<Session>, ticket: &Ticket, spec: RunSpec, text: &str) -> HandlerResult<RunId> {
    let (id, message) = (ticket.id, text.to_owned());
    let message_id = s
        .store
        .write(move |c| tickets::add_message(c, id, None, "feedback", &message))
        .await
        .map_err(store_error)?;
    match runner::start(s, ticket, spec).await {
        Ok(run) => {
            let text = text.to_owned();
            let stored = s
                .store
                .write(move |c| {
                    runs::set_feedback(c, run, &text)?;
                    tickets::set_message_run(c, message_id, run)
                })
                .await;
            if let Err(e) = stored {
                tracing::error!("run {run}: cannot record its feedback: {e}");
            }
            Ok(run)
        }
        Err(e) => {
            let _ = s.store.write(move |c| tickets::delete_message(c, message_id)).await;
            Err(e)
        }
    }
}

async fn run_spec(
    s: &Session,
    ticket: &Ticket,
    p: &PlanParams,
    feedback: Option<&str>,
) -> HandlerResult<(RunSpec, PromptSettings)> {
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
    let workdir = locate(&ticket.root, ticket.branch.as_deref()).await?;
    let authority = authority::check(s, ticket, tool, model.as_deref(), &workdir).await?;
    let (resume, fresh_reason) = match authority {
        _ if p.fresh => (None, Some("a fresh plan was asked for".to_owned())),
        Resume::Fresh(reason) => (None, Some(reason)),
        Resume::Session(session_id) if ticket.plan.is_some() => (Some(session_id), None),
        // Changes asked of a plan no session holds: the plan goes into a fresh prompt.
        _ if feedback.is_some() => (None, Some("no provider session to resume".to_owned())),
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
    let fresh = match feedback {
        Some(f) => {
            let previous = ticket.plan.as_ref().map(plan_markdown);
            prompt::revision_prompt(&ticket.title, &ticket.description, previous.as_deref(), f, &used)
        }
        None => prompt::plan_prompt(&ticket.title, &ticket.description, &used),
    };
    let prompt = match &resume {
        Some(session) => {
            let since = ticket_since(s, ticket, session).await?;
            prompt::resume_prompt(&ticket.title, &ticket.description, since, feedback, &used)
        }
        None => fresh.clone(),
    };
    let spec = RunSpec {
        tool,
        model,
        variant,
        prompt,
        fresh_prompt: resume.is_some().then_some(fresh),
        resume,
        retry_of: p.retry_of,
        fresh_reason,
        supersede_questions: true,
        workdir,
        settings: used.clone(),
    };
    Ok((spec, used))
}

/// How the ticket changed since the provider session last planned it.
pub(super) async fn ticket_since(s: &Session, ticket: &Ticket, session: &str) -> HandlerResult<TicketSince> {
    let (id, session) = (ticket.id, session.to_owned());
    let planned = s
        .store
        .read(move |c| runs::planned_text(c, id, &session))
        .await
        .map_err(store_error)?;
    Ok(TicketSince::compare(
        &ticket.title,
        &ticket.description,
        planned.as_ref().map(|(t, d)| (t.as_str(), d.as_str())),
    ))
}

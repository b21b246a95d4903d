//! One `session/prompt`: what it starts, and the run it follows until the answer.
//!
//! - The first prompt of a draft session creates its ticket (title = the first line,
//!   description = the rest with the embedded context) and plans it.
//! - A prompt after a question shown as text answers it (`planwire/answer`).
//! - Any other prompt is feedback on the plan: `planwire/plan {ticketId, feedback}`, which
//!   resumes the planner's session.
//! - `/command …` is a slash command (`commands.rs`).
//!
//! Every update of a prompt is sent before its response: the run is followed until it has
//! ended (or waits on a question shown as text), and its last events are caught up from the
//! store. `session/cancel` is `planwire/stop`: it answers once the process group is gone and
//! the run is recorded, and only then does the prompt answer `cancelled`.

use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ContentBlock, EmbeddedResourceResource, SessionInfoUpdate, SessionUpdate, StopReason,
};
use planwire_protocol::{
    AnswerParams, AnswerQuestion, CreateTicket, CreateTicketParams, DeleteTicket, DeltaKind, DeltaNotification,
    ErrorCode, GetRun, GetRunParams, GetTicket, GetTranscript, GetTranscriptParams, PlanParams, Question,
    QuestionNotification, QuestionSource, QuestionStatus, Run, RunChanged, RunId, RunStatus, StartPlan, TicketId,
    TicketRef, TicketStatus, TranscriptNotification,
};
use tokio::sync::watch;

use super::ask::{self, Outcome};
use super::backend::{Key, Subscription};
use super::render::{self, Flow, RunStream};
use super::session::Session;
use super::{commands, invalid, Agent};
use crate::transport::ResponseError;

/// A prompt's text and embedded context.
#[derive(Debug, Default, PartialEq)]
pub struct Input {
    pub text: String,
    pub context: Vec<String>,
}

impl Input {
    pub fn from_blocks(blocks: &[ContentBlock]) -> Input {
        let mut input = Input::default();
        for block in blocks {
            match block {
                ContentBlock::Text(t) => {
                    if !input.text.is_empty() {
                        input.text.push('\n');
                    }
                    input.text.push_str(&t.text);
                }
                ContentBlock::Resource(r) => match &r.resource {
                    EmbeddedResourceResource::TextResourceContents(t) => input
                        .context
                        .push(format!("Context from {}:\n\n```\n{}\n```", t.uri, t.text)),
                    EmbeddedResourceResource::BlobResourceContents(b) => input
                        .context
                        .push(format!("(A binary attachment, {}, is not included.)", b.uri)),
                    _ => {}
                },
                ContentBlock::ResourceLink(l) => input.context.push(format!("See {} ({}).", l.name, l.uri)),
                _ => {}
            }
        }
        input
    }

    /// A ticket's title (the first non-empty line) and description (the rest and the context).
    pub fn ticket(&self) -> (String, String) {
        let text = self.text.trim();
        let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
        let mut title = first.trim().trim_start_matches('#').trim().to_owned();
        if title.chars().count() > 120 {
            title = title.chars().take(119).collect::<String>() + "…";
        }
        let mut parts: Vec<String> = Vec::new();
        if !rest.trim().is_empty() {
            parts.push(rest.trim().to_owned());
        }
        parts.extend(self.context.iter().cloned());
        (title, parts.join("\n\n"))
    }

    /// The whole prompt as one text (feedback, an answer).
    pub fn full(&self) -> String {
        let mut parts = vec![self.text.trim().to_owned()];
        parts.extend(self.context.iter().cloned());
        parts.join("\n\n")
    }
}

pub async fn prompt(
    agent: &Arc<Agent>,
    session: &Arc<Session>,
    blocks: Vec<ContentBlock>,
) -> Result<StopReason, ResponseError> {
    let Ok(_turn) = session.turn.try_lock() else {
        return Err(ResponseError::new(
            ErrorCode::TicketBusy,
            "this session is already answering a prompt; cancel it first",
        ));
    };
    let cancel = session.cancelled();
    let input = Input::from_blocks(&blocks);
    if input.text.trim().is_empty() && input.context.is_empty() {
        return Err(invalid("the prompt is empty"));
    }
    if let Some((name, rest)) = commands::parse(&input.text) {
        return commands::run(agent, session, name, rest, cancel).await;
    }
    let state = session.state();
    let Some(ticket) = state.ticket else {
        return first_prompt(agent, session, &input, cancel).await;
    };
    let sub = agent.backend.subscribe(&[Key::Ticket(ticket)]);
    if let Some((question, items)) = state.text_question {
        session.with_state(|s| s.text_question = None);
        let params = AnswerParams {
            ticket_id: ticket,
            question_id: question,
            answers: ask::text_answers(items, &input.full()),
            dismiss: false,
        };
        match agent.backend.call::<AnswerQuestion>(params).await {
            Ok(r) => return follow(agent, session, ticket, r.run_id, sub, cancel).await,
            // Answered elsewhere meanwhile: the prompt is feedback instead.
            Err(e) if e.code == ErrorCode::Conflict.code() || e.code == ErrorCode::NotFound.code() => {}
            Err(e) => return Err(e),
        }
    }
    let params = PlanParams {
        ticket_id: Some(ticket),
        tool: Some(state.tool),
        model: state.model,
        feedback: Some(input.full()),
        ..PlanParams::default()
    };
    let run = agent.backend.call::<StartPlan>(params).await?.run_id;
    follow(agent, session, ticket, run, sub, cancel).await
}

/// Starts a run of the session's ticket (`/replan`, `/fresh`) and follows it.
pub async fn replan(
    agent: &Arc<Agent>,
    session: &Arc<Session>,
    ticket: TicketId,
    fresh: bool,
    cancel: watch::Receiver<u64>,
) -> Result<StopReason, ResponseError> {
    let state = session.state();
    let sub = agent.backend.subscribe(&[Key::Ticket(ticket)]);
    let params = PlanParams {
        ticket_id: Some(ticket),
        tool: Some(state.tool),
        model: state.model,
        fresh,
        ..PlanParams::default()
    };
    let run = agent.backend.call::<StartPlan>(params).await?.run_id;
    follow(agent, session, ticket, run, sub, cancel).await
}

async fn first_prompt(
    agent: &Arc<Agent>,
    session: &Arc<Session>,
    input: &Input,
    cancel: watch::Receiver<u64>,
) -> Result<StopReason, ResponseError> {
    let (title, description) = input.ticket();
    let state = session.state();
    let ticket = agent
        .backend
        .call::<CreateTicket>(CreateTicketParams {
            root: session.cwd.clone(),
            title,
            description,
            tool: Some(state.tool.clone()),
            model: state.model.clone(),
            variant: None,
            branch: None,
        })
        .await?;
    session.with_state(|s| s.ticket = Some(ticket.id));
    let info = SessionInfoUpdate::new()
        .title(ticket.title.clone())
        .updated_at(ticket.updated_at.clone());
    agent
        .update(&session.acp_id(), vec![SessionUpdate::SessionInfoUpdate(info)])
        .await;
    let sub = agent.backend.subscribe(&[Key::Ticket(ticket.id)]);
    let params = PlanParams {
        ticket_id: Some(ticket.id),
        ..PlanParams::default()
    };
    match agent.backend.call::<StartPlan>(params).await {
        Ok(r) => follow(agent, session, ticket.id, r.run_id, sub, cancel).await,
        Err(e) => {
            // Nothing was planned (the planner is missing): leave no stray draft behind.
            let id = ticket.id;
            let still_draft = agent
                .backend
                .call::<GetTicket>(TicketRef { ticket_id: id })
                .await
                .is_ok_and(|t| t.ticket.status == TicketStatus::Draft && t.runs.is_empty());
            if still_draft {
                let _ = agent.backend.call::<DeleteTicket>(TicketRef { ticket_id: id }).await;
                session.with_state(|s| s.ticket = None);
            }
            Err(e)
        }
    }
}

/// How following one run ended.
pub(super) enum Ended {
    /// The run is recorded as ended (its last events were sent).
    Run {
        run: Box<Run>,
        plan_question: Option<Question>,
    },
    /// It waits on a live question shown as text: the turn ends, the run goes on.
    Waiting,
}

/// Follows the ticket's runs from `run` until the turn is over.
async fn follow(
    agent: &Arc<Agent>,
    session: &Arc<Session>,
    ticket: TicketId,
    mut run: RunId,
    mut sub: Subscription,
    mut cancel: watch::Receiver<u64>,
) -> Result<StopReason, ResponseError> {
    let sid = session.acp_id();
    loop {
        let (run_end, plan_question) =
            match stream_run(agent, session, Some(ticket), run, &mut sub, &mut cancel).await? {
                Ended::Waiting => return Ok(StopReason::EndTurn),
                Ended::Run { run, plan_question } => (run, plan_question),
            };
        if run_end.status == RunStatus::Cancelled {
            render_end(agent, &sid, ticket, run).await;
            return Ok(StopReason::Cancelled);
        }
        if run_end.failure.as_ref().is_some_and(|f| f.code == "session_not_found") {
            // planwire starts the ticket afresh by itself: follow that run.
            if let Some(next) = agent.backend.next_run(&mut sub, ticket, run).await {
                run = next;
                continue;
            }
        }
        render_end(agent, &sid, ticket, run).await;
        let question = match plan_question {
            Some(q) => Some(q),
            None => open_plan_question(agent, ticket, run).await,
        };
        let Some(question) = question else {
            return Ok(StopReason::EndTurn);
        };
        match ask::ask(agent, &sid, &question).await {
            Outcome::Answers(answers) => {
                let params = AnswerParams {
                    ticket_id: ticket,
                    question_id: question.id,
                    answers,
                    dismiss: false,
                };
                run = agent.backend.call::<AnswerQuestion>(params).await?.run_id;
            }
            Outcome::Dismiss => {
                let params = AnswerParams {
                    ticket_id: ticket,
                    question_id: question.id,
                    answers: Vec::new(),
                    dismiss: true,
                };
                agent.backend.call::<AnswerQuestion>(params).await?;
                return Ok(StopReason::EndTurn);
            }
            Outcome::AsText => {
                session.with_state(|s| s.text_question = Some((question.id, question.items.len())));
                return Ok(StopReason::EndTurn);
            }
        }
    }
}

/// Streams one run's transcript to the client until the run has ended: live questions are
/// asked, a cancel stops the run (`ticket` or the run itself when it has none).
pub(super) async fn stream_run(
    agent: &Arc<Agent>,
    session: &Session,
    ticket: Option<TicketId>,
    run: RunId,
    sub: &mut Subscription,
    cancel: &mut watch::Receiver<u64>,
) -> Result<Ended, ResponseError> {
    sub.add(Key::Run(run));
    let sid = session.acp_id();
    let seen = session.state().seen.get(&run).copied().unwrap_or(0);
    let mut stream = RunStream::new(run, seen);
    let mut plan_question: Option<Question> = None;
    let mut stopping = false;
    catch_up(agent, &sid, &mut stream).await;
    let mut ended = agent
        .backend
        .call::<GetRun>(GetRunParams { run_id: run })
        .await
        .ok()
        .map(|r| r.run)
        .filter(|r| !r.status.is_active());
    // Live questions asked in this turn (one may be both open already and notified).
    let mut asked = std::collections::HashSet::new();
    if ended.is_none() {
        // A live question asked before this turn subscribed.
        if ask_waiting(agent, session, ticket, run, cancel, &mut asked).await? {
            remember(session, &stream);
            return Ok(Ended::Waiting);
        }
    }
    while ended.is_none() {
        tokio::select! {
            note = sub.recv() => {
                let Some(note) = note else {
                    return Err(ResponseError::new(ErrorCode::InternalError, "the planwire server stopped"));
                };
                if let Some(t) = note.params_of::<TranscriptNotification>() {
                    if t.run_id == run {
                        agent.update(&sid, stream.events(&t.events)).await;
                    }
                } else if let Some((agent_run, flow, offset, text)) = delta(&note, run) {
                    agent.update(&sid, stream.delta(agent_run, flow, offset, &text)).await;
                } else if let Some(q) = note.params_of::<QuestionNotification>() {
                    if q.run_id != run {
                        continue;
                    }
                    match q.question.source {
                        QuestionSource::Plan => plan_question = Some(q.question),
                        QuestionSource::Live if !stopping && asked.insert(q.question.id) => {
                            // Events up to the question first, so the client sees why it is asked.
                            catch_up(agent, &sid, &mut stream).await;
                            if live(agent, session, ticket, &q.question, cancel).await? {
                                remember(session, &stream);
                                return Ok(Ended::Waiting);
                            }
                        }
                        QuestionSource::Live => {}
                    }
                } else if let Some(r) = note.params_of::<RunChanged>() {
                    if r.run.id == run && !r.run.status.is_active() {
                        ended = Some(r.run);
                    }
                }
            }
            _ = cancel.changed(), if !stopping => {
                stopping = true;
                agent.backend.stop(ticket, run).await;
            }
        }
    }
    // What was committed before the end was recorded, and not yet sent.
    catch_up(agent, &sid, &mut stream).await;
    remember(session, &stream);
    let run = ended.expect("the loop ends with the run's end");
    Ok(Ended::Run {
        run: Box::new(run),
        plan_question,
    })
}

fn remember(session: &Session, stream: &RunStream) {
    let (run, seq) = (stream.run(), stream.last_seq);
    session.with_state(|s| {
        s.seen.insert(run, seq);
    });
}

/// Asks a live question; true when it was shown as text (the turn ends while the run waits).
async fn live(
    agent: &Arc<Agent>,
    session: &Session,
    ticket: Option<TicketId>,
    q: &Question,
    cancel: &mut watch::Receiver<u64>,
) -> Result<bool, ResponseError> {
    let Some(ticket) = ticket else { return Ok(false) };
    let sid = session.acp_id();
    let outcome = tokio::select! {
        o = ask::ask(agent, &sid, q) => o,
        // A cancel while the person is asked: the caller stops the run.
        _ = cancel.changed() => {
            agent.backend.stop(Some(ticket), q.run_id).await;
            return Ok(false);
        }
    };
    let (answers, dismiss) = match outcome {
        Outcome::Answers(a) => (a, false),
        Outcome::Dismiss => (Vec::new(), true),
        Outcome::AsText => {
            session.with_state(|s| s.text_question = Some((q.id, q.items.len())));
            return Ok(true);
        }
    };
    let params = AnswerParams {
        ticket_id: ticket,
        question_id: q.id,
        answers,
        dismiss,
    };
    if let Err(e) = agent.backend.call::<AnswerQuestion>(params).await {
        // Answered elsewhere, or the run ended meanwhile: its end says what happened.
        tracing::info!("question {}: {}", q.id, e.message);
    }
    Ok(false)
}

/// A live question of the run that is already open (asked before this turn followed it).
async fn ask_waiting(
    agent: &Arc<Agent>,
    session: &Session,
    ticket: Option<TicketId>,
    run: RunId,
    cancel: &mut watch::Receiver<u64>,
    asked: &mut std::collections::HashSet<planwire_protocol::QuestionId>,
) -> Result<bool, ResponseError> {
    let Some(t) = ticket else { return Ok(false) };
    let Ok(got) = agent.backend.call::<GetTicket>(TicketRef { ticket_id: t }).await else {
        return Ok(false);
    };
    let waiting = got
        .questions
        .into_iter()
        .find(|q| q.run_id == run && q.source == QuestionSource::Live && q.status == QuestionStatus::Open);
    match waiting {
        Some(q) if asked.insert(q.id) => live(agent, session, ticket, &q, cancel).await,
        _ => Ok(false),
    }
}

/// A `planwire/delta` of `run`: its agent, kind, offset and piece.
fn delta(note: &crate::cli::client::Note, run: RunId) -> Option<(Option<i64>, Flow, u64, String)> {
    let d = note.params_of::<DeltaNotification>()?;
    if d.run_id != run {
        return None;
    }
    let flow = match d.kind {
        DeltaKind::Text => Flow::Text,
        DeltaKind::Reasoning => Flow::Reasoning,
    };
    Some((d.agent_run_id, flow, d.offset, d.text))
}

/// Sends the run's stored events after what the client has.
pub(super) async fn catch_up(agent: &Agent, sid: &str, stream: &mut RunStream) {
    loop {
        let page = agent
            .backend
            .call::<GetTranscript>(GetTranscriptParams {
                run_id: stream.run(),
                after_seq: stream.last_seq,
                limit: None,
            })
            .await;
        let Ok(page) = page else { return };
        let before = stream.last_seq;
        let mut updates = stream.events(&page.events);
        // Blocks streaming now, as far as their deltas were sent.
        for b in &page.open_blocks {
            let flow = match b.kind {
                DeltaKind::Text => Flow::Text,
                DeltaKind::Reasoning => Flow::Reasoning,
            };
            updates.extend(stream.delta(b.agent_run_id, flow, 0, &b.text));
        }
        agent.update(sid, updates).await;
        if page.events.is_empty() || stream.last_seq >= page.last_seq || stream.last_seq == before {
            return;
        }
    }
}

/// A plan's open question of `run` that is still open.
async fn open_plan_question(agent: &Agent, ticket: TicketId, run: RunId) -> Option<Question> {
    let got = agent
        .backend
        .call::<GetTicket>(TicketRef { ticket_id: ticket })
        .await
        .ok()?;
    got.ticket
        .open_questions
        .into_iter()
        .find(|q| q.run_id == run && q.source == QuestionSource::Plan && q.status == QuestionStatus::Open)
}

/// The end of a run as the client sees it: its plan (markdown and `plan` entries), or why it
/// failed or stopped, and the ticket's new title and time.
pub(super) async fn render_end(agent: &Agent, sid: &str, ticket: TicketId, run: RunId) {
    let Ok(got) = agent.backend.call::<GetTicket>(TicketRef { ticket_id: ticket }).await else {
        return;
    };
    let mut updates: Vec<SessionUpdate> = got
        .messages
        .iter()
        .filter(|m| m.run_id == Some(run) && matches!(m.kind.as_str(), "plan" | "error" | "status"))
        .filter_map(render::message)
        .collect();
    let planned = got.messages.iter().any(|m| m.run_id == Some(run) && m.kind == "plan");
    if let (true, Some(plan)) = (planned, &got.ticket.plan) {
        updates.push(render::plan_update(plan));
    }
    let info = SessionInfoUpdate::new()
        .title(got.ticket.title.clone())
        .updated_at(got.ticket.updated_at.clone());
    updates.push(SessionUpdate::SessionInfoUpdate(info));
    agent.update(sid, updates).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::v1::{EmbeddedResource, TextContent, TextResourceContents};

    #[test]
    fn the_first_line_is_the_title_and_the_rest_with_context_the_description() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("# Change the greeting\nMake it friendlier.")),
            ContentBlock::Resource(EmbeddedResource::new(EmbeddedResourceResource::TextResourceContents(
                TextResourceContents::new("fn main() {}", "file:///repo/src/main.rs"),
            ))),
        ];
        let input = Input::from_blocks(&blocks);
        let (title, description) = input.ticket();
        assert_eq!(title, "Change the greeting");
        assert!(description.starts_with("Make it friendlier."), "{description}");
        assert!(
            description.contains("Context from file:///repo/src/main.rs"),
            "{description}"
        );
        assert!(description.contains("fn main() {}"), "{description}");
        let long = Input {
            text: "x".repeat(300),
            context: vec![],
        };
        assert_eq!(long.ticket().0.chars().count(), 120);
    }
}

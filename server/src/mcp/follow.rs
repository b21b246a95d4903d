//! A `plan` or `answer` call follows the ticket's runs until there is something to return:
//!
//! - every tool call, subagent and error of the run is a `notifications/progress` (when the
//!   request carried a progress token), and so is "waiting for your answer";
//! - a live question goes to the person with `elicitation/create` when the client declared
//!   it, and the answer goes back into the same run; without elicitation the call returns
//!   `needs_input` with the questions and their ids while the run waits, and `answer`
//!   continues it;
//! - a plan's open question is asked the same way when the run ends (an answer starts the
//!   next run, which is followed too);
//! - a cancel (`notifications/cancelled`, `tasks/cancel`) is `planwire/stop`, which returns
//!   once the planner's process group is gone;
//! - the end is the plan as markdown and as `structuredContent` (plan, version, questions).

use std::collections::HashSet;
use std::sync::Arc;

use planwire_protocol::{
    Answer, AnswerParams, AnswerQuestion, EventBody, Failure, GetRun, GetRunParams, GetTicket, ListPlans, Plan,
    Question, QuestionNotification, QuestionSource, QuestionStatus, ReadonlyViolation, Run, RunChanged, RunId,
    RunStatus, SubagentPhase, TicketId, TicketRef, TranscriptNotification,
};
use rmcp::model::{CallToolResult, ProgressNotificationParam, ProgressToken};
use schemars::JsonSchema;
use serde::Serialize;
use tokio::sync::watch;

use super::ask::{self, Asked};
use super::tasks::Handle;
use super::tools::{structured, AnswerArg, AnswerArgs};
use super::Mcp;
use crate::acp::backend::{Key, Subscription};
use crate::transport::ResponseError;

/// Longest progress message (characters).
const MESSAGE_MAX: usize = 160;

/// One tool call under way: its progress token, its cancel and its task.
pub(super) struct Call {
    mcp: Arc<Mcp>,
    progress: Option<ProgressToken>,
    sent: u64,
    cancel: watch::Receiver<bool>,
    task: Option<Handle>,
}

impl Call {
    pub fn new(
        mcp: &Arc<Mcp>,
        progress: Option<ProgressToken>,
        cancel: watch::Receiver<bool>,
        task: Option<Handle>,
    ) -> Call {
        Call {
            mcp: mcp.clone(),
            progress,
            sent: 0,
            cancel,
            task,
        }
    }

    /// A `notifications/progress` with this message (when the request asked for progress).
    pub async fn say(&mut self, message: &str) {
        let Some(token) = &self.progress else { return };
        self.sent += 1;
        let mut text: String = message.chars().take(MESSAGE_MAX).collect();
        if message.chars().count() > MESSAGE_MAX {
            text.push('…');
        }
        let note = ProgressNotificationParam::new(token.clone(), self.sent as f64).with_message(text);
        self.mcp.notify("notifications/progress", note).await;
    }

    fn cancelled(&self) -> bool {
        *self.cancel.borrow()
    }
}

/// Resolves once the call is cancelled (never, when nothing can cancel it any more).
async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum Status {
    /// The plan is ready (`plan`, `version`).
    Planned,
    /// The planner asks: put `questions` to the person, then call `answer`.
    NeedsInput,
    /// The run failed (`failure` says why).
    Failed,
    /// The run was stopped.
    Stopped,
}

/// What `plan` and `answer` return (`structuredContent`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Outcome {
    pub status: Status,
    pub ticket_id: TicketId,
    pub run_id: RunId,
    /// The plan version this run made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// The questions waiting for the person: answer each with `answer {ticketId,
    /// questionId, answers}` (one answer per item).
    pub questions: Vec<Question>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Files the run changed although planning is read-only (found by planwire's work-tree
    /// check; never expected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readonly_violation: Option<ReadonlyViolation>,
    #[serde(skip)]
    markdown: Option<String>,
}

impl Outcome {
    pub fn result(self) -> Result<CallToolResult, ResponseError> {
        let mut text = String::new();
        match self.status {
            Status::Planned => {}
            Status::NeedsInput => text.push_str(&format!(
                "Planning ticket {} needs the person's answer. Ask them, then call answer with \
                 ticketId {} and the questionId below (one answer per item).\n",
                self.ticket_id, self.ticket_id
            )),
            Status::Failed => text.push_str(&format!(
                "Planning ticket {} failed: {}\n",
                self.ticket_id,
                self.failure.as_ref().map_or("no plan", |f| f.message.as_str())
            )),
            Status::Stopped => text.push_str(&format!("Planning ticket {} was stopped.\n", self.ticket_id)),
        }
        for q in &self.questions {
            text.push_str(&question_text(q));
        }
        if let Some(markdown) = &self.markdown {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(markdown);
        }
        let failed = self.status == Status::Failed;
        let mut result = structured(text, &self)?;
        if failed {
            result.is_error = Some(true);
        }
        Ok(result)
    }
}

/// A question as text, with its id and each item's options.
pub(super) fn question_text(q: &Question) -> String {
    let mut text = format!("\nQuestion {} ({} item(s)):\n", q.id, q.items.len());
    for (i, item) in q.items.iter().enumerate() {
        text.push_str(&format!("{}. {}: {}\n", i + 1, item.header, item.question));
        for o in &item.options {
            match &o.description {
                Some(d) => text.push_str(&format!("   - {} — {d}\n", o.label)),
                None => text.push_str(&format!("   - {}\n", o.label)),
            }
        }
        if item.multi_select {
            text.push_str("   (several may be chosen)\n");
        }
    }
    text
}

enum Streamed {
    /// A live question the person must answer through `answer`; the run waits.
    Waiting(Question),
    Ended(Box<Run>, Option<Question>),
}

/// Follows the ticket's runs from `run` until the plan, a question to return, or the end.
pub(super) async fn follow(
    mcp: &Arc<Mcp>,
    call: &mut Call,
    ticket: TicketId,
    mut run: RunId,
    mut sub: Subscription,
) -> Result<Outcome, ResponseError> {
    loop {
        let (ended, plan_question) = match stream(mcp, call, Some(ticket), run, &mut sub).await? {
            Streamed::Waiting(q) => return waiting(mcp, ticket, q).await,
            Streamed::Ended(run, q) => (run, q),
        };
        if ended.failure.as_ref().is_some_and(|f| f.code == "session_not_found") {
            // planwire starts the ticket afresh by itself: follow that run.
            if let Some(next) = mcp.backend.next_run(&mut sub, ticket, run).await {
                run = next;
                continue;
            }
        }
        let question = match plan_question {
            Some(q) => Some(q),
            None => open_question(mcp, ticket, run, QuestionSource::Plan).await,
        };
        if let (Some(q), true) = (question, mcp.elicits() && !call.cancelled()) {
            call.say("Waiting for your answer").await;
            let asked = with_input(call, ask::ask(mcp, call.task.as_ref(), &q)).await;
            match asked {
                Some(Asked::Answers(answers)) => {
                    run = send_answer(mcp, ticket, q.id, answers, false).await?;
                    call.say("Planning with your answer").await;
                    continue;
                }
                Some(Asked::Dismiss) => {
                    send_answer(mcp, ticket, q.id, Vec::new(), true).await?;
                }
                None => {}
            }
        }
        return outcome(mcp, ticket, &ended).await;
    }
}

/// `answer`: the question, the answers as the planner takes them, then [`follow`].
pub(super) async fn answer(mcp: &Arc<Mcp>, call: &mut Call, a: AnswerArgs) -> Result<Outcome, ResponseError> {
    let got = mcp
        .backend
        .call::<GetTicket>(TicketRef { ticket_id: a.ticket_id })
        .await?;
    let q = match a.question_id {
        Some(id) => got
            .questions
            .into_iter()
            .find(|q| q.id == id)
            .ok_or_else(|| super::invalid(format!("ticket {} has no question {id}", a.ticket_id)))?,
        None => got
            .ticket
            .open_questions
            .into_iter()
            .next()
            .ok_or_else(|| super::invalid(format!("ticket {} has no open question", a.ticket_id)))?,
    };
    let answers = if a.dismiss { Vec::new() } else { answers(&q, a.answers)? };
    let sub = mcp.backend.subscribe(&[Key::Ticket(a.ticket_id)]);
    let run = send_answer(mcp, a.ticket_id, q.id, answers, a.dismiss).await?;
    call.say(&format!("Planning ticket {} with your answer", a.ticket_id))
        .await;
    follow(mcp, call, a.ticket_id, run, sub).await
}

/// The `answer` tool's answers as one per item: a text is an option's label (any case) or
/// the person's own words; a single text for several items answers the first.
fn answers(q: &Question, given: Vec<AnswerArg>) -> Result<Vec<Answer>, ResponseError> {
    let n = q.items.len();
    if given.is_empty() || (given.len() != n && given.len() != 1) {
        return Err(super::invalid(format!(
            "field `answers`: question {} has {n} item(s); give one answer per item (got {})",
            q.id,
            given.len()
        )));
    }
    let single = given.len() == 1 && n > 1;
    let mut out: Vec<Answer> = given
        .into_iter()
        .zip(&q.items)
        .map(|(a, item)| match a {
            AnswerArg::Text(text) => {
                let text = text.trim().to_owned();
                match item.options.iter().find(|o| o.label.eq_ignore_ascii_case(&text)) {
                    Some(o) => Answer {
                        selected: vec![o.label.clone()],
                        other: None,
                    },
                    None => Answer {
                        selected: Vec::new(),
                        other: Some(text),
                    },
                }
            }
            AnswerArg::Choice { selected, other } => Answer { selected, other },
        })
        .collect();
    for long in out.iter().filter_map(|a| a.other.as_ref()) {
        if long.chars().count() > 100_000 {
            return Err(super::invalid("field `answers`: an answer is over 100000 characters"));
        }
    }
    if single {
        out.extend((1..n).map(|_| Answer {
            selected: Vec::new(),
            other: Some("See my answer to the first question.".to_owned()),
        }));
    }
    Ok(out)
}

async fn send_answer(
    mcp: &Mcp,
    ticket: TicketId,
    question: i64,
    answers: Vec<Answer>,
    dismiss: bool,
) -> Result<RunId, ResponseError> {
    let params = AnswerParams {
        ticket_id: ticket,
        question_id: question,
        answers,
        dismiss,
    };
    Ok(mcp.backend.call::<AnswerQuestion>(params).await?.run_id)
}

/// The task (if any) waits for input while `ask` runs.
async fn with_input<T>(call: &Call, ask: impl std::future::Future<Output = T>) -> T {
    if let Some(t) = &call.task {
        t.input_required(true).await;
    }
    let out = ask.await;
    if let Some(t) = &call.task {
        t.input_required(false).await;
    }
    out
}

/// Follows one run (a breakdown's too: `ticket` is `None`) until it has ended.
pub(super) async fn run_end(
    mcp: &Arc<Mcp>,
    call: &mut Call,
    ticket: Option<TicketId>,
    run: RunId,
    sub: &mut Subscription,
) -> Result<Run, ResponseError> {
    match stream(mcp, call, ticket, run, sub).await? {
        Streamed::Ended(run, _) => Ok(*run),
        Streamed::Waiting(_) => unreachable!("a run without a ticket asks nothing"),
    }
}

/// Streams one run as progress until it has ended or waits on a question for `answer`.
async fn stream(
    mcp: &Arc<Mcp>,
    call: &mut Call,
    ticket: Option<TicketId>,
    run: RunId,
    sub: &mut Subscription,
) -> Result<Streamed, ResponseError> {
    sub.add(Key::Run(run));
    let got = mcp.backend.call::<GetRun>(GetRunParams { run_id: run }).await?;
    if !got.run.status.is_active() {
        return Ok(Streamed::Ended(Box::new(got.run), None));
    }
    let mut cancel = call.cancel.clone();
    let mut asked = HashSet::new();
    let mut plan_question = None;
    let mut stopping = false;
    if let Some(ticket) = ticket {
        // A live question asked before this call subscribed.
        if let Some(q) = open_question(mcp, ticket, run, QuestionSource::Live).await {
            asked.insert(q.id);
            if !live(mcp, call, ticket, &q).await? {
                return Ok(Streamed::Waiting(q));
            }
        }
    }
    loop {
        tokio::select! {
            note = sub.recv() => {
                let Some(note) = note else {
                    return Err(ResponseError::new(planwire_protocol::ErrorCode::InternalError, "the planwire server stopped"));
                };
                if let Some(t) = note.params_of::<TranscriptNotification>() {
                    if t.run_id == run {
                        for e in &t.events {
                            if let Some(message) = progress_of(&e.body) {
                                call.say(&message).await;
                            }
                        }
                    }
                } else if let Some(q) = note.params_of::<QuestionNotification>() {
                    if q.run_id != run {
                        continue;
                    }
                    match (q.question.source, ticket) {
                        (QuestionSource::Plan, _) => plan_question = Some(q.question),
                        (QuestionSource::Live, Some(ticket)) if !call.cancelled() && asked.insert(q.question.id) => {
                            let answered = live(mcp, call, ticket, &q.question).await?;
                            if !answered {
                                return Ok(Streamed::Waiting(q.question));
                            }
                        }
                        _ => {}
                    }
                } else if let Some(r) = note.params_of::<RunChanged>() {
                    if r.run.id == run && !r.run.status.is_active() {
                        return Ok(Streamed::Ended(Box::new(r.run), plan_question));
                    }
                }
            }
            _ = cancelled(&mut cancel), if !stopping => {
                stopping = true;
                mcp.backend.stop(ticket, run).await;
            }
        }
    }
}

/// A live question: asked through elicitation, answered into the same run. False when the
/// person must answer it through `answer` (no elicitation, or the client could not ask).
async fn live(mcp: &Arc<Mcp>, call: &mut Call, ticket: TicketId, q: &Question) -> Result<bool, ResponseError> {
    if !mcp.elicits() {
        return Ok(false);
    }
    call.say("Waiting for your answer").await;
    let mut cancel = call.cancel.clone();
    let asked = tokio::select! {
        a = with_input(call, ask::ask(mcp, call.task.as_ref(), q)) => a,
        // A cancel while the person is asked: the run stops, and its end is followed.
        _ = cancelled(&mut cancel) => {
            mcp.backend.stop(Some(ticket), q.run_id).await;
            return Ok(true);
        }
    };
    let (answers, dismiss) = match asked {
        Some(Asked::Answers(a)) => (a, false),
        Some(Asked::Dismiss) => (Vec::new(), true),
        None => return Ok(false),
    };
    if let Err(e) = send_answer(mcp, ticket, q.id, answers, dismiss).await {
        // Answered elsewhere, or the run ended meanwhile: its end says what happened.
        tracing::info!("question {}: {}", q.id, e.message);
    }
    call.say(if dismiss {
        "Planning on its assumptions"
    } else {
        "Planning with your answer"
    })
    .await;
    Ok(true)
}

/// What a transcript event says as progress: the phase (the planner's session started, the
/// final answer is being written), tool calls, subagents, warnings and errors.
fn progress_of(body: &EventBody) -> Option<String> {
    match body {
        EventBody::Session { .. } => Some("The planner started".to_owned()),
        EventBody::Text { is_final: true, .. } => Some("The planner wrote its answer".to_owned()),
        EventBody::Warning { message } => Some(format!("Warning: {message}")),
        EventBody::ToolCall { name, input, .. } if input.is_empty() => Some(name.clone()),
        EventBody::ToolCall { name, input, .. } => Some(format!("{name}: {input}")),
        EventBody::Subagent {
            phase: SubagentPhase::Start,
            label,
            ..
        } => Some(label.clone()),
        EventBody::Error { message, .. } => Some(format!("Error: {message}")),
        _ => None,
    }
}

/// The ticket's open question of `source` asked in `run`, if any.
async fn open_question(mcp: &Mcp, ticket: TicketId, run: RunId, source: QuestionSource) -> Option<Question> {
    let got = mcp
        .backend
        .call::<GetTicket>(TicketRef { ticket_id: ticket })
        .await
        .ok()?;
    got.ticket
        .open_questions
        .into_iter()
        .find(|q| q.run_id == run && q.source == source && q.status == QuestionStatus::Open)
}

/// `needs_input` while a live question waits.
async fn waiting(mcp: &Mcp, ticket: TicketId, q: Question) -> Result<Outcome, ResponseError> {
    let got = mcp.backend.call::<GetTicket>(TicketRef { ticket_id: ticket }).await?;
    let first = q.id;
    let mut questions = vec![q];
    questions.extend(got.ticket.open_questions.into_iter().filter(|o| o.id != first));
    Ok(Outcome {
        status: Status::NeedsInput,
        ticket_id: ticket,
        run_id: questions[0].run_id,
        version: None,
        plan: None,
        questions,
        failure: None,
        readonly_violation: None,
        markdown: None,
    })
}

/// The end of a run as a tool result.
async fn outcome(mcp: &Mcp, ticket: TicketId, run: &Run) -> Result<Outcome, ResponseError> {
    let got = mcp.backend.call::<GetTicket>(TicketRef { ticket_id: ticket }).await?;
    let made = mcp
        .backend
        .call::<ListPlans>(TicketRef { ticket_id: ticket })
        .await?
        .plans
        .into_iter()
        .rev()
        .find(|v| v.run_id == Some(run.id));
    let questions = got.ticket.open_questions;
    let status = match run.status {
        RunStatus::Cancelled | RunStatus::Interrupted => Status::Stopped,
        RunStatus::Failed => Status::Failed,
        _ if !questions.is_empty() => Status::NeedsInput,
        _ if made.is_some() => Status::Planned,
        _ => Status::Failed,
    };
    Ok(Outcome {
        status,
        ticket_id: ticket,
        run_id: run.id,
        version: made.as_ref().map(|v| v.version),
        plan: made.as_ref().map(|v| v.plan.clone()),
        questions,
        failure: run.failure.clone(),
        readonly_violation: run.readonly_violation.clone(),
        markdown: made.map(|v| v.markdown),
    })
}

//! One run, from start to its recorded end: the flow of DESIGN.md in one place.
//!
//! planner stdout line → adapter parser → numbered event → batch → store (one transaction)
//! → `planwire/transcript` notification. An event gets its seq once, where it is born, and
//! is sent only after the transaction that stores it has committed, so whatever a client
//! has seen is on disk. The run ends in exactly one recorded way: completed, failed (with a
//! code), or cancelled; a sidecar that dies leaves it to the next one to mark interrupted.
//!
//! A run is one or more *passes*, each one planner process (`pass.rs`): a plan is one pass,
//! or research passes in linked projects and then the plan (`research.rs`); a breakdown is
//! an outline and an expansion pass in one provider session (`breakdown.rs`). All passes of
//! a run share its transcript: one seq, no gaps, each pass its own agent run.

mod breakdown;
mod live;
mod outcome;
mod pass;
mod research;

pub(crate) use breakdown::start_breakdown;
pub(crate) use live::answer_pairs;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use planwire_protocol::{
    AgentRunId, ErrorCode, EventBody, Failure, QuestionId, QuestionParams, RunChangedParams, RunId, SubagentPhase,
    Ticket, TicketChangedParams, TicketId, TranscriptEvent, TranscriptParams,
};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot};

use crate::planners::claude::ControlRequest;
use crate::planners::{self, script, LineParser, ParsedEvent, Tool};
use crate::progress::Progress;
use crate::session::{LiveAnswer, RunHandle, Session};
use crate::store::{links, runs, tickets, transcript, StoreError};
use crate::supervisor::{self, OutputLine};
use crate::transport::ResponseError;
use crate::util::now;
use outcome::{decide, record_end, Facts, How};
use pass::PassSpec;

/// Flush the batch at least this often…
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// …or once its oldest event is this old (a quiet stream is not held for a whole tick)…
const FLUSH_AGE: Duration = Duration::from_millis(20);
/// …or once it holds this many events.
const FLUSH_AT: usize = 256;

pub struct RunSpec {
    pub tool: Tool,
    pub model: Option<String>,
    pub variant: Option<String>,
    pub prompt: String,
    pub resume: Option<String>,
    pub retry_of: Option<RunId>,
    pub fresh_reason: Option<String>,
    /// For a resumed run: the prompt of a fresh start, used when the CLI does not know the
    /// session any more (the fresh run records why).
    pub fresh_prompt: Option<String>,
    /// Set by `planwire/plan`: a new plan supersedes unanswered questions (an answer does not).
    pub supersede_questions: bool,
}

pub fn store_error(e: StoreError) -> ResponseError {
    match e {
        StoreError::NotFound(what) => ResponseError::new(ErrorCode::NotFound, format!("{what} does not exist")),
        StoreError::Busy(t) => ResponseError::new(
            ErrorCode::TicketBusy,
            format!("ticket {t} is already being planned; stop it first"),
        ),
        StoreError::Conflict(m) => ResponseError::new(ErrorCode::Conflict, m),
        other => ResponseError::new(ErrorCode::InternalError, other.to_string()),
    }
}

fn unavailable(message: String) -> ResponseError {
    ResponseError::new(ErrorCode::PlannerUnavailable, message)
}

fn check_root(root: &str) -> Result<(), ResponseError> {
    if std::path::Path::new(root).is_dir() {
        return Ok(());
    }
    let m = format!("the project root {root} is not an existing directory");
    Err(ResponseError::new(ErrorCode::ProjectUnavailable, m))
}

/// The planner's binary, or a "planner unavailable" error that says what to install.
pub fn planner_program(s: &Session, tool: Tool, model: Option<&str>) -> Result<PathBuf, ResponseError> {
    let program = planners::locate(tool, &s.config)
        .ok_or_else(|| unavailable(format!("{} was not found: {}", tool.name(), tool.install_hint())))?;
    if tool == Tool::Script {
        script::check(model.unwrap_or("demo")).map_err(unavailable)?;
    }
    Ok(program)
}

/// Creates a run for the ticket and starts its planner. Resolves once the first process
/// runs. (Boxed: a run that finds its session unknown starts a fresh one from its driver.)
pub fn start<'a>(
    s: &'a Arc<Session>,
    ticket: &'a Ticket,
    spec: RunSpec,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<RunId, ResponseError>> + Send + 'a>> {
    Box::pin(start_plan(s, ticket, spec))
}

async fn start_plan(s: &Arc<Session>, ticket: &Ticket, spec: RunSpec) -> Result<RunId, ResponseError> {
    check_root(&ticket.root)?;
    let tool = spec.tool;
    let program = planner_program(s, tool, spec.model.as_deref())?;
    let new = runs::NewRun {
        ticket_id: ticket.id,
        tool: tool.name().into(),
        model: spec.model.clone(),
        variant: spec.variant.clone(),
        retry_of: spec.retry_of,
        resume_of: spec.resume.clone(),
        fresh_reason: spec.fresh_reason.clone(),
        supersede_questions: spec.supersede_questions,
    };
    let owner = s.owner;
    let (run_id, leftovers) = s
        .store
        .write(move |c| runs::create(c, &new, owner))
        .await
        .map_err(store_error)?;
    for l in leftovers {
        if let (Some(pgid), Some(start)) = (l.pgid, l.child_start) {
            supervisor::kill_leftover_group(pgid, start);
        }
    }
    let root = ticket.root.clone();
    let links = s
        .store
        .read(move |c| links::list(c, &root))
        .await
        .map_err(store_error)?;
    let mut d = Driver::new(s, run_id, Some(ticket.id), &ticket.root, &ticket.title, &spec, program);
    if let (Some(session), Tool::Codex) = (&spec.resume, tool) {
        d.usage_baseline = usage_before(s, ticket.id, session).await;
    }
    if let (Some(session), Some(prompt)) = (&spec.resume, &spec.fresh_prompt) {
        let fresh = RunSpec {
            tool,
            model: spec.model.clone(),
            variant: spec.variant.clone(),
            prompt: prompt.clone(),
            resume: None,
            retry_of: spec.retry_of,
            fresh_reason: Some(format!("{} no longer knows session {session}", tool.name())),
            fresh_prompt: None,
            supersede_questions: false,
        };
        d.fallback = Some((ticket.clone(), fresh));
    }
    let task = format!("Title: {}\n\n{}", ticket.title, ticket.description);
    // With linked projects the first pass chooses what to research; else it is the plan.
    let first = if links.is_empty() {
        PassSpec::main(&ticket.root, &spec.prompt, spec.resume.as_deref())
    } else {
        PassSpec::selection(&ticket.root, &task, &links)
    };
    let (child, ctl) = d.begin(first).await?;
    let job = research::PlanJob {
        prompt: spec.prompt,
        resume: spec.resume,
        links,
    };
    tokio::spawn(d.run_plan(child, ctl, job));
    Ok(run_id)
}

fn cached_version(s: &Session, tool: Tool) -> Option<String> {
    let planners = s.planners.lock().expect("planners");
    planners
        .iter()
        .find(|p| p.tool == tool.name())
        .and_then(|p| p.version.clone())
}

/// The channels a run is driven by, and the stop requests to answer once it is recorded.
pub(crate) struct Control {
    stop_rx: mpsc::Receiver<oneshot::Sender<()>>,
    answer_rx: mpsc::Receiver<LiveAnswer>,
    waiters: Vec<oneshot::Sender<()>>,
}

pub(crate) struct Driver {
    s: Arc<Session>,
    run_id: RunId,
    ticket_id: Option<TicketId>,
    root: String,
    title: String,
    tool: Tool,
    model: Option<String>,
    variant: Option<String>,
    program: PathBuf,
    // The run's transcript.
    pending: Vec<TranscriptEvent>,
    next_seq: u64,
    agents: HashMap<String, AgentRunId>,
    /// The agent key of the current pass, when it is one of several.
    pass_agent: Option<(String, String)>,
    passes: u32,
    started: Instant,
    first_output_ms: Option<i64>,
    first_final_ms: Option<i64>,
    progress: Progress,
    // The current pass.
    parser: Box<dyn LineParser>,
    /// Claude's stream-json input, open until its final `result` line.
    stdin: Option<ChildStdin>,
    /// Live questions the CLI is waiting on, by question id.
    live: HashMap<QuestionId, ControlRequest>,
    /// A plan the agent offered through ExitPlanMode (which planwire always denies).
    plan_candidate: Option<String>,
    /// Session ids of this pass become the ticket's session (not those of research passes).
    sets_session: bool,
    /// Codex reports usage cumulative per thread: a resumed run subtracts what the thread had.
    usage_baseline: Option<[u64; 4]>,
    /// A fresh start to fall back on when a resumed session turns out to be unknown.
    fallback: Option<(Ticket, RunSpec)>,
    /// The store could not take a batch: the run ends there, failed with this.
    storage_failure: Option<Failure>,
}

impl Driver {
    fn new(
        s: &Arc<Session>,
        run_id: RunId,
        ticket_id: Option<TicketId>,
        root: &str,
        title: &str,
        spec: &RunSpec,
        program: PathBuf,
    ) -> Driver {
        let progress = Progress::begin(s, run_id, &format!("Planning: {title}"));
        Driver {
            s: s.clone(),
            run_id,
            ticket_id,
            root: root.to_owned(),
            title: title.to_owned(),
            tool: spec.tool,
            model: spec.model.clone(),
            variant: spec.variant.clone(),
            program,
            pending: Vec::new(),
            next_seq: 1,
            agents: HashMap::new(),
            pass_agent: None,
            passes: 0,
            started: Instant::now(),
            first_output_ms: None,
            first_final_ms: None,
            progress,
            parser: spec.tool.parser(),
            stdin: None,
            live: HashMap::new(),
            plan_candidate: None,
            sets_session: true,
            usage_baseline: None,
            fallback: None,
            storage_failure: None,
        }
    }

    /// Starts the first pass and registers the run; a spawn failure is recorded and returned.
    async fn begin(&mut self, first: PassSpec<'_>) -> Result<(supervisor::Supervised, Control), ResponseError> {
        let child = match self.spawn_pass(first).await {
            Ok(c) => c,
            Err(message) => {
                self.finish_failed_start(&message).await;
                return Err(unavailable(message));
            }
        };
        let (stop_tx, stop_rx) = mpsc::channel(8);
        let (answer_tx, answer_rx) = mpsc::channel(8);
        let handle = RunHandle {
            ticket_id: self.ticket_id,
            stop: stop_tx,
            answers: answer_tx,
        };
        self.s.register(self.run_id, handle);
        notify_changed(&self.s, self.ticket_id, self.run_id).await;
        Ok((
            child,
            Control {
                stop_rx,
                answer_rx,
                waiters: Vec::new(),
            },
        ))
    }

    fn elapsed_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    async fn on_line(&mut self, line: OutputLine) {
        self.first_output_ms
            .get_or_insert(self.started.elapsed().as_millis() as i64);
        match line {
            OutputLine::Line(text) => {
                for ev in self.parser.parse_line(&text) {
                    self.push(ev).await;
                }
                for request in self.parser.take_control_requests() {
                    self.on_control_request(request).await;
                }
                if self.parser.saw_result() && self.stdin.is_some() {
                    // Claude's stream-json input ends after the final result: close it so it exits.
                    self.stdin = None;
                }
            }
            OutputLine::Truncated { head, len } => {
                let line = format!("{}… [truncated: the line was {len} bytes]", truncate(&head, 64 * 1024));
                self.push(ParsedEvent::main(EventBody::Raw { line })).await;
            }
        }
    }

    async fn push(&mut self, ev: ParsedEvent) {
        // Events of a pass that is one of several belong to the pass's agent run.
        let key = ev
            .agent
            .clone()
            .or_else(|| self.pass_agent.as_ref().map(|(k, _)| k.clone()));
        let agent_run_id = match &key {
            Some(key) => Some(self.agent_run(key, &ev.body).await),
            None => None,
        };
        match &ev.body {
            EventBody::Session { provider_session_id } if self.sets_session => {
                self.remember_session(provider_session_id).await
            }
            EventBody::Text { is_final: true, .. } if self.first_final_ms.is_none() => {
                self.first_final_ms = Some(self.elapsed_ms());
            }
            EventBody::ToolCall { name, input, .. } => self.progress.report(format!("{name} {input}")),
            EventBody::Subagent {
                phase: SubagentPhase::End,
                status,
                ..
            } => {
                if let Some(id) = agent_run_id {
                    let status = status.clone().unwrap_or_else(|| "completed".into());
                    let _ = self
                        .s
                        .store
                        .write(move |c| transcript::end_agent_run(c, id, &status))
                        .await;
                }
            }
            _ => {}
        }
        let mut body = ev.body;
        if let (
            EventBody::Usage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                ..
            },
            Some(b),
        ) = (&mut body, self.usage_baseline)
        {
            *input_tokens = input_tokens.saturating_sub(b[0]);
            *output_tokens = output_tokens.saturating_sub(b[1]);
            *cache_read_tokens = cache_read_tokens.saturating_sub(b[2]);
            *cache_write_tokens = cache_write_tokens.saturating_sub(b[3]);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.push(TranscriptEvent {
            seq,
            ts: now(),
            agent_run_id,
            body,
        });
    }

    async fn agent_run(&mut self, key: &str, body: &EventBody) -> AgentRunId {
        if let Some(id) = self.agents.get(key) {
            return *id;
        }
        let label = match body {
            EventBody::Subagent { label, .. } => label.clone(),
            _ => key.to_owned(),
        };
        self.progress.report(label.clone());
        // A subagent started inside a pass is that pass's child.
        let parent = self
            .pass_agent
            .as_ref()
            .filter(|(k, _)| k != key)
            .and_then(|(k, _)| self.agents.get(k))
            .copied();
        let (run, k) = (self.run_id, key.to_owned());
        let started = self
            .s
            .store
            .write(move |c| transcript::start_agent_run(c, run, parent, Some(&k), &label))
            .await;
        let id = started.unwrap_or_else(|e| {
            self.storage_failed("an agent run", &e);
            0
        });
        self.agents.insert(key.to_owned(), id);
        id
    }

    async fn remember_session(&self, session_id: &str) {
        let (run, ticket, tool, id) = (self.run_id, self.ticket_id, self.tool.name(), session_id.to_owned());
        let result = self
            .s
            .store
            .write(move |c| {
                runs::set_session(c, run, &id)?;
                match ticket {
                    Some(ticket) => tickets::set_session(c, ticket, tool, &id),
                    None => Ok(()),
                }
            })
            .await;
        if let Err(e) = result {
            tracing::error!("run {run}: cannot record the provider session: {e}");
        }
    }

    /// Commits the pending events, then notifies them (with the very JSON that was stored).
    /// A batch the store cannot take is never skipped: the store has already retried what
    /// can be retried (a lock), so the run ends here ([`Driver::storage_failure`]), and
    /// nothing after it is stored or notified. Seqs stay contiguous in both.
    async fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.pending);
        if self.storage_failure.is_some() {
            return;
        }
        let (run, count) = (self.run_id, events.len());
        match self.s.store.write(move |c| transcript::append(c, run, &events)).await {
            Ok(payloads) => {
                // The frame is assembled from the stored JSON: no parse, no second serialization.
                let ticket = self.ticket_id.map_or_else(|| "null".to_owned(), |t| t.to_string());
                let size = payloads.iter().map(|p| p.len() + 1).sum::<usize>() + 128;
                let mut frame = String::with_capacity(size);
                frame.push_str(r#"{"jsonrpc":"2.0","method":"planwire/transcript","params":{"ticketId":"#);
                frame.push_str(&ticket);
                frame.push_str(&format!(r#","runId":{run},"events":["#));
                for (i, p) in payloads.iter().enumerate() {
                    if i > 0 {
                        frame.push(',');
                    }
                    frame.push_str(p);
                }
                frame.push_str("]}}");
                self.s.outbox.send_bytes(frame.into_bytes()).await;
            }
            Err(e) => self.storage_failed(&format!("{count} events"), &e),
        }
    }

    /// Records that the store could not take part of the run: the run ends failed with it.
    fn storage_failed(&mut self, what: &str, e: &StoreError) {
        tracing::error!("run {}: cannot store {what}: {e}; the run ends here", self.run_id);
        self.storage_failure.get_or_insert_with(|| outcome::storage_failure(e));
    }

    /// Ends a plan run: decides how it ended, records it with its ticket, and notifies.
    async fn finish_plan(mut self, how: How, stderr_tail: &str, ctl: Control) {
        let run = self.run_id;
        let stop_requested = stop_requested(&self.s, run).await;
        let stored_plan = outcome::plan_from_store(&self.s, run, self.parser.as_ref()).await;
        let facts = Facts {
            stop_requested,
            stderr: stderr_tail,
            plan_candidate: self.plan_candidate.as_deref(),
            ticket_title: &self.title,
            stored_plan: stored_plan.as_ref(),
        };
        let unknown_session = matches!(how, How::Exited(_))
            && self.parser.session_not_found(stderr_tail)
            && self.storage_failure.is_none();
        let (mut ending, mut settle) = decide(how, self.parser.as_ref(), &facts);
        if let (true, Some(failure)) = (unknown_session, ending.failure.as_mut()) {
            failure.code = "session_not_found".into();
        }
        // A run whose events could not all be stored is never completed, whatever its planner did.
        if let Some(failure) = self.storage_failure.clone() {
            settle = outcome::Settle::Failed(failure.message.clone());
            ending.status = planwire_protocol::RunStatus::Failed;
            ending.failure = Some(failure);
        }
        ending.session_id = self.parser.session_id();
        ending.first_output_ms = self.first_output_ms;
        ending.first_final_ms = self.first_final_ms;
        ending.total_ms = Some(self.elapsed_ms());
        let ticket = self.ticket_id.expect("a plan run has a ticket");
        let ended = record_end(&self.s, ticket, run, ending, settle, self.next_seq).await;
        if let Some((question, event)) = ended {
            // Its question event was stored with the run's end, so a client that saw `done`
            // has seen it too.
            let params = TranscriptParams {
                ticket_id: Some(ticket),
                run_id: run,
                events: vec![event],
            };
            self.s.outbox.notify("planwire/transcript", params).await;
            let params = QuestionParams {
                ticket_id: ticket,
                run_id: run,
                question,
            };
            self.s.outbox.notify("planwire/question", params).await;
        }
        self.s.unregister(run);
        notify_changed(&self.s, self.ticket_id, run).await;
        self.progress.end("Planning ended");
        let fallback = self.fallback.take();
        close(ctl).await;
        if let (true, Some((ticket, spec))) = (unknown_session, fallback) {
            // The CLI lost the session (another machine, a cleaned HOME): start over, fresh.
            if let Err(e) = start(&self.s, &ticket, spec).await {
                tracing::error!("run {run}: cannot start fresh after an unknown session: {}", e.message);
            }
        }
    }

    /// The first process could not start: the run fails with `spawn_failed`.
    async fn finish_failed_start(&mut self, message: &str) {
        let ending = outcome::failed_ending("spawn_failed", message.to_owned(), None, None);
        match self.ticket_id {
            Some(ticket) => {
                record_end(
                    &self.s,
                    ticket,
                    self.run_id,
                    ending,
                    outcome::Settle::Failed(message.to_owned()),
                    1,
                )
                .await;
            }
            None => {
                let run = self.run_id;
                let _ = self.s.store.write_ending(move |c| runs::finish(c, run, &ending)).await;
            }
        }
        notify_changed(&self.s, self.ticket_id, self.run_id).await;
        self.progress.end("Planning could not start");
    }
}

/// Answers every stop request of a run that has been recorded as ended.
async fn close(mut ctl: Control) {
    ctl.answer_rx.close();
    while let Some(late) = ctl.answer_rx.recv().await {
        let _ = late.done.send(Err("the run has ended".into()));
    }
    ctl.stop_rx.close();
    while let Some(reply) = ctl.stop_rx.recv().await {
        ctl.waiters.push(reply);
    }
    for w in ctl.waiters {
        let _ = w.send(());
    }
}

async fn stop_requested(s: &Session, run: RunId) -> bool {
    s.store
        .read(move |c| Ok(c.query_row("SELECT stop_requested FROM runs WHERE id = ?1", [run], |r| r.get(0))?))
        .await
        .unwrap_or(false)
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The usage a provider session had reached at the end of this ticket's last run in it.
async fn usage_before(s: &Session, ticket: TicketId, session: &str) -> Option<[u64; 4]> {
    let session = session.to_owned();
    let payload: Option<String> = s
        .store
        .read(move |c| {
            use rusqlite::OptionalExtension;
            Ok(c.query_row(
                "SELECT t.payload FROM transcript t JOIN runs r ON r.id = t.run_id
                 WHERE r.ticket_id = ?1 AND r.session_id = ?2 AND t.kind = 'usage'
                 ORDER BY t.run_id DESC, t.seq DESC LIMIT 1",
                rusqlite::params![ticket, session],
                |r| r.get(0),
            )
            .optional()?)
        })
        .await
        .ok()
        .flatten();
    let event: TranscriptEvent = serde_json::from_str(&payload?).ok()?;
    match event.body {
        EventBody::Usage {
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            ..
        } => Some([input_tokens, output_tokens, cache_read_tokens, cache_write_tokens]),
        _ => None,
    }
}

/// Sends `ticketChanged` with the stored ticket.
pub async fn notify_ticket(s: &Session, ticket: TicketId) {
    match s.store.read(move |c| tickets::get(c, ticket)).await {
        Ok(ticket) => {
            s.outbox
                .notify("planwire/ticketChanged", TicketChangedParams { ticket })
                .await
        }
        Err(e) => tracing::error!("cannot read ticket {ticket} to notify it: {e}"),
    }
}

/// Sends `runChanged`, and `ticketChanged` when the run has a ticket, with the stored state.
pub async fn notify_changed(s: &Session, ticket: Option<TicketId>, run: RunId) {
    match s.store.read(move |c| runs::get(c, run)).await {
        Ok(run) => s.outbox.notify("planwire/runChanged", RunChangedParams { run }).await,
        Err(e) => tracing::error!("cannot read run {run} to notify it: {e}"),
    }
    if let Some(ticket) = ticket {
        notify_ticket(s, ticket).await;
    }
}

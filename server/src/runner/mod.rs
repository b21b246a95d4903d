//! One run, from start to its recorded end: the flow of DESIGN.md in one place.
//!
//! planner stdout line → adapter parser → numbered event → batch → store (one transaction)
//! → `planwire/transcript` notification. An event gets its seq once, where it is born, and
//! is sent only after the transaction that stores it has committed, so whatever a client
//! has seen is on disk. The run ends in exactly one recorded way: completed, failed (with a
//! code), or cancelled; a sidecar that dies leaves it to the next one to mark interrupted.
//!
//! A run is one or more *passes*, each one planner process driven by its adapter's driver
//! task (`pass.rs`, `planners/driver.rs`): a plan is one pass, or research passes in linked
//! projects (several at once) and then the plan (`research.rs`); a breakdown is an outline
//! and an expansion pass in one provider session (`breakdown.rs`). All passes of a run share
//! its transcript: one seq, no gaps, each pass its own agent run. Live text pieces go out as
//! `planwire/delta` and are never stored (`deltas.rs`).

mod breakdown;
mod deltas;
mod live;
mod outcome;
mod pass;
mod research;
mod sandboxed;

pub(crate) use breakdown::start_breakdown;
pub use deltas::OpenBlocks;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use planwire_protocol::{
    AgentRunId, ErrorCode, EventBody, Failure, QuestionId, QuestionParams, RunChangedParams, RunId, SubagentPhase,
    Ticket, TicketChangedParams, TicketId, TranscriptEvent, TranscriptParams,
};
use tokio::sync::{mpsc, oneshot};

use crate::context::Workdir;
use crate::planners::driver::{AskId, Report};
use crate::planners::prompt::{branch_note, PromptSettings};
use crate::planners::{self, script, Tool};
use crate::progress::Progress;
use crate::session::{LiveAnswer, RunHandle, Session};
use crate::store::{links, runs, tickets, transcript, StoreError};
use crate::supervisor;
use crate::transport::ResponseError;
use crate::util::now;
use outcome::{decide, record_end, Facts, How};
use pass::{LivePass, PassId, PassSpec};

/// Flush the batch once its oldest event is this old (a quiet stream is not held)…
const FLUSH_AGE: Duration = Duration::from_millis(20);
/// …or once it holds this many events.
const FLUSH_AT: usize = 256;
/// Reports a run's passes may have on their way before a driver waits.
const REPORTS: usize = 64;

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
    /// Where every pass of the plan runs (the ticket's branch, resolved before the run is
    /// created), recorded on the run.
    pub workdir: Workdir,
    /// The project's prompt settings: the handler built the plan prompt with them, and the
    /// research selection and research passes carry them too.
    pub settings: PromptSettings,
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
    // A CLI below the supported range is refused before anything runs (the version was read
    // when the planners were detected, for this very binary).
    let path = program.display().to_string();
    let below = s
        .planners
        .lock()
        .expect("planners")
        .iter()
        .find(|p| p.tool == tool.name() && p.path.as_deref() == Some(path.as_str()) && p.found && !p.supported)
        .map(|p| p.version.clone().unwrap_or_default());
    if let Some(version) = below {
        let range = planners::detect::supported_range(tool).unwrap_or_default();
        return Err(unavailable(format!(
            "{} {version} at {path} is not supported: planwire needs {range}. Upgrade it: {}",
            tool.name(),
            tool.install_hint()
        )));
    }
    // `required` without an OS sandbox refuses before anything is created.
    if let Some(why) = crate::sandbox::refusal(s.config.sandbox) {
        return Err(unavailable(why));
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
        cwd: spec.workdir.dir.clone(),
    };
    let owner = s.owner;
    let (run_id, leftovers) = s
        .store
        .write(move |c| runs::create(c, &new, owner))
        .await
        .map_err(store_error)?;
    for l in leftovers {
        if let (Some(pgid), Some(start)) = (l.pgid, l.child_start) {
            supervisor::kill_leftover_group(pgid, start).await;
        }
    }
    let root = ticket.root.clone();
    let links = s
        .store
        .read(move |c| links::list(c, &root))
        .await
        .map_err(store_error)?;
    // Every pass of the plan runs in its directory: the root, or the branch's worktree.
    let dir = spec.workdir.dir.clone();
    let mut run = Run::new(s, run_id, Some(ticket.id), &dir, &ticket.title, &spec, program);
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
            workdir: spec.workdir.clone(),
            settings: spec.settings.clone(),
        };
        run.fallback = Some((ticket.clone(), fresh));
    }
    let mut spec = spec;
    if let Some(branch) = &spec.workdir.unchecked_branch {
        // The plan runs in the root: the prompt names the branch, read through git.
        let note = branch_note(branch);
        for prompt in std::iter::once(&mut spec.prompt).chain(spec.fresh_prompt.as_mut()) {
            prompt.push_str(&note);
        }
    }
    if s.config.references {
        let text = format!("{}\n{}", ticket.title, ticket.description);
        match crate::context::references(&text, std::path::Path::new(&ticket.root)).await {
            Ok(Some(block)) => {
                for prompt in std::iter::once(&mut spec.prompt).chain(spec.fresh_prompt.as_mut()) {
                    prompt.push_str("\n\n");
                    prompt.push_str(&block);
                }
            }
            Ok(None) => {}
            Err(failure) => {
                // The run fails before any planner starts, and says which link and why.
                run.fail_before_start("reference_unavailable", &failure.message()).await;
                return Ok(run_id);
            }
        }
    }
    let task = format!("Title: {}\n\n{}", ticket.title, ticket.description);
    // With linked projects the first pass chooses what to research; else it is the plan.
    let first = if links.is_empty() {
        PassSpec::main(&dir, &spec.prompt, spec.resume.as_deref())
    } else {
        PassSpec::selection(&dir, &task, &links, &spec.settings)
    };
    let first = run.begin(first).await?;
    let job = research::PlanJob {
        prompt: spec.prompt,
        resume: spec.resume,
        links,
    };
    tokio::spawn(run.run_plan(first, job));
    Ok(run_id)
}

pub(crate) fn cached_version(s: &Session, tool: Tool) -> Option<String> {
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

/// One run: its transcript, its passes, and how it ends.
pub(crate) struct Run {
    s: Arc<Session>,
    run_id: RunId,
    ticket_id: Option<TicketId>,
    /// The directory the run's own passes run in: the project root, or the worktree where
    /// the ticket's branch is checked out (linked research runs in each linked root).
    root: String,
    title: String,
    /// The project's prompt settings, for the prompts the runner builds (research, breakdown).
    settings: PromptSettings,
    tool: Tool,
    model: Option<String>,
    variant: Option<String>,
    program: PathBuf,
    ctl: Control,
    // The run's transcript.
    pending: Vec<TranscriptEvent>,
    /// When the oldest event of `pending` was born.
    pending_since: Option<tokio::time::Instant>,
    next_seq: u64,
    agents: HashMap<String, AgentRunId>,
    deltas: deltas::Deltas,
    started: Instant,
    first_output_ms: Option<i64>,
    first_final_ms: Option<i64>,
    progress: Progress,
    // Its passes.
    passes_started: PassId,
    passes: HashMap<PassId, LivePass>,
    reports_tx: mpsc::Sender<(PassId, Report)>,
    reports_rx: mpsc::Receiver<(PassId, Report)>,
    limits: pass::Limits,
    /// Set once a stop or a time limit stopped the passes; no pass starts after it.
    stopping: Option<planners::driver::StopWhy>,
    /// Live questions a pass waits on: question id → (pass, the driver's ask id).
    live: HashMap<QuestionId, (PassId, AskId)>,
    /// A fresh start to fall back on when a resumed session turns out to be unknown.
    fallback: Option<(Ticket, RunSpec)>,
    /// The sandbox state recorded on the run (again when a later pass differs).
    sandbox_recorded: Option<planwire_protocol::SandboxState>,
    /// The store could not take a batch: the run ends there, failed with this.
    storage_failure: Option<Failure>,
}

impl Run {
    fn new(
        s: &Arc<Session>,
        run_id: RunId,
        ticket_id: Option<TicketId>,
        root: &str,
        title: &str,
        spec: &RunSpec,
        program: PathBuf,
    ) -> Run {
        let progress = Progress::begin(s, run_id, &format!("Planning: {title}"));
        let (stop_tx, stop_rx) = mpsc::channel(8);
        let (answer_tx, answer_rx) = mpsc::channel(8);
        let (reports_tx, reports_rx) = mpsc::channel(REPORTS);
        let deltas = deltas::Deltas::default();
        let handle = RunHandle {
            ticket_id,
            stop: stop_tx,
            answers: answer_tx,
            open_blocks: deltas.shared.clone(),
        };
        // Registered at once, so a stop that comes while the first pass starts finds the run.
        s.register(run_id, handle);
        Run {
            s: s.clone(),
            run_id,
            ticket_id,
            root: root.to_owned(),
            title: title.to_owned(),
            settings: spec.settings.clone(),
            tool: spec.tool,
            model: spec.model.clone(),
            variant: spec.variant.clone(),
            program,
            ctl: Control {
                stop_rx,
                answer_rx,
                waiters: Vec::new(),
            },
            pending: Vec::new(),
            pending_since: None,
            next_seq: 1,
            agents: HashMap::new(),
            deltas,
            started: Instant::now(),
            first_output_ms: None,
            first_final_ms: None,
            progress,
            passes_started: 0,
            passes: HashMap::new(),
            reports_tx,
            reports_rx,
            limits: pass::Limits::new(&s.config),
            stopping: None,
            live: HashMap::new(),
            fallback: None,
            sandbox_recorded: None,
            storage_failure: None,
        }
    }

    /// Starts the first pass; a spawn failure is recorded and returned.
    async fn begin(&mut self, first: PassSpec<'_>) -> Result<PassId, ResponseError> {
        match self.start_pass(first).await {
            Ok(id) => {
                notify_changed(&self.s, self.ticket_id, self.run_id).await;
                Ok(id)
            }
            Err(message) => {
                self.fail_before_start("spawn_failed", &message).await;
                Err(unavailable(message))
            }
        }
    }

    fn elapsed_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    /// Numbers an event and adds it to the batch. `agent` is its agent-run key, with the key
    /// of its parent agent run (a subagent inside a pass that is one of several).
    async fn push(&mut self, agent: Option<(String, Option<String>)>, body: EventBody) {
        let agent_run_id = match &agent {
            Some((key, parent)) => Some(self.agent_run(key, parent.as_deref(), Some(&body)).await),
            None => None,
        };
        self.deltas.close(agent_run_id, &body);
        match &body {
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
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending_since.get_or_insert_with(tokio::time::Instant::now);
        self.pending.push(TranscriptEvent {
            seq,
            ts: now(),
            agent_run_id,
            body,
        });
    }

    /// The agent run of `key`, created on first use (a subagent's label comes from its
    /// `subagent start` event).
    async fn agent_run(&mut self, key: &str, parent: Option<&str>, body: Option<&EventBody>) -> AgentRunId {
        if let Some(id) = self.agents.get(key) {
            return *id;
        }
        let label = match body {
            Some(EventBody::Subagent { label, .. }) => label.clone(),
            _ => key.to_owned(),
        };
        self.progress.report(label.clone());
        let parent = parent.and_then(|p| self.agents.get(p)).copied();
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
    /// can be retried (a lock), so the run ends here ([`Run::storage_failure`]): its passes
    /// are stopped, and nothing after it is stored or notified. Seqs stay contiguous in both.
    async fn flush(&mut self) {
        self.pending_since = None;
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

    /// Records that the store could not take part of the run: its passes are stopped, and
    /// the run ends failed with it.
    fn storage_failed(&mut self, what: &str, e: &StoreError) {
        tracing::error!("run {}: cannot store {what}: {e}; the run ends here", self.run_id);
        if self.storage_failure.is_none() {
            self.storage_failure = Some(outcome::storage_failure(e));
            self.stop_all(planners::driver::StopWhy::Stopped);
        }
    }

    /// A run whose events could not all be stored is never completed, whatever its planner
    /// did.
    fn storage_verdict(&self, ending: &mut runs::Ending, settle: &mut outcome::Settle) {
        if let Some(failure) = self.storage_failure.clone() {
            *settle = outcome::Settle::Failed(failure.message.clone());
            ending.status = planwire_protocol::RunStatus::Failed;
            ending.failure = Some(failure);
        }
    }

    /// Ends a plan run: decides how it ended, records it with its ticket, and notifies.
    async fn finish_plan(mut self, how: How) {
        let run = self.run_id;
        self.deltas.clear();
        let stop_requested = stop_requested(&self.s, run).await;
        let stored_plan = outcome::plan_from_store(&self.s, run, &how).await;
        let facts = Facts {
            stop_requested,
            ticket_title: &self.title,
            stored_plan: stored_plan.as_ref(),
        };
        let unknown_session =
            matches!(&how, How::Ended(e) if e.end.session_not_found) && self.storage_failure.is_none();
        let session_id = match &how {
            How::Ended(e) => e.end.session_id.clone(),
            How::SpawnFailed(_) => None,
        };
        let (mut ending, mut settle) = decide(how, &facts);
        if let (true, Some(failure)) = (unknown_session, ending.failure.as_mut()) {
            failure.code = "session_not_found".into();
        }
        self.storage_verdict(&mut ending, &mut settle);
        ending.session_id = session_id;
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
        let s = self.s.clone();
        close(self.ctl).await;
        if let (true, Some((ticket, spec))) = (unknown_session, fallback) {
            // The CLI lost the session (another machine, a cleaned HOME): start over, fresh.
            if let Err(e) = start(&s, &ticket, spec).await {
                tracing::error!("run {run}: cannot start fresh after an unknown session: {}", e.message);
            }
        }
    }

    /// The run fails before its first planner runs (`spawn_failed`, `reference_unavailable`).
    async fn fail_before_start(&mut self, code: &str, message: &str) {
        let ending = outcome::failed_ending(code, message.to_owned(), None, None);
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
        self.s.unregister(self.run_id);
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

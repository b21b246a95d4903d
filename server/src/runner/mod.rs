//! One run, from start to its recorded end: the flow of DESIGN.md in one place.
//!
//! planner stdout line → adapter parser → numbered event → batch → store (one transaction)
//! → `planwire/transcript` notification. An event gets its seq once, where it is born, and
//! is sent only after the transaction that stores it has committed, so whatever a client
//! has seen is on disk. The run ends in exactly one recorded way: completed, failed (with a
//! code), or cancelled; a sidecar that dies leaves it to the next one to mark interrupted.

mod live;
mod outcome;

pub(crate) use live::answer_pairs;
pub use outcome::plan_markdown;

use std::collections::HashMap;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use planwire_protocol::{
    AgentRunId, ErrorCode, EventBody, QuestionId, QuestionParams, RunChangedParams, RunId, SubagentPhase, Ticket,
    TicketChangedParams, TicketId, TranscriptEvent, TranscriptParams,
};
use tokio::process::ChildStdin;
use tokio::sync::{mpsc, oneshot};

use crate::planners::claude::ControlRequest;
use crate::planners::{self, script, LaunchOptions, LaunchRequest, LineParser, ParsedEvent, Tool};
use crate::progress::Progress;
use crate::session::{LiveAnswer, RunHandle, Session};
use crate::store::{runs, tickets, transcript, StoreError};
use crate::supervisor::{self, OutputLine, SpawnSpec, Supervised};
use crate::transport::ResponseError;
use crate::util::now;
use outcome::{decide, failed_ending, record_end, Facts, How, Settle};

/// Flush the batch at least this often…
const FLUSH_EVERY: Duration = Duration::from_millis(50);
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

/// The planner's binary, or a "planner unavailable" error that says what to install.
pub fn planner_program(s: &Session, tool: Tool, model: Option<&str>) -> Result<std::path::PathBuf, ResponseError> {
    let program = planners::locate(tool, &s.config)
        .ok_or_else(|| unavailable(format!("{} was not found: {}", tool.name(), tool.install_hint())))?;
    if tool == Tool::Script {
        script::check(model.unwrap_or("demo")).map_err(unavailable)?;
    }
    Ok(program)
}

/// Creates a run for the ticket and starts its planner. Resolves once the process runs.
/// (Boxed: a run that finds its session unknown starts a fresh one from inside its driver.)
pub fn start<'a>(
    s: &'a Arc<Session>,
    ticket: &'a Ticket,
    spec: RunSpec,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<RunId, ResponseError>> + Send + 'a>> {
    Box::pin(start_run(s, ticket, spec))
}

async fn start_run(s: &Arc<Session>, ticket: &Ticket, spec: RunSpec) -> Result<RunId, ResponseError> {
    let tool = spec.tool;
    let root = std::path::PathBuf::from(&ticket.root);
    if !root.is_dir() {
        return Err(ResponseError::new(
            ErrorCode::ProjectUnavailable,
            format!("the ticket's root {} is not an existing directory", ticket.root),
        ));
    }
    let program = planner_program(s, tool, spec.model.as_deref())?;
    let launch = planners::launch_with(
        tool,
        &LaunchRequest {
            prompt: &spec.prompt,
            model: spec.model.as_deref(),
            resume: spec.resume.as_deref(),
        },
        &LaunchOptions {
            variant: spec.variant.as_deref(),
            title: Some(&ticket.title),
        },
    );
    let new = runs::NewRun {
        ticket_id: ticket.id,
        tool: tool.name().into(),
        model: spec.model.clone(),
        variant: spec.variant.clone(),
        retry_of: spec.retry_of,
        resume_of: spec.resume.clone(),
        fresh_reason: spec.fresh_reason.clone(),
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
    let usage_baseline = match (&spec.resume, tool) {
        (Some(session), Tool::Codex) => usage_before(s, ticket.id, session).await,
        _ => None,
    };
    let fallback = match (&spec.resume, &spec.fresh_prompt) {
        (Some(session), Some(prompt)) => Some(RunSpec {
            tool,
            model: spec.model.clone(),
            variant: spec.variant.clone(),
            prompt: prompt.clone(),
            resume: None,
            retry_of: spec.retry_of,
            fresh_reason: Some(format!("{} no longer knows session {session}", tool.name())),
            fresh_prompt: None,
        }),
        _ => None,
    };
    let started = Instant::now();
    let child = supervisor::spawn(SpawnSpec {
        program: program.clone(),
        args: launch.args,
        cwd: root,
        env: launch.env,
        stdin_pipe: launch.stdin.is_some(),
    })
    .await;
    let mut stdin = None;
    let child = match child {
        Ok(mut c) => {
            if let (Some(text), Some(mut pipe)) = (launch.stdin, c.stdin.take()) {
                use tokio::io::AsyncWriteExt;
                if launch.keep_stdin_open {
                    // The opening lines are small: written here, the pipe stays for answers.
                    let _ = pipe.write_all(text.as_bytes()).await;
                    let _ = pipe.flush().await;
                    stdin = Some(pipe);
                } else {
                    // Write the prompt and close stdin: an open pipe makes the CLIs wait forever.
                    tokio::spawn(async move {
                        let _ = pipe.write_all(text.as_bytes()).await;
                        let _ = pipe.shutdown().await;
                    });
                }
            }
            c
        }
        Err(e) => {
            let message = format!("cannot start {}: {e}. {}", program.display(), tool.install_hint());
            let ending = failed_ending("spawn_failed", message.clone(), None, None);
            record_end(s, ticket.id, run_id, ending, Settle::Failed(message.clone()), 1).await;
            return Err(unavailable(message));
        }
    };
    let version = cached_version(s, tool);
    let info = runs::ChildInfo {
        pid: child.pid,
        start: child.start_time,
        pgid: child.pgid,
        argv: std::iter::once(program.display().to_string())
            .chain(launch.recorded_args)
            .collect(),
        cli_version: version,
    };
    s.store
        .write(move |c| runs::mark_started(c, run_id, &info))
        .await
        .map_err(store_error)?;
    let (stop_tx, stop_rx) = mpsc::channel(8);
    let (answer_tx, answer_rx) = mpsc::channel(8);
    s.register(
        run_id,
        RunHandle {
            ticket_id: ticket.id,
            stop: stop_tx,
            answers: answer_tx,
        },
    );
    notify_changed(s, ticket.id, run_id).await;
    let progress = Progress::begin(s, run_id, &format!("Planning: {}", ticket.title));
    let driver = Driver {
        s: s.clone(),
        run_id,
        ticket_id: ticket.id,
        tool,
        parser: tool.parser(),
        pending: Vec::new(),
        next_seq: 1,
        agents: HashMap::new(),
        started,
        first_output_ms: None,
        first_final_ms: None,
        progress,
        stdin,
        live: HashMap::new(),
        plan_candidate: None,
        ticket_title: ticket.title.clone(),
        usage_baseline,
        fallback: fallback.map(|spec| (ticket.clone(), spec)),
    };
    tokio::spawn(driver.drive(child, stop_rx, answer_rx));
    Ok(run_id)
}

fn cached_version(s: &Session, tool: Tool) -> Option<String> {
    let planners = s.planners.lock().expect("planners");
    planners
        .iter()
        .find(|p| p.tool == tool.name())
        .and_then(|p| p.version.clone())
}

struct Driver {
    s: Arc<Session>,
    run_id: RunId,
    ticket_id: TicketId,
    tool: Tool,
    parser: Box<dyn LineParser>,
    pending: Vec<TranscriptEvent>,
    next_seq: u64,
    agents: HashMap<String, AgentRunId>,
    started: Instant,
    first_output_ms: Option<i64>,
    first_final_ms: Option<i64>,
    progress: Progress,
    /// Claude's stream-json input, open until its final `result` line.
    stdin: Option<ChildStdin>,
    /// Live questions the CLI is waiting on, by question id.
    live: HashMap<QuestionId, ControlRequest>,
    /// A plan the agent offered through ExitPlanMode (which planwire always denies).
    plan_candidate: Option<String>,
    ticket_title: String,
    /// Codex reports usage cumulative per thread: a resumed run subtracts what the thread had.
    usage_baseline: Option<[u64; 4]>,
    /// A fresh start to fall back on when a resumed session turns out to be unknown.
    fallback: Option<(Ticket, RunSpec)>,
}

impl Driver {
    async fn drive(
        mut self,
        mut child: Supervised,
        mut stop_rx: mpsc::Receiver<oneshot::Sender<()>>,
        mut answer_rx: mpsc::Receiver<LiveAnswer>,
    ) {
        let config = self.s.config.clone();
        let hard = tokio::time::sleep(config.hard_timeout);
        let idle = tokio::time::sleep(config.idle_timeout);
        let asked = tokio::time::sleep(config.question_timeout);
        tokio::pin!(hard, idle, asked);
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut waiters = Vec::new();
        let mut output = std::mem::replace(&mut child.output, mpsc::channel(1).1);
        let mut eof = false;
        // While the person is asked, the idle and hard limits pause and the question's own runs.
        let mut waiting_since: Option<tokio::time::Instant> = None;
        enum Step {
            Stop(oneshot::Sender<()>),
            Timeout(&'static str),
            Exited(Option<ExitStatus>),
        }
        let step = loop {
            let waiting = !self.live.is_empty();
            match (waiting, waiting_since) {
                (true, None) => {
                    let now = tokio::time::Instant::now();
                    waiting_since = Some(now);
                    asked.as_mut().reset(now + config.question_timeout);
                }
                (false, Some(since)) => {
                    let now = tokio::time::Instant::now();
                    let paused = now - since;
                    let hard_at = hard.deadline() + paused;
                    hard.as_mut().reset(hard_at);
                    idle.as_mut().reset(now + config.idle_timeout);
                    waiting_since = None;
                }
                _ => {}
            }
            tokio::select! {
                biased;
                Some(reply) = stop_rx.recv() => break Step::Stop(reply),
                _ = &mut hard, if !waiting => break Step::Timeout("hard_timeout"),
                _ = &mut idle, if !waiting => break Step::Timeout("idle_timeout"),
                _ = &mut asked, if waiting => break Step::Timeout("question_timeout"),
                Some(answer) = answer_rx.recv() => self.on_answer(answer).await,
                line = output.recv(), if !eof => match line {
                    Some(line) => {
                        idle.as_mut().reset(tokio::time::Instant::now() + config.idle_timeout);
                        self.on_line(line).await;
                        if self.pending.len() >= FLUSH_AT {
                            self.flush().await;
                        }
                    }
                    None => eof = true,
                },
                // The leader's exit ends the run even if a leftover grandchild holds stdout open.
                status = child.wait() => break Step::Exited(status.ok()),
                _ = tick.tick() => self.flush().await,
            }
        };
        let how = match step {
            Step::Stop(reply) => {
                waiters.push(reply);
                How::Stopped(child.stop(config.stop_grace).await)
            }
            Step::Timeout(code) => How::TimedOut(code, child.stop(config.stop_grace).await),
            Step::Exited(status) => {
                child.reap_group().await;
                How::Exited(status)
            }
        };
        let tail = child.stderr_tail().await;
        // Lines already written before a stop or timeout are kept too: the group is gone,
        // so the pipe reaches its end at once.
        while let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(2), output.recv()).await {
            self.on_line(line).await;
        }
        for ev in self.parser.finish() {
            self.push(ev).await;
        }
        self.flush().await;
        self.stdin = None;
        answer_rx.close();
        while let Some(late) = answer_rx.recv().await {
            let _ = late.done.send(Err("the run has ended".into()));
        }
        self.finish(how, &tail).await;
        stop_rx.close();
        while let Some(reply) = stop_rx.recv().await {
            waiters.push(reply);
        }
        for w in waiters {
            let _ = w.send(());
        }
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
        let agent_run_id = match &ev.agent {
            Some(key) => Some(self.agent_run(key, &ev.body).await),
            None => None,
        };
        match &ev.body {
            EventBody::Session { provider_session_id } => self.remember_session(provider_session_id).await,
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
        self.progress.report(format!("Subagent: {label}"));
        let (run, k) = (self.run_id, key.to_owned());
        let id = self
            .s
            .store
            .write(move |c| transcript::start_agent_run(c, run, None, Some(&k), &label))
            .await
            .unwrap_or_default();
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
                tickets::set_session(c, ticket, tool, &id)
            })
            .await;
        if let Err(e) = result {
            tracing::error!("run {run}: cannot record the provider session: {e}");
        }
    }

    /// Commits the pending events, then notifies them.
    async fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.pending);
        let run = self.run_id;
        let stored = events.clone();
        if let Err(e) = self.s.store.write(move |c| transcript::append(c, run, &stored)).await {
            tracing::error!("run {run}: cannot store {} events: {e}", events.len());
            return;
        }
        let params = TranscriptParams {
            ticket_id: self.ticket_id,
            run_id: run,
            events,
        };
        self.s.outbox.notify("planwire/transcript", params).await;
    }

    async fn finish(self, how: How, stderr_tail: &str) {
        let run = self.run_id;
        let stop_requested: bool = self
            .s
            .store
            .read(move |c| Ok(c.query_row("SELECT stop_requested FROM runs WHERE id = ?1", [run], |r| r.get(0))?))
            .await
            .unwrap_or(false);
        let facts = Facts {
            stop_requested,
            stderr: stderr_tail,
            plan_candidate: self.plan_candidate.as_deref(),
            ticket_title: &self.ticket_title,
        };
        let unknown_session = matches!(how, How::Exited(_)) && self.parser.session_not_found(stderr_tail);
        let (mut ending, settle) = decide(how, self.parser.as_ref(), &facts);
        if let (true, Some(failure)) = (unknown_session, ending.failure.as_mut()) {
            failure.code = "session_not_found".into();
        }
        ending.session_id = self.parser.session_id();
        ending.first_output_ms = self.first_output_ms;
        ending.first_final_ms = self.first_final_ms;
        ending.total_ms = Some(self.elapsed_ms());
        let ended = record_end(&self.s, self.ticket_id, run, ending, settle, self.next_seq).await;
        if let Some((question, event)) = ended {
            // Its question event was stored with the run's end, so a client that saw `done`
            // has seen it too.
            let events = vec![event];
            let params = TranscriptParams {
                ticket_id: self.ticket_id,
                run_id: run,
                events,
            };
            self.s.outbox.notify("planwire/transcript", params).await;
            let params = QuestionParams {
                ticket_id: self.ticket_id,
                run_id: run,
                question,
            };
            self.s.outbox.notify("planwire/question", params).await;
        }
        self.s.unregister(run);
        notify_changed(&self.s, self.ticket_id, run).await;
        self.progress.end("Planning ended");
        if let (true, Some((ticket, spec))) = (unknown_session, self.fallback) {
            // The CLI lost the session (another machine, a cleaned HOME): start over, fresh.
            if let Err(e) = start(&self.s, &ticket, spec).await {
                tracing::error!("run {run}: cannot start fresh after an unknown session: {}", e.message);
            }
        }
    }
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

/// Sends `runChanged` and `ticketChanged` with the stored state.
pub async fn notify_changed(s: &Session, ticket: TicketId, run: RunId) {
    let state = s
        .store
        .read(move |c| Ok((runs::get(c, run)?, tickets::get(c, ticket)?)))
        .await;
    match state {
        Ok((run, ticket)) => {
            s.outbox.notify("planwire/runChanged", RunChangedParams { run }).await;
            s.outbox
                .notify("planwire/ticketChanged", TicketChangedParams { ticket })
                .await;
        }
        Err(e) => tracing::error!("cannot read run {run} to notify it: {e}"),
    }
}

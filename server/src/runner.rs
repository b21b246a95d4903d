//! One run, from start to its recorded end: the flow of DESIGN.md in one place.
//!
//! planner stdout line → adapter parser → numbered event → batch → store (one transaction)
//! → `planwire/transcript` notification. An event gets its seq once, where it is born, and
//! is sent only after the transaction that stores it has committed, so whatever a client
//! has seen is on disk. The run ends in exactly one recorded way: completed, failed (with a
//! code), or cancelled; a sidecar that dies leaves it to the next one to mark interrupted.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use planwire_protocol::{
    AgentRunId, ErrorCode, EventBody, Failure, Plan, QuestionItem, QuestionParams, QuestionSource,
    RunChangedParams, RunId, RunStatus, SubagentPhase, Ticket, TicketChangedParams, TicketId,
    TicketStatus, TranscriptEvent, TranscriptParams,
};
use tokio::sync::{mpsc, oneshot};

use crate::planners::{
    self, plan::extract_plan, script, LaunchRequest, LineParser, ParsedEvent, Tool,
};
use crate::progress::Progress;
use crate::session::{RunHandle, Session};
use crate::store::{questions, runs, tickets, transcript, StoreError};
use crate::supervisor::{self, OutputLine, SpawnSpec, Supervised};
use crate::transport::ResponseError;
use crate::util::now;

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
}

pub fn store_error(e: StoreError) -> ResponseError {
    match e {
        StoreError::NotFound(what) => {
            ResponseError::new(ErrorCode::NotFound, format!("{what} does not exist"))
        }
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

/// Creates a run for the ticket and starts its planner. Returns once the process runs.
pub async fn start(
    s: &Arc<Session>,
    ticket: &Ticket,
    spec: RunSpec,
) -> Result<RunId, ResponseError> {
    let tool = spec.tool;
    let root = std::path::PathBuf::from(&ticket.root);
    if !root.is_dir() {
        return Err(ResponseError::new(
            ErrorCode::ProjectUnavailable,
            format!(
                "the ticket's root {} is not an existing directory",
                ticket.root
            ),
        ));
    }
    let program = planners::locate(tool, &s.config).ok_or_else(|| {
        unavailable(format!(
            "{} was not found: {}",
            tool.name(),
            tool.install_hint()
        ))
    })?;
    if tool == Tool::Script {
        script::check(spec.model.as_deref().unwrap_or("demo")).map_err(unavailable)?;
    }
    let launch = planners::launch(
        tool,
        &LaunchRequest {
            prompt: &spec.prompt,
            model: spec.model.as_deref(),
            resume: spec.resume.as_deref(),
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
    let started = Instant::now();
    let child = supervisor::spawn(SpawnSpec {
        program: program.clone(),
        args: launch.args,
        cwd: root,
        env: launch.env,
        stdin_pipe: launch.stdin.is_some(),
    })
    .await;
    let child = match child {
        Ok(mut c) => {
            if let (Some(text), Some(mut stdin)) = (launch.stdin, c.stdin.take()) {
                // Write the prompt and close stdin: an open pipe makes the CLIs wait forever.
                tokio::spawn(async move {
                    use tokio::io::AsyncWriteExt;
                    let _ = stdin.write_all(text.as_bytes()).await;
                    let _ = stdin.shutdown().await;
                });
            }
            c
        }
        Err(e) => {
            let message = format!(
                "cannot start {}: {e}. {}",
                program.display(),
                tool.install_hint()
            );
            let ending = failed_ending("spawn_failed", message.clone(), None, None);
            record_end(
                s,
                ticket.id,
                run_id,
                ending,
                Settle::Failed(message.clone()),
            )
            .await;
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
    s.register(
        run_id,
        RunHandle {
            ticket_id: ticket.id,
            stop: stop_tx,
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
    };
    tokio::spawn(driver.drive(child, stop_rx));
    Ok(run_id)
}

fn cached_version(s: &Session, tool: Tool) -> Option<String> {
    let planners = s.planners.lock().expect("planners");
    planners
        .iter()
        .find(|p| p.tool == tool.name())
        .and_then(|p| p.version.clone())
}

enum How {
    Exited(Option<ExitStatus>),
    Stopped(Option<ExitStatus>),
    TimedOut(&'static str, Option<ExitStatus>),
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
}

impl Driver {
    async fn drive(
        mut self,
        mut child: Supervised,
        mut stop_rx: mpsc::Receiver<oneshot::Sender<()>>,
    ) {
        let config = self.s.config.clone();
        let hard = tokio::time::sleep(config.hard_timeout);
        let idle = tokio::time::sleep(config.idle_timeout);
        tokio::pin!(hard, idle);
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut waiters = Vec::new();
        let mut output = std::mem::replace(&mut child.output, mpsc::channel(1).1);
        let mut eof = false;
        enum Step {
            Stop(oneshot::Sender<()>),
            Timeout(&'static str),
            Exited(Option<ExitStatus>),
        }
        let step = loop {
            tokio::select! {
                biased;
                Some(reply) = stop_rx.recv() => break Step::Stop(reply),
                _ = &mut hard => break Step::Timeout("hard_timeout"),
                _ = &mut idle => break Step::Timeout("idle_timeout"),
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
        while let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(2), output.recv()).await
        {
            self.on_line(line).await;
        }
        for ev in self.parser.finish() {
            self.push(ev).await;
        }
        self.flush().await;
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
            }
            OutputLine::Truncated { head, len } => {
                let line = format!(
                    "{}… [truncated: the line was {len} bytes]",
                    truncate(&head, 64 * 1024)
                );
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
            EventBody::Session {
                provider_session_id,
            } => self.remember_session(provider_session_id).await,
            EventBody::Text { is_final: true, .. } if self.first_final_ms.is_none() => {
                self.first_final_ms = Some(self.elapsed_ms());
            }
            EventBody::ToolCall { name, input, .. } => {
                self.progress.report(format!("{name} {input}"))
            }
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
        self.pending.push(TranscriptEvent {
            seq,
            ts: now(),
            agent_run_id,
            body: ev.body,
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
        let (run, ticket, tool, id) = (
            self.run_id,
            self.ticket_id,
            self.tool.name(),
            session_id.to_owned(),
        );
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
        if let Err(e) = self
            .s
            .store
            .write(move |c| transcript::append(c, run, &stored))
            .await
        {
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

    async fn finish(mut self, how: How, stderr_tail: &str) {
        let run = self.run_id;
        let stop_requested: bool = self
            .s
            .store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT stop_requested FROM runs WHERE id = ?1",
                    [run],
                    |r| r.get(0),
                )?)
            })
            .await
            .unwrap_or(false);
        let (mut ending, settle) = decide(how, stop_requested, self.parser.as_ref(), stderr_tail);
        ending.session_id = self.parser.session_id();
        ending.first_output_ms = self.first_output_ms;
        ending.first_final_ms = self.first_final_ms;
        ending.total_ms = Some(self.elapsed_ms());
        if let Some(question) = record_end(&self.s, self.ticket_id, run, ending, settle).await {
            // The question event belongs to the transcript too.
            self.push(ParsedEvent::main(EventBody::Question {
                question_id: question.id,
            }))
            .await;
            self.flush().await;
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

/// How the ticket settles after a run.
enum Settle {
    Planned { plan: Plan, update: String },
    Failed(String),
    Stopped,
}

fn failed_ending(
    code: &str,
    message: String,
    exit_code: Option<i32>,
    signal: Option<i32>,
) -> runs::Ending {
    runs::Ending {
        status: RunStatus::Failed,
        exit_code,
        signal,
        failure: Some(Failure {
            code: code.into(),
            message,
        }),
        stderr_tail: None,
        session_id: None,
        first_output_ms: None,
        first_final_ms: None,
        total_ms: None,
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn decide(
    how: How,
    stop_requested: bool,
    parser: &dyn LineParser,
    stderr: &str,
) -> (runs::Ending, Settle) {
    let status_parts =
        |s: Option<ExitStatus>| (s.and_then(|s| s.code()), s.and_then(|s| s.signal()));
    let tail = (!stderr.is_empty()).then(|| stderr.to_owned());
    let (mut ending, settle) = match how {
        How::Stopped(st) => {
            let (code, signal) = status_parts(st);
            let mut e = failed_ending("stopped", String::new(), code, signal);
            e.status = RunStatus::Cancelled;
            e.failure = None;
            (e, Settle::Stopped)
        }
        How::Exited(st) if stop_requested && st.and_then(|s| s.signal()).is_some() => {
            return decide(How::Stopped(st), false, parser, stderr);
        }
        How::TimedOut(code, st) => {
            let (exit, signal) = status_parts(st);
            let message = match code {
                "hard_timeout" => "Planning took longer than the hard time limit and was stopped.".to_owned(),
                _ => "The planner printed nothing for longer than the idle time limit and was stopped.".to_owned(),
            };
            (
                failed_ending(code, message.clone(), exit, signal),
                Settle::Failed(message),
            )
        }
        How::Exited(st) => {
            let (code, signal) = status_parts(st);
            let text = parser.final_text();
            let plan = extract_plan(&text).or_else(|| extract_plan(&parser.all_text()));
            match (code, parser.error_message(), plan) {
                (Some(0), None, Some(plan)) => {
                    let update = planners::plan::strip_plan_block(&text).trim().to_owned();
                    let e = runs::Ending {
                        status: RunStatus::Completed,
                        ..failed_ending("", String::new(), code, None)
                    };
                    (
                        runs::Ending { failure: None, ..e },
                        Settle::Planned { plan, update },
                    )
                }
                (Some(0), None, None) => {
                    let m = "The planner finished without a plan in the <planwire-plan> form."
                        .to_owned();
                    (
                        failed_ending("no_plan", m.clone(), code, None),
                        Settle::Failed(m),
                    )
                }
                (_, Some(err), _) => (
                    failed_ending("planner_error", err.clone(), code, signal),
                    Settle::Failed(err),
                ),
                _ => {
                    let m = if !stderr.trim().is_empty() {
                        last_lines(stderr, 20)
                    } else if let Some(sig) = signal {
                        format!("the planner was killed by signal {sig}")
                    } else {
                        format!("the planner exited with code {}", code.unwrap_or(-1))
                    };
                    (
                        failed_ending("exit_code", m.clone(), code, signal),
                        Settle::Failed(m),
                    )
                }
            }
        }
    };
    ending.stderr_tail = tail;
    (ending, settle)
}

/// Renders a plan as the markdown document a person reads.
pub fn plan_markdown(plan: &Plan) -> String {
    let mut out = format!("# {}\n\n{}\n", plan.title, plan.description.trim());
    for (heading, items) in [
        ("Acceptance criteria", &plan.acceptance_criteria),
        ("Open questions", &plan.open_questions),
        ("Dependencies", &plan.dependencies),
    ] {
        if !items.is_empty() {
            out.push_str(&format!("\n## {heading}\n\n"));
            for item in items {
                out.push_str(&format!("- {item}\n"));
            }
        }
    }
    out
}

/// Records the end of a run and settles its ticket in one transaction. Returns the question
/// record created from the plan's open questions, if any.
async fn record_end(
    s: &Session,
    ticket: TicketId,
    run: RunId,
    ending: runs::Ending,
    settle: Settle,
) -> Option<planwire_protocol::Question> {
    let result = s
        .store
        .write(move |c| {
            runs::finish(c, run, &ending)?;
            transcript::end_open_agent_runs(c, run, ending.status.as_str())?;
            let mut question = None;
            let status = match settle {
                Settle::Planned { plan, update } => {
                    tickets::set_plan(c, ticket, &plan)?;
                    if !update.is_empty() {
                        tickets::add_message(c, ticket, Some(run), "response", &update)?;
                    }
                    tickets::add_message(c, ticket, Some(run), "plan", &plan_markdown(&plan))?;
                    if plan.open_questions.is_empty() {
                        TicketStatus::Planned
                    } else {
                        let items: Vec<QuestionItem> = plan
                            .open_questions
                            .iter()
                            .enumerate()
                            .map(|(i, q)| QuestionItem {
                                header: format!("Question {}", i + 1),
                                question: q.clone(),
                                options: Vec::new(),
                                multi_select: false,
                                allow_other: true,
                            })
                            .collect();
                        let q =
                            questions::create(c, ticket, run, QuestionSource::Plan, &items, None)?;
                        let text = plan
                            .open_questions
                            .iter()
                            .map(|q| format!("- {q}"))
                            .collect::<Vec<_>>();
                        tickets::add_message(c, ticket, Some(run), "question", &text.join("\n"))?;
                        question = Some(q);
                        TicketStatus::NeedsInput
                    }
                }
                Settle::Failed(message) => {
                    tickets::add_message(c, ticket, Some(run), "error", &message)?;
                    TicketStatus::Failed
                }
                Settle::Stopped => {
                    tickets::add_message(c, ticket, Some(run), "status", "Planning was stopped.")?;
                    TicketStatus::Stopped
                }
            };
            tickets::set_status(c, ticket, status)?;
            Ok(question)
        })
        .await;
    match result {
        Ok(q) => q,
        Err(e) => {
            tracing::error!("run {run}: cannot record its end: {e}");
            None
        }
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
            s.outbox
                .notify("planwire/runChanged", RunChangedParams { run })
                .await;
            s.outbox
                .notify("planwire/ticketChanged", TicketChangedParams { ticket })
                .await;
        }
        Err(e) => tracing::error!("cannot read run {run} to notify it: {e}"),
    }
}

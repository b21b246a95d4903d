//! The driver of one `codex app-server` pass: the handshake, the turn, its questions, its
//! stop, and its end (see the module docs of [`super`] for the conversation).
//!
//! One task, one loop: the runner's commands, the handshake's responses, Codex's messages and
//! the child's exit are served together, so a request in flight never keeps Codex's
//! notifications waiting. The pass ends at `turn/completed` (stdin is closed and Codex exits
//! by itself; the group is stopped if it lingers), at a stop (`turn/interrupt`, then the
//! group), when the handshake fails, or when Codex exits; then every message already written
//! is read, and [`Report::End`] goes last.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use planwire_protocol::ErrorCode;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::events::{Mapper, Output};
use super::requests::{self, Handling};
use super::stdio::Stdio;
use super::DEVELOPER_INSTRUCTIONS;
use crate::planners::driver::{AskId, Command, Driver, Exit, PassEnd, PassIo, Reply, Report, StopWhy};
use crate::supervisor::Supervised;
use crate::transport::{Incoming, ReaderEvent, RequestId, ResponseError};

/// How long Codex has to exit by itself once its stdin is closed.
const EXIT_WAIT: Duration = Duration::from_secs(5);
/// How long a stop waits for `turn/interrupt` to be answered before it stops the group.
const INTERRUPT_WAIT: Duration = Duration::from_secs(2);
/// How long messages already written are still read after the end.
const DRAIN: Duration = Duration::from_secs(2);
/// A message that gives no event still tells the runner Codex is at work, this often at most.
const BUSY_EVERY: Duration = Duration::from_secs(1);

/// Notifications this client never needs (UI state), turned off at `initialize`.
const OPT_OUT: [&str; 3] = [
    "account/rateLimits/updated",
    "thread/readState/changed",
    "remoteControl/status/changed",
];

/// What the pass asks of Codex.
#[derive(Debug, Clone)]
pub struct Start {
    pub prompt: String,
    pub model: Option<String>,
    /// The ticket's variant, as the plan mode's `reasoning_effort`.
    pub effort: Option<String>,
    /// The thread to resume.
    pub resume: Option<String>,
    pub cwd: PathBuf,
    /// Codex's own sandbox mode for the thread (`read-only`).
    pub sandbox: &'static str,
}

pub struct AppServerDriver {
    pub start: Start,
}

impl Driver for AppServerDriver {
    fn drive(self: Box<Self>, child: Supervised, io: PassIo) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(run(self.start, child, io))
    }
}

/// The handshake step whose response is awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Initialize,
    Thread,
    Turn,
}

type Response = Pin<Box<dyn Future<Output = Result<Value, ResponseError>> + Send>>;

/// A question the turn waits on.
struct Ask {
    request: RequestId,
    ids: Vec<String>,
}

struct Pass {
    start: Start,
    stdio: Stdio,
    reports: crate::planners::driver::Reporter,
    grace: Duration,
    map: Mapper,
    thread: Option<String>,
    turn: Option<String>,
    asks: HashMap<AskId, Ask>,
    next_ask: AskId,
    /// The handshake's own failure.
    error: Option<String>,
    session_not_found: bool,
    last_report: Instant,
}

async fn run(start: Start, mut child: Supervised, io: PassIo) {
    let PassIo {
        reports,
        mut commands,
        grace,
    } = io;
    let Some((stdio, mut incoming)) = Stdio::connect(&mut child, reports.clone()) else {
        let status = child.stop(grace).await;
        let end = PassEnd {
            exit: Exit::Exited(status),
            stderr_tail: child.stderr_tail().await,
            final_text: String::new(),
            all_text: String::new(),
            text_dropped: false,
            session_id: None,
            error_message: Some("codex app-server was started without a stdin pipe".into()),
            missing_answer: None,
            session_not_found: false,
        };
        let _ = reports.send(Report::End(end)).await;
        return;
    };
    let mut p = Pass {
        start,
        stdio,
        reports,
        grace,
        map: Mapper::new(),
        thread: None,
        turn: None,
        asks: HashMap::new(),
        next_ask: 1,
        error: None,
        session_not_found: false,
        last_report: Instant::now(),
    };
    let mut step: Option<(Step, Response)> = Some((Step::Initialize, p.initialize()));
    let mut closed = false;
    let exit = loop {
        tokio::select! {
            biased;
            cmd = commands.recv() => match cmd {
                Some(Command::Answer { ask, reply, done }) => {
                    let _ = done.send(p.answer(ask, reply).await);
                }
                Some(Command::Stop(why)) => break p.stop(why, &mut child).await,
                // The run is gone: nothing may outlive it.
                None => break p.stop(StopWhy::Stopped, &mut child).await,
            },
            result = awaited(&mut step), if step.is_some() => {
                let (kind, _) = step.take().expect("a step was awaited");
                match p.on_step(kind, result).await {
                    Some(next) => step = Some(next),
                    None if kind == Step::Turn && p.error.is_none() => {}
                    None => break p.close(&mut child, &mut incoming).await,
                }
            }
            msg = incoming.recv(), if !closed => match msg {
                Some(ReaderEvent::Message(msg)) => {
                    if p.on_message(msg).await {
                        break p.close(&mut child, &mut incoming).await;
                    }
                }
                _ => closed = true,
            },
            // The leader's exit ends the pass (a crash, or a config error before any message).
            status = child.wait() => {
                child.reap_group().await;
                break Exit::Exited(status.ok());
            }
        }
    };
    p.stdio.close_stdin();
    // What was written before the end is still read: the group is gone, so the pipe ends.
    while let Ok(Some(ReaderEvent::Message(msg))) = tokio::time::timeout(DRAIN, incoming.recv()).await {
        if let Incoming::Notification { method, params } = msg {
            p.map_notification(&method, &params).await;
        }
    }
    let mut out = Output::default();
    p.map.finish(&mut out);
    p.send(out).await;
    let stderr_tail = child.stderr_tail().await;
    let end = PassEnd {
        exit,
        final_text: p.map.final_text(),
        all_text: p.map.all_text(),
        text_dropped: p.map.text_dropped(),
        session_id: p.map.session_id().map(str::to_owned),
        error_message: p.error.clone().or_else(|| p.map.error_message()),
        missing_answer: p.map.explain_missing_answer(),
        session_not_found: p.session_not_found,
        stderr_tail,
    };
    let _ = p.reports.send(Report::End(end)).await;
}

/// The response of the step in flight (never ready when there is none).
async fn awaited(step: &mut Option<(Step, Response)>) -> Result<Value, ResponseError> {
    match step {
        Some((_, response)) => response.as_mut().await,
        None => std::future::pending().await,
    }
}

impl Pass {
    fn request(&self, method: &'static str, params: Value) -> Response {
        let outbox = self.stdio.outbox.clone();
        Box::pin(async move { outbox.request(method, params).await })
    }

    fn initialize(&self) -> Response {
        let params = json!({
            "clientInfo": { "name": "planwire", "title": "planwire", "version": env!("CARGO_PKG_VERSION") },
            "capabilities": { "experimentalApi": true, "optOutNotificationMethods": OPT_OUT },
        });
        self.request("initialize", params)
    }

    /// `thread/start`, or `thread/resume` of the ticket's session, in its sandbox mode and
    /// never asking for approval.
    fn open_thread(&self) -> Response {
        let mut params = json!({
            "cwd": self.start.cwd,
            "sandbox": self.start.sandbox,
            "approvalPolicy": "never",
        });
        if let Some(model) = &self.start.model {
            params["model"] = json!(model);
        }
        match &self.start.resume {
            Some(thread) => {
                params["threadId"] = json!(thread);
                params["excludeTurns"] = json!(true);
                self.request("thread/resume", params)
            }
            None => self.request("thread/start", params),
        }
    }

    fn start_turn(&self, thread: &str, model: &str) -> Response {
        let params = json!({
            "threadId": thread,
            "input": [{ "type": "text", "text": self.start.prompt }],
            "collaborationMode": {
                "mode": "plan",
                "settings": {
                    "model": model,
                    "reasoning_effort": self.start.effort,
                    "developer_instructions": DEVELOPER_INSTRUCTIONS,
                },
            },
        });
        self.request("turn/start", params)
    }

    /// A handshake response: the next step, or `None` (the handshake is done, or failed: then
    /// `error` says why).
    async fn on_step(&mut self, step: Step, result: Result<Value, ResponseError>) -> Option<(Step, Response)> {
        let value = match result {
            Ok(value) => value,
            Err(e) => {
                self.on_step_error(step, e);
                return None;
            }
        };
        match step {
            Step::Initialize => {
                self.stdio.outbox.notify("initialized", Value::Null).await;
                Some((Step::Thread, self.open_thread()))
            }
            Step::Thread => {
                let thread = value["thread"]["id"].as_str().unwrap_or_default().to_owned();
                let model = value["model"].as_str().unwrap_or_default().to_owned();
                if thread.is_empty() || model.is_empty() {
                    self.error = Some(format!("Codex opened no usable thread: {value}"));
                    return None;
                }
                let mut out = Output::default();
                self.map.thread(&thread, &mut out);
                self.send(out).await;
                let next = self.start_turn(&thread, &model);
                self.thread = Some(thread);
                Some((Step::Turn, next))
            }
            Step::Turn => {
                self.turn = value["turn"]["id"].as_str().map(str::to_owned);
                None
            }
        }
    }

    fn on_step_error(&mut self, step: Step, e: ResponseError) {
        // The transport fails a request whose peer went away: Codex's own exit and stderr
        // then say what happened.
        if e.code == ErrorCode::InternalError.code() && e.message == "connection closed" {
            return;
        }
        let method = match step {
            Step::Initialize => "initialize",
            Step::Thread if self.start.resume.is_some() => "thread/resume",
            Step::Thread => "thread/start",
            Step::Turn => "turn/start",
        };
        self.session_not_found = step == Step::Thread && e.message.contains("no rollout found for thread id");
        self.error = Some(format!("codex app-server: {method} failed: {}", e.message));
    }

    /// One message from Codex; true once the turn is over.
    async fn on_message(&mut self, msg: Incoming) -> bool {
        match msg {
            Incoming::Notification { method, params } => {
                if method == "serverRequest/resolved" {
                    // Resolved without us (an interrupt): nobody waits on that question now.
                    let id = params.get("requestId").cloned();
                    self.asks.retain(|_, a| serde_json::to_value(&a.request).ok() != id);
                }
                self.map_notification(&method, &params).await;
                self.map.turn_ended()
            }
            Incoming::Request { id, method, params } => {
                self.on_request(id, &method, &params).await;
                false
            }
            // Responses are matched inside the transport.
            Incoming::Response { .. } => false,
        }
    }

    async fn map_notification(&mut self, method: &str, params: &Value) {
        let mut out = Output::default();
        self.map.notification(method, params, &mut out);
        if out.is_empty() {
            if self.last_report.elapsed() >= BUSY_EVERY {
                self.last_report = Instant::now();
                let _ = self.reports.send(Report::Busy).await;
            }
            return;
        }
        self.send(out).await;
    }

    async fn send(&mut self, out: Output) {
        if out.is_empty() {
            return;
        }
        self.last_report = Instant::now();
        if !out.events.is_empty() {
            let _ = self.reports.send(Report::Events(out.events)).await;
        }
        for (agent, kind, text) in out.deltas {
            let _ = self.reports.send(Report::Delta { agent, kind, text }).await;
        }
        for plan in out.plans {
            let _ = self.reports.send(Report::PlanCandidate(plan)).await;
        }
    }

    async fn on_request(&mut self, id: RequestId, method: &str, params: &Value) {
        match requests::handle(method, params) {
            Handling::Ask { items, ids } => {
                let mut out = Output::default();
                self.map.before_question(&mut out);
                self.send(out).await;
                let ask = self.next_ask;
                self.next_ask += 1;
                self.asks.insert(ask, Ask { request: id, ids });
                let _ = self.reports.send(Report::Ask { ask, items }).await;
            }
            Handling::Respond(result) => self.stdio.outbox.respond(Some(&id), Ok(result)).await,
            Handling::Reject(error) => self.stdio.outbox.respond_error(Some(&id), error).await,
        }
    }

    async fn answer(&mut self, ask: AskId, reply: Reply) -> Result<(), String> {
        let Some(a) = self.asks.remove(&ask) else {
            return Err("the planner is not waiting on this question".into());
        };
        let result = requests::answer(&a.ids, &reply);
        self.stdio.outbox.respond(Some(&a.request), Ok(result)).await;
        Ok(())
    }

    /// The person's stop, or a time limit: the turn is interrupted (so the thread records it),
    /// then the group is stopped.
    async fn stop(&mut self, why: StopWhy, child: &mut Supervised) -> Exit {
        if let (Some(thread), Some(turn)) = (&self.thread, &self.turn) {
            let params = json!({ "threadId": thread, "turnId": turn });
            let interrupt = self.stdio.outbox.request("turn/interrupt", params);
            let _ = tokio::time::timeout(INTERRUPT_WAIT.min(self.grace), interrupt).await;
        }
        Exit::from_stop(why, child.stop(self.grace).await)
    }

    /// The turn is over (or the handshake failed): stdin closes and Codex exits by itself;
    /// what it still writes meanwhile is read. After a completed turn, the turn is the pass's
    /// success: a Codex that lingers (and is stopped) or fails on its way out loses no answer.
    async fn close(&mut self, child: &mut Supervised, incoming: &mut tokio::sync::mpsc::Receiver<ReaderEvent>) -> Exit {
        let exit = self.wait_exit(child, incoming).await;
        match exit {
            Exit::Exited(Some(status)) if status.success() => exit,
            _ if self.map.turn_completed() => {
                tracing::warn!("codex app-server ended badly after its turn completed: {exit:?}");
                Exit::Exited(Some(std::os::unix::process::ExitStatusExt::from_raw(0)))
            }
            _ => exit,
        }
    }

    async fn wait_exit(
        &mut self,
        child: &mut Supervised,
        incoming: &mut tokio::sync::mpsc::Receiver<ReaderEvent>,
    ) -> Exit {
        self.stdio.close_stdin();
        let deadline = tokio::time::sleep(EXIT_WAIT);
        tokio::pin!(deadline);
        let mut closed = false;
        loop {
            tokio::select! {
                status = child.wait() => {
                    child.reap_group().await;
                    return Exit::Exited(status.ok());
                }
                msg = incoming.recv(), if !closed => match msg {
                    Some(ReaderEvent::Message(Incoming::Notification { method, params })) => {
                        self.map_notification(&method, &params).await;
                    }
                    Some(ReaderEvent::Message(_)) => {}
                    _ => closed = true,
                },
                _ = &mut deadline => return Exit::Exited(child.stop(self.grace).await),
            }
        }
    }
}

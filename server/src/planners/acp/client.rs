//! planwire as the ACP client of one agent process: one pass.
//!
//! initialize (fs reads inside the roots, no writes, no terminal, elicitation forms) →
//! `session/new` (or `session/load` / `session/resume` to continue a session) → the plan mode
//! (before any prompt; the run records which) → `session/prompt`, re-prompted once when a
//! refused permission ended the turn with no plan. Meanwhile every request of the agent is
//! answered: permissions by [`updates::decide`], file reads, elicitations (as live questions),
//! and anything else with -32601. A stop is `session/cancel`, then the process group: agents
//! answer the cancel and stay alive. The agent's stdout lines come from the supervisor and
//! feed the shared JSON-RPC transport (NDJSON), its stdin is the transport's writer.

use std::collections::HashMap;
use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitStatus;

use agent_client_protocol_schema::v1::{
    CreateElicitationRequest, ElicitationMode, ElicitationPropertySchema, InitializeResponse, LoadSessionResponse,
    NewSessionResponse, ReadTextFileRequest, RequestPermissionRequest, SessionConfigOption, SessionModeState,
    SessionNotification,
};
use planwire_protocol::{ErrorCode, EventBody, QuestionItem, QuestionOption};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::updates::{choose_mode, decide, ModeChoice, Turn};
use super::AgentSpec;
use crate::planners::driver::{AskId, Command, Driver, Exit, PassEnd, PassIo, PassRequest, Reply, Report, StopWhy};
use crate::planners::plan::extract_plan;
use crate::planners::ParsedEvent;
use crate::supervisor::{OutputLine, Supervised};
use crate::transport::{self, Codec, Incoming, Outbox, ReaderEvent, RequestId, ResponseError};

/// The one re-prompt after a refused permission ended the turn with no plan.
const REPROMPT: &str = "That was refused because planning is read-only: nothing may be written, edited \
or run. Do not try again. Give your final answer now: a short update, then the complete plan as JSON inside \
<planwire-plan>…</planwire-plan> with the keys title, description, acceptanceCriteria, openQuestions and dependencies.";

/// How long a cancelled prompt may take to be answered before the group is stopped.
const CANCEL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The largest file served to `fs/read_text_file`.
const READ_MAX: u64 = 8 * 1024 * 1024;

pub struct AcpDriver {
    spec: AgentSpec,
    req: PassRequest,
}

impl AcpDriver {
    pub fn new(spec: AgentSpec, req: PassRequest) -> AcpDriver {
        AcpDriver { spec, req }
    }
}

impl Driver for AcpDriver {
    fn drive(self: Box<Self>, child: Supervised, io: PassIo) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(run(*self, child, io))
    }
}

/// Why talking to the agent stopped before the pass was done.
enum Halt {
    Stop(StopWhy),
    Exited(Option<ExitStatus>),
    /// The agent closed its output (it is exiting).
    Closed,
}

struct Conn {
    out: Outbox,
    incoming: mpsc::Receiver<ReaderEvent>,
    io: PassIo,
    child: Supervised,
    roots: Vec<PathBuf>,
    session: Option<String>,
    turn: Turn,
    /// While `session/load` replays the history: its updates are not this pass's events.
    replaying: bool,
    /// A permission was refused in the current turn.
    refused: bool,
    /// Elicitations the agent waits on: their request id and form fields, by ask id.
    asks: HashMap<AskId, (RequestId, Vec<Field>)>,
    next_ask: AskId,
    error: Option<String>,
    missing_answer: Option<String>,
    session_not_found: bool,
}

/// One field of an elicitation form, as a question item.
struct Field {
    name: String,
    /// `true`: an array of strings (a multi-select).
    multi: bool,
}

async fn run(d: AcpDriver, mut child: Supervised, io: PassIo) {
    let stdin = child.stdin.take();
    let output = std::mem::replace(&mut child.output, mpsc::channel(1).1);
    let (feed, lines) = tokio::io::duplex(256 * 1024);
    tokio::spawn(forward(output, feed));
    let (out, incoming) = match stdin {
        Some(stdin) => transport::start_with(Codec::Ndjson, tokio::io::BufReader::new(lines), stdin),
        None => {
            tracing::error!("an ACP agent was started without a stdin pipe");
            return;
        }
    };
    let mut roots: Vec<PathBuf> = d
        .req
        .read_roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    if roots.is_empty() {
        roots.extend(std::fs::canonicalize(&d.req.root).ok());
    }
    let mut c = Conn {
        out,
        incoming,
        io,
        child,
        roots,
        session: None,
        turn: Turn::default(),
        replaying: false,
        refused: false,
        asks: HashMap::new(),
        next_ask: 1,
        error: None,
        missing_answer: None,
        session_not_found: false,
    };
    let exit = match c.pass(&d.spec, &d.req).await {
        // The agent is a server: a finished pass ends its process, and that end is clean.
        Ok(()) => {
            c.child.stop(c.io.grace).await;
            Exit::Exited(Some(ExitStatus::from_raw(0)))
        }
        Err(Halt::Stop(why)) => Exit::from_stop(why, c.child.stop(c.io.grace).await),
        Err(Halt::Exited(status)) => {
            c.child.reap_group().await;
            Exit::Exited(status)
        }
        Err(Halt::Closed) => {
            let status = tokio::time::timeout(std::time::Duration::from_secs(2), c.child.wait()).await;
            c.child.stop(c.io.grace).await;
            Exit::Exited(status.ok().and_then(Result::ok))
        }
    };
    let mut last = c.turn.finish();
    if last.is_empty() {
        last = Vec::new();
    }
    if !last.is_empty() {
        let _ = c.io.reports.send(Report::Events(last)).await;
    }
    let stderr_tail = c.child.stderr_tail().await;
    let end = PassEnd {
        exit,
        stderr_tail,
        final_text: c.turn.last_text.clone(),
        all_text: c.turn.all_text.join("\n"),
        text_dropped: c.turn.all_text.dropped(),
        session_id: c.session.clone(),
        error_message: c.error.take(),
        missing_answer: c.missing_answer.take(),
        session_not_found: c.session_not_found,
    };
    let _ = c.io.reports.send(Report::End(end)).await;
}

/// The agent's stdout lines, as the byte stream the transport reads.
async fn forward(mut output: mpsc::Receiver<OutputLine>, mut feed: tokio::io::DuplexStream) {
    while let Some(line) = output.recv().await {
        match line {
            OutputLine::Line(text) => {
                if feed.write_all(text.as_bytes()).await.is_err() || feed.write_all(b"\n").await.is_err() {
                    return;
                }
            }
            OutputLine::Truncated { len, .. } => tracing::warn!("an ACP agent wrote a {len}-byte line; skipped"),
        }
    }
}

impl Conn {
    async fn pass(&mut self, spec: &AgentSpec, req: &PassRequest) -> Result<(), Halt> {
        let init = json!({
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": { "readTextFile": true, "writeTextFile": false },
                "terminal": false,
                "elicitation": { "form": {} },
            },
            "clientInfo": { "name": "planwire", "version": env!("CARGO_PKG_VERSION") },
        });
        let init: InitializeResponse = match self.typed("initialize", init).await? {
            Ok(r) => r,
            Err(e) => return self.fail(format!("the ACP agent {} did not initialize: {}", spec.name, e.message)),
        };
        let cwd = req.root.display().to_string();
        let (modes, options) = match &req.resume {
            Some(id) => match self.continue_session(&init, id, &cwd).await? {
                Some(state) => state,
                None => {
                    self.session_not_found = true;
                    return Ok(());
                }
            },
            None => {
                let params = json!({ "cwd": cwd, "mcpServers": [] });
                let created: NewSessionResponse = match self.typed("session/new", params).await? {
                    Ok(r) => r,
                    Err(e) => {
                        return self.fail(format!(
                            "the ACP agent {} could not start a session: {}",
                            spec.name, e.message
                        ))
                    }
                };
                self.session = Some(created.session_id.0.to_string());
                (created.modes, created.config_options.unwrap_or_default())
            }
        };
        let session = self.session.clone().unwrap_or_default();
        self.report(vec![ParsedEvent::main(EventBody::Session {
            provider_session_id: session.clone(),
        })])
        .await;
        self.select_mode(spec, &session, modes.as_ref(), &options).await?;
        if self.error.is_some() {
            return Ok(());
        }
        self.prompt(&session, &req.prompt).await?;
        let planned = extract_plan(&self.turn.all_text.join("\n")).is_some();
        if !planned && self.refused && self.error.is_none() {
            self.prompt(&session, REPROMPT).await?;
            if extract_plan(&self.turn.all_text.join("\n")).is_none() {
                self.missing_answer = Some(format!(
                    "the ACP agent {} ended its turn without a plan after a refused permission, twice",
                    spec.name
                ));
            }
        }
        Ok(())
    }

    /// `session/load` or `session/resume` of `id`; `None` when the agent cannot continue it.
    async fn continue_session(
        &mut self,
        init: &InitializeResponse,
        id: &str,
        cwd: &str,
    ) -> Result<Option<(Option<SessionModeState>, Vec<SessionConfigOption>)>, Halt> {
        let params = json!({ "sessionId": id, "cwd": cwd, "mcpServers": [] });
        let method = if init.agent_capabilities.load_session {
            "session/load"
        } else if init.agent_capabilities.session_capabilities.resume.is_some() {
            "session/resume"
        } else {
            return Ok(None);
        };
        self.replaying = true;
        let answer = self.typed::<LoadSessionResponse>(method, params).await;
        self.replaying = false;
        self.turn = Turn::default();
        match answer? {
            Ok(r) => {
                self.session = Some(id.to_owned());
                Ok(Some((r.modes, r.config_options.unwrap_or_default())))
            }
            Err(e) => {
                tracing::info!("{method} {id}: {}", e.message);
                Ok(None)
            }
        }
    }

    /// Selects the plan or read-only mode before any prompt, and records it; refuses to plan
    /// without one unless the agent is configured `allowNoPlanMode`.
    async fn select_mode(
        &mut self,
        spec: &AgentSpec,
        session: &str,
        modes: Option<&SessionModeState>,
        options: &[SessionConfigOption],
    ) -> Result<(), Halt> {
        let choice = choose_mode(spec.mode.as_deref(), modes, options);
        let (mode, via) = match &choice {
            Some(ModeChoice::Mode(id)) => {
                let params = json!({ "sessionId": session, "modeId": id });
                if let Err(e) = self.call("session/set_mode", params).await? {
                    return self.fail(format!(
                        "the ACP agent {} refused its mode {id}: {}",
                        spec.name, e.message
                    ));
                }
                choice.as_ref().map(ModeChoice::describe).unwrap_or_default()
            }
            Some(ModeChoice::Config { config_id, value }) => {
                let params = json!({ "sessionId": session, "configId": config_id, "value": value });
                if let Err(e) = self.call("session/set_config_option", params).await? {
                    return self.fail(format!(
                        "the ACP agent {} refused {config_id}={value}: {}",
                        spec.name, e.message
                    ));
                }
                choice.as_ref().map(ModeChoice::describe).unwrap_or_default()
            }
            None if spec.allow_no_plan_mode => ("none".to_owned(), "allowNoPlanMode"),
            None => {
                return self.fail(format!(
                    "the ACP agent {} offers no plan or read-only mode, and in its default mode an agent may \
                     write without asking: planwire will not plan with it. Set acpAgents.{}.mode to its \
                     read-only mode, or allowNoPlanMode: true to plan anyway (the sandbox still holds)",
                    spec.name, spec.name
                ))
            }
        };
        // Recorded on the run, in its transcript.
        let line = json!({ "acpMode": mode, "via": via }).to_string();
        self.report(vec![ParsedEvent::main(EventBody::Raw { line })]).await;
        Ok(())
    }

    async fn prompt(&mut self, session: &str, text: &str) -> Result<(), Halt> {
        self.refused = false;
        self.turn.last_text.clear();
        let params = json!({ "sessionId": session, "prompt": [{ "type": "text", "text": text }] });
        let answer = self.call("session/prompt", params).await?;
        let events = self.turn.finish();
        self.report(events).await;
        match answer {
            Ok(r) => {
                if r.get("stopReason").and_then(Value::as_str) == Some("refusal") {
                    self.error = Some("the ACP agent refused to answer".into());
                }
            }
            Err(e) => self.error = Some(e.message),
        }
        Ok(())
    }

    fn fail(&mut self, message: String) -> Result<(), Halt> {
        self.error = Some(message);
        Ok(())
    }

    async fn typed<T: serde::de::DeserializeOwned>(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<Result<T, ResponseError>, Halt> {
        Ok(self.call(method, params).await?.and_then(|v| {
            serde_json::from_value(v).map_err(|e| {
                ResponseError::new(ErrorCode::InternalError, format!("an unexpected {method} answer: {e}"))
            })
        }))
    }

    /// A request to the agent; meanwhile the agent's requests and updates and the run's
    /// commands are served.
    async fn call(&mut self, method: &str, params: Value) -> Result<Result<Value, ResponseError>, Halt> {
        let out = self.out.clone();
        let m = method.to_owned();
        let mut answer = Box::pin(async move { out.request(&m, params).await });
        loop {
            tokio::select! {
                biased;
                cmd = self.io.commands.recv() => match cmd {
                    Some(Command::Stop(why)) => {
                        self.cancel(&mut answer).await;
                        return Err(Halt::Stop(why));
                    }
                    Some(Command::Answer { ask, reply, done }) => {
                        let _ = done.send(self.answer(ask, reply).await);
                    }
                    // The run is gone: nothing may outlive it.
                    None => return Err(Halt::Stop(StopWhy::Stopped)),
                },
                r = &mut answer => {
                    // The reader queued what the agent sent before this answer (its updates of
                    // the turn) before it matched the answer: handle them first.
                    while let Ok(event) = self.incoming.try_recv() {
                        match event {
                            ReaderEvent::Message(msg) => self.on_message(msg).await,
                            ReaderEvent::Closed { .. } => break,
                        }
                    }
                    return Ok(r);
                }
                event = self.incoming.recv() => match event {
                    Some(ReaderEvent::Message(msg)) => self.on_message(msg).await,
                    Some(ReaderEvent::Closed { .. }) | None => return Err(Halt::Closed),
                },
                status = self.child.wait() => return Err(Halt::Exited(status.ok())),
            }
        }
    }

    /// `session/cancel`, and a moment for the agent to answer the pending request (every
    /// agent tried answers the prompt `cancelled` and stays alive: its group goes next).
    async fn cancel(&mut self, answer: &mut Pin<Box<impl Future<Output = Result<Value, ResponseError>>>>) {
        let Some(session) = self.session.clone() else { return };
        self.out.notify("session/cancel", json!({ "sessionId": session })).await;
        let wait = self.io.grace.min(CANCEL_WAIT);
        let _ = tokio::time::timeout(wait, async {
            loop {
                tokio::select! {
                    _ = &mut *answer => return,
                    event = self.incoming.recv() => match event {
                        Some(ReaderEvent::Message(msg)) => self.on_message(msg).await,
                        _ => return,
                    },
                }
            }
        })
        .await;
    }

    async fn report(&self, events: Vec<ParsedEvent>) {
        if !events.is_empty() {
            let _ = self.io.reports.send(Report::Events(events)).await;
        }
    }

    async fn on_message(&mut self, msg: Incoming) {
        match msg {
            Incoming::Notification { method, params } if method == "session/update" => {
                if self.replaying {
                    return;
                }
                let Ok(note) = serde_json::from_value::<SessionNotification>(params) else {
                    tracing::debug!("an ACP update planwire does not know");
                    return;
                };
                let (events, deltas) = self.turn.update(note.update);
                for (kind, text) in deltas {
                    let _ = self
                        .io
                        .reports
                        .send(Report::Delta {
                            agent: None,
                            kind,
                            text,
                        })
                        .await;
                }
                self.report(events).await;
            }
            Incoming::Notification { method, .. } => tracing::debug!("ignored ACP notification {method}"),
            Incoming::Request { id, method, params } => {
                let answer = self.on_request(&id, &method, params).await;
                if let Some(answer) = answer {
                    self.out.respond(Some(&id), answer).await;
                }
            }
            Incoming::Response { .. } => {}
        }
    }

    /// The answer to an agent's request; `None` when it is answered later (an elicitation).
    async fn on_request(
        &mut self,
        id: &RequestId,
        method: &str,
        params: Value,
    ) -> Option<Result<Value, ResponseError>> {
        match method {
            "session/request_permission" => Some(match serde_json::from_value::<RequestPermissionRequest>(params) {
                Ok(req) => Ok(self.permission(&req).await),
                Err(e) => Err(ResponseError::new(ErrorCode::InvalidParams, e.to_string())),
            }),
            "fs/read_text_file" => Some(match serde_json::from_value::<ReadTextFileRequest>(params) {
                Ok(req) => read_file(&self.roots, &req).map(|content| json!({ "content": content })),
                Err(e) => Err(ResponseError::new(ErrorCode::InvalidParams, e.to_string())),
            }),
            "fs/write_text_file" => Some(Err(ResponseError::new(
                ErrorCode::InvalidRequest,
                "planwire plans read-only: writing files is refused",
            ))),
            "elicitation/create" => match serde_json::from_value::<CreateElicitationRequest>(params) {
                Ok(req) => self.elicit(id, req).await,
                Err(e) => Some(Err(ResponseError::new(ErrorCode::InvalidParams, e.to_string()))),
            },
            other => Some(Err(ResponseError::new(
                ErrorCode::MethodNotFound,
                format!("planwire does not handle {other}"),
            ))),
        }
    }

    async fn permission(&mut self, req: &RequestPermissionRequest) -> Value {
        let d = decide(req, &self.turn.kinds);
        if d.refused {
            self.refused = true;
        }
        if let Some(plan) = d.plan_candidate {
            let _ = self.io.reports.send(Report::PlanCandidate(plan)).await;
        }
        tracing::info!("ACP permission: {}", d.note);
        match d.option {
            Some(option) => json!({ "outcome": { "outcome": "selected", "optionId": option } }),
            None => json!({ "outcome": { "outcome": "cancelled" } }),
        }
    }

    /// A form elicitation becomes a live question; any other kind is declined.
    async fn elicit(&mut self, id: &RequestId, req: CreateElicitationRequest) -> Option<Result<Value, ResponseError>> {
        let ElicitationMode::Form(form) = &req.mode else {
            return Some(Ok(json!({ "action": "decline" })));
        };
        let mut items = Vec::new();
        let mut fields = Vec::new();
        for (name, schema) in &form.requested_schema.properties {
            let (item, multi) = question_item(name, schema, &req.message);
            items.push(item);
            fields.push(Field {
                name: name.clone(),
                multi,
            });
        }
        if items.is_empty() {
            return Some(Ok(json!({ "action": "decline" })));
        }
        let ask = self.next_ask;
        self.next_ask += 1;
        self.asks.insert(ask, (id.clone(), fields));
        let _ = self.io.reports.send(Report::Ask { ask, items }).await;
        None
    }

    async fn answer(&mut self, ask: AskId, reply: Reply) -> Result<(), String> {
        let (id, fields) = self
            .asks
            .remove(&ask)
            .ok_or_else(|| "the agent is not waiting on this question".to_owned())?;
        let result = match reply {
            Reply::Dismiss => json!({ "action": "decline" }),
            Reply::Answers(answers) => {
                let mut content = serde_json::Map::new();
                for (field, answer) in fields.iter().zip(&answers) {
                    let parts = crate::planners::driver::answer_parts(answer);
                    let value = if field.multi {
                        json!(parts)
                    } else {
                        json!(parts.join(", "))
                    };
                    content.insert(field.name.clone(), value);
                }
                json!({ "action": "accept", "content": content })
            }
        };
        self.out.respond(Some(&id), Ok(result)).await;
        Ok(())
    }
}

/// A form field as a question item: a choice for an enum, a text for the rest.
fn question_item(name: &str, schema: &ElicitationPropertySchema, message: &str) -> (QuestionItem, bool) {
    let v = serde_json::to_value(schema).unwrap_or(Value::Null);
    let title = v
        .get("title")
        .or_else(|| v.get("description"))
        .and_then(Value::as_str)
        .unwrap_or(if message.is_empty() { name } else { message })
        .to_owned();
    let labels = |list: Option<&Value>| -> Vec<QuestionOption> {
        list.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|o| o.as_str().or_else(|| o.get("const").and_then(Value::as_str)))
                    .map(|l| QuestionOption {
                        label: l.to_owned(),
                        description: None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let multi = v.get("type").and_then(Value::as_str) == Some("array");
    let options = if multi {
        let items = v.get("items");
        let mut o = labels(items.and_then(|i| i.get("enum")));
        o.extend(labels(items.and_then(|i| i.get("anyOf"))));
        o
    } else {
        let mut o = labels(v.get("enum"));
        o.extend(labels(v.get("oneOf")));
        o
    };
    let item = QuestionItem {
        header: name.to_owned(),
        question: title,
        allow_other: options.is_empty(),
        options,
        multi_select: multi,
    };
    (item, multi)
}

/// `fs/read_text_file`, inside the roots only; `line` is 1-based, `limit` counts lines.
fn read_file(roots: &[PathBuf], req: &ReadTextFileRequest) -> Result<String, ResponseError> {
    let denied = |why: &str| ResponseError::new(ErrorCode::InvalidParams, format!("{}: {why}", req.path.display()));
    let path = std::fs::canonicalize(&req.path).map_err(|e| denied(&e.to_string()))?;
    if !roots.iter().any(|r| path.starts_with(r)) {
        return Err(denied(
            "outside the project; planwire serves reads of the project's roots only",
        ));
    }
    let meta = std::fs::metadata(&path).map_err(|e| denied(&e.to_string()))?;
    if meta.len() > READ_MAX {
        return Err(denied("the file is too large to read"));
    }
    let text = read_text(&path).map_err(|e| denied(&e))?;
    let start = req.line.map_or(0, |l| l.saturating_sub(1) as usize);
    Ok(match (start, req.limit) {
        (0, None) => text,
        (s, limit) => text
            .split_inclusive('\n')
            .skip(s)
            .take(limit.map_or(usize::MAX, |l| l as usize))
            .collect(),
    })
}

fn read_text(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_served_inside_the_roots_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(dir.path().join("secret"), "no").unwrap();
        let roots = vec![std::fs::canonicalize(&root).unwrap()];
        let req = |p: PathBuf, line: Option<u32>, limit: Option<u32>| -> ReadTextFileRequest {
            serde_json::from_value(json!({"sessionId": "s", "path": p, "line": line, "limit": limit})).unwrap()
        };
        assert_eq!(
            read_file(&roots, &req(root.join("a.txt"), None, None)).unwrap(),
            "one\ntwo\nthree\n"
        );
        assert_eq!(
            read_file(&roots, &req(root.join("a.txt"), Some(2), Some(1))).unwrap(),
            "two\n"
        );
        assert!(read_file(&roots, &req(dir.path().join("secret"), None, None)).is_err());
        // A path that climbs out through `..` is judged by where it leads.
        assert!(read_file(&roots, &req(root.join("../secret"), None, None)).is_err());
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("link")).unwrap();
        assert!(read_file(&roots, &req(root.join("link"), None, None)).is_err());
    }

    #[test]
    fn form_fields_become_question_items() {
        let schema: ElicitationPropertySchema =
            serde_json::from_value(json!({"type": "string", "title": "Which greeting?", "enum": ["Hello", "Hi"]}))
                .unwrap();
        let (item, multi) = question_item("greeting", &schema, "");
        assert!(!multi);
        assert_eq!(item.question, "Which greeting?");
        assert_eq!(item.options.len(), 2);
        let schema: ElicitationPropertySchema = serde_json::from_value(json!({"type": "string"})).unwrap();
        let (item, _) = question_item("name", &schema, "What is it called?");
        assert_eq!(item.question, "What is it called?");
        assert!(item.allow_other && item.options.is_empty());
    }
}

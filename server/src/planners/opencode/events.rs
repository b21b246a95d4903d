//! OpenCode's server events (`GET /event`, one JSON object per SSE event) into planwire's
//! events, live deltas, questions and permission answers: the [`Mapper`], a pure state
//! machine the driver feeds, tested on events recorded from the real server
//! (`tests/fixtures/opencode/serve/`).
//!
//! The stream carries every session of the server's instance plus noise (`plugin.added`,
//! `catalog.updated`, `server.heartbeat`, …). What the mapper does with it:
//!
//! - **Whose events.** Only the pass's session (the root, set by the driver once it created
//!   or resumed it) and its subagent sessions count: a `session.created` whose `parentID` is
//!   one of them adds a child, keyed by its own session id (its agent key).
//! - **Roles.** `message.updated` gives each message's role. The prompt comes back as a text
//!   part of the user message: only parts of assistant messages are kept.
//! - **Text and reasoning.** A part starts empty (`time.start`), grows by
//!   `message.part.delta` (each a [`Out::Delta`], never stored) and ends whole (`time.end`
//!   set): that finished part is the stored event, once (parts are updated several times, so
//!   part ids are tracked). Which text is the final answer is known at its step's
//!   `step-finish`: finished text is held per agent and flushed there, `final` when the main
//!   agent's step ends with `stop`. A tool part, a question, a new step, an error or the end
//!   flushes held text as not final first, so the order of the stream is kept. A text part
//!   still open when a tool part or a question of its agent appears (the text part only ends
//!   when the model's whole response has) is stored as far as it streamed, and a later end
//!   adds only what it lacks.
//! - **Tools.** A tool part is `pending` (no input yet), `running`, then `completed` or
//!   `error`: one `toolCall` at `running` (or the first later state), one `toolResult` at the
//!   terminal state, matched by `callID`. A `task` starts a subagent (its child session id is
//!   in `state.metadata.sessionId`); the child's own parts stream live under its key, and the
//!   task's result (`<task … state="…"><task_result>…`) ends it.
//! - **Usage.** Each `step-finish` (main or child) adds its tokens and cost to the run's
//!   totals, and a `usage` event with the running totals follows: the last one is the run's.
//!   `inputTokens` is `tokens.input` (uncached), `outputTokens` is `tokens.output +
//!   tokens.reasoning`.
//! - **Status.** `session.status` `busy` or `retry` (and each heartbeat while busy) is
//!   [`Out::Busy`]; `idle` after busy (or `session.idle`) ends the turn: [`Out::Idle`].
//! - **Errors.** `session.error` becomes a typed `error` event (as `run`'s `error` lines
//!   were); an abort (`MessageAbortedError`) is planwire's own stop and says nothing; a locked
//!   database ("database is locked", or a turn's bare "Failed to execute statement") is
//!   [`Out::Locked`], for the driver to retry.
//! - **Questions and permissions** of the pass's sessions become [`Out::Ask`] and
//!   [`Out::Permission`] (see `permissions.rs`). `question.asked` can arrive before the
//!   text written before the call has ended: that text is flushed first.
//!
//! After a cut stream the driver replays the session's messages from the API
//! ([`Mapper::reconcile`]); every part is handled at most once, so a replay adds only what the
//! stream missed.

use std::collections::{HashMap, HashSet};

use planwire_protocol::{DeltaKind, ErrorKind, EventBody, QuestionItem, QuestionOption};
use serde_json::{json, Value};

use super::super::{classify_api_error, str_of, strip_ansi, ParsedEvent, Subagents};
use super::permissions;

/// What one server event asks of the driver, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Events(Vec<ParsedEvent>),
    Delta {
        agent: Option<String>,
        kind: DeltaKind,
        text: String,
    },
    /// The agent asks and waits: reply to question `request`.
    Ask {
        request: String,
        items: Vec<QuestionItem>,
    },
    /// Answer permission request `request` with `reply` (the body of its reply call).
    Permission {
        request: String,
        reply: Value,
    },
    /// The server is at work.
    Busy,
    /// The root session's turn ended.
    Idle,
    /// OpenCode's database was locked (another OpenCode process held it): the turn failed
    /// and may be retried.
    Locked,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Totals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cost: f64,
}

/// A text or reasoning part seen streaming.
#[derive(Debug)]
pub(super) struct Part {
    pub agent: Option<String>,
    pub kind: DeltaKind,
    /// The deltas so far.
    pub text: String,
    /// How much of `text` was stored before the part ended (flushed early, see the module doc).
    pub stored: Option<usize>,
    pub ended: bool,
    /// Arrival order.
    pub seq: u64,
}

#[derive(Debug, Default)]
pub struct Mapper {
    pub(super) root: Option<String>,
    /// The pass's sessions → their agent key (`None` for the root).
    pub(super) sessions: HashMap<String, Option<String>>,
    /// A child session's label (its task's description).
    pub(super) labels: HashMap<String, String>,
    /// Message id → true for an assistant message.
    pub(super) assistant: HashMap<String, bool>,
    /// Messages that were there before this pass (a resumed session's history).
    pub(super) before: HashSet<String>,
    pub(super) parts: HashMap<String, Part>,
    pub(super) part_seq: u64,
    /// Step parts already handled (a replay must not count them twice).
    pub(super) steps_seen: HashSet<String>,
    pub(super) calls: HashSet<String>,
    pub(super) results: HashSet<String>,
    /// Finished text and reasoning per agent, until its step ends.
    pub(super) held: Vec<(Option<String>, EventBody)>,
    pub(super) subagents: Subagents,
    pub(super) main_text: crate::planners::TextTail,
    pub(super) final_text: crate::planners::TextTail,
    pub(super) totals: Totals,
    pub(super) steps: u32,
    pub(super) last_reason: Option<String>,
    /// Tool calls whose permission was rejected, as `tool input`.
    pub(super) rejected: Vec<String>,
    pub(super) last_error: Option<(ErrorKind, String)>,
    pub(super) error_message: Option<String>,
    /// The root session is busy (a turn runs).
    pub(super) busy: bool,
    /// The root session was busy since the last prompt: the turn started.
    started: bool,
    /// Questions and permission requests already handed on.
    requests: HashSet<String>,
    pub(super) out: Vec<Out>,
}

impl Mapper {
    pub fn new() -> Self {
        Self::default()
    }

    /// The pass's session, once created or resumed: its `session` event. Messages in
    /// `history` (a resumed session's) are never replayed as new.
    pub fn set_root(&mut self, session: &str, history: impl IntoIterator<Item = String>) -> ParsedEvent {
        self.root = Some(session.to_owned());
        self.sessions.insert(session.to_owned(), None);
        self.before.extend(history);
        ParsedEvent::main(EventBody::Session {
            provider_session_id: session.to_owned(),
        })
    }

    /// One server event (the JSON of one SSE `data`). Never panics; what it does not know
    /// it ignores (the stream is mostly other sessions' events and noise).
    pub fn on_event(&mut self, event: &Value) -> Vec<Out> {
        let props = event.get("properties").unwrap_or(&Value::Null);
        match str_of(event, "type").unwrap_or("") {
            "session.created" | "session.updated" => self.on_session(props),
            "session.status" => {
                let status = props.pointer("/status/type").and_then(Value::as_str).unwrap_or("");
                self.on_status(props, status);
            }
            "session.idle" => self.on_status(props, "idle"),
            "session.error" => self.on_error(props),
            "server.heartbeat" if self.busy => self.out.push(Out::Busy),
            "message.updated" => self.on_message(props),
            "message.part.updated" => self.on_part(props),
            "message.part.delta" => self.on_delta(props),
            "question.asked" => self.on_question(props),
            "permission.asked" => self.on_permission(props),
            _ => {}
        }
        std::mem::take(&mut self.out)
    }

    /// Replays the root session's messages (`GET /session/:id/message`) after a cut stream
    /// or before the end: only what the stream missed comes out.
    pub fn reconcile(&mut self, messages: &Value) -> Vec<Out> {
        let Some(root) = self.root.clone() else {
            return Vec::new();
        };
        for m in messages.as_array().into_iter().flatten() {
            let info = m.get("info").unwrap_or(&Value::Null);
            if str_of(info, "id").is_some_and(|id| self.before.contains(id)) {
                continue;
            }
            self.on_message(&json!({ "sessionID": root, "info": info }));
            for part in m.get("parts").and_then(Value::as_array).into_iter().flatten() {
                self.on_part(&json!({ "sessionID": root, "part": part }));
            }
        }
        // A replay answers no question: those are asked live or found pending by the driver.
        let mut out = std::mem::take(&mut self.out);
        out.retain(|o| matches!(o, Out::Events(_)));
        out
    }

    /// At the end of the pass: held text is flushed as not final, open subagents end as
    /// `interrupted`. A text part still streaming (a stop mid-block) is not stored: its
    /// deltas were a preview, and the block ends with the run. Idempotent.
    pub fn finish(&mut self) -> Vec<ParsedEvent> {
        let agents: Vec<Option<String>> = self.held.iter().map(|(a, _)| a.clone()).collect();
        for agent in agents {
            self.flush(&agent, false);
        }
        let mut ended = Vec::new();
        self.subagents.interrupt_open(&mut ended);
        for ev in ended {
            self.emit(ev);
        }
        let mut events = Vec::new();
        for o in std::mem::take(&mut self.out) {
            if let Out::Events(e) = o {
                events.extend(e);
            }
        }
        events
    }

    /// A fatal error the driver met (the server broke, a call failed): an `error` event, and
    /// the run's error message.
    pub fn fail(&mut self, kind: ErrorKind, message: &str) -> Vec<Out> {
        self.note_error(None, kind, message.to_owned(), true);
        std::mem::take(&mut self.out)
    }

    /// A note in the transcript (an `error` event of kind `unknown`); the run goes on.
    pub fn note(&mut self, message: &str) -> Vec<Out> {
        self.emit(ParsedEvent::main(EventBody::Error {
            error_kind: ErrorKind::Unknown,
            message: message.to_owned(),
        }));
        std::mem::take(&mut self.out)
    }

    pub fn session_id(&self) -> Option<String> {
        self.root.clone()
    }

    /// The text of the last main step that ended with `stop`, joined by blank lines.
    pub fn final_text(&self) -> String {
        self.final_text.join("\n\n")
    }

    /// The main agent's texts in order, joined by blank lines, as far back as
    /// [`TEXT_TAIL`](crate::planners::TEXT_TAIL).
    pub fn all_text(&self) -> String {
        self.main_text.join("\n\n")
    }

    /// Older main-agent text than [`all_text`](Self::all_text) holds was let go.
    pub fn text_dropped(&self) -> bool {
        self.main_text.dropped()
    }

    pub fn error_message(&self) -> Option<String> {
        self.error_message.clone()
    }

    /// The main agent finished a step with `stop`: its answer is complete.
    pub fn answered(&self) -> bool {
        self.last_reason.as_deref() == Some("stop")
    }

    /// The model produced anything in this pass (a step started).
    pub fn produced(&self) -> bool {
        self.steps > 0
    }

    /// The driver prompts the session (again).
    pub fn prompted(&mut self) {
        self.started = false;
    }

    /// The turn of the last prompt started (the session went busy): its prompt is in the
    /// session.
    pub fn started(&self) -> bool {
        self.started
    }

    /// A question or permission request of one of the pass's sessions, not handed on yet
    /// (from `GET /question` or `GET /permission` after a cut stream).
    pub fn on_pending(&mut self, kind: &str, request: &Value) -> Vec<Out> {
        self.on_event(&json!({ "type": kind, "properties": request }))
    }

    /// Why a pass with no final answer has none (see `LineParser::explain_missing_answer`).
    pub fn explain_missing_answer(&self, stderr_tail: &str) -> Option<String> {
        if !self.final_text.is_empty() {
            return None;
        }
        if !self.rejected.is_empty() {
            return Some(format!(
                "OpenCode ended without an answer: a permission request was rejected ({}).",
                self.rejected.join("; ")
            ));
        }
        let message = match self.last_reason.as_deref() {
            None if self.steps == 0 => {
                let stderr = strip_ansi(stderr_tail);
                match stderr.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
                    Some(last) => format!("OpenCode ended without any output: {last}"),
                    None => "OpenCode ended without any output.".to_owned(),
                }
            }
            None => "OpenCode ended without a final answer: its last step never finished.".to_owned(),
            Some("stop") => "OpenCode ended without an answer: the model returned an empty reply.".to_owned(),
            Some("length") => {
                "OpenCode ended without a final answer: the reply was cut off at the model's output limit.".to_owned()
            }
            Some("unknown") => {
                "OpenCode ended without a final answer: the model's response stream was cut off.".to_owned()
            }
            Some(reason) => format!("OpenCode ended without a final answer (its last step ended with `{reason}`)."),
        };
        Some(message)
    }

    /// The agent key of a session of the pass (`None` inside: the root); `None` outside.
    pub(super) fn agent_of(&self, session: Option<&str>) -> Option<Option<String>> {
        self.sessions.get(session?).cloned()
    }

    pub(super) fn emit(&mut self, ev: ParsedEvent) {
        match self.out.last_mut() {
            Some(Out::Events(events)) => events.push(ev),
            _ => self.out.push(Out::Events(vec![ev])),
        }
    }

    fn on_session(&mut self, props: &Value) {
        let info = props.get("info").unwrap_or(&Value::Null);
        let (Some(id), Some(parent)) = (str_of(info, "id"), str_of(info, "parentID")) else {
            return;
        };
        if self.sessions.contains_key(id) || !self.sessions.contains_key(parent) {
            return;
        }
        self.sessions.insert(id.to_owned(), Some(id.to_owned()));
        if let Some(title) = str_of(info, "title") {
            // "Find greeting (@explore subagent)"
            let label = match title.rfind(" (@") {
                Some(cut) if title.ends_with(')') => &title[..cut],
                _ => title,
            };
            self.labels.entry(id.to_owned()).or_insert_with(|| label.to_owned());
        }
    }

    fn on_status(&mut self, props: &Value, status: &str) {
        let session = str_of(props, "sessionID");
        if self.agent_of(session).is_none() {
            return;
        }
        let root = session == self.root.as_deref();
        match status {
            "busy" | "retry" => {
                self.busy |= root;
                self.started |= root;
                self.out.push(Out::Busy);
            }
            "idle" if root && self.busy => {
                self.busy = false;
                self.out.push(Out::Idle);
            }
            _ => {}
        }
    }

    fn on_error(&mut self, props: &Value) {
        let session = str_of(props, "sessionID");
        let Some(agent) = self.agent_of(session) else {
            return;
        };
        let Some(error) = props.get("error").filter(|e| e.is_object()) else {
            return;
        };
        let name = str_of(error, "name").unwrap_or("");
        if name == "MessageAbortedError" {
            return;
        }
        let data = error.get("data").unwrap_or(&Value::Null);
        let message = str_of(data, "message")
            .filter(|m| !m.trim().is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| {
                if name.is_empty() {
                    "OpenCode reported an error".to_owned()
                } else {
                    name.to_owned()
                }
            });
        if agent.is_none() && is_locked(&message) {
            self.flush(&None, false);
            // The failed turn's own idle, should it come late, ends nothing.
            self.busy = false;
            self.out.push(Out::Locked);
            return;
        }
        let kind = match name {
            "ProviderAuthError" => ErrorKind::Auth,
            "ContextOverflowError" => ErrorKind::ContextOverflow,
            _ => {
                let status = data.get("statusCode").and_then(Value::as_i64);
                let body: Option<Value> = str_of(data, "responseBody").and_then(|b| serde_json::from_str(b).ok());
                let detail = body.as_ref().and_then(|b| b.get("error"));
                let code = detail
                    .and_then(|d| str_of(d, "code").or_else(|| str_of(d, "type")))
                    .or_else(|| body.as_ref().and_then(|b| str_of(b, "type")));
                classify_api_error(status, code, &message)
            }
        };
        let root = agent.is_none();
        self.note_error(agent, kind, message, root);
        // A turn that failed before it started is over: no idle follows.
        if root && !self.busy {
            self.out.push(Out::Idle);
        }
    }

    /// An `error` event (a repeat of the last one is shown once); `fatal` makes it the run's.
    fn note_error(&mut self, agent: Option<String>, kind: ErrorKind, message: String, fatal: bool) {
        self.flush(&agent, false);
        if fatal {
            self.error_message.get_or_insert_with(|| message.clone());
        }
        let this = (kind, message);
        if self.last_error.as_ref() != Some(&this) {
            self.last_error = Some(this.clone());
            self.emit(ParsedEvent {
                agent,
                body: EventBody::Error {
                    error_kind: this.0,
                    message: this.1,
                },
            });
        }
    }

    fn on_message(&mut self, props: &Value) {
        let info = props.get("info").unwrap_or(&Value::Null);
        if let Some(id) = str_of(info, "id") {
            if let Some(role) = str_of(info, "role") {
                self.assistant.insert(id.to_owned(), role == "assistant");
            }
        }
    }

    fn on_question(&mut self, props: &Value) {
        let session = str_of(props, "sessionID");
        let Some(agent) = self.agent_of(session) else {
            return;
        };
        let Some(request) = str_of(props, "id").filter(|_| self.fresh_request(props)) else {
            return;
        };
        let items = question_items(props.get("questions").unwrap_or(&Value::Null));
        self.close_open_parts(&agent);
        self.flush(&agent, false);
        if let Some(call) = props.pointer("/tool/callID").and_then(Value::as_str) {
            let summary: Vec<&str> = items.iter().map(|i| i.question.as_str()).collect();
            self.tool_call(&agent, call, "question", &summary.join(" / "));
        }
        self.out.push(Out::Ask {
            request: request.to_owned(),
            items,
        });
    }

    fn on_permission(&mut self, props: &Value) {
        if self.agent_of(str_of(props, "sessionID")).is_none() || !self.fresh_request(props) {
            return;
        }
        let Some(request) = str_of(props, "id") else {
            return;
        };
        let permission = str_of(props, "permission").unwrap_or("");
        let patterns: Vec<String> = props
            .get("patterns")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        self.out.push(Out::Permission {
            request: request.to_owned(),
            reply: permissions::reply(permission, &patterns),
        });
    }

    /// True the first time a request id is seen.
    fn fresh_request(&mut self, props: &Value) -> bool {
        str_of(props, "id").is_some_and(|id| self.requests.insert(id.to_owned()))
    }
}

/// OpenCode's error when its SQLite database was locked: "database is locked" in the cause,
/// or, from the turn itself, only "Failed to execute statement" (its `SqlError`).
fn is_locked(message: &str) -> bool {
    message.contains("database is locked") || message.trim() == "Failed to execute statement"
}

/// OpenCode's questions as planwire's items: `multiple` means several choices; a custom
/// answer is always possible (`allowOther`).
pub fn question_items(questions: &Value) -> Vec<QuestionItem> {
    questions
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| QuestionItem {
            header: str_of(q, "header").unwrap_or("").to_owned(),
            question: str_of(q, "question").unwrap_or("").to_owned(),
            options: q
                .get("options")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|o| QuestionOption {
                    label: str_of(o, "label").unwrap_or("").to_owned(),
                    description: str_of(o, "description").filter(|d| !d.is_empty()).map(str::to_owned),
                })
                .collect(),
            multi_select: q.get("multiple").and_then(Value::as_bool).unwrap_or(false),
            allow_other: true,
        })
        .collect()
}

//! Claude Code adapter: the argv and environment of a plan run, and the stateful parser that
//! turns `claude -p --output-format stream-json --verbose` stdout into normalized events.
//!
//! Ground truth is the recordings copied into `tests/fixtures/claude/` (from the shared notes on
//! the real CLI). The traps they show, and what this parser does about each:
//!
//! - **One `assistant` line per content block**, all sharing `message.id`. Main-thread text is
//!   buffered per message and flushed when a later main-thread message, a `tool_use`, a
//!   main-thread `user` line, the `result` line or EOF ([`ClaudeParser::finish`]) arrives. Only
//!   the flush at a `result` with `is_error: false` marks text `final`; a flush anywhere else
//!   (including an error `result`, e.g. after SIGINT) leaves it not final. A `thinking` block
//!   that follows buffered text of the same message is queued behind it, so order is kept.
//! - **`result.result` is only the last text block**, so the parser keeps its own copy of the
//!   text blocks ([`ClaudeParser::final_text`], [`ClaudeParser::all_text`]), as far back as
//!   [`TEXT_TAIL`](super::TEXT_TAIL): memory stays flat in the stream's length, and older text
//!   is in the store. Only if a successful `result` arrives with no final text buffered is
//!   `result.result` used.
//! - **`subtype: "success"` with `is_error: true` is an error**: `is_error` decides, not
//!   `subtype` (a missing `is_error` falls back to `subtype` starting with `error`).
//! - **API errors print a synthetic `assistant` line** (`message.model: "<synthetic>"`, a
//!   top-level `error`) just before the `result`. That line becomes the run's one `error`
//!   event; the error `result` that follows does not add a second. Its text is not assistant
//!   text (it is in neither `final_text` nor `all_text`).
//! - **`system/api_retry` emits nothing.** The retry is not fatal and the run either recovers
//!   or ends with an error anyway; its `error_status` / `error` are remembered (until the next
//!   real assistant line) and used to classify that error.
//! - **No `result` line** (SIGTERM, crash): `finish()` flushes the buffered text as not final
//!   and ends still-open subagents with status `interrupted`. `saw_result()` stays false.
//! - **Subagents**: an `Agent` (API name) or `Task` (the name `system/init` reports) tool call
//!   starts one, keyed by its tool_use id; lines whose `parent_tool_use_id` is that id carry
//!   it as their agent key. `system/task_notification` ends it (it arrives first), else the
//!   tool_result of the call does. A call with `run_in_background: true` is only ended by its
//!   notification (or EOF), since its tool_result arrives at launch.
//!
//! Lines consumed on purpose without an event: blank lines; `stream_event` (partial-message
//! deltas: the whole blocks follow as `assistant` lines); `system/thinking_tokens` (a token
//! estimate); `system/status` (`requesting` spinner state; one that reports a
//! `permissionMode` other than `plan` is kept as raw, since planning must never leave plan
//! mode); `system/task_progress` and `system/task_updated` (subagent progress; start and end
//! come from the tool call, `task_started` and `task_notification`); `system/task_started` for
//! an already started subagent; `system/api_retry` (see above); user-role text and image blocks
//! (the CLI echoing a subagent prompt or "[Request interrupted by user]"); empty text and
//! thinking blocks and `redacted_thinking` blocks; `control_request` and `control_response`
//! (queued for [`ClaudeParser::take_control_requests`] / [`ClaudeParser::take_control_responses`]).
//! Everything else unknown (a non-JSON or truncated line, an unknown type, subtype or block)
//! becomes `raw { line }`, cut at [`RAW_LINE_MAX`] bytes.

use std::borrow::Cow;
use std::collections::HashSet;

use planwire_protocol::{DeltaKind, ErrorKind, EventBody, ToolStatus};
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::json;
use serde_json::Value;

use super::writable::Env;
use super::{
    each_field, emit_held, flag_value_ok, parse_json_line, parse_typed_line, str_of, summarize_fields, truncate_chars,
    LineParser, ParsedEvent, Skip, Str, Subagents, TextTail,
};
use planwire_sandbox::Writable;

/// Longest tool input summary, in characters (an ellipsis is added when cut).
pub const INPUT_SUMMARY_MAX: usize = 200;
/// Longest tool output summary, in characters (an ellipsis is added when cut).
pub const OUTPUT_SUMMARY_MAX: usize = 500;
/// Longest line kept by a `raw` event, in bytes.
pub const RAW_LINE_MAX: usize = 64 * 1024;

/// A `control_request` the CLI printed in its bidirectional (SDK) mode. For `can_use_tool` it
/// waits for a `control_response` on stdin carrying the same `request_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlRequest {
    pub request_id: String,
    /// `request.subtype`, e.g. `can_use_tool`.
    pub subtype: String,
    /// `request.tool_name` (empty when absent).
    pub tool_name: String,
    /// `request.input` (`Null` when absent).
    pub input: Value,
    pub tool_use_id: Option<String>,
    /// The whole `request` object (`permission_suggestions`, `blocked_path`, …).
    pub request: Value,
}

/// A `control_response` the CLI printed (its answer to a control request of ours, such as
/// `initialize`).
#[derive(Debug, Clone, PartialEq)]
pub struct ControlResponse {
    pub request_id: String,
    /// `response.subtype`: `success` or `error`.
    pub subtype: String,
    /// The whole `response` object.
    pub response: Value,
}

/// Text and reasoning of the main thread's current message, held until we know whether the
/// message is the final answer.
#[derive(Debug)]
struct PendingMessage {
    id: Option<String>,
    events: Vec<EventBody>,
}

#[derive(Debug, Clone, Default)]
struct Retry {
    status: Option<i64>,
    error: Option<String>,
}

/// Stateful parser of one Claude Code run's stdout. Feed every line to
/// [`parse_line`](Self::parse_line), then call [`finish`](Self::finish) at EOF.
#[derive(Debug, Default)]
pub struct ClaudeParser {
    session_id: Option<String>,
    sessions: HashSet<String>,
    pending: Option<PendingMessage>,
    subagents: Subagents,
    /// Subagents started with `run_in_background`: their tool_result arrives at launch, so
    /// only their notification (or EOF) ends them.
    background_subagents: HashSet<String>,
    main_text: TextTail,
    final_text: TextTail,
    saw_result: bool,
    result_is_error: bool,
    result_message: Option<String>,
    synthetic_error: Option<String>,
    synthetic_code: Option<String>,
    error_emitted: bool,
    last_retry: Option<Retry>,
    control_requests: Vec<ControlRequest>,
    control_responses: Vec<ControlResponse>,
    /// Live pieces from `stream_event` lines (`--include-partial-messages`), not yet taken.
    deltas: Vec<(Option<String>, DeltaKind, String)>,
    finished: bool,
}

impl ClaudeParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one stdout line (with or without its line terminator). Never panics; a line it
    /// does not understand comes back as a `raw` event.
    pub fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        // Most lines are `assistant` and `user` lines: they take the typed path, and anything
        // it does not cover takes the `Value` path, with the same result.
        if let Some(out) = parse_typed_line(line, |l: Line, out| self.on_typed(l, out)) {
            return out;
        }
        self.parse_value_line(line)
    }

    /// The `Value` path of [`parse_line`](Self::parse_line): every line type.
    fn parse_value_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        parse_json_line(line, |value, _, out| match str_of(value, "type") {
            Some("system") => self.on_system(value, out),
            Some("assistant") => self.on_assistant(value, out),
            Some("user") => self.on_user(value, out),
            Some("result") => self.on_result(value, out),
            Some("stream_event") => {
                self.on_stream_event(value);
                true
            }
            Some("control_request") => self.on_control_request(value),
            Some("control_response") => self.on_control_response(value),
            _ => false,
        })
    }

    /// Called once at EOF: flushes buffered text (not final: a run that ends without a
    /// `result` has no final answer) and ends subagents that are still open. Idempotent.
    pub fn finish(&mut self) -> Vec<ParsedEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let mut out = Vec::new();
        self.flush(false, &mut out);
        self.subagents.interrupt_open(&mut out);
        out
    }

    /// Control requests seen since the last call, oldest first.
    pub fn take_control_requests(&mut self) -> Vec<ControlRequest> {
        std::mem::take(&mut self.control_requests)
    }

    /// Control responses seen since the last call, oldest first.
    pub fn take_control_responses(&mut self) -> Vec<ControlResponse> {
        std::mem::take(&mut self.control_responses)
    }

    /// The provider session id from the latest `system/init` line. (A `result` line alone, as
    /// for an unknown `--resume` id, does not set it: that session does not exist.)
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    pub fn saw_result(&self) -> bool {
        self.saw_result
    }

    /// True when the `result` line said `is_error`, or a synthetic API error line was seen.
    pub fn is_error(&self) -> bool {
        self.result_is_error || self.synthetic_error.is_some()
    }

    /// The text blocks of the final answer (marked `final`), joined by blank lines.
    pub fn final_text(&self) -> String {
        self.final_text.join("\n\n")
    }

    /// The main-thread text blocks in order, joined by blank lines, as far back as
    /// [`TEXT_TAIL`](super::TEXT_TAIL).
    pub fn all_text(&self) -> String {
        self.main_text.join("\n\n")
    }

    /// The CLI's own error text when [`is_error`](Self::is_error): `result.result`, else
    /// `result.errors` joined, else the synthetic error line's text.
    pub fn error_message(&self) -> Option<String> {
        if self.result_is_error {
            self.result_message.clone()
        } else {
            self.synthetic_error.clone()
        }
    }

    fn on_system(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        match str_of(v, "subtype") {
            Some("init") => {
                let Some(sid) = str_of(v, "session_id").filter(|s| !s.is_empty()) else {
                    return false;
                };
                self.session_id = Some(sid.to_string());
                if self.sessions.insert(sid.to_string()) {
                    out.push(ParsedEvent::main(EventBody::Session {
                        provider_session_id: sid.to_string(),
                    }));
                }
                true
            }
            Some("api_retry") => {
                self.last_retry = Some(Retry {
                    status: v.get("error_status").and_then(Value::as_i64),
                    error: str_of(v, "error").map(str::to_string),
                });
                true
            }
            Some("status") => match str_of(v, "permissionMode") {
                Some(mode) => mode == "plan",
                None => true,
            },
            Some("thinking_tokens") | Some("task_progress") | Some("task_updated") => true,
            Some("task_started") => {
                if let Some(id) = str_of(v, "tool_use_id").filter(|s| !s.is_empty()) {
                    self.subagents.start(id, &subagent_label(v), out);
                }
                true
            }
            Some("task_notification") => {
                if let Some(id) = str_of(v, "tool_use_id") {
                    let status = str_of(v, "status").unwrap_or("completed");
                    self.subagents.end(id, status, out);
                }
                true
            }
            _ => false,
        }
    }

    fn on_assistant(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        let Some(msg) = v.get("message") else {
            return false;
        };
        let Some(content) = msg.get("content").and_then(Value::as_array) else {
            return false;
        };
        let agent = parent_id(v);
        let msg_id = str_of(msg, "id");

        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            self.on_synthetic_error(err.as_str().unwrap_or(""), content, agent, out);
            return true;
        }

        self.begin_message(&agent, msg_id, out);
        let mut recognized = true;
        for block in content {
            match str_of(block, "type") {
                Some("text") => self.on_text(str_of(block, "text").unwrap_or(""), &agent, msg_id, out),
                Some("thinking") => self.on_thinking(str_of(block, "thinking").unwrap_or(""), &agent, out),
                Some("redacted_thinking") => {}
                Some("tool_use") => {
                    let id = str_of(block, "id").unwrap_or("");
                    let name = str_of(block, "name").unwrap_or("");
                    let input = block.get("input").unwrap_or(&Value::Null);
                    self.on_tool_use(id, name, input, &agent, out);
                }
                _ => recognized = false,
            }
        }
        recognized
    }

    /// Before the blocks of an assistant line: a main-thread line ends earlier retries, and
    /// flushes the held message unless it continues it.
    fn begin_message(&mut self, agent: &Option<String>, msg_id: Option<&str>, out: &mut Vec<ParsedEvent>) {
        if agent.is_none() {
            // A real response arrived: earlier retries are over.
            self.last_retry = None;
            let same_message = matches!(&self.pending, Some(p) if p.id.is_some() && p.id.as_deref() == msg_id);
            if !same_message {
                self.flush(false, out);
            }
        }
    }

    /// An assistant `text` block: held when it is the main thread's, else emitted.
    fn on_text(&mut self, text: &str, agent: &Option<String>, msg_id: Option<&str>, out: &mut Vec<ParsedEvent>) {
        if text.is_empty() {
            return;
        }
        let body = EventBody::Text {
            text: text.to_string(),
            is_final: false,
        };
        if agent.is_none() {
            self.main_text.push(text.to_string());
            self.pending
                .get_or_insert_with(|| PendingMessage {
                    id: msg_id.map(str::to_string),
                    events: Vec::new(),
                })
                .events
                .push(body);
        } else {
            out.push(ParsedEvent {
                agent: agent.clone(),
                body,
            });
        }
    }

    /// An assistant `thinking` block: queued behind held text of the main thread, else emitted.
    fn on_thinking(&mut self, text: &str, agent: &Option<String>, out: &mut Vec<ParsedEvent>) {
        if text.is_empty() {
            return;
        }
        let body = EventBody::Reasoning { text: text.to_string() };
        match (&mut self.pending, agent.is_none()) {
            (Some(p), true) => p.events.push(body),
            _ => out.push(ParsedEvent {
                agent: agent.clone(),
                body,
            }),
        }
    }

    /// An assistant `tool_use` block; an `Agent` or `Task` call starts a subagent.
    fn on_tool_use(&mut self, id: &str, name: &str, input: &Value, agent: &Option<String>, out: &mut Vec<ParsedEvent>) {
        if agent.is_none() {
            self.flush(false, out);
        }
        out.push(ParsedEvent {
            agent: agent.clone(),
            body: EventBody::ToolCall {
                call_id: id.to_string(),
                name: name.to_string(),
                input: summarize_input(input),
            },
        });
        if (name == "Agent" || name == "Task") && !id.is_empty() {
            let background = input.get("run_in_background").and_then(Value::as_bool).unwrap_or(false);
            if self.subagents.start(id, &subagent_label(input), out) && background {
                self.background_subagents.insert(id.to_string());
            }
        }
    }

    /// A user `tool_result` block, with its output already summarized; it ends the subagent
    /// its call started (unless that one runs in the background).
    fn on_tool_result(
        &mut self,
        id: &str,
        is_error: bool,
        output: String,
        agent: &Option<String>,
        out: &mut Vec<ParsedEvent>,
    ) {
        if self.subagents.is_open(id) && !self.background_subagents.contains(id) {
            let status = if is_error { "error" } else { "completed" };
            self.subagents.end(id, status, out);
        }
        out.push(ParsedEvent {
            agent: agent.clone(),
            body: EventBody::ToolResult {
                call_id: id.to_string(),
                status: if is_error {
                    ToolStatus::Error
                } else {
                    ToolStatus::Completed
                },
                output,
            },
        });
    }

    /// The typed path of [`parse_line`](Self::parse_line): `assistant`, `user` and
    /// `stream_event` lines of the usual shape. Anything else is declined (`None`) before any
    /// state changes, and goes to the `Value` path.
    fn on_typed(&mut self, line: Line, out: &mut Vec<ParsedEvent>) -> Option<bool> {
        match line.kind.as_deref() {
            Some("stream_event") => {
                self.on_typed_stream_event(&line);
                Some(true)
            }
            Some("assistant") => self.on_typed_assistant(line, out),
            Some("user") => self.on_typed_user(line, out),
            _ => None,
        }
    }

    fn on_typed_stream_event(&mut self, line: &Line) {
        let Some(event) = line
            .event
            .as_ref()
            .filter(|e| e.kind.as_deref() == Some("content_block_delta"))
        else {
            return;
        };
        let Some(delta) = event.delta.as_ref() else {
            return;
        };
        let piece = match delta.kind.as_deref() {
            Some("text_delta") => delta.text.as_deref().map(|t| (DeltaKind::Text, t)),
            Some("thinking_delta") => delta.thinking.as_deref().map(|t| (DeltaKind::Reasoning, t)),
            _ => None,
        };
        if let Some((kind, text)) = piece.filter(|(_, t)| !t.is_empty()) {
            self.deltas
                .push((typed_parent_id(&line.parent_tool_use_id), kind, text.to_owned()));
        }
    }

    fn on_typed_assistant(&mut self, line: Line, out: &mut Vec<ParsedEvent>) -> Option<bool> {
        if line.error.is_some() {
            // A synthetic API error line.
            return None;
        }
        let message = line.message?;
        let Some(Content::Blocks(blocks)) = message.content else {
            return None;
        };
        let known = |b: &Block| {
            matches!(
                b.kind.as_deref(),
                Some("text" | "thinking" | "redacted_thinking" | "tool_use")
            )
        };
        if !blocks.iter().all(known) {
            return None;
        }
        let agent = typed_parent_id(&line.parent_tool_use_id);
        let msg_id = message.id.as_deref();
        self.begin_message(&agent, msg_id, out);
        for block in blocks {
            match block.kind.as_deref() {
                Some("text") => self.on_text(block.text.as_deref().unwrap_or(""), &agent, msg_id, out),
                Some("thinking") => self.on_thinking(block.thinking.as_deref().unwrap_or(""), &agent, out),
                Some("tool_use") => {
                    let input = block.input.unwrap_or(Value::Null);
                    let id = block.id.as_deref().unwrap_or("");
                    let name = block.name.as_deref().unwrap_or("");
                    self.on_tool_use(id, name, &input, &agent, out);
                }
                _ => {}
            }
        }
        Some(true)
    }

    fn on_typed_user(&mut self, line: Line, out: &mut Vec<ParsedEvent>) -> Option<bool> {
        let agent = typed_parent_id(&line.parent_tool_use_id);
        let results = match line.message?.content? {
            // The CLI echoing a prompt.
            Content::Str => Vec::new(),
            Content::Blocks(blocks) => {
                let mut results = Vec::new();
                for block in blocks {
                    match block.kind.as_deref() {
                        Some("tool_result") => {
                            let output = summarize_typed_output(block.content.as_ref())?;
                            let id = block.tool_use_id.unwrap_or_default();
                            results.push((id, block.is_error.unwrap_or(false), output));
                        }
                        Some("text" | "image") => {}
                        _ => return None,
                    }
                }
                results
            }
            Content::Other => return None,
        };
        if agent.is_none() {
            self.flush(false, out);
        }
        for (id, is_error, output) in results {
            self.on_tool_result(&id, is_error, output, &agent, out);
        }
        Some(true)
    }

    /// The CLI's synthetic `assistant` line for an API error: the run's one `error` event.
    fn on_synthetic_error(&mut self, code: &str, content: &[Value], agent: Option<String>, out: &mut Vec<ParsedEvent>) {
        let text = content
            .iter()
            .filter_map(|b| str_of(b, "text"))
            .collect::<Vec<_>>()
            .join("\n");
        let message = if text.is_empty() {
            format!("API error ({code})")
        } else {
            text
        };
        let own_status = status_from_text(&message);
        let retry = if own_status.is_none() {
            self.last_retry.clone().unwrap_or_default()
        } else {
            Retry::default()
        };
        let status = own_status.or(retry.status);
        let codes = [Some(code), retry.error.as_deref()];
        let error_kind = classify(status, &codes, &message);
        if agent.is_none() {
            self.flush(false, out);
            self.synthetic_error = Some(message.clone());
            self.synthetic_code = Some(code.to_string());
            self.error_emitted = true;
        }
        out.push(ParsedEvent {
            agent,
            body: EventBody::Error { error_kind, message },
        });
    }

    fn on_user(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        let agent = parent_id(v);
        if agent.is_none() {
            self.flush(false, out);
        }
        let Some(content) = v.get("message").and_then(|m| m.get("content")) else {
            return false;
        };
        let blocks = match content {
            // The CLI echoing a prompt.
            Value::String(_) => return true,
            Value::Array(blocks) => blocks,
            _ => return false,
        };
        let mut recognized = true;
        for block in blocks {
            match str_of(block, "type") {
                Some("tool_result") => {
                    let id = str_of(block, "tool_use_id").unwrap_or("");
                    let is_error = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    let output = summarize_output(block.get("content"));
                    self.on_tool_result(id, is_error, output, &agent, out);
                }
                Some("text") | Some("image") => {}
                _ => recognized = false,
            }
        }
        recognized
    }

    fn on_result(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        let subtype = str_of(v, "subtype").unwrap_or("");
        let is_error = v
            .get("is_error")
            .and_then(Value::as_bool)
            .unwrap_or_else(|| subtype.starts_with("error"));
        self.flush(!is_error, out);
        self.saw_result = true;
        self.result_is_error = is_error;

        let result_text = str_of(v, "result").filter(|s| !s.is_empty());
        let errors = v
            .get("errors")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("; "))
            .filter(|s| !s.is_empty());

        if !is_error && self.final_text.is_empty() {
            if let Some(text) = result_text {
                // The assistant lines carried no final text: fall back on `result.result`,
                // without repeating a block that was already shown.
                if self.main_text.last().map(String::as_str) != Some(text) {
                    self.main_text.push(text.to_string());
                    out.push(ParsedEvent::main(EventBody::Text {
                        text: text.to_string(),
                        is_final: true,
                    }));
                }
                self.final_text.push(text.to_string());
            }
        }

        if is_error {
            let message = result_text
                .map(str::to_string)
                .or(errors)
                .or_else(|| self.synthetic_error.clone())
                .unwrap_or_else(|| format!("Claude Code reported an error ({subtype})"));
            self.result_message = Some(message.clone());
            if !self.error_emitted {
                self.error_emitted = true;
                let retry = self.last_retry.clone().unwrap_or_default();
                let status = v
                    .get("api_error_status")
                    .and_then(Value::as_i64)
                    .or_else(|| status_from_text(&message))
                    .or(retry.status);
                let codes = [
                    str_of(v, "terminal_reason"),
                    self.synthetic_code.as_deref(),
                    retry.error.as_deref(),
                ];
                out.push(ParsedEvent::main(EventBody::Error {
                    error_kind: classify(status, &codes, &message),
                    message,
                }));
            }
        }

        let usage = v.get("usage").unwrap_or(&Value::Null);
        let tokens = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        out.push(ParsedEvent::main(EventBody::Usage {
            input_tokens: tokens("input_tokens"),
            output_tokens: tokens("output_tokens"),
            cache_read_tokens: tokens("cache_read_input_tokens"),
            cache_write_tokens: tokens("cache_creation_input_tokens"),
            cost_usd: v.get("total_cost_usd").and_then(Value::as_f64).unwrap_or(0.0),
        }));
        true
    }

    /// A partial-message event: its text and thinking deltas are live pieces (the whole block
    /// follows as an `assistant` line, which is what is stored).
    fn on_stream_event(&mut self, v: &Value) {
        let Some(event) = v
            .get("event")
            .filter(|e| str_of(e, "type") == Some("content_block_delta"))
        else {
            return;
        };
        let delta = event.get("delta").unwrap_or(&Value::Null);
        let piece = match str_of(delta, "type") {
            Some("text_delta") => str_of(delta, "text").map(|t| (DeltaKind::Text, t)),
            Some("thinking_delta") => str_of(delta, "thinking").map(|t| (DeltaKind::Reasoning, t)),
            _ => None,
        };
        if let Some((kind, text)) = piece.filter(|(_, t)| !t.is_empty()) {
            self.deltas.push((parent_id(v), kind, text.to_owned()));
        }
    }

    fn on_control_request(&mut self, v: &Value) -> bool {
        let (Some(request_id), Some(request)) = (str_of(v, "request_id"), v.get("request")) else {
            return false;
        };
        self.control_requests.push(ControlRequest {
            request_id: request_id.to_string(),
            subtype: str_of(request, "subtype").unwrap_or("").to_string(),
            tool_name: str_of(request, "tool_name").unwrap_or("").to_string(),
            input: request.get("input").cloned().unwrap_or(Value::Null),
            tool_use_id: str_of(request, "tool_use_id").map(str::to_string),
            request: request.clone(),
        });
        true
    }

    fn on_control_response(&mut self, v: &Value) -> bool {
        let Some(response) = v.get("response") else {
            return false;
        };
        let Some(request_id) = str_of(response, "request_id") else {
            return false;
        };
        self.control_responses.push(ControlResponse {
            request_id: request_id.to_string(),
            subtype: str_of(response, "subtype").unwrap_or("").to_string(),
            response: response.clone(),
        });
        true
    }

    /// Emits the buffered message; its text blocks are final when `is_final`.
    fn flush(&mut self, is_final: bool, out: &mut Vec<ParsedEvent>) {
        if let Some(pending) = self.pending.take() {
            emit_held(pending.events, is_final, &mut self.final_text, out);
        }
    }
}

impl LineParser for ClaudeParser {
    fn take_control_requests(&mut self) -> Vec<ControlRequest> {
        ClaudeParser::take_control_requests(self)
    }
    fn take_deltas(&mut self) -> Vec<(Option<String>, DeltaKind, String)> {
        std::mem::take(&mut self.deltas)
    }
    fn saw_result(&self) -> bool {
        ClaudeParser::saw_result(self)
    }
    fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        ClaudeParser::parse_line(self, line)
    }
    fn finish(&mut self) -> Vec<ParsedEvent> {
        ClaudeParser::finish(self)
    }
    fn session_id(&self) -> Option<String> {
        ClaudeParser::session_id(self).map(str::to_owned)
    }
    fn all_text(&self) -> String {
        ClaudeParser::all_text(self)
    }
    fn text_dropped(&self) -> bool {
        self.main_text.dropped()
    }
    fn final_text(&self) -> String {
        ClaudeParser::final_text(self)
    }
    fn error_message(&self) -> Option<String> {
        if self.is_error() {
            ClaudeParser::error_message(self).or_else(|| Some("the planner reported an error".into()))
        } else {
            None
        }
    }
    fn session_not_found(&self, _stderr_tail: &str) -> bool {
        // An unknown `--resume` id: exit 1 with this error result.
        self.is_error()
            && ClaudeParser::error_message(self).is_some_and(|m| m.starts_with("No conversation found with session ID"))
    }
}

/// `--strict-mcp-config --mcp-config {"mcpServers":{}}`: the planner starts no MCP server at
/// all. `--setting-sources user` keeps a repository's `.mcp.json` out but not the servers a
/// user added (`claude mcp add`, in `~/.claude.json`, user or local scope), and one of those
/// may be `planwire mcp` itself: a plan must never reach planwire's own tools (no recursion),
/// nor any other server the planner's sandbox would have to contain. `--mcp-config` takes
/// several values, so a flag must follow it (never the prompt).
const NO_MCP_SERVERS: [&str; 3] = ["--strict-mcp-config", "--mcp-config", r#"{"mcpServers":{}}"#];

/// The argv (without the program) of a plan run:
/// `-p --strict-mcp-config --mcp-config {"mcpServers":{}} --output-format stream-json --verbose
/// --permission-mode plan --setting-sources user [--model M] [--resume S | --session-id UUID]
/// PROMPT`. `resume` wins over `session_id` when both are
/// given. A model or id that is empty, starts with `-` or holds control characters is left
/// out (it could be read as a flag). The prompt must start with fixed preamble text (see
/// `prompt.rs`), never with `-`; it is passed as one argument, never through a shell.
pub fn argv(model: Option<&str>, resume: Option<&str>, session_id: Option<&str>, prompt: &str) -> Vec<String> {
    debug_assert!(
        !prompt.starts_with('-'),
        "a planner prompt must start with its fixed preamble, never with '-'"
    );
    let mut args: Vec<String> = ["-p"]
        .into_iter()
        .chain(NO_MCP_SERVERS)
        .chain([
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "plan",
            "--setting-sources",
            "user",
        ])
        .map(|s| s.to_string())
        .collect();
    if let Some(model) = model.filter(|m| flag_value_ok(m)) {
        args.push("--model".to_string());
        args.push(model.to_string());
    }
    if let Some(resume) = resume.filter(|r| flag_value_ok(r)) {
        args.push("--resume".to_string());
        args.push(resume.to_string());
    } else if let Some(id) = session_id.filter(|s| flag_value_ok(s)) {
        args.push("--session-id".to_string());
        args.push(id.to_string());
    }
    if prompt.starts_with('-') {
        // Release builds: defence in depth, a leading space is not a flag.
        args.push(format!(" {prompt}"));
    } else {
        args.push(prompt.to_string());
    }
    args
}

/// Environment for the CLI: few retries (the default of 10 takes about 3 minutes on a
/// persistent error), and no updater, telemetry, error reporting or other extra traffic.
pub fn env() -> Vec<(&'static str, String)> {
    vec![
        ("CLAUDE_CODE_MAX_RETRIES", "2".to_string()),
        ("DISABLE_AUTOUPDATER", "1".to_string()),
        ("DISABLE_TELEMETRY", "1".to_string()),
        ("DISABLE_ERROR_REPORTING", "1".to_string()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
    ]
}

/// Where Claude Code may write under the OS sandbox (see [`super::writable`]).
///
/// Refused without these: `mkdir ~/.claude` (sessions, so no --resume) and the
/// `~/.claude.json.tmp.*` + rename into HOME; it then rewrites `.claude.json` in
/// place. Its `~/.claude.json.lock` (a mkdir in HOME) stays refused: it goes on.
pub fn writable(env: &Env) -> Vec<Writable> {
    if let Some(d) = env.var("CLAUDE_CONFIG_DIR") {
        return vec![Writable::dir(
            d,
            "Claude Code's config directory (CLAUDE_CONFIG_DIR): sessions, plans, its .claude.json",
        )];
    }
    let state = env.home(".claude").map(|p| {
        Writable::dir(
            p,
            "Claude Code's state: sessions (projects/, for --resume), plans, todos, shell snapshots",
        )
    });
    let file = env.home(".claude.json").map(|p| {
        // Claude Code takes an empty .claude.json for a corrupt one.
        Writable::file(p, "{}\n", "Claude Code's global state file, rewritten in place")
    });
    state.into_iter().chain(file).collect()
}

fn parent_id(v: &Value) -> Option<String> {
    str_of(v, "parent_tool_use_id")
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn subagent_label(v: &Value) -> String {
    str_of(v, "description")
        .filter(|s| !s.trim().is_empty())
        .or_else(|| str_of(v, "subagent_type").filter(|s| !s.trim().is_empty()))
        .unwrap_or("subagent")
        .to_string()
}

/// A short summary of a tool's input: the first of its path, command, pattern, url, query or
/// description, else its compact JSON; at most [`INPUT_SUMMARY_MAX`] characters.
pub fn summarize_input(input: &Value) -> String {
    // AskUserQuestion: the questions themselves.
    if let Some(qs) = input.get("questions").and_then(Value::as_array) {
        let texts: Vec<&str> = qs
            .iter()
            .filter_map(|q| q.get("question").and_then(Value::as_str))
            .collect();
        if !texts.is_empty() {
            return truncate_chars(&texts.join(" / "), INPUT_SUMMARY_MAX);
        }
    }
    summarize_fields(
        input,
        &[
            "file_path",
            "notebook_path",
            "command",
            "pattern",
            "url",
            "query",
            "description",
        ],
    )
}

/// A truncated summary of a tool_result's `content`: a string, or a list of blocks (text
/// blocks joined by newlines, images as `[image]`); at most [`OUTPUT_SUMMARY_MAX`] characters.
pub fn summarize_output(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => truncate_chars(s, OUTPUT_SUMMARY_MAX),
        Some(Value::Array(blocks)) => {
            let mut parts: Vec<String> = Vec::new();
            let mut len = 0;
            for block in blocks {
                if len > OUTPUT_SUMMARY_MAX {
                    break;
                }
                let part = match (str_of(block, "type"), str_of(block, "text")) {
                    (_, Some(text)) => truncate_chars(text, OUTPUT_SUMMARY_MAX + 1),
                    (Some("image"), None) => "[image]".to_string(),
                    _ => truncate_chars(&block.to_string(), OUTPUT_SUMMARY_MAX + 1),
                };
                len += part.chars().count() + 1;
                parts.push(part);
            }
            truncate_chars(&parts.join("\n"), OUTPUT_SUMMARY_MAX)
        }
        Some(other) => truncate_chars(&other.to_string(), OUTPUT_SUMMARY_MAX),
    }
}

/// The HTTP status in the CLI's "API Error: 529 Overloaded…" texts.
fn status_from_text(text: &str) -> Option<i64> {
    let rest = &text[text.find("API Error: ")? + "API Error: ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if digits.len() == 3 {
        digits.parse().ok()
    } else {
        None
    }
}

/// Classifies an API error: the HTTP status first, then the CLI's error codes
/// (`authentication_failed`, `overloaded`, `prompt_too_long`, …), then the message text.
pub fn classify(status: Option<i64>, codes: &[Option<&str>], text: &str) -> ErrorKind {
    let by_status = status.and_then(|s| match s {
        401 | 403 => Some(ErrorKind::Auth),
        413 => Some(ErrorKind::ContextOverflow),
        429 => Some(ErrorKind::RateLimit),
        529 => Some(ErrorKind::Overloaded),
        _ => None,
    });
    if let Some(kind) = by_status {
        return kind;
    }
    for code in codes.iter().flatten() {
        let kind = match *code {
            "authentication_failed" | "authentication_error" | "permission_error" => ErrorKind::Auth,
            "rate_limit" | "rate_limit_error" | "rate_limited" => ErrorKind::RateLimit,
            "overloaded" | "overloaded_error" => ErrorKind::Overloaded,
            "prompt_too_long" | "context_overflow" => ErrorKind::ContextOverflow,
            _ => continue,
        };
        return kind;
    }
    let t = text.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| t.contains(n));
    if has(&["prompt is too long", "prompt_too_long", "context window"]) {
        ErrorKind::ContextOverflow
    } else if has(&[
        "unable to connect",
        "connectionrefused",
        "econnrefused",
        "enotfound",
        "etimedout",
        "econnreset",
        "network error",
    ]) {
        ErrorKind::Network
    } else if has(&["invalid api key", "authentication", "unauthorized"]) {
        ErrorKind::Auth
    } else if has(&["rate limit", "rate_limit", "too many requests"]) {
        ErrorKind::RateLimit
    } else if t.contains("overloaded") {
        ErrorKind::Overloaded
    } else {
        ErrorKind::Unknown
    }
}

/// The bidirectional ("SDK") mode: the prompt and our answers travel as stream-json on a
/// stdin pipe, and the CLI asks before using AskUserQuestion, ExitPlanMode or any tool that
/// writes or executes (`control_request` / `can_use_tool`). It is the only mode in which a
/// question can reach the person mid-run. The prompt never appears in argv.
pub fn interactive_argv(model: Option<&str>, resume: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = ["-p"]
        .into_iter()
        .chain(NO_MCP_SERVERS)
        .chain([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "plan",
            "--permission-prompt-tool",
            "stdio",
            "--include-partial-messages",
            // Only the user's settings: a repository's .claude/settings*.json (hooks, permission
            // rules, MCP servers, env, helpers) and its .mcp.json stay out. CLAUDE.md goes too:
            // planwire adds it to the prompt itself (planners/instructions.rs).
            "--setting-sources",
            "user",
        ])
        .map(|s| s.to_string())
        .collect();
    if let Some(model) = model.filter(|m| flag_value_ok(m)) {
        args.extend(["--model".to_string(), model.to_string()]);
    }
    if let Some(resume) = resume.filter(|r| flag_value_ok(r)) {
        args.extend(["--resume".to_string(), resume.to_string()]);
    }
    args
}

/// The first stdin lines of an interactive run: `initialize`, then the prompt as a user message.
pub fn interactive_opening(prompt: &str) -> Vec<String> {
    vec![
        json!({"type": "control_request", "request_id": "req_init_1", "request": {"subtype": "initialize", "hooks": null}})
            .to_string(),
        json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]},
               "parent_tool_use_id": null, "session_id": ""})
        .to_string(),
    ]
}

fn control_response(request_id: &str, response: Value) -> String {
    json!({"type": "control_response", "response": {"subtype": "success", "request_id": request_id, "response": response}})
        .to_string()
}

/// Answers a control request we do not support.
pub fn control_error(request_id: &str, message: &str) -> String {
    json!({"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": message}})
        .to_string()
}

/// Lets a tool call go ahead with `updated_input`.
pub fn allow(request_id: &str, updated_input: Value) -> String {
    control_response(request_id, json!({"behavior": "allow", "updatedInput": updated_input}))
}

/// Refuses a tool call; the model sees `message` as the tool's error result and goes on.
pub fn deny(request_id: &str, message: &str) -> String {
    control_response(
        request_id,
        json!({"behavior": "deny", "message": message, "interrupt": false}),
    )
}

/// AskUserQuestion's `input.questions` as normalized question items.
pub fn question_items(input: &Value) -> Option<Vec<planwire_protocol::QuestionItem>> {
    let questions = input.get("questions")?.as_array()?;
    let items: Vec<_> = questions
        .iter()
        .filter_map(|q| {
            Some(planwire_protocol::QuestionItem {
                header: q.get("header").and_then(Value::as_str).unwrap_or("Question").to_owned(),
                question: q.get("question")?.as_str()?.to_owned(),
                options: q
                    .get("options")
                    .and_then(Value::as_array)
                    .map(|opts| {
                        opts.iter()
                            .filter_map(|o| {
                                Some(planwire_protocol::QuestionOption {
                                    label: o.get("label")?.as_str()?.to_owned(),
                                    description: o.get("description").and_then(Value::as_str).map(str::to_owned),
                                })
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                multi_select: q.get("multiSelect").and_then(Value::as_bool).unwrap_or(false),
                // Claude's own UI always offers "Other"; so do we.
                allow_other: true,
            })
        })
        .collect();
    (!items.is_empty()).then_some(items)
}

/// The allow response for an answered AskUserQuestion: `updatedInput.answers` keyed by
/// question text, as the CLI expects (see the `d_ask_sdk` recording).
pub fn answer_questions(request_id: &str, input: &Value, answers: &[(String, String)]) -> String {
    let mut updated = input.clone();
    let map: serde_json::Map<String, Value> = answers
        .iter()
        .map(|(q, a)| (q.clone(), Value::String(a.clone())))
        .collect();
    if let Some(obj) = updated.as_object_mut() {
        obj.insert("answers".into(), Value::Object(map));
    }
    allow(request_id, updated)
}

// The typed view of the lines that the typed path handles. Every struct takes only the fields
// it names and skips the rest with `Skip`; see `parse_typed_line` for why that keeps the
// behaviour of the `Value` path.

/// Implements `Deserialize` for a struct of `Option` fields, read from a JSON object: each
/// named key is read into its field (the last duplicate wins), every other key is skipped.
macro_rules! typed_object {
    ($ty:ident, $expecting:literal, { $($key:literal => $field:ident),* $(,)? }) => {
        impl<'de> Deserialize<'de> for $ty<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty<'de>;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<$ty<'de>, A::Error> {
                        let mut this = $ty::default();
                        each_field(map, |key, map| {
                            match key {
                                $($key => this.$field = map.next_value()?,)*
                                _ => return Ok(false),
                            }
                            Ok(true)
                        })?;
                        Ok(this)
                    }
                }
                d.deserialize_map(V)
            }
        }
    };
}

/// `Deserialize` for an enum read with `deserialize_any`, as a `Value` is: `$str` for a
/// string, `$seq` for a list, `$map` for an object, and `Other` for anything else.
macro_rules! typed_any {
    ($ty:ident, $expecting:literal, str: |$s:ident| $str:expr, seq: |$q:ident| $seq:expr, map: |$m:ident| $map:expr) => {
        impl<'de> Deserialize<'de> for $ty<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty<'de>;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_bool<E>(self, _: bool) -> Result<$ty<'de>, E> {
                        Ok($ty::Other)
                    }
                    fn visit_i64<E>(self, _: i64) -> Result<$ty<'de>, E> {
                        Ok($ty::Other)
                    }
                    fn visit_u64<E>(self, _: u64) -> Result<$ty<'de>, E> {
                        Ok($ty::Other)
                    }
                    fn visit_f64<E>(self, _: f64) -> Result<$ty<'de>, E> {
                        Ok($ty::Other)
                    }
                    fn visit_unit<E>(self) -> Result<$ty<'de>, E> {
                        Ok($ty::Other)
                    }
                    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<$ty<'de>, E> {
                        let $s = Str(Cow::Borrowed(s));
                        Ok($str)
                    }
                    fn visit_str<E>(self, s: &str) -> Result<$ty<'de>, E> {
                        let $s = Str(Cow::Owned(s.to_owned()));
                        Ok($str)
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, $q: A) -> Result<$ty<'de>, A::Error> {
                        $seq
                    }
                    fn visit_map<A: MapAccess<'de>>(self, $m: A) -> Result<$ty<'de>, A::Error> {
                        $map
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

/// One stdout line, as far as the typed path reads it.
#[derive(Default)]
struct Line<'a> {
    kind: Option<Str<'a>>,
    message: Option<Message<'a>>,
    parent_tool_use_id: Option<Str<'a>>,
    /// Present (not null) on the synthetic API error line.
    error: Option<Skip>,
    /// A `stream_event` line's event.
    event: Option<StreamEvent<'a>>,
}
typed_object!(Line, "a stream-json line", {
    "type" => kind,
    "message" => message,
    "parent_tool_use_id" => parent_tool_use_id,
    "error" => error,
    "event" => event,
});

/// A partial-message event; a `content_block_delta`'s `delta` has the fields of a block.
#[derive(Default)]
struct StreamEvent<'a> {
    kind: Option<Str<'a>>,
    delta: Option<Block<'a>>,
}
typed_object!(StreamEvent, "a stream event", { "type" => kind, "delta" => delta });

#[derive(Default)]
struct Message<'a> {
    id: Option<Str<'a>>,
    content: Option<Content<'a>>,
}
typed_object!(Message, "a message", { "id" => id, "content" => content });

/// `message.content`: a list of blocks, or a string (a user line echoing a prompt).
enum Content<'a> {
    Str,
    Blocks(Vec<Block<'a>>),
    Other,
}
typed_any!(Content, "message content",
    str: |_s| Content::Str,
    seq: |seq| Vec::deserialize(SeqAccessDeserializer::new(seq)).map(Content::Blocks),
    map: |map| Skip::deserialize(MapAccessDeserializer::new(map)).map(|_| Content::Other));

/// A content block of an assistant or user line (the fields of every block type it handles).
#[derive(Default)]
struct Block<'a> {
    kind: Option<Str<'a>>,
    text: Option<Str<'a>>,
    thinking: Option<Str<'a>>,
    id: Option<Str<'a>>,
    name: Option<Str<'a>>,
    /// A tool's input: small, and summarized from a `Value` as on the `Value` path.
    input: Option<Value>,
    tool_use_id: Option<Str<'a>>,
    is_error: Option<bool>,
    content: Option<OutContent<'a>>,
}
typed_object!(Block, "a content block", {
    "type" => kind,
    "text" => text,
    "thinking" => thinking,
    "id" => id,
    "name" => name,
    "input" => input,
    "tool_use_id" => tool_use_id,
    "is_error" => is_error,
    "content" => content,
});

/// A tool_result's `content`: a string, a list of blocks, or something else.
enum OutContent<'a> {
    Str(Str<'a>),
    Blocks(Vec<OutBlock<'a>>),
    Other,
}
typed_any!(OutContent, "tool result content",
    str: |s| OutContent::Str(s),
    seq: |seq| Vec::deserialize(SeqAccessDeserializer::new(seq)).map(OutContent::Blocks),
    map: |map| Skip::deserialize(MapAccessDeserializer::new(map)).map(|_| OutContent::Other));

/// A block of a tool_result's `content`: an object (its `type` and `text`), or something else.
enum OutBlock<'a> {
    Fields(OutFields<'a>),
    Other,
}
typed_any!(OutBlock, "a tool result block",
    str: |_s| OutBlock::Other,
    seq: |seq| Skip::deserialize(SeqAccessDeserializer::new(seq)).map(|_| OutBlock::Other),
    map: |map| OutFields::deserialize(MapAccessDeserializer::new(map)).map(OutBlock::Fields));

#[derive(Default)]
struct OutFields<'a> {
    kind: Option<Str<'a>>,
    text: Option<Str<'a>>,
}
typed_object!(OutFields, "a block", { "type" => kind, "text" => text });

fn typed_parent_id(id: &Option<Str>) -> Option<String> {
    id.as_deref().filter(|s| !s.is_empty()).map(str::to_string)
}

/// [`summarize_output`] of typed content; `None` when it would need the `Value` (content
/// that is neither a string nor a list of text and image blocks).
fn summarize_typed_output(content: Option<&OutContent>) -> Option<String> {
    match content {
        None => Some(String::new()),
        Some(OutContent::Str(s)) => Some(truncate_chars(s, OUTPUT_SUMMARY_MAX)),
        Some(OutContent::Blocks(blocks)) => {
            let mut parts: Vec<String> = Vec::new();
            let mut len = 0;
            for block in blocks {
                if len > OUTPUT_SUMMARY_MAX {
                    break;
                }
                let part = match block {
                    OutBlock::Fields(OutFields { text: Some(text), .. }) => {
                        truncate_chars(text, OUTPUT_SUMMARY_MAX + 1)
                    }
                    OutBlock::Fields(OutFields {
                        kind: Some(kind),
                        text: None,
                    }) if &**kind == "image" => "[image]".to_string(),
                    _ => return None,
                };
                len += part.chars().count() + 1;
                parts.push(part);
            }
            Some(truncate_chars(&parts.join("\n"), OUTPUT_SUMMARY_MAX))
        }
        Some(OutContent::Other) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::prompt::{plan_prompt, PLAN_PREAMBLE};
    // These tests name tool results without their status (`toolResult`, not `toolResult=ok`).
    use crate::planners::test_support::{errors, feed, fixtures, shape_without_status as shape, texts, usages};
    use planwire_protocol::SubagentPhase;

    fixtures!(
        "claude":
        "a_plain",
        "a_two_text_blocks",
        "a_partial",
        "b_tool",
        "b_bash",
        "b_bash_sdk",
        "c_subagent",
        "c_subagent_partial",
        "d_ask_sdk",
        "e_exitplan_sdk_deny",
        "f_401_retries2",
        "f_529_retries2",
        "f_400_prompt_too_long",
        "f_conn_refused_retries2",
        "f_500_once",
        "g_resume_missing",
        "h_sigterm",
        "h_sigint",
    );

    fn run(name: &str) -> (ClaudeParser, Vec<ParsedEvent>) {
        let mut p = ClaudeParser::new();
        let events = feed(&mut p, fixture(name));
        (p, events)
    }

    /// The first usage event.
    fn usage(events: &[ParsedEvent]) -> (u64, u64, u64, u64, f64) {
        *usages(events).first().expect("a usage event")
    }

    fn error_of(events: &[ParsedEvent]) -> (ErrorKind, String) {
        let errors = errors(events);
        assert_eq!(errors.len(), 1, "exactly one error event: {errors:?}");
        errors[0].clone()
    }

    #[test]
    fn every_fixture_parses_without_raw_events() {
        for name in ALL {
            let (_, events) = run(name);
            assert!(
                events.iter().all(|e| e.body.kind() != "raw"),
                "{name}: {:?}",
                shape(&events)
            );
        }
    }

    #[test]
    fn a_plain_thinking_then_final_text_and_usage() {
        let (p, events) = run("a_plain");
        assert_eq!(shape(&events), ["session", "reasoning", "text!", "usage"]);
        assert_eq!(
            events[0].body,
            EventBody::Session {
                provider_session_id: "11111111-2222-4333-8444-555555555555".into()
            }
        );
        assert_eq!(p.session_id(), Some("11111111-2222-4333-8444-555555555555"));
        assert_eq!(usage(&events), (1234, 56, 200, 100, 0.008295));
        assert!(p.saw_result());
        assert!(!p.is_error());
        assert_eq!(p.error_message(), None);
        assert!(p.final_text().starts_with("I looked at the request."));
        assert!(p.final_text().ends_with("</plan>"));
        assert_eq!(p.final_text(), p.all_text());
    }

    #[test]
    fn a_partial_stream_events_and_status_are_consumed() {
        let (p, events) = run("a_partial");
        assert_eq!(shape(&events), ["session", "reasoning", "text!", "usage"]);
        assert!(p.final_text().starts_with("I looked at the request."));
    }

    #[test]
    fn a_partial_deltas_join_to_exactly_the_stored_blocks() {
        let mut p = ClaudeParser::new();
        let mut events = Vec::new();
        let mut deltas = Vec::new();
        for line in fixture("a_partial").lines() {
            events.extend(p.parse_line(line));
            deltas.extend(LineParser::take_deltas(&mut p));
        }
        events.extend(p.finish());
        let joined = |kind: DeltaKind| -> String {
            deltas
                .iter()
                .filter(|(a, k, _)| a.is_none() && *k == kind)
                .map(|(_, _, t)| t.as_str())
                .collect()
        };
        let stored = |want: &str| -> String {
            events
                .iter()
                .filter_map(|e| match &e.body {
                    EventBody::Text { text, .. } if want == "text" => Some(text.clone()),
                    EventBody::Reasoning { text } if want == "reasoning" => Some(text.clone()),
                    _ => None,
                })
                .collect()
        };
        assert!(deltas.len() >= 4, "{deltas:?}");
        assert_eq!(joined(DeltaKind::Text), stored("text"));
        assert_eq!(joined(DeltaKind::Reasoning), stored("reasoning"));
    }

    #[test]
    fn a_two_text_blocks_final_message_has_both_blocks() {
        let (p, events) = run("a_two_text_blocks");
        assert_eq!(
            shape(&events),
            ["session", "text", "toolCall", "toolResult", "text!", "text!", "usage"]
        );
        assert_eq!(
            texts(&events),
            [
                ("First text block of turn 1.".to_string(), false),
                ("Block A of final turn.".to_string(), true),
                ("Block B of final turn.\n<plan>\n1. x\n</plan>".to_string(), true),
            ]
        );
        assert_eq!(
            p.final_text(),
            "Block A of final turn.\n\nBlock B of final turn.\n<plan>\n1. x\n</plan>"
        );
        assert!(p.all_text().starts_with("First text block of turn 1.\n\nBlock A"));
        assert_eq!(usage(&events), (200, 40, 0, 0, 0.002));
    }

    #[test]
    fn b_tool_read_call_and_result() {
        let (p, events) = run("b_tool");
        assert_eq!(
            shape(&events),
            ["session", "text", "toolCall", "toolResult", "text!", "usage"]
        );
        assert_eq!(
            events[2].body,
            EventBody::ToolCall {
                call_id: "toolu_read_0001".into(),
                name: "Read".into(),
                input: "/home/dev/project/src/main.rs".into(),
            }
        );
        match &events[3].body {
            EventBody::ToolResult {
                call_id,
                status,
                output,
            } => {
                assert_eq!(call_id, "toolu_read_0001");
                assert_eq!(*status, ToolStatus::Completed);
                assert!(output.starts_with("1\tfn main() {"), "{output}");
            }
            other => panic!("{other:?}"),
        }
        assert!(p.final_text().starts_with("The file prints a greeting."));
    }

    #[test]
    fn b_bash_refused_tools_are_error_results() {
        let (_, events) = run("b_bash");
        assert_eq!(
            shape(&events),
            [
                "session",
                "toolCall",
                "toolCall",
                "toolCall",
                "toolResult",
                "toolResult",
                "toolResult",
                "text!",
                "usage"
            ]
        );
        let calls: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::ToolCall { name, input, .. } => Some((name.as_str(), input.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            calls,
            [
                ("Bash", "ls src"),
                ("Bash", "touch created_by_bash.txt"),
                ("Write", "/home/dev/project/notes.txt"),
            ]
        );
        let results: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::ToolResult { call_id, status, .. } => Some((call_id.as_str(), *status)),
                _ => None,
            })
            .collect();
        assert_eq!(
            results,
            [
                ("toolu_bash_0001", ToolStatus::Completed),
                ("toolu_bash_0002", ToolStatus::Error),
                ("toolu_write_0003", ToolStatus::Error),
            ]
        );
    }

    #[test]
    fn c_subagent_start_lines_and_end() {
        let a = Some("toolu_agent_0001".to_string());
        let (p, events) = run("c_subagent");
        assert_eq!(
            shape(&events),
            [
                "session",
                "text",
                "toolCall",
                "subagent:start@toolu_agent_0001",
                "toolCall@toolu_agent_0001",
                "toolResult@toolu_agent_0001",
                "subagent:end@toolu_agent_0001",
                "toolResult",
                "text!",
                "usage"
            ]
        );
        assert_eq!(
            events[2].body,
            EventBody::ToolCall {
                call_id: "toolu_agent_0001".into(),
                name: "Agent".into(),
                input: "Find greeting code".into(),
            }
        );
        assert_eq!(
            events[3],
            ParsedEvent {
                agent: a.clone(),
                body: EventBody::Subagent {
                    phase: SubagentPhase::Start,
                    label: "Find greeting code".into(),
                    status: None,
                },
            }
        );
        assert_eq!(
            events[6],
            ParsedEvent {
                agent: a,
                body: EventBody::Subagent {
                    phase: SubagentPhase::End,
                    label: "Find greeting code".into(),
                    status: Some("completed".into()),
                },
            }
        );
        assert_eq!(
            events[7].body,
            EventBody::ToolResult {
                call_id: "toolu_agent_0001".into(),
                status: ToolStatus::Completed,
                output: "The greeting is printed in src/main.rs at line 2 via println!.".into(),
            }
        );
        // Subagent text never counts as main-thread text.
        assert_eq!(
            p.all_text(),
            "I will ask an Explore agent to find the greeting.\n\n\
             The agent found it.\n\n<plan>\n1. Edit src/main.rs line 2.\n</plan>"
        );
    }

    #[test]
    fn c_subagent_partial_matches_c_subagent() {
        assert_eq!(shape(&run("c_subagent_partial").1), shape(&run("c_subagent").1));
    }

    #[test]
    fn subagent_ends_at_tool_result_without_notification() {
        let text: String = fixture("c_subagent")
            .lines()
            .filter(|l| !l.contains("\"task_notification\""))
            .map(|l| format!("{l}\n"))
            .collect();
        let mut p = ClaudeParser::new();
        let s = shape(&feed(&mut p, &text));
        assert_eq!(
            s[5..8],
            [
                "toolResult@toolu_agent_0001",
                "subagent:end@toolu_agent_0001",
                "toolResult"
            ]
        );
    }

    #[test]
    fn subagent_still_open_at_eof_is_interrupted() {
        let text: String = fixture("c_subagent")
            .lines()
            .take(8)
            .map(|l| format!("{l}\n"))
            .collect();
        let mut p = ClaudeParser::new();
        let events = feed(&mut p, &text);
        let last = events.last().unwrap();
        assert_eq!(last.agent.as_deref(), Some("toolu_agent_0001"));
        assert_eq!(
            last.body,
            EventBody::Subagent {
                phase: SubagentPhase::End,
                label: "Find greeting code".into(),
                status: Some("interrupted".into()),
            }
        );
        assert!(!p.saw_result());
    }

    #[test]
    fn background_subagent_ends_only_at_notification() {
        let lines = [
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_bg","name":"Task","input":{"subagent_type":"Explore","prompt":"p","run_in_background":true}}]},"parent_tool_use_id":null,"session_id":"s"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_bg","content":"Async agent launched"}]},"parent_tool_use_id":null,"session_id":"s"}"#,
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"sub"}]},"parent_tool_use_id":"toolu_bg","session_id":"s"}"#,
            r#"{"type":"system","subtype":"task_notification","tool_use_id":"toolu_bg","status":"failed","session_id":"s"}"#,
        ];
        let mut p = ClaudeParser::new();
        let events = feed(&mut p, &lines.join("\n"));
        assert_eq!(
            shape(&events),
            [
                "toolCall",
                "subagent:start@toolu_bg",
                "toolResult",
                "text@toolu_bg",
                "subagent:end@toolu_bg"
            ]
        );
        assert_eq!(
            events[1].body,
            EventBody::Subagent {
                phase: SubagentPhase::Start,
                label: "Explore".into(),
                status: None
            }
        );
        assert!(matches!(
            &events[4].body,
            EventBody::Subagent { status: Some(s), .. } if s == "failed"
        ));
        assert_eq!(p.all_text(), "");
    }

    #[test]
    fn d_ask_sdk_control_request_is_exposed() {
        let (p, events) = run("d_ask_sdk");
        assert_eq!(
            shape(&events),
            ["session", "text", "toolCall", "toolResult", "text!", "usage"]
        );
        let mut p = p;
        let requests = p.take_control_requests();
        assert_eq!(requests.len(), 1);
        let r = &requests[0];
        assert_eq!(r.request_id, "4ffa59fc-8d50-4ac1-bbb9-27bd0c72839e");
        assert_eq!(r.subtype, "can_use_tool");
        assert_eq!(r.tool_name, "AskUserQuestion");
        assert_eq!(r.tool_use_id.as_deref(), Some("toolu_ask_0001"));
        assert_eq!(
            r.input["questions"][0]["question"],
            "Which greeting should the program print?"
        );
        assert!(p.take_control_requests().is_empty());
        let responses = p.take_control_responses();
        assert_eq!(responses.len(), 1);
        assert_eq!(responses[0].request_id, "req_init_1");
        assert_eq!(responses[0].subtype, "success");
    }

    #[test]
    fn e_exitplan_sdk_deny_keeps_plan_input_and_error_result() {
        let (mut p, events) = run("e_exitplan_sdk_deny");
        assert_eq!(
            shape(&events),
            ["session", "text", "toolCall", "toolResult", "text!", "usage"]
        );
        assert!(matches!(
            &events[3].body,
            EventBody::ToolResult { status: ToolStatus::Error, output, .. }
                if output == "The user rejected the plan: please also add a unit test."
        ));
        let requests = p.take_control_requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].tool_name, "ExitPlanMode");
        assert!(requests[0].input["plan"].as_str().unwrap().starts_with("# Plan"));
        assert_eq!(p.final_text(), "Final answer after ExitPlanMode.");
    }

    #[test]
    fn b_bash_sdk_control_requests_carry_extra_fields() {
        let (mut p, _) = run("b_bash_sdk");
        let requests = p.take_control_requests();
        let names: Vec<_> = requests.iter().map(|r| r.tool_name.as_str()).collect();
        assert_eq!(names, ["Bash", "Write"]);
        assert_eq!(requests[0].tool_use_id.as_deref(), Some("toolu_bash_0002"));
        assert!(requests[0].request["permission_suggestions"].is_array());
    }

    fn assert_api_error(name: &str, kind: ErrorKind, message_start: &str) {
        let (p, events) = run(name);
        assert_eq!(
            shape(&events),
            ["session", &format!("error:{kind:?}"), "usage"],
            "{name}"
        );
        let (_, message) = error_of(&events);
        assert!(message.starts_with(message_start), "{name}: {message}");
        assert!(p.is_error() && p.saw_result(), "{name}");
        assert_eq!(p.error_message().as_deref(), Some(message.as_str()));
        assert_eq!(p.final_text(), "", "{name}");
        assert_eq!(p.all_text(), "", "{name}");
        assert_eq!(usage(&events), (0, 0, 0, 0, 0.0));
    }

    #[test]
    fn f_api_errors_are_one_classified_error_event() {
        assert_api_error(
            "f_401_retries2",
            ErrorKind::Auth,
            "Invalid API key · Fix external API key",
        );
        assert_api_error("f_529_retries2", ErrorKind::Overloaded, "API Error: 529");
        assert_api_error(
            "f_400_prompt_too_long",
            ErrorKind::ContextOverflow,
            "Prompt is too long",
        );
        assert_api_error(
            "f_conn_refused_retries2",
            ErrorKind::Network,
            "API Error: Unable to connect to API (ConnectionRefused)",
        );
    }

    #[test]
    fn f_500_once_recovered_retry_is_no_error() {
        let (p, events) = run("f_500_once");
        assert_eq!(shape(&events), ["session", "text!", "usage"]);
        assert!(!p.is_error());
        assert_eq!(usage(&events), (100, 20, 0, 0, 0.001));
    }

    #[test]
    fn g_resume_missing_is_an_error_without_session() {
        let (p, events) = run("g_resume_missing");
        assert_eq!(shape(&events), ["error:Unknown", "usage"]);
        assert_eq!(p.session_id(), None);
        assert!(p.is_error() && p.saw_result());
        assert_eq!(
            p.error_message().as_deref(),
            Some("No conversation found with session ID: 99999999-2222-4333-8444-555555555555")
        );
    }

    #[test]
    fn h_sigterm_no_result_text_is_not_final() {
        let mut p = ClaudeParser::new();
        let mut lines = Vec::new();
        for line in fixture("h_sigterm").lines() {
            lines.extend(p.parse_line(line));
        }
        // The text is held until we know whether it is final.
        assert_eq!(shape(&lines), ["session"]);
        let tail = p.finish();
        assert_eq!(shape(&tail), ["text"]);
        assert!(p.finish().is_empty(), "finish is idempotent");
        assert!(!p.saw_result());
        assert!(!p.is_error());
        assert_eq!(p.final_text(), "");
        assert_eq!(p.all_text(), "Thinking out loud first.");
    }

    #[test]
    fn h_sigint_error_result_leaves_text_not_final() {
        let (p, events) = run("h_sigint");
        assert_eq!(shape(&events), ["session", "text", "text", "error:Unknown", "usage"]);
        let (_, message) = error_of(&events);
        assert!(message.starts_with("[ede_diagnostic]"), "{message}");
        assert!(p.is_error());
        assert_eq!(p.final_text(), "");
        assert!(p.all_text().starts_with("Thinking out loud first.\n\nHere is"));
    }

    #[test]
    fn garbage_and_unknown_lines_are_kept_raw() {
        let half = &fixture("a_plain").lines().nth(4).unwrap()[..300];
        let lines = [
            "not json at all",
            "[1,2,3]",
            r#"{"type":"mystery","x":1}"#,
            r#"{"type":"system","subtype":"compact_boundary","session_id":"s"}"#,
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"server_tool_use","id":"x"}]},"parent_tool_use_id":null}"#,
            r#"{"type":"system","subtype":"status","status":null,"permissionMode":"default"}"#,
            half,
        ];
        let mut p = ClaudeParser::new();
        for line in lines {
            let events = p.parse_line(line);
            assert_eq!(
                events,
                vec![ParsedEvent::main(EventBody::Raw { line: line.to_string() })],
                "{line}"
            );
        }
        assert!(p.parse_line("").is_empty());
        assert!(p.parse_line("  \r\n").is_empty());
        assert!(p.finish().is_empty());
    }

    /// Everything a parser exposes, for comparing two of them.
    fn state(p: &mut ClaudeParser) -> String {
        let requests = p.take_control_requests();
        let responses = p.take_control_responses();
        let deltas = LineParser::take_deltas(p);
        let tail = p.finish();
        format!(
            "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{requests:?}|{responses:?}|{deltas:?}|{tail:?}",
            p.session_id(),
            p.saw_result(),
            p.is_error(),
            p.final_text(),
            p.all_text(),
            p.error_message(),
        )
    }

    #[test]
    fn typed_path_matches_value_path() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let odd = [
            r#"{"type":"system","subtype":"init","session_id":"s","tools":[]}"#.to_string(),
            // Values that `IgnoredAny` would accept and `Value` rejects, in skipped fields.
            r#"{"type":"assistant","x":"\ud800","message":{"id":"m1","content":[{"type":"text","text":"a"}]},"parent_tool_use_id":null}"#.into(),
            r#"{"type":"assistant","message":{"id":"m1","usage":{"n":1e400},"content":[{"type":"text","text":"b"}]}}"#.into(),
            format!(r#"{{"type":"assistant","x":{deep},"message":{{"id":"m1","content":[{{"type":"text","text":"c"}}]}}}}"#),
            format!(r#"{{"type":"stream_event","event":{deep}}}"#),
            r#"{"type":"stream_event","event":{"delta":{"text":"\udc00"}}}"#.into(),
            r#"{"type":"stream_event","event":{"n":-1e999}}"#.into(),
            r#"{"type":"stream_event"} trailing"#.into(),
            r#"{"type":"stream_event","uuid":"u","event":{"a":[1,2.5,true,null,"\u00e9"]}}"#.into(),
            r#"{"type":"stream_event","parent_tool_use_id":"t9","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"pi\u00e9ce"}}}"#.into(),
            r#"{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hm"}}}"#.into(),
            r#"{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":7}}}"#.into(),
            // Duplicate and escaped keys, escaped text.
            r#"{"type":"user","type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"d\n\u00e9\"q\""}]}}"#.into(),
            r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"e"}]},"message":null}"#.into(),
            r#"{"typ\u0065":"assistant","message":{"i\u0064":"m2","content":[{"type":"text","text":"f","text":"g"}]}}"#.into(),
            // Shapes the typed path declines or rejects.
            r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":5}]}}"#.into(),
            r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":"h"},{"type":"server_tool_use","id":"x"}]}}"#.into(),
            r#"{"type":"assistant","message":{"id":7,"content":[{"type":"text","text":"i"}]}}"#.into(),
            r#"{"type":"assistant","message":{"content":{"type":"text"}}}"#.into(),
            r#"{"type":"assistant","message":"m"}"#.into(),
            r#"{"type":"assistant","error":null,"message":{"id":"m4","content":[{"type":"thinking","thinking":"t"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"j"}]}}"#.into(),
            r#"{"type":"assistant","error":"rate_limit","message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 429 slow down"}]}}"#.into(),
            r#"{"type":"assistant","parent_tool_use_id":"","message":{"id":"m5","content":[{"type":"tool_use","id":"t1","name":"Task","input":{"description":"d","run_in_background":true}}]}}"#.into(),
            r#"{"type":"assistant","parent_tool_use_id":"t1","message":{"id":"m6","content":[{"type":"text","text":"sub"},{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"/x"}},{"type":"tool_use","id":"t3"}]}}"#.into(),
            r#"{"type":"user","parent_tool_use_id":"t1","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"one"},{"type":"image","source":{}}]}]}}"#.into(),
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"other"}]}]}}"#.into(),
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":["s"]}]}}"#.into(),
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":{"k":1}}]}}"#.into(),
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":7,"is_error":true}]}}"#.into(),
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":"yes"}]}}"#.into(),
            r#"{"type":"user","message":{"content":[{"type":"text","text":"echo"},{"type":"image"},{"type":"tool_result","tool_use_id":"t1","content":null}]}}"#.into(),
            r#"{"type":"user","message":{"content":"a prompt"}}"#.into(),
            r#"{"type":"user","message":{"content":5}}"#.into(),
            r#"{"type":"user","message":{"content":[{"type":"mystery"}]}}"#.into(),
            r#"{"type":"user"}"#.into(),
            r#"[{"type":"assistant"}]"#.into(),
            r#""assistant""#.into(),
            r#"{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{}}"#.into(),
        ];
        let mut inputs: Vec<String> = ALL.iter().map(|name| fixture(name).to_string()).collect();
        inputs.push(odd.join("\n"));
        for text in &inputs {
            let (mut typed, mut plain) = (ClaudeParser::new(), ClaudeParser::new());
            for line in text.lines() {
                assert_eq!(typed.parse_line(line), plain.parse_value_line(line), "{line}");
            }
            assert_eq!(state(&mut typed), state(&mut plain));
        }
    }

    #[test]
    fn common_lines_take_the_typed_path() {
        let mut p = ClaudeParser::new();
        let mut typed = 0;
        for line in fixture("b_bash").lines().chain(fixture("c_subagent").lines()) {
            if line.contains(r#""type":"assistant""#) || line.contains(r#""type":"user""#) {
                assert!(
                    parse_typed_line(line, |l: Line, out| p.on_typed(l, out)).is_some(),
                    "{line}"
                );
                typed += 1;
            }
        }
        assert!(typed > 5);
    }

    #[test]
    fn huge_raw_line_is_cut() {
        let line = "é".repeat(RAW_LINE_MAX);
        let events = ClaudeParser::new().parse_line(&line);
        match &events[0].body {
            EventBody::Raw { line: kept } => {
                assert!(kept.len() <= RAW_LINE_MAX + '…'.len_utf8());
                assert!(kept.ends_with('…'));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn session_event_once_per_distinct_id() {
        let init = |id: &str| format!(r#"{{"type":"system","subtype":"init","session_id":"{id}","tools":[]}}"#);
        let mut p = ClaudeParser::new();
        assert_eq!(p.parse_line(&init("a")).len(), 1);
        assert!(p.parse_line(&init("a")).is_empty());
        assert_eq!(p.parse_line(&init("b")).len(), 1);
        assert_eq!(p.session_id(), Some("b"));
    }

    #[test]
    fn tool_summaries() {
        let long = "x".repeat(1000);
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert_eq!(summarize_input(&v(r#"{"pattern":"fn main","path":"src"}"#)), "fn main");
        assert_eq!(
            summarize_input(&v(r#"{"url":"https://example.com","prompt":"p"}"#)),
            "https://example.com"
        );
        let fallback = summarize_input(&serde_json::json!({ "questions": [{ "q": long }] }));
        assert_eq!(fallback.chars().count(), INPUT_SUMMARY_MAX + 1);
        assert!(fallback.starts_with(r#"{"questions":[{"q":"xxx"#));
        assert_eq!(summarize_input(&Value::Null), "");
        let out = summarize_output(Some(&serde_json::json!([
            { "type": "text", "text": "one" },
            { "type": "image", "source": {} },
            { "type": "text", "text": long },
        ])));
        assert!(out.starts_with("one\n[image]\nxxx"));
        assert_eq!(out.chars().count(), OUTPUT_SUMMARY_MAX + 1);
        assert_eq!(
            summarize_output(Some(&Value::String("é".repeat(600)))).chars().count(),
            501
        );
    }

    #[test]
    fn classification() {
        use ErrorKind::*;
        assert_eq!(classify(Some(429), &[], "whatever"), RateLimit);
        assert_eq!(classify(Some(401), &[Some("server_error")], ""), Auth);
        assert_eq!(classify(None, &[Some("overloaded")], ""), Overloaded);
        assert_eq!(classify(Some(400), &[Some("prompt_too_long")], ""), ContextOverflow);
        assert_eq!(classify(None, &[None], "connect ECONNREFUSED 127.0.0.1"), Network);
        assert_eq!(classify(Some(500), &[Some("server_error")], "API Error: 500"), Unknown);
        assert_eq!(status_from_text("API Error: 529 Overloaded."), Some(529));
        assert_eq!(status_from_text("API Error: Unable to connect"), None);
    }

    #[test]
    fn argv_shapes() {
        let base = [
            "-p",
            "--strict-mcp-config",
            "--mcp-config",
            r#"{"mcpServers":{}}"#,
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "plan",
            "--setting-sources",
            "user",
        ];
        let with = |extra: &[&str]| {
            let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        assert_eq!(argv(None, None, None, "Plan it"), with(&["Plan it"]));
        assert_eq!(
            argv(Some("sonnet"), None, Some("uuid-1"), "Plan it"),
            with(&["--model", "sonnet", "--session-id", "uuid-1", "Plan it"])
        );
        assert_eq!(
            argv(None, Some("sess-1"), Some("uuid-1"), "Plan it"),
            with(&["--resume", "sess-1", "Plan it"])
        );
        // A value that looks like a flag is never passed.
        assert_eq!(
            argv(Some("--dangerously-skip-permissions"), None, None, "Plan it"),
            with(&["Plan it"])
        );
    }

    #[test]
    fn no_mcp_server_reaches_a_planner_and_a_flag_follows_the_config() {
        let interactive = interactive_argv(Some("opus"), Some("sess-1"));
        for args in [interactive, argv(None, None, None, "Plan it")] {
            let at = args.iter().position(|a| a == "--mcp-config").unwrap();
            assert_eq!(args[at - 1], "--strict-mcp-config");
            assert_eq!(args[at + 1], r#"{"mcpServers":{}}"#);
            assert!(args[at + 2].starts_with("--"), "{args:?}");
        }
    }

    #[test]
    fn argv_hostile_ticket_is_one_prompt_argument() {
        let prompt = plan_prompt(
            "--dangerously-skip-permissions",
            "-rf $(rm -rf ~) `id`\n--permission-mode bypassPermissions",
            &Default::default(),
        );
        let args = argv(Some("opus"), None, None, &prompt);
        let last = args.last().unwrap();
        assert_eq!(last, &prompt);
        assert!(last.starts_with(PLAN_PREAMBLE));
        assert!(!last.starts_with('-'));
        assert_eq!(args.len(), 14);
        assert!(!args.iter().any(|a| a == "--dangerously-skip-permissions"));
        assert_eq!(args.iter().filter(|a| *a == "--permission-mode").count(), 1);
    }

    #[test]
    fn env_limits_retries_and_traffic() {
        let env = env();
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CLAUDE_CODE_MAX_RETRIES"), Some("2"));
        for key in [
            "DISABLE_AUTOUPDATER",
            "DISABLE_TELEMETRY",
            "DISABLE_ERROR_REPORTING",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        ] {
            assert_eq!(get(key), Some("1"), "{key}");
        }
        assert_eq!(env.len(), 5);
    }

    #[test]
    fn writes_its_state_in_home_or_its_config_directory() {
        use crate::planners::writable::tests::{env, paths};
        assert_eq!(paths(&writable(&env(&[]))), ["/h/.claude", "/h/.claude.json"]);
        assert_eq!(
            writable(&env(&[]))[1].kind,
            planwire_sandbox::Kind::File { initial: "{}\n" }
        );
        assert_eq!(paths(&writable(&env(&[("CLAUDE_CONFIG_DIR", "/c")]))), ["/c"]);
    }
}

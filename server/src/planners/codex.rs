//! Codex adapter: the argv and environment of a plan run, and the stateful parser that turns
//! `codex exec --json` stdout into normalized events.
//!
//! Ground truth is the recordings copied into `tests/fixtures/codex/` (from the shared notes
//! on the real CLI, 0.171.0). stdout is one JSON event per line: `thread.started`,
//! `turn.started`, `item.started` / `item.updated` / `item.completed` (`item.type`:
//! `agent_message`, `reasoning`, `command_execution`, `file_change`, `mcp_tool_call`,
//! `web_search`, `collab_tool_call`, `todo_list`, `error`, …), `turn.completed` (usage),
//! `turn.failed` and a top-level `error`. The traps they show, and what this adapter does:
//!
//! - **Agent messages arrive whole** (`item.completed`, no deltas). The final answer is the
//!   last one before `turn.completed`: each message is held until the next item (then it is
//!   not final) or the end of the turn (`turn.completed`: final; `turn.failed` or EOF: not).
//! - **Items of type `error` are warnings** (unknown model metadata, a model switch on
//!   resume), not failures: they stay in the transcript as `raw` lines and change nothing.
//!   So do the top-level `Reconnecting... n/m (…)` / `waiting for network` notices of a
//!   retry. Any other top-level `error` is fatal: a typed `error` event, followed by
//!   `turn.failed` with the same message (not repeated) and exit 1.
//! - **A retried stream repeats its partial message** (`d_failed_retries`): each copy is
//!   shown, none is final.
//! - **`command_execution`** starts with `item.started` and may never complete (a command
//!   that outlives the turn, `p_long_cmd`): its call stays without a result. `status`
//!   `completed` / `failed` / `declined` gives the result's status; the output summary is
//!   `aggregated_output` (stdout and stderr), with the exit code when it is not 0. The
//!   input summary is the command without its `/bin/bash -lc '…'` wrapper.
//! - **Usage in `turn.completed` is cumulative for the thread**: a resumed thread reports
//!   the earlier runs' tokens too (`e_resume`: 1234 + 1500 = 2734 input). The parser reports
//!   what it sees; the runner stores the per-run difference (this run's last `usage` minus
//!   the thread's total at the end of the previous run). `inputTokens` is the uncached input
//!   (`input_tokens − cached_input_tokens`, as for Claude and OpenCode), `cacheReadTokens`
//!   is `cached_input_tokens`, `outputTokens` is `output_tokens` (reasoning included).
//!   Codex reports no cost: `costUsd` is 0.
//! - **Exit 1 with nothing on stdout** (not a git repo, bad config, unknown resume id): no
//!   events; the runner's stderr fallback carries the message, and
//!   [`CodexParser::session_not_found`] recognises an unknown thread id.
//! - **SIGTERM / SIGINT**: no terminal event; held text is flushed as not final at EOF.
//! - **Subagents** (`collab_tool_call`, not recorded here; shape from codex's
//!   `exec_events.rs`): `spawn_agent` starts one agent run per receiver thread id (the key);
//!   an `agents_states` entry in a terminal state (`completed`, `errored`, `shutdown`,
//!   `not_found`) gives its final message as `text` under the key and ends it; EOF ends open
//!   ones as `interrupted`.
//!
//! Blank lines produce nothing; `turn.started`, `item.started` / `item.updated` of messages
//! and reasoning, and repeated `thread.started` lines are consumed. Anything else unknown — a
//! non-JSON or truncated line, an unknown event or item type (`todo_list` included) — is `raw`.
//!
//! Launch: `exec --json --sandbox read-only --skip-git-repo-check -c
//! features.unbounded_connection_retries=false -c features.daemon_auto_start=false [-m M] -`
//! and `exec resume --json S --skip-git-repo-check -c … [-m M] -c sandbox_mode=read-only -`
//! (resume has no `--sandbox`), with the prompt on stdin (`-`); the runner closes stdin, or
//! Codex waits for EOF.

use std::collections::HashSet;

use planwire_protocol::{ErrorKind, EventBody, ToolStatus};
use serde_json::Value;

use super::claude::{INPUT_SUMMARY_MAX, OUTPUT_SUMMARY_MAX};
use super::{
    classify_api_error, emit_held, flag_value_ok, parse_json_line, raw_event, status_in_text, str_of, strip_ansi,
    truncate_chars, LineParser, ParsedEvent, Subagents, TextTail,
};

/// Options that keep a run bounded and free of background processes. Connection failures
/// are retried forever by default (one run waited 197 s); with the feature off, a refused
/// connection fails in about a second. `features.<name>=false` is what `--disable <name>`
/// means; as a `-c` value, an unknown feature name is ignored where `--disable` would be a
/// hard error, so an older Codex still runs.
const COMMON_CONFIG: [&str; 2] = [
    "features.unbounded_connection_retries=false",
    "features.daemon_auto_start=false",
];

/// The argv (without the program) of a plan run. First plan:
/// `exec --json --sandbox read-only --skip-git-repo-check -c … [-m M] [-c
/// model_reasoning_effort=V] -`; resume: `exec resume --json S --skip-git-repo-check -c …
/// [-m M] [-c model_reasoning_effort=V] -c sandbox_mode=read-only -` (`exec resume` has no
/// `--sandbox`). `--skip-git-repo-check` lets a ticket root that is not a git repository be
/// planned (else exit 1, "Not inside a trusted directory"); the sandbox keeps it read-only.
/// The prompt is read from stdin (`-`). A session, model or variant that could be read as a
/// flag is left out; a variant must be a plain word (`low`, `high`, …).
pub fn argv(model: Option<&str>, resume: Option<&str>, variant: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = vec!["exec".into()];
    let resume = resume.filter(|s| flag_value_ok(s));
    if let Some(session) = resume {
        args.extend(["resume".into(), "--json".into(), session.into()]);
    } else {
        args.extend(["--json", "--sandbox", "read-only"].map(String::from));
    }
    args.push("--skip-git-repo-check".into());
    for c in COMMON_CONFIG {
        args.extend(["-c".into(), c.into()]);
    }
    if let Some(model) = model.filter(|m| flag_value_ok(m)) {
        args.extend(["-m".into(), model.into()]);
    }
    if let Some(v) = variant.filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')) {
        args.extend(["-c".into(), format!("model_reasoning_effort={v}")]);
    }
    if resume.is_some() {
        args.extend(["-c".into(), "sandbox_mode=read-only".into()]);
    }
    args.push("-".into());
    args
}

/// Environment for the CLI: no Rust backtrace on fatal errors, so the stderr tail the runner
/// records is the message (`RUST_BACKTRACE=1` adds a `Stack backtrace:` block).
pub fn env() -> Vec<(String, String)> {
    vec![("RUST_BACKTRACE".into(), "0".into())]
}

/// Stateful parser of one Codex run's stdout. Feed every line to
/// [`parse_line`](Self::parse_line), then call [`finish`](Self::finish) at EOF.
#[derive(Debug, Default)]
pub struct CodexParser {
    session_id: Option<String>,
    /// The last agent message, until we know whether it ends the turn, then the events that
    /// arrived after it without deciding that (warnings, retry notices).
    pending: Vec<EventBody>,
    main_text: TextTail,
    final_text: TextTail,
    calls: HashSet<String>,
    results: HashSet<String>,
    subagents: Subagents,
    /// The last `Reconnecting...` notice (its cause helps classify the final error).
    last_retry: Option<String>,
    /// A fatal top-level `error` not yet followed by `turn.completed`.
    fatal: Option<String>,
    /// The message of `turn.failed`.
    failed: Option<String>,
    last_error_message: Option<String>,
    turns_completed: u32,
    finished: bool,
}

impl CodexParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one stdout line (with or without its line terminator). Never panics; a line it
    /// does not understand comes back as a `raw` event.
    pub fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        parse_json_line(line, |value, line, out| match str_of(value, "type") {
            Some("thread.started") => self.on_thread_started(value, out),
            Some("turn.started") => true,
            Some("item.started") => self.on_item(value, Phase::Started, line, out),
            Some("item.updated") => self.on_item(value, Phase::Updated, line, out),
            Some("item.completed") => self.on_item(value, Phase::Completed, line, out),
            Some("turn.completed") => self.on_turn_completed(value, out),
            Some("turn.failed") => self.on_turn_failed(value, out),
            Some("error") => self.on_error(value, line, out),
            _ => false,
        })
    }

    /// Called once at EOF: flushes a held message as not final (no `turn.completed`: no
    /// final answer) and ends open subagents as `interrupted`. Idempotent.
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

    /// The thread id (the same on resume).
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The message that ended the turn, joined by blank lines.
    pub fn final_text(&self) -> String {
        self.final_text.join("\n\n")
    }

    /// The agent messages in order, joined by blank lines, as far back as
    /// [`TEXT_TAIL`](super::TEXT_TAIL).
    pub fn all_text(&self) -> String {
        self.main_text.join("\n\n")
    }

    /// The `turn.failed` message, else that of a fatal `error` that no `turn.completed`
    /// followed.
    pub fn error_message(&self) -> Option<String> {
        self.failed.clone().or_else(|| self.fatal.clone())
    }

    /// Why a run that exited 0 has no final answer: its turn ended without a closing message
    /// (the last item was a tool call).
    pub fn explain_missing_answer(&self) -> Option<String> {
        (self.final_text.is_empty() && self.turns_completed > 0)
            .then(|| "Codex ended its turn without a final message (its last step was a tool call).".to_string())
    }

    /// True when stderr says the thread to resume does not exist (`no rollout found for
    /// thread id …`).
    pub fn session_not_found(stderr_tail: &str) -> bool {
        strip_ansi(stderr_tail).contains("no rollout found for thread id")
    }

    fn on_thread_started(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        let Some(id) = str_of(v, "thread_id").filter(|s| !s.is_empty()) else {
            return false;
        };
        if self.session_id.as_deref() != Some(id) {
            self.session_id = Some(id.to_string());
            out.push(ParsedEvent::main(EventBody::Session {
                provider_session_id: id.to_string(),
            }));
        }
        true
    }

    fn on_item(&mut self, v: &Value, phase: Phase, line: &str, out: &mut Vec<ParsedEvent>) -> bool {
        let Some(item) = v.get("item").filter(|i| i.is_object()) else {
            return false;
        };
        let id = str_of(item, "id").unwrap_or("").to_string();
        match str_of(item, "type").unwrap_or("") {
            "agent_message" | "plan" => {
                if phase != Phase::Completed {
                    return true;
                }
                let Some(text) = str_of(item, "text") else {
                    return false;
                };
                self.flush(false, out);
                if !text.is_empty() {
                    self.main_text.push(text.to_string());
                    self.pending.push(EventBody::Text {
                        text: text.to_string(),
                        is_final: false,
                    });
                }
                true
            }
            "reasoning" => {
                if phase != Phase::Completed {
                    return true;
                }
                let Some(text) = str_of(item, "text") else {
                    return false;
                };
                self.flush(false, out);
                if !text.is_empty() {
                    out.push(ParsedEvent::main(EventBody::Reasoning { text: text.to_string() }));
                }
                true
            }
            "error" => {
                // A warning: kept as a raw line, behind a held message.
                self.defer(raw_event(line).body, out);
                true
            }
            kind @ ("command_execution" | "file_change" | "mcp_tool_call" | "web_search" | "collab_tool_call") => {
                if id.is_empty() {
                    return false;
                }
                self.on_tool_item(kind, &id, item, phase, out);
                true
            }
            _ => false,
        }
    }

    fn on_tool_item(&mut self, kind: &str, id: &str, item: &Value, phase: Phase, out: &mut Vec<ParsedEvent>) {
        self.flush(false, out);
        let (name, input) = tool_call_of(kind, item);
        if self.calls.insert(id.to_string()) {
            out.push(ParsedEvent::main(EventBody::ToolCall {
                call_id: id.to_string(),
                name,
                input: truncate_chars(&input, INPUT_SUMMARY_MAX),
            }));
        }
        if kind == "collab_tool_call" {
            self.on_collab(item, phase == Phase::Completed, out);
        }
        if phase != Phase::Completed || !self.results.insert(id.to_string()) {
            return;
        }
        let (status, output) = tool_result_of(kind, item);
        out.push(ParsedEvent::main(EventBody::ToolResult {
            call_id: id.to_string(),
            status,
            output: truncate_chars(&output, OUTPUT_SUMMARY_MAX),
        }));
    }

    /// Subagents of a collab tool call: started at `spawn_agent`'s completion (when the
    /// receiver thread ids are known), ended by a terminal state in `agents_states`.
    fn on_collab(&mut self, item: &Value, completed: bool, out: &mut Vec<ParsedEvent>) {
        let tool = str_of(item, "tool").unwrap_or("");
        let receivers: Vec<String> = item
            .get("receiver_thread_ids")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let label = str_of(item, "prompt")
            .map(first_line)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "subagent".to_string());
        if tool == "spawn_agent" && completed {
            for r in &receivers {
                self.subagents.start(r, &label, out);
            }
        }
        let Some(states) = item.get("agents_states").and_then(Value::as_object) else {
            return;
        };
        let mut keys: Vec<&String> = states.keys().collect();
        // Receivers first, in their order, then any other agent the states mention.
        keys.sort_by_key(|k| receivers.iter().position(|r| r == *k).unwrap_or(usize::MAX));
        for key in keys {
            let state = &states[key];
            let status = match str_of(state, "status").unwrap_or("") {
                "completed" => "completed",
                "errored" | "not_found" => "error",
                "shutdown" => "cancelled",
                _ => continue,
            };
            if self.subagents.has_ended(key) {
                continue;
            }
            self.subagents.start(key, &label, out);
            if let Some(message) = str_of(state, "message").filter(|m| !m.trim().is_empty()) {
                out.push(ParsedEvent {
                    agent: Some(key.clone()),
                    body: EventBody::Text {
                        text: message.to_string(),
                        is_final: false,
                    },
                });
            }
            self.subagents.end(key, status, out);
        }
    }

    fn on_turn_completed(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        self.flush(true, out);
        self.turns_completed += 1;
        self.fatal = None;
        self.last_retry = None;
        // Cumulative for the thread (see the module docs): the runner takes the difference.
        let usage = v.get("usage").unwrap_or(&Value::Null);
        let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
        let cached = n("cached_input_tokens");
        out.push(ParsedEvent::main(EventBody::Usage {
            input_tokens: n("input_tokens").saturating_sub(cached),
            output_tokens: n("output_tokens"),
            cache_read_tokens: cached,
            cache_write_tokens: n("cache_write_input_tokens"),
            cost_usd: 0.0,
        }));
        true
    }

    fn on_turn_failed(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        self.flush(false, out);
        let message = v
            .get("error")
            .and_then(|e| str_of(e, "message"))
            .filter(|m| !m.trim().is_empty())
            .unwrap_or("the Codex turn failed")
            .to_string();
        if self.last_error_message.as_deref() != Some(message.as_str()) {
            self.emit_error(&message, out);
        }
        self.failed = Some(message);
        true
    }

    fn on_error(&mut self, v: &Value, line: &str, out: &mut Vec<ParsedEvent>) -> bool {
        let Some(message) = str_of(v, "message") else {
            return false;
        };
        if message.starts_with("Reconnecting...") {
            self.last_retry = Some(message.to_string());
            self.defer(raw_event(line).body, out);
            return true;
        }
        self.flush(false, out);
        self.emit_error(message, out);
        self.fatal = Some(message.to_string());
        true
    }

    fn emit_error(&mut self, message: &str, out: &mut Vec<ParsedEvent>) {
        let retry = self.last_retry.as_deref().unwrap_or("");
        let status = status_in_text(message).or_else(|| status_in_text(retry));
        let mut kind = classify_api_error(status, None, message);
        if kind == ErrorKind::Unknown && !retry.is_empty() {
            kind = classify_api_error(status, None, retry);
        }
        self.last_error_message = Some(message.to_string());
        out.push(ParsedEvent::main(EventBody::Error {
            error_kind: kind,
            message: message.to_string(),
        }));
    }

    /// Emits `body` now, or after the held message when there is one.
    fn defer(&mut self, body: EventBody, out: &mut Vec<ParsedEvent>) {
        if self.pending.is_empty() {
            out.push(ParsedEvent::main(body));
        } else {
            self.pending.push(body);
        }
    }

    /// Emits the held message (final when `is_final`) and what was queued behind it.
    fn flush(&mut self, is_final: bool, out: &mut Vec<ParsedEvent>) {
        emit_held(std::mem::take(&mut self.pending), is_final, &mut self.final_text, out);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Started,
    Updated,
    Completed,
}

impl LineParser for CodexParser {
    fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        CodexParser::parse_line(self, line)
    }
    fn finish(&mut self) -> Vec<ParsedEvent> {
        CodexParser::finish(self)
    }
    fn session_id(&self) -> Option<String> {
        CodexParser::session_id(self).map(str::to_owned)
    }
    fn all_text(&self) -> String {
        CodexParser::all_text(self)
    }
    fn text_dropped(&self) -> bool {
        self.main_text.dropped()
    }
    fn final_text(&self) -> String {
        CodexParser::final_text(self)
    }
    fn error_message(&self) -> Option<String> {
        CodexParser::error_message(self)
    }
    fn explain_missing_answer(&self, _stderr_tail: &str) -> Option<String> {
        CodexParser::explain_missing_answer(self)
    }
    fn session_not_found(&self, stderr_tail: &str) -> bool {
        CodexParser::session_not_found(stderr_tail)
    }
}

fn first_line(s: &str) -> String {
    truncate_chars(s.lines().next().unwrap_or("").trim(), 80)
}

/// The command without the shell wrapper Codex adds: `/bin/bash -lc 'cat README.md'` →
/// `cat README.md` (a quoted `'\''` inside becomes `'`).
pub fn unwrap_shell(command: &str) -> String {
    for prefix in ["/bin/bash -lc ", "bash -lc ", "/bin/sh -c ", "sh -c ", "/bin/zsh -lc "] {
        if let Some(rest) = command.strip_prefix(prefix) {
            if rest.len() >= 2 && rest.starts_with('\'') && rest.ends_with('\'') {
                return rest[1..rest.len() - 1].replace(r"'\''", "'");
            }
            if rest.len() >= 2 && rest.starts_with('"') && rest.ends_with('"') {
                return rest[1..rest.len() - 1].to_string();
            }
            return rest.to_string();
        }
    }
    command.to_string()
}

/// The tool name and input summary of a tool-like item.
fn tool_call_of(kind: &str, item: &Value) -> (String, String) {
    match kind {
        "command_execution" => ("shell".into(), unwrap_shell(str_of(item, "command").unwrap_or(""))),
        "file_change" => ("apply_patch".into(), changes_summary(item)),
        "mcp_tool_call" => {
            let server = str_of(item, "server").unwrap_or("mcp");
            let tool = str_of(item, "tool").unwrap_or("tool");
            let args = match item.get("arguments") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            (format!("{server}/{tool}"), args)
        }
        "web_search" => ("web_search".into(), str_of(item, "query").unwrap_or("").to_string()),
        "collab_tool_call" => (
            str_of(item, "tool").unwrap_or("collab").to_string(),
            str_of(item, "prompt").map(str::to_string).unwrap_or_else(|| {
                item.get("receiver_thread_ids")
                    .map(Value::to_string)
                    .unwrap_or_default()
            }),
        ),
        _ => (kind.to_string(), String::new()),
    }
}

fn changes_summary(item: &Value) -> String {
    item.get("changes")
        .and_then(Value::as_array)
        .map(|changes| {
            changes
                .iter()
                .map(|c| {
                    format!(
                        "{} {}",
                        str_of(c, "kind").unwrap_or("change"),
                        str_of(c, "path").unwrap_or("?")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// The status and output summary of a completed tool-like item.
fn tool_result_of(kind: &str, item: &Value) -> (ToolStatus, String) {
    let status = match str_of(item, "status") {
        Some("completed") => ToolStatus::Completed,
        Some("failed") | Some("declined") => ToolStatus::Error,
        Some("in_progress") => ToolStatus::Running,
        // No status (web_search): it completed.
        _ => ToolStatus::Completed,
    };
    let output = match kind {
        "command_execution" => {
            let text = str_of(item, "aggregated_output").unwrap_or("").trim_end();
            match item.get("exit_code").and_then(Value::as_i64) {
                Some(code) if code != 0 => format!("exit code {code}\n{text}"),
                _ => text.to_string(),
            }
        }
        "file_change" => changes_summary(item),
        "mcp_tool_call" => {
            if let Some(m) = item.get("error").and_then(|e| str_of(e, "message")) {
                m.to_string()
            } else {
                item.get("result")
                    .and_then(|r| r.get("content"))
                    .and_then(Value::as_array)
                    .map(|blocks| {
                        blocks
                            .iter()
                            .map(|b| str_of(b, "text").map(str::to_string).unwrap_or_else(|| b.to_string()))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default()
            }
        }
        "collab_tool_call" => item
            .get("agents_states")
            .and_then(Value::as_object)
            .map(|states| {
                states
                    .iter()
                    .map(|(k, s)| {
                        let status = str_of(s, "status").unwrap_or("?");
                        match str_of(s, "message") {
                            Some(m) => format!("{k}: {status}: {m}"),
                            None => format!("{k}: {status}"),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default(),
        _ => String::new(),
    };
    (status, output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::test_support::{errors, feed, fixtures, shape, texts, usages};
    use planwire_protocol::SubagentPhase;

    fixtures!(
        "codex":
        "a_plan",
        "b_shell",
        "c_reasoning",
        "d_401",
        "d_429",
        "d_429_quota",
        "d_500",
        "d_500_retries",
        "d_failed",
        "d_failed_retries",
        "e_resume",
        "e_resume_last",
        "f_sigint",
        "f_sigterm",
        "g_cmd_fail",
        "i_apply_patch",
        "m_nokey",
        "n_connrefused",
        "n_connrefused_bounded",
        "p_long_cmd",
    );

    const BADID_STDERR: &str = include_str!("../../../tests/fixtures/codex/e_resume_badid.stderr.txt");
    const NOGIT_STDERR: &str = include_str!("../../../tests/fixtures/codex/j_nogit.stderr.txt");

    fn run(name: &str) -> (CodexParser, Vec<ParsedEvent>) {
        let mut p = CodexParser::new();
        let events = feed(&mut p, fixture(name));
        (p, events)
    }

    #[test]
    fn a_plan_final_message_warning_and_usage() {
        let (p, events) = run("a_plan");
        assert_eq!(shape(&events), ["session", "raw", "text!", "usage"]);
        assert_eq!(p.session_id(), Some("01a22bd3-2662-7323-bf1b-39368867f814"));
        assert!(p.final_text().starts_with("Here is my plan.\n\n<plan>"));
        assert_eq!(p.final_text(), p.all_text());
        // The metadata warning is no error.
        assert!(errors(&events).is_empty());
        assert_eq!(p.error_message(), None);
        assert_eq!(usages(&events), [(1034, 56, 200, 0, 0.0)]);
    }

    #[test]
    fn b_shell_call_and_result_with_unwrapped_command() {
        let (p, events) = run("b_shell");
        assert_eq!(
            shape(&events),
            ["session", "raw", "text", "toolCall", "toolResult=ok", "text!", "usage"]
        );
        assert_eq!(
            events[3].body,
            EventBody::ToolCall {
                call_id: "item_2".into(),
                name: "shell".into(),
                input: "cat README.md && ls".into()
            }
        );
        assert!(matches!(
            &events[4].body,
            EventBody::ToolResult { call_id, output, .. }
                if call_id == "item_2" && output.contains("# Demo repo") && !output.ends_with('\n')
        ));
        assert_eq!(
            texts(&events),
            [
                ("I'll look at the README first.".to_string(), false),
                ("The README says hello; files: README.md, main.rs.".to_string(), true)
            ]
        );
        assert_eq!(p.final_text(), "The README says hello; files: README.md, main.rs.");
        assert_eq!(usages(&events), [(1200, 45, 1000, 0, 0.0)]);
    }

    #[test]
    fn c_reasoning_then_final() {
        let (_, events) = run("c_reasoning");
        assert_eq!(shape(&events), ["session", "reasoning", "text!", "usage"]);
        // Output tokens include the reasoning tokens.
        assert_eq!(usages(&events), [(900, 120, 0, 0, 0.0)]);
    }

    fn assert_failed(name: &str, kind: ErrorKind, message: &str) {
        let (p, events) = run(name);
        assert_eq!(shape(&events).last().unwrap(), &format!("error:{kind:?}"), "{name}");
        let errs = errors(&events);
        assert_eq!(errs.len(), 1, "{name}: turn.failed repeats the error: one event");
        assert_eq!(errs[0].1, message, "{name}");
        assert_eq!(p.error_message().as_deref(), Some(message), "{name}");
        assert_eq!(p.final_text(), "", "{name}");
        assert!(usages(&events).is_empty(), "{name}");
    }

    #[test]
    fn d_errors_are_typed() {
        assert_failed(
            "d_401",
            ErrorKind::Auth,
            "unexpected status 401 Unauthorized: Incorrect API key provided: sk-mock-123., url: http://127.0.0.1:18080/v1/responses",
        );
        assert_failed(
            "d_429",
            ErrorKind::RateLimit,
            "exceeded retry limit, last status: 429 Too Many Requests",
        );
        assert_failed(
            "d_429_quota",
            ErrorKind::RateLimit,
            "Quota exceeded. Check your plan and billing details.",
        );
        assert_failed(
            "d_500",
            ErrorKind::Overloaded,
            "We’re currently experiencing high demand, which may cause temporary errors.",
        );
        assert_failed(
            "d_500_retries",
            ErrorKind::Overloaded,
            "We’re currently experiencing high demand, which may cause temporary errors.",
        );
        assert_failed(
            "m_nokey",
            ErrorKind::Auth,
            "Missing environment variable: `MOCK_API_KEY`.",
        );
        assert_failed(
            "n_connrefused_bounded",
            ErrorKind::Network,
            "Connection failed: error sending request",
        );
    }

    #[test]
    fn d_retries_are_raw_notices() {
        let (_, events) = run("d_500_retries");
        assert_eq!(shape(&events), ["session", "raw", "raw", "error:Overloaded"]);
    }

    #[test]
    fn d_failed_partial_message_is_kept_not_final() {
        let (p, events) = run("d_failed");
        assert_eq!(shape(&events), ["session", "text", "error:Network"]);
        assert_eq!(p.all_text(), "partial ");
        assert_eq!(p.final_text(), "");
        let (p, events) = run("d_failed_retries");
        assert_eq!(
            shape(&events),
            ["session", "text", "raw", "text", "raw", "text", "error:Network"]
        );
        assert!(texts(&events).iter().all(|(_, f)| !f));
        assert_eq!(p.final_text(), "");
    }

    #[test]
    fn e_resume_same_thread_cumulative_usage() {
        let (first, a) = run("a_plan");
        let (p, events) = run("e_resume");
        assert_eq!(p.session_id(), first.session_id());
        assert_eq!(shape(&events), ["session", "raw", "text!", "usage"]);
        // Thread totals, as reported: 1234 + 1500 input, 200 + 1234 cached.
        assert_eq!(usages(&events), [(1300, 68, 1434, 0, 0.0)]);
        // What the runner stores for the resumed run: the difference.
        let (before, after) = (usages(&a)[0], usages(&events)[0]);
        assert_eq!(
            (after.0 - before.0, after.1 - before.1, after.2 - before.2),
            (266, 12, 1234)
        );
        let (p, events) = run("e_resume_last");
        assert_eq!(shape(&events), ["session", "raw", "raw", "text!", "usage"]);
        assert_eq!(p.final_text(), "Resumed via --last.");
    }

    #[test]
    fn e_unknown_resume_id_and_no_git_repo_have_empty_stdout() {
        let mut p = CodexParser::new();
        assert!(feed(&mut p, "").is_empty());
        assert_eq!(p.error_message(), None);
        assert!(CodexParser::session_not_found(BADID_STDERR));
        assert!(!CodexParser::session_not_found(NOGIT_STDERR));
        assert!(LineParser::session_not_found(&p, BADID_STDERR));
    }

    #[test]
    fn f_killed_mid_stream_has_no_final_text() {
        let (p, events) = run("f_sigterm");
        assert_eq!(shape(&events), ["session", "reasoning"]);
        assert_eq!(p.final_text(), "");
        assert_eq!(p.error_message(), None);
        let (p, events) = run("f_sigint");
        assert_eq!(shape(&events), ["session"]);
        assert_eq!(p.error_message(), None);
        // Killed with a message held: flushed at EOF, not final.
        let text: String = fixture("a_plan").lines().take(4).map(|l| format!("{l}\n")).collect();
        let mut p = CodexParser::new();
        let events = feed(&mut p, &text);
        assert_eq!(shape(&events), ["session", "raw", "text"]);
        assert_eq!(p.final_text(), "");
        assert!(p.finish().is_empty(), "finish is idempotent");
    }

    #[test]
    fn g_failed_command_is_an_error_result_with_exit_code() {
        let (p, events) = run("g_cmd_fail");
        assert_eq!(
            shape(&events),
            ["session", "toolCall", "toolResult=err", "text!", "usage"]
        );
        assert!(matches!(
            &events[2].body,
            EventBody::ToolResult { output, .. }
                if output.starts_with("exit code 2\n") && output.contains("Read-only file system")
        ));
        assert!(p.final_text().starts_with("The sandbox blocked"));
    }

    #[test]
    fn i_file_change_is_a_tool_call() {
        let (_, events) = run("i_apply_patch");
        assert_eq!(
            shape(&events),
            ["session", "toolCall", "toolResult=ok", "text!", "usage"]
        );
        assert!(matches!(
            &events[1].body,
            EventBody::ToolCall { name, input, .. }
                if name == "apply_patch" && input == "update /home/dev/project/README.md, add /home/dev/project/notes.txt"
        ));
    }

    #[test]
    fn n_unbounded_reconnects_are_raw_and_no_error() {
        let (p, events) = run("n_connrefused");
        assert_eq!(shape(&events), ["session", "raw", "raw"]);
        assert_eq!(p.error_message(), None);
    }

    #[test]
    fn p_command_that_outlives_the_turn_has_no_result() {
        let (p, events) = run("p_long_cmd");
        assert_eq!(shape(&events), ["session", "toolCall", "text!", "usage"]);
        assert_eq!(p.final_text(), "Command finished.");
        assert_eq!(p.explain_missing_answer(), None);
    }

    #[test]
    fn turn_ending_on_a_tool_call_has_no_final_text_and_says_so() {
        let text: String = fixture("g_cmd_fail")
            .lines()
            .filter(|l| !l.contains("agent_message"))
            .map(|l| format!("{l}\n"))
            .collect();
        let mut p = CodexParser::new();
        let events = feed(&mut p, &text);
        assert_eq!(shape(&events), ["session", "toolCall", "toolResult=err", "usage"]);
        assert_eq!(p.final_text(), "");
        assert!(LineParser::explain_missing_answer(&p, "")
            .unwrap()
            .contains("without a final message"));
    }

    #[test]
    fn warning_after_the_final_message_keeps_it_final_and_in_order() {
        let lines = [
            r#"{"type":"thread.started","thread_id":"t"}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"done"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"error","message":"warn"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":1}}"#,
        ];
        let mut p = CodexParser::new();
        let events = feed(&mut p, &lines.join("\n"));
        assert_eq!(shape(&events), ["session", "text!", "raw", "usage"]);
        assert_eq!(p.final_text(), "done");
    }

    #[test]
    fn collab_subagents_start_and_end_with_their_message() {
        let lines = [
            r#"{"type":"item.started","item":{"id":"item_1","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"t","receiver_thread_ids":[],"prompt":"Find the division code\nand report","agents_states":{},"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"t","receiver_thread_ids":["child-1"],"prompt":"Find the division code\nand report","agents_states":{"child-1":{"status":"running","message":null}},"status":"completed"}}"#,
            r#"{"type":"item.started","item":{"id":"item_2","type":"collab_tool_call","tool":"wait","sender_thread_id":"t","receiver_thread_ids":["child-1"],"prompt":null,"agents_states":{},"status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_2","type":"collab_tool_call","tool":"wait","sender_thread_id":"t","receiver_thread_ids":["child-1"],"prompt":null,"agents_states":{"child-1":{"status":"completed","message":"src/calc.py:7"}},"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_3","type":"collab_tool_call","tool":"spawn_agent","sender_thread_id":"t","receiver_thread_ids":["child-2"],"prompt":"Other","agents_states":{},"status":"completed"}}"#,
        ];
        let mut p = CodexParser::new();
        let events = feed(&mut p, &lines.join("\n"));
        assert_eq!(
            shape(&events),
            [
                "toolCall",
                "subagent:start@child-1",
                "toolResult=ok",
                "toolCall",
                "text@child-1",
                "subagent:end@child-1",
                "toolResult=ok",
                "toolCall",
                "subagent:start@child-2",
                "toolResult=ok",
                "subagent:end@child-2"
            ]
        );
        assert_eq!(
            events[1].body,
            EventBody::Subagent {
                phase: SubagentPhase::Start,
                label: "Find the division code".into(),
                status: None
            }
        );
        assert!(matches!(
            &events[10].body,
            EventBody::Subagent { status: Some(s), .. } if s == "interrupted"
        ));
        assert_eq!(p.all_text(), "");
    }

    #[test]
    fn garbage_and_unknown_lines_are_kept_raw() {
        let half = &fixture("a_plan").lines().nth(3).unwrap()[..60];
        let lines = [
            "not json at all",
            "[1,2,3]",
            r#"{"type":"mystery"}"#,
            r#"{"type":"thread.started"}"#,
            r#"{"type":"item.completed"}"#,
            r#"{"type":"item.completed","item":{"id":"item_9","type":"todo_list","items":[]}}"#,
            r#"{"type":"item.started","item":{"type":"command_execution","command":"ls"}}"#,
            r#"{"type":"error"}"#,
            half,
        ];
        let mut p = CodexParser::new();
        for line in lines {
            assert_eq!(
                p.parse_line(line),
                vec![ParsedEvent::main(EventBody::Raw { line: line.to_string() })],
                "{line}"
            );
        }
        assert!(p.parse_line("").is_empty());
        assert!(p.parse_line("\r\n").is_empty());
        assert!(p.finish().is_empty());
        assert_eq!(p.session_id(), None);
    }

    #[test]
    fn shell_unwrapping() {
        assert_eq!(unwrap_shell("/bin/bash -lc 'cat a && ls'"), "cat a && ls");
        assert_eq!(unwrap_shell(r#"/bin/bash -lc 'echo '\''hi'\'''"#), "echo 'hi'");
        assert_eq!(unwrap_shell("/bin/bash -lc ls"), "ls");
        assert_eq!(unwrap_shell("rg -n foo"), "rg -n foo");
    }

    #[test]
    fn argv_shapes() {
        let common = [
            "--skip-git-repo-check",
            "-c",
            "features.unbounded_connection_retries=false",
            "-c",
            "features.daemon_auto_start=false",
        ];
        let first = |extra: &[&str]| {
            let mut v: Vec<String> = ["exec", "--json", "--sandbox", "read-only"]
                .iter()
                .chain(common.iter())
                .chain(extra.iter())
                .map(|s| s.to_string())
                .collect();
            v.push("-".into());
            v
        };
        assert_eq!(argv(None, None, None), first(&[]));
        assert_eq!(
            argv(Some("gpt-5.5"), None, Some("high")),
            first(&["-m", "gpt-5.5", "-c", "model_reasoning_effort=high"])
        );
        let resume: Vec<String> = ["exec", "resume", "--json", "0199-thread"]
            .iter()
            .chain(common.iter())
            .chain(["-m", "gpt-5.5", "-c", "sandbox_mode=read-only", "-"].iter())
            .map(|s| s.to_string())
            .collect();
        assert_eq!(argv(Some("gpt-5.5"), Some("0199-thread"), None), resume);
        // Values that could be flags or config injections are dropped.
        assert_eq!(
            argv(
                Some("--yolo"),
                Some("--last"),
                Some("high\nsandbox_mode=danger-full-access")
            ),
            first(&[])
        );
        assert!(!argv(None, None, None).iter().any(|a| a.contains("danger")));
    }

    #[test]
    fn env_turns_backtraces_off() {
        assert_eq!(env(), [("RUST_BACKTRACE".to_string(), "0".to_string())]);
    }
}

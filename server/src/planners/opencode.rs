//! OpenCode adapter: the argv and environment of a plan run, and the stateful parser that
//! turns `opencode run --agent plan --format json` stdout into normalized events.
//!
//! Ground truth is the recordings copied into `tests/fixtures/opencode/` (from the shared notes
//! on the real CLI, 1.18.33). Every stdout line is one whole JSON event
//! `{type, timestamp, sessionID, part | error}`; warnings go to stderr. The traps they show,
//! and what this adapter does about each:
//!
//! - **Events are whole, not deltas**, and a `text` part is printed once it has finished.
//!   Which text is the final answer is only known at the step's `step_finish`: text and
//!   reasoning are held per step and flushed there, `final` when the step's `reason` is
//!   `stop` (a step that ends with `tool-calls`, `length` or `unknown` — a cut stream — is not
//!   final). A `tool_use`, a new `step_start`, an `error` or EOF flushes them as not final
//!   first, so the order of the stream is kept.
//! - **`tool_use` only in terminal states, in completion order** (not call order): each one
//!   becomes its `toolCall` and `toolResult` together, matched by `callID`. Should a future
//!   version print a `pending`/`running` state first, the call is emitted once and the result
//!   when a terminal state arrives.
//! - **A subagent (`task`) is one final `tool_use`**: the child's own events never reach the
//!   stream. It becomes `toolCall`, `subagent start`, the child's final result as `text` under
//!   the agent key (the call id), `subagent end` (status from `<task state="…">`), then
//!   `toolResult`. The child session id (`part.state.metadata.sessionId`) is kept in
//!   [`OpenCodeParser::child_sessions`]; `opencode export <id>` prints its whole transcript.
//! - **`step_finish` carries tokens and cost**: `cost` may be an integer, `tokens.total` may be
//!   missing (a dropped stream). Each step adds to the run's totals and a `usage` event with
//!   the running totals follows it, so the last `usage` event of a run is its total.
//!   `inputTokens` is `tokens.input` (uncached input, like Claude's), `outputTokens` is
//!   `tokens.output + tokens.reasoning` (reasoning is billed as output).
//! - **`error` events** (`APIError` with `statusCode`, `ContextOverflowError`,
//!   `ProviderAuthError`, `UnknownError`, …) become typed `error` events; the CLI then exits 1.
//!   An error repeated as is (a compaction attempt gets the same context overflow) is shown
//!   once. [`OpenCodeParser::error_message`] is the first error's message.
//! - **Exit 0 without an answer**: an auto-rejected permission, an empty reply or a cut
//!   stream end with exit 0 and no final text. `final_text` is then empty, and
//!   `explain_missing_answer` says why, from stderr (`! permission requested: … ;
//!   auto-rejecting`) or from what the stream showed.
//! - **`sessionID` is always the root session** (also while a subagent works); the first one
//!   seen becomes the `session` event.
//!
//! Blank lines produce nothing, and `step_start` only flushes. Anything else — a non-JSON
//! or truncated line, an unknown `type`, a known type without its payload — becomes `raw`.
//!
//! Launch: `run --agent plan --format json [--session S] [--model M] [--variant V]
//! [--title T]` with the prompt on stdin (as an argument, a prompt with spaces arrives wrapped
//! in literal quotes; an open stdin pipe hangs it, so the runner closes it). The `plan` agent
//! still runs any bash command, so read-only permission rules go in `OPENCODE_CONFIG_CONTENT`
//! (merged over the user's own config, which keeps its providers and models), both as the
//! top-level `permission` (which also binds subagents) and as `agent.plan.permission`, and
//! again in `OPENCODE_PERMISSION`.

use std::collections::HashSet;

use planwire_protocol::{ErrorKind, EventBody, ToolStatus};
use serde_json::Value;

use super::claude::OUTPUT_SUMMARY_MAX;
use super::{
    classify_api_error, emit_held, flag_value_ok, parse_json_line, str_of, strip_ansi, summarize_fields,
    truncate_chars, LineParser, ParsedEvent, TextTail,
};

/// The session title when the ticket has none (any `--title` saves a title-generation
/// request to the model).
pub const DEFAULT_TITLE: &str = "planwire plan";
/// Longest title passed, in characters.
const TITLE_MAX: usize = 100;

/// Bash rules of the read-only permission set. OpenCode applies the last matching rule, so
/// the catch-all `deny` comes first, then the read-only commands, then denials of the flags
/// that let those commands write or run something else. (The first two groups were checked
/// against the real CLI: `git status --short` ran, `touch` was denied.)
const BASH_RULES: &[(&str, &str)] = &[
    ("*", "deny"),
    ("ls", "allow"),
    ("ls *", "allow"),
    ("pwd", "allow"),
    ("cat *", "allow"),
    ("head *", "allow"),
    ("tail *", "allow"),
    ("wc *", "allow"),
    ("rg *", "allow"),
    ("grep *", "allow"),
    ("find *", "allow"),
    ("tree *", "allow"),
    ("git status*", "allow"),
    ("git diff*", "allow"),
    ("git log*", "allow"),
    ("git show*", "allow"),
    ("git branch", "allow"),
    ("git ls-files*", "allow"),
    ("git rev-parse*", "allow"),
    ("find *-delete*", "deny"),
    ("find *-exec*", "deny"),
    ("find *-ok*", "deny"),
    ("find *-fprint*", "deny"),
    ("find *-fls*", "deny"),
    ("rg *--pre*", "deny"),
    ("git *--output*", "deny"),
    ("tree *-o *", "deny"),
];

/// The read-only permission object, as JSON text (built by hand: rule order matters, and
/// `serde_json` maps here are sorted).
pub fn readonly_permission() -> String {
    let bash: Vec<String> = BASH_RULES
        .iter()
        .map(|(pattern, action)| format!("{}:{}", Value::from(*pattern), Value::from(*action)))
        .collect();
    format!(
        r#"{{"edit":"deny","webfetch":"deny","external_directory":"deny","bash":{{{}}}}}"#,
        bash.join(",")
    )
}

/// `OPENCODE_CONFIG_CONTENT`: the read-only permission set as the top-level `permission`
/// and as `agent.plan.permission`. When the environment already holds a config object
/// (`inherited`), its other keys are kept, its `permission` and `agent.plan.permission` are
/// replaced.
pub fn config_content(inherited: Option<&str>) -> String {
    let perm = readonly_permission();
    let plan_perm = format!(r#""permission":{perm}"#);
    let inherited = inherited
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .and_then(|v| match v {
            Value::Object(map) => Some(map),
            _ => None,
        });
    let Some(mut map) = inherited else {
        return format!(r#"{{"permission":{perm},"agent":{{"plan":{{{plan_perm}}}}}}}"#);
    };
    map.remove("permission");
    let entry = |k: String, v: Value| format!("{}:{}", Value::String(k), v);
    let mut agents: Vec<String> = Vec::new();
    let mut plan: Vec<String> = Vec::new();
    if let Some(Value::Object(mut other_agents)) = map.remove("agent") {
        if let Some(Value::Object(mut old_plan)) = other_agents.remove("plan") {
            old_plan.remove("permission");
            plan.extend(old_plan.into_iter().map(|(k, v)| entry(k, v)));
        }
        agents.extend(other_agents.into_iter().map(|(k, v)| entry(k, v)));
    }
    plan.push(plan_perm);
    agents.push(format!(r#""plan":{{{}}}"#, plan.join(",")));
    let mut parts: Vec<String> = map.into_iter().map(|(k, v)| entry(k, v)).collect();
    parts.push(format!(r#""permission":{perm}"#));
    parts.push(format!(r#""agent":{{{}}}"#, agents.join(",")));
    format!("{{{}}}", parts.join(","))
}

/// The argv (without the program) of a plan run:
/// `run --agent plan --format json [--session S] [--model M] [--variant V] [--title T]`.
/// The prompt is not an argument: it goes on stdin. `--title` is left out on resume (the
/// session has one). A session, model or variant that could be read as a flag is left out;
/// the title is cleaned (no control characters, no leading `-`) and cut.
pub fn argv(model: Option<&str>, resume: Option<&str>, variant: Option<&str>, title: Option<&str>) -> Vec<String> {
    let mut args: Vec<String> = ["run", "--agent", "plan", "--format", "json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let resume = resume.filter(|s| flag_value_ok(s));
    if let Some(session) = resume {
        args.push("--session".into());
        args.push(session.into());
    }
    if let Some(model) = model.filter(|m| flag_value_ok(m)) {
        args.push("--model".into());
        args.push(model.into());
    }
    if let Some(variant) = variant.filter(|v| flag_value_ok(v)) {
        args.push("--variant".into());
        args.push(variant.into());
    }
    if resume.is_none() {
        args.push("--title".into());
        args.push(clean_title(title));
    }
    args
}

fn clean_title(title: Option<&str>) -> String {
    let flat: String = title
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let words: Vec<&str> = flat.split_whitespace().collect();
    let joined = words.join(" ");
    let t = joined.trim_start_matches(['-', ' ']);
    if t.is_empty() {
        DEFAULT_TITLE.to_string()
    } else {
        truncate_chars(t, TITLE_MAX)
    }
}

/// Environment for the CLI: no models.dev catalogue fetch (offline it logs an error and
/// carries on), no autoupdate, LSP download or sharing, and the read-only permission rules.
/// `inherited_config` is the caller's own `OPENCODE_CONFIG_CONTENT`, merged in.
pub fn env(inherited_config: Option<&str>) -> Vec<(String, String)> {
    vec![
        ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
        ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD".into(), "1".into()),
        ("OPENCODE_DISABLE_SHARE".into(), "1".into()),
        ("OPENCODE_CONFIG_CONTENT".into(), config_content(inherited_config)),
        ("OPENCODE_PERMISSION".into(), readonly_permission()),
    ]
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Totals {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    cost: f64,
}

/// Stateful parser of one OpenCode run's stdout. Feed every line to
/// [`parse_line`](Self::parse_line), then call [`finish`](Self::finish) at EOF.
#[derive(Debug, Default)]
pub struct OpenCodeParser {
    session_id: Option<String>,
    /// Text and reasoning of the current step, until its `step_finish`.
    pending: Vec<EventBody>,
    main_text: TextTail,
    final_text: TextTail,
    calls: HashSet<String>,
    results: HashSet<String>,
    child_sessions: Vec<(String, String)>,
    totals: Totals,
    steps: u32,
    last_reason: Option<String>,
    /// Tool calls refused by an (auto-)rejected permission request, as `tool input`.
    rejected: Vec<String>,
    last_error: Option<(ErrorKind, String)>,
    error_message: Option<String>,
    finished: bool,
}

impl OpenCodeParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one stdout line (with or without its line terminator). Never panics; a line it
    /// does not understand comes back as a `raw` event.
    pub fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        parse_json_line(line, |value, _, out| {
            let kind = str_of(value, "type").unwrap_or("");
            let known = matches!(
                kind,
                "step_start" | "text" | "reasoning" | "tool_use" | "step_finish" | "error"
            );
            if known {
                self.note_session(value, out);
            }
            match kind {
                "step_start" => {
                    self.flush(false, out);
                    self.steps += 1;
                    true
                }
                "text" => self.on_text(value, false),
                "reasoning" => self.on_text(value, true),
                "tool_use" => self.on_tool_use(value, out),
                "step_finish" => self.on_step_finish(value, out),
                "error" => self.on_error(value, out),
                _ => false,
            }
        })
    }

    /// Called once at EOF: flushes held text as not final (a step cut before its
    /// `step_finish` is no final answer). Idempotent.
    pub fn finish(&mut self) -> Vec<ParsedEvent> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let mut out = Vec::new();
        self.flush(false, &mut out);
        out
    }

    /// The root session id of the run.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// `(call id, child session id)` of every subagent (`task`) that finished.
    pub fn child_sessions(&self) -> &[(String, String)] {
        &self.child_sessions
    }

    /// The text of the last step that ended with `stop`, joined by blank lines.
    pub fn final_text(&self) -> String {
        self.final_text.join("\n\n")
    }

    /// The main-agent text parts in order, joined by blank lines, as far back as
    /// [`TEXT_TAIL`](super::TEXT_TAIL).
    pub fn all_text(&self) -> String {
        self.main_text.join("\n\n")
    }

    /// The message of the first `error` event.
    pub fn error_message(&self) -> Option<String> {
        self.error_message.clone()
    }

    /// Why there is no final answer (see [`LineParser::explain_missing_answer`]).
    pub fn explain_missing_answer(&self, stderr_tail: &str) -> Option<String> {
        if !self.final_text.is_empty() {
            return None;
        }
        let stderr = strip_ansi(stderr_tail);
        let asked: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("permission requested"))
            .map(|l| l.trim().trim_start_matches('!').trim())
            .collect();
        if !asked.is_empty() {
            return Some(format!(
                "OpenCode ended without an answer: a permission request was auto-rejected ({}). \
                 planwire runs OpenCode read-only; the plan must not need files outside the \
                 project or commands that change anything.",
                asked.join("; ")
            ));
        }
        if !self.rejected.is_empty() {
            return Some(format!(
                "OpenCode ended without an answer: a permission request was rejected ({}).",
                self.rejected.join("; ")
            ));
        }
        let message = match self.last_reason.as_deref() {
            None if self.steps == 0 => match stderr.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
                Some(last) => format!("OpenCode ended without any output: {last}"),
                None => "OpenCode ended without any output.".to_string(),
            },
            None => "OpenCode ended without a final answer: its last step never finished.".to_string(),
            Some("stop") => "OpenCode ended without an answer: the model returned an empty reply.".to_string(),
            Some("length") => "OpenCode ended without a final answer: the reply was cut off \
                               at the model's output limit."
                .to_string(),
            Some("unknown") => "OpenCode ended without a final answer: the model's response \
                                stream was cut off."
                .to_string(),
            Some(reason) => format!("OpenCode ended without a final answer (its last step ended with `{reason}`)."),
        };
        Some(message)
    }

    /// True when stderr says the `--session` to resume does not exist.
    pub fn session_not_found(stderr_tail: &str) -> bool {
        strip_ansi(stderr_tail).contains("Session not found")
    }

    fn note_session(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) {
        if self.session_id.is_some() {
            return;
        }
        if let Some(sid) = str_of(v, "sessionID").filter(|s| !s.is_empty()) {
            self.session_id = Some(sid.to_string());
            out.push(ParsedEvent::main(EventBody::Session {
                provider_session_id: sid.to_string(),
            }));
        }
    }

    fn on_text(&mut self, v: &Value, reasoning: bool) -> bool {
        let Some(text) = v.get("part").and_then(|p| str_of(p, "text")) else {
            return false;
        };
        if text.is_empty() {
            return true;
        }
        if reasoning {
            self.pending.push(EventBody::Reasoning { text: text.to_string() });
        } else {
            self.main_text.push(text.to_string());
            self.pending.push(EventBody::Text {
                text: text.to_string(),
                is_final: false,
            });
        }
        true
    }

    fn on_tool_use(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        let Some(part) = v.get("part") else {
            return false;
        };
        let Some(id) = str_of(part, "callID")
            .or_else(|| str_of(part, "id"))
            .filter(|s| !s.is_empty())
        else {
            return false;
        };
        let id = id.to_string();
        let tool = str_of(part, "tool").unwrap_or("").to_string();
        let state = part.get("state").unwrap_or(&Value::Null);
        let input = state.get("input").unwrap_or(&Value::Null);
        self.flush(false, out);
        if self.calls.insert(id.clone()) {
            out.push(ParsedEvent::main(EventBody::ToolCall {
                call_id: id.clone(),
                name: tool.clone(),
                input: summarize_input(input),
            }));
        }
        let status = match str_of(state, "status") {
            Some("completed") => ToolStatus::Completed,
            Some("error") => ToolStatus::Error,
            // `pending` / `running`: only the call for now.
            _ => return true,
        };
        if !self.results.insert(id.clone()) {
            return true;
        }
        let output = match status {
            ToolStatus::Error => str_of(state, "error").unwrap_or("").to_string(),
            _ => match state.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
        };
        if status == ToolStatus::Error && output.contains("rejected permission") {
            let what = summarize_input(input);
            self.rejected.push(format!("{tool} {what}").trim().to_string());
        }
        let output = if tool == "task" {
            self.on_task(&id, input, state, status, &output, out)
        } else {
            output
        };
        out.push(ParsedEvent::main(EventBody::ToolResult {
            call_id: id,
            status,
            output: truncate_chars(&output, OUTPUT_SUMMARY_MAX),
        }));
        true
    }

    /// A finished subagent: start, its final result, end. Returns the result text.
    fn on_task(
        &mut self,
        id: &str,
        input: &Value,
        state: &Value,
        status: ToolStatus,
        output: &str,
        out: &mut Vec<ParsedEvent>,
    ) -> String {
        let label = str_of(input, "description")
            .or_else(|| str_of(input, "subagent_type"))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("subagent")
            .to_string();
        let child = state
            .get("metadata")
            .and_then(|m| str_of(m, "sessionId"))
            .map(str::to_string)
            .or_else(|| attribute(output, "<task ", "id"));
        if let Some(child) = child {
            self.child_sessions.push((id.to_string(), child));
        }
        let result = match (output.find("<task_result>"), output.rfind("</task_result>")) {
            (Some(a), Some(b)) if a + "<task_result>".len() <= b => {
                output[a + "<task_result>".len()..b].trim().to_string()
            }
            _ => output.trim().to_string(),
        };
        let end_status = match status {
            ToolStatus::Error => "error".to_string(),
            _ => attribute(output, "<task ", "state").unwrap_or_else(|| "completed".to_string()),
        };
        out.push(ParsedEvent::subagent_start(id, &label));
        if !result.is_empty() {
            out.push(ParsedEvent {
                agent: Some(id.to_string()),
                body: EventBody::Text {
                    text: result.clone(),
                    is_final: false,
                },
            });
        }
        out.push(ParsedEvent::subagent_end(id, &label, &end_status));
        result
    }

    fn on_step_finish(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        let Some(part) = v.get("part") else {
            self.flush(false, out);
            return false;
        };
        let reason = str_of(part, "reason").unwrap_or("").to_string();
        self.flush(reason == "stop", out);
        self.last_reason = Some(reason);
        let tokens = part.get("tokens").unwrap_or(&Value::Null);
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        let cache = tokens.get("cache").unwrap_or(&Value::Null);
        self.totals.input += n(tokens.get("input"));
        self.totals.output += n(tokens.get("output")) + n(tokens.get("reasoning"));
        self.totals.cache_read += n(cache.get("read"));
        self.totals.cache_write += n(cache.get("write"));
        self.totals.cost += part.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
        let t = self.totals;
        out.push(ParsedEvent::main(EventBody::Usage {
            input_tokens: t.input,
            output_tokens: t.output,
            cache_read_tokens: t.cache_read,
            cache_write_tokens: t.cache_write,
            cost_usd: t.cost,
        }));
        true
    }

    fn on_error(&mut self, v: &Value, out: &mut Vec<ParsedEvent>) -> bool {
        let Some(error) = v.get("error").filter(|e| e.is_object()) else {
            return false;
        };
        self.flush(false, out);
        let name = str_of(error, "name").unwrap_or("");
        let data = error.get("data").unwrap_or(&Value::Null);
        let message = str_of(data, "message")
            .filter(|m| !m.trim().is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| {
                if name.is_empty() {
                    "OpenCode reported an error".to_string()
                } else {
                    name.to_string()
                }
            });
        let error_kind = match name {
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
        self.error_message.get_or_insert_with(|| message.clone());
        let this = (error_kind, message);
        if self.last_error.as_ref() != Some(&this) {
            self.last_error = Some(this.clone());
            out.push(ParsedEvent::main(EventBody::Error {
                error_kind: this.0,
                message: this.1,
            }));
        }
        true
    }

    /// Emits the held events of the current step; its text is final when `is_final`.
    fn flush(&mut self, is_final: bool, out: &mut Vec<ParsedEvent>) {
        if self.pending.is_empty() {
            return;
        }
        let has_text = self.pending.iter().any(|b| matches!(b, EventBody::Text { .. }));
        if is_final && has_text {
            self.final_text.clear();
        }
        emit_held(std::mem::take(&mut self.pending), is_final, &mut self.final_text, out);
    }
}

impl LineParser for OpenCodeParser {
    fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        OpenCodeParser::parse_line(self, line)
    }
    fn finish(&mut self) -> Vec<ParsedEvent> {
        OpenCodeParser::finish(self)
    }
    fn session_id(&self) -> Option<String> {
        OpenCodeParser::session_id(self).map(str::to_owned)
    }
    fn all_text(&self) -> String {
        OpenCodeParser::all_text(self)
    }
    fn text_dropped(&self) -> bool {
        self.main_text.dropped()
    }
    fn final_text(&self) -> String {
        OpenCodeParser::final_text(self)
    }
    fn error_message(&self) -> Option<String> {
        OpenCodeParser::error_message(self)
    }
    fn explain_missing_answer(&self, stderr_tail: &str) -> Option<String> {
        OpenCodeParser::explain_missing_answer(self, stderr_tail)
    }
    fn session_not_found(&self, stderr_tail: &str) -> bool {
        OpenCodeParser::session_not_found(stderr_tail)
    }
}

/// The value of `name="…"` in the first tag starting with `tag` (`<task id="ses_…" …>`).
fn attribute(text: &str, tag: &str, name: &str) -> Option<String> {
    let start = text.find(tag)?;
    let end = start + text[start..].find('>')?;
    let head = &text[start..end];
    let key = format!(" {name}=\"");
    let from = head.find(&key)? + key.len();
    let len = head[from..].find('"')?;
    Some(head[from..from + len].to_string()).filter(|s| !s.is_empty())
}

/// A short summary of a tool's input: the first of its path, command, pattern, url, query,
/// description or tool name, else its compact JSON; at most [`INPUT_SUMMARY_MAX`] characters.
///
/// [`INPUT_SUMMARY_MAX`]: super::claude::INPUT_SUMMARY_MAX
pub fn summarize_input(input: &Value) -> String {
    summarize_fields(
        input,
        &[
            "filePath",
            "path",
            "command",
            "pattern",
            "url",
            "query",
            "description",
            "prompt",
            "tool",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planners::test_support::{errors, feed, fixtures, shape, texts, usages};
    use planwire_protocol::SubagentPhase;

    fixtures!(
        "opencode":
        "a_plain_text",
        "b_readonly_tools",
        "b2_plan_edit_bash",
        "b3_bash_permission_ask",
        "c_subagent_task",
        "d_question_tool",
        "e_http_401",
        "e_http_429_forever",
        "e_http_500_forever",
        "e_error_after_tool_step",
        "e_stream_drop_then_ok",
        "f_resume_session",
        "g_sigterm_midstream",
        "h_thinking_reasoning",
        "o_unknown_model",
        "p_empty_response",
        "p_finish_length",
        "q_cost_and_cache_tokens",
        "r_read_outside_repo",
    );

    const R_STDERR: &str = include_str!("../../../tests/fixtures/opencode/r_read_outside_repo.stderr.txt");
    const B3_STDERR: &str = include_str!("../../../tests/fixtures/opencode/b3_bash_permission_ask.stderr.txt");
    const F2_STDERR: &str = include_str!("../../../tests/fixtures/opencode/f2_resume_unknown_session.stderr.txt");

    fn run(name: &str) -> (OpenCodeParser, Vec<ParsedEvent>) {
        let mut p = OpenCodeParser::new();
        let events = feed(&mut p, fixture(name));
        (p, events)
    }

    #[test]
    fn a_plain_text_is_final_with_usage_and_session() {
        let (p, events) = run("a_plain_text");
        assert_eq!(shape(&events), ["session", "text!", "usage"]);
        assert_eq!(p.session_id(), Some("ses_dd42bbc4cffe5KsYEpTKsok2cB"));
        assert!(p.final_text().starts_with("Here is my plan.\n\n<plan>"));
        assert_eq!(p.final_text(), p.all_text());
        assert_eq!(usages(&events), [(1234, 56, 0, 0, 0.0)]);
        assert_eq!(p.error_message(), None);
        assert_eq!(p.explain_missing_answer(""), None);
    }

    #[test]
    fn b_tools_pair_call_and_result_in_completion_order() {
        let (p, events) = run("b_readonly_tools");
        assert_eq!(
            shape(&events),
            [
                "session",
                "text",
                "toolCall",
                "toolResult=ok",
                "toolCall",
                "toolResult=ok",
                "usage",
                "toolCall",
                "toolResult=err",
                "toolCall",
                "toolResult=ok",
                "usage",
                "text!",
                "usage"
            ]
        );
        let calls: Vec<(String, String, String)> = events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::ToolCall { call_id, name, input } => Some((call_id.clone(), name.clone(), input.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(calls[0].0, "call_2_0");
        assert_eq!(calls[0].1, "read");
        assert_eq!(calls[0].2, "/home/dev/project/src/calc.py");
        assert_eq!(calls[1].2, "TODO");
        // Completion order, not call order.
        assert_eq!(calls[2].0, "call_3_1");
        assert_eq!(calls[3].0, "call_3_0");
        assert!(matches!(
            &events[8].body,
            EventBody::ToolResult { call_id, output, .. }
                if call_id == "call_3_1" && output.starts_with("File not found:")
        ));
        assert_eq!(
            usages(&events),
            [(100, 20, 0, 0, 0.0), (200, 40, 0, 0, 0.0), (300, 60, 0, 0, 0.0)]
        );
        assert_eq!(
            texts(&events),
            [
                ("Let me look at the code.".to_string(), false),
                ("<plan>\n1. Guard divide() against b == 0.\n</plan>".to_string(), true)
            ]
        );
        assert_eq!(
            p.all_text(),
            "Let me look at the code.\n\n<plan>\n1. Guard divide() against b == 0.\n</plan>"
        );
    }

    #[test]
    fn b2_denied_edit_is_an_error_result_and_the_run_goes_on() {
        let (p, events) = run("b2_plan_edit_bash");
        let s = shape(&events);
        assert_eq!(
            s[1..7],
            [
                "toolCall",
                "toolResult=err",
                "toolCall",
                "toolResult=ok",
                "toolCall",
                "toolResult=ok"
            ]
        );
        assert_eq!(s.last().unwrap(), "usage");
        assert!(p.final_text().contains("<plan>do it later</plan>"));
    }

    #[test]
    fn c_subagent_task_becomes_an_agent_run_with_its_result() {
        let (p, events) = run("c_subagent_task");
        assert_eq!(
            shape(&events),
            [
                "session",
                "text",
                "toolCall",
                "subagent:start@call_2_0",
                "text@call_2_0",
                "subagent:end@call_2_0",
                "toolResult=ok",
                "usage",
                "text!",
                "usage"
            ]
        );
        assert_eq!(
            events[2].body,
            EventBody::ToolCall {
                call_id: "call_2_0".into(),
                name: "task".into(),
                input: "Find division code".into()
            }
        );
        assert_eq!(
            events[3].body,
            EventBody::Subagent {
                phase: SubagentPhase::Start,
                label: "Find division code".into(),
                status: None
            }
        );
        let child_text = "CHILD REPORT: division is in src/calc.py:7 (divide).";
        assert_eq!(
            events[4].body,
            EventBody::Text {
                text: child_text.into(),
                is_final: false
            }
        );
        assert!(matches!(
            &events[5].body,
            EventBody::Subagent { phase: SubagentPhase::End, status: Some(s), .. } if s == "completed"
        ));
        assert!(matches!(
            &events[6].body,
            EventBody::ToolResult { output, .. } if output == child_text
        ));
        assert_eq!(
            p.child_sessions(),
            [("call_2_0".to_string(), "ses_dd42a86deffeRVS1guxSQlvi5K".to_string())]
        );
        // The child's text is not the main agent's.
        assert!(!p.all_text().contains("CHILD REPORT"));
        assert_eq!(p.final_text(), "<plan>\n1. Guard src/calc.py:7 against zero.\n</plan>");
    }

    #[test]
    fn d_invalid_tool_is_a_completed_call() {
        let (p, events) = run("d_question_tool");
        assert_eq!(
            events[1].body,
            EventBody::ToolCall {
                call_id: "call_2_0".into(),
                name: "invalid".into(),
                input: "question".into()
            }
        );
        assert!(p.final_text().contains("<plan>raise ValueError</plan>"));
    }

    fn assert_error(name: &str, kind: ErrorKind, message: &str) {
        let (p, events) = run(name);
        assert_eq!(shape(&events), ["session", &format!("error:{kind:?}")], "{name}");
        assert_eq!(errors(&events)[0].1, message, "{name}");
        assert_eq!(p.error_message().as_deref(), Some(message), "{name}");
        assert_eq!(p.final_text(), "");
    }

    #[test]
    fn e_api_errors_are_typed() {
        assert_error("e_http_401", ErrorKind::Auth, "Incorrect API key provided: sk-mock.");
        assert_error(
            "e_http_429_forever",
            ErrorKind::RateLimit,
            "Rate limit reached for requests",
        );
        assert_error(
            "e_http_500_forever",
            ErrorKind::Unknown,
            "The server had an error while processing your request.",
        );
        assert_error(
            "o_unknown_model",
            ErrorKind::Unknown,
            "Unexpected server error. Check server logs for details.",
        );
    }

    #[test]
    fn e_context_overflow_after_a_tool_step_is_one_error() {
        let (p, events) = run("e_error_after_tool_step");
        assert_eq!(
            shape(&events),
            [
                "session",
                "text",
                "toolCall",
                "toolResult=ok",
                "usage",
                "error:ContextOverflow"
            ]
        );
        assert_eq!(
            p.error_message().as_deref(),
            Some("This model's maximum context length is 8192 tokens.")
        );
    }

    #[test]
    fn e_stream_drop_keeps_partial_text_not_final() {
        let (p, events) = run("e_stream_drop_then_ok");
        assert_eq!(shape(&events), ["session", "text", "usage", "text!", "usage"]);
        assert_eq!(texts(&events)[0], ("This partial tex".to_string(), false));
        assert_eq!(p.final_text(), "Second attempt completed. <plan>ok</plan>");
        // No tokens.total on the cut step: zeros, no panic.
        assert_eq!(usages(&events)[0], (0, 0, 0, 0, 0.0));
    }

    #[test]
    fn f_resume_reports_the_same_session() {
        let (p, events) = run("f_resume_session");
        assert_eq!(shape(&events), ["session", "text!", "usage"]);
        // The session of a_plain_text, resumed.
        assert_eq!(p.session_id(), Some("ses_dd42bbc4cffe5KsYEpTKsok2cB"));
        assert!(p.final_text().starts_with("Revised plan:"));
    }

    #[test]
    fn f2_unknown_session_is_recognised_from_stderr() {
        let p = OpenCodeParser::new();
        assert!(LineParser::session_not_found(&p, F2_STDERR));
        assert!(!LineParser::session_not_found(&p, R_STDERR));
    }

    #[test]
    fn g_sigterm_mid_stream_has_no_final_text() {
        let mut p = OpenCodeParser::new();
        let mut lines = Vec::new();
        for line in fixture("g_sigterm_midstream").lines() {
            lines.extend(p.parse_line(line));
        }
        assert_eq!(shape(&lines), ["session", "text", "toolCall", "toolResult=ok", "usage"]);
        assert!(p.finish().is_empty());
        assert!(p.finish().is_empty(), "finish is idempotent");
        assert_eq!(p.final_text(), "");
        assert_eq!(p.all_text(), "Reading first.");
        assert_eq!(p.error_message(), None);
    }

    #[test]
    fn killed_before_step_finish_flushes_held_text_as_not_final() {
        let text: String = fixture("a_plain_text")
            .lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect();
        let mut p = OpenCodeParser::new();
        let events = feed(&mut p, &text);
        assert_eq!(shape(&events), ["session", "text"]);
        assert_eq!(p.final_text(), "");
        assert!(p.all_text().starts_with("Here is my plan."));
        assert_eq!(
            p.explain_missing_answer("").as_deref(),
            Some("OpenCode ended without a final answer: its last step never finished.")
        );
    }

    #[test]
    fn h_reasoning_precedes_the_final_text() {
        let (p, events) = run("h_thinking_reasoning");
        assert_eq!(shape(&events), ["session", "reasoning", "text!", "usage"]);
        assert_eq!(p.final_text(), "<plan>\n1. check zero\n</plan>");
    }

    #[test]
    fn p_empty_and_truncated_replies_are_explained() {
        let (p, events) = run("p_empty_response");
        assert_eq!(shape(&events), ["session", "usage"]);
        assert_eq!(p.final_text(), "");
        assert_eq!(
            p.explain_missing_answer("").as_deref(),
            Some("OpenCode ended without an answer: the model returned an empty reply.")
        );
        let (p, events) = run("p_finish_length");
        assert_eq!(shape(&events), ["session", "text", "usage"]);
        assert_eq!(p.final_text(), "");
        assert!(p.explain_missing_answer("").unwrap().contains("output limit"));
        assert_eq!(usages(&events), [(900, 8192, 0, 0, 0.0)]);
    }

    #[test]
    fn q_cost_and_cache_tokens() {
        let (_, events) = run("q_cost_and_cache_tokens");
        // input 700 (uncached), output 150 + 50 reasoning, 300 cache reads.
        assert_eq!(usages(&events), [(700, 200, 300, 0, 0.00519)]);
    }

    #[test]
    fn r_auto_rejected_permission_is_explained_from_stderr() {
        let (p, events) = run("r_read_outside_repo");
        assert_eq!(shape(&events), ["session", "toolCall", "toolResult=err", "usage"]);
        assert_eq!(p.final_text(), "");
        assert_eq!(p.error_message(), None);
        let why = p.explain_missing_answer(R_STDERR).unwrap();
        assert!(
            why.contains("permission requested: external_directory (/etc/*); auto-rejecting"),
            "{why}"
        );
        assert!(!why.contains('\u{1b}'));
        // Without stderr, the rejected call still explains it.
        let why = p.explain_missing_answer("").unwrap();
        assert!(why.contains("read /etc/hostname"), "{why}");

        let (p, _) = run("b3_bash_permission_ask");
        let why = p.explain_missing_answer(B3_STDERR).unwrap();
        assert!(why.contains("bash (touch should_not_exist.txt)"), "{why}");
    }

    #[test]
    fn nothing_at_all_is_explained_from_stderr() {
        let p = OpenCodeParser::new();
        assert_eq!(
            p.explain_missing_answer("\u{1b}[93mwarn\u{1b}[0m\nsomething broke\n\n")
                .as_deref(),
            Some("OpenCode ended without any output: something broke")
        );
    }

    #[test]
    fn garbage_and_unknown_lines_are_kept_raw() {
        let half = &fixture("a_plain_text").lines().nth(1).unwrap()[..200];
        let lines = [
            "not json at all",
            "[1,2,3]",
            "42",
            r#"{"type":"mystery","sessionID":"ses_x"}"#,
            r#"{"type":"text","sessionID":"ses_x"}"#,
            r#"{"type":"tool_use","sessionID":"ses_x","part":{"tool":"read"}}"#,
            r#"{"type":"error","sessionID":"ses_x","error":"boom"}"#,
            half,
        ];
        let mut p = OpenCodeParser::new();
        let mut all = Vec::new();
        for line in lines {
            all.extend(p.parse_line(line));
        }
        // The first known type carries the session; everything else is raw, in order.
        assert_eq!(shape(&all)[..4], ["raw", "raw", "raw", "raw"]);
        assert_eq!(shape(&all)[4], "session");
        let raws: Vec<&str> = all
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Raw { line } => Some(line.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(raws, lines);
        assert!(p.parse_line("").is_empty());
        assert!(p.parse_line(" \r\n").is_empty());
        assert!(p.finish().is_empty());
    }

    #[test]
    fn a_running_state_then_completed_gives_one_call_and_one_result() {
        let running = r#"{"type":"tool_use","sessionID":"s","part":{"tool":"bash","callID":"c1","state":{"status":"running","input":{"command":"ls"}}}}"#;
        let done = r#"{"type":"tool_use","sessionID":"s","part":{"tool":"bash","callID":"c1","state":{"status":"completed","input":{"command":"ls"},"output":"a\nb"}}}"#;
        let mut p = OpenCodeParser::new();
        let mut events = p.parse_line(running);
        events.extend(p.parse_line(done));
        events.extend(p.parse_line(done));
        assert_eq!(shape(&events), ["session", "toolCall", "toolResult=ok"]);
    }

    #[test]
    fn failed_task_ends_its_subagent_with_error() {
        let line = r#"{"type":"tool_use","sessionID":"s","part":{"tool":"task","callID":"t1","state":{"status":"error","input":{"subagent_type":"explore","prompt":"p"},"error":"Tool execution aborted"}}}"#;
        let mut p = OpenCodeParser::new();
        let events = p.parse_line(line);
        assert_eq!(
            shape(&events),
            [
                "session",
                "toolCall",
                "subagent:start@t1",
                "text@t1",
                "subagent:end@t1",
                "toolResult=err"
            ]
        );
        assert!(matches!(
            &events[2].body,
            EventBody::Subagent { label, .. } if label == "explore"
        ));
        assert!(matches!(
            &events[4].body,
            EventBody::Subagent { status: Some(s), .. } if s == "error"
        ));
    }

    #[test]
    fn argv_shapes() {
        let base = ["run", "--agent", "plan", "--format", "json"];
        let with = |extra: &[&str]| {
            let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        assert_eq!(argv(None, None, None, None), with(&["--title", DEFAULT_TITLE]));
        assert_eq!(
            argv(Some("mock/mock-model"), None, Some("high"), Some("Fix\nthe  bug")),
            with(&[
                "--model",
                "mock/mock-model",
                "--variant",
                "high",
                "--title",
                "Fix the bug"
            ])
        );
        // Resume: the session, no title.
        assert_eq!(
            argv(Some("p/m"), Some("ses_1"), None, Some("T")),
            with(&["--session", "ses_1", "--model", "p/m"])
        );
        // Values that could be read as flags are dropped; the title is cleaned.
        assert_eq!(
            argv(
                Some("--auto"),
                Some("-x"),
                Some("--yolo"),
                Some("--dangerously-skip-permissions")
            ),
            with(&["--title", "dangerously-skip-permissions"])
        );
        let long = "é".repeat(300);
        let args = argv(None, None, None, Some(&long));
        assert_eq!(args.last().unwrap().chars().count(), TITLE_MAX + 1);
    }

    #[test]
    fn env_sets_readonly_rules_in_config_content_and_permission() {
        let env = env(None);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(get("OPENCODE_DISABLE_MODELS_FETCH"), "1");
        let content: Value = serde_json::from_str(&get("OPENCODE_CONFIG_CONTENT")).unwrap();
        let perm: Value = serde_json::from_str(&readonly_permission()).unwrap();
        assert_eq!(content["permission"], perm);
        assert_eq!(content["agent"]["plan"]["permission"], perm);
        assert_eq!(perm["edit"], "deny");
        assert_eq!(perm["external_directory"], "deny");
        assert_eq!(perm["bash"]["git status*"], "allow");
        let permission: Value = serde_json::from_str(&get("OPENCODE_PERMISSION")).unwrap();
        assert_eq!(permission, perm);
        // Rule order: the catch-all deny first (OpenCode applies the last match).
        let text = readonly_permission();
        let bash = &text[text.find(r#""bash":{"#).unwrap()..];
        assert!(bash.starts_with(r#""bash":{"*":"deny","ls":"allow""#), "{bash}");
        assert!(bash.find(r#""git diff*""#) < bash.find(r#""git *--output*""#));
    }

    #[test]
    fn inherited_config_content_is_merged() {
        let inherited = r#"{"model":"mock/mock-model","permission":{"bash":"allow"},"agent":{"plan":{"model":"x/y","permission":{"edit":"allow"}},"build":{"model":"z"}}}"#;
        let merged: Value = serde_json::from_str(&config_content(Some(inherited))).unwrap();
        let perm: Value = serde_json::from_str(&readonly_permission()).unwrap();
        assert_eq!(merged["model"], "mock/mock-model");
        assert_eq!(merged["permission"], perm);
        assert_eq!(merged["agent"]["plan"]["permission"], perm);
        assert_eq!(merged["agent"]["plan"]["model"], "x/y");
        assert_eq!(merged["agent"]["build"]["model"], "z");
        // Not an object: ignored.
        assert_eq!(config_content(Some("[1]")), config_content(None));
        assert_eq!(config_content(Some("{oops")), config_content(None));
    }
}

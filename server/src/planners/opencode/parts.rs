//! The [`Mapper`]'s handling of message parts: text and reasoning (held until their step
//! ends), deltas, tools (with `task` subagents) and step ends (usage). See `events.rs` for
//! the rules.

use planwire_protocol::{DeltaKind, EventBody, ToolStatus};
use serde_json::Value;

use super::super::claude::OUTPUT_SUMMARY_MAX;
use super::super::{str_of, summarize_fields, truncate_chars, ParsedEvent};
use super::events::{Mapper, Out, Part};

impl Mapper {
    pub(super) fn on_part(&mut self, props: &Value) {
        let Some(part) = props.get("part").filter(|p| p.is_object()) else {
            return;
        };
        let session = str_of(part, "sessionID").or_else(|| str_of(props, "sessionID"));
        let Some(agent) = self.agent_of(session) else {
            return;
        };
        let message = str_of(part, "messageID").unwrap_or("");
        let kind = str_of(part, "type").unwrap_or("");
        if self.before.contains(message) {
            return;
        }
        match self.assistant.get(message) {
            Some(false) => return,
            // The prompt's part, should it come before its message: it has no `time`.
            None if kind == "text" && part.get("time").is_none() => return,
            _ => {}
        }
        if let Some(key) = &agent {
            self.start_subagent(key);
        }
        let id = str_of(part, "id").unwrap_or("").to_owned();
        match kind {
            "step-start" if self.steps_seen.insert(id.clone()) => {
                self.flush(&agent, false);
                if agent.is_none() {
                    self.steps += 1;
                }
            }
            "text" => self.on_text_part(agent, id, part, DeltaKind::Text),
            "reasoning" => self.on_text_part(agent, id, part, DeltaKind::Reasoning),
            "tool" => self.on_tool_part(agent, part),
            "step-finish" if self.steps_seen.insert(id.clone()) => self.on_step_finish(agent, part),
            _ => {}
        }
    }

    pub(super) fn on_delta(&mut self, props: &Value) {
        if str_of(props, "field") != Some("text") {
            return;
        }
        let (Some(id), Some(delta)) = (str_of(props, "partID"), str_of(props, "delta")) else {
            return;
        };
        let Some(p) = self.parts.get_mut(id).filter(|p| !p.ended && !delta.is_empty()) else {
            return;
        };
        p.text.push_str(delta);
        let (agent, kind) = (p.agent.clone(), p.kind);
        self.out.push(Out::Delta {
            agent,
            kind,
            text: delta.to_owned(),
        });
    }

    fn on_text_part(&mut self, agent: Option<String>, id: String, part: &Value, kind: DeltaKind) {
        if !self.parts.contains_key(&id) {
            // A new block of this kind: what is held of the last one goes first.
            if self.held.iter().any(|(a, b)| *a == agent && kind_of(b) == Some(kind)) {
                self.flush(&agent, false);
            }
            self.part_seq += 1;
            let p = Part {
                agent: agent.clone(),
                kind,
                text: String::new(),
                stored: None,
                ended: false,
                seq: self.part_seq,
            };
            self.parts.insert(id.clone(), p);
        }
        let ended = part.pointer("/time/end").is_some_and(|e| !e.is_null());
        let p = self.parts.get_mut(&id).expect("inserted above");
        if p.ended || !ended {
            return;
        }
        p.ended = true;
        let text = str_of(part, "text").unwrap_or("");
        let rest = match p.stored {
            None => text,
            // Stored as far as it had streamed: only what it lacked is added.
            Some(n) if text.len() > n && text.is_char_boundary(n) && text[..n] == p.text[..n] => &text[n..],
            Some(_) => "",
        };
        let rest = rest.to_owned();
        p.text = String::new();
        self.hold(agent, kind, rest);
    }

    /// Stores the text parts of `agent` still streaming, as far as they have streamed (a
    /// tool or a question follows them).
    pub(super) fn close_open_parts(&mut self, agent: &Option<String>) {
        let mut open: Vec<(u64, String)> = self
            .parts
            .iter()
            .filter(|(_, p)| p.agent == *agent && !p.ended && p.text.len() > p.stored.unwrap_or(0))
            .map(|(id, p)| (p.seq, id.clone()))
            .collect();
        open.sort();
        for (_, id) in open {
            let p = self.parts.get_mut(&id).expect("listed above");
            let from = p.stored.unwrap_or(0);
            let piece = p.text[from..].to_owned();
            p.stored = Some(p.text.len());
            let kind = p.kind;
            self.hold(agent.clone(), kind, piece);
        }
    }

    fn hold(&mut self, agent: Option<String>, kind: DeltaKind, text: String) {
        if text.is_empty() {
            return;
        }
        let body = match kind {
            DeltaKind::Reasoning => EventBody::Reasoning { text },
            DeltaKind::Text => {
                if agent.is_none() {
                    self.main_text.push(text.clone());
                }
                EventBody::Text { text, is_final: false }
            }
        };
        self.held.push((agent, body));
    }

    /// Emits what is held for `agent`; the main agent's text is final when `is_final`.
    pub(super) fn flush(&mut self, agent: &Option<String>, is_final: bool) {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(a, _)| a == agent);
        self.held = rest;
        let is_final = is_final && agent.is_none();
        if is_final && mine.iter().any(|(_, b)| matches!(b, EventBody::Text { .. })) {
            self.final_text.clear();
        }
        for (agent, mut body) in mine {
            if let EventBody::Text { text, is_final: flag } = &mut body {
                *flag = is_final;
                if is_final {
                    self.final_text.push(text.clone());
                }
            }
            self.emit(ParsedEvent { agent, body });
        }
    }

    fn on_tool_part(&mut self, agent: Option<String>, part: &Value) {
        let Some(call) = str_of(part, "callID")
            .or_else(|| str_of(part, "id"))
            .filter(|s| !s.is_empty())
        else {
            return;
        };
        let tool = str_of(part, "tool").unwrap_or("");
        let state = part.get("state").unwrap_or(&Value::Null);
        let input = state.get("input").unwrap_or(&Value::Null);
        self.close_open_parts(&agent);
        self.flush(&agent, false);
        let status = match str_of(state, "status") {
            Some("completed") => ToolStatus::Completed,
            Some("error") => ToolStatus::Error,
            // Its input is still streaming.
            Some("pending") => return,
            _ => ToolStatus::Running,
        };
        self.tool_call(&agent, call, tool, &summarize_input(input));
        let child = state.pointer("/metadata/sessionId").and_then(Value::as_str);
        if let (Some(child), "task") = (child, tool) {
            self.adopt_child(child, input);
        }
        if status == ToolStatus::Running || !self.results.insert(call.to_owned()) {
            return;
        }
        let output = match status {
            ToolStatus::Error => str_of(state, "error").unwrap_or("").to_owned(),
            _ => match state.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
        };
        if status == ToolStatus::Error && output.contains("rejected permission") {
            let what = format!("{tool} {}", summarize_input(input));
            self.rejected.push(what.trim().to_owned());
        }
        let output = if tool == "task" {
            self.end_task(child, input, status, &output)
        } else {
            output
        };
        self.emit(ParsedEvent {
            agent,
            body: EventBody::ToolResult {
                call_id: call.to_owned(),
                status,
                output: truncate_chars(&output, OUTPUT_SUMMARY_MAX),
            },
        });
    }

    /// The `toolCall` of `call`, once.
    pub(super) fn tool_call(&mut self, agent: &Option<String>, call: &str, name: &str, input: &str) {
        if self.calls.insert(call.to_owned()) {
            self.emit(ParsedEvent {
                agent: agent.clone(),
                body: EventBody::ToolCall {
                    call_id: call.to_owned(),
                    name: name.to_owned(),
                    input: input.to_owned(),
                },
            });
        }
    }

    /// A `task`'s child session joins the pass under its own key, labelled by the task.
    fn adopt_child(&mut self, child: &str, input: &Value) {
        self.sessions
            .entry(child.to_owned())
            .or_insert_with(|| Some(child.to_owned()));
        if let Some(label) = task_label(input) {
            self.labels.insert(child.to_owned(), label);
        }
        self.start_subagent(child);
    }

    fn start_subagent(&mut self, key: &str) {
        if self.subagents.is_open(key) || self.subagents.has_ended(key) {
            return;
        }
        let label = self.labels.get(key).cloned().unwrap_or_else(|| "subagent".to_owned());
        let mut out = Vec::new();
        self.subagents.start(key, &label, &mut out);
        for ev in out {
            self.emit(ev);
        }
    }

    /// A finished `task`: its subagent ends (status from `<task state="…">`). A child never
    /// seen streaming (a replay) gets its final result as its text. Returns the result.
    fn end_task(&mut self, child: Option<&str>, input: &Value, status: ToolStatus, output: &str) -> String {
        let result = match (output.find("<task_result>"), output.rfind("</task_result>")) {
            (Some(a), Some(b)) if a + "<task_result>".len() <= b => {
                output[a + "<task_result>".len()..b].trim().to_owned()
            }
            _ => output.trim().to_owned(),
        };
        let end_status = match status {
            ToolStatus::Error => "error".to_owned(),
            _ => attribute(output, "<task ", "state").unwrap_or_else(|| "completed".to_owned()),
        };
        let Some(key) = child.map(str::to_owned).or_else(|| attribute(output, "<task ", "id")) else {
            return result;
        };
        if !self.subagents.is_open(&key) && !self.subagents.has_ended(&key) {
            if let Some(label) = task_label(input) {
                self.labels.insert(key.clone(), label);
            }
            self.start_subagent(&key);
            if !result.is_empty() {
                self.emit(ParsedEvent {
                    agent: Some(key.clone()),
                    body: EventBody::Text {
                        text: result.clone(),
                        is_final: false,
                    },
                });
            }
        }
        self.close_open_parts(&Some(key.clone()));
        self.flush(&Some(key.clone()), false);
        let mut out = Vec::new();
        self.subagents.end(&key, &end_status, &mut out);
        for ev in out {
            self.emit(ev);
        }
        result
    }

    fn on_step_finish(&mut self, agent: Option<String>, part: &Value) {
        let reason = str_of(part, "reason").unwrap_or("").to_owned();
        if agent.is_none() {
            self.flush(&agent, reason == "stop");
            self.last_reason = Some(reason);
        } else {
            self.flush(&agent, false);
        }
        let tokens = part.get("tokens").unwrap_or(&Value::Null);
        let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        let cache = tokens.get("cache").unwrap_or(&Value::Null);
        let t = &mut self.totals;
        t.input += n(tokens.get("input"));
        t.output += n(tokens.get("output")) + n(tokens.get("reasoning"));
        t.cache_read += n(cache.get("read"));
        t.cache_write += n(cache.get("write"));
        t.cost += part.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
        let t = self.totals;
        self.emit(ParsedEvent::main(EventBody::Usage {
            input_tokens: t.input,
            output_tokens: t.output,
            cache_read_tokens: t.cache_read,
            cache_write_tokens: t.cache_write,
            cost_usd: t.cost,
        }));
    }
}

fn kind_of(body: &EventBody) -> Option<DeltaKind> {
    match body {
        EventBody::Text { .. } => Some(DeltaKind::Text),
        EventBody::Reasoning { .. } => Some(DeltaKind::Reasoning),
        _ => None,
    }
}

fn task_label(input: &Value) -> Option<String> {
    str_of(input, "description")
        .or_else(|| str_of(input, "subagent_type"))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The value of `name="…"` in the first tag starting with `tag` (`<task id="ses_…" …>`).
fn attribute(text: &str, tag: &str, name: &str) -> Option<String> {
    let start = text.find(tag)?;
    let end = start + text[start..].find('>')?;
    let head = &text[start..end];
    let key = format!(" {name}=\"");
    let from = head.find(&key)? + key.len();
    let len = head[from..].find('"')?;
    Some(head[from..from + len].to_owned()).filter(|s| !s.is_empty())
}

/// A short summary of a tool's input: the first of its path, command, pattern, url, query,
/// description or tool name, else its compact JSON; at most [`INPUT_SUMMARY_MAX`] characters.
///
/// [`INPUT_SUMMARY_MAX`]: super::super::claude::INPUT_SUMMARY_MAX
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

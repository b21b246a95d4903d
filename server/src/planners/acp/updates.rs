//! What planwire decides about an ACP agent, as pure functions: which mode to plan in, what
//! to answer a permission request, and how `session/update`s become planwire's events.

use std::collections::HashMap;

use agent_client_protocol_schema::v1::{
    ContentBlock, PermissionOptionKind, RequestPermissionRequest, SessionConfigKind, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOptions, SessionModeState, SessionUpdate, ToolCallContent,
    ToolCallStatus, ToolKind,
};
use planwire_protocol::{EventBody, ToolStatus};
use serde_json::Value;

use crate::planners::driver::DeltaKind;
use crate::planners::{summarize_fields, truncate_chars, ParsedEvent};

/// Longest tool output kept in a `toolResult`.
const OUTPUT_MAX: usize = 500;

/// How the plan (or read-only) mode is selected before the first prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeChoice {
    /// `session/set_mode {modeId}`.
    Mode(String),
    /// `session/set_config_option {configId, value}`.
    Config { config_id: String, value: String },
}

impl ModeChoice {
    /// How it is recorded on the run.
    pub fn describe(&self) -> (String, &'static str) {
        match self {
            ModeChoice::Mode(id) => (id.clone(), "session/set_mode"),
            ModeChoice::Config { config_id, value } => (format!("{config_id}={value}"), "session/set_config_option"),
        }
    }
}

/// The preset's (or configured) mode id, else a mode id containing `plan`, else a value
/// containing `plan` of the config option of category `mode`, else a read-only mode or value.
pub fn choose_mode(
    wanted: Option<&str>,
    modes: Option<&SessionModeState>,
    options: &[SessionConfigOption],
) -> Option<ModeChoice> {
    let mode_ids: Vec<&str> = modes
        .map(|m| m.available_modes.iter().map(|m| m.id.0.as_ref()).collect())
        .unwrap_or_default();
    let mode_options: Vec<(&str, Vec<&str>)> = options
        .iter()
        .filter(|o| matches!(o.category, Some(SessionConfigOptionCategory::Mode)) || o.id.0.as_ref() == "mode")
        .filter_map(|o| match &o.kind {
            SessionConfigKind::Select(s) => Some((o.id.0.as_ref(), values(&s.options))),
            _ => None,
        })
        .collect();
    let in_options = |pred: &dyn Fn(&str) -> bool| {
        mode_options.iter().find_map(|(id, vals)| {
            vals.iter().find(|v| pred(v)).map(|v| ModeChoice::Config {
                config_id: (*id).to_owned(),
                value: (*v).to_owned(),
            })
        })
    };
    if let Some(w) = wanted {
        if mode_ids.contains(&w) {
            return Some(ModeChoice::Mode(w.to_owned()));
        }
        if let Some(c) = in_options(&|v| v == w) {
            return Some(c);
        }
    }
    let has = |needle: &'static str| move |s: &str| s.to_ascii_lowercase().contains(needle);
    let read_only = |s: &str| {
        let s = s.to_ascii_lowercase().replace(['-', '_', ' '], "");
        s.contains("readonly")
    };
    if let Some(id) = mode_ids.iter().find(|m| has("plan")(m)) {
        return Some(ModeChoice::Mode((*id).to_owned()));
    }
    if let Some(c) = in_options(&has("plan")) {
        return Some(c);
    }
    if let Some(id) = mode_ids.iter().find(|m| read_only(m)) {
        return Some(ModeChoice::Mode((*id).to_owned()));
    }
    in_options(&read_only)
}

fn values(options: &SessionConfigSelectOptions) -> Vec<&str> {
    match options {
        SessionConfigSelectOptions::Ungrouped(o) => o.iter().map(|o| o.value.0.as_ref()).collect(),
        SessionConfigSelectOptions::Grouped(g) => g
            .iter()
            .flat_map(|g| g.options.iter().map(|o| o.value.0.as_ref()))
            .collect(),
        _ => Vec::new(),
    }
}

/// planwire's answer to a permission request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The option chosen (`None`: the `cancelled` outcome).
    pub option: Option<String>,
    /// Whether the request was refused.
    pub refused: bool,
    /// A plan offered for approval (leaving plan mode), kept as a plan candidate.
    pub plan_candidate: Option<String>,
    /// What the transcript says about it.
    pub note: String,
}

/// Every request that writes (edit, delete, move), executes, or leaves plan mode is refused;
/// reads, searches, fetches and thinking are allowed. A request without a kind takes the
/// kind of the earlier `tool_call` with the same id.
pub fn decide(req: &RequestPermissionRequest, kinds: &HashMap<String, ToolKind>) -> Decision {
    let call = &req.tool_call;
    let id = call.tool_call_id.0.as_ref();
    let kind = call.fields.kind.or_else(|| kinds.get(id).copied());
    let keeps_planning = req.options.iter().any(|o| {
        let name = o.name.to_ascii_lowercase();
        name.contains("keep planning") || o.option_id.0.as_ref() == "plan"
    });
    let leaves_plan = kind == Some(ToolKind::SwitchMode) || keeps_planning;
    let writes = matches!(
        kind,
        Some(ToolKind::Edit | ToolKind::Delete | ToolKind::Move | ToolKind::Execute)
    );
    let title = call.fields.title.clone().unwrap_or_else(|| id.to_owned());
    if leaves_plan || writes {
        // "No, keep planning" where it is offered, else a plain rejection.
        let keep = req
            .options
            .iter()
            .find(|o| o.name.to_ascii_lowercase().contains("keep planning") || o.option_id.0.as_ref() == "plan");
        let reject = keep.or_else(|| {
            req.options
                .iter()
                .find(|o| o.kind == PermissionOptionKind::RejectOnce)
                .or_else(|| {
                    req.options
                        .iter()
                        .find(|o| o.kind == PermissionOptionKind::RejectAlways)
                })
        });
        let plan_candidate = leaves_plan
            .then(|| plan_text(call.fields.raw_input.as_ref(), call.fields.content.as_deref()))
            .flatten();
        let why = if leaves_plan {
            "leaving plan mode is refused: planning stays read-only"
        } else {
            "refused: planning is read-only"
        };
        return Decision {
            option: reject.map(|o| o.option_id.0.to_string()),
            refused: true,
            plan_candidate,
            note: format!("{title}: {why}"),
        };
    }
    let allow = req
        .options
        .iter()
        .find(|o| o.kind == PermissionOptionKind::AllowOnce)
        .or_else(|| req.options.iter().find(|o| o.kind == PermissionOptionKind::AllowAlways));
    Decision {
        option: allow.map(|o| o.option_id.0.to_string()),
        refused: allow.is_none(),
        plan_candidate: None,
        note: format!("{title}: allowed (reads only)"),
    }
}

/// The plan in a leave-plan-mode request: `rawInput.plan` (Claude's ExitPlanMode), else its
/// text content.
fn plan_text(raw: Option<&Value>, content: Option<&[ToolCallContent]>) -> Option<String> {
    if let Some(plan) = raw.and_then(|r| r.get("plan")).and_then(Value::as_str) {
        return Some(plan.to_owned()).filter(|p| !p.trim().is_empty());
    }
    let text = content_text(content.unwrap_or_default());
    (!text.trim().is_empty()).then_some(text)
}

fn content_text(content: &[ToolCallContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One prompt turn's `session/update`s, normalized.
#[derive(Default)]
pub struct Turn {
    /// The block of text or reasoning being streamed, and its text so far.
    open: Option<(DeltaKind, String)>,
    /// The last text block of the turn (the final answer).
    pub last_text: String,
    /// The main agent's text blocks of the pass, as far back as
    /// [`TEXT_TAIL`](crate::planners::TEXT_TAIL), for plan extraction.
    pub all_text: crate::planners::TextTail,
    /// Tool kinds by call id, for permission requests that carry none.
    pub kinds: HashMap<String, ToolKind>,
    /// Calls already given a result.
    done: std::collections::HashSet<String>,
    /// The last usage the agent reported: (tokens used, cost in USD).
    pub usage: Option<(u64, f64)>,
    /// Tool calls announced without their input yet (opencode sends it in an update):
    /// (id, name, title), emitted once the input or the result comes.
    held: Vec<(String, String, String)>,
}

impl Turn {
    /// The events and live deltas of one update.
    pub fn update(&mut self, update: SessionUpdate) -> (Vec<ParsedEvent>, Vec<(DeltaKind, String)>) {
        let mut events = Vec::new();
        let mut deltas = Vec::new();
        match update {
            SessionUpdate::AgentMessageChunk(c) => self.chunk(DeltaKind::Text, &c.content, &mut events, &mut deltas),
            SessionUpdate::AgentThoughtChunk(c) => {
                self.chunk(DeltaKind::Reasoning, &c.content, &mut events, &mut deltas)
            }
            SessionUpdate::ToolCall(call) => {
                self.close(false, &mut events);
                let id = call.tool_call_id.0.to_string();
                self.kinds.insert(id.clone(), call.kind);
                let name = tool_name(&call.title, call.kind);
                let location = call.locations.first().map(|l| l.path.display().to_string());
                let input = input_summary(call.raw_input.as_ref(), location);
                self.held.push((id.clone(), name, call.title.clone()));
                let done = matches!(call.status, ToolCallStatus::Completed | ToolCallStatus::Failed);
                if input.is_some() || done {
                    self.emit_call(&id, input, &mut events);
                }
                if done {
                    self.result(&id, call.status, &call.content, &mut events);
                }
            }
            SessionUpdate::ToolCallUpdate(u) => {
                let id = u.tool_call_id.0.to_string();
                if let Some(kind) = u.fields.kind {
                    self.kinds.insert(id.clone(), kind);
                }
                let location = u
                    .fields
                    .locations
                    .as_ref()
                    .and_then(|l| l.first())
                    .map(|l| l.path.display().to_string());
                if let Some(input) = input_summary(u.fields.raw_input.as_ref(), location) {
                    self.emit_call(&id, Some(input), &mut events);
                }
                if let Some(status @ (ToolCallStatus::Completed | ToolCallStatus::Failed)) = u.fields.status {
                    self.close(false, &mut events);
                    self.emit_call(&id, None, &mut events);
                    self.result(
                        &id,
                        status,
                        u.fields.content.as_deref().unwrap_or_default(),
                        &mut events,
                    );
                }
            }
            SessionUpdate::Plan(plan) => {
                self.close(false, &mut events);
                let entries: Vec<String> = plan.entries.iter().map(|e| format!("- {}", e.content)).collect();
                if !entries.is_empty() {
                    events.push(ParsedEvent::main(EventBody::Reasoning {
                        text: format!("The agent's plan:\n{}", entries.join("\n")),
                    }));
                }
            }
            SessionUpdate::UsageUpdate(u) => {
                let cost = u
                    .cost
                    .filter(|c| c.currency.eq_ignore_ascii_case("USD"))
                    .map_or(0.0, |c| c.amount);
                self.usage = Some((u.used, cost));
            }
            _ => {}
        }
        (events, deltas)
    }

    fn chunk(
        &mut self,
        kind: DeltaKind,
        content: &ContentBlock,
        events: &mut Vec<ParsedEvent>,
        deltas: &mut Vec<(DeltaKind, String)>,
    ) {
        let ContentBlock::Text(t) = content else { return };
        if t.text.is_empty() {
            return;
        }
        if self.open.as_ref().is_some_and(|(k, _)| *k != kind) {
            self.close(false, events);
        }
        let (_, text) = self.open.get_or_insert_with(|| (kind, String::new()));
        text.push_str(&t.text);
        deltas.push((kind, t.text.clone()));
    }

    /// Closes the open block: a `text` (final at the end of the turn) or `reasoning` event.
    pub fn close(&mut self, at_end: bool, events: &mut Vec<ParsedEvent>) {
        let Some((kind, text)) = self.open.take() else { return };
        let body = match kind {
            DeltaKind::Text => {
                self.last_text = text.clone();
                self.all_text.push(text.clone());
                EventBody::Text { text, is_final: at_end }
            }
            DeltaKind::Reasoning => EventBody::Reasoning { text },
        };
        events.push(ParsedEvent::main(body));
    }

    /// The `toolCall` event of a held call, once.
    fn emit_call(&mut self, id: &str, input: Option<String>, events: &mut Vec<ParsedEvent>) {
        let Some(at) = self.held.iter().position(|(h, _, _)| h == id) else {
            return;
        };
        let (call_id, name, title) = self.held.remove(at);
        let input = input.unwrap_or_else(|| {
            title
                .split_once(' ')
                .map(|(_, rest)| rest.to_owned())
                .unwrap_or_default()
        });
        events.push(ParsedEvent::main(EventBody::ToolCall { call_id, name, input }));
    }

    fn result(&mut self, id: &str, status: ToolCallStatus, content: &[ToolCallContent], events: &mut Vec<ParsedEvent>) {
        if !self.done.insert(id.to_owned()) {
            return;
        }
        let status = if status == ToolCallStatus::Failed {
            ToolStatus::Error
        } else {
            ToolStatus::Completed
        };
        events.push(ParsedEvent::main(EventBody::ToolResult {
            call_id: id.to_owned(),
            status,
            output: truncate_chars(&content_text(content), OUTPUT_MAX),
        }));
    }

    /// At the end of a turn: the open block (final when it is text) and the usage.
    pub fn finish(&mut self) -> Vec<ParsedEvent> {
        let mut events = Vec::new();
        self.close(true, &mut events);
        for id in self.held.iter().map(|(id, _, _)| id.clone()).collect::<Vec<_>>() {
            self.emit_call(&id, None, &mut events);
        }
        if let Some((used, cost)) = self.usage.take() {
            events.push(ParsedEvent::main(EventBody::Usage {
                input_tokens: used,
                output_tokens: 0,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                cost_usd: cost,
            }));
        }
        events
    }
}

/// A tool's name for the transcript: its title's first word when short, else its kind.
fn tool_name(title: &str, kind: ToolKind) -> String {
    let first = title.split_whitespace().next().unwrap_or("");
    if !first.is_empty() && first.len() <= 40 {
        return first.to_owned();
    }
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "tool".into())
}

/// A tool input's summary (a path, a command, a pattern…), when there is one.
fn input_summary(raw: Option<&Value>, location: Option<String>) -> Option<String> {
    let keys = [
        "file_path",
        "filePath",
        "path",
        "absolute_path",
        "command",
        "pattern",
        "url",
        "query",
        "description",
    ];
    let raw = raw.filter(|r| !r.is_null() && r.as_object().is_none_or(|o| !o.is_empty()));
    match raw {
        Some(raw) => Some(summarize_fields(raw, &keys)).filter(|s| !s.is_empty()),
        None => location,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_mode_heuristic_covers_opencode_qwen_and_claude_acp() {
        // opencode: no modes, a `mode` config option with `plan`.
        let options: Vec<SessionConfigOption> = parse(json!([
            {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "m", "options": [{"value": "m", "name": "m"}]},
            {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "build",
             "options": [{"value": "build", "name": "build"}, {"value": "plan", "name": "plan"}]}
        ]));
        assert_eq!(
            choose_mode(Some("plan"), None, &options),
            Some(ModeChoice::Config {
                config_id: "mode".into(),
                value: "plan".into()
            })
        );
        // qwen: modes with `plan`, and the same values as a config option: the mode wins.
        let modes: SessionModeState = parse(json!({"currentModeId": "auto", "availableModes": [
            {"id": "plan", "name": "Plan"}, {"id": "default", "name": "Default"}, {"id": "yolo", "name": "YOLO"}]}));
        assert_eq!(
            choose_mode(Some("plan"), Some(&modes), &options),
            Some(ModeChoice::Mode("plan".into()))
        );
        // An unknown agent: a mode id containing `plan`, else a read-only one, else none.
        let modes: SessionModeState = parse(json!({"currentModeId": "a", "availableModes": [
            {"id": "a", "name": "A"}, {"id": "architect-planning", "name": "P"}]}));
        assert_eq!(
            choose_mode(None, Some(&modes), &[]),
            Some(ModeChoice::Mode("architect-planning".into()))
        );
        let modes: SessionModeState = parse(json!({"currentModeId": "auto", "availableModes": [
            {"id": "auto", "name": "Auto"}, {"id": "read-only", "name": "Read Only"}]}));
        assert_eq!(
            choose_mode(Some("plan"), Some(&modes), &[]),
            Some(ModeChoice::Mode("read-only".into()))
        );
        let modes: SessionModeState =
            parse(json!({"currentModeId": "auto", "availableModes": [{"id": "auto", "name": "Auto"}]}));
        assert_eq!(choose_mode(Some("plan"), Some(&modes), &[]), None);
    }

    fn permission(v: Value) -> RequestPermissionRequest {
        parse(v)
    }

    #[test]
    fn writes_and_leaving_plan_mode_are_refused_with_the_kind_of_the_earlier_call() {
        let mut kinds = HashMap::new();
        kinds.insert("toolu_1".to_owned(), ToolKind::Edit);
        // claude-code-acp: no kind on the permission's toolCall.
        let req = permission(
            json!({"sessionId": "s", "toolCall": {"toolCallId": "toolu_1", "title": "Write /r/X.md", "rawInput": {}},
            "options": [{"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
                        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}),
        );
        let d = decide(&req, &kinds);
        assert_eq!((d.option.as_deref(), d.refused), (Some("reject"), true));
        // qwen: exit_plan_mode is switch_mode; "No, keep planning" is chosen.
        let req = permission(
            json!({"sessionId": "s", "toolCall": {"toolCallId": "t2", "title": "Exit plan mode", "kind": "switch_mode",
            "rawInput": {"plan": "# The plan\n1. Do it"}},
            "options": [{"optionId": "proceed_once", "name": "Yes", "kind": "allow_once"},
                        {"optionId": "cancel", "name": "No, keep planning (esc)", "kind": "reject_once"}]}),
        );
        let d = decide(&req, &kinds);
        assert_eq!(d.option.as_deref(), Some("cancel"));
        assert_eq!(d.plan_candidate.as_deref(), Some("# The plan\n1. Do it"));
        // claude-code-acp's ExitPlanMode: option `plan`.
        let req = permission(
            json!({"sessionId": "s", "toolCall": {"toolCallId": "t3", "title": "Ready to code?"},
            "options": [{"optionId": "acceptEdits", "name": "Yes, and auto-accept edits", "kind": "allow_always"},
                        {"optionId": "default", "name": "Yes, and manually approve edits", "kind": "allow_once"},
                        {"optionId": "plan", "name": "No, keep planning", "kind": "reject_once"}]}),
        );
        assert_eq!(decide(&req, &kinds).option.as_deref(), Some("plan"));
        // Execute is refused; a read is allowed.
        kinds.insert("b".into(), ToolKind::Execute);
        kinds.insert("r".into(), ToolKind::Read);
        let opts = json!([{"optionId": "y", "name": "Allow", "kind": "allow_once"}, {"optionId": "n", "name": "Reject", "kind": "reject_once"}]);
        let bash = permission(json!({"sessionId": "s", "toolCall": {"toolCallId": "b"}, "options": opts}));
        assert_eq!(decide(&bash, &kinds).option.as_deref(), Some("n"));
        let read = permission(json!({"sessionId": "s", "toolCall": {"toolCallId": "r"}, "options": opts}));
        let d = decide(&read, &kinds);
        assert_eq!((d.option.as_deref(), d.refused), (Some("y"), false));
    }

    #[test]
    fn updates_become_events_with_deltas_and_a_final_text() {
        let mut t = Turn::default();
        let u = |v: Value| -> SessionUpdate { parse(v) };
        let (e, d) = t.update(u(
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "Hmm"}}),
        ));
        assert!(e.is_empty());
        assert_eq!(d, [(DeltaKind::Reasoning, "Hmm".to_owned())]);
        let (e, _) = t.update(u(json!({"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "read", "kind": "read", "status": "pending",
            "rawInput": {"filePath": "/r/README.md"}})));
        assert!(matches!(&e[0].body, EventBody::Reasoning { text } if text == "Hmm"));
        assert!(
            matches!(&e[1].body, EventBody::ToolCall { name, input, .. } if name == "read" && input == "/r/README.md")
        );
        let (e, _) = t.update(u(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "# Readme"}}]}),
        ));
        assert!(
            matches!(&e[0].body, EventBody::ToolResult { status: ToolStatus::Completed, output, .. } if output == "# Readme")
        );
        let (e, _) = t.update(u(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"}),
        ));
        assert!(e.is_empty(), "a call has one result");
        t.update(u(
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Plan: "}}),
        ));
        t.update(u(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "<planwire-plan>{}</planwire-plan>"}})));
        t.update(u(json!({"sessionUpdate": "usage_update", "used": 120, "size": 1000, "cost": {"amount": 0.5, "currency": "USD"}})));
        let end = t.finish();
        assert!(
            matches!(&end[0].body, EventBody::Text { text, is_final: true } if text == "Plan: <planwire-plan>{}</planwire-plan>")
        );
        assert!(matches!(end[1].body, EventBody::Usage { input_tokens: 120, cost_usd, .. } if cost_usd == 0.5));
        assert_eq!(t.last_text, "Plan: <planwire-plan>{}</planwire-plan>");
        assert_eq!(t.kinds.get("c1"), Some(&ToolKind::Read));
    }
}

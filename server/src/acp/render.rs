//! planwire's transcript, plans and messages as ACP `session/update`s (pure functions).
//!
//! | planwire | ACP update |
//! | --- | --- |
//! | `text` event, `planwire/delta` text | `agent_message_chunk` (the `<planwire-plan>` block left out) |
//! | `reasoning` event, delta reasoning | `agent_thought_chunk` |
//! | `toolCall` / `toolResult` | `tool_call` (with a kind from the tool's name) / `tool_call_update` |
//! | `subagent` start / end | `tool_call` (kind `think`, "Subagent: …") / its `tool_call_update` |
//! | `usage` | `usage_update` (`size` 0: planners do not report their context window) |
//! | `error` | `agent_message_chunk` |
//! | the plan | its markdown as `agent_message_chunk`, and a `plan` with its steps or criteria |
//!
//! A live delta extends the open text block; the stored event that closes the block then
//! sends only what the deltas did not, so the client sees every character once.

use std::collections::HashMap;

use crate::planners::truncate_chars;
use agent_client_protocol_schema::v1::{
    ContentBlock, ContentChunk, Cost, Plan as AcpPlan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
    TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind, UsageUpdate,
};
use planwire_protocol::{AgentRunId, EventBody, Message, Plan, RunId, SubagentPhase, ToolStatus, TranscriptEvent};

/// Longest tool-call title.
const TITLE_MAX: usize = 120;

pub fn text(text: impl Into<String>) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

pub fn agent_text(s: impl Into<String>) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text(s)))
}

pub fn user_text(s: impl Into<String>) -> SessionUpdate {
    SessionUpdate::UserMessageChunk(ContentChunk::new(text(s)))
}

/// The kind of a live delta (`planwire/delta`'s `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flow {
    Text,
    Reasoning,
}

/// What was last sent, to separate consecutive text blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Nothing,
    Block(Option<AgentRunId>, Flow),
    Other,
}

/// The open block of one agent and flow: the raw text the client was sent so far.
#[derive(Default)]
struct Open {
    raw: String,
    filter: PlanFilter,
}

/// The transcript of one run, turned into updates in order, each event once.
pub struct RunStream {
    run: RunId,
    pub last_seq: u64,
    open: HashMap<(Option<AgentRunId>, Flow), Open>,
    last: Last,
}

impl RunStream {
    pub fn new(run: RunId, after_seq: u64) -> RunStream {
        RunStream {
            run,
            last_seq: after_seq,
            open: HashMap::new(),
            last: Last::Nothing,
        }
    }

    pub fn run(&self) -> RunId {
        self.run
    }

    /// The updates of stored events; events at or below `last_seq` were sent already.
    pub fn events(&mut self, events: &[TranscriptEvent]) -> Vec<SessionUpdate> {
        let mut out = Vec::new();
        for event in events {
            if event.seq <= self.last_seq {
                continue;
            }
            self.last_seq = event.seq;
            self.event(event, &mut out);
        }
        out
    }

    /// The updates of a live delta: `piece` continues the block at character `offset` (a
    /// piece already seen, or its seen part, is skipped).
    pub fn delta(&mut self, agent: Option<AgentRunId>, flow: Flow, offset: u64, piece: &str) -> Vec<SessionUpdate> {
        let open = self.open.entry((agent, flow)).or_default();
        let have = open.raw.chars().count() as u64;
        let skip = have.saturating_sub(offset) as usize;
        let piece: String = piece.chars().skip(skip).collect();
        let piece = piece.as_str();
        open.raw.push_str(piece);
        let shown = open.filter.push(piece, agent.is_none() && flow == Flow::Text);
        self.chunk(agent, flow, shown)
    }

    fn event(&mut self, event: &TranscriptEvent, out: &mut Vec<SessionUpdate>) {
        let agent = event.agent_run_id;
        match &event.body {
            EventBody::Text { text, .. } => out.extend(self.close(agent, Flow::Text, text)),
            EventBody::Reasoning { text } => out.extend(self.close(agent, Flow::Reasoning, text)),
            EventBody::ToolCall { call_id, name, input } => {
                self.last = Last::Other;
                out.push(SessionUpdate::ToolCall(tool_call(&self.call_id(call_id), name, input)));
            }
            EventBody::ToolResult {
                call_id,
                status,
                output,
            } => {
                self.last = Last::Other;
                let mut fields = ToolCallUpdateFields::new().status(match status {
                    ToolStatus::Running => ToolCallStatus::InProgress,
                    ToolStatus::Completed => ToolCallStatus::Completed,
                    ToolStatus::Error => ToolCallStatus::Failed,
                });
                if !output.is_empty() {
                    fields = fields.content(vec![ToolCallContent::from(text(output.clone()))]);
                }
                out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    self.call_id(call_id),
                    fields,
                )));
            }
            EventBody::Subagent { phase, label, status } => {
                self.last = Last::Other;
                let id = format!("{}-agent-{}", self.run, agent.unwrap_or(0));
                out.push(match phase {
                    SubagentPhase::Start => SessionUpdate::ToolCall(
                        ToolCall::new(id, truncate_chars(&format!("Subagent: {label}"), TITLE_MAX))
                            .kind(ToolKind::Think)
                            .status(ToolCallStatus::InProgress),
                    ),
                    SubagentPhase::End => {
                        let ok = matches!(status.as_deref(), None | Some("completed"));
                        let status = if ok {
                            ToolCallStatus::Completed
                        } else {
                            ToolCallStatus::Failed
                        };
                        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                            id,
                            ToolCallUpdateFields::new().status(status),
                        ))
                    }
                });
            }
            EventBody::Usage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
                cost_usd,
            } => {
                let used = input_tokens + output_tokens + cache_read_tokens + cache_write_tokens;
                let mut usage = UsageUpdate::new(used, 0);
                if *cost_usd > 0.0 {
                    usage = usage.cost(Cost::new(*cost_usd, "USD"));
                }
                out.push(SessionUpdate::UsageUpdate(usage));
            }
            EventBody::Error { error_kind, message } => {
                let kind = serde_json::to_value(error_kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                out.extend(self.chunk(None, Flow::Text, format!("Planner error ({kind}): {message}")));
                self.last = Last::Other;
            }
            EventBody::Warning { message } => {
                out.extend(self.chunk(None, Flow::Text, format!("Warning: {message}")));
                self.last = Last::Other;
            }
            EventBody::Session { .. } | EventBody::Question { .. } | EventBody::Raw { .. } => {}
        }
    }

    /// A stored text or reasoning event: the block's text not yet sent by deltas.
    fn close(&mut self, agent: Option<AgentRunId>, flow: Flow, full: &str) -> Vec<SessionUpdate> {
        let mut open = self.open.remove(&(agent, flow)).unwrap_or_default();
        let strip = agent.is_none() && flow == Flow::Text;
        let rest = match full.strip_prefix(open.raw.as_str()) {
            Some(rest) => rest,
            // The deltas were not a prefix of the stored text (never expected): send it all
            // rather than lose any of it.
            None => {
                open = Open::default();
                full
            }
        };
        let mut shown = open.filter.push(rest, strip);
        shown.push_str(&open.filter.finish(strip));
        let shown = if open.raw.is_empty() {
            shown.trim().to_owned()
        } else {
            shown.trim_end().to_owned()
        };
        let out = self.chunk(agent, flow, shown);
        // The block is closed: the next text starts a new one.
        if self.last == Last::Block(agent, flow) {
            self.last = Last::Other;
        }
        out
    }

    fn chunk(&mut self, agent: Option<AgentRunId>, flow: Flow, piece: String) -> Vec<SessionUpdate> {
        if piece.is_empty() {
            return Vec::new();
        }
        let separate = match self.last {
            Last::Block(a, f) => (a, f) != (agent, flow),
            Last::Other => true,
            Last::Nothing => false,
        };
        self.last = Last::Block(agent, flow);
        let piece = if separate && flow == Flow::Text {
            format!("\n\n{piece}")
        } else {
            piece
        };
        let chunk = ContentChunk::new(text(piece));
        vec![match flow {
            Flow::Text => SessionUpdate::AgentMessageChunk(chunk),
            Flow::Reasoning => SessionUpdate::AgentThoughtChunk(chunk),
        }]
    }

    fn call_id(&self, call_id: &str) -> String {
        format!("{}-{call_id}", self.run)
    }
}

/// A planwire tool call as an ACP one: kind from its name, a location for a path.
fn tool_call(id: &str, name: &str, input: &str) -> ToolCall {
    let title = if input.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {input}")
    };
    let mut call = ToolCall::new(id.to_owned(), truncate_chars(&title, TITLE_MAX))
        .kind(tool_kind(name))
        .status(ToolCallStatus::InProgress);
    if input.starts_with('/') && !input.contains(char::is_whitespace) {
        call = call.locations(vec![ToolCallLocation::new(input.to_owned())]);
    }
    call
}

/// The ACP kind of a tool, from the names Claude Code, OpenCode, Codex and ACP agents use.
pub fn tool_kind(name: &str) -> ToolKind {
    let n = name.to_ascii_lowercase();
    let n = n.rsplit("__").next().unwrap_or(&n);
    let has = |needles: &[&str]| needles.iter().any(|k| n.contains(k));
    if has(&["web", "fetch", "url", "http"]) {
        ToolKind::Fetch
    } else if has(&["grep", "glob", "search", "find"]) || n == "ls" || n == "list" || n.starts_with("list_") {
        ToolKind::Search
    } else if has(&["read", "view", "cat"]) {
        ToolKind::Read
    } else if has(&["bash", "shell", "exec", "command", "terminal"]) || n == "run" {
        ToolKind::Execute
    } else if has(&["task", "agent", "todo", "think", "plan"]) {
        ToolKind::Think
    } else if has(&["edit", "write", "patch", "replace", "create"]) {
        ToolKind::Edit
    } else {
        ToolKind::Other
    }
}

/// The plan as ACP `plan` entries: its steps when the description lists them under a
/// "Steps" heading, else its acceptance criteria.
pub fn plan_update(plan: &Plan) -> SessionUpdate {
    let mut items = steps(&plan.description);
    if items.is_empty() {
        items = plan.acceptance_criteria.clone();
    }
    let entries = items
        .into_iter()
        .map(|c| PlanEntry::new(c, PlanEntryPriority::Medium, PlanEntryStatus::Pending))
        .collect();
    SessionUpdate::Plan(AcpPlan::new(entries))
}

/// The list items of the first section whose heading names steps.
fn steps(markdown: &str) -> Vec<String> {
    let mut inside = false;
    let mut items = Vec::new();
    for line in markdown.lines() {
        let t = line.trim();
        if let Some(heading) = t.strip_prefix('#') {
            if inside && !items.is_empty() {
                break;
            }
            let h = heading.trim_start_matches('#').trim().to_ascii_lowercase();
            inside = h.contains("step") || h == "approach" || h.contains("implementation");
            continue;
        }
        if !inside {
            continue;
        }
        let item = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")).or_else(|| {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            (digits > 0)
                .then(|| {
                    t[digits..]
                        .strip_prefix(". ")
                        .or_else(|| t[digits..].strip_prefix(") "))
                })
                .flatten()
        });
        if let Some(item) = item.map(str::trim).filter(|i| !i.is_empty()) {
            items.push(item.to_owned());
        }
    }
    items
}

/// A stored message as it is replayed: the person's words as the user's, planwire's and the
/// planner's as the agent's. `response` is left out (the run's transcript holds it) and so
/// is `plan_candidate` (the plan stands for it).
pub fn message(m: &Message) -> Option<SessionUpdate> {
    match m.kind.as_str() {
        "description" | "answer" | "feedback" | "edit" => Some(user_text(m.text.clone())),
        "plan" | "question" | "error" | "status" => Some(agent_text(format!("\n\n{}", m.text.trim_end()))),
        _ => None,
    }
}

/// Removes `<planwire-plan>…</planwire-plan>` from text that arrives in pieces: what is
/// outside the tags passes as soon as it cannot be the start of a tag.
#[derive(Default)]
struct PlanFilter {
    pending: String,
    inside: bool,
}

const OPEN_TAG: &str = "<planwire-plan>";
const CLOSE_TAG: &str = "</planwire-plan>";

impl PlanFilter {
    /// The part of `piece` to show now (all of it when `active` is false).
    fn push(&mut self, piece: &str, active: bool) -> String {
        if !active {
            return piece.to_owned();
        }
        self.pending.push_str(piece);
        let mut shown = String::new();
        loop {
            let tag = if self.inside { CLOSE_TAG } else { OPEN_TAG };
            match self.pending.find(tag) {
                Some(at) => {
                    if !self.inside {
                        shown.push_str(&self.pending[..at]);
                    }
                    self.pending.drain(..at + tag.len());
                    self.inside = !self.inside;
                }
                None => {
                    let keep = partial_suffix(&self.pending, tag);
                    let cut = self.pending.len() - keep;
                    if !self.inside {
                        shown.push_str(&self.pending[..cut]);
                    }
                    self.pending.drain(..cut);
                    return shown;
                }
            }
        }
    }

    /// At the end of the block: what was held back (nothing of an unclosed plan block).
    fn finish(&mut self, active: bool) -> String {
        let rest = std::mem::take(&mut self.pending);
        if !active || self.inside {
            return if active { String::new() } else { rest };
        }
        rest
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `tag`.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.len() >= n && text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, body: EventBody) -> TranscriptEvent {
        TranscriptEvent {
            seq,
            ts: String::new(),
            agent_run_id: None,
            body,
        }
    }

    fn texts(updates: &[SessionUpdate]) -> String {
        updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::AgentMessageChunk(c) => match &c.content {
                    ContentBlock::Text(t) => Some(t.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_plan_block_never_reaches_the_client_even_split_across_deltas() {
        let full = "Short update.\n\n<planwire-plan>{\"title\":\"T\"}</planwire-plan>\nDone.";
        let mut s = RunStream::new(1, 0);
        let mut sent = Vec::new();
        let mut offset = 0;
        for piece in [
            "Short update.\n\n<plan",
            "wire-pl",
            "an>{\"title\":",
            "\"T\"}</planwire-",
            "plan>\nDo",
        ] {
            sent.extend(s.delta(None, Flow::Text, offset, piece));
            offset += piece.chars().count() as u64;
        }
        // A piece seen twice (a catch-up and a notification) is shown once.
        assert!(s.delta(None, Flow::Text, 0, "Short").is_empty());
        let end = s.events(&[ev(
            1,
            EventBody::Text {
                text: full.into(),
                is_final: true,
            },
        )]);
        sent.extend(end);
        let shown = texts(&sent);
        assert!(
            !shown.contains("planwire-plan") && !shown.contains("title"),
            "{shown:?}"
        );
        assert!(
            shown.starts_with("Short update.") && shown.ends_with("Done."),
            "{shown:?}"
        );
    }

    #[test]
    fn a_stored_event_sends_only_what_deltas_did_not_and_each_seq_once() {
        let mut s = RunStream::new(3, 0);
        let a = s.delta(None, Flow::Reasoning, 0, "Think");
        assert_eq!(a.len(), 1);
        let body = EventBody::Reasoning {
            text: "Thinking hard".into(),
        };
        let b = s.events(&[ev(1, body.clone())]);
        match &b[..] {
            [SessionUpdate::AgentThoughtChunk(c)] => {
                assert!(matches!(&c.content, ContentBlock::Text(t) if t.text == "ing hard"))
            }
            other => panic!("{other:?}"),
        }
        assert!(s.events(&[ev(1, body)]).is_empty(), "a seq is rendered once");
    }

    #[test]
    fn tool_calls_carry_a_kind_a_title_and_their_result() {
        let mut s = RunStream::new(7, 0);
        let out = s.events(&[
            ev(
                1,
                EventBody::ToolCall {
                    call_id: "c1".into(),
                    name: "Read".into(),
                    input: "/repo/src/main.rs".into(),
                },
            ),
            ev(
                2,
                EventBody::ToolResult {
                    call_id: "c1".into(),
                    status: ToolStatus::Completed,
                    output: "fn main".into(),
                },
            ),
        ]);
        let v = serde_json::to_value(&out).unwrap();
        assert_eq!(v[0]["sessionUpdate"], "tool_call");
        assert_eq!(v[0]["toolCallId"], "7-c1");
        assert_eq!(v[0]["kind"], "read");
        assert_eq!(v[0]["title"], "Read /repo/src/main.rs");
        assert_eq!(v[0]["locations"][0]["path"], "/repo/src/main.rs");
        assert_eq!(v[1]["sessionUpdate"], "tool_call_update");
        assert_eq!(v[1]["status"], "completed");
        assert_eq!(v[1]["content"][0]["content"]["text"], "fn main");
    }

    #[test]
    fn kinds_from_names() {
        use ToolKind::*;
        for (name, kind) in [
            ("Read", Read),
            ("read_file", Read),
            ("mcp__acp__Read", Read),
            ("Grep", Search),
            ("glob", Search),
            ("LS", Search),
            ("Bash", Execute),
            ("shell", Execute),
            ("WebFetch", Fetch),
            ("WebSearch", Fetch),
            ("Task", Think),
            ("TodoWrite", Think),
            ("Write", Edit),
            ("mystery", Other),
        ] {
            assert_eq!(tool_kind(name), kind, "{name}");
        }
    }

    #[test]
    fn separate_text_blocks_are_separated() {
        let mut s = RunStream::new(1, 0);
        let t = |seq, text: &str| {
            ev(
                seq,
                EventBody::Text {
                    text: text.into(),
                    is_final: false,
                },
            )
        };
        let out = s.events(&[t(1, "First."), t(2, "Second.")]);
        assert_eq!(texts(&out), "First.\n\nSecond.");
    }

    #[test]
    fn plan_entries_are_its_steps_else_its_criteria() {
        let mut plan = Plan {
            title: "T".into(),
            description: "## Context\nx\n\n## Steps\n1. Read it.\n2. Change it.\n\n## Risks\n- none".into(),
            acceptance_criteria: vec!["builds".into()],
            ..Plan::default()
        };
        let v = serde_json::to_value(plan_update(&plan)).unwrap();
        assert_eq!(v["sessionUpdate"], "plan");
        assert_eq!(v["entries"][0]["content"], "Read it.");
        assert_eq!(v["entries"][1]["content"], "Change it.");
        assert_eq!(v["entries"].as_array().unwrap().len(), 2);
        assert_eq!(v["entries"][0]["status"], "pending");
        plan.description = "No steps here.".into();
        let v = serde_json::to_value(plan_update(&plan)).unwrap();
        assert_eq!(v["entries"][0]["content"], "builds");
    }
}

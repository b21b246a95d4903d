//! The notifications of a `codex app-server` turn, as normalized events, live deltas and plan
//! candidates. Pure: the driver feeds it every notification in order (and tells it the thread
//! and when a question is about to be asked); the recordings in `tests/fixtures/codex/` are
//! its ground truth. What they show, and what the mapper does:
//!
//! - **Items** arrive as `item/started` / `item/completed` with the whole item. A message
//!   (`agentMessage`) is the stored `text` once, at its completion; its
//!   `item/agentMessage/delta` pieces are deltas. A completed message is held until the next
//!   item starts (then it is not the final answer), a question is asked (not final), or
//!   `turn/completed` (final when the turn completed). It is never held past the start of the
//!   next item, so the block it closes is closed before the next block's first delta.
//! - **Reasoning** is the `reasoning` item's summary parts joined by blank lines (its raw
//!   `content` when it has no summary); `item/reasoning/summaryTextDelta` pieces are deltas, and
//!   a new summary part (`summaryPartAdded`, index > 0) adds the blank line.
//! - **A `<proposed_plan>` block** (Codex's own plan form) is cut out of the message and its
//!   deltas, and comes as a `plan` item that starts and completes *inside* the message. Its
//!   text is a plan candidate, and a `text` event right after the message's (final with it);
//!   its `item/plan/delta` pieces are not streamed (they would extend the message's block).
//! - **Tools**: `commandExecution` (`shell`, the command without its `/bin/bash -lc` wrapper),
//!   `fileChange` (`apply_patch`), `mcpToolCall`, `dynamicToolCall`, `webSearch`, `imageView`,
//!   `collabAgentToolCall`: a `toolCall` at start, a `toolResult` at completion (`declined`
//!   and `failed` are errors). `turn/plan/updated` (the `update_plan` checklist) is an
//!   `update_plan` call and its result.
//! - **Usage** comes per model request (`thread/tokenUsage/updated`): the pass's usage is the
//!   sum of `last` (a subagent's requests included), one `usage` event at `turn/completed`.
//!   A resumed thread first repeats its last usage under the earlier turn's id (before
//!   `turn/started`): only the pass's own turn counts, and a repeat of the same `total` is not
//!   counted twice. Codex reports no cost.
//! - **Errors**: an `error` notification with `willRetry` is a notice (`raw`); without it, it
//!   is the `error` event (classified by `codexErrorInfo` and its HTTP status), and the
//!   failed turn's `turn.error` that repeats it adds nothing.
//! - **A message that never completes** (an interrupt, a stream cut and retried) is kept as a
//!   not-final `text` of what it streamed: when another message starts, or at the end.
//! - **Subagents** (collab tools): the items and deltas of another thread are that thread's
//!   agent run (its key is the thread id), started by `spawnAgent` or when first seen, and
//!   ended by a terminal `agentsStates` entry or its own `turn/completed`.
//!
//! Notifications about the client's UI state (thread status, settings, rate limits, MCP
//! startup, …) are consumed; warnings and unknown notifications are `raw`.

use std::collections::{HashMap, HashSet};

use planwire_protocol::{DeltaKind, ErrorKind, EventBody, ToolStatus};
use serde_json::{json, Value};

use super::super::claude::{INPUT_SUMMARY_MAX, OUTPUT_SUMMARY_MAX};
use super::super::{classify_api_error, raw_event, status_in_text, str_of, truncate_chars, ParsedEvent, Subagents};

/// What one notification gives: events (stored in this order), deltas (sent after them), and
/// plan candidates.
#[derive(Debug, Default, PartialEq)]
pub struct Output {
    pub events: Vec<ParsedEvent>,
    pub deltas: Vec<(Option<String>, DeltaKind, String)>,
    pub plans: Vec<String>,
}

impl Output {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.deltas.is_empty() && self.plans.is_empty()
    }
}

/// Notifications consumed without an event: the client's UI state, and pieces the items
/// carry whole.
const CONSUMED: &[&str] = &[
    "thread/started",
    "thread/status/changed",
    "thread/settings/updated",
    "thread/readState/changed",
    "thread/name/updated",
    "thread/goal/updated",
    "thread/goal/cleared",
    "thread/queue/changed",
    "thread/section/changed",
    "thread/attachment/updated",
    "thread/prediction/updated",
    "thread/project/updated",
    "thread/environment/connected",
    "thread/environment/disconnected",
    "thread/archived",
    "thread/unarchived",
    "thread/closed",
    "project/changed",
    "skills/changed",
    "turn/diff/updated",
    "turn/moderationMetadata",
    "hook/started",
    "hook/completed",
    "serverRequest/resolved",
    "rawResponseItem/completed",
    "rawResponse/completed",
    "item/plan/delta",
    "item/reasoning/textDelta",
    "item/commandExecution/outputDelta",
    "item/commandExecution/terminalInteraction",
    "item/fileChange/outputDelta",
    "item/fileChange/patchUpdated",
    "item/mcpToolCall/progress",
    "item/autoApprovalReview/started",
    "item/autoApprovalReview/completed",
    "command/exec/outputDelta",
    "process/outputDelta",
    "process/exited",
    "mcpServer/startupStatus/updated",
    "mcpServer/oauthLogin/completed",
    "mcpServer/event/stream/notification",
    "account/updated",
    "account/rateLimits/updated",
    "account/login/completed",
    "account/gatewayOAuth/changed",
    "app/list/updated",
    "remoteControl/status/changed",
    "fs/changed",
    "configWarning",
    "deprecationNotice",
    "model/safetyBuffering/updated",
    "model/verification",
    "modelProvider/authRecoveryStarted",
    "modelProvider/authRecoveryCompleted",
    "windowsSandbox/setupCompleted",
];

/// The state of one pass's turn.
#[derive(Debug, Default)]
pub struct Mapper {
    thread: Option<String>,
    /// The pass's turn (from `turn/started`).
    turn: Option<String>,
    /// The main agent's completed messages, and what came after them, until we know whether
    /// they end the turn.
    held: Vec<ParsedEvent>,
    /// The main agent's message streaming now.
    open_message: Option<String>,
    /// What each open message (of any agent) streamed so far: item id → (agent, text).
    partial: HashMap<String, (Option<String>, String)>,
    /// Plan items that completed inside the open message: they follow its text.
    plans_behind: Vec<String>,
    calls: HashSet<String>,
    results: HashSet<String>,
    main_text: crate::planners::TextTail,
    final_text: crate::planners::TextTail,
    /// Summed `last` usage: input, cached input, cache write, output.
    usage: Option<[u64; 4]>,
    /// Each thread's last `total`, to tell a new request from a repeat.
    last_total: HashMap<Option<String>, Option<u64>>,
    plan_updates: u32,
    /// The fatal error of the turn.
    error: Option<String>,
    /// The last retry notice (its cause helps classify the error that follows).
    last_retry: Option<String>,
    turn_status: Option<String>,
    subagents: Subagents,
    /// Subagent labels by thread id (from `spawnAgent`).
    labels: HashMap<String, String>,
    finished: bool,
}

impl Mapper {
    pub fn new() -> Mapper {
        Mapper::default()
    }

    /// The thread of the pass (from `thread/start` or `thread/resume`): its `session` event.
    pub fn thread(&mut self, id: &str, out: &mut Output) {
        if id.is_empty() || self.thread.as_deref() == Some(id) {
            return;
        }
        self.thread = Some(id.to_owned());
        out.events.push(ParsedEvent::main(EventBody::Session {
            provider_session_id: id.to_owned(),
        }));
    }

    pub fn session_id(&self) -> Option<&str> {
        self.thread.as_deref()
    }

    /// True once the main thread's turn completed (in any status).
    pub fn turn_ended(&self) -> bool {
        self.turn_status.is_some()
    }

    /// True once the main thread's turn completed with status `completed`.
    pub fn turn_completed(&self) -> bool {
        self.turn_status.as_deref() == Some("completed")
    }

    /// The main agent's messages that ended the turn, joined by blank lines.
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

    /// The turn's fatal error.
    pub fn error_message(&self) -> Option<String> {
        self.error.clone()
    }

    /// Why a turn that completed has no final answer: its last step was a tool call.
    pub fn explain_missing_answer(&self) -> Option<String> {
        (self.final_text.is_empty() && self.turn_status.as_deref() == Some("completed"))
            .then(|| "Codex ended its turn without a final message (its last step was a tool call).".to_owned())
    }

    /// The agent is about to ask the person: what it wrote before is not its final answer.
    pub fn before_question(&mut self, out: &mut Output) {
        self.flush(false, out);
    }

    /// At the end of the pass: held messages are not final (no completed turn), what open
    /// messages streamed is kept, and open subagents end as `interrupted`. Idempotent.
    pub fn finish(&mut self, out: &mut Output) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.flush(false, out);
        let mut open: Vec<String> = self.partial.keys().cloned().collect();
        open.sort();
        for id in open {
            self.keep_partial(&id, out);
        }
        self.flush(false, out);
        self.subagents.interrupt_open(&mut out.events);
    }

    /// One notification, in order.
    pub fn notification(&mut self, method: &str, params: &Value, out: &mut Output) {
        let agent = self.agent_of(params);
        match method {
            "item/started" => self.on_item(params, agent, false, out),
            "item/completed" => self.on_item(params, agent, true, out),
            "item/agentMessage/delta" => self.on_delta(params, agent, DeltaKind::Text, out),
            "item/reasoning/summaryTextDelta" => self.on_delta(params, agent, DeltaKind::Reasoning, out),
            "item/reasoning/summaryPartAdded" => {
                if params.get("summaryIndex").and_then(Value::as_u64).unwrap_or(0) > 0 {
                    out.deltas.push((agent, DeltaKind::Reasoning, "\n\n".into()));
                }
            }
            "turn/started" => {
                if agent.is_none() {
                    self.turn = params["turn"]["id"].as_str().map(str::to_owned);
                }
            }
            "thread/tokenUsage/updated" => self.on_usage(params, agent),
            "turn/plan/updated" => self.on_plan_updated(params, agent, out),
            "turn/completed" => self.on_turn_completed(params, agent, out),
            "error" => self.on_error(params, agent, out),
            m if CONSUMED.contains(&m) => {}
            _ => self.keep_raw(method, params, out),
        }
    }

    /// `None` for the pass's own thread (or a notification without one), else the thread id:
    /// a subagent's key.
    fn agent_of(&self, params: &Value) -> Option<String> {
        match (str_of(params, "threadId"), &self.thread) {
            (Some(t), Some(main)) if t != main => Some(t.to_owned()),
            _ => None,
        }
    }

    fn keep_raw(&mut self, method: &str, params: &Value, out: &mut Output) {
        let line = json!({ "method": method, "params": params }).to_string();
        self.emit(raw_event(&line), out);
    }

    /// An event, now, or behind the held messages (time order is kept).
    fn emit(&mut self, ev: ParsedEvent, out: &mut Output) {
        if self.held.is_empty() {
            out.events.push(ev);
        } else {
            self.held.push(ev);
        }
    }

    /// Emits what is held; the held messages' text is final when `is_final`.
    fn flush(&mut self, is_final: bool, out: &mut Output) {
        for mut ev in std::mem::take(&mut self.held) {
            if let (None, EventBody::Text { text, is_final: flag }) = (&ev.agent, &mut ev.body) {
                *flag = is_final;
                if is_final {
                    self.final_text.push(text.clone());
                }
            }
            out.events.push(ev);
        }
    }

    /// A subagent's key, started when first seen.
    fn ensure_agent(&mut self, agent: &Option<String>, out: &mut Output) {
        if let Some(key) = agent {
            let label = self.labels.get(key).cloned().unwrap_or_else(|| "subagent".into());
            let mut started = Vec::new();
            self.subagents.start(key, &label, &mut started);
            for ev in started {
                self.emit(ev, out);
            }
        }
    }

    fn on_item(&mut self, params: &Value, agent: Option<String>, completed: bool, out: &mut Output) {
        let Some(item) = params.get("item").filter(|i| i.is_object()) else {
            self.keep_raw(if completed { "item/completed" } else { "item/started" }, params, out);
            return;
        };
        let id = str_of(item, "id").unwrap_or("").to_owned();
        let kind = str_of(item, "type").unwrap_or("");
        if !completed && agent.is_none() && kind != "plan" {
            // A new step: the messages held so far did not end the turn.
            self.flush(false, out);
        }
        if agent.is_some() && kind != "userMessage" {
            self.ensure_agent(&agent, out);
        }
        match kind {
            "agentMessage" if completed => self.on_message(&id, item, agent, out),
            "agentMessage" => self.on_message_started(&id, agent, out),
            "reasoning" if completed => {
                let text = joined(item, "summary").or_else(|| joined(item, "content"));
                if let Some(text) = text {
                    let body = EventBody::Reasoning { text };
                    self.emit(ParsedEvent { agent, body }, out);
                }
            }
            "plan" if completed => self.on_plan_item(item, agent, out),
            "commandExecution"
            | "fileChange"
            | "mcpToolCall"
            | "dynamicToolCall"
            | "webSearch"
            | "imageView"
            | "collabAgentToolCall" => self.on_tool(kind, &id, item, agent, completed, out),
            "reasoning" | "plan" | "userMessage" | "hookPrompt" | "contextCompaction" | "sleep"
            | "enteredReviewMode" | "exitedReviewMode" | "subAgentActivity" | "functionCallOutput"
            | "imageGeneration" => {}
            _ if completed => self.keep_raw("item/completed", params, out),
            _ => {}
        }
    }

    fn on_message_started(&mut self, id: &str, agent: Option<String>, out: &mut Output) {
        if agent.is_none() {
            if let Some(prev) = self.open_message.replace(id.to_owned()) {
                if prev != id {
                    // The earlier message never completed (a retried stream): keep what it
                    // streamed, before this one's first piece.
                    self.keep_partial(&prev, out);
                    self.flush(false, out);
                }
            }
        }
        self.partial.insert(id.to_owned(), (agent, String::new()));
    }

    /// A message that never completed, as the not-final text of what it streamed.
    fn keep_partial(&mut self, id: &str, out: &mut Output) {
        let Some((agent, text)) = self.partial.remove(id) else {
            return;
        };
        if self.open_message.as_deref() == Some(id) {
            self.open_message = None;
        }
        if text.is_empty() {
            return;
        }
        let body = EventBody::Text { text, is_final: false };
        self.message(ParsedEvent { agent, body }, out);
    }

    /// A message's text: the main agent's is held (is it the final answer?), a subagent's
    /// goes out.
    fn message(&mut self, ev: ParsedEvent, out: &mut Output) {
        match (&ev.agent, &ev.body) {
            (None, EventBody::Text { text, .. }) => {
                self.main_text.push(text.clone());
                self.held.push(ev);
            }
            _ => self.emit(ev, out),
        }
    }

    fn on_message(&mut self, id: &str, item: &Value, agent: Option<String>, out: &mut Output) {
        self.partial.remove(id);
        if self.open_message.as_deref() == Some(id) {
            self.open_message = None;
        }
        let mut texts: Vec<String> = str_of(item, "text")
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .into_iter()
            .collect();
        if agent.is_none() {
            // The plan cut out of this message follows it.
            texts.append(&mut self.plans_behind);
        }
        for text in texts {
            let body = EventBody::Text { text, is_final: false };
            self.message(
                ParsedEvent {
                    agent: agent.clone(),
                    body,
                },
                out,
            );
        }
    }

    fn on_plan_item(&mut self, item: &Value, agent: Option<String>, out: &mut Output) {
        let text = str_of(item, "text").unwrap_or("").trim_end();
        if text.trim().is_empty() {
            return;
        }
        let body = EventBody::Text {
            text: text.to_owned(),
            is_final: false,
        };
        if agent.is_some() {
            self.emit(ParsedEvent { agent, body }, out);
            return;
        }
        out.plans.push(text.to_owned());
        if self.open_message.is_some() {
            self.plans_behind.push(text.to_owned());
        } else {
            self.message(ParsedEvent::main(body), out);
        }
    }

    fn on_delta(&mut self, params: &Value, agent: Option<String>, kind: DeltaKind, out: &mut Output) {
        let Some(delta) = str_of(params, "delta").filter(|d| !d.is_empty()) else {
            return;
        };
        self.ensure_agent(&agent, out);
        if kind == DeltaKind::Text {
            let id = str_of(params, "itemId").unwrap_or("").to_owned();
            self.partial
                .entry(id)
                .or_insert_with(|| (agent.clone(), String::new()))
                .1
                .push_str(delta);
        }
        out.deltas.push((agent, kind, delta.to_owned()));
    }

    fn on_tool(
        &mut self,
        kind: &str,
        id: &str,
        item: &Value,
        agent: Option<String>,
        completed: bool,
        out: &mut Output,
    ) {
        if id.is_empty() {
            return;
        }
        if self.calls.insert(id.to_owned()) {
            let (name, input) = tool_call_of(kind, item);
            let body = EventBody::ToolCall {
                call_id: id.to_owned(),
                name,
                input: truncate_chars(&input, INPUT_SUMMARY_MAX),
            };
            self.emit(
                ParsedEvent {
                    agent: agent.clone(),
                    body,
                },
                out,
            );
        }
        if kind == "collabAgentToolCall" {
            self.flush(false, out);
            self.on_collab(item, completed, out);
        }
        if !completed || !self.results.insert(id.to_owned()) {
            return;
        }
        let (status, output) = tool_result_of(kind, item);
        let body = EventBody::ToolResult {
            call_id: id.to_owned(),
            status,
            output: truncate_chars(&output, OUTPUT_SUMMARY_MAX),
        };
        self.emit(ParsedEvent { agent, body }, out);
    }

    /// Subagents of a collab tool call: started when `spawnAgent` names their threads, ended
    /// by a terminal state (with its last message).
    fn on_collab(&mut self, item: &Value, completed: bool, out: &mut Output) {
        let receivers: Vec<String> = item
            .get("receiverThreadIds")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let label = str_of(item, "prompt")
            .map(|p| truncate_chars(p.lines().next().unwrap_or("").trim(), 80))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "subagent".into());
        if str_of(item, "tool") == Some("spawnAgent") && completed {
            for r in &receivers {
                self.labels.insert(r.clone(), label.clone());
                self.subagents.start(r, &label, &mut out.events);
            }
        }
        let Some(states) = item.get("agentsStates").and_then(Value::as_object) else {
            return;
        };
        let mut keys: Vec<&String> = states.keys().collect();
        keys.sort_by_key(|k| receivers.iter().position(|r| r == *k).unwrap_or(usize::MAX));
        for key in keys {
            let state = &states[key];
            let status = match str_of(state, "status").unwrap_or("") {
                "completed" => "completed",
                "errored" | "notFound" => "error",
                "shutdown" => "cancelled",
                "interrupted" => "interrupted",
                _ => continue,
            };
            if self.subagents.has_ended(key) {
                continue;
            }
            let label = self.labels.get(key).cloned().unwrap_or_else(|| label.clone());
            self.subagents.start(key, &label, &mut out.events);
            if let Some(message) = str_of(state, "message").filter(|m| !m.trim().is_empty()) {
                out.events.push(ParsedEvent {
                    agent: Some(key.clone()),
                    body: EventBody::Text {
                        text: message.to_owned(),
                        is_final: false,
                    },
                });
            }
            self.subagents.end(key, status, &mut out.events);
        }
    }

    /// A model request's usage (a subagent's too: the pass's usage is what it cost).
    fn on_usage(&mut self, params: &Value, agent: Option<String>) {
        let Some(usage) = params.get("tokenUsage") else {
            return;
        };
        if agent.is_none() && (self.turn.is_none() || str_of(params, "turnId") != self.turn.as_deref()) {
            return; // a resumed thread repeats its last usage, under the earlier turn
        }
        let n = |part: &str, key: &str| usage.get(part).and_then(|p| p.get(key)).and_then(Value::as_u64);
        let total = n("total", "totalTokens");
        if total.is_some() && self.last_total.get(&agent) == Some(&total) {
            return; // the same request reported again
        }
        self.last_total.insert(agent, total);
        let last = |key: &str| n("last", key).unwrap_or(0);
        let sum = self.usage.get_or_insert([0; 4]);
        sum[0] += last("inputTokens");
        sum[1] += last("cachedInputTokens");
        sum[2] += last("cacheWriteInputTokens");
        sum[3] += last("outputTokens");
    }

    fn on_plan_updated(&mut self, params: &Value, agent: Option<String>, out: &mut Output) {
        let steps: Vec<String> = params
            .get("plan")
            .and_then(Value::as_array)
            .map(|steps| {
                steps
                    .iter()
                    .map(|s| {
                        let mark = match str_of(s, "status") {
                            Some("completed") => "[x]",
                            Some("inProgress") => "[~]",
                            _ => "[ ]",
                        };
                        format!("{mark} {}", str_of(s, "step").unwrap_or(""))
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.plan_updates += 1;
        let call_id = format!("update_plan:{}", self.plan_updates);
        let input = str_of(params, "explanation")
            .filter(|e| !e.trim().is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{} steps", steps.len()));
        self.ensure_agent(&agent, out);
        let call = EventBody::ToolCall {
            call_id: call_id.clone(),
            name: "update_plan".into(),
            input: truncate_chars(&input, INPUT_SUMMARY_MAX),
        };
        self.emit(
            ParsedEvent {
                agent: agent.clone(),
                body: call,
            },
            out,
        );
        let result = EventBody::ToolResult {
            call_id,
            status: ToolStatus::Completed,
            output: truncate_chars(&steps.join("\n"), OUTPUT_SUMMARY_MAX),
        };
        self.emit(ParsedEvent { agent, body: result }, out);
    }

    fn on_error(&mut self, params: &Value, agent: Option<String>, out: &mut Output) {
        let error = params.get("error").unwrap_or(&Value::Null);
        let message = str_of(error, "message").unwrap_or("Codex reported an error").to_owned();
        if params.get("willRetry").and_then(Value::as_bool) == Some(true) || agent.is_some() {
            self.last_retry = Some(message);
            self.keep_raw("error", params, out);
            return;
        }
        self.emit_error(error, &message, out);
    }

    fn emit_error(&mut self, error: &Value, message: &str, out: &mut Output) {
        if self.error.as_deref() == Some(message) {
            return;
        }
        self.flush(false, out);
        let kind = classify(error.get("codexErrorInfo"), message, self.last_retry.as_deref());
        self.error = Some(message.to_owned());
        out.events.push(ParsedEvent::main(EventBody::Error {
            error_kind: kind,
            message: message.to_owned(),
        }));
    }

    fn on_turn_completed(&mut self, params: &Value, agent: Option<String>, out: &mut Output) {
        let turn = params.get("turn").unwrap_or(&Value::Null);
        let status = str_of(turn, "status").unwrap_or("completed").to_owned();
        if let Some(key) = agent {
            let status = match status.as_str() {
                "completed" => "completed",
                "interrupted" => "interrupted",
                _ => "error",
            };
            let mut ended = Vec::new();
            self.subagents.end(&key, status, &mut ended);
            for ev in ended {
                self.emit(ev, out);
            }
            return;
        }
        if status == "completed" {
            self.flush(true, out);
        } else {
            let open: Vec<String> = self.open_message.iter().cloned().collect();
            for id in open {
                self.keep_partial(&id, out);
            }
            self.flush(false, out);
        }
        if status == "failed" {
            let error = turn.get("error").unwrap_or(&Value::Null);
            let message = str_of(error, "message").unwrap_or("the Codex turn failed").to_owned();
            self.emit_error(error, &message, out);
        }
        if let Some([input, cached, cache_write, output]) = self.usage.take() {
            out.events.push(ParsedEvent::main(EventBody::Usage {
                input_tokens: input.saturating_sub(cached),
                output_tokens: output,
                cache_read_tokens: cached,
                cache_write_tokens: cache_write,
                cost_usd: 0.0,
            }));
        }
        self.turn_status = Some(status);
    }
}

/// A list of strings of an item, joined by blank lines; `None` when it is empty.
fn joined(item: &Value, key: &str) -> Option<String> {
    let parts: Vec<&str> = item
        .get(key)?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// The error class from Codex's `codexErrorInfo` (a word, or an object with an
/// `httpStatusCode`), then the HTTP status in the message, then its words.
fn classify(info: Option<&Value>, message: &str, retry: Option<&str>) -> ErrorKind {
    let (code, status) = match info {
        Some(Value::String(code)) => (Some(code.as_str()), None),
        Some(Value::Object(o)) => match o.iter().next() {
            Some((code, inner)) => (Some(code.as_str()), inner.get("httpStatusCode").and_then(Value::as_i64)),
            None => (None, None),
        },
        _ => (None, None),
    };
    match code {
        Some("contextWindowExceeded") => return ErrorKind::ContextOverflow,
        Some("usageLimitExceeded" | "rateLimitExceeded") => return ErrorKind::RateLimit,
        Some("serverOverloaded") => return ErrorKind::Overloaded,
        Some("unauthorized") => return ErrorKind::Auth,
        _ => {}
    }
    let status = status.or_else(|| status_in_text(message));
    let kind = classify_api_error(status, None, message);
    match (kind, retry) {
        (ErrorKind::Unknown, Some(retry)) => classify_api_error(status_in_text(retry), None, retry),
        (kind, _) => kind,
    }
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

fn json_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The tool name and input summary of a tool-like item.
fn tool_call_of(kind: &str, item: &Value) -> (String, String) {
    let s = |key: &str| str_of(item, key).unwrap_or("").to_owned();
    match kind {
        "commandExecution" => ("shell".into(), unwrap_shell(&s("command"))),
        "fileChange" => ("apply_patch".into(), changes_summary(item)),
        "mcpToolCall" => (
            format!("{}/{}", str_of(item, "server").unwrap_or("mcp"), s("tool")),
            json_text(item.get("arguments")),
        ),
        "dynamicToolCall" => {
            let name = match str_of(item, "namespace") {
                Some(ns) => format!("{ns}/{}", s("tool")),
                None => s("tool"),
            };
            (name, json_text(item.get("arguments")))
        }
        "webSearch" => ("web_search".into(), s("query")),
        "imageView" => ("view_image".into(), s("path")),
        "collabAgentToolCall" => (
            str_of(item, "tool").unwrap_or("collab").to_owned(),
            str_of(item, "prompt")
                .map(str::to_owned)
                .unwrap_or_else(|| json_text(item.get("receiverThreadIds"))),
        ),
        _ => (kind.to_owned(), String::new()),
    }
}

fn changes_summary(item: &Value) -> String {
    let Some(changes) = item.get("changes").and_then(Value::as_array) else {
        return String::new();
    };
    changes
        .iter()
        .map(|c| {
            let kind = c
                .get("kind")
                .and_then(|k| str_of(k, "type").or_else(|| k.as_str()))
                .unwrap_or("change");
            format!("{kind} {}", str_of(c, "path").unwrap_or("?"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The status and output summary of a completed tool-like item.
fn tool_result_of(kind: &str, item: &Value) -> (ToolStatus, String) {
    let status_word = str_of(item, "status");
    let status = match status_word {
        Some("failed" | "declined" | "interrupted") => ToolStatus::Error,
        Some("inProgress") => ToolStatus::Running,
        _ => ToolStatus::Completed,
    };
    let output = match kind {
        "commandExecution" => {
            let text = str_of(item, "aggregatedOutput").unwrap_or("").trim_end();
            match (item.get("exitCode").and_then(Value::as_i64), status_word) {
                (Some(code), _) if code != 0 => format!("exit code {code}\n{text}"),
                (None, Some("declined")) if text.is_empty() => "declined".to_owned(),
                _ => text.to_owned(),
            }
        }
        "fileChange" => changes_summary(item),
        "mcpToolCall" => match item.get("error").and_then(|e| str_of(e, "message")) {
            Some(m) => m.to_owned(),
            None => content_text(item.get("result").and_then(|r| r.get("content"))),
        },
        "dynamicToolCall" => content_text(item.get("contentItems")),
        "collabAgentToolCall" => item
            .get("agentsStates")
            .and_then(Value::as_object)
            .map(|states| {
                states
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", str_of(v, "status").unwrap_or("?")))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default(),
        _ => String::new(),
    };
    (status, output)
}

/// Content blocks as text: each block's `text`, else its JSON.
fn content_text(blocks: Option<&Value>) -> String {
    blocks
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .map(|b| str_of(b, "text").map(str::to_owned).unwrap_or_else(|| b.to_string()))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;

//! The mapper against recorded app-server conversations (`tests/fixtures/codex/*.jsonl`, made by
//! `record.py` there from the real Codex 0.171.0 and the project's mock model).

use planwire_protocol::{DeltaKind, ErrorKind, EventBody, SubagentPhase};
use serde_json::{json, Value};

use super::{unwrap_shell, Mapper, Output};
use crate::planners::test_support::{errors, shape, texts, usages};
use crate::planners::ParsedEvent;

fn fixture(name: &str) -> &'static str {
    match name {
        "plain" => include_str!("../../../../../tests/fixtures/codex/plain.jsonl"),
        "tools" => include_str!("../../../../../tests/fixtures/codex/tools.jsonl"),
        "ask" => include_str!("../../../../../tests/fixtures/codex/ask.jsonl"),
        "interrupt_ask" => include_str!("../../../../../tests/fixtures/codex/interrupt_ask.jsonl"),
        "interrupt_stream" => include_str!("../../../../../tests/fixtures/codex/interrupt_stream.jsonl"),
        "slow" => include_str!("../../../../../tests/fixtures/codex/slow.jsonl"),
        "e401" => include_str!("../../../../../tests/fixtures/codex/e401.jsonl"),
        "connrefused" => include_str!("../../../../../tests/fixtures/codex/connrefused.jsonl"),
        "resume" => include_str!("../../../../../tests/fixtures/codex/resume.jsonl"),
        "approval" => include_str!("../../../../../tests/fixtures/codex/approval.jsonl"),
        "resume_usage" => include_str!("../../../../../tests/fixtures/codex/resume_usage.jsonl"),
        other => panic!("no fixture {other}"),
    }
}

/// The recorded lines: `{dir, t, msg}`.
fn lines(name: &str) -> Vec<Value> {
    fixture(name)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What a pass reports, in order, checked on the way the way the runner uses it: a stored
/// `text` / `reasoning` event closes the open delta block of its agent and kind, and its text
/// is exactly what the deltas showed.
#[derive(Default)]
struct Run {
    map: Mapper,
    events: Vec<ParsedEvent>,
    deltas: Vec<(Option<String>, DeltaKind, String)>,
    plans: Vec<String>,
    blocks: Vec<((Option<String>, DeltaKind), String)>,
    /// Stored texts that closed a block, with the block's text.
    closed: Vec<(String, String)>,
}

impl Run {
    fn take(&mut self, out: Output) {
        for ev in out.events {
            let kind = match &ev.body {
                EventBody::Text { text, .. } => Some((DeltaKind::Text, text.clone())),
                EventBody::Reasoning { text } => Some((DeltaKind::Reasoning, text.clone())),
                _ => None,
            };
            if let Some((kind, text)) = kind {
                let key = (ev.agent.clone(), kind);
                if let Some(i) = self.blocks.iter().position(|(k, _)| *k == key) {
                    let (_, streamed) = self.blocks.remove(i);
                    self.closed.push((text, streamed));
                }
            }
            self.events.push(ev);
        }
        for (agent, kind, text) in out.deltas {
            let key = (agent.clone(), kind);
            match self.blocks.iter_mut().find(|(k, _)| *k == key) {
                Some((_, s)) => s.push_str(&text),
                None => self.blocks.push((key, text.clone())),
            }
            self.deltas.push((agent, kind, text));
        }
        self.plans.extend(out.plans);
    }

    /// Feeds what Codex sent (`<` lines) as the driver does, from `from` (a line index).
    fn feed(&mut self, lines: &[Value], from: usize) {
        for line in &lines[from..] {
            if line["dir"] != "<" {
                continue;
            }
            let msg = &line["msg"];
            let mut out = Output::default();
            if let Some(thread) = msg["result"]["thread"]["id"].as_str() {
                self.map.thread(thread, &mut out);
            } else if msg["method"] == "item/tool/requestUserInput" {
                self.map.before_question(&mut out);
            } else if let (Some(method), None) = (msg["method"].as_str(), msg.get("id")) {
                self.map.notification(method, &msg["params"], &mut out);
            }
            self.take(out);
        }
    }

    fn finish(&mut self) {
        let mut out = Output::default();
        self.map.finish(&mut out);
        self.take(out);
        for (stored, streamed) in &self.closed {
            assert_eq!(stored, streamed, "a stored block holds exactly what its deltas showed");
        }
    }

    fn joined(&self, kind: DeltaKind) -> String {
        self.deltas
            .iter()
            .filter(|d| d.1 == kind)
            .map(|d| d.2.as_str())
            .collect()
    }
}

fn run(name: &str) -> Run {
    let mut r = Run::default();
    r.feed(&lines(name), 0);
    r.finish();
    r
}

#[test]
fn plain_reasoning_final_answer_and_usage() {
    let r = run("plain");
    assert_eq!(shape(&r.events), ["session", "reasoning", "text!", "usage"]);
    assert!(r
        .map
        .final_text()
        .starts_with("I looked at the code.\n\n<planwire-plan>"));
    assert_eq!(r.map.final_text(), r.map.all_text());
    // input 1234 of which 200 cached.
    assert_eq!(usages(&r.events), [(1034, 56, 200, 0, 0.0)]);
    assert_eq!(r.joined(DeltaKind::Reasoning), "Let me think.");
    assert_eq!(r.joined(DeltaKind::Text), r.map.final_text());
    assert_eq!(r.closed.len(), 2, "both blocks streamed, then were stored");
    assert!(r.plans.is_empty());
    assert_eq!(r.map.error_message(), None);
    assert!(r.map.turn_ended());
    assert_eq!(r.map.session_id(), Some("01a231df-784e-7bc2-94c8-5a5816e5db59"));
}

#[test]
fn tools_are_calls_and_a_proposed_plan_is_a_candidate_after_its_message() {
    let r = run("tools");
    assert_eq!(
        shape(&r.events),
        [
            "session",
            "text",
            "toolCall",
            "toolResult=ok",
            "text!",
            "text!",
            "usage"
        ]
    );
    assert_eq!(
        r.events[2].body,
        EventBody::ToolCall {
            call_id: "call_cat".into(),
            name: "shell".into(),
            input: "cat src/main.rs".into()
        }
    );
    assert!(matches!(&r.events[3].body, EventBody::ToolResult { output, .. } if output == "fn main() {}"));
    // The message without its plan block, then the plan: both the final answer.
    assert_eq!(
        texts(&r.events)[1..],
        [
            ("Here it is.\n\n\nDone.".to_string(), true),
            ("# Greet plan\n\n1. Edit main.rs".to_string(), true)
        ]
    );
    assert_eq!(r.plans, ["# Greet plan\n\n1. Edit main.rs"]);
    assert!(r.map.final_text().contains("# Greet plan"));
    // Two requests: 100 + 500 input, 20 + 30 output.
    assert_eq!(usages(&r.events), [(600, 50, 0, 0, 0.0)]);
}

#[test]
fn text_before_a_question_is_stored_before_it_is_asked_and_is_not_final() {
    let lines = lines("ask");
    let ask = lines
        .iter()
        .position(|l| l["msg"]["method"] == "item/tool/requestUserInput")
        .unwrap();
    let mut r = Run::default();
    r.feed(&lines[..=ask], 0);
    assert_eq!(shape(&r.events), ["session", "text"], "stored before the question");
    assert!(r.blocks.is_empty(), "its block is closed");
    r.feed(&lines, ask + 1);
    r.finish();
    assert_eq!(shape(&r.events), ["session", "text", "text!", "usage"]);
    assert_eq!(
        texts(&r.events)[0],
        ("Before planning I need one decision.".into(), false)
    );
    assert!(r.map.final_text().contains("Plan with the chosen greeting"));
    assert_eq!(usages(&r.events), [(200, 40, 0, 0, 0.0)]);
    // The answer went back keyed by the question id, and the model read it.
    let answer = lines.iter().find(|l| l["dir"] == ">" && l["msg"]["id"] == 0).unwrap();
    assert_eq!(
        answer["msg"]["result"],
        json!({ "answers": { "greeting": { "answers": ["Hi there", "with an exclamation mark"] } } })
    );
}

#[test]
fn an_interrupted_question_leaves_no_final_answer() {
    let r = run("interrupt_ask");
    assert_eq!(shape(&r.events), ["session", "text", "usage"]);
    assert_eq!(r.map.final_text(), "");
    assert_eq!(
        r.map.explain_missing_answer(),
        None,
        "interrupted, not a turn without an answer"
    );
    assert_eq!(r.map.error_message(), None);
    assert!(r.map.turn_ended());
}

#[test]
fn an_interrupted_stream_keeps_what_it_showed_not_final() {
    let r = run("interrupt_stream");
    assert_eq!(shape(&r.events), ["session", "text"]);
    let (text, is_final) = &texts(&r.events)[0];
    assert!(!is_final);
    assert!(text.starts_with("word word"), "{text}");
    assert_eq!(*text, r.joined(DeltaKind::Text), "what the deltas showed, once");
    assert!(r.blocks.is_empty());
}

#[test]
fn a_slow_answer_streams_well_before_its_block_ends() {
    let lines = lines("slow");
    let t = |pred: &dyn Fn(&Value) -> bool| lines.iter().find(|l| pred(&l["msg"])).unwrap()["t"].as_f64().unwrap();
    let first = t(&|m| m["method"] == "item/agentMessage/delta");
    let done = t(&|m| m["method"] == "item/completed" && m["params"]["item"]["type"] == "agentMessage");
    assert!(done - first > 2.0, "first piece {first} s, block closed {done} s");
    let r = run("slow");
    assert_eq!(shape(&r.events), ["session", "reasoning", "text!", "usage"]);
    let pieces = r.deltas.iter().filter(|d| d.1 == DeltaKind::Text).count();
    assert!(pieces > 30, "{pieces} pieces");
    assert_eq!(r.joined(DeltaKind::Text), r.map.final_text());
    assert_eq!(texts(&r.events).len(), 1, "the text is stored once");
}

#[test]
fn a_401_and_a_refused_connection_are_typed_errors() {
    let r = run("e401");
    assert_eq!(shape(&r.events), ["session", "error:Auth"]);
    let message = r.map.error_message().unwrap();
    assert!(
        message.starts_with("unexpected status 401 Unauthorized: Incorrect API key"),
        "{message}"
    );
    assert_eq!(
        errors(&r.events).len(),
        1,
        "the failed turn repeats the error: one event"
    );
    let r = run("connrefused");
    assert_eq!(
        errors(&r.events),
        [(
            ErrorKind::Network,
            "Connection failed: error sending request".to_string()
        )]
    );
    assert_eq!(r.map.final_text(), "");
}

#[test]
fn a_resumed_thread_is_the_same_session() {
    let lines = lines("resume");
    let killed = lines.iter().position(|l| l["dir"] == "killed").unwrap();
    let mut first = Run::default();
    first.feed(&lines[..killed], 0);
    first.finish();
    assert_eq!(shape(&first.events), ["session", "text"], "killed while it asked");
    let mut second = Run::default();
    second.feed(&lines, killed);
    second.finish();
    assert_eq!(second.map.session_id(), first.map.session_id());
    assert_eq!(shape(&second.events), ["session", "text!", "usage"]);
    assert!(second.map.final_text().contains("Resumed plan"));
    // Its usage is its own request's.
    assert_eq!(usages(&second.events), [(100, 20, 0, 0, 0.0)]);
}

#[test]
fn a_resumed_run_counts_only_its_own_requests() {
    let lines = lines("resume_usage");
    let restarted = lines.iter().position(|l| l["dir"] == "restarted").unwrap();
    let mut first = Run::default();
    first.feed(&lines[..restarted], 0);
    first.finish();
    assert_eq!(usages(&first.events), [(1000, 50, 0, 0, 0.0)]);
    let mut second = Run::default();
    second.feed(&lines, restarted);
    second.finish();
    // The resumed app-server repeated the first run's usage before the turn: not counted.
    assert_eq!(usages(&second.events), [(1500, 70, 0, 0, 0.0)]);
    assert!(second.map.final_text().contains("Second plan"));
}

#[test]
fn a_declined_command_is_an_error_result() {
    let r = run("approval");
    assert_eq!(
        shape(&r.events),
        ["session", "toolCall", "toolResult=err", "text!", "usage"]
    );
    assert!(matches!(&r.events[2].body, EventBody::ToolResult { output, .. } if output == "declined"));
}

fn note(r: &mut Run, method: &str, params: Value) {
    let mut out = Output::default();
    r.map.notification(method, &params, &mut out);
    r.take(out);
}

fn item(r: &mut Run, phase: &str, thread: &str, item: Value) {
    note(r, &format!("item/{phase}"), json!({ "threadId": thread, "item": item }));
}

fn started_run() -> Run {
    let mut r = Run::default();
    let mut out = Output::default();
    r.map.thread("T", &mut out);
    r.take(out);
    note(
        &mut r,
        "turn/started",
        json!({ "threadId": "T", "turn": { "id": "U" } }),
    );
    r
}

#[test]
fn a_retried_stream_keeps_its_partial_message_before_the_next_one() {
    let mut r = started_run();
    item(
        &mut r,
        "started",
        "T",
        json!({ "type": "agentMessage", "id": "m1", "text": "" }),
    );
    note(
        &mut r,
        "item/agentMessage/delta",
        json!({ "threadId": "T", "itemId": "m1", "delta": "partial " }),
    );
    note(
        &mut r,
        "error",
        json!({ "threadId": "T", "willRetry": true, "error": { "message": "Reconnecting... 1/2", "codexErrorInfo": null } }),
    );
    item(
        &mut r,
        "started",
        "T",
        json!({ "type": "agentMessage", "id": "m2", "text": "" }),
    );
    note(
        &mut r,
        "item/agentMessage/delta",
        json!({ "threadId": "T", "itemId": "m2", "delta": "whole" }),
    );
    item(
        &mut r,
        "completed",
        "T",
        json!({ "type": "agentMessage", "id": "m2", "text": "whole" }),
    );
    note(
        &mut r,
        "turn/completed",
        json!({ "threadId": "T", "turn": { "status": "completed" } }),
    );
    r.finish();
    assert_eq!(shape(&r.events), ["session", "raw", "text", "text!"]);
    assert_eq!(
        texts(&r.events),
        [("partial ".to_string(), false), ("whole".to_string(), true)]
    );
    assert_eq!(r.map.error_message(), None, "a retry notice is no error");
}

#[test]
fn reasoning_parts_are_joined_by_a_blank_line_in_deltas_and_text() {
    let mut r = started_run();
    item(
        &mut r,
        "started",
        "T",
        json!({ "type": "reasoning", "id": "r1", "summary": [] }),
    );
    for (i, piece) in ["One.", "Two."].iter().enumerate() {
        note(
            &mut r,
            "item/reasoning/summaryPartAdded",
            json!({ "threadId": "T", "itemId": "r1", "summaryIndex": i }),
        );
        note(
            &mut r,
            "item/reasoning/summaryTextDelta",
            json!({ "threadId": "T", "itemId": "r1", "delta": piece, "summaryIndex": i }),
        );
    }
    item(
        &mut r,
        "completed",
        "T",
        json!({ "type": "reasoning", "id": "r1", "summary": ["One.", "Two."], "content": [] }),
    );
    r.finish();
    assert_eq!(
        r.events[1].body,
        EventBody::Reasoning {
            text: "One.\n\nTwo.".into()
        }
    );
    assert_eq!(r.closed, [("One.\n\nTwo.".to_string(), "One.\n\nTwo.".to_string())]);
}

#[test]
fn a_plan_update_is_an_update_plan_call_and_the_unknown_is_raw() {
    let mut r = started_run();
    note(
        &mut r,
        "turn/plan/updated",
        json!({ "threadId": "T", "explanation": null, "plan": [
            { "step": "Read main.rs", "status": "completed" }, { "step": "Write the plan", "status": "inProgress" }] }),
    );
    note(
        &mut r,
        "thread/status/changed",
        json!({ "threadId": "T", "status": { "type": "idle" } }),
    );
    note(&mut r, "something/new", json!({ "x": 1 }));
    note(&mut r, "warning", json!({ "message": "model rerouted" }));
    r.finish();
    assert_eq!(shape(&r.events), ["session", "toolCall", "toolResult=ok", "raw", "raw"]);
    assert!(
        matches!(&r.events[1].body, EventBody::ToolCall { name, input, .. } if name == "update_plan" && input == "2 steps")
    );
    assert!(matches!(&r.events[2].body,
        EventBody::ToolResult { output, .. } if output == "[x] Read main.rs\n[~] Write the plan"));
    assert!(matches!(&r.events[3].body, EventBody::Raw { line } if line.contains("something/new")));
}

#[test]
fn usage_reported_twice_for_one_request_counts_once() {
    let mut r = started_run();
    let usage = |total: u64| {
        json!({ "threadId": "T", "turnId": "U", "tokenUsage": {
            "total": { "totalTokens": total }, "last": { "inputTokens": 10, "cachedInputTokens": 4, "cacheWriteInputTokens": 1, "outputTokens": 2 } } })
    };
    note(&mut r, "thread/tokenUsage/updated", usage(12));
    note(&mut r, "thread/tokenUsage/updated", usage(12));
    note(&mut r, "thread/tokenUsage/updated", usage(24));
    note(
        &mut r,
        "turn/completed",
        json!({ "threadId": "T", "turn": { "status": "completed" } }),
    );
    assert_eq!(usages(&r.events), [(12, 4, 8, 2, 0.0)]);
    assert_eq!(
        r.map.explain_missing_answer().as_deref(),
        Some("Codex ended its turn without a final message (its last step was a tool call).")
    );
}

#[test]
fn another_threads_items_are_its_subagents() {
    let mut r = started_run();
    let spawn = |status: &str, states: Value| {
        json!({ "type": "collabAgentToolCall", "id": "c1", "tool": "spawnAgent", "status": status, "senderThreadId": "T",
                "receiverThreadIds": ["S"], "prompt": "Find the greeting\nand report", "agentsStates": states })
    };
    item(&mut r, "started", "T", spawn("inProgress", json!({})));
    item(
        &mut r,
        "completed",
        "T",
        spawn("completed", json!({ "S": { "status": "running", "message": null } })),
    );
    item(
        &mut r,
        "started",
        "S",
        json!({ "type": "agentMessage", "id": "s1", "text": "" }),
    );
    note(
        &mut r,
        "item/agentMessage/delta",
        json!({ "threadId": "S", "itemId": "s1", "delta": "src/main.rs" }),
    );
    item(
        &mut r,
        "completed",
        "S",
        json!({ "type": "agentMessage", "id": "s1", "text": "src/main.rs" }),
    );
    note(
        &mut r,
        "thread/tokenUsage/updated",
        json!({ "threadId": "S", "turnId": "V", "tokenUsage": { "total": { "totalTokens": 5 }, "last": { "inputTokens": 5 } } }),
    );
    note(
        &mut r,
        "turn/completed",
        json!({ "threadId": "S", "turn": { "status": "completed" } }),
    );
    assert!(!r.map.turn_ended(), "a subagent's turn is not the pass's");
    note(
        &mut r,
        "turn/completed",
        json!({ "threadId": "T", "turn": { "status": "completed" } }),
    );
    r.finish();
    assert_eq!(
        shape(&r.events),
        [
            "session",
            "toolCall",
            "subagent:start@S",
            "toolResult=ok",
            "text@S",
            "subagent:end@S",
            "usage"
        ]
    );
    assert_eq!(usages(&r.events), [(5, 0, 0, 0, 0.0)], "the subagent's requests count");
    assert!(
        matches!(&r.events[2].body, EventBody::Subagent { phase: SubagentPhase::Start, label, .. } if label == "Find the greeting")
    );
    assert_eq!(r.deltas[0].0.as_deref(), Some("S"));
    assert_eq!(r.map.all_text(), "", "a subagent's text is not the main answer");
}

#[test]
fn a_subagent_that_works_on_after_the_final_message_leaves_it_final() {
    let mut r = started_run();
    item(
        &mut r,
        "started",
        "T",
        json!({ "type": "agentMessage", "id": "m1", "text": "" }),
    );
    item(
        &mut r,
        "completed",
        "T",
        json!({ "type": "agentMessage", "id": "m1", "text": "The plan." }),
    );
    item(
        &mut r,
        "completed",
        "S",
        json!({ "type": "agentMessage", "id": "s1", "text": "late note" }),
    );
    note(
        &mut r,
        "turn/completed",
        json!({ "threadId": "S", "turn": { "status": "completed" } }),
    );
    note(
        &mut r,
        "turn/completed",
        json!({ "threadId": "T", "turn": { "status": "completed" } }),
    );
    r.finish();
    // In time order, and the main message is still the final answer.
    assert_eq!(
        shape(&r.events),
        ["session", "text!", "subagent:start@S", "text@S", "subagent:end@S"]
    );
    assert_eq!(r.map.final_text(), "The plan.");
}

#[test]
fn shell_unwrapping() {
    assert_eq!(unwrap_shell("/bin/bash -lc 'cat a && ls'"), "cat a && ls");
    assert_eq!(unwrap_shell(r#"/bin/bash -lc 'echo '\''hi'\'''"#), "echo 'hi'");
    assert_eq!(unwrap_shell("/bin/bash -lc ls"), "ls");
    assert_eq!(unwrap_shell("rg -n foo"), "rg -n foo");
}

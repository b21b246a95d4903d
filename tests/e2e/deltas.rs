//! Live deltas (`planwire/delta`): Claude's partial messages as the `script` planner replays
//! them. The first piece arrives before the block's stored event, deltas join to exactly the
//! stored text, nothing is stored twice, and a client attaching mid-block gets the open
//! block from `getTranscript`.

use serde_json::{json, Value};

use crate::harness::*;

const SESSION: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

fn line(v: Value) -> Value {
    json!({ "out": v.to_string(), "delayMs": 20 })
}

fn text_delta(text: &str) -> Value {
    line(
        json!({"type": "stream_event", "session_id": SESSION, "parent_tool_use_id": null,
        "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}}),
    )
}

/// A Claude stream whose text streams in `before` pieces, waits for `gate`, then streams
/// `after` and ends with the whole text and a successful result.
fn streaming_script(w: &World, before: &[&str], gate: &str, after: &[&str]) -> (String, String) {
    let whole: String = before.iter().chain(after).copied().collect();
    let mut lines = vec![line(json!({"type": "system", "subtype": "init", "session_id": SESSION,
        "cwd": w.root(), "tools": ["Read"], "permissionMode": "plan"}))];
    lines.extend(before.iter().map(|t| text_delta(t)));
    lines.push(json!({ "awaitFile": gate }));
    lines.extend(after.iter().map(|t| text_delta(t)));
    lines.push(line(
        json!({"type": "assistant", "session_id": SESSION, "parent_tool_use_id": null,
        "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "text", "text": whole}]}}),
    ));
    lines.push(line(
        json!({"type": "result", "subtype": "success", "is_error": false, "session_id": SESSION,
        "result": whole, "total_cost_usd": 0.0, "usage": {"input_tokens": 1, "output_tokens": 1}}),
    ));
    lines.push(json!({ "exit": 0 }));
    (w.script("stream.jsonl", &lines), whole)
}

fn deltas(s: &Server, run: i64) -> Vec<Value> {
    s.seen
        .iter()
        .filter(|m| m["method"] == "planwire/delta" && m["params"]["runId"] == run)
        .map(|m| m["params"].clone())
        .collect()
}

fn joined(deltas: &[Value]) -> String {
    deltas.iter().map(|d| d["text"].as_str().unwrap()).collect()
}

#[test]
fn text_streams_live_and_is_stored_once() {
    let w = World::new();
    let gate = w.path("gate").display().to_string();
    let plan = r#" <planwire-plan>{"title": "Greet", "description": "Change it.", "acceptanceCriteria": ["it greets"], "openQuestions": [], "dependencies": []}</planwire-plan>"#;
    let (script, whole) = streaming_script(&w, &["Reading ", "the ", "code."], &gate, &[" Done.", plan]);
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let started = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "Greet", "description": "", "tool": "script", "model": script }),
    );
    let (ticket, run) = (
        started["ticketId"].as_i64().unwrap(),
        started["runId"].as_i64().unwrap(),
    );

    // Mid-block: the pieces so far, and no stored text yet.
    eventually_deltas(&mut s, run, "Reading the code.");
    let first = &deltas(&s, run)[0];
    assert_eq!(first["offset"], 0, "{first}");
    assert_eq!(first["kind"], "text");
    assert!(first.get("agentRunId").is_none(), "the main agent's block: {first}");
    let mut offset = 0;
    for d in deltas(&s, run) {
        assert_eq!(d["offset"], offset, "offsets count the characters sent before: {d}");
        offset += d["text"].as_str().unwrap().chars().count() as u64;
    }
    assert!(
        !s.notified_events(run).iter().any(|e| e["kind"] == "text"),
        "the block is not stored before it closes"
    );
    // A client attaching now gets the open block, exactly as far as it was sent.
    let page = s.ok("planwire/getTranscript", json!({ "runId": run }));
    assert_eq!(page["done"], false);
    assert_eq!(
        page["openBlocks"],
        json!([{ "kind": "text", "text": "Reading the code." }]),
        "{page}"
    );

    std::fs::write(&gate, "").unwrap();
    s.wait_ticket(ticket, &["planned", "failed"]);
    assert_eq!(joined(&deltas(&s, run)), whole, "the deltas join to exactly the text");
    let texts: Vec<Value> = s
        .notified_events(run)
        .into_iter()
        .filter(|e| e["kind"] == "text")
        .collect();
    assert_eq!(texts.len(), 1, "stored once: {texts:?}");
    assert_eq!(texts[0]["text"], whole);
    // Every delta came before the stored event that closed the block.
    let position = |pred: &dyn Fn(&Value) -> bool| s.seen.iter().position(pred).unwrap();
    let last_delta = s.seen.iter().rposition(|m| m["method"] == "planwire/delta").unwrap();
    let stored = position(&|m: &Value| {
        m["method"] == "planwire/transcript"
            && m["params"]["events"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["kind"] == "text"))
    });
    assert!(last_delta < stored);
    // Nothing of the deltas is on disk: the transcript holds the text once.
    assert_eq!(w.stored_count(run, "text"), 1);
    let done = s.ok("planwire/getTranscript", json!({ "runId": run }));
    assert!(done.get("openBlocks").is_none(), "no open block after the run: {done}");
}

/// Waits until the run's deltas join to `text` (each call pumps what arrived into `seen`).
fn eventually_deltas(s: &mut Server, run: i64, text: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    while joined(&deltas(s, run)) != text {
        assert!(
            std::time::Instant::now() < deadline,
            "deltas so far: {:?}",
            joined(&deltas(s, run))
        );
        s.ok("planwire/status", json!({}));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

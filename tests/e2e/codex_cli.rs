//! A fake `codex` on PATH that breaks the app-server conversation: it cannot start, or it
//! never answers. The run ends clearly, and nothing of it is left running.

use serde_json::{json, Value};

use crate::harness::*;

/// planwire reads the version once (detection): that is not a pass.
const VERSION: &str = "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'codex-cli 0.171.0'; exit 0; fi\n";

fn started(w: &World, options: Value) -> Server {
    let mut s = w.start();
    let mut options = options;
    options["dbPath"] = json!(w.db());
    options["stopGraceMs"] = json!(500);
    s.initialize(options);
    s
}

/// Plans a Codex ticket and waits for its run to end; returns (ticket view, run).
fn plan_until_ended(s: &mut Server, w: &World) -> (Value, i64) {
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "D", "tool": "codex" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_ticket(ticket, &["failed", "planned"]);
    (s.ok("planwire/getTicket", json!({ "ticketId": ticket })), run)
}

#[test]
fn a_codex_that_cannot_start_fails_with_its_stderr() {
    let w = World::new();
    // What Codex does with a broken config.toml: a message on stderr, exit 1, nothing on stdout.
    w.fake_cli(
        "codex",
        &format!(
            "{VERSION}echo 'Error loading config.toml: invalid type: boolean `true`, expected a map' >&2\nexit 1\n"
        ),
    );
    let mut s = started(&w, json!({}));
    let (got, run) = plan_until_ended(&mut s, &w);
    let r = &got["runs"][0];
    assert_eq!(r["status"], "failed", "{got}");
    assert_eq!(r["failure"]["code"], "exit_code", "{r}");
    assert!(
        r["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("Error loading config.toml"),
        "{r}"
    );
    let (pgid, start) = run_group(&w, run);
    assert!(!group_alive(pgid, start));
}

#[test]
fn a_codex_that_never_answers_is_stopped_by_the_idle_limit() {
    let w = World::new();
    // It reads planwire's `initialize` and says nothing, with a child of its own.
    w.fake_cli("codex", &format!("{VERSION}sleep 300 &\ncat > /dev/null\n"));
    let mut s = started(&w, json!({ "idleTimeoutMs": 1000 }));
    let (got, run) = plan_until_ended(&mut s, &w);
    let r = &got["runs"][0];
    assert_eq!(
        (r["status"].clone(), r["failure"]["code"].clone()),
        (json!("failed"), json!("idle_timeout")),
        "{got}"
    );
    let (pgid, start) = run_group(&w, run);
    assert!(!group_alive(pgid, start), "the grandchild is gone too");
}

/// Where the replaying `codex` writes its stderr: inside planwire's OS sandbox a codex may
/// write only in its own state (`~/.codex`) and its scratch directory.
fn replay_stderr(w: &World) -> std::path::PathBuf {
    w.path("home/.codex/replay.stderr")
}

/// A `codex` that plays a recorded app-server conversation back (`tests/fixtures/codex/replay.py`).
fn replaying(w: &World, fixture: &str, extra: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/codex");
    let dir = dir.canonicalize().unwrap().display().to_string();
    w.fake_cli(
        "codex",
        &format!(
            "{VERSION}exec python3 {dir}/replay.py {dir}/{fixture}.jsonl {extra} 2>>{}\n",
            replay_stderr(w).display()
        ),
    );
}

#[test]
fn a_recorded_codex_conversation_plans_through_app_server() {
    let w = World::new();
    replaying(&w, "plain", "");
    let mut s = started(&w, json!({}));
    let (got, run) = plan_until_ended(&mut s, &w);
    assert_eq!(got["ticket"]["status"], "planned", "{got}");
    assert_eq!(got["ticket"]["plan"]["title"], "Codex plan");
    let r = &got["runs"][0];
    assert_eq!(
        (r["status"].clone(), r["exitCode"].clone()),
        (json!("completed"), json!(0)),
        "{r}"
    );
    assert_eq!(r["providerSessionId"], "01a231df-784e-7bc2-94c8-5a5816e5db59");
    let events = s.ok("planwire/getTranscript", json!({ "runId": run }))["events"].clone();
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["session", "reasoning", "text", "usage"]);
    assert_eq!(events[3]["inputTokens"], 1034);
    // The first piece went out at once; the stored text then closed the block (the pieces
    // still held are dropped: the event has the whole text).
    let deltas: String = s
        .seen
        .iter()
        .filter(|m| m["method"] == "planwire/delta" && m["params"]["kind"] == "text")
        .map(|m| m["params"]["text"].as_str().unwrap())
        .collect();
    assert!(
        !deltas.is_empty() && events[2]["text"].as_str().unwrap().starts_with(&deltas),
        "{deltas:?}"
    );
    assert_eq!(std::fs::read_to_string(replay_stderr(&w)).unwrap_or_default(), "");
}

#[test]
fn a_recorded_codex_question_is_answered_in_the_same_run() {
    let w = World::new();
    replaying(&w, "ask", "");
    let mut s = started(&w, json!({}));
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "D", "tool": "codex" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    let q = s.wait_for("the question", |m| m["method"] == "planwire/question")["params"]["question"].clone();
    assert_eq!(q["items"][0]["question"], "Which greeting should the program print?");
    // The recorded answer: the replay checks that planwire sends exactly it.
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "answers": [{ "selected": ["Hi there"], "other": "with an exclamation mark" }] }),
    );
    assert_eq!(r["runId"], run);
    s.wait_planned(ticket);
    assert_eq!(std::fs::read_to_string(replay_stderr(&w)).unwrap_or_default(), "");
}

#[test]
fn a_codex_that_does_not_exit_after_its_turn_still_plans_and_is_stopped() {
    let w = World::new();
    replaying(&w, "plain", "--linger");
    let mut s = started(&w, json!({}));
    let (got, run) = plan_until_ended(&mut s, &w);
    assert_eq!(
        got["ticket"]["status"], "planned",
        "the completed turn is the answer: {got}"
    );
    let (pgid, start) = run_group(&w, run);
    assert!(!group_alive(pgid, start), "the lingering app-server was stopped");
}

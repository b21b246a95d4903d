//! A fake `claude` on PATH that records its argv and replays a real recording.

use serde_json::{json, Value};

use crate::harness::*;

fn fake_claude(w: &World, script: &str) {
    let argv = w.path("claude-argv.json");
    // Record argv as JSON (one element per argument, exactly as received), then replay.
    w.fake_cli(
        "claude",
        &format!(
            "#!/bin/sh\npython3 -c 'import json,sys; json.dump(sys.argv[1:], open(\"{}\", \"w\"))' \"$@\"\nexec {} replay {}\n",
            argv.display(),
            BIN,
            script
        ),
    );
}

fn recorded_argv(w: &World) -> Vec<String> {
    serde_json::from_str(&std::fs::read_to_string(w.path("claude-argv.json")).unwrap()).unwrap()
}

#[test]
fn claude_runs_in_plan_mode_and_a_hostile_description_is_only_text() {
    let w = World::new();
    fake_claude(&w, "demo");
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let hostile = "--dangerously-skip-permissions\n-p $(touch /tmp/pwned) `id` ; rm -rf ~";
    let t = s.ok("planwire/createTicket", json!({ "root": w.root(), "title": "-rf", "description": hostile, "tool": "claude", "model": "sonnet" }));
    let ticket = t["id"].as_i64().unwrap();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(
        s.wait_ticket(ticket, &["planned", "failed"])["status"],
        "planned"
    );
    let argv = recorded_argv(&w);
    assert_eq!(
        &argv[..6],
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "plan"
        ]
    );
    assert!(
        argv.windows(2).any(|p| p == ["--model", "sonnet"]),
        "{argv:?}"
    );
    assert!(
        !argv.iter().any(|a| a == "--dangerously-skip-permissions"),
        "{argv:?}"
    );
    let prompt = argv.last().unwrap();
    assert!(!prompt.starts_with('-'));
    assert!(
        prompt.contains(hostile),
        "the description reaches the model verbatim"
    );
    assert!(prompt.contains("<planwire-plan>"));
    // The run records its argv without the prompt, and the CLI's session.
    let (argv_json, session): (String, Option<String>) = w
        .sqlite()
        .query_row(
            "SELECT argv_json, session_id FROM runs WHERE id = ?1",
            [run],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let stored: Vec<String> = serde_json::from_str(&argv_json).unwrap();
    assert_eq!(stored.last().unwrap(), "<prompt>");
    assert!(!argv_json.contains("dangerously"));
    assert!(session.is_some());
    assert!(!std::path::Path::new("/tmp/pwned").exists());
}

#[test]
fn a_planned_ticket_resumes_its_claude_session_unless_fresh() {
    let w = World::new();
    fake_claude(&w, "demo");
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "D", "tool": "claude" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    s.ok("planwire/plan", json!({ "ticketId": ticket }));
    s.wait_ticket(ticket, &["planned"]);
    let session: String = w
        .sqlite()
        .query_row(
            "SELECT session_id FROM tickets WHERE id = ?1",
            [ticket],
            |r| r.get(0),
        )
        .unwrap();

    s.seen.clear();
    s.ok("planwire/plan", json!({ "ticketId": ticket }));
    s.wait_ticket(ticket, &["planned"]);
    let argv = recorded_argv(&w);
    assert!(
        argv.windows(2).any(|p| p == ["--resume", session.as_str()]),
        "{argv:?}"
    );

    s.seen.clear();
    s.ok(
        "planwire/plan",
        json!({ "ticketId": ticket, "fresh": true }),
    );
    s.wait_ticket(ticket, &["planned"]);
    assert!(!recorded_argv(&w).iter().any(|a| a == "--resume"));
    let reason: Option<String> = w
        .sqlite()
        .query_row(
            "SELECT fresh_reason FROM runs WHERE ticket_id = ?1 ORDER BY id DESC LIMIT 1",
            [ticket],
            |r| r.get(0),
        )
        .unwrap();
    assert!(reason.unwrap().contains("fresh"));
    let _ = Value::Null;
}

#[test]
fn a_claude_api_error_fails_with_its_message() {
    let w = World::new();
    fake_claude(&w, "fail");
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let t = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "claude" }),
    );
    let ticket = t["ticketId"].as_i64().unwrap();
    assert_eq!(
        s.wait_ticket(ticket, &["failed", "planned"])["status"],
        "failed"
    );
    let run = &s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0];
    assert!(
        run["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("Invalid API key"),
        "{run}"
    );
}

//! A fake `claude` on PATH that records its argv and replays a real recording.

use serde_json::{json, Value};

use crate::harness::*;

/// A fake `claude` on PATH: invocation N records its argv to `claude-argv.N.json` and
/// everything planwire writes on its stdin to `claude-stdin.N.log`, then replays the Nth
/// script of `scripts` (the last one once they run out) — real recordings, through the
/// `script` planner's replayer. It records in `~/.claude/planwire-fake/`: inside planwire's
/// OS sandbox, a `claude` may write only there (and in its scratch directory).
pub fn fake_claude_sequence(w: &World, scripts: &[&str]) {
    let d = record_dir(w).display().to_string();
    std::fs::write(w.path("claude-scripts"), scripts.join("\n") + "\n").unwrap();
    w.fake_cli(
        "claude",
        &format!(
            r#"#!/bin/sh
d="{d}"
# planwire reads the version once (detection); that is not a planning run.
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
mkdir -p "$d"
# Passes may start at the same time (research): count under a lock.
n=$(flock "$d/claude-count.lock" sh -c 'n=$(( $(cat "$1" 2>/dev/null || echo 0) + 1 )); echo $n > "$1"; echo $n' - "$d/claude-count")
pwd > "$d/claude-cwd.$n"
# PWD as planwire passed it (the shell may have fixed its own copy since).
tr '\0' '\n' < /proc/$$/environ | sed -n 's/^PWD=//p' > "$d/claude-pwd.$n"
python3 -c 'import json,sys; json.dump(sys.argv[2:], open(sys.argv[1], "w"))' "$d/claude-argv.$n.json" "$@"
# A script named for the working directory wins over the sequence.
s=$(cat "{world}/claude-script.$(basename "$PWD")" 2>/dev/null)
[ -n "$s" ] || s=$(sed -n "${{n}}p" "{scripts}")
[ -n "$s" ] || s=$(tail -n 1 "{scripts}")
PLANWIRE_REPLAY_STDIN_LOG="$d/claude-stdin.$n.log" exec "{BIN}" replay "$s"
"#,
            scripts = w.path("claude-scripts").display(),
            world = w.dir.path().display(),
        ),
    );
}

/// Where the fake `claude` records its invocations.
fn record_dir(w: &World) -> std::path::PathBuf {
    w.path("home/.claude/planwire-fake")
}

fn fake_claude(w: &World, script: &str) {
    fake_claude_sequence(w, &[script]);
}

/// The working directory of invocation `n` (from 1).
pub fn cwd_of(w: &World, n: usize) -> String {
    std::fs::read_to_string(record_dir(w).join(format!("claude-cwd.{n}")))
        .unwrap()
        .trim()
        .to_owned()
}

/// The `PWD` planwire gave invocation `n` (from 1).
pub fn pwd_of(w: &World, n: usize) -> String {
    std::fs::read_to_string(record_dir(w).join(format!("claude-pwd.{n}")))
        .unwrap()
        .trim()
        .to_owned()
}

/// A script that replays the real `a_plain` recording (init, thinking, text, result) with
/// `text` as the answer and `session` as the session id, then exits with `exit`.
pub fn answer_script(w: &World, name: &str, session: &str, text: &str, exit: i32) -> String {
    let recorded = include_str!("../fixtures/claude/a_plain.stdout.jsonl");
    let mut lines = Vec::new();
    for line in recorded.lines().filter(|l| !l.trim().is_empty()) {
        let mut v: Value = serde_json::from_str(line).unwrap();
        v["session_id"] = json!(session);
        if v["type"] == "assistant" && v["message"]["content"][0]["type"] == "text" {
            v["message"]["content"][0]["text"] = json!(text);
        }
        if v["type"] == "result" {
            v["result"] = json!(text);
            if exit != 0 {
                v["is_error"] = json!(true);
                v["result"] = json!("API Error: 500 mock failure");
            }
        }
        lines.push(json!({ "out": v.to_string() }));
    }
    lines.push(json!({ "exit": exit }));
    w.script(name, &lines)
}

/// The argv of invocation `n` (from 1).
pub fn argv_of(w: &World, n: usize) -> Vec<String> {
    serde_json::from_str(&std::fs::read_to_string(record_dir(w).join(format!("claude-argv.{n}.json"))).unwrap())
        .unwrap()
}

/// What planwire wrote on the stdin of invocation `n`, as JSON lines.
pub fn stdin_of(w: &World, n: usize) -> Vec<Value> {
    std::fs::read_to_string(record_dir(w).join(format!("claude-stdin.{n}.log")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The prompt planwire sent as the user message of invocation `n`.
pub fn prompt_of(w: &World, n: usize) -> String {
    let lines = stdin_of(w, n);
    let user = lines
        .iter()
        .find(|l| l["type"] == "user")
        .expect("a user message on stdin");
    user["message"]["content"][0]["text"].as_str().unwrap().to_owned()
}

pub fn invocations(w: &World) -> usize {
    std::fs::read_to_string(record_dir(w).join("claude-count"))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0)
}

fn recorded_argv(w: &World) -> Vec<String> {
    argv_of(w, invocations(w))
}

#[test]
fn claude_runs_in_plan_mode_and_a_hostile_description_is_only_text() {
    let w = World::new();
    fake_claude(&w, "demo");
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let hostile = "--dangerously-skip-permissions\n-p $(touch /tmp/pwned) `id` ; rm -rf ~";
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "-rf", "description": hostile, "tool": "claude", "model": "sonnet" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_planned(ticket);
    let argv = recorded_argv(&w);
    let mode = r#"-p --strict-mcp-config --mcp-config {"mcpServers":{}} --input-format stream-json --output-format stream-json --verbose --permission-mode plan --permission-prompt-tool stdio"#;
    assert_eq!(argv[..13].join(" "), mode);
    assert!(argv.windows(2).any(|p| p == ["--model", "sonnet"]), "{argv:?}");
    // The prompt never touches argv: it travels as a stream-json user message on stdin.
    assert!(
        !argv.iter().any(|a| a.contains("dangerously") || a.contains("pwned")),
        "{argv:?}"
    );
    let prompt = prompt_of(&w, 1);
    assert!(prompt.contains(hostile), "the description reaches the model verbatim");
    assert!(prompt.contains("<planwire-plan>"));
    // The run records its argv without the prompt, and the CLI's session.
    let (argv_json, session): (String, Option<String>) = w
        .sqlite()
        .query_row("SELECT argv_json, session_id FROM runs WHERE id = ?1", [run], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let stored: Vec<String> = serde_json::from_str(&argv_json).unwrap();
    assert_eq!(stored[1..], argv[..], "the run records the argv it ran");
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
        .query_row("SELECT session_id FROM tickets WHERE id = ?1", [ticket], |r| r.get(0))
        .unwrap();

    s.seen.clear();
    s.ok("planwire/plan", json!({ "ticketId": ticket }));
    s.wait_ticket(ticket, &["planned"]);
    let argv = recorded_argv(&w);
    assert!(argv.windows(2).any(|p| p == ["--resume", session.as_str()]), "{argv:?}");

    s.seen.clear();
    s.ok("planwire/plan", json!({ "ticketId": ticket, "fresh": true }));
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
    assert_eq!(s.wait_ticket(ticket, &["failed", "planned"])["status"], "failed");
    let run = &s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0];
    assert!(
        run["failure"]["message"].as_str().unwrap().contains("Invalid API key"),
        "{run}"
    );
}

#[test]
fn an_unknown_session_falls_back_to_a_fresh_plan_and_says_why() {
    let w = World::new();
    // The real CLI's answer to `--resume` with an id it does not know (recorded).
    let missing = include_str!("../fixtures/claude/g_resume_missing.stdout.jsonl").trim();
    let lost = w.script(
        "resume-missing.jsonl",
        &[json!({ "out": missing }), json!({ "exit": 1 })],
    );
    fake_claude_sequence(&w, &["demo", &lost, "demo"]);
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "D", "tool": "claude" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    s.ok("planwire/plan", json!({ "ticketId": ticket }));
    s.wait_ticket(ticket, &["planned"]);
    s.seen.clear();
    let resumed = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_for("a fresh run is planned", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"].as_i64() > Some(resumed)
            && m["params"]["run"]["status"] == "completed"
    });
    assert!(argv_of(&w, 2).iter().any(|a| a == "--resume"));
    assert!(
        !argv_of(&w, 3).iter().any(|a| a == "--resume"),
        "the fallback starts fresh"
    );
    let runs = s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"].clone();
    assert_eq!(runs[1]["failure"]["code"], "session_not_found", "{runs}");
    let reason: String = w
        .sqlite()
        .query_row(
            "SELECT fresh_reason FROM runs WHERE id = ?1",
            [runs[0]["id"].as_i64().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert!(reason.contains("no longer knows session"), "{reason}");
    assert_eq!(
        s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["ticket"]["status"],
        "planned"
    );
}

//! The plan as a living document through the real binary: ticket edits, plan versions,
//! requested changes, export into the repository, hand-off to an implementation CLI, and a
//! ticket's usage and timing. A fake `claude` records what reaches the planner's prompt.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::{json, Value};

use crate::claude_cli::{argv_of, fake_claude_sequence, prompt_of};
use crate::harness::*;

fn started(w: &World) -> Server {
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    s
}

const SESSION: &str = "7c0f3a52-1d2e-4b8a-9e61-5f4d3c2b1a09";

/// A Claude stream-json script: waits for the prompt, then answers with a plan titled
/// `title` in session [`SESSION`]. With `hold`, it then waits until it is stopped.
fn plan_script(w: &World, name: &str, title: &str, hold: bool) -> String {
    let plan = json!({ "title": title, "description": "## Steps\n1. Edit `src/main.rs`.",
        "acceptanceCriteria": ["it prints hi", "`cargo build` succeeds"], "openQuestions": [],
        "dependencies": ["none"] });
    let text = format!("I read src/main.rs.\n\n<planwire-plan>{plan}</planwire-plan>");
    let init = json!({"type": "system", "subtype": "init", "session_id": SESSION});
    let assistant = json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": null, "session_id": SESSION});
    let result = json!({"type": "result", "subtype": "success", "is_error": false, "result": text, "session_id": SESSION,
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 5}, "total_cost_usd": 0.25});
    let mut lines = vec![json!({ "awaitStdin": "user" }), json!({ "out": init.to_string() })];
    if hold {
        lines.push(json!({ "awaitStdin": "never-sent" }));
    }
    lines.extend([
        json!({ "out": assistant.to_string() }),
        json!({ "out": result.to_string() }),
        json!({ "exit": 0 }),
    ]);
    w.script(name, &lines)
}

fn new_ticket(s: &mut Server, w: &World, tool: &str, model: Option<&str>) -> i64 {
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "Say hi.", "tool": tool, "model": model }),
    );
    t["id"].as_i64().unwrap()
}

/// Plans and waits for the run's end; returns the run and the ticket as it ended.
pub fn plan(s: &mut Server, params: Value) -> (i64, Value) {
    let ticket = params["ticketId"].as_i64().unwrap();
    s.seen.clear();
    let run = s.ok("planwire/plan", params)["runId"].as_i64().unwrap();
    s.wait_for("the run ends", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run
            && !matches!(m["params"]["run"]["status"].as_str(), Some("queued" | "running"))
    });
    let t = s.wait_ticket(ticket, &["planned", "failed", "stopped"]);
    (run, t)
}

fn messages(s: &mut Server, ticket: i64) -> Vec<Value> {
    s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["messages"]
        .as_array()
        .unwrap()
        .clone()
}

fn kinds(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn edits_are_refused_during_a_run_and_a_resumed_replan_says_what_changed() {
    let w = World::new();
    let first = plan_script(&w, "first.jsonl", "First plan", false);
    let held = plan_script(&w, "held.jsonl", "Held plan", true);
    let second = plan_script(&w, "second.jsonl", "Second plan", false);
    fake_claude_sequence(&w, &[&first, &held, &second]);
    // The branch the ticket gets below exists, checked out nowhere.
    git_init_main(&w.path("project"));
    git(&w.path("project"), &["branch", "greeting"]);
    let mut s = started(&w);
    let ticket = new_ticket(&mut s, &w, "claude", None);
    assert_eq!(plan(&mut s, json!({ "ticketId": ticket })).1["planVersion"], 1);

    // While a run is active every field is refused, and nothing changes.
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    let before = messages(&mut s, ticket);
    for edit in [
        json!({ "title": "Other" }),
        json!({ "description": "Other" }),
        json!({ "tool": "codex" }),
        json!({ "model": "opus" }),
        json!({ "variant": "high" }),
        json!({ "branch": "feature/x" }),
        json!({}),
    ] {
        let mut params = edit.clone();
        params["ticketId"] = json!(ticket);
        let e = s.err("planwire/updateTicket", params);
        assert_eq!(
            (e["code"].clone(), e["data"]["kind"].clone()),
            (json!(-32010), json!("ticketBusy")),
            "{edit}"
        );
    }
    let t = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        (t["ticket"]["title"].clone(), t["ticket"]["description"].clone()),
        (json!("Change the greeting"), json!("Say hi."))
    );
    assert_eq!(
        (t["ticket"]["tool"].clone(), t["ticket"]["branch"].clone()),
        (json!("claude"), Value::Null)
    );
    assert_eq!(t["messages"].as_array().unwrap(), &before);
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert_eq!(
        s.ok("planwire/getRun", json!({ "runId": run }))["run"]["status"],
        "cancelled"
    );

    // Once it ended, the edit is accepted: the ticket, a notification, a message.
    s.seen.clear();
    let edited = s.ok(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "description": "Say \"Hi there!\" and add a test.", "branch": " greeting " }),
    )["ticket"]
        .clone();
    assert_eq!(edited["description"], "Say \"Hi there!\" and add a test.");
    assert_eq!(edited["branch"], "greeting");
    let notified = s.wait_ticket(ticket, &["stopped"]);
    assert_eq!(notified, edited);
    let last = messages(&mut s, ticket).pop().unwrap();
    assert_eq!(last["kind"], "edit");
    assert!(
        last["text"].as_str().unwrap().contains("Branch: none → greeting"),
        "{last}"
    );
    assert!(last["text"]
        .as_str()
        .unwrap()
        .ends_with("Description:\n\nSay \"Hi there!\" and add a test."));

    // The replan resumes the session and says what changed, with the new text.
    let (_, t) = plan(&mut s, json!({ "ticketId": ticket }));
    assert_eq!(
        (t["plan"]["title"].clone(), t["planVersion"].clone()),
        (json!("Second plan"), json!(2))
    );
    assert!(argv_of(&w, 3).windows(2).any(|a| a == ["--resume", SESSION]));
    let prompt = prompt_of(&w, 3);
    assert!(
        prompt.contains("They edited the ticket since your last plan: the description changed."),
        "{prompt}"
    );
    assert!(prompt.contains("<ticket-description>\nSay \"Hi there!\" and add a test.\n</ticket-description>"));
    assert!(
        prompt.contains("git diff HEAD...greeting"),
        "the branch is named: {prompt}"
    );
    // The first plan had the old text; a plan of an unedited ticket says it is unchanged.
    assert!(prompt_of(&w, 1).contains("<ticket-description>\nSay hi.\n</ticket-description>"));
    plan(&mut s, json!({ "ticketId": ticket }));
    let again = prompt_of(&w, 4);
    assert!(
        again.contains("unchanged since your last plan") && !again.contains("<ticket-description>"),
        "{again}"
    );
}

#[test]
fn edit_params_are_checked_and_a_no_op_changes_nothing() {
    let w = World::new();
    // A branch must exist in the root's repository.
    git_init_main(&w.path("project"));
    let mut s = started(&w);
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "script", "model": "demo", "branch": "main" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    assert_eq!(
        (t["branch"].clone(), t["planVersion"].clone()),
        (json!("main"), Value::Null)
    );
    assert_eq!(
        (t["handedOffAt"].clone(), t["handedOffTool"].clone()),
        (Value::Null, Value::Null)
    );
    for (params, field) in [
        (json!({ "ticketId": ticket, "title": "  " }), "title"),
        (json!({ "ticketId": ticket, "tool": "vim" }), "tool"),
        (json!({ "ticketId": ticket, "branch": "-rf" }), "branch"),
        (json!({ "ticketId": ticket, "branch": "a b" }), "branch"),
        (json!({ "ticketId": ticket, "title": 5 }), "title"),
    ] {
        let e = s.err("planwire/updateTicket", params);
        assert_eq!(e["code"], -32602);
        assert!(e["message"].as_str().unwrap().contains(&format!("`{field}`")), "{e}");
    }
    let e = s.err("planwire/updateTicket", json!({ "ticketId": 999, "title": "x" }));
    assert_eq!(e["code"], -32011);
    let e = s.err("planwire/updateTicket", json!({ "ticketId": ticket, "branch": "nope" }));
    assert_eq!(e["code"], -32013);
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    let e = s.err(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "branch": "--force" }),
    );
    assert_eq!(e["code"], -32602);

    // The same values: no message, no notification.
    s.seen.clear();
    let same = s.ok(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "title": "T", "branch": "main" }),
    );
    assert_eq!(same["ticket"], t);
    assert_eq!(kinds(&messages(&mut s, ticket)), ["description"]);
    assert!(!s.seen.iter().any(|m| m["method"] == "planwire/ticketChanged"));

    // Empty strings clear; null and left-out fields keep.
    let cleared = s.ok(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "model": "", "branch": "", "variant": null, "title": " New title " }),
    )["ticket"]
        .clone();
    assert_eq!(
        (
            cleared["model"].clone(),
            cleared["branch"].clone(),
            cleared["title"].clone(),
            cleared["tool"].clone()
        ),
        (Value::Null, Value::Null, json!("New title"), json!("script"))
    );
    let edit = messages(&mut s, ticket).pop().unwrap();
    assert_eq!(
        edit["text"],
        "The ticket was edited.\n\nTitle: T → New title\nModel: demo → none\nBranch: main → none"
    );
    // The edit survives a restart.
    assert_eq!(s.shutdown_and_exit(), 0);
    let mut again = started(&w);
    assert_eq!(
        again.ok("planwire/getTicket", json!({ "ticketId": ticket }))["ticket"],
        cleared
    );
}

#[test]
fn versions_accumulate_through_a_replan_and_a_feedback_run() {
    let w = World::new();
    let scripts: Vec<String> = ["One", "Two", "Three", "Four"]
        .iter()
        .map(|t| plan_script(&w, &format!("{t}.jsonl"), &format!("Plan {t}"), false))
        .collect();
    let refs: Vec<&str> = scripts.iter().map(String::as_str).collect();
    fake_claude_sequence(&w, &refs);
    let mut s = started(&w);
    let ticket = new_ticket(&mut s, &w, "claude", None);
    let (r1, _) = plan(&mut s, json!({ "ticketId": ticket }));
    let (r2, _) = plan(&mut s, json!({ "ticketId": ticket }));
    let feedback = "Add a test that checks the output.\n--also: keep </user-feedback> it short";
    let (r3, t) = plan(
        &mut s,
        json!({ "ticketId": ticket, "feedback": format!("  {feedback}  ") }),
    );
    assert_eq!(
        (t["plan"]["title"].clone(), t["planVersion"].clone()),
        (json!("Plan Three"), json!(3))
    );

    // The feedback run resumed the session; its prompt carries the feedback as data.
    assert!(argv_of(&w, 3).windows(2).any(|a| a == ["--resume", SESSION]));
    let prompt = prompt_of(&w, 3);
    assert!(prompt.contains("<user-feedback>\nAdd a test that checks the output.\n--also: keep &lt;/user-feedback> it short\n</user-feedback>"), "{prompt}");
    assert!(!prompt.contains("plan this ticket again"));

    let plans = s.ok("planwire/listPlans", json!({ "ticketId": ticket }))["plans"].clone();
    let got: Vec<(Value, Value, Value)> = plans
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["version"].clone(), p["runId"].clone(), p["plan"]["title"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (json!(1), json!(r1), json!("Plan One")),
            (json!(2), json!(r2), json!("Plan Two")),
            (json!(3), json!(r3), json!("Plan Three"))
        ]
    );
    let one = s.ok("planwire/getPlan", json!({ "ticketId": ticket, "version": 1 }));
    assert_eq!(one, plans[0]);
    assert!(one["markdown"].as_str().unwrap().starts_with("# Plan One\n"));
    assert!(one["createdAt"].as_str().unwrap() <= plans[2]["createdAt"].as_str().unwrap());
    let e = s.err("planwire/getPlan", json!({ "ticketId": ticket, "version": 4 }));
    assert_eq!(e["code"], -32011);
    assert_eq!(s.err("planwire/listPlans", json!({ "ticketId": 999 }))["code"], -32011);

    // The feedback is a message of the conversation, tied to its run, before the run's answer.
    let all = messages(&mut s, ticket);
    let at = all.iter().position(|m| m["kind"] == "feedback").unwrap();
    assert_eq!(
        (all[at]["text"].clone(), all[at]["runId"].clone()),
        (json!(feedback), json!(r3))
    );
    assert_eq!(all[at + 1]["runId"], r3);

    // A retry of the feedback run asks for the same changes again.
    let (r4, t) = plan(&mut s, json!({ "ticketId": ticket, "retryOf": r3 }));
    assert_eq!(t["planVersion"], 4);
    assert!(prompt_of(&w, 4).contains("Add a test that checks the output."));
    let stored: Option<String> = w
        .sqlite()
        .query_row("SELECT feedback FROM runs WHERE id = ?1", [r4], |r| r.get(0))
        .unwrap();
    assert_eq!(stored.as_deref(), Some(feedback));
}

#[test]
fn feedback_without_a_session_to_resume_starts_fresh_with_the_previous_plan() {
    let w = World::new();
    let answer = plan_script(&w, "answer.jsonl", "Revised by claude", false);
    fake_claude_sequence(&w, &[&answer]);
    let mut s = started(&w);
    let ticket = new_ticket(&mut s, &w, "script", Some("demo"));
    plan(&mut s, json!({ "ticketId": ticket }));
    // Another planner than the one whose session holds the plan: no session to resume.
    s.ok(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "tool": "claude", "model": "" }),
    );
    let (run, t) = plan(&mut s, json!({ "ticketId": ticket, "feedback": "Use Hi there." }));
    assert_eq!(
        (t["plan"]["title"].clone(), t["planVersion"].clone()),
        (json!("Revised by claude"), json!(2))
    );
    assert!(!argv_of(&w, 1).iter().any(|a| a == "--resume"));
    let prompt = prompt_of(&w, 1);
    assert!(
        prompt.contains("<previous-plan>\n# Change the greeting printed by main"),
        "{prompt}"
    );
    assert!(prompt.contains("<user-feedback>\nUse Hi there.\n</user-feedback>"));
    assert!(prompt.contains("<ticket-title>\nChange the greeting\n</ticket-title>"));
    let reason: String = w
        .sqlite()
        .query_row("SELECT fresh_reason FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap();
    assert_eq!(reason, "the ticket's planner changed from script to claude");
}

#[test]
fn feedback_that_cannot_start_leaves_nothing_and_a_failed_run_adds_no_version() {
    let w = World::new();
    let mut s = started(&w);
    let ticket = new_ticket(&mut s, &w, "script", Some("demo"));
    plan(&mut s, json!({ "ticketId": ticket }));
    let before = messages(&mut s, ticket);
    let e = s.err(
        "planwire/plan",
        json!({ "ticketId": ticket, "feedback": "More.", "model": "/nonexistent/script.jsonl" }),
    );
    assert_eq!(e["code"], -32012);
    assert_eq!(messages(&mut s, ticket), before, "the feedback was taken back");
    let e = s.err("planwire/plan", json!({ "ticketId": ticket, "feedback": " \n " }));
    assert_eq!(e["code"], -32602);
    // A failed run keeps the plan and its versions as they were.
    let (_, t) = plan(
        &mut s,
        json!({ "ticketId": ticket, "feedback": "More.", "model": "fail" }),
    );
    assert_eq!(
        (t["status"].clone(), t["planVersion"].clone()),
        (json!("failed"), json!(1))
    );
    let plans = s.ok("planwire/listPlans", json!({ "ticketId": ticket }))["plans"].clone();
    assert_eq!(plans.as_array().unwrap().len(), 1);
    assert_eq!(t["plan"], plans[0]["plan"]);
}

#[test]
fn tickets_of_a_breakdown_start_at_version_1_of_its_run() {
    let w = World::new();
    let mut s = started(&w);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "A greeting service.", "tool": "script", "model": "breakdown" }),
    )["runId"]
        .as_i64()
        .unwrap();
    s.wait_for("the breakdown ends", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run
            && m["params"]["run"]["status"] == "completed"
    });
    let tickets = s.ok("planwire/listTickets", json!({ "initiativeRunId": run }))["tickets"].clone();
    assert!(!tickets.as_array().unwrap().is_empty());
    for t in tickets.as_array().unwrap() {
        assert_eq!(t["planVersion"], 1);
        let plans = s.ok("planwire/listPlans", json!({ "ticketId": t["id"] }))["plans"].clone();
        assert_eq!(
            (plans[0]["runId"].clone(), plans[0]["plan"].clone()),
            (json!(run), t["plan"].clone())
        );
    }
}

/// The file of a plan version, as export writes it.
fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn export_writes_the_default_path_refuses_a_conflict_and_overwrites_when_asked() {
    let w = World::new();
    let mut s = started(&w);
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Change the Greeting!", "description": "", "tool": "script" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    let e = s.err("planwire/exportPlan", json!({ "ticketId": ticket }));
    assert_eq!(e["code"], -32011, "no plan yet: {e}");
    plan(&mut s, json!({ "ticketId": ticket }));

    let want = format!("{}/.planwire/plans/{ticket}-change-the-greeting.md", w.root());
    let dry = s.ok("planwire/exportPlan", json!({ "ticketId": ticket, "dryRun": true }));
    assert_eq!(dry["path"], want);
    assert!(!std::path::Path::new(&want).exists(), "a dry run writes nothing");
    let r = s.ok("planwire/exportPlan", json!({ "ticketId": ticket }));
    assert_eq!(
        (r["path"].clone(), r["version"].clone(), r["bytes"].clone()),
        (json!(want), json!(1), dry["bytes"].clone())
    );
    let v1 = read(&want);
    assert_eq!(r["bytes"], v1.len());
    assert!(v1.starts_with("# Change the greeting printed by main\n\n## Context\n"));
    assert!(v1.contains(
        "## Acceptance criteria\n\n- [ ] `cargo run` prints the new greeting\n- [ ] `cargo build` succeeds\n"
    ));
    let footer = format!("Plan version 1 of planwire ticket {ticket} (Change the Greeting!), ");
    assert!(v1.contains(&format!("\n---\n\n{footer}")), "{v1}");
    let mode = std::fs::metadata(&want).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o600, 0o600, "a normal file: {mode:o}");

    // An existing file is a conflict and stays as it was.
    std::fs::write(&want, "my notes\n").unwrap();
    let e = s.err("planwire/exportPlan", json!({ "ticketId": ticket }));
    assert_eq!(
        (e["code"].clone(), e["data"]["kind"].clone()),
        (json!(-32014), json!("conflict"))
    );
    assert_eq!(read(&want), "my notes\n");

    // A second plan; overwrite writes its version.
    plan(&mut s, json!({ "ticketId": ticket }));
    let r = s.ok("planwire/exportPlan", json!({ "ticketId": ticket, "overwrite": true }));
    assert_eq!(r["version"], 2);
    assert!(read(&want).contains("Plan version 2 of planwire ticket"));

    // Version 1 to a relative path: under the root, with its parents created.
    let r = s.ok(
        "planwire/exportPlan",
        json!({ "ticketId": ticket, "version": 1, "path": "docs/plans/greeting.md" }),
    );
    let path = format!("{}/docs/plans/greeting.md", w.root());
    assert_eq!((r["path"].clone(), r["version"].clone()), (json!(path), json!(1)));
    assert_eq!(read(&path), v1);
    // An absolute path is used as it is.
    let elsewhere = w.path("out/plan.md").display().to_string();
    let r = s.ok("planwire/exportPlan", json!({ "ticketId": ticket, "path": elsewhere }));
    assert_eq!(r["path"], json!(elsewhere));
    for bad in ["", "docs/", "src"] {
        let e = s.err("planwire/exportPlan", json!({ "ticketId": ticket, "path": bad }));
        assert_eq!(e["code"], -32602, "{bad:?}: {e}");
    }
    assert_eq!(
        s.err("planwire/exportPlan", json!({ "ticketId": ticket, "version": 7 }))["code"],
        -32011
    );
}

#[test]
fn the_terminal_exports_and_shows_versions_usage_and_timing() {
    let w = World::new();
    let db = w.db();
    let mut s = started(&w);
    let ticket = new_ticket(&mut s, &w, "script", Some("demo"));
    plan(&mut s, json!({ "ticketId": ticket }));
    plan(&mut s, json!({ "ticketId": ticket }));
    assert_eq!(s.shutdown_and_exit(), 0);
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .env_clear()
            .env("HOME", w.path("home"))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let id = ticket.to_string();
    let (code, stdout, stderr) = run(&["export", &id, "--db", &db]);
    assert_eq!(code, 0, "{stderr}");
    let path = format!("{}/.planwire/plans/{ticket}-change-the-greeting.md", w.root());
    assert_eq!(stdout.trim(), path);
    assert!(read(&path).contains("Plan version 2 of planwire ticket"));
    let (code, _, stderr) = run(&["export", &id, "--db", &db]);
    assert_eq!(code, 1);
    assert!(stderr.contains("already exists; --overwrite replaces it"), "{stderr}");
    let (code, stdout, _) = run(&["export", &id, "v1.md", "--plan-version", "1", "--db", &db]);
    assert_eq!((code, stdout.trim().to_owned()), (0, format!("{}/v1.md", w.root())));
    assert!(read(&format!("{}/v1.md", w.root())).contains("Plan version 1 of"));

    let (code, stdout, stderr) = run(&["show", &id, "--db", &db]);
    assert_eq!(code, 0, "{stderr}");
    // The demo script reports 200 input and 40 output tokens and $0.002 per run.
    assert!(
        stdout.contains("usage:   400 input + 80 output tokens (0 cache read, 0 cache write), $0.0040"),
        "{stdout}"
    );
    assert!(stdout.contains("Plan (version 2):"), "{stdout}");
    assert!(stdout.contains("Plan versions:\n  v1  "), "{stdout}");
    assert_eq!(stdout.matches("first output ").count(), 2, "{stdout}");
}

#[test]
fn get_ticket_sums_usage_and_runs_carry_their_timing() {
    let w = World::new();
    let scripts = [
        plan_script(&w, "a.jsonl", "A", false),
        plan_script(&w, "b.jsonl", "B", false),
    ];
    fake_claude_sequence(&w, &[&scripts[0], &scripts[1]]);
    let mut s = started(&w);
    let ticket = new_ticket(&mut s, &w, "claude", None);
    let empty = s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["usage"].clone();
    assert_eq!(
        empty,
        json!({ "inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0, "costUsd": 0.0 })
    );
    s.seen.clear();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    let running = s.wait_for("the run starts", |m| {
        m["method"] == "planwire/runChanged" && m["params"]["run"]["id"] == run
    });
    assert_eq!(
        running["params"]["run"]["timing"],
        Value::Null,
        "no timing while it runs"
    );
    s.wait_ticket(ticket, &["planned"]);
    plan(&mut s, json!({ "ticketId": ticket }));
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        got["usage"],
        json!({ "inputTokens": 200, "outputTokens": 40, "cacheReadTokens": 10, "cacheWriteTokens": 0, "costUsd": 0.5 })
    );
    for r in got["runs"].as_array().unwrap() {
        let t = &r["timing"];
        let (out, fin, total) = (
            t["firstOutputMs"].as_u64().unwrap(),
            t["firstFinalMs"].as_u64().unwrap(),
            t["totalMs"].as_u64().unwrap(),
        );
        assert!(out <= fin && fin <= total, "{t}");
    }
    // The run as notified at its end carries the same timing as stored.
    let ended = s.ok("planwire/getRun", json!({ "runId": run }))["run"].clone();
    assert_eq!(ended["timing"], got["runs"][1]["timing"]);
}

/// Runs a hand-off's command as an editor does: its argv with no shell, in its `cwd`.
pub fn run_handoff(h: &Value) {
    let argv: Vec<String> = serde_json::from_value(h["argv"].clone()).unwrap();
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(h["cwd"].as_str().unwrap())
        .status()
        .unwrap();
    assert!(status.success(), "{argv:?}");
}

/// A fake implementation CLI: records its argv, its working directory and the plan file its
/// prompt names, then exits.
pub fn fake_implementer(w: &World, name: &str) -> String {
    let d = w.dir.path().display();
    w.fake_cli(
        name,
        &format!(
            r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "0.171.0"; exit 0; fi
python3 -c 'import json,sys; json.dump(sys.argv[2:], open(sys.argv[1], "w"))' "{d}/impl-argv.json" "$@"
pwd > "{d}/impl-cwd"
for a in "$@"; do last="$a"; done
file=$(printf '%s' "$last" | sed -n 's/^Implement the plan in the file \(.*\) (planwire ticket.*/\1/p')
cat "$file" > "{d}/impl-plan.md"
"#
        ),
    )
    .display()
    .to_string()
}

#[test]
fn a_handoff_command_runs_the_chosen_cli_in_the_root_with_the_plan() {
    let w = World::new();
    let codex = fake_implementer(&w, "fake-codex");
    let claude = fake_implementer(&w, "fake-claude");
    // Hand-off files go to the world's temp directory, removed with it.
    let tmp = w.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut s = Server::start(&w, &[("TMPDIR", tmp.to_str().unwrap())]);
    s.initialize(json!({ "dbPath": w.db(), "planners": {
        "codex": { "path": codex }, "claude": { "path": claude }, "opencode": { "path": "/nonexistent/opencode" } } }));
    let ticket = new_ticket(&mut s, &w, "script", Some("demo"));
    let e = s.err("planwire/handoff", json!({ "ticketId": ticket, "tool": "codex" }));
    assert_eq!(e["code"], -32011, "no plan yet");
    plan(&mut s, json!({ "ticketId": ticket }));

    // The planner was the script; codex implements.
    s.seen.clear();
    let h = s.ok("planwire/handoff", json!({ "ticketId": ticket, "tool": "codex" }));
    let argv: Vec<String> = serde_json::from_value(h["argv"].clone()).unwrap();
    let plan_path = h["planPath"].as_str().unwrap().to_owned();
    assert_eq!((h["cwd"].clone(), h["version"].clone()), (json!(w.root()), json!(1)));
    assert_eq!(argv[0], codex);
    assert_eq!(argv[1], "--", "the prompt can never be read as a flag: {argv:?}");
    assert_eq!(argv.len(), 3);
    assert!(argv[2].starts_with(&format!(
        "Implement the plan in the file {plan_path} (planwire ticket {ticket}, plan version 1)."
    )));
    assert!(argv[2].len() < 400, "the plan is in the file, not on the command line");

    // The plan is in a private file in a private directory.
    let plan_file = std::path::Path::new(&plan_path);
    assert_eq!(
        std::fs::metadata(plan_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let dir = plan_file.parent().unwrap();
    assert_eq!(std::fs::metadata(dir).unwrap().permissions().mode() & 0o777, 0o700);
    let text = read(&plan_path);
    assert!(
        text.starts_with("# Change the greeting printed by main\n") && text.contains("- [ ] `cargo build` succeeds")
    );

    // The command runs as the editor runs it: no shell, in `cwd`.
    run_handoff(&h);
    let recorded: Vec<String> = serde_json::from_str(&read(&w.path("impl-argv.json").display().to_string())).unwrap();
    assert_eq!(recorded, argv[1..]);
    assert_eq!(read(&w.path("impl-cwd").display().to_string()).trim(), w.root());
    assert_eq!(read(&w.path("impl-plan.md").display().to_string()), text);

    // The ticket records the hand-off.
    let t = s.wait_ticket(ticket, &["planned"]);
    assert_eq!(t["handedOffTool"], "codex");
    assert!(t["handedOffAt"].as_str().unwrap() >= t["createdAt"].as_str().unwrap());
    let last = messages(&mut s, ticket).pop().unwrap();
    assert_eq!(
        (last["kind"].clone(), last["text"].clone()),
        (
            json!("handoff"),
            json!("Plan version 1 was handed off to codex for implementation.")
        )
    );

    // Claude reads the plan's directory; a model is passed only when asked (another CLI).
    let h = s.ok(
        "planwire/handoff",
        json!({ "ticketId": ticket, "tool": "claude", "model": "opus", "version": 1 }),
    );
    let argv: Vec<String> = serde_json::from_value(h["argv"].clone()).unwrap();
    let dir = std::path::Path::new(h["planPath"].as_str().unwrap())
        .parent()
        .unwrap()
        .display()
        .to_string();
    assert_eq!(argv[1..5], ["--model", "opus", "--add-dir", dir.as_str()]);
    assert_eq!(argv[5], "--");
    assert_ne!(h["planPath"], json!(plan_path), "each hand-off has its own file");

    for (params, code) in [
        (json!({ "ticketId": ticket }), -32602),
        (json!({ "ticketId": ticket, "tool": "script" }), -32602),
        (json!({ "ticketId": ticket, "tool": "vim" }), -32602),
        (json!({ "ticketId": ticket, "tool": "opencode" }), -32012),
        (json!({ "ticketId": ticket, "tool": "codex", "version": 5 }), -32011),
    ] {
        assert_eq!(s.err("planwire/handoff", params.clone())["code"], code, "{params}");
    }
}

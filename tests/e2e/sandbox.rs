//! The OS sandbox and the work-tree check, through the real binary: the state in
//! `initialize` and on each run, the `warning` of a run without it, `required` refusing on a
//! kernel without Landlock (simulated with the test-only `PLANWIRE_TEST_NO_LANDLOCK=1`), and
//! a planner that writes into its root: refused by the kernel when the sandbox is enforced,
//! flagged as a read-only violation when it is off.

use serde_json::{json, Value};

use crate::claude_cli::answer_script;
use crate::harness::*;

/// What this kernel gives a default session.
fn native_state() -> &'static str {
    if planwire_sandbox::support().is_ok() {
        "enforced"
    } else {
        "unavailable"
    }
}

fn server(w: &World, env: &[(&str, &str)], options: Value) -> (Server, Value) {
    let mut s = Server::start(w, env);
    let mut opts = json!({ "dbPath": w.db() });
    opts.as_object_mut()
        .unwrap()
        .extend(options.as_object().unwrap().clone());
    let init = s.initialize(opts);
    (s, init)
}

fn sandbox_cap(init: &Value) -> Value {
    init["capabilities"]["experimental"]["planwire"]["sandbox"].clone()
}

/// Makes the world's project a git work tree with one commit.
fn git_init(w: &World) {
    git_commit_all(&w.path("project"), "init");
}

/// A fake `claude` that tries to write into its cwd, HOME and /tmp, then answers a plan.
fn writing_claude(w: &World) {
    let plan = r#"<planwire-plan>{"title": "Greeting plan", "description": "Edit src/main.rs."}</planwire-plan>"#;
    let script = answer_script(w, "answer.jsonl", "sess-w", plan, 0);
    let tmp = std::env::temp_dir().join(format!("planwire-e2e-planted-{}", unique_tag()));
    w.fake_cli(
        "claude",
        &format!(
            r#"#!/bin/sh
if [ "$1" = "--version" ]; then echo "2.1.197 (Claude Code)"; exit 0; fi
echo planted > planted.txt
echo planted >> src/main.rs
echo planted > "$HOME/planted.txt"
echo planted > "{tmp}"
exec "{BIN}" replay "{script}"
"#,
            tmp = tmp.display(),
        ),
    );
    std::fs::write(w.path("tmp-target"), tmp.display().to_string()).unwrap();
}

fn unique_tag() -> String {
    format!("{}-{}", std::process::id(), unique())
}

fn plan_new(s: &mut Server, w: &World, tool: &str) -> Result<Value, Value> {
    s.call(
        "planwire/plan",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "Make it say hi.", "tool": tool }),
    )
}

/// Waits for the run to end; returns (the run, its transcript).
fn finished(s: &mut Server, ticket: i64, run: i64) -> (Value, Vec<Value>) {
    s.wait_ticket(ticket, &["planned", "failed"]);
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    let events = s.ok("planwire/getTranscript", json!({ "runId": run }))["events"]
        .as_array()
        .unwrap()
        .clone();
    (got["runs"][0].clone(), events)
}

#[test]
fn initialize_reports_the_sandbox_state() {
    let w = World::new();
    let (_s, init) = server(&w, &[], json!({}));
    assert_eq!(sandbox_cap(&init), native_state());
    let (_s, init) = server(&w, &[], json!({ "sandbox": "off" }));
    assert_eq!(sandbox_cap(&init), "off");
    let (_s, init) = server(&w, &[("PLANWIRE_TEST_NO_LANDLOCK", "1")], json!({ "sandbox": "auto" }));
    assert_eq!(sandbox_cap(&init), "unavailable");
    // A bad mode is a clear initialize error.
    let mut s = Server::start(&w, &[]);
    let e = s.err(
        "initialize",
        json!({ "processId": null, "capabilities": {}, "initializationOptions": { "sandbox": "sometimes" } }),
    );
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("sandbox"), "{e}");
}

#[test]
fn required_without_landlock_refuses_every_plan_and_creates_nothing() {
    let w = World::new();
    let (mut s, init) = server(
        &w,
        &[("PLANWIRE_TEST_NO_LANDLOCK", "1")],
        json!({ "sandbox": "required" }),
    );
    assert_eq!(sandbox_cap(&init), "unavailable");
    let e = plan_new(&mut s, &w, "script").unwrap_err();
    assert_eq!(e["code"], -32012, "{e}");
    assert_eq!(e["data"]["kind"], "plannerUnavailable", "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("\"required\"") && m.contains("Landlock"), "{m}");
    assert_eq!(
        s.ok("planwire/listTickets", json!({}))["tickets"],
        json!([]),
        "no stray draft"
    );
    // An existing ticket and a breakdown are refused the same way.
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "D", "tool": "script" }),
    );
    let e = s.err("planwire/plan", json!({ "ticketId": t["id"] }));
    assert_eq!(e["code"], -32012, "{e}");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t["id"] }));
    assert_eq!(got["runs"], json!([]), "{got}");
    assert_eq!(got["ticket"]["status"], "draft");
    let e = s.err(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "Split it.", "tool": "script" }),
    );
    assert_eq!(e["code"], -32012, "{e}");
}

#[test]
fn auto_without_landlock_plans_with_a_warning_on_the_run() {
    let w = World::new();
    let (mut s, _) = server(&w, &[("PLANWIRE_TEST_NO_LANDLOCK", "1")], json!({}));
    let r = plan_new(&mut s, &w, "script").unwrap();
    let (ticket, run) = (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap());
    let (got, events) = finished(&mut s, ticket, run);
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(got["sandbox"], "unavailable", "{got}");
    assert_eq!(got["readonlyViolation"], Value::Null);
    let warning = &events[0];
    assert_eq!(warning["kind"], "warning", "{events:?}");
    let m = warning["message"].as_str().unwrap();
    assert!(m.contains("without the OS sandbox") && m.contains("Landlock"), "{m}");
    // It was notified too, and once.
    let notified: Vec<Value> = s
        .notified_events(run)
        .into_iter()
        .filter(|e| e["kind"] == "warning")
        .collect();
    assert_eq!(notified.len(), 1);
    // A sandboxed run has no warning (when this kernel can sandbox).
    if native_state() == "enforced" {
        let w2 = World::new();
        let (mut s2, _) = server(&w2, &[], json!({}));
        let r = plan_new(&mut s2, &w2, "script").unwrap();
        let (ticket, run) = (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap());
        let (got, events) = finished(&mut s2, ticket, run);
        assert_eq!(got["sandbox"], "enforced", "{got}");
        assert!(!events.iter().any(|e| e["kind"] == "warning"), "{events:?}");
    }
}

#[test]
fn with_the_sandbox_off_a_planner_that_writes_is_flagged_and_the_plan_kept() {
    let w = World::new();
    git_init(&w);
    writing_claude(&w);
    let (mut s, _) = server(&w, &[], json!({ "sandbox": "off" }));
    let r = plan_new(&mut s, &w, "claude").unwrap();
    let (ticket, run) = (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap());
    let (got, events) = finished(&mut s, ticket, run);
    let root = w.root();
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(got["sandbox"], "off");
    assert_eq!(
        got["readonlyViolation"]["paths"],
        json!([format!("{root}/planted.txt"), format!("{root}/src/main.rs")]),
        "{got}"
    );
    let t = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(t["ticket"]["status"], "planned", "the plan is kept: {t}");
    assert_eq!(t["ticket"]["plan"]["title"], "Greeting plan");
    assert_eq!(events[0]["kind"], "warning", "{events:?}");
    assert!(events[0]["message"].as_str().unwrap().contains("\"off\""));
    let err = events
        .iter()
        .find(|e| e["kind"] == "error")
        .unwrap_or_else(|| panic!("{events:?}"));
    let m = err["message"].as_str().unwrap();
    assert!(m.contains("planted.txt") && m.contains("src/main.rs"), "{m}");
    // The runChanged that ended the run carried the violation.
    let ended = s.wait_for("the run's end", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run
            && m["params"]["run"]["status"] == "completed"
    });
    assert_eq!(ended["params"]["run"]["readonlyViolation"], got["readonlyViolation"]);
    let tmp = std::fs::read_to_string(w.path("tmp-target")).unwrap();
    let _ = std::fs::remove_file(tmp);
}

#[test]
fn with_the_sandbox_enforced_the_kernel_refuses_the_writes() {
    if native_state() != "enforced" {
        eprintln!("skipped: this kernel has no Landlock");
        return;
    }
    let w = World::new();
    git_init(&w);
    writing_claude(&w);
    let (mut s, _) = server(&w, &[], json!({}));
    let r = plan_new(&mut s, &w, "claude").unwrap();
    let (ticket, run) = (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap());
    let (got, events) = finished(&mut s, ticket, run);
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(got["sandbox"], "enforced");
    assert_eq!(got["readonlyViolation"], Value::Null, "{got}");
    assert!(!w.path("project/planted.txt").exists());
    assert_eq!(
        std::fs::read_to_string(w.path("project/src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    assert!(!w.path("home/planted.txt").exists());
    let tmp = std::fs::read_to_string(w.path("tmp-target")).unwrap();
    assert!(!std::path::Path::new(&tmp).exists(), "{tmp} was written");
    assert!(
        !events.iter().any(|e| e["kind"] == "warning" || e["kind"] == "error"),
        "{events:?}"
    );
    let tail: String = w
        .sqlite()
        .query_row("SELECT stderr_tail FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap();
    assert_eq!(tail.matches("Permission denied").count(), 4, "{tail}");
}

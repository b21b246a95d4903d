use std::time::Duration;

use serde_json::json;

use crate::harness::*;
use crate::stop::start_slow;

#[test]
fn kill_9_mid_plan_then_restart_marks_interrupted_and_kills_the_group() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let (ticket, run) = start_slow(&mut s, &w);
    let (pgid, start) = run_group(&w, run);
    // SIGKILL the sidecar: no chance to clean up.
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The planner itself dies with it (parent-death signal)…
    eventually("the planner leader is gone", Duration::from_secs(5), || {
        !planwire::util::same_process_alive(pgid, start)
    });
    let status: String = w
        .sqlite()
        .query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "running", "nobody has recovered it yet");
    // …and the next sidecar to open the file interrupts the run and kills what is left.
    let mut next = w.start();
    next.initialize(json!({ "dbPath": w.db() }));
    assert!(!group_alive(pgid, start), "the grandchild is killed too");
    let got = next.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "interrupted");
    assert_eq!(got["ticket"]["status"], "draft", "back to its status before the run");
    let last = got["messages"].as_array().unwrap().last().unwrap().clone();
    assert!(last["text"].as_str().unwrap().contains("interrupted"));
    // Events streamed before the kill are still there.
    let page = next.ok("planwire/getTranscript", json!({ "runId": run }));
    assert!(!page["events"].as_array().unwrap().is_empty());
    assert_eq!(page["done"], true);
    // The ticket can be planned again.
    next.ok("planwire/plan", json!({ "ticketId": ticket, "model": "demo" }));
    next.wait_planned(ticket);
}

#[test]
fn recovery_never_kills_a_recycled_process_group() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "script" }),
    );
    drop(s);
    // A run row that claims a live, unrelated process group (this test's own) as its planner,
    // with a start time later than that process's: it must be left alone.
    let me = std::process::id() as i32;
    let my_start = planwire::util::proc_stat(me).unwrap().start_time;
    let innocent = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    w.sqlite()
        .execute(
            "INSERT INTO runs (ticket_id, project_id, status, tool, prev_ticket_status, owner_pid, owner_start, pgid, child_pid, child_start, created_at)
             VALUES (?1, (SELECT project_id FROM tickets WHERE id = ?1), 'running', 'script', 'draft', 999999, 1, ?2, ?2, ?3, 'x')",
            rusqlite::params![t["id"].as_i64().unwrap(), me, my_start + 1],
        )
        .unwrap();
    let mut next = w.start();
    next.initialize(json!({ "dbPath": w.db() }));
    let got = next.ok("planwire/getTicket", json!({ "ticketId": t["id"] }));
    assert_eq!(got["runs"][0]["status"], "interrupted");
    let mut innocent = innocent;
    assert!(innocent.try_wait().unwrap().is_none(), "an unrelated process survives");
    innocent.kill().unwrap();
}

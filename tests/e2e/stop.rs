use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::*;

/// A planner that starts a grandchild, then streams slowly.
pub fn slow_with_grandchild(w: &World) -> String {
    let mut lines = vec![json!({ "spawn": ["sleep", "300"] })];
    let init = json!({"type":"system","subtype":"init","session_id":"stop-test","cwd":"/","tools":[],"model":"m","permissionMode":"plan"});
    lines.push(json!({ "out": init.to_string() }));
    for i in 0..300 {
        let text = json!({"type":"assistant","message":{"id":format!("m{i}"),"content":[{"type":"text","text":format!("step {i}")}]},"parent_tool_use_id":null,"session_id":"stop-test"});
        lines.push(json!({ "out": text.to_string(), "delayMs": 200 }));
    }
    w.script("slow-grandchild.jsonl", &lines)
}

pub fn start_slow(s: &mut Server, w: &World) -> (i64, i64) {
    let script = slow_with_grandchild(w);
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Slow", "description": "", "tool": "script", "model": script }),
    );
    let ticket = t["id"].as_i64().unwrap();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    // Wait until it streams, so the stop lands mid-stream.
    s.wait_for("a text event", |m| {
        m["method"] == "planwire/transcript"
            && m["params"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["kind"] == "text")
    });
    (ticket, run)
}

fn started(w: &World) -> Server {
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db(), "stopGraceMs": 1000 }));
    s
}

#[test]
fn stop_mid_stream_kills_the_group_and_records_cancelled() {
    let w = World::new();
    let mut s = started(&w);
    let (ticket, run) = start_slow(&mut s, &w);
    let (pgid, start) = run_group(&w, run);
    assert!(
        planwire::util::group_members(pgid, start).len() >= 2,
        "the planner and its grandchild run"
    );
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    // When stop answers, nothing of the group is left — the grandchild included.
    assert!(!group_alive(pgid, start));
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["ticket"]["status"], "stopped");
    assert_eq!(got["runs"][0]["status"], "cancelled");
    let last = got["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["text"], "Planning was stopped.");
    // Everything streamed before the stop is stored, numbered without gaps.
    let page = s.ok("planwire/getTranscript", json!({ "runId": run }));
    let events = page["events"].as_array().unwrap();
    assert!(events.len() >= 2);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(page["done"], true);
    let notified = s.notified_events(run);
    assert_eq!(&events[..notified.len()], notified.as_slice());
    // A second stop finds nothing to stop.
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": false })
    );
    assert_eq!(s.err("planwire/stop", json!({ "ticketId": 4242 }))["code"], -32011);
}

#[test]
fn a_busy_ticket_cannot_be_planned_twice_in_one_process() {
    let w = World::new();
    let mut s = started(&w);
    let (ticket, _) = start_slow(&mut s, &w);
    let e = s.err("planwire/plan", json!({ "ticketId": ticket }));
    assert_eq!(e["code"], -32010);
    assert_eq!(e["data"]["kind"], "ticketBusy");
    let status = s.ok("planwire/status", json!({ "ticketId": ticket }));
    assert_eq!(status["activeRuns"].as_array().unwrap().len(), 1);
    s.ok("planwire/stop", json!({ "ticketId": ticket }));
}

#[test]
fn two_sidecars_on_one_database_never_plan_the_same_ticket_twice() {
    let w = World::new();
    let mut a = started(&w);
    let (ticket, run) = start_slow(&mut a, &w);
    let mut b = started(&w);
    let e = b.err("planwire/plan", json!({ "ticketId": ticket }));
    assert_eq!(e["code"], -32010);
    // The other sidecar sees the run as active, and can stop it.
    let status = b.ok("planwire/status", json!({ "ticketId": ticket }));
    assert_eq!(status["activeRuns"][0]["id"], run);
    let (pgid, start) = run_group(&w, run);
    assert_eq!(
        b.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start));
    let t = a.wait_ticket(ticket, &["stopped", "failed"]);
    assert_eq!(t["status"], "stopped");
    let run_row = b.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0].clone();
    assert_eq!(run_row["status"], "cancelled");
}

#[test]
fn shutdown_stops_the_servers_own_runs() {
    let w = World::new();
    let mut s = started(&w);
    let (ticket, run) = start_slow(&mut s, &w);
    let (pgid, start) = run_group(&w, run);
    assert_eq!(s.shutdown_and_exit(), 0);
    assert!(!group_alive(pgid, start));
    let mut again = started(&w);
    let got = again.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "cancelled");
    assert_eq!(got["ticket"]["status"], "stopped");
}

#[test]
fn end_of_input_stops_runs_then_exits_1() {
    let w = World::new();
    let mut s = started(&w);
    let (_, run) = start_slow(&mut s, &w);
    let (pgid, start) = run_group(&w, run);
    assert_eq!(s.wait_exit(), 1);
    eventually("the group is gone", Duration::from_secs(10), || {
        !group_alive(pgid, start)
    });
    let status: String = w
        .sqlite()
        .query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "cancelled");
    let _ = Value::Null;
}

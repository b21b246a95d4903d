//! Back-pressure: a client that stops reading stdout while a planner floods. The sidecar's
//! memory stays bounded, the planner is slowed through its pipe (the store stops taking
//! events, so nothing is buffered without limit), and once the client reads again every
//! event arrives, in order.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::*;

const LINES: u64 = 100_000;

fn last_seq(db: &str, run: i64) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT last_seq FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_client_that_stops_reading_slows_the_planner_and_then_gets_every_event_in_order() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    let flood = flood_script(&w, "flood.jsonl", LINES, 300);
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "Flood", "description": "", "tool": "script", "model": flood }),
    );
    let run = r["runId"].as_i64().unwrap();
    s.wait_for("the first events", |m| m["method"] == "planwire/transcript");
    s.pause_reading();
    // Nobody reads: the store must stop taking events (the planner waits on its pipe)
    // instead of the sidecar buffering them. Wait until it has held still for 1 s.
    let deadline = Instant::now() + WAIT;
    let mut peak = 0;
    let (mut seen, mut since) = (last_seq(&w.db(), run), Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(100));
        peak = peak.max(s.status_bytes("VmRSS"));
        let now = last_seq(&w.db(), run);
        if now != seen {
            (seen, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_secs(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store kept taking events while nobody read ({now} of {LINES}): no back-pressure"
        );
    }
    assert!(
        (seen as u64) < LINES,
        "the planner was not slowed: {seen} events stored"
    );
    // The client is gone for a few more seconds: memory stays where it is.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        peak = peak.max(s.status_bytes("VmRSS"));
    }
    assert_eq!(last_seq(&w.db(), run), seen, "nothing moves while nobody reads");
    assert!(
        peak < 100 << 20,
        "VmRSS reached {} MiB while the client did not read",
        peak >> 20
    );
    s.resume_reading();
    let ended = s.wait_for("the run's end", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run
            && m["params"]["run"]["status"] != "running"
    });
    assert_eq!(ended["params"]["run"]["status"], "completed", "{ended}");
    // Every event, in order, once: the flood's lines are numbered.
    let stored = assert_notified_are_stored(&w.db(), &s, run);
    let texts: Vec<u64> = s
        .notified_events(run)
        .iter()
        .filter_map(|e| {
            e["text"]
                .as_str()?
                .strip_prefix("flood line ")?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(texts.len() as u64, LINES, "{stored} events stored");
    assert!(
        texts.iter().enumerate().all(|(i, n)| *n == i as u64 + 1),
        "out of order"
    );
    eprintln!(
        "peak VmRSS while the client did not read: {} MiB; {seen} of {stored} events stored then",
        peak >> 20
    );
}

//! The crash loop: kill -9 of planwire at random moments during fast streams, many rounds on
//! one database. Every event notified in any round is stored, as it was notified; each run's
//! seqs run from 1 with no gap; no run stays `queued` or `running` once the next planwire has
//! opened the file; no planner process is left.
//!
//! `PLANWIRE_CRASH_ROUNDS` sets the rounds (a few by default, so every test run has some);
//! `PLANWIRE_CRASH_SEED` replays the moments of a failed run (the seed is printed).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::*;

/// xorshift: small, deterministic from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn env_u64(key: &str) -> Option<u64> {
    std::env::var(key).ok()?.parse().ok()
}

#[test]
fn kill_9_at_random_moments_never_loses_a_notified_event() {
    let rounds = env_u64("PLANWIRE_CRASH_ROUNDS").unwrap_or(6);
    let seed = env_u64("PLANWIRE_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    eprintln!("crash loop: {rounds} rounds, PLANWIRE_CRASH_SEED={seed}");
    let mut rng = Rng(seed | 1);
    let w = World::new();
    let flood = flood_script(&w, "fast.jsonl", 20_000, 120);
    let mut notified: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    let mut groups = Vec::new();
    for round in 0..rounds {
        let mut s = w.start();
        s.initialize(json!({ "dbPath": w.db() }));
        check_recovered(&w, round);
        let plans = 1 + rng.below(3);
        for i in 0..plans {
            let r = s.ok(
                "planwire/plan",
                json!({ "root": w.root(), "title": format!("r{round} p{i}"), "description": "",
                        "tool": "script", "model": flood }),
            );
            groups.push(run_group(&w, r["runId"].as_i64().unwrap()));
        }
        // A random moment: at once, mid-stream, or after some runs have ended.
        s.pump_for(Duration::from_millis(rng.below(1500)));
        s.child.kill().unwrap();
        s.child.wait().unwrap();
        s.drain_closed();
        for m in s.seen.iter().filter(|m| m["method"] == "planwire/transcript") {
            let run = m["params"]["runId"].as_i64().unwrap();
            notified
                .entry(run)
                .or_default()
                .extend(m["params"]["events"].as_array().unwrap().iter().cloned());
        }
    }
    // The last planwire opens the file: it recovers what the last kill left.
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    check_recovered(&w, rounds);
    assert!(!notified.is_empty(), "no round streamed anything");
    let runs: Vec<i64> = {
        let conn = w.sqlite();
        let mut st = conn.prepare("SELECT id FROM runs ORDER BY id").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    let mut total = 0;
    for run in runs {
        let stored = stored_events(&w.db(), run);
        for (i, e) in stored.iter().enumerate() {
            assert_eq!(e["seq"], i as u64 + 1, "run {run}: a gap in the stored seqs");
        }
        let seen = notified.remove(&run).unwrap_or_default();
        assert!(seen.len() <= stored.len(), "run {run}: more notified than stored");
        for (i, e) in seen.iter().enumerate() {
            assert_eq!(
                Some(e),
                stored.get(i),
                "run {run}: notified event {} is not stored as sent",
                i + 1
            );
        }
        total += seen.len();
    }
    assert!(
        notified.is_empty(),
        "events notified for runs that do not exist: {:?}",
        notified.keys()
    );
    for (pgid, start) in groups {
        assert!(
            !group_alive(pgid, start),
            "a planner group {pgid} outlived its planwire"
        );
    }
    eprintln!("crash loop: {total} notified events, all stored");
    assert_eq!(s.shutdown_and_exit(), 0);
}

/// After a planwire opened the file: no run is active, and no leftover planner runs.
fn check_recovered(w: &World, round: u64) {
    let conn = w.sqlite();
    let active: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(active, 0, "round {round}: a run stayed active after recovery");
    let mut st = conn
        .prepare("SELECT pgid, child_start FROM runs WHERE pgid IS NOT NULL")
        .unwrap();
    let groups: Vec<(i32, u64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (pgid, start) in groups {
        assert!(!group_alive(pgid, start), "round {round}: planner group {pgid} is left");
    }
}

//! `planwire-bench soak`: rounds of concurrent plans on one database for a set time, with
//! random stops, kill -9 of the sidecar at random moments, and restarts.
//!
//! ```text
//! planwire-bench soak [--minutes 30] [--plans 50] [--seed N] [--bin PATH]
//! ```
//!
//! What it checks, every round, over the protocol only (what a client can see):
//! - lost events: a run's stored transcript (`getTranscript`, paged) must run 1..lastSeq with
//!   no gap and reach at least the last seq that was notified;
//! - repeated and reordered events: every run's notifications must come 1, 2, 3 … ;
//! - no run stays `queued` or `running` once its sidecar is gone and another opened the file;
//! - zombies (children of the sidecar it did not reap) and planner processes left over once
//!   a round's runs have all ended.
//!
//! And it samples the sidecar's RSS, open descriptors and threads at the end of each round,
//! to show them flat over time. The exit code is 1 when any check failed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::client::{Options, Sidecar, Tracker};
use crate::stats::mib;
use crate::stream::{cached_stream, Shapes};

pub struct SoakArgs {
    pub minutes: f64,
    pub plans: usize,
    pub seed: u64,
}

impl SoakArgs {
    pub fn parse(args: &mut impl Iterator<Item = String>, usage: fn() -> !) -> (SoakArgs, Option<PathBuf>) {
        let mut a = SoakArgs {
            minutes: 30.0,
            plans: 50,
            seed: now_seed(),
        };
        let mut bin = None;
        while let Some(flag) = args.next() {
            let mut value = || args.next().unwrap_or_else(|| usage());
            match flag.as_str() {
                "--minutes" => a.minutes = value().parse().unwrap_or_else(|_| usage()),
                "--plans" => a.plans = value().parse().unwrap_or_else(|_| usage()),
                "--seed" => a.seed = value().parse().unwrap_or_else(|_| usage()),
                "--bin" => bin = Some(PathBuf::from(value())),
                _ => usage(),
            }
        }
        (a, bin)
    }
}

fn now_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// xorshift64: reproducible moments from `--seed`.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// One sample of the sidecar, at the end of a round it lived through.
struct Sample {
    at_s: f64,
    life: usize,
    round: usize,
    rss: u64,
    fds: usize,
    threads: u64,
}

#[derive(Default)]
struct Counts {
    rounds: usize,
    runs: usize,
    kills: usize,
    stops: usize,
    notified: u64,
    lost: u64,
    repeated: u64,
    reordered: u64,
    left_active: u64,
    zombies: usize,
    leftover: usize,
    by_status: HashMap<String, usize>,
    problems: Vec<String>,
}

impl Counts {
    fn problem(&mut self, p: String) {
        if self.problems.len() < 50 {
            println!("  PROBLEM: {p}");
        }
        self.problems.push(p);
    }
}

pub fn run(bin: &Path, work: &Path, root: &Path, cache: &Path, args: SoakArgs) -> i32 {
    let shapes = Shapes::load(root);
    let (_, script, bytes) = cached_stream(&shapes, cache, 1_000_000);
    let dir = work.join("soak");
    std::fs::create_dir_all(dir.join("project")).expect("soak dir");
    let db = dir.join("planwire.db");
    let project = dir.join("project");
    let mut rng = Rng(args.seed | 1);
    println!(
        "[soak] {:.0} min: rounds of {} concurrent plans ({} KB streams) on one database; \
         random stops, kill -9 and restarts; --seed {}",
        args.minutes,
        args.plans,
        bytes / 1000,
        args.seed
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(args.minutes * 60.0);
    let mut c = Counts::default();
    let mut samples = Vec::new();
    let mut life = 0;
    let mut sc: Option<Sidecar> = None;
    let mut ticket_n = 0;
    while Instant::now() < deadline {
        c.rounds += 1;
        let side = sc.get_or_insert_with(|| {
            life += 1;
            let (mut s, _) = Sidecar::spawn(bin, &dir, Options { stamps: false });
            s.initialize(&db);
            s
        });
        let mut runs = Vec::new();
        let ids: Vec<i64> = (0..args.plans)
            .map(|_| {
                ticket_n += 1;
                side.request(
                    "planwire/plan",
                    json!({"root": project, "title": format!("soak {ticket_n}"), "description": "soak",
                           "tool": "script", "model": script}),
                )
            })
            .collect();
        for id in ids {
            match side.wait_response(id, Duration::from_secs(300)).0 {
                Ok(r) => {
                    let v: Value = serde_json::from_str(&r).unwrap_or_default();
                    if let Some(run) = v["runId"].as_i64() {
                        runs.push(run);
                    }
                }
                Err(e) => c.problem(format!("round {}: plan failed: {e}", c.rounds)),
            }
        }
        c.runs += runs.len();
        // This round's moments: a few stops, and a kill one round in three.
        let stops: Vec<(Duration, i64)> = (0..args.plans / 10)
            .map(|_| {
                let run = runs[rng.below(runs.len() as u64) as usize];
                (Duration::from_millis(rng.below(4000)), run)
            })
            .collect();
        let kill_at = (rng.below(3) == 0).then(|| Duration::from_millis(rng.below(6000)));
        let mut tracker = Tracker::default();
        let round_start = Instant::now();
        let mut pending_stops = stops;
        pending_stops.sort_by_key(|(at, _)| *at);
        let round_deadline = round_start + Duration::from_secs(600);
        let mut killed = false;
        while !runs.iter().all(|r| tracker.ended(*r)) {
            let now = round_start.elapsed();
            if kill_at.is_some_and(|k| now >= k) {
                killed = true;
                break;
            }
            while pending_stops.first().is_some_and(|(at, _)| now >= *at) {
                let (_, run) = pending_stops.remove(0);
                side.request("planwire/stop", json!({"runId": run}));
                c.stops += 1;
            }
            if Instant::now() > round_deadline {
                c.problem(format!("round {}: runs did not end within 10 minutes", c.rounds));
                break;
            }
            if let Some(m) = side.next(Instant::now() + Duration::from_millis(50)) {
                tracker.on(&m);
            }
        }
        if killed {
            c.kills += 1;
            let _ = side.child.kill();
            let _ = side.child.wait();
            // What it wrote before it died still counts as notified.
            while let Some(m) = side.next(Instant::now() + Duration::from_millis(500)) {
                tracker.on(&m);
            }
            sc = None;
        } else {
            // Everything ended: sample the sidecar, count its zombies and leftover planners.
            samples.push(Sample {
                at_s: started.elapsed().as_secs_f64(),
                life,
                round: c.rounds,
                rss: side.status_field("VmRSS").unwrap_or(0),
                fds: std::fs::read_dir(format!("/proc/{}/fd", side.pid)).map_or(0, |d| d.count()),
                threads: side.status_count("Threads").unwrap_or(0),
            });
            c.zombies = c.zombies.max(zombies_of(side.pid));
        }
        // The checks, from a live sidecar (a new one after a kill: it recovers the runs).
        let side = sc.get_or_insert_with(|| {
            life += 1;
            let (mut s, _) = Sidecar::spawn(bin, &dir, Options { stamps: false });
            s.initialize(&db);
            s
        });
        let left = leftover_planners(&script);
        c.leftover = c.leftover.max(left);
        if left > 0 {
            c.problem(format!("round {}: {left} planner processes left over", c.rounds));
        }
        for run in &runs {
            check_run(side, &tracker, *run, &mut c);
        }
        let elapsed = started.elapsed().as_secs_f64() / 60.0;
        let last = match samples.last() {
            Some(s) if !killed => format!("; RSS {} fds {} threads {}", mib(s.rss as f64), s.fds, s.threads),
            _ => String::new(),
        };
        println!(
            "  round {:>3} at {elapsed:>5.1} min: {} runs{}{last}",
            c.rounds,
            runs.len(),
            if killed { ", killed" } else { "" }
        );
    }
    if let Some(s) = sc.take() {
        s.shutdown();
    }
    report(&c, &samples, started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
    i32::from(!c.problems.is_empty())
}

/// Checks one run from the store: ended, seqs 1..lastSeq with no gap, and every notified seq
/// stored; and what its notifications did.
fn check_run(side: &mut Sidecar, tracker: &Tracker, run: i64, c: &mut Counts) {
    let got = side.call("planwire/getRun", json!({"runId": run}));
    let status = got["run"]["status"].as_str().unwrap_or("?").to_owned();
    if status == "queued" || status == "running" {
        c.left_active += 1;
        c.problem(format!("run {run} is still {status}"));
    }
    *c.by_status.entry(status).or_default() += 1;
    let notified = tracker.runs.get(&run).map_or(0, |t| t.next_seq.saturating_sub(1));
    c.notified += tracker.runs.get(&run).map_or(0, |t| t.seen);
    if let Some(t) = tracker.runs.get(&run) {
        c.repeated += t.repeated;
        c.reordered += t.reordered;
        if t.repeated + t.reordered > 0 {
            c.problem(format!(
                "run {run}: {} repeated, {} out of order",
                t.repeated, t.reordered
            ));
        }
    }
    // Page through what is stored.
    let (mut after, mut last) = (0u64, 0u64);
    loop {
        let page = side.call(
            "planwire/getTranscript",
            json!({"runId": run, "afterSeq": after, "limit": 1000}),
        );
        last = page["lastSeq"].as_u64().unwrap_or(last);
        let events = page["events"].as_array().cloned().unwrap_or_default();
        for e in &events {
            let seq = e["seq"].as_u64().unwrap_or(0);
            if seq != after + 1 {
                c.lost += 1;
                c.problem(format!("run {run}: stored seq {seq} after {after}"));
            }
            after = seq;
        }
        if events.is_empty() || after >= last {
            break;
        }
    }
    if after != last || notified > last {
        c.lost += notified.saturating_sub(last).max(1);
        c.problem(format!(
            "run {run}: {after} events read back, lastSeq {last}, {notified} notified"
        ));
    }
}

/// Zombie children of `pid`.
fn zombies_of(pid: i32) -> usize {
    procs()
        .filter(|(_, stat)| stat.ppid == pid && stat.state == 'Z')
        .count()
}

/// Planner processes replaying the soak's script (there must be none once runs ended).
fn leftover_planners(script: &Path) -> usize {
    let needle = script.display().to_string();
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let n = procs()
            .filter(|(pid, stat)| {
                stat.state != 'Z'
                    && std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
            })
            .count();
        // A planner whose sidecar was just killed may take a moment to go.
        if n == 0 || Instant::now() > end {
            return n;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Stat {
    state: char,
    ppid: i32,
}

fn procs() -> impl Iterator<Item = (i32, Stat)> {
    std::fs::read_dir("/proc").into_iter().flatten().filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        let mut f = rest.split_whitespace();
        let state = f.next()?.chars().next()?;
        let ppid = f.next()?.parse().ok()?;
        Some((pid, Stat { state, ppid }))
    })
}

fn report(c: &Counts, samples: &[Sample], took: Duration) {
    println!("\n[soak] {:.1} min, {} rounds", took.as_secs_f64() / 60.0, c.rounds);
    let mut statuses: Vec<_> = c.by_status.iter().collect();
    statuses.sort();
    println!(
        "  runs: {} ({}); stops asked: {}; kill -9: {}",
        c.runs,
        statuses
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", "),
        c.stops,
        c.kills
    );
    println!("  events notified: {}", c.notified);
    println!(
        "  lost: {}, repeated: {}, reordered: {}, runs left active: {}  (all must be 0)",
        c.lost, c.repeated, c.reordered, c.left_active
    );
    println!(
        "  zombies (max at a round's end): {}; planner processes left over (max): {}",
        c.zombies, c.leftover
    );
    if samples.is_empty() {
        return;
    }
    println!("  sidecar at the end of each round it lived through (life = one sidecar process):");
    println!(
        "    {:>7} {:>5} {:>5} {:>9} {:>4} {:>7}",
        "min", "life", "round", "RSS", "fds", "threads"
    );
    let step = (samples.len() / 20).max(1);
    for (i, s) in samples.iter().enumerate() {
        if i % step == 0 || i + 1 == samples.len() {
            println!(
                "    {:>7.1} {:>5} {:>5} {:>9} {:>4} {:>7}",
                s.at_s / 60.0,
                s.life,
                s.round,
                mib(s.rss as f64),
                s.fds,
                s.threads
            );
        }
    }
    let pick = |f: fn(&Sample) -> f64| {
        let v: Vec<f64> = samples.iter().map(f).collect();
        let n = (v.len() / 4).max(1);
        let head = v[..n].iter().sum::<f64>() / n as f64;
        let tail = v[v.len() - n..].iter().sum::<f64>() / n as f64;
        let max = v.iter().cloned().fold(0.0, f64::max);
        (head, tail, max)
    };
    let (h, t, m) = pick(|s| s.rss as f64);
    println!(
        "  RSS: first quarter {} → last quarter {} (max {})",
        mib(h),
        mib(t),
        mib(m)
    );
    let (h, t, m) = pick(|s| s.fds as f64);
    println!("  fds: first quarter {h:.1} → last quarter {t:.1} (max {m:.0})");
    let (h, t, m) = pick(|s| s.threads as f64);
    println!("  threads: first quarter {h:.1} → last quarter {t:.1} (max {m:.0})");
    if !c.problems.is_empty() {
        println!("  {} problem(s), the first ones above", c.problems.len());
    }
}

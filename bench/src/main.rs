//! `planwire-bench`: the performance scenarios of docs/PERFORMANCE.md, run against the real
//! release binary over stdio.
//!
//! ```text
//! cargo run --release -p planwire-bench [-- --quick] [--bin PATH] [--only a,b] [--runs N]
//! cargo run --release -p planwire-bench -- soak [--minutes 30] [--plans 50] [--seed N]
//! ```
//!
//! Scenarios: startup, mcp (`planwire mcp`'s initialize against `--stdio`'s), throughput (with disk), latency, concurrency, queries, memory (RSS
//! against the stream's length); `soak` is a mode of its own (see `soak.rs`). Every figure is
//! printed as the median and the spread (min–max) of several runs, next to its target. The
//! exit code is 1 only when an event was lost, repeated or reordered, or a run failed: never
//! because of timing, so a `--quick` smoke run cannot fail on a slow machine.

mod client;
mod mcp;
mod soak;
mod stats;
mod stream;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use client::{mono_ns, Options, Sidecar, Tracker};
use stats::{line, mb, median, mib, ms, pct, percentile, rate, secs, sorted, summary, times};
use stream::{cached_stream, Shapes};

const MB: u64 = 1_000_000;

struct Config {
    quick: bool,
    bin: PathBuf,
    cache: PathBuf,
    work: PathBuf,
    root: PathBuf,
    only: Option<Vec<String>>,
    runs: Option<usize>,
    keep: bool,
}

impl Config {
    fn wants(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.iter().any(|s| s == name))
    }
    fn runs(&self, full: usize) -> usize {
        self.runs.unwrap_or(if self.quick { 1 } else { full })
    }
    /// A fresh scratch directory with a project root in it.
    fn scratch(&self, name: &str) -> PathBuf {
        let dir = client::unique(&self.work, name, "d");
        std::fs::create_dir_all(dir.join("project")).expect("scratch dir");
        dir
    }
    fn done_with(&self, dir: &Path) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, what: String) {
        println!("  PROBLEM: {what}");
        self.0.push(what);
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: planwire-bench [--quick] [--bin PATH] [--only startup,mcp,throughput,latency,concurrency,queries,memory] [--runs N] [--cache DIR] [--keep]\n       planwire-bench soak [--minutes 30] [--plans 50] [--seed N] [--bin PATH]"
    );
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("soak") {
        args.next();
        let (soak_args, bin) = soak::SoakArgs::parse(&mut args, usage);
        let (bin, cache) = binary_and_cache(bin, None);
        let work = cache.join(format!("work-{}", std::process::id()));
        let code = soak::run(&bin, &work, &stream::repo_root(), &cache, soak_args);
        let _ = std::fs::remove_dir_all(&work);
        std::process::exit(code);
    }
    let (mut quick, mut bin, mut only, mut runs, mut cache, mut keep) = (false, None, None, None, None, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--keep" => keep = true,
            "--bin" => bin = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "--cache" => cache = Some(PathBuf::from(args.next().unwrap_or_else(|| usage()))),
            "--only" => {
                only = Some(
                    args.next()
                        .unwrap_or_else(|| usage())
                        .split(',')
                        .map(str::to_owned)
                        .collect::<Vec<_>>(),
                )
            }
            "--runs" => runs = Some(args.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| usage())),
            _ => usage(),
        }
    }
    let (bin, cache) = binary_and_cache(bin, cache);
    let work = cache.join(format!("work-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("cache dir");
    let cfg = Config {
        quick,
        bin,
        cache,
        work,
        root: stream::repo_root(),
        only,
        runs,
        keep,
    };
    machine(&cfg);
    let mut problems = Problems::default();
    let started = Instant::now();
    if cfg.wants("startup") {
        startup(&cfg, &mut problems);
    }
    if cfg.wants("mcp") {
        mcp::startup(&cfg, &mut problems);
    }
    if cfg.wants("throughput") {
        throughput(&cfg, &mut problems);
    }
    if cfg.wants("latency") {
        latency(&cfg, &mut problems);
    }
    if cfg.wants("concurrency") {
        concurrency(&cfg, &mut problems);
    }
    if cfg.wants("queries") {
        queries(&cfg, &mut problems);
    }
    if cfg.wants("memory") {
        memory(&cfg, &mut problems);
    }
    println!(
        "\ndone in {:.0} s; load average now {}",
        started.elapsed().as_secs_f64(),
        loadavg()
    );
    cfg.done_with(&cfg.work);
    if !problems.0.is_empty() {
        println!("{} correctness problem(s): see above", problems.0.len());
        std::process::exit(1);
    }
}

/// The planwire binary to measure (building it first under `cargo run`) and the cache dir.
fn binary_and_cache(bin: Option<PathBuf>, cache: Option<PathBuf>) -> (PathBuf, PathBuf) {
    let exe = std::env::current_exe().expect("current exe");
    let target_dir = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("target"));
    let bin = bin.unwrap_or_else(|| {
        // Under `cargo run`, build the server first so the figures are of the current code.
        if let Some(cargo) = std::env::var_os("CARGO") {
            let ok = std::process::Command::new(cargo)
                .args(["build", "--release", "-p", "planwire"])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("planwire-bench: `cargo build --release -p planwire` failed");
                std::process::exit(2);
            }
        }
        exe.with_file_name("planwire")
    });
    if !bin.is_file() {
        eprintln!(
            "planwire-bench: no binary at {}; build it with `cargo build --release -p planwire` or pass --bin",
            bin.display()
        );
        std::process::exit(2);
    }
    let cache = cache.unwrap_or_else(|| target_dir.join("bench-cache"));
    std::fs::create_dir_all(&cache).expect("cache dir");
    (bin, cache)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn machine(cfg: &Config) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "?".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal"))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_owned())
        })
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_else(|| "?".into());
    let version = std::process::Command::new(&cfg.bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("planwire-bench{}", if cfg.quick { " --quick" } else { "" });
    println!(
        "machine: {} CPUs ({cpu}), {mem} RAM; load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg()
    );
    println!("binary: {version}");
}

fn plan_params(root: &Path, title: &str, script: &Path) -> Value {
    json!({"root": root, "title": title, "description": "benchmark", "tool": "script",
           "model": script})
}

fn run_id(result: &Result<String, String>) -> Result<i64, String> {
    let r = result.as_ref().map_err(Clone::clone)?;
    let v: Value = serde_json::from_str(r).map_err(|e| e.to_string())?;
    v["runId"].as_i64().ok_or_else(|| format!("no runId in {r}"))
}

/// Checks what the tracker saw of `runs`: ended completed, no gap, nothing missing.
fn check_runs(tracker: &Tracker, runs: &[i64], problems: &mut Problems, what: &str) {
    for r in runs {
        match tracker.runs.get(r) {
            None => problems.add(format!("{what}: run {r}: no event at all")),
            Some(t) => {
                for p in &t.problems {
                    problems.add(format!("{what}: run {r}: {p}"));
                }
                if t.ended.as_deref() != Some("completed") {
                    problems.add(format!("{what}: run {r} ended {:?}", t.ended));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------

fn startup(cfg: &Config, problems: &mut Problems) {
    let n = if cfg.quick { 5 } else { 20 };
    println!("\n[startup] spawn → initialize response, existing DB; {n} starts; RssAnon 1 s later");
    let dir = cfg.scratch("startup");
    let db = dir.join("planwire.db");
    let (mut sc, _) = Sidecar::spawn(&cfg.bin, &dir, Options { stamps: false });
    sc.initialize(&db);
    for i in 0..10 {
        sc.call(
            "planwire/createTicket",
            json!({"root": dir.join("project"), "title": format!("ticket {i}"), "description": "d"}),
        );
    }
    sc.shutdown();
    let (mut times_ms, mut anon) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let (sc, t) = match Sidecar::timed_start(&cfg.bin, &dir, &db) {
            Ok(started) => started,
            Err(e) => {
                problems.add(format!("startup: initialize failed: {e}"));
                return;
            }
        };
        times_ms.push(t);
        std::thread::sleep(Duration::from_secs(1));
        anon.push(sc.status_field("RssAnon").unwrap_or(0) as f64);
        sc.shutdown();
    }
    let t = median(&times_ms);
    let a = median(&anon);
    line(
        "startup (spawn → initialize)",
        &summary(&times_ms, ms),
        "≤ 10 ms",
        Some(t <= 10.0),
    );
    line(
        "RssAnon 1 s after initialize",
        &summary(&anon, mib),
        "≤ 8 MB",
        Some(a <= 8.0 * 1024.0 * 1024.0),
    );
    cfg.done_with(&dir);
}

// ---------------------------------------------------------------------------------------

struct StreamRun {
    mbps: f64,
    cpu_mbps: f64,
    wchar_ratio: f64,
    write_bytes_ratio: f64,
    files_ratio: f64,
    hwm: f64,
    events: u64,
}

/// One sidecar, one plan replaying `script` at full speed; measures time and bytes written.
fn stream_run(cfg: &Config, script: &Path, bytes: u64, problems: &mut Problems) -> Option<StreamRun> {
    let dir = cfg.scratch("stream");
    let db = dir.join("planwire.db");
    let (mut sc, _) = Sidecar::spawn(&cfg.bin, &dir, Options { stamps: false });
    sc.initialize(&db);
    let io = |sc: &Sidecar| {
        (
            sc.io_field("wchar").unwrap_or(0),
            sc.io_field("write_bytes").unwrap_or(0),
            sc.stdout_bytes.load(std::sync::atomic::Ordering::Relaxed),
        )
    };
    let (w0, b0, o0) = io(&sc);
    let c0 = sc.cpu_secs();
    let t0 = mono_ns();
    let id = sc.request("planwire/plan", plan_params(&dir.join("project"), "throughput", script));
    let (result, _) = sc.wait_response(id, Duration::from_secs(60));
    let run = match run_id(&result) {
        Ok(r) => r,
        Err(e) => {
            problems.add(format!("throughput: plan failed: {e}"));
            return None;
        }
    };
    let mut tracker = Tracker::default();
    let deadline = Instant::now() + Duration::from_secs(900);
    if !tracker.until_ended(&mut sc, &[run], deadline) {
        problems.add("throughput: the run did not end within 15 minutes".into());
        return None;
    }
    let t1 = mono_ns();
    let c1 = sc.cpu_secs();
    // The last checkpoint may still be under way on the store thread: let it settle.
    std::thread::sleep(Duration::from_millis(200));
    let (w1, b1, o1) = io(&sc);
    let hwm = sc.status_field("VmHWM").unwrap_or(0) as f64;
    let files: u64 = ["planwire.db", "planwire.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    check_runs(&tracker, &[run], problems, "throughput");
    sc.shutdown();
    cfg.done_with(&dir);
    let secs = (t1 - t0) as f64 / 1e9;
    let b = bytes as f64;
    Some(StreamRun {
        mbps: b / 1e6 / secs,
        cpu_mbps: b / 1e6 / (c1 - c0).max(0.01),
        wchar_ratio: (w1 - w0).saturating_sub(o1 - o0) as f64 / b,
        write_bytes_ratio: (b1 - b0) as f64 / b,
        files_ratio: files as f64 / b,
        hwm,
        events: tracker.events,
    })
}

/// The limit: plain `serde_json::from_str::<Value>` of every line, in this process.
/// Returns MB/s of wall time and MB per CPU second.
fn plain_parse_mbps(lines: &[String], bytes: u64) -> (f64, f64) {
    let t = Instant::now();
    let c = client::thread_cpu_secs();
    let mut n = 0usize;
    for l in lines {
        let v: Value = serde_json::from_str(l).expect("a stream line parses");
        n += v.is_object() as usize;
    }
    assert_eq!(n, lines.len());
    let mb = bytes as f64 / 1e6;
    (mb / t.elapsed().as_secs_f64(), mb / (client::thread_cpu_secs() - c))
}

fn throughput(cfg: &Config, problems: &mut Problems) {
    let shapes = Shapes::load(&cfg.root);
    let sizes: Vec<(u64, usize)> = if cfg.quick {
        vec![(10 * MB, 1)]
    } else {
        vec![(10 * MB, cfg.runs(3)), (100 * MB, cfg.runs(3))]
    };
    println!(
        "\n[throughput + disk] Claude stream-json replayed at full speed → parse, store, notify; \
         limit = serde_json::from_str::<Value> per line"
    );
    let mut ratios_by_size = Vec::new();
    for (bytes, runs) in sizes {
        let (stream_file, script, len) = cached_stream(&shapes, &cfg.cache, bytes);
        let lines: Vec<String> = std::fs::read_to_string(&stream_file)
            .expect("stream file")
            .lines()
            .map(str::to_owned)
            .collect();
        println!(
            "  stream: {} in {} lines (avg {} B/line), {runs} run(s)",
            mb(len as f64),
            lines.len(),
            len / lines.len() as u64
        );
        let mut r = Vec::new();
        let (mut limit, mut limit_cpu) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let (wall, cpu) = plain_parse_mbps(&lines, len);
            limit.push(wall);
            limit_cpu.push(cpu);
            if let Some(run) = stream_run(cfg, &script, len, problems) {
                r.push(run);
            }
        }
        if r.is_empty() {
            continue;
        }
        let pick = |f: fn(&StreamRun) -> f64| r.iter().map(f).collect::<Vec<_>>();
        let mbps = pick(|x| x.mbps);
        let ratio: Vec<f64> = mbps.iter().zip(&limit).map(|(a, b)| a / b).collect();
        let label = mb(len as f64);
        line(&format!("pipeline {label}"), &summary(&mbps, rate), "", None);
        line(&format!("plain serde_json {label}"), &summary(&limit, rate), "", None);
        line(
            &format!("ratio {label}"),
            &summary(&ratio, pct),
            "≥ 30 %",
            Some(median(&ratio) >= 0.30),
        );
        let cpu = pick(|x| x.cpu_mbps);
        let cpu_ratio: Vec<f64> = cpu.iter().zip(&limit_cpu).map(|(a, b)| a / b).collect();
        line(
            &format!("  per CPU-second: sidecar {label}"),
            &summary(&cpu, rate),
            "",
            None,
        );
        line(
            &format!("  per CPU-second: serde_json {label}"),
            &summary(&limit_cpu, rate),
            "",
            None,
        );
        line(
            &format!("  per CPU-second: ratio {label}"),
            &summary(&cpu_ratio, pct),
            "",
            None,
        );
        let wchar = pick(|x| x.wchar_ratio);
        line(
            &format!("disk {label}: written ÷ stream"),
            &summary(&wchar, times),
            "≤ 3×",
            Some(median(&wchar) <= 3.0),
        );
        line(
            &format!("  block layer (write_bytes) {label}"),
            &summary(&pick(|x| x.write_bytes_ratio), times),
            "",
            None,
        );
        line(
            &format!("  DB + WAL file size {label}"),
            &summary(&pick(|x| x.files_ratio), times),
            "",
            None,
        );
        line(&format!("  VmHWM {label}"), &summary(&pick(|x| x.hwm), mib), "", None);
        println!("  events per run: {}", r[0].events);
        ratios_by_size.push((label, median(&wchar)));
    }
    if ratios_by_size.len() == 2 {
        let (a, b) = (ratios_by_size[0].1, ratios_by_size[1].1);
        line(
            "disk factor growth 10 → 100 MB",
            &format!("{} → {}", times(a), times(b)),
            "flat",
            Some(b <= a * 1.25 && b <= 3.0),
        );
    }
    println!(
        "  (disk = bytes the sidecar passed to write(2) (/proc/PID/io wchar) minus what it \
         wrote to stdout, i.e. the DB, WAL and checkpoint writes)"
    );
}

// ---------------------------------------------------------------------------------------

fn latency(cfg: &Config, problems: &mut Problems) {
    let shapes = Shapes::load(&cfg.root);
    let (lines, runs) = if cfg.quick { (2_000, 1) } else { (10_000, cfg.runs(3)) };
    let per_sec = 1_000;
    println!(
        "\n[latency] {lines} lines at {per_sec} lines/s; planner write (CLOCK_MONOTONIC stamp) → client receipt; {runs} run(s)"
    );
    let script = cfg.cache.join(format!("latency-{lines}-{per_sec}-v1.jsonl"));
    let stream_bytes = stream::write_latency_script(&shapes, &script, lines, per_sec) as f64;
    let mut disk = Vec::new();
    let (mut p50s, mut p99s, mut maxes, mut rates) = (Vec::new(), Vec::new(), Vec::new(), vec![]);
    for _ in 0..runs {
        let dir = cfg.scratch("latency");
        let (mut sc, _) = Sidecar::spawn(&cfg.bin, &dir, Options { stamps: true });
        sc.initialize(&dir.join("planwire.db"));
        let written = |sc: &Sidecar| {
            sc.io_field("wchar").unwrap_or(0) as f64 - sc.stdout_bytes.load(std::sync::atomic::Ordering::Relaxed) as f64
        };
        let w0 = written(&sc);
        let id = sc.request("planwire/plan", plan_params(&dir.join("project"), "latency", &script));
        let run = match run_id(&sc.wait_response(id, Duration::from_secs(60)).0) {
            Ok(r) => r,
            Err(e) => {
                problems.add(format!("latency: plan failed: {e}"));
                return;
            }
        };
        let mut tracker = Tracker::default();
        if !tracker.until_ended(&mut sc, &[run], Instant::now() + Duration::from_secs(600)) {
            problems.add("latency: the run did not end".into());
            return;
        }
        check_runs(&tracker, &[run], problems, "latency");
        disk.push((written(&sc) - w0) / stream_bytes);
        sc.shutdown();
        cfg.done_with(&dir);
        let t = &tracker.runs[&run];
        let lat: Vec<f64> = t.latencies.iter().map(|&ns| ns as f64 / 1e6).collect();
        if lat.len() < lines * 9 / 10 {
            problems.add(format!(
                "latency: only {} of {lines} stamped events came back",
                lat.len()
            ));
        }
        let s = sorted(&lat);
        p50s.push(percentile(&s, 50.0));
        p99s.push(percentile(&s, 99.0));
        maxes.push(*s.last().unwrap_or(&f64::NAN));
        rates.push(lat.len() as f64);
    }
    line("latency p50", &summary(&p50s, ms), "well < 60", None);
    line(
        "latency p99",
        &summary(&p99s, ms),
        "≤ 60 ms",
        Some(median(&p99s) <= 60.0),
    );
    line("latency max", &summary(&maxes, ms), "", None);
    line("  disk for this paced stream", &summary(&disk, times), "", None);
    println!("  stamped events per run: {}", median(&rates));
}

// ---------------------------------------------------------------------------------------

fn concurrency(cfg: &Config, problems: &mut Problems) {
    let shapes = Shapes::load(&cfg.root);
    let (plans, bytes, runs) = if cfg.quick {
        (10, MB, 1)
    } else {
        (50, 2 * MB, cfg.runs(3))
    };
    println!(
        "\n[concurrency] {plans} plans at once on {plans} tickets, {} each; every event checked in order; {runs} run(s)",
        mb(bytes as f64)
    );
    let (_, script, _) = cached_stream(&shapes, &cfg.cache, bytes);
    let (mut hwms, mut totals, mut per_run) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let dir = cfg.scratch("concurrency");
        let (mut sc, _) = Sidecar::spawn(&cfg.bin, &dir, Options { stamps: false });
        sc.initialize(&dir.join("planwire.db"));
        let t0 = mono_ns();
        let ids: Vec<i64> = (0..plans)
            .map(|i| {
                sc.request(
                    "planwire/plan",
                    plan_params(&dir.join("project"), &format!("concurrent {i}"), &script),
                )
            })
            .collect();
        let mut run_ids = Vec::new();
        for id in ids {
            match run_id(&sc.wait_response(id, Duration::from_secs(120)).0) {
                Ok(r) => run_ids.push(r),
                Err(e) => problems.add(format!("concurrency: plan failed: {e}")),
            }
        }
        let mut tracker = Tracker::default();
        if !tracker.until_ended(&mut sc, &run_ids, Instant::now() + Duration::from_secs(900)) {
            problems.add("concurrency: not every run ended within 15 minutes".into());
        }
        let total = (mono_ns() - t0) as f64 / 1e9;
        hwms.push(sc.status_field("VmHWM").unwrap_or(0) as f64);
        check_runs(&tracker, &run_ids, problems, "concurrency");
        // Catch-up agrees: nothing after the last notified seq, and the run is done.
        let mut counts = Vec::new();
        for r in &run_ids {
            let last = tracker.runs.get(r).map_or(0, |t| t.next_seq.saturating_sub(1));
            counts.push(last);
            let page = sc.call("planwire/getTranscript", json!({"runId": r, "afterSeq": last}));
            if page["events"].as_array().is_none_or(|e| !e.is_empty())
                || page["done"] != true
                || page["lastSeq"] != last
            {
                problems.add(format!(
                    "concurrency: run {r}: getTranscript after {last} gave {}",
                    page.to_string().chars().take(200).collect::<String>()
                ));
            }
        }
        if counts.iter().any(|c| *c != counts[0]) {
            problems.add(format!(
                "concurrency: the same script gave different event counts: {counts:?}"
            ));
        }
        per_run.push(counts.first().copied().unwrap_or(0) as f64);
        totals.push(total);
        sc.shutdown();
        cfg.done_with(&dir);
    }
    line(
        "peak RSS (VmHWM)",
        &summary(&hwms, mib),
        "≤ 50 MB",
        Some(median(&hwms) <= 50.0 * 1024.0 * 1024.0),
    );
    line("total time", &summary(&totals, secs), "", None);
    let agg: Vec<f64> = totals.iter().map(|t| (plans as u64 * bytes) as f64 / 1e6 / t).collect();
    line("aggregate stream rate", &summary(&agg, rate), "", None);
    println!(
        "  events per run: {} (all {plans} runs complete, in order, no gaps)",
        median(&per_run)
    );
}

// ---------------------------------------------------------------------------------------

/// Sequential requests: per-request latency from write to response, and response size.
fn timed(sc: &mut Sidecar, method: &str, params: Value) -> (f64, Result<String, String>) {
    let t0 = mono_ns();
    let id = sc.request(method, params);
    let (r, at) = sc.wait_response(id, Duration::from_secs(120));
    ((at - t0) as f64 / 1e6, r)
}

fn queries(cfg: &Config, problems: &mut Problems) {
    let shapes = Shapes::load(&cfg.root);
    let (events, tickets) = if cfg.quick { (10_000, 1_000) } else { (100_000, 10_000) };
    println!(
        "\n[queries] getTranscript of {events} events (pages of 1000 and 100); status and listTickets with {tickets} tickets (unpaged, pages of 500 and 100); sequential requests"
    );
    let script = cfg.cache.join(format!("many-events-{events}-v1.jsonl"));
    if !script.is_file() {
        stream::write_many_events_script(&shapes, &script, events);
    }
    let dir = cfg.scratch("queries");
    let (mut sc, _) = Sidecar::spawn(&cfg.bin, &dir, Options { stamps: false });
    sc.initialize(&dir.join("planwire.db"));
    let project = dir.join("project");
    let id = sc.request("planwire/plan", plan_params(&project, "many events", &script));
    let run = match run_id(&sc.wait_response(id, Duration::from_secs(60)).0) {
        Ok(r) => r,
        Err(e) => {
            problems.add(format!("queries: plan failed: {e}"));
            return;
        }
    };
    let mut tracker = Tracker::default();
    tracker.until_ended(&mut sc, &[run], Instant::now() + Duration::from_secs(600));
    check_runs(&tracker, &[run], problems, "queries");
    let last = tracker.runs.get(&run).map_or(0, |t| t.last_seq);
    // Tickets: pipelined createTicket.
    let t = Instant::now();
    let ids: Vec<i64> = (1..tickets)
        .map(|i| {
            sc.request(
                "planwire/createTicket",
                json!({"root": project, "title": format!("ticket {i}"),
                       "description": format!("Description of ticket {i}: some words about the work.")}),
            )
        })
        .collect();
    for id in ids {
        if let Err(e) = sc.wait_response(id, Duration::from_secs(300)).0 {
            problems.add(format!("queries: createTicket failed: {e}"));
            return;
        }
    }
    println!(
        "  setup: {last} events stored; {tickets} tickets ({:.0} createTicket/s pipelined)",
        (tickets - 1) as f64 / t.elapsed().as_secs_f64()
    );
    // Whole passes over the transcript: in default pages (1000, the server's maximum), then
    // in pages of 100. Every page is checked for order and completeness.
    let passes = if cfg.quick { 2 } else { 5 };
    let (mut pages_1000, mut pages_100) = (Paged::default(), Paged::default());
    for _ in 0..passes {
        if let Err(e) = read_transcript(&mut sc, run, None, last, &mut pages_1000) {
            problems.add(format!("queries: default pages: {e}"));
            return;
        }
    }
    if let Err(e) = read_transcript(&mut sc, run, Some(100), last, &mut pages_100) {
        problems.add(format!("queries: pages of 100: {e}"));
        return;
    }
    let samples = if cfg.quick { 20 } else { 100 };
    let mut tail = Vec::new();
    for _ in 0..samples {
        let (dt, r) = timed(
            &mut sc,
            "planwire/getTranscript",
            json!({"runId": run, "afterSeq": last.saturating_sub(100), "limit": 100}),
        );
        if r.is_err() {
            problems.add("queries: getTranscript (tail) failed".into());
        }
        tail.push(dt);
    }
    let mut status = Vec::new();
    for _ in 0..samples {
        let (dt, r) = timed(&mut sc, "planwire/status", json!({}));
        if let Err(e) = r {
            problems.add(format!("queries: status failed: {e}"));
            break;
        }
        status.push(dt);
    }
    // listTickets: the unpaged answer (for reference), then whole passes in pages.
    let list_samples = if cfg.quick { 10 } else { 30 };
    let (mut list, mut list_bytes) = (Vec::new(), 0usize);
    for _ in 0..list_samples {
        let (dt, r) = timed(&mut sc, "planwire/listTickets", json!({}));
        match r {
            Ok(r) => list_bytes = r.len(),
            Err(e) => {
                problems.add(format!("queries: listTickets failed: {e}"));
                break;
            }
        }
        list.push(dt);
    }
    let list_passes = if cfg.quick { 2 } else { 5 };
    let (mut list_100, mut list_500) = (Paged::default(), Paged::default());
    for _ in 0..list_passes {
        for (limit, paged) in [(100, &mut list_100), (500, &mut list_500)] {
            if let Err(e) = list_tickets(&mut sc, limit, tickets, paged) {
                problems.add(format!("queries: listTickets pages of {limit}: {e}"));
                return;
            }
        }
    }
    sc.shutdown();
    cfg.done_with(&dir);
    let p = |v: &[f64]| {
        let s = sorted(v);
        (percentile(&s, 50.0), percentile(&s, 99.0))
    };
    let show = |name: &str, v: &[f64], note: String| {
        let (p50, p99) = p(v);
        line(
            name,
            &format!("p50 {} p99 {} (n={}){note}", ms(p50), ms(p99), v.len()),
            "≤ 5 ms",
            Some(p99 <= 5.0),
        );
    };
    let paged = |name: &str, pg: &Paged| {
        show(name, &pg.lat, format!(", {}/page", mb(median(&pg.bytes))));
        line(
            &format!("  whole pass, {} requests", pg.lat.len() / pg.passes.len().max(1)),
            &summary(&pg.passes, ms),
            "",
            None,
        );
    };
    paged("getTranscript page (1000, default)", &pages_1000);
    paged("getTranscript page (100)", &pages_100);
    show("getTranscript tail (100 events)", &tail, String::new());
    show("status", &status, String::new());
    show(
        &format!("listTickets unpaged ({tickets})"),
        &list,
        format!(", {}", mb(list_bytes as f64)),
    );
    paged("listTickets page (limit 500)", &list_500);
    paged("listTickets page (limit 100)", &list_100);
}

/// Per-request latencies and response sizes of paged reads, and the time of each whole pass.
#[derive(Default)]
struct Paged {
    lat: Vec<f64>,
    bytes: Vec<f64>,
    passes: Vec<f64>,
}

/// Reads a run's whole transcript in pages (`limit` None: the server's default page), checking
/// that seqs run 1…last with no gap or repeat and that no page exceeds 1000 events.
fn read_transcript(sc: &mut Sidecar, run: i64, limit: Option<u32>, last: u64, pg: &mut Paged) -> Result<(), String> {
    let t = Instant::now();
    let mut after = 0u64;
    loop {
        let mut params = json!({"runId": run, "afterSeq": after});
        if let Some(l) = limit {
            params["limit"] = json!(l);
        }
        let (dt, r) = timed(sc, "planwire/getTranscript", params);
        let r = r.map_err(|e| format!("getTranscript after {after}: {e}"))?;
        pg.lat.push(dt);
        pg.bytes.push(r.len() as f64);
        let v: Value = serde_json::from_str(&r).map_err(|e| format!("result: {e}"))?;
        let evs = v["events"].as_array().map(Vec::as_slice).unwrap_or_default();
        let max = limit.unwrap_or(1000) as usize;
        if evs.len() > max || (evs.len() < max && after + (evs.len() as u64) < last) {
            return Err(format!("page after {after} has {} events (limit {max})", evs.len()));
        }
        for e in evs {
            if e["seq"] != after + 1 {
                return Err(format!("page after {after} has seq {}", e["seq"]));
            }
            after += 1;
        }
        if v["done"] == true || evs.is_empty() {
            break;
        }
    }
    if after != last {
        return Err(format!("paged {after} events of {last}"));
    }
    pg.passes.push(t.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

/// Lists every ticket in pages of `limit`, following `nextAfterId`, checking that ids rise,
/// that `nextAfterId` is the last id of every full page and absent otherwise, and that all
/// `total` tickets come back once.
fn list_tickets(sc: &mut Sidecar, limit: u32, total: usize, pg: &mut Paged) -> Result<(), String> {
    let t = Instant::now();
    let (mut after, mut seen) = (None::<i64>, 0usize);
    loop {
        let mut params = json!({"limit": limit});
        if let Some(a) = after {
            params["afterId"] = json!(a);
        }
        let (dt, r) = timed(sc, "planwire/listTickets", params);
        let r = r.map_err(|e| format!("after {after:?}: {e}"))?;
        pg.lat.push(dt);
        pg.bytes.push(r.len() as f64);
        let v: Value = serde_json::from_str(&r).map_err(|e| format!("result: {e}"))?;
        let ts = v["tickets"].as_array().map(Vec::as_slice).unwrap_or_default();
        if ts.len() > limit as usize {
            return Err(format!("page after {after:?} has {} tickets", ts.len()));
        }
        let mut prev = after.unwrap_or(0);
        for tk in ts {
            let id = tk["id"].as_i64().ok_or("ticket without id")?;
            if id <= prev {
                return Err(format!("ticket {id} after {prev}"));
            }
            prev = id;
        }
        seen += ts.len();
        let next = v["nextAfterId"].as_i64();
        let full = ts.len() == limit as usize;
        if full != next.is_some() || (full && next != Some(prev)) {
            return Err(format!("{} tickets with nextAfterId {:?}", ts.len(), v["nextAfterId"]));
        }
        match next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    if seen != total {
        return Err(format!("listed {seen} tickets of {total}"));
    }
    pg.passes.push(t.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

// ---------------------------------------------------------------------------------------

/// RSS against the stream's length: one plan of a 40 MB and of a 400 MB stream. A parser that
/// kept the run's text (it keeps a bounded tail) would grow with it.
fn memory(cfg: &Config, problems: &mut Problems) {
    let shapes = Shapes::load(&cfg.root);
    let sizes: Vec<u64> = if cfg.quick {
        vec![40 * MB]
    } else {
        vec![40 * MB, 400 * MB]
    };
    println!(
        "\n[memory] one plan of a Claude stream at full speed; VmHWM of the sidecar at its end; \
         target: within tens of MiB, flat in the stream's length"
    );
    let mut peaks = Vec::new();
    for bytes in sizes {
        let (_, script, len) = cached_stream(&shapes, &cfg.cache, bytes);
        let Some(run) = stream_run(cfg, &script, len, problems) else {
            continue;
        };
        let label = mb(len as f64);
        line(
            &format!("VmHWM, {label} stream"),
            &mib(run.hwm),
            "≤ 64 MiB",
            Some(run.hwm <= 64.0 * 1024.0 * 1024.0),
        );
        println!("  {} events, {}", run.events, rate(run.mbps));
        peaks.push(run.hwm);
    }
    if let [small, large] = peaks[..] {
        line(
            "VmHWM growth 40 → 400 MB",
            &format!("{} → {}", mib(small), mib(large)),
            "flat",
            Some(large <= small * 1.25 + 4.0 * 1024.0 * 1024.0),
        );
    }
}

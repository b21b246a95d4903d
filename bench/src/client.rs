//! A minimal LSP-framed JSON-RPC client for the real `planwire --stdio` process.
//!
//! A reader thread takes every frame off the sidecar's stdout as soon as it arrives, stamps
//! it with CLOCK_MONOTONIC, decodes only what the benchmarks need (response ids, transcript
//! seqs and the latency stamps in event text, run status) and hands it to the caller over a
//! channel. It never blocks on the caller, so the sidecar is never slowed by its client.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The marker the latency scenario puts before a nanosecond timestamp in a line's text.
pub const STAMP_MARK: &str = "pwts:";

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the machine.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: plain syscall writing into a local.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub struct Event {
    pub seq: u64,
    /// The `pwts:` stamp found in the event's text, output or input, if any.
    pub stamp: Option<u64>,
}

pub enum Msg {
    Response {
        id: i64,
        at: u64,
        result: Result<String, String>,
    },
    Transcript {
        at: u64,
        run: i64,
        events: Vec<Event>,
    },
    RunChanged {
        run: i64,
        status: String,
        last_seq: u64,
    },
    Other,
}

#[derive(Deserialize)]
struct RawFrame<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TranscriptParams<E> {
    run_id: i64,
    events: Vec<E>,
}

#[derive(Deserialize)]
struct SeqOnly {
    seq: u64,
}

#[derive(Deserialize)]
struct WithText {
    seq: u64,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    input: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunInfo {
    id: i64,
    status: String,
    last_seq: u64,
}

#[derive(Deserialize)]
struct RunChangedParams {
    run: RunInfo,
}

fn find_stamp(s: &str) -> Option<u64> {
    let at = s.find(STAMP_MARK)? + STAMP_MARK.len();
    let digits: &str = &s[at..];
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().ok()
}

fn decode(body: &[u8], at: u64, stamps: bool) -> Msg {
    let Ok(frame) = serde_json::from_slice::<RawFrame>(body) else {
        return Msg::Other;
    };
    match (frame.method.as_deref(), frame.id) {
        (Some("planwire/transcript"), _) => {
            let params = frame.params.map(RawValue::get).unwrap_or("null");
            if stamps {
                let Ok(p) = serde_json::from_str::<TranscriptParams<WithText>>(params) else {
                    return Msg::Other;
                };
                let events = p
                    .events
                    .into_iter()
                    .map(|e| Event {
                        seq: e.seq,
                        stamp: [e.text, e.output, e.input].iter().flatten().find_map(|s| find_stamp(s)),
                    })
                    .collect();
                Msg::Transcript {
                    at,
                    run: p.run_id,
                    events,
                }
            } else {
                let Ok(p) = serde_json::from_str::<TranscriptParams<SeqOnly>>(params) else {
                    return Msg::Other;
                };
                let events = p
                    .events
                    .into_iter()
                    .map(|e| Event {
                        seq: e.seq,
                        stamp: None,
                    })
                    .collect();
                Msg::Transcript {
                    at,
                    run: p.run_id,
                    events,
                }
            }
        }
        (Some("planwire/runChanged"), _) => {
            let params = frame.params.map(RawValue::get).unwrap_or("null");
            match serde_json::from_str::<RunChangedParams>(params) {
                Ok(p) => Msg::RunChanged {
                    run: p.run.id,
                    status: p.run.status,
                    last_seq: p.run.last_seq,
                },
                Err(_) => Msg::Other,
            }
        }
        (Some(_), _) => Msg::Other,
        (None, Some(id)) => {
            let Ok(id) = id.get().parse::<i64>() else {
                return Msg::Other;
            };
            let result = match (frame.error, frame.result) {
                (Some(e), _) => Err(e.to_string()),
                (None, Some(r)) => Ok(r.get().to_owned()),
                (None, None) => Ok("null".to_owned()),
            };
            Msg::Response { id, at, result }
        }
        (None, None) => Msg::Other,
    }
}

fn read_frame<R: BufRead>(r: &mut R, line: &mut String) -> Option<Vec<u8>> {
    let mut len: Option<usize> = None;
    loop {
        line.clear();
        if r.read_line(line).ok()? == 0 {
            return None;
        }
        let t = line.trim_end();
        if t.is_empty() {
            if let Some(n) = len {
                let mut body = vec![0u8; n];
                r.read_exact(&mut body).ok()?;
                return Some(body);
            }
            continue;
        }
        if let Some(v) = t.strip_prefix("Content-Length:") {
            len = v.trim().parse().ok();
        }
    }
}

pub struct Sidecar {
    pub child: Child,
    pub pid: i32,
    stdin: Option<ChildStdin>,
    rx: Receiver<Msg>,
    next_id: i64,
    /// Bytes the sidecar has written to its stdout so far (headers included).
    pub stdout_bytes: Arc<AtomicU64>,
    /// Messages that arrived while waiting for something else, in order.
    pub backlog: VecDeque<Msg>,
}

pub struct Options {
    /// Decode the `pwts:` stamps of transcript events (costs the client more).
    pub stamps: bool,
}

impl Sidecar {
    /// Spawns `bin --stdio` with `home` as HOME and its stderr in `dir/stderr-N.log`.
    /// Returns the sidecar and the CLOCK_MONOTONIC time just before the spawn.
    pub fn spawn(bin: &Path, dir: &Path, opts: Options) -> (Sidecar, u64) {
        let home = dir.join("home");
        std::fs::create_dir_all(&home).expect("home dir");
        let stderr = std::fs::File::create(unique(dir, "stderr", "log")).expect("stderr log");
        let mut cmd = Command::new(bin);
        cmd.arg("--stdio")
            .env("HOME", &home)
            .env("PLANWIRE_LOG", "warn")
            .env_remove("PLANWIRE_DB")
            .env_remove("XDG_DATA_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let t0 = mono_ns();
        let mut child = cmd.spawn().expect("spawn planwire");
        let pid = child.id() as i32;
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        let counter = Arc::new(AtomicU64::new(0));
        let count = counter.clone();
        let stamps = opts.stamps;
        std::thread::spawn(move || {
            let mut r = BufReader::with_capacity(1 << 20, CountingReader(stdout, count));
            let mut line = String::new();
            while let Some(body) = read_frame(&mut r, &mut line) {
                let at = mono_ns();
                if tx.send(decode(&body, at, stamps)).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        (
            Sidecar {
                child,
                pid,
                stdin,
                rx,
                next_id: 0,
                stdout_bytes: counter,
                backlog: VecDeque::new(),
            },
            t0,
        )
    }

    pub fn send(&mut self, msg: &Value) {
        let body = msg.to_string();
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body.as_bytes());
        stdin.write_all(&frame).expect("write to planwire");
        stdin.flush().expect("flush to planwire");
    }

    /// Sends a request without waiting; returns its id.
    pub fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message, by the deadline.
    pub fn next(&mut self, deadline: Instant) -> Option<Msg> {
        if let Some(m) = self.backlog.pop_front() {
            return Some(m);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        self.rx.recv_timeout(left).ok()
    }

    /// Waits for the response to `id`, keeping everything else in the backlog. Returns the
    /// result (or error) and the time it arrived.
    pub fn wait_response(&mut self, id: i64, timeout: Duration) -> (Result<String, String>, u64) {
        if let Some(i) = self
            .backlog
            .iter()
            .position(|m| matches!(m, Msg::Response { id: r, .. } if *r == id))
        {
            if let Some(Msg::Response { result, at, .. }) = self.backlog.remove(i) {
                return (result, at);
            }
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(Msg::Response { id: r, at, result }) if r == id => return (result, at),
                Ok(other) => self.backlog.push_back(other),
                Err(_) => {
                    return (
                        Err(format!("no response to request {id} within {timeout:?}")),
                        mono_ns(),
                    )
                }
            }
        }
    }

    /// A request and its result, parsed; panics with the error on failure.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        match self.wait_response(id, Duration::from_secs(120)).0 {
            Ok(r) => serde_json::from_str(&r).expect("a JSON result"),
            Err(e) => panic!("{method} failed: {e}"),
        }
    }

    /// A fresh sidecar on `db`, timed from just before the spawn to its `initialize` response
    /// (in ms); `initialized` is sent after the clock stops.
    pub fn timed_start(bin: &Path, dir: &Path, db: &Path) -> Result<(Sidecar, f64), String> {
        let (mut sc, t0) = Sidecar::spawn(bin, dir, Options { stamps: false });
        let id = sc.request(
            "initialize",
            json!({"processId": std::process::id(), "capabilities": {},
                   "initializationOptions": {"dbPath": db}}),
        );
        let (result, at) = sc.wait_response(id, Duration::from_secs(30));
        result?;
        sc.notify("initialized", json!({}));
        Ok((sc, (at - t0) as f64 / 1e6))
    }

    pub fn initialize(&mut self, db: &Path) -> Value {
        let r = self.call(
            "initialize",
            json!({"processId": std::process::id(), "capabilities": {},
                   "initializationOptions": {"dbPath": db}}),
        );
        self.notify("initialized", json!({}));
        r
    }

    /// `shutdown`, `exit`, and waits for the process to end.
    pub fn shutdown(mut self) {
        let id = self.request("shutdown", Value::Null);
        let _ = self.wait_response(id, Duration::from_secs(60));
        self.notify("exit", Value::Null);
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A `kB` field of /proc/PID/status (RssAnon, VmHWM, VmRSS …), in bytes.
    pub fn status_field(&self, key: &str) -> Option<u64> {
        self.status_count(key).map(|kb| kb * 1024)
    }

    /// A plain number of /proc/PID/status (Threads …).
    pub fn status_count(&self, key: &str) -> Option<u64> {
        proc_field(&format!("/proc/{}/status", self.pid), key)
    }

    /// A field of /proc/PID/io (wchar, write_bytes …).
    pub fn io_field(&self, key: &str) -> Option<u64> {
        proc_field(&format!("/proc/{}/io", self.pid), key)
    }

    /// CPU time the sidecar has used so far (user + system, all threads), in seconds.
    pub fn cpu_secs(&self) -> f64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) else {
            return 0.0;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            return 0.0;
        };
        // rest[0] is field 3; utime and stime are fields 14 and 15.
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
            .sum();
        // SAFETY: plain libc query.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        ticks as f64 / hz
    }
}

/// CPU time of the calling thread, in seconds.
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: plain syscall writing into a local.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn proc_field(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.split_whitespace().next()?.parse().ok())?
    })
}

struct CountingReader<R>(R, Arc<AtomicU64>);

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

pub fn unique(dir: &Path, stem: &str, ext: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    dir.join(format!("{stem}-{}.{ext}", N.fetch_add(1, Ordering::Relaxed)))
}

/// Follows transcript notifications per run: every run's seqs must be 1, 2, 3 … with no gap
/// and no repeat, and its last notified seq must match the `lastSeq` of its final state.
#[derive(Default)]
pub struct Tracker {
    pub runs: HashMap<i64, RunTrack>,
    pub events: u64,
}

#[derive(Default)]
pub struct RunTrack {
    pub next_seq: u64,
    pub problems: Vec<String>,
    pub ended: Option<String>,
    pub last_seq: u64,
    /// Latency samples in ns: receipt time minus the stamp of the line.
    pub latencies: Vec<u64>,
    /// Events notified.
    pub seen: u64,
    /// Events whose seq had been notified already (or came after a later one).
    pub repeated: u64,
    /// Events that came before the ones due (a seq skipped ahead).
    pub reordered: u64,
}

const TERMINAL: [&str; 4] = ["completed", "failed", "cancelled", "interrupted"];

impl Tracker {
    pub fn on(&mut self, msg: &Msg) {
        match msg {
            Msg::Transcript { at, run, events } => {
                let t = self.runs.entry(*run).or_default();
                if t.next_seq == 0 {
                    t.next_seq = 1;
                }
                for e in events {
                    self.events += 1;
                    t.seen += 1;
                    if e.seq < t.next_seq {
                        t.repeated += 1;
                    } else if e.seq > t.next_seq {
                        t.reordered += 1;
                    }
                    if e.seq != t.next_seq && t.problems.len() < 5 {
                        t.problems.push(format!("expected seq {}, got {}", t.next_seq, e.seq));
                    }
                    t.next_seq = e.seq + 1;
                    if let Some(s) = e.stamp {
                        t.latencies.push(at.saturating_sub(s));
                    }
                }
            }
            Msg::RunChanged { run, status, last_seq } if TERMINAL.contains(&status.as_str()) => {
                let t = self.runs.entry(*run).or_default();
                t.ended = Some(status.clone());
                t.last_seq = *last_seq;
                let seen = t.next_seq.saturating_sub(1);
                if seen != *last_seq {
                    t.problems.push(format!(
                        "run ended with lastSeq {last_seq} but {seen} events were notified"
                    ));
                }
            }
            _ => {}
        }
    }

    pub fn ended(&self, run: i64) -> bool {
        self.runs.get(&run).is_some_and(|t| t.ended.is_some())
    }

    /// Pumps messages until every run in `runs` has ended, or the deadline.
    pub fn until_ended(&mut self, sc: &mut Sidecar, runs: &[i64], deadline: Instant) -> bool {
        while !runs.iter().all(|r| self.ended(*r)) {
            match sc.next(deadline) {
                Some(m) => self.on(&m),
                None => return false,
            }
        }
        true
    }
}

//! The `script` planner: `planwire replay SCRIPT` replays a recorded stream with its timings
//! and exit code as a real child process, through the same supervisor path as a real CLI.
//! Tests and demos run with no network and no API key, and stop and kill are exercised for real.
//!
//! A script is JSON lines, one directive each:
//! `{"out": LINE, "delayMs": N}` prints LINE to stdout after N ms; `{"err": TEXT}` writes to
//! stderr; `{"sleepMs": N}`; `{"spawn": [ARGV…]}` starts a grandchild (for kill tests);
//! `{"exit": CODE}`; `{"awaitStdin": TYPE}` reads stdin lines until one whose `type` is TYPE
//! (e.g. `control_response`), copying each line to the file named by
//! `PLANWIRE_REPLAY_STDIN_LOG` when set; `{"awaitFile": PATH}` waits until PATH exists (a gate a
//! test opens when it has looked at the run mid-stream). An optional first line `{"format": "claude"}` names
//! the parser; `"interactive": true` there makes planwire talk to the script on stdin, as to
//! Claude Code in its bidirectional mode.
//!
//! For floods (benchmarks, back-pressure and crash tests), an `out` directive may carry
//! `"repeat": N`: the line is printed N times, each `@@N@@` in it replaced by the copy's
//! number (1 to N), so a small script streams hundreds of megabytes of distinct lines.
//!
//! For benchmarks, an `out` directive may also carry `"atMs": N` (print no earlier than N ms
//! after the replay started, so a paced stream does not drift) and `"stamp": TOKEN` (every
//! TOKEN in the line is replaced, as it is written, by CLOCK_MONOTONIC in nanoseconds).

use std::io::Write;
use std::time::Duration;

use serde::Deserialize;

use super::writable::Env;
use planwire_sandbox::Writable;

/// The variable naming the file `awaitStdin` copies stdin lines to.
const STDIN_LOG: &str = "PLANWIRE_REPLAY_STDIN_LOG";

const BUILTIN: &[(&str, &str)] = &[
    ("demo", include_str!("../../scripts/demo.jsonl")),
    ("slow", include_str!("../../scripts/slow.jsonl")),
    ("questions", include_str!("../../scripts/questions.jsonl")),
    ("fail", include_str!("../../scripts/fail.jsonl")),
    ("ask", include_str!("../../scripts/ask.jsonl")),
    ("breakdown", include_str!("../../scripts/breakdown.jsonl")),
    ("exitplan", include_str!("../../scripts/exitplan.jsonl")),
];

pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(n, _)| *n)
}

/// Where the replayer may write under the OS sandbox (see [`super::writable`]): nothing but
/// the stdin log tests ask for.
pub fn writable(env: &Env) -> Vec<Writable> {
    env.var(STDIN_LOG)
        .map(|p| {
            Writable::file(
                p,
                "",
                "the replayer's stdin log (PLANWIRE_REPLAY_STDIN_LOG), which tests read",
            )
        })
        .into_iter()
        .collect()
}

/// The text of a script: a built-in name, or a file path.
pub fn load(name_or_path: &str) -> Result<String, String> {
    if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return Ok((*text).to_owned());
    }
    std::fs::read_to_string(name_or_path).map_err(|e| {
        let names: Vec<_> = builtin_names().collect();
        format!(
            "no script {name_or_path:?} ({e}); built-in scripts: {}",
            names.join(", ")
        )
    })
}

/// The first line of a script. Reads only that line of a file: the sidecar calls this for
/// every run, and a recorded stream may be hundreds of megabytes.
fn first_line(name_or_path: &str) -> Option<String> {
    use std::io::BufRead;
    if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return text.lines().next().map(str::to_owned);
    }
    let file = std::fs::File::open(name_or_path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file).read_line(&mut line).ok()?;
    Some(line)
}

/// True when the script's first line asks for Claude's bidirectional stdin.
pub fn is_interactive(name_or_path: &str) -> bool {
    first_line(name_or_path)
        .and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .is_some_and(|v| v.get("interactive") == Some(&serde_json::Value::Bool(true)))
}

/// Checks, before a run starts, that its script exists and can be read (without reading it
/// all into the sidecar's memory).
pub fn check(name_or_path: &str) -> Result<(), String> {
    if BUILTIN.iter().any(|(n, _)| *n == name_or_path) {
        return Ok(());
    }
    match std::fs::File::open(name_or_path).and_then(|f| f.metadata()) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(format!("the script {name_or_path:?} is not a file")),
        Err(_) => load(name_or_path).map(|_| ()),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Directive {
    out: Option<String>,
    #[serde(default)]
    delay_ms: u64,
    err: Option<String>,
    sleep_ms: Option<u64>,
    spawn: Option<Vec<String>>,
    exit: Option<i32>,
    await_stdin: Option<String>,
    await_file: Option<String>,
    at_ms: Option<u64>,
    stamp: Option<String>,
    repeat: Option<u64>,
}

/// The token of an `out` line that `repeat` replaces with the copy's number.
const COPY_TOKEN: &str = "@@N@@";

/// CLOCK_MONOTONIC in nanoseconds, the same clock in every process of the machine.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: plain syscall writing into a local.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads stdin on a thread of its own, so everything planwire writes is logged (to the file
/// named by `PLANWIRE_REPLAY_STDIN_LOG`, when set) even while the script is not waiting.
fn stdin_lines() -> (std::sync::mpsc::Receiver<String>, std::sync::mpsc::Receiver<()>) {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done) = std::sync::mpsc::channel();
    let mut log =
        std::env::var_os(STDIN_LOG).and_then(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).ok());
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if let Some(f) = log.as_mut() {
                let _ = writeln!(f, "{line}");
                let _ = f.flush();
            }
            let _ = tx.send(line);
        }
        let _ = done_tx.send(());
    });
    (rx, done)
}

/// When stdin is logged (tests), waits until planwire has closed it, so the log holds all it
/// wrote; planwire closes it after the final `result` line. Bounded, never a hang.
fn finish_stdin_log(done: &std::sync::mpsc::Receiver<()>) {
    if std::env::var_os(STDIN_LOG).is_some() {
        let _ = done.recv_timeout(Duration::from_secs(10));
    }
}

/// Waits for a stdin line of JSON type `kind`; false at end of input.
fn await_stdin(lines: &std::sync::mpsc::Receiver<String>, kind: &str) -> bool {
    for line in lines.iter() {
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v.get("type").and_then(|t| t.as_str()) == Some(kind) {
            return true;
        }
    }
    false
}

/// Runs a script in this process; returns the exit code.
pub fn replay(name_or_path: &str) -> i32 {
    let text = match load(name_or_path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("planwire replay: {e}");
            return 2;
        }
    };
    // Lines leave in bursts: whatever was written since the last pause is flushed before the
    // script waits, talks on stderr, spawns, reads stdin or ends. A paced line still leaves at
    // once; a full-speed stream costs one write(2) per 64 KiB instead of one per line, so
    // the replayer takes less of the CPU the sidecar is measured on.
    let mut stdout = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut children = Vec::new();
    let (stdin, stdin_done) = stdin_lines();
    let started = std::time::Instant::now();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let d: Directive = match serde_json::from_str(line) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("planwire replay: line {}: {e}", n + 1);
                return 2;
            }
        };
        let waits = d.delay_ms > 0 || d.sleep_ms.is_some() || d.at_ms.is_some() || d.await_file.is_some();
        if waits && stdout.flush().is_err() {
            return 141; // the reader is gone
        }
        if d.delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(d.delay_ms));
        }
        if let Some(ms) = d.sleep_ms {
            std::thread::sleep(Duration::from_millis(ms));
        }
        if let Some(at) = d.at_ms.map(Duration::from_millis) {
            std::thread::sleep(at.saturating_sub(started.elapsed()));
        }
        if let Some(path) = d.await_file {
            while !std::path::Path::new(&path).exists() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Some(mut out) = d.out {
            if let Some(token) = d.stamp.filter(|t| !t.is_empty()) {
                out = out.replace(&token, &monotonic_ns().to_string());
            }
            let numbered = out.contains(COPY_TOKEN);
            for n in 1..=d.repeat.unwrap_or(1) {
                let written = if numbered {
                    writeln!(stdout, "{}", out.replace(COPY_TOKEN, &n.to_string()))
                } else {
                    writeln!(stdout, "{out}")
                };
                if written.is_err() {
                    return 141; // the reader is gone
                }
            }
        }
        let hands_over = d.err.is_some() || d.spawn.is_some() || d.await_stdin.is_some() || d.exit.is_some();
        if hands_over && stdout.flush().is_err() {
            return 141;
        }
        if let Some(err) = d.err {
            eprintln!("{err}");
        }
        if let Some(argv) = d.spawn.filter(|a| !a.is_empty()) {
            match std::process::Command::new(&argv[0]).args(&argv[1..]).spawn() {
                Ok(child) => children.push(child),
                Err(e) => eprintln!("planwire replay: cannot spawn {:?}: {e}", argv[0]),
            }
        }
        if let Some(kind) = d.await_stdin {
            if !await_stdin(&stdin, &kind) {
                eprintln!("planwire replay: stdin ended while waiting for {kind}");
                return 3;
            }
        }
        if let Some(code) = d.exit {
            finish_stdin_log(&stdin_done);
            return code;
        }
    }
    if stdout.flush().is_err() {
        return 141;
    }
    finish_stdin_log(&stdin_done);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_end_with_a_known_exit() {
        for name in builtin_names() {
            let text = load(name).unwrap();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let _: Directive = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
            }
        }
        assert!(load("no-such-script").unwrap_err().contains("demo"));
    }

    #[test]
    fn writes_nothing_but_the_stdin_log_tests_ask_for() {
        use crate::planners::writable::tests::{env, paths};
        assert_eq!(writable(&env(&[])), []);
        let w = writable(&env(&[(STDIN_LOG, "/l/stdin.log")]));
        assert_eq!(paths(&w), ["/l/stdin.log"]);
        assert_eq!(w[0].kind, planwire_sandbox::Kind::File { initial: "" });
    }
}

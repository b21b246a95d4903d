//! The `script` planner: `planwire replay SCRIPT` replays a recorded stream with its timings
//! and exit code as a real child process, through the same supervisor path as a real CLI.
//! Tests and demos run with no network and no API key, and stop and kill are exercised for real.
//!
//! A script is JSON lines, one directive each:
//! `{"out": LINE, "delayMs": N}` prints LINE to stdout after N ms; `{"err": TEXT}` writes to
//! stderr; `{"sleepMs": N}`; `{"spawn": [ARGV…]}` starts a grandchild (for kill tests);
//! `{"exit": CODE}`. An optional first line `{"format": "claude"}` names the parser.

use std::io::Write;
use std::time::Duration;

use serde::Deserialize;

const BUILTIN: &[(&str, &str)] = &[
    ("demo", include_str!("../../scripts/demo.jsonl")),
    ("slow", include_str!("../../scripts/slow.jsonl")),
    ("questions", include_str!("../../scripts/questions.jsonl")),
    ("fail", include_str!("../../scripts/fail.jsonl")),
];

pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(n, _)| *n)
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

/// Checks, before a run starts, that its script exists.
pub fn check(name_or_path: &str) -> Result<(), String> {
    load(name_or_path).map(|_| ())
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
    let mut stdout = std::io::stdout().lock();
    let mut children = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let d: Directive = match serde_json::from_str(line) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("planwire replay: line {}: {e}", n + 1);
                return 2;
            }
        };
        if d.delay_ms > 0 {
            std::thread::sleep(Duration::from_millis(d.delay_ms));
        }
        if let Some(ms) = d.sleep_ms {
            std::thread::sleep(Duration::from_millis(ms));
        }
        if let Some(out) = d.out {
            if writeln!(stdout, "{out}")
                .and_then(|_| stdout.flush())
                .is_err()
            {
                return 141; // the reader is gone
            }
        }
        if let Some(err) = d.err {
            eprintln!("{err}");
        }
        if let Some(argv) = d.spawn.filter(|a| !a.is_empty()) {
            match std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .spawn()
            {
                Ok(child) => children.push(child),
                Err(e) => eprintln!("planwire replay: cannot spawn {:?}: {e}", argv[0]),
            }
        }
        if let Some(code) = d.exit {
            return code;
        }
    }
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
                let _: Directive =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
            }
        }
        assert!(load("no-such-script").unwrap_err().contains("demo"));
    }
}

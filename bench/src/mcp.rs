//! The `mcp` scenario: `planwire mcp` answers MCP's `initialize` as fast as `planwire --stdio`
//! answers LSP's. Both open the same existing database; the starts alternate (stdio, mcp,
//! stdio, …) so a busy machine slows both alike. Timed from just before the spawn to the
//! arrival of the response.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::json;

use super::client::{mono_ns, Options, Sidecar};
use super::stats::{line, median, ms, summary};
use super::{Config, Problems};

/// `planwire mcp` answered `initialize` this much later than `--stdio` at most (median).
const SLACK_MS: f64 = 2.0;

pub fn startup(cfg: &Config, problems: &mut Problems) {
    let n = if cfg.quick { 5 } else { 20 };
    println!("\n[mcp] spawn → initialize response, `planwire mcp` (NDJSON) against `--stdio` (LSP), existing DB; {n} starts each");
    let dir = cfg.scratch("mcp");
    let db = dir.join("planwire.db");
    let (mut sc, _) = Sidecar::spawn(&cfg.bin, &dir, Options { stamps: false });
    sc.initialize(&db);
    sc.shutdown();
    let (mut stdio_ms, mut mcp_ms) = (Vec::new(), Vec::new());
    for _ in 0..n {
        match Sidecar::timed_start(&cfg.bin, &dir, &db) {
            Ok((sc, t)) => {
                stdio_ms.push(t);
                sc.shutdown();
            }
            Err(e) => {
                problems.add(format!("mcp: --stdio initialize failed: {e}"));
                return;
            }
        }
        match mcp_initialize(&cfg.bin, &dir, &db) {
            Ok(t) => mcp_ms.push(t),
            Err(e) => {
                problems.add(format!("mcp: initialize failed: {e}"));
                return;
            }
        }
    }
    let (s, m) = (median(&stdio_ms), median(&mcp_ms));
    line(
        "--stdio (spawn → initialize)",
        &summary(&stdio_ms, ms),
        "reference",
        None,
    );
    line(
        "mcp (spawn → initialize)",
        &summary(&mcp_ms, ms),
        &format!("≤ --stdio + {SLACK_MS} ms ({})", ms(s + SLACK_MS)),
        Some(m <= s + SLACK_MS),
    );
    cfg.done_with(&dir);
}

/// One `planwire mcp` start: milliseconds from just before the spawn to the `initialize`
/// response; then stdin closes and it exits.
fn mcp_initialize(bin: &Path, dir: &Path, db: &Path) -> Result<f64, String> {
    let home = dir.join("home");
    let stderr = std::fs::File::create(super::client::unique(dir, "mcp-stderr", "log")).map_err(|e| e.to_string())?;
    // The child starts in the project: a relative `--bin` must not move with it.
    let mut cmd = Command::new(std::fs::canonicalize(bin).map_err(|e| format!("{}: {e}", bin.display()))?);
    cmd.arg("mcp")
        .arg("--db")
        .arg(db)
        .current_dir(dir.join("project"))
        .env("HOME", &home)
        .env("PLANWIRE_LOG", "warn")
        .env_remove("PLANWIRE_DB")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr);
    let t0 = mono_ns();
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let ok = BufReader::new(stdout).read_line(&mut line).is_ok();
        let _ = tx.send((ok.then_some(line), mono_ns()));
    });
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "planwire-bench", "version": "1"}}});
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{init}").map_err(|e| e.to_string())?;
    let got = rx.recv_timeout(Duration::from_secs(30));
    drop(stdin);
    let _ = child.wait();
    let (line, at) = got.map_err(|_| "no response within 30 s".to_owned())?;
    let line = line.ok_or("stdout closed")?;
    let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
    if v["result"]["protocolVersion"] != "2025-11-25" {
        return Err(format!("unexpected response: {line}"));
    }
    Ok((at - t0) as f64 / 1e6)
}

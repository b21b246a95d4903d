//! The terminal front: `planwire plan`, `tickets`, `show` and `doctor` as a person runs them.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::harness::*;

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A `planwire` command with the world's HOME, its `bin/` first on PATH, and nothing else
/// of this machine's environment.
fn command(w: &World, args: &[&str], path: Option<&str>) -> Command {
    let path = match path {
        Some(p) => p.to_owned(),
        None => format!(
            "{}:{}",
            w.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    };
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_clear()
        .env("HOME", w.path("home"))
        .env("PATH", path)
        .stdin(Stdio::null());
    cmd
}

/// Runs to the end (with a deadline); stdout and stderr go to files, so no pipe fills up.
fn run_in(w: &World, args: &[&str], path: Option<&str>) -> Output {
    let n = unique();
    let (out, err) = (w.path(&format!("out-{n}.txt")), w.path(&format!("err-{n}.txt")));
    let mut child = command(w, args, path)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn planwire");
    let code = wait_code(&mut child);
    Output {
        code,
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
    }
}

fn run(w: &World, args: &[&str]) -> Output {
    run_in(w, args, None)
}

fn wait_code(child: &mut Child) -> i32 {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("planwire did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_status(w: &World, run: i64) -> String {
    w.sqlite()
        .query_row("SELECT status FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap()
}

#[test]
fn plan_prints_the_transcript_and_the_plan_as_markdown() {
    let w = World::new();
    let (root, db) = (w.root(), w.db());
    let out = run(
        &w,
        &[
            "plan",
            "--root",
            &root,
            "--title",
            "Change the greeting",
            "--description",
            "Say hello to the world.",
            "--tool",
            "script",
            "--db",
            &db,
        ],
    );
    assert_eq!(out.code, 0, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    // The transcript: assistant text and tool lines.
    assert!(
        out.stdout.contains("Let me read the main file first."),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("▸ Read "), "{}", out.stdout);
    // The plan, as markdown, never as the raw block.
    assert!(
        out.stdout.contains("# Change the greeting printed by main"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("## Acceptance criteria"), "{}", out.stdout);
    assert!(out.stdout.contains("- `cargo build` succeeds"), "{}", out.stdout);
    assert!(!out.stdout.contains("<planwire-plan>"), "{}", out.stdout);
    assert!(!out.stdout.contains("acceptanceCriteria"), "{}", out.stdout);
    // Not a terminal: no spinner, no colour.
    assert!(!out.stdout.contains('\x1b') && !out.stderr.contains('\x1b'));
    assert!(out.stderr.contains("Planned ticket 1"), "{}", out.stderr);
    assert_eq!(run_status(&w, 1), "completed");

    // A second ticket that fails, in another root.
    let other = w.path("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = other.canonicalize().unwrap().display().to_string();
    let failed = run(
        &w,
        &[
            "plan",
            "--root",
            &other,
            "--title",
            "Broken key",
            "--tool",
            "script",
            "--model",
            "fail",
            "--db",
            &db,
        ],
    );
    assert_eq!(failed.code, 1, "stdout:\n{}\nstderr:\n{}", failed.stdout, failed.stderr);
    assert!(
        failed.stderr.contains("planning failed: Invalid API key"),
        "{}",
        failed.stderr
    );
    assert!(!failed.stdout.contains("<planwire-plan>"));

    // `tickets`: every root (with the root column), or one.
    let all = run(&w, &["tickets", "--db", &db]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    let rows: Vec<&str> = all.stdout.lines().collect();
    assert_eq!(rows.len(), 3, "{}", all.stdout);
    assert!(rows[0].contains("ID") && rows[0].contains("ROOT"));
    let row = |id: &str| {
        rows.iter()
            .find(|r| r.trim_start().starts_with(id))
            .unwrap()
            .to_string()
    };
    assert!(row("1 ").contains("planned") && row("1 ").contains("Change the greeting"));
    assert!(row("1 ").contains(&root));
    assert!(row("2 ").contains("failed") && row("2 ").contains(&other));
    let one = run(&w, &["tickets", "--root", &root, "--db", &db]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert_eq!(one.stdout.lines().count(), 2, "{}", one.stdout);
    assert!(!one.stdout.contains("ROOT") && !one.stdout.contains("Broken key"));

    // `show`: the ticket, its plan and its runs.
    let shown = run(&w, &["show", "1", "--db", &db]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    for needle in [
        "Ticket 1: Change the greeting",
        "status:  planned",
        "Say hello to the world.",
        "# Change the greeting printed by main",
        "- `cargo run` prints the new greeting",
        "run 1  completed  script",
    ] {
        assert!(shown.stdout.contains(needle), "{needle:?} in:\n{}", shown.stdout);
    }
    let shown = run(&w, &["show", "2", "--db", &db]);
    assert!(shown.stdout.contains("run 2  failed"), "{}", shown.stdout);
    assert!(shown.stdout.contains("Invalid API key"), "{}", shown.stdout);
    let missing = run(&w, &["show", "42", "--db", &db]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("ticket 42 does not exist"),
        "{}",
        missing.stderr
    );
}

#[test]
fn plan_with_a_missing_planner_says_what_to_install() {
    let w = World::new();
    let bin = w.path("bin").display().to_string();
    let out = run_in(
        &w,
        &[
            "plan",
            "--root",
            &w.root(),
            "--title",
            "T",
            "--tool",
            "codex",
            "--db",
            &w.db(),
        ],
        Some(&bin),
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("npm install -g @openai/codex"), "{}", out.stderr);
}

#[test]
fn doctor_names_what_to_install_and_passes_with_a_planner() {
    let w = World::new();
    let bin = w.path("bin").display().to_string();
    let db = w.db();
    // No planner on PATH at all.
    let out = run_in(&w, &["doctor", "--db", &db], Some(&bin));
    assert_ne!(out.code, 0, "{}", out.stdout);
    for needle in [
        "No planner is usable",
        "npm install -g @anthropic-ai/claude-code",
        "npm install -g opencode-ai",
        "npm install -g @openai/codex",
        &db,
        "does not exist yet: planwire creates it on first use",
        "PLANWIRE_LOG",
        "gh is not on PATH: GitHub issue and pull request links stay text",
    ] {
        assert!(out.stdout.contains(needle), "{needle:?} in:\n{}", out.stdout);
    }
    // With gh, doctor says links are read with it.
    w.fake_cli("gh", "#!/bin/sh\nexit 0\n");
    let out = run_in(&w, &["doctor", "--db", &db], Some(&bin));
    assert!(
        out.stdout
            .contains(&format!("gh {bin}/gh: GitHub issue and pull request links")),
        "{}",
        out.stdout
    );
    std::fs::remove_file(w.path("bin/gh")).unwrap();
    // A Claude Code on PATH.
    w.fake_cli(
        "claude",
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '2.1.197 (Claude Code)'; fi\n",
    );
    let out = run_in(&w, &["doctor", "--db", &db], Some(&bin));
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("2.1.197 (Claude Code)"), "{}", out.stdout);
    assert!(out.stdout.contains(&format!("{bin}/claude")), "{}", out.stdout);
    assert!(out.stdout.contains("Ready: claude"), "{}", out.stdout);
    // OpenCode without ripgrep is not usable, and doctor says why.
    w.fake_cli("opencode", "#!/bin/sh\necho 1.18.33\n");
    let out = run_in(&w, &["doctor", "--db", &db], Some(&bin));
    let line = out
        .stdout
        .lines()
        .skip_while(|l| !l.contains("opencode"))
        .nth(1)
        .unwrap_or("");
    assert!(line.contains("ripgrep (`rg`)"), "{}", out.stdout);
    // The database path resolves like the server's: PLANWIRE_DB when there is no --db.
    let env_db = w.path("from-env.db").display().to_string();
    let mut cmd = command(&w, &["doctor"], Some(&bin));
    let out = cmd.env("PLANWIRE_DB", &env_db).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&env_db) && stdout.contains("PLANWIRE_DB"), "{stdout}");
}

#[test]
fn ctrl_c_stops_the_planner_and_records_the_run_cancelled() {
    let w = World::new();
    let (root, db) = (w.root(), w.db());
    let mut child = command(
        &w,
        &[
            "plan", "--root", &root, "--title", "Slow", "--tool", "script", "--model", "slow", "--db", &db,
        ],
        None,
    )
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(w.path("ctrl-c.err")).unwrap())
    .spawn()
    .expect("spawn planwire");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // Wait until the planner streams text, so the stop lands mid-stream.
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).expect("some transcript text");
        if line.contains("Still reading the repository") {
            break;
        }
    }
    let (pgid, start) = run_group(&w, 1);
    assert!(group_alive(pgid, start), "the planner runs");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let code = wait_code(&mut child);
    let stderr = std::fs::read_to_string(w.path("ctrl-c.err")).unwrap();
    assert_eq!(code, 130, "stderr:\n{stderr}");
    assert!(stderr.contains("cancelled"), "{stderr}");
    // The planner's whole group is gone, and the run is recorded as cancelled.
    assert!(!group_alive(pgid, start));
    assert_eq!(run_status(&w, 1), "cancelled");
    let shown = run(&w, &["show", "1", "--db", &db]);
    assert!(shown.stdout.contains("status:  stopped"), "{}", shown.stdout);
    assert!(shown.stdout.contains("run 1  cancelled"), "{}", shown.stdout);
}

#[test]
fn a_plan_with_open_questions_exits_0_and_prints_them() {
    let w = World::new();
    let out = run(
        &w,
        &[
            "plan",
            "--root",
            &w.root(),
            "--title",
            "Greeting",
            "--tool",
            "script",
            "--model",
            "questions",
            "--db",
            &w.db(),
        ],
    );
    assert_eq!(out.code, 0, "stdout:\n{}\nstderr:\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("## Open questions"), "{}", out.stdout);
    assert!(
        out.stdout.contains("- Which greeting should the program print?"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("needs input"), "{}", out.stderr);
}

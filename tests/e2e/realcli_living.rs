//! The plan as a living document with the real Claude Code against the mock model server
//! (ignored by default, like the rest of the real-CLI tier): an edit refused during a run and
//! carried by the resumed replan, three versions through a replan and a feedback run that
//! resumes the session, export, and hand-off commands, one of them run for real in a pty.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::harness::*;
use crate::living::{fake_implementer, plan, run_handoff};
use crate::realcli::{cli, new_ticket, plan_answer, Mock};

/// planwire with the real Claude Code against the mock; hand-off files go to the world's
/// temp directory, removed with it.
fn server(w: &World, mock: Option<&Mock>) -> Server {
    let tmp = w.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let base = mock.map(|m| format!("http://127.0.0.1:{}", m.port)).unwrap_or_default();
    let ceiling = w.dir.path().display().to_string();
    let mut s = Server::start(
        w,
        &[
            ("ANTHROPIC_BASE_URL", &base),
            ("ANTHROPIC_API_KEY", "sk-ant-mock"),
            ("GIT_CEILING_DIRECTORIES", &ceiling),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
    );
    s.initialize(
        json!({ "dbPath": w.db(), "stopGraceMs": 2000, "planners": { "claude": { "path": cli("CLAUDE_BIN") } } }),
    );
    s
}

/// Kills a pty session's whole group when the test ends, passed or not.
struct Session {
    helper: std::process::Child,
    pid_file: std::path::PathBuf,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(pid) = std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            // SAFETY: a plain signal to the process group of the session this test started.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
        let _ = self.helper.kill();
        let _ = self.helper.wait();
    }
}

/// The model requests of the mock's log (not Claude's `HEAD /` probes).
pub(crate) fn model_requests(mock: &Mock) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| r["path"].as_str().unwrap_or("").starts_with("/v1/messages"))
        .collect()
}

/// The text of a message's content (a string, or its text and tool-result blocks).
pub(crate) fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or("").to_owned(),
                _ => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_edit_replan_feedback_versions_export_and_handoff() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            // Streamed slowly, so the run is surely active while the edit is tried.
            { "text": plan_answer("First plan"), "chunk_size": 16, "chunk_delay_ms": 100 },
            { "match": "edited the ticket since your last plan", "text": plan_answer("Second plan") },
            { "match": "FEEDBACK-7731", "text": plan_answer("Third plan") },
        ]}),
    );
    fake_implementer(&w, "codex");
    let mut s = server(&w, Some(&mock));
    let ticket = new_ticket(&mut s, &w, "claude");

    // Refused while the first run is active; nothing changes.
    s.seen.clear();
    let r1 = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    let e = s.err(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "description": "Make it say HELLO-EDITED." }),
    );
    assert_eq!(e["code"], -32010, "{e}");
    let t = s.wait_ticket(ticket, &["planned", "failed"]);
    assert_eq!(
        (t["status"].clone(), t["planVersion"].clone()),
        (json!("planned"), json!(1)),
        "{t}"
    );
    assert_eq!(t["description"], "Make it say hi.");

    // Accepted once it ended; the replan resumes the session and carries the new text.
    s.ok(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "description": "Make it say HELLO-EDITED." }),
    );
    let (r2, t) = plan(&mut s, json!({ "ticketId": ticket }));
    assert_eq!(
        (t["plan"]["title"].clone(), t["planVersion"].clone()),
        (json!("Second plan"), json!(2)),
        "{t}"
    );
    let replan = model_requests(&mock).pop().unwrap();
    let last = replan["body"]["messages"].as_array().unwrap().last().unwrap().clone();
    let text = content_text(&last);
    assert!(
        text.contains("HELLO-EDITED") && text.contains("the description changed"),
        "{text}"
    );

    // Requested changes: the same session, the feedback after the model's last answer.
    let feedback = "FEEDBACK-7731: also add a test that checks the output.";
    let (r3, t) = plan(&mut s, json!({ "ticketId": ticket, "feedback": feedback }));
    assert_eq!(
        (t["plan"]["title"].clone(), t["planVersion"].clone()),
        (json!("Third plan"), json!(3)),
        "{t}"
    );
    let request = model_requests(&mock).pop().unwrap();
    let messages = request["body"]["messages"].as_array().unwrap().clone();
    let (answer, asked) = (&messages[messages.len() - 2], &messages[messages.len() - 1]);
    assert_eq!(
        (answer["role"].clone(), asked["role"].clone()),
        (json!("assistant"), json!("user"))
    );
    assert!(content_text(answer).contains("Second plan"), "{answer}");
    assert!(content_text(asked).contains(feedback), "{asked}");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    let runs = got["runs"].as_array().unwrap();
    assert!(runs[0]["providerSessionId"].is_string());
    assert!(
        runs.iter()
            .all(|r| r["providerSessionId"] == runs[0]["providerSessionId"]),
        "{got}"
    );
    assert!(runs.iter().all(|r| r["timing"]["totalMs"].as_u64().unwrap() > 0));
    assert!(got["usage"]["inputTokens"].as_u64().unwrap() > 0, "{}", got["usage"]);

    // Every version stays.
    let plans = s.ok("planwire/listPlans", json!({ "ticketId": ticket }))["plans"].clone();
    let got: Vec<(Value, Value)> = plans
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["runId"].clone(), p["plan"]["title"].clone()))
        .collect();
    assert_eq!(
        got,
        [
            (json!(r1), json!("First plan")),
            (json!(r2), json!("Second plan")),
            (json!(r3), json!("Third plan"))
        ]
    );
    let one = s.ok("planwire/getPlan", json!({ "ticketId": ticket, "version": 1 }));
    assert_eq!(one["plan"]["title"], "First plan");

    // Export: the default path, a conflict, overwrite, and version 1 to a relative path.
    let r = s.ok("planwire/exportPlan", json!({ "ticketId": ticket }));
    let path = format!("{}/.planwire/plans/{ticket}-change-the-greeting.md", w.root());
    assert_eq!((r["path"].clone(), r["version"].clone()), (json!(path), json!(3)));
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("# Third plan\n"));
    assert_eq!(
        s.err("planwire/exportPlan", json!({ "ticketId": ticket }))["code"],
        -32014
    );
    s.ok("planwire/exportPlan", json!({ "ticketId": ticket, "overwrite": true }));
    let r = s.ok(
        "planwire/exportPlan",
        json!({ "ticketId": ticket, "version": 1, "path": "plans/first.md" }),
    );
    let first = std::fs::read_to_string(r["path"].as_str().unwrap()).unwrap();
    assert!(
        first.starts_with("# First plan\n") && first.contains("- [ ] it prints hi"),
        "{first}"
    );

    // Hand-off to another CLI than the planner: the command runs, in the root, with the plan.
    let h = s.ok("planwire/handoff", json!({ "ticketId": ticket, "tool": "codex" }));
    run_handoff(&h);
    let handed = std::fs::read_to_string(w.path("impl-plan.md")).unwrap();
    assert!(handed.starts_with("# Third plan\n") && handed.contains("Plan version 3 of planwire ticket"));
    let t = s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["ticket"].clone();
    assert_eq!(t["handedOffTool"], "codex");
}

/// A `~/.claude.json` that lets the interactive CLI start without its first-run dialogs:
/// onboarding done, the mock's API key approved, the project trusted.
fn interactive_home(w: &World, key: &str) {
    let config = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "customApiKeyResponses": { "approved": [&key[key.len() - 20..]], "rejected": [] },
        "projects": { w.root(): { "hasTrustDialogAccepted": true, "allowedTools": [] } },
    });
    std::fs::write(w.path("home/.claude.json"), config.to_string()).unwrap();
}

/// Runs `argv` in `cwd` on a pseudo-terminal (Python's `pty`, no shell); writes the child's
/// pid to `pid_file` (a session leader: its pgid is its pid).
fn in_pty(argv: &[String], cwd: &str, env: &[(&str, &str)], pid_file: &Path, log: &Path) -> std::process::Child {
    let helper = r#"
import os, pty, sys
pid_file, log, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
open(pid_file, "w").write(str(pid))
with open(log, "wb") as out:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out.write(data)
        out.flush()
os.waitpid(pid, 0)
"#;
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(helper)
        .arg(pid_file)
        .arg(log)
        .args(argv)
        .current_dir(cwd)
        .env_clear()
        .env("TERM", "xterm-256color")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("python3 runs the pty helper")
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_handoff_command_starts_an_interactive_session_that_reads_the_plan() {
    let w = World::new();
    let mut s = server(&w, None);
    let ticket = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "", "tool": "script", "model": "demo" }),
    )["id"]
        .as_i64()
        .unwrap();
    plan(&mut s, json!({ "ticketId": ticket }));
    let h = s.ok("planwire/handoff", json!({ "ticketId": ticket, "tool": "claude" }));
    let argv: Vec<String> = serde_json::from_value(h["argv"].clone()).unwrap();
    let plan_path = h["planPath"].as_str().unwrap().to_owned();
    // Interactive Claude also asks the model for side tasks (a session title); the main
    // agent's requests are the ones that list the agent types.
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "match": "Available agent types", "text": "Reading the plan.", "tool_calls": [{ "name": "Read", "input": { "file_path": plan_path } }] },
            { "match": "Available agent types", "text": "I have read the plan.", "repeat": -1 },
            { "text": "Implement the plan", "repeat": -1 },
        ]}),
    );

    let key = "sk-ant-mock-0000000000000000000000000000";
    interactive_home(&w, key);
    let base = format!("http://127.0.0.1:{}", mock.port);
    let home = w.path("home").display().to_string();
    let path = std::env::var("PATH").unwrap_or_default();
    let env = [
        ("HOME", home.as_str()),
        ("PATH", path.as_str()),
        ("ANTHROPIC_BASE_URL", base.as_str()),
        ("ANTHROPIC_API_KEY", key),
        ("DISABLE_AUTOUPDATER", "1"),
    ];
    let (pid_file, log) = (w.path("claude.pid"), w.path("claude-tty.log"));
    let _session = Session {
        helper: in_pty(&argv, h["cwd"].as_str().unwrap(), &env, &pid_file, &log),
        pid_file,
    };
    let read_the_plan = || {
        model_requests(&mock).iter().any(|r| {
            let body = r["body"].to_string();
            body.contains("tool_result") && body.contains("Plan version 1 of planwire ticket")
        })
    };
    eventually(
        "the interactive session reads the plan file",
        Duration::from_secs(90),
        read_the_plan,
    );
    let first = model_requests(&mock)
        .into_iter()
        .find(|r| r["body"].to_string().contains("Available agent types"))
        .unwrap();
    // The first prompt is the hand-off's, as the user's first message.
    let user = &first["body"]["messages"][0];
    assert_eq!(user["role"], "user");
    let prompt = content_text(user);
    assert!(
        prompt.contains(&format!("Implement the plan in the file {plan_path}")),
        "{prompt}"
    );

    // The session is the person's to end; here the test's guard ends it, with its group.
}

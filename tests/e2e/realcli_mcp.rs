//! The real-CLI tier for `planwire mcp`: the pinned real CLIs against our mock model server.
//! Ignored by default, like the rest of the tier.
//!
//! - The real Claude Code is the MCP client: `claude mcp add --scope user planwire --
//!   planwire mcp` (as the README says) puts planwire in the user's settings, the mock has
//!   the outer session call `create_ticket` and then `plan`, planwire plans with the real
//!   `claude` (sandboxed) against the same mock (its requests routed by the mock's `match`),
//!   and the outer session's next model request carries the plan's text as the tool result.
//!   The inner `claude` reads the same user settings, yet starts no MCP server: planwire's
//!   own server is started once, by the outer session.
//! - A user whose own Codex or OpenCode config names `planwire mcp` as an MCP server: the
//!   planner planwire starts may start it, but `planwire mcp` refuses to serve inside a pass,
//!   so none of planwire's tools reaches the model. A control server (the same binary, told
//!   nothing of the pass) shows that a user's server's tools do reach the model there.
//! - The real Codex reads the README's `config.toml` snippet as a server `planwire mcp` with the
//!   tool timeout a plan needs.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::*;
use crate::realcli::{claude_server, cli, plan_answer, Mock};
use crate::realcli_codex::codex_server;
use crate::realcli_opencode::{opencode_server, title_turn};

/// A run or a session must end well within this (they take seconds).
const BOUND: Duration = Duration::from_secs(300);
/// In every inner planner's prompt (planwire's answer format), never in the outer session's.
const INNER: &str = "<planwire-plan>";
/// In the outer session's prompt only.
const OUTER: &str = "OUTER-SESSION-7c1f";
const PLAN_TITLE: &str = "Greet with hi, planned through MCP";

/// A `planwire` on PATH that notes each start in `log` (a file the planner's sandbox lets
/// it write) and then is the real binary. `strip_pass`: it first forgets the pass it runs in
/// (the control server).
fn planwire_wrapper(w: &World, name: &str, log: &std::path::Path, strip_pass: bool) -> PathBuf {
    let unset = if strip_pass { "unset TMPDIR TMP TEMP\n" } else { "" };
    let script = format!(
        "#!/bin/sh\nmkdir -p '{dir}'\necho \"$$\" >> '{log}'\n{unset}exec '{BIN}' \"$@\"\n",
        dir = log.parent().unwrap().display(),
        log = log.display(),
    );
    let path = w.path(&format!("bin/{name}"));
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn starts(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log).map(|s| s.lines().count()).unwrap_or(0)
}

/// Every tool name the model was offered, over every request, as one string.
fn offered_tools(mock: &Mock, filter: impl Fn(&Value) -> bool) -> String {
    mock.requests()
        .iter()
        .filter(|r| filter(r))
        .map(|r| r["body"]["tools"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn body_has(r: &Value, needle: &str) -> bool {
    r["body"].to_string().contains(needle)
}

/// The environment of a Claude Code process started by the test (the same as planwire's
/// realcli tier gives it: the mock, no extra traffic, a private HOME).
fn claude_env(w: &World, mock: &Mock) -> Vec<(String, String)> {
    let home = w.path("home").display().to_string();
    vec![
        ("HOME".into(), home.clone()),
        ("XDG_CONFIG_HOME".into(), format!("{home}/.config")),
        ("XDG_DATA_HOME".into(), format!("{home}/.local/share")),
        ("XDG_CACHE_HOME".into(), format!("{home}/.cache")),
        ("XDG_STATE_HOME".into(), format!("{home}/.local/state")),
        (
            "PATH".into(),
            format!("{}:/usr/local/bin:/usr/bin:/bin", w.path("bin").display()),
        ),
        ("LANG".into(), "C.UTF-8".into()),
        ("SHELL".into(), "/bin/bash".into()),
        ("TERM".into(), "dumb".into()),
        ("ANTHROPIC_BASE_URL".into(), format!("http://127.0.0.1:{}", mock.port)),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-mock".into()),
        ("CLAUDE_CODE_MAX_RETRIES".into(), "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(), "1".into()),
        ("DISABLE_AUTOUPDATER".into(), "1".into()),
        ("DISABLE_TELEMETRY".into(), "1".into()),
        ("DISABLE_ERROR_REPORTING".into(), "1".into()),
        ("GIT_CEILING_DIRECTORIES".into(), w.dir.path().display().to_string()),
        ("PLANWIRE_LOG".into(), "info".into()),
    ]
}

fn claude(w: &World, mock: &Mock) -> Command {
    let mut cmd = Command::new(cli("CLAUDE_BIN"));
    cmd.env_clear().envs(claude_env(w, mock)).current_dir(w.root());
    cmd
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_mcp_claude_code_plans_a_ticket_through_planwire_mcp() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            // The inner planner (planwire's prompt asks for <planwire-plan>): the plan.
            { "match": INNER, "text": plan_answer(PLAN_TITLE), "repeat": -1 },
            // The outer session: a ticket, its plan, then an answer.
            { "match": OUTER, "text": "I will file a ticket.", "tool_calls": [
                { "name": "mcp__planwire__create_ticket", "id": "toolu_create",
                  "input": { "title": "Change the greeting", "description": "Make it say hi." } } ] },
            { "match": OUTER, "text": "Now the plan.", "tool_calls": [
                { "name": "mcp__planwire__plan", "id": "toolu_plan", "input": { "ticketId": 1 } } ] },
            { "match": OUTER, "text": "The plan is ready.", "repeat": -1 },
        ] }),
    );
    // `planwire` on PATH (noting each start in Claude's own state directory) and the inner
    // planner's `claude`.
    let log = w.path("home/.claude/planwire-mcp-starts");
    planwire_wrapper(&w, "planwire", &log, false);
    std::os::unix::fs::symlink(cli("CLAUDE_BIN"), w.path("bin/claude")).unwrap();

    // The README's install line, run by the real CLI: planwire in the user's settings.
    let add = claude(&w, &mock)
        .args(["mcp", "add", "--scope", "user", "planwire", "--", "planwire", "mcp"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(add.status.success(), "claude mcp add: {add:?}");
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(w.path("home/.claude.json")).unwrap()).unwrap();
    assert_eq!(settings["mcpServers"]["planwire"]["command"], "planwire", "{settings}");

    let mut outer = claude(&w, &mock)
        .args([
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "mcp__planwire__create_ticket,mcp__planwire__plan",
        ])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(w.path("outer.stdout.jsonl")).unwrap())
        .stderr(std::fs::File::create(w.path("outer.stderr.txt")).unwrap())
        .spawn()
        .unwrap();
    let prompt = format!("{OUTER}: file a ticket to change the greeting, then plan it with planwire.");
    outer.stdin.take().unwrap().write_all(prompt.as_bytes()).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = outer.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > BOUND {
            let _ = outer.kill();
            panic!(
                "the outer session did not end within {BOUND:?}; stdout:\n{}",
                std::fs::read_to_string(w.path("outer.stdout.jsonl")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stdout = std::fs::read_to_string(w.path("outer.stdout.jsonl")).unwrap_or_default();
    assert!(status.success(), "outer claude: {status:?}\n{stdout}");

    let requests = mock.requests();
    let outer_requests: Vec<&Value> = requests
        .iter()
        .filter(|r| body_has(r, OUTER) && !body_has(r, INNER))
        .collect();
    let inner_requests: Vec<&Value> = requests.iter().filter(|r| body_has(r, INNER)).collect();
    assert!(
        !inner_requests.is_empty(),
        "the inner planner asked the model: {requests:?}"
    );
    // The outer session was offered planwire's tools...
    assert!(
        outer_requests[0]["body"]["tools"]
            .to_string()
            .contains("mcp__planwire__plan"),
        "{}",
        outer_requests[0]["body"]["tools"]
    );
    // ...and its request after the plan call carries the plan as the tool's result.
    let after_plan = outer_requests
        .iter()
        .find(|r| body_has(r, "toolu_plan") && body_has(r, "tool_result"))
        .unwrap_or_else(|| panic!("no outer request after the plan call: {outer_requests:?}"));
    let body = after_plan["body"].to_string();
    assert!(body.contains(PLAN_TITLE), "{body}");
    assert!(body.contains("Edit `src/main.rs`"), "{body}");
    // The inner planner saw no MCP tool, and planwire's server started once: the outer's.
    let inner_tools: String = inner_requests.iter().map(|r| r["body"]["tools"].to_string()).collect();
    assert!(!inner_tools.contains("mcp__"), "{inner_tools}");
    assert_eq!(starts(&log), 1, "planwire mcp starts");

    // The plan is planwire's: stored, planned by the real claude inside the OS sandbox.
    let db = w.path("home/.local/share/planwire/planwire.db");
    let c = rusqlite::Connection::open(&db).unwrap();
    let (status, tool, sandbox): (String, String, String) = c
        .query_row(
            "SELECT r.status, r.tool, r.sandbox FROM runs r WHERE r.ticket_id = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((status.as_str(), tool.as_str()), ("completed", "claude"));
    assert_eq!(sandbox, "enforced");
}

/// A user config that names `planwire mcp` (`planwire`) and a control server that is told
/// nothing of the pass; returns the two start logs.
fn user_servers(w: &World, state: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let planwire_log = w.path(&format!("{state}/planwire-mcp-starts"));
    let control_log = w.path(&format!("{state}/control-mcp-starts"));
    let planwire = planwire_wrapper(w, "planwire-user", &planwire_log, false);
    let control = planwire_wrapper(w, "planwire-control", &control_log, true);
    (planwire, planwire_log, control, control_log)
}

/// Plans a ticket with `tool` and waits for the run's end; returns the run.
fn plan_to_end(s: &mut Server, w: &World, tool: &str) -> Value {
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "Make it say hi.", "tool": tool }),
    );
    let ticket = r["ticketId"].as_i64().unwrap();
    let started = Instant::now();
    loop {
        let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
        let run = got["runs"][0].clone();
        if run["status"] != "queued" && run["status"] != "running" {
            assert_eq!(run["status"], "completed", "{tool}: {got}\nstderr:\n{}", s.stderr());
            return run;
        }
        assert!(started.elapsed() < BOUND, "{tool}: the run did not end: {got}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// planwire's tools never reached the model; the control's did.
fn assert_only_control_tools(tool: &str, offered: &str, planwire: &str, control: &str) {
    assert!(
        offered.contains(control),
        "{tool}: the control server's tools did not reach the model, so this test sees nothing: {offered}"
    );
    assert!(
        !offered.contains(planwire),
        "{tool}: planwire's own MCP tools reached the planner: {offered}"
    );
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_mcp_a_users_codex_config_never_gives_the_planner_planwires_tools() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [ { "text": plan_answer("Codex plan"), "repeat": -1 } ] }),
    );
    let mut s = codex_server(&w, &mock);
    let (planwire, planwire_log, control, control_log) = user_servers(&w, "codex-home/mcp-trace");
    let control_db = w.path("codex-home/mcp-trace/control.db");
    let servers = format!(
        "\n[mcp_servers.planwire]\ncommand = \"{}\"\nargs = [\"mcp\", \"--tool\", \"script\"]\n\n\
         [mcp_servers.control]\ncommand = \"{}\"\nargs = [\"mcp\", \"--db\", \"{}\", \"--tool\", \"script\"]\n",
        planwire.display(),
        control.display(),
        control_db.display()
    );
    let config = w.path("codex-home/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&servers);
    std::fs::write(&config, text).unwrap();
    let run = plan_to_end(&mut s, &w, "codex");
    assert_eq!(run["sandbox"], "enforced", "{run}");
    // Codex defers MCP tools behind its `tool_search`, naming each server's namespace in
    // the model's input ("Deferred tool namespaces: - mcp__control: …").
    let offered: String = mock.requests().iter().map(|r| r["body"].to_string()).collect();
    assert_only_control_tools("codex", &offered, "mcp__planwire", "mcp__control");
    assert!(starts(&planwire_log) >= 1, "Codex started the user's planwire server");
    assert!(starts(&control_log) >= 1);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_mcp_a_users_opencode_config_never_gives_the_planner_planwires_tools() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [ title_turn(), { "text": plan_answer("OpenCode plan"), "repeat": -1 } ] }),
    );
    let mut s = opencode_server(&w, &mock);
    let (planwire, planwire_log, control, control_log) = user_servers(&w, "home/.local/share/opencode/mcp-trace");
    let control_db = w.path("home/.local/share/opencode/mcp-trace/control.db");
    // The user's own config (OPENCODE_CONFIG), read at each pass's start.
    let path = w.path("opencode.config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    config["mcp"] = json!({
        "planwire": { "type": "local", "command": [planwire, "mcp", "--tool", "script"] },
        "control": { "type": "local", "command": [control, "mcp", "--db", control_db, "--tool", "script"] },
    });
    std::fs::write(&path, config.to_string()).unwrap();
    let run = plan_to_end(&mut s, &w, "opencode");
    assert_eq!(run["sandbox"], "enforced", "{run}");
    let offered = offered_tools(&mock, |r| r["path"] == "/v1/chat/completions");
    assert_only_control_tools("opencode", &offered, "planwire_", "control_");
    assert!(
        starts(&planwire_log) >= 1,
        "OpenCode started the user's planwire server"
    );
    assert!(starts(&control_log) >= 1);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_mcp_a_users_claude_servers_never_start_in_the_planner() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [ { "text": plan_answer("Claude plan"), "repeat": -1 } ] }),
    );
    let mut s = claude_server(&w, &mock);
    let (planwire, planwire_log, control, control_log) = user_servers(&w, "home/.claude/mcp-trace");
    let control_db = w.path("home/.claude/mcp-trace/control.db");
    // What `claude mcp add --scope user` writes into ~/.claude.json.
    let server = |cmd: &PathBuf, args: Value| json!({ "type": "stdio", "command": cmd, "args": args, "env": {} });
    let settings = json!({ "mcpServers": {
        "planwire": server(&planwire, json!(["mcp", "--tool", "script"])),
        "control": server(&control, json!(["mcp", "--db", control_db, "--tool", "script"])),
    } });
    std::fs::write(w.path("home/.claude.json"), settings.to_string()).unwrap();
    let run = plan_to_end(&mut s, &w, "claude");
    assert_eq!(run["sandbox"], "enforced", "{run}");
    // --strict-mcp-config with an empty --mcp-config: Claude starts neither server.
    let offered = offered_tools(&mock, |_| true);
    assert!(!offered.contains("mcp__"), "{offered}");
    assert_eq!((starts(&planwire_log), starts(&control_log)), (0, 0));
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_mcp_the_real_codex_reads_the_readmes_snippet() {
    let w = World::new();
    let (_, body) = crate::mcp_install::snippet(&crate::mcp_install::readme(), "Codex, in `~/.codex/config.toml`");
    let home = w.path("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), body).unwrap();
    let out = Command::new(cli("CODEX_BIN"))
        .args(["mcp", "list", "--json"])
        .env("CODEX_HOME", &home)
        .env("HOME", w.path("home"))
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let planwire = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "planwire")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(planwire["enabled"], true, "{planwire}");
    assert_eq!(planwire["transport"]["command"], "planwire", "{planwire}");
    assert_eq!(planwire["transport"]["args"], json!(["mcp"]), "{planwire}");
    assert_eq!(planwire["tool_timeout_sec"].as_f64(), Some(1800.0), "{planwire}");
}

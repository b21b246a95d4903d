//! The real-CLI tier for ACP agents as planners (`acp:<name>`): real agents that run offline
//! here, through the real planwire binary, against the mock model server. In each, the model
//! reads a file, tries to write one, then answers with a plan: the plan is stored, the file
//! does not exist, the write was refused, and the plan mode was selected before the prompt.
//! Ignored by default; CI runs them with `--ignored` after `tests/realcli/install.sh`.

use serde_json::{json, Value};

use crate::harness::*;
use crate::realcli::{cli, plan_answer, transcript, Mock};
use crate::realcli_opencode::opencode_env;

const FORBIDDEN: &str = "PLANWIRE_FORBIDDEN.md";

fn world() -> World {
    let w = World::new();
    std::fs::write(
        w.path("project/README.md"),
        "# Demo\nThe greeting lives in src/main.rs.\n",
    )
    .unwrap();
    w
}

fn root_file(w: &World, name: &str) -> String {
    format!("{}/{name}", w.root())
}

/// Plans a new ticket with `tool`; returns (ticket, run).
fn plan(s: &mut Server, w: &World, tool: &str) -> (i64, i64) {
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "Make it say hi.", "tool": tool }),
    );
    (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap())
}

/// The common checks: planned with `title`, the file absent, the mode recorded, the group gone.
fn assert_planned_read_only(s: &mut Server, w: &World, ticket: i64, run: i64, title: &str, mode: &str) -> Vec<Value> {
    let r = run_ends(s, run);
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(r["status"], "completed", "{got}\nstderr:\n{}", s.stderr());
    assert_eq!(r["sandbox"], "enforced", "the agent ran inside the OS sandbox");
    assert_eq!(got["ticket"]["plan"]["title"], title, "{got}");
    assert!(!w.path(&format!("project/{FORBIDDEN}")).exists(), "the write landed");
    let events = transcript(s, run);
    let recorded = events
        .iter()
        .find(|e| e["kind"] == "raw" && e["line"].as_str().unwrap_or("").contains("acpMode"))
        .unwrap_or_else(|| panic!("no mode recorded: {events:?}"));
    let line: Value = serde_json::from_str(recorded["line"].as_str().unwrap()).unwrap();
    assert_eq!(line["acpMode"], mode, "{line}");
    assert!(events.iter().any(|e| e["kind"] == "session"));
    let (pgid, start) = run_group(w, run);
    assert!(!group_alive(pgid, start), "the agent's process group is gone");
    events
}

fn server(w: &World, env: &[(String, String)], options: Value) -> Server {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut s = Server::start(w, &env);
    let mut init = json!({ "dbPath": w.db(), "stopGraceMs": 2000 });
    init.as_object_mut()
        .unwrap()
        .extend(options.as_object().unwrap().clone());
    s.initialize(init);
    s
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_acp_opencode_plans_in_plan_mode_and_the_write_is_refused() {
    let w = world();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "match": "You are a title generator", "text": "Greeting plan", "repeat": -1 },
            { "tool_calls": [{ "name": "read", "input": { "filePath": root_file(&w, "README.md") } }] },
            { "tool_calls": [{ "name": "write", "input": { "filePath": root_file(&w, FORBIDDEN), "content": "x" } }] },
            { "text": plan_answer("OpenCode ACP plan") },
        ] }),
    );
    let env = opencode_env(&w, &mock);
    let mut s = server(
        &w,
        &env,
        json!({ "planners": { "acp:opencode": { "path": cli("OPENCODE_BIN") } } }),
    );
    let (ticket, run) = plan(&mut s, &w, "acp:opencode");
    let events = assert_planned_read_only(&mut s, &w, ticket, run, "OpenCode ACP plan", "mode=plan");
    let calls: Vec<&Value> = events.iter().filter(|e| e["kind"] == "toolCall").collect();
    assert!(calls.len() >= 2, "{events:?}");
    // planwire's read-only rules (edit: deny) leave opencode without a write tool at all.
    let write = calls
        .iter()
        .find(|c| c["name"] == "write")
        .expect("the write was tried");
    let result = events
        .iter()
        .find(|e| e["kind"] == "toolResult" && e["callId"] == write["callId"])
        .unwrap();
    let output = result["output"].as_str().unwrap();
    assert!(
        result["status"] == "error" || output.contains("unavailable tool") || output.contains("prevents"),
        "{result}"
    );
    let read = calls.iter().find(|c| c["name"] == "read").unwrap();
    assert!(read["input"].as_str().unwrap().ends_with("README.md"), "{read}");
}

fn qwen_env(mock: &Mock) -> Vec<(String, String)> {
    vec![
        ("OPENAI_BASE_URL".into(), format!("http://127.0.0.1:{}/v1", mock.port)),
        ("OPENAI_API_KEY".into(), "sk-mock".into()),
        ("OPENAI_MODEL".into(), "mock-model".into()),
    ]
}

/// Turns picked by what the conversation holds so far (the last match first), so side
/// requests an agent makes (memory, next-speaker checks) cannot take a step's turn.
fn read_write_answer(w: &World, read: (&str, &str), write: (&str, &str), refused: &str, answer: &str) -> Value {
    json!({ "turns": [
        { "match": refused, "text": answer },
        { "match": "The greeting lives in", "tool_calls": [{ "name": write.0, "input": { write.1: root_file(w, FORBIDDEN), "content": "x" } }] },
        { "match": "ticket-title", "tool_calls": [{ "name": read.0, "input": { read.1: root_file(w, "README.md") } }] },
        { "text": "OK", "repeat": -1 },
    ] })
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_acp_qwen_plans_in_plan_mode_and_the_write_is_refused() {
    let w = world();
    let script = read_write_answer(
        &w,
        ("read_file", "file_path"),
        ("write_file", "file_path"),
        "cannot be executed because it modifies",
        &plan_answer("Qwen ACP plan"),
    );
    let mock = Mock::start(&w, script);
    let mut s = server(
        &w,
        &qwen_env(&mock),
        json!({ "planners": { "acp:qwen": { "path": cli("QWEN_BIN") } } }),
    );
    let (ticket, run) = plan(&mut s, &w, "acp:qwen");
    let events = assert_planned_read_only(&mut s, &w, ticket, run, "Qwen ACP plan", "plan");
    let write = events
        .iter()
        .find(|e| e["kind"] == "toolCall" && e["name"].as_str().unwrap_or("").to_lowercase().contains("write"))
        .unwrap_or_else(|| panic!("the write was tried: {events:?}"));
    let result = events
        .iter()
        .find(|e| e["kind"] == "toolResult" && e["callId"] == write["callId"])
        .unwrap();
    assert!(
        result["output"].as_str().unwrap().contains("cannot be executed") || result["status"] == "error",
        "{result}"
    );
}

fn claude_acp_env(w: &World, mock: &Mock) -> Vec<(String, String)> {
    vec![
        ("ANTHROPIC_BASE_URL".into(), format!("http://127.0.0.1:{}", mock.port)),
        ("ANTHROPIC_API_KEY".into(), "sk-ant-mock".into()),
        ("GIT_CEILING_DIRECTORIES".into(), w.dir.path().display().to_string()),
    ]
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_acp_claude_rejects_the_write_and_is_prompted_once_more() {
    let w = world();
    // The adapter serves Claude's reads through planwire (mcp__acp__Read); its write asks, is
    // refused, and the refusal ends the turn: planwire prompts once more for the plan.
    let script = json!({ "turns": [
        { "match": "refused because planning is read-only", "text": plan_answer("Claude ACP plan") },
        { "match": "The greeting lives in", "tool_calls": [{ "name": "Write", "input": { "file_path": root_file(&w, FORBIDDEN), "content": "x" } }] },
        { "match": "ticket-title", "tool_calls": [{ "name": "mcp__acp__Read", "input": { "file_path": root_file(&w, "README.md") } }] },
        { "text": "OK", "repeat": -1 },
    ] });
    let mock = Mock::start(&w, script);
    let mut s = server(
        &w,
        &claude_acp_env(&w, &mock),
        json!({ "planners": { "acp:claude-acp": { "path": cli("CLAUDE_ACP_BIN") } } }),
    );
    let (ticket, run) = plan(&mut s, &w, "acp:claude-acp");
    let events = assert_planned_read_only(&mut s, &w, ticket, run, "Claude ACP plan", "plan");
    let read = events
        .iter()
        .find(|e| e["kind"] == "toolResult" && e["output"].as_str().unwrap_or("").contains("The greeting lives in"));
    assert!(read.is_some(), "the read was served: {events:?}");
    let reprompted = mock
        .requests()
        .iter()
        .any(|r| r["body"].to_string().contains("refused because planning is read-only"));
    assert!(
        reprompted,
        "the refused write ended the turn and planwire prompted once more"
    );
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_acp_qwen_stop_mid_stream_leaves_no_process() {
    let w = world();
    let long = "word ".repeat(400);
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "match": "ticket-title", "text": long, "chunk_size": 8, "chunk_delay_ms": 100 }, { "text": "OK", "repeat": -1 }] }),
    );
    let mut s = server(
        &w,
        &qwen_env(&mock),
        json!({ "planners": { "acp:qwen": { "path": cli("QWEN_BIN") } } }),
    );
    let (ticket, run) = plan(&mut s, &w, "acp:qwen");
    s.wait_for("streamed text", |m| {
        m["method"] == "planwire/delta" && m["params"]["runId"] == run
    });
    let (pgid, start) = run_group(&w, run);
    assert!(group_alive(pgid, start));
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start), "qwen and its children are gone");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        (got["ticket"]["status"].clone(), got["runs"][0]["status"].clone()),
        (json!("stopped"), json!("cancelled"))
    );
}

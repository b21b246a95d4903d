//! The real-CLI tier for OpenCode through planwire: the pinned real `opencode` (native binary
//! from `.cache/planners/paths.env`) plans tickets through the real planwire binary, each pass on
//! its own `opencode serve`, against our mock model server (OpenAI Chat Completions SSE).
//! Ignored by default; CI runs them with `--ignored` after `tests/realcli/install.sh` succeeded.
//! The live cases (questions, deltas, permissions, a cut stream, a locked database) are in
//! `realcli_opencode_live.rs`.
//!
//! The test gives OpenCode only a provider (`OPENCODE_CONFIG`, the user's own config as far as
//! planwire knows); the read-only permission rules are planwire's own (`OPENCODE_CONFIG_CONTENT`
//! and `OPENCODE_PERMISSION`), so the refused `touch` below checks planwire, not the test.
//! OpenCode takes 4–20 s per run on a loaded 2-core machine: every wait is a condition with a
//! deadline. After each run its server's process group is checked to be gone.

use std::time::Instant;

use serde_json::{json, Value};

use crate::harness::*;
use crate::realcli::{
    assert_planned, cli, group_gone, kinds, new_ticket, plan, plan_answer, run_ends, transcript, Mock,
};

/// OpenCode's title-generation request (planwire gives the session a title, so it should never
/// come; the turn keeps such a request off the main thread's turns should it come anyway).
const TITLE_TURN: &str = "You are a title generator";

pub fn title_turn() -> Value {
    json!({ "match": TITLE_TURN, "text": "Greeting plan", "repeat": -1 })
}

pub fn opencode_server(w: &World, mock: &Mock) -> Server {
    opencode_server_at(w, mock, &cli("OPENCODE_BIN"), &[])
}

/// planwire with OpenCode at `path` (the real binary, or a wrapper of it), with `env` added.
pub fn opencode_server_at(w: &World, mock: &Mock, path: &str, env: &[(&str, &str)]) -> Server {
    let mut vars = opencode_env(w, mock);
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut s = Server::start(w, &vars);
    s.initialize(json!({ "dbPath": w.db(), "stopGraceMs": 2000, "planners": { "opencode": { "path": path } } }));
    s
}

/// The environment that gives OpenCode the mock as its only provider.
pub fn opencode_env(w: &World, mock: &Mock) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{}", mock.port);
    let config = json!({
        "provider": { "mock": {
            "npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": { "baseURL": format!("{url}/v1"), "apiKey": "sk-mock" },
            "models": { "mock-model": { "name": "Mock Model", "limit": { "context": 128000, "output": 8192 } } },
        } },
        "model": "mock/mock-model",
        "small_model": "mock/mock-model",
        "autoupdate": false,
        "share": "disabled",
    });
    let config_path = w.path("opencode.config.json");
    std::fs::write(&config_path, config.to_string()).unwrap();
    // OpenCode fetches npm metadata in the background on a fresh HOME: keep it on the mock.
    vec![
        ("OPENCODE_CONFIG".into(), config_path.display().to_string()),
        ("npm_config_registry".into(), format!("{url}/npm/")),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

/// The model requests of the main conversation (Chat Completions, title requests left out).
pub(crate) fn chat_requests(mock: &Mock) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| r["path"] == "/v1/chat/completions" && !r["body"].to_string().contains(TITLE_TURN))
        .collect()
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_plain_plan() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), { "thinking": "Let me think.", "text": plan_answer("OpenCode plan") }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    let got = assert_planned(&mut s, &w, ticket, run, "OpenCode plan");
    assert_eq!(got["runs"][0]["tool"], "opencode");
    assert!(
        got["runs"][0]["providerSessionId"]
            .as_str()
            .unwrap()
            .starts_with("ses_"),
        "{got}"
    );

    let events = transcript(&mut s, run);
    let k = kinds(&events);
    for want in ["session", "text", "usage"] {
        assert!(k.contains(&want.to_owned()), "{want} missing: {k:?}");
    }
    let last_text = events.iter().rfind(|e| e["kind"] == "text").unwrap();
    assert_eq!(last_text["final"], true, "{last_text}");
    assert!(last_text["text"].as_str().unwrap().contains("<planwire-plan>"));
    let usage = events.iter().rfind(|e| e["kind"] == "usage").unwrap();
    assert!(usage["inputTokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["outputTokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(
        !k.contains(&"raw".to_owned()),
        "every server event was understood: {events:?}"
    );
    // The text streamed as live deltas before it was stored: what they sent is the start of
    // the stored text (the stored text closes the block; pieces held back then are not sent).
    let deltas: String = s
        .seen
        .iter()
        .filter(|m| m["method"] == "planwire/delta" && m["params"]["runId"] == run && m["params"]["kind"] == "text")
        .map(|m| m["params"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(!deltas.is_empty(), "no delta was sent");
    assert!(last_text["text"].as_str().unwrap().starts_with(&deltas), "{deltas:?}");

    // One model request (the session's title saves the title request), carrying the prompt and
    // the ticket root (the server's instance directory is its cwd).
    let reqs = mock.requests();
    let chats: Vec<&Value> = reqs.iter().filter(|r| r["path"] == "/v1/chat/completions").collect();
    assert_eq!(chats.len(), 1, "{chats:?}");
    let body = chats[0]["body"].to_string();
    assert!(body.contains("Make it say hi."), "prompt missing");
    assert!(body.contains(&w.root()), "ticket root missing from the system prompt");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_read_only_tool_calls() {
    let w = World::new();
    let main_rs = format!("{}/src/main.rs", w.root());
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            title_turn(),
            { "text": "Let me look around.", "tool_calls": [
                { "name": "read", "id": "call_read", "input": { "filePath": main_rs } },
                { "name": "bash", "id": "call_ls", "input": { "command": "ls src", "description": "List sources" } },
                { "name": "bash", "id": "call_touch", "input": { "command": "touch should_not_exist.txt", "description": "Create a file" } },
            ] },
            { "text": plan_answer("Read-only plan") },
        ]}),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    assert_planned(&mut s, &w, ticket, run, "Read-only plan");
    assert!(
        !w.path("project/should_not_exist.txt").exists(),
        "planwire let OpenCode's plan agent run `touch`"
    );

    let events = transcript(&mut s, run);
    let call = |id: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "toolCall" && e["callId"] == id)
            .unwrap_or_else(|| panic!("no toolCall {id}: {events:?}"))
    };
    let result = |id: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "toolResult" && e["callId"] == id)
            .unwrap_or_else(|| panic!("no toolResult {id}: {events:?}"))
    };
    assert_eq!(call("call_read")["name"], "read");
    assert_eq!(result("call_read")["status"], "completed", "{}", result("call_read"));
    assert!(result("call_read")["output"].as_str().unwrap().contains("fn main"));
    assert_eq!(call("call_ls")["name"], "bash");
    assert_eq!(result("call_ls")["status"], "completed", "{}", result("call_ls"));
    assert!(result("call_ls")["output"].as_str().unwrap().contains("main.rs"));
    assert_eq!(call("call_touch")["name"], "bash");
    assert!(call("call_touch")["input"].as_str().unwrap().contains("touch"));
    assert_eq!(result("call_touch")["status"], "error", "{}", result("call_touch"));
    // Each call comes before its result.
    let pos = |kind: &str, id: &str| {
        events
            .iter()
            .position(|e| e["kind"] == kind && e["callId"] == id)
            .unwrap()
    };
    for id in ["call_read", "call_ls", "call_touch"] {
        assert!(pos("toolCall", id) < pos("toolResult", id));
    }
    // The model saw the refusal and the file's content.
    let second = chat_requests(&mock)[1]["body"].to_string();
    assert!(second.contains("fn main"), "{second}");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_subagent_gets_its_own_agent_run() {
    let w = World::new();
    let marker = "SUBAGENT-MARKER: find where the greeting is printed";
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            title_turn(),
            // The child's requests carry the marker (its prompt). Listed before the main turns so
            // they win over the main thread's next request, which holds the marker in the task call.
            { "match": marker, "text": "Child: looking.", "tool_calls": [
                { "name": "bash", "id": "call_child_touch", "input": { "command": "touch child_was_here.txt", "description": "Create a file" } },
            ] },
            { "match": marker, "text": "CHILD REPORT: the greeting is printed in src/main.rs." },
            { "text": "I will ask an explorer.", "tool_calls": [
                { "name": "task", "id": "call_task", "input": { "description": "Find greeting", "prompt": marker, "subagent_type": "explore" } },
            ] },
            { "text": plan_answer("Plan after research") },
        ]}),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    assert_planned(&mut s, &w, ticket, run, "Plan after research");
    assert!(
        !w.path("project/child_was_here.txt").exists(),
        "the subagent's `touch` ran"
    );

    let events = transcript(&mut s, run);
    let sub: Vec<&Value> = events.iter().filter(|e| e["kind"] == "subagent").collect();
    assert_eq!(sub.len(), 2, "{events:?}");
    assert_eq!(
        (sub[0]["phase"].clone(), sub[1]["phase"].clone()),
        (json!("start"), json!("end"))
    );
    let agent = sub[0]["agentRunId"].clone();
    assert!(agent.is_i64(), "{}", sub[0]);
    assert_eq!(sub[1]["agentRunId"], agent);
    assert_eq!(sub[1]["status"], "completed", "{}", sub[1]);
    // The child's final result, under its agent run.
    assert!(
        events.iter().any(|e| e["agentRunId"] == agent
            && e["kind"] == "text"
            && e["text"].as_str().unwrap().contains("CHILD REPORT")),
        "{events:?}"
    );
    // The task call and its result belong to the main agent.
    let task = events
        .iter()
        .find(|e| e["kind"] == "toolCall" && e["callId"] == "call_task")
        .unwrap();
    assert_eq!(task["name"], "task");
    assert!(events
        .iter()
        .any(|e| e["kind"] == "toolResult" && e["callId"] == "call_task" && e["status"] == "completed"));
    // The child's own tool calls stream live under its agent run; its `touch` is refused.
    let child_touch = events
        .iter()
        .find(|e| e["kind"] == "toolResult" && e["callId"] == "call_child_touch")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(child_touch["agentRunId"], agent, "{child_touch}");
    assert_eq!(child_touch["status"], "error", "{child_touch}");
    // The final answer is the main agent's.
    let fin = events.iter().rfind(|e| e["kind"] == "text").unwrap();
    assert_eq!(fin["final"], true);
    assert!(fin.get("agentRunId").is_none_or(|a| a.is_null()), "{fin}");
    // The child ran for real: its second request came (after its refused `touch`).
    let child_requests = chat_requests(&mock).into_iter().filter(|r| r["turn"] == 2).count();
    assert_eq!(child_requests, 1);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_auth_error_fails_fast_with_its_message() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "error": { "status": 401, "message": "Incorrect API key provided: sk-mock." }, "repeat": -1 }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let started = Instant::now();
    let run = plan(&mut s, ticket);
    let r = run_ends(&mut s, run);
    let took = started.elapsed();
    assert_eq!(r["status"], "failed", "{r}");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["ticket"]["status"], "failed", "{got}");
    assert_eq!(got["runs"][0]["failure"]["code"], "planner_error", "{got}");
    let events = transcript(&mut s, run);
    let err = events
        .iter()
        .find(|e| e["kind"] == "error")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(err["errorKind"], "auth", "{err}");
    assert!(err["message"].as_str().unwrap().contains("Incorrect API key"), "{err}");
    assert!(
        got["runs"][0]["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key"),
        "{got}"
    );
    let n = chat_requests(&mock).len();
    assert!((1..=3).contains(&n), "{n} requests: a 401 is not retried");
    eprintln!("a 401 failed the run in {took:?}");
    group_gone(&w, run);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_stop_mid_stream() {
    let w = World::new();
    let long = "word ".repeat(400);
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), { "text": long, "chunk_size": 8, "chunk_delay_ms": 100 }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    // Wait until the model is streaming its (250-chunk, 25 s) answer.
    eventually("the model is asked", WAIT, || !chat_requests(&mock).is_empty());
    let (pgid, start) = run_group(&w, run);
    assert!(group_alive(pgid, start), "the planner is running");
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start), "the process group is gone");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        (got["ticket"]["status"].clone(), got["runs"][0]["status"].clone()),
        (json!("stopped"), json!("cancelled")),
        "{got}"
    );
    // Whatever was recorded is contiguous, and no final answer was made up.
    let events = transcript(&mut s, run);
    assert!(
        !events.iter().any(|e| e["kind"] == "text" && e["final"] == true),
        "{events:?}"
    );
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_resumes_its_session_with_a_follow_up() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), { "text": plan_answer("First plan") }, { "text": plan_answer("Second plan") }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run1 = plan(&mut s, ticket);
    assert_planned(&mut s, &w, ticket, run1, "First plan");
    let run2 = plan(&mut s, ticket);
    let got = assert_planned(&mut s, &w, ticket, run2, "Second plan");
    assert_eq!(got["runs"][0]["id"], run2);
    let sid = got["runs"][1]["providerSessionId"].as_str().unwrap();
    assert!(sid.starts_with("ses_"), "{got}");
    assert_eq!(
        got["runs"][0]["providerSessionId"], sid,
        "the second run resumed the session"
    );
    transcript(&mut s, run2);

    // The second request carries the earlier conversation and the follow-up.
    let reqs = chat_requests(&mock);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let body = reqs[1]["body"].to_string();
    assert!(body.contains("Make it say hi."), "the first prompt is in the history");
    assert!(body.contains("First plan"), "the first answer is in the history");
    assert!(body.contains("plan this ticket again"), "the follow-up");
}

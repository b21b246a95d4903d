//! The real-CLI tier for Codex through planwire: the pinned real `codex` (native binary from
//! `.cache/planners/paths.env`) plans tickets through the real planwire binary, as `codex
//! app-server` in its plan collaboration mode, against our mock model server (OpenAI Responses
//! SSE). Ignored by default; CI runs them with `--ignored` after `tests/realcli/install.sh`
//! succeeded.
//!
//! `$CODEX_HOME/config.toml` is the user's config as far as planwire knows: it only names the
//! mock provider. The read-only sandbox, the approval policy and the bounded connection retries
//! come from planwire (`thread/start` and argv).
//!
//! The model asks with the `request_user_input` function call, which the mock can send like any
//! other; the turn then waits on planwire's answer, which the model's next request carries as
//! the call's output.
//!
//! No subagent test for Codex: 0.171 offers `spawn_agent` only inside the `multi_agent_v1` tool
//! namespace, and a plain Responses `function_call` (all our mock can send: it has no
//! `namespace` field) is refused with `unsupported call: spawn_agent`. planwire's subagent
//! mapping (collab items, other threads) is covered by the mapper's unit tests instead.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::*;
use crate::realcli::{asking_with, cli, group_gone, kinds, new_ticket, plan, plan_answer, run_ends, transcript, Mock};

pub fn codex_server(w: &World, mock: &Mock) -> Server {
    let codex_home = w.path("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        r#"model = "gpt-5.5"
model_provider = "mock"
approval_policy = "never"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:{}/v1"
wire_api = "responses"
env_key = "PLANWIRE_MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 20000
"#,
        mock.port
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let codex_home = codex_home.display().to_string();
    let mut s = Server::start(
        w,
        &[
            ("CODEX_HOME", &codex_home),
            ("PLANWIRE_MOCK_API_KEY", "sk-mock"),
            ("LANG", "C.UTF-8"),
        ],
    );
    s.initialize(
        json!({ "dbPath": w.db(), "stopGraceMs": 2000, "planners": { "codex": { "path": cli("CODEX_BIN") } } }),
    );
    s
}

/// The model's request_user_input call: one question, two options.
fn ask_turn() -> Value {
    json!({ "text": "Before planning I need one decision.", "tool_calls": [{ "name": "request_user_input", "id": "call_ask_1",
        "input": { "questions": [{ "id": "greeting", "header": "Greeting", "question": "Which greeting should the program print?",
            "options": [{ "label": "Hello, world", "description": "Classic" }, { "label": "Hi there", "description": "Informal" }] }] } }] })
}

/// The output the model got back for call `call_id`, in the request that carried it.
fn call_output(req: &Value, call_id: &str) -> Option<String> {
    req["body"]["input"].as_array()?.iter().find_map(|i| {
        (i["type"] == "function_call_output" && i["call_id"] == call_id)
            .then(|| i["output"].as_str().unwrap_or_default().to_owned())
    })
}

/// A run whose model asks [`ask_turn`]'s question, then answers a request holding `then` with
/// the plan `title`: the mock, the server, the ticket, the run and the question, once asked.
fn asking(w: &World, then: &str, title: &str) -> (Mock, Server, i64, i64, Value) {
    asking_with(w, "codex", codex_server, ask_turn(), then, title)
}

/// The model requests (Responses API).
fn responses(mock: &Mock) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| r["format"] == "responses")
        .collect()
}

/// Asserts the run completed and the ticket holds a plan titled `title`; returns the ticket view.
fn assert_planned(s: &mut Server, ticket: i64, run: i64, title: &str) -> Value {
    let r = run_ends(s, run);
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(r["status"], "completed", "{got}\nstderr:\n{}", s.stderr());
    assert_eq!(got["ticket"]["status"], "planned", "{got}");
    assert_eq!(got["ticket"]["plan"]["title"], title, "{got}");
    got
}

fn last_usage(events: &[Value]) -> Value {
    events
        .iter()
        .rfind(|e| e["kind"] == "usage")
        .cloned()
        .unwrap_or_else(|| panic!("no usage: {events:?}"))
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_plain_plan() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "thinking": "Let me think.", "text": plan_answer("Codex plan"),
                            "usage": { "input_tokens": 1234, "output_tokens": 56, "cached_tokens": 200 } }] }),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
    let run = plan(&mut s, ticket);
    let got = assert_planned(&mut s, ticket, run, "Codex plan");
    assert_eq!(got["runs"][0]["tool"], "codex");
    assert!(got["runs"][0]["providerSessionId"].is_string(), "{got}");

    let events = transcript(&mut s, run);
    let k = kinds(&events);
    for want in ["session", "text", "usage"] {
        assert!(k.contains(&want.to_owned()), "{want} missing: {k:?}");
    }
    let last_text = events.iter().rfind(|e| e["kind"] == "text").unwrap();
    assert_eq!(last_text["final"], true, "{last_text}");
    assert!(last_text["text"].as_str().unwrap().contains("<planwire-plan>"));
    let usage = last_usage(&events);
    assert_eq!(
        (
            usage["inputTokens"].clone(),
            usage["outputTokens"].clone(),
            usage["cacheReadTokens"].clone()
        ),
        (json!(1034), json!(56), json!(200)),
        "{usage}"
    );

    let reqs = responses(&mock);
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    let body = &reqs[0]["body"];
    assert!(body.to_string().contains("Make it say hi."), "prompt missing");
    // Plan mode, with planwire's instructions in place of Codex's `<proposed_plan>` ones, and
    // the question tool offered.
    let developer: Vec<String> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["role"] == "developer")
        .flat_map(|i| i["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(str::to_owned))
        .collect();
    let mode = developer
        .iter()
        .find(|t| t.starts_with("<collaboration_mode>"))
        .unwrap_or_else(|| panic!("no collaboration mode: {developer:?}"));
    assert!(
        mode.contains("planwire's planning mode") && mode.contains("<planwire-plan>"),
        "{mode}"
    );
    // Codex's own sandbox is read-only, unless planwire's OS sandbox holds it (its bubblewrap
    // cannot start inside Landlock, and the kernel refuses writes instead).
    let inner = if planwire_sandbox::support().is_ok() {
        "danger-full-access"
    } else {
        "read-only"
    };
    assert!(
        developer
            .iter()
            .any(|t| t.contains(&format!("`sandbox_mode` is `{inner}`"))),
        "{developer:?}"
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"request_user_input"), "{tools:?}");
    group_gone(&w, run);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_read_only_tool_calls() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "text": "Let me look around.", "tool_calls": [
                { "name": "exec_command", "id": "call_cat", "input": { "cmd": "cat src/main.rs" } },
                { "name": "exec_command", "id": "call_touch", "input": { "cmd": "touch should_not_exist.txt" } },
            ] },
            { "text": plan_answer("Read-only plan") },
        ]}),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
    let run = plan(&mut s, ticket);
    assert_planned(&mut s, ticket, run, "Read-only plan");
    assert!(
        !w.path("project/should_not_exist.txt").exists(),
        "planwire let Codex run `touch`"
    );

    let events = transcript(&mut s, run);
    let call = |cmd: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "toolCall" && e["input"].as_str().unwrap_or("").contains(cmd))
    };
    let result = |cmd: &str| {
        let id = &call(cmd)?["callId"];
        events.iter().find(|e| e["kind"] == "toolResult" && e["callId"] == *id)
    };
    let cat = call("cat src/main.rs").unwrap_or_else(|| panic!("no toolCall `cat`: {events:?}"));
    assert_eq!(cat["name"], "shell", "{cat}");
    let cat_result = result("cat src/main.rs").unwrap_or_else(|| panic!("no toolResult `cat`: {events:?}"));
    assert_eq!(cat_result["status"], "completed", "{cat_result}");
    assert!(cat_result["output"].as_str().unwrap().contains("fn main"));
    let at = |kind: &str, id: &Value| {
        events
            .iter()
            .position(|e| e["kind"] == kind && e["callId"] == *id)
            .unwrap()
    };
    assert!(at("toolCall", &cat["callId"]) < at("toolResult", &cat["callId"]));
    // Codex 0.171 usually prints no `command_execution` item at all for a command its own
    // sandbox refused (the model still gets its output; seen printed once in about ten runs).
    // When it is printed, planwire shows it as a failed call.
    if call("touch should_not_exist.txt").is_some() {
        let touch = result("touch should_not_exist.txt").unwrap_or_else(|| panic!("{events:?}"));
        assert_eq!(touch["status"], "error", "{touch}");
    }
    // The model got the file's content and the sandbox's refusal back: planwire's (the
    // kernel's EACCES) where Landlock holds the run, else Codex's own (a read-only mount).
    let reqs = responses(&mock);
    assert_eq!(reqs.len(), 2);
    let body = reqs[1]["body"].to_string();
    assert!(body.contains("fn main"), "{body}");
    let refusal = if planwire_sandbox::support().is_ok() {
        "Permission denied"
    } else {
        "Read-only file system"
    };
    assert!(body.contains(refusal), "{body}");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_auth_error_fails_fast_with_its_message() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "error": { "status": 401, "message": "Incorrect API key provided: sk-mock." }, "repeat": -1 }] }),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
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
    let n = responses(&mock).len();
    assert!((1..=3).contains(&n), "{n} requests: a 401 is not retried");
    eprintln!("codex 401: the run ended {took:?} after planwire/plan");
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_stop_mid_stream() {
    let w = World::new();
    let long = "word ".repeat(400);
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "text": long, "chunk_size": 8, "chunk_delay_ms": 100 }] }),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
    let run = plan(&mut s, ticket);
    // Wait until the model is streaming its (250-chunk, 25 s) answer.
    eventually("the model is asked", WAIT, || !responses(&mock).is_empty());
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
    let events = transcript(&mut s, run);
    assert!(events.iter().any(|e| e["kind"] == "session"), "{events:?}");
    assert!(
        !events.iter().any(|e| e["kind"] == "text" && e["final"] == true),
        "{events:?}"
    );
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_resumes_its_session_with_a_follow_up() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "text": plan_answer("First plan"), "usage": { "input_tokens": 1000, "output_tokens": 50 } },
            { "text": plan_answer("Second plan"), "usage": { "input_tokens": 1500, "output_tokens": 70 } },
        ]}),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
    let run1 = plan(&mut s, ticket);
    assert_planned(&mut s, ticket, run1, "First plan");
    let run2 = plan(&mut s, ticket);
    let got = assert_planned(&mut s, ticket, run2, "Second plan");
    assert_eq!(got["runs"][0]["id"], run2);
    let sid = got["runs"][1]["providerSessionId"].as_str().unwrap();
    assert_eq!(
        got["runs"][0]["providerSessionId"], sid,
        "the second run resumed the session"
    );

    // Codex reports usage cumulative for the thread; each run stores its own share.
    let u1 = last_usage(&transcript(&mut s, run1));
    let u2 = last_usage(&transcript(&mut s, run2));
    assert_eq!(
        (u1["inputTokens"].clone(), u1["outputTokens"].clone()),
        (json!(1000), json!(50)),
        "{u1}"
    );
    assert_eq!(
        (u2["inputTokens"].clone(), u2["outputTokens"].clone()),
        (json!(1500), json!(70)),
        "{u2}"
    );

    // The second request carries the earlier conversation and the follow-up.
    let reqs = responses(&mock);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let body = reqs[1]["body"].to_string();
    assert!(body.contains("Make it say hi."), "the first prompt is in the history");
    assert!(body.contains("First plan"), "the first answer is in the history");
    assert!(body.contains("plan this ticket again"), "the follow-up");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_live_question_is_answered_in_the_same_run() {
    let w = World::new();
    let (mock, mut s, ticket, run, q) = asking(&w, "with an exclamation mark", "Plan with the chosen greeting");
    assert_eq!(
        (q["source"].clone(), q["status"].clone()),
        (json!("live"), json!("open"))
    );
    let item = &q["items"][0];
    assert_eq!(
        (
            item["header"].clone(),
            item["question"].clone(),
            item["allowOther"].clone()
        ),
        (
            json!("Greeting"),
            json!("Which greeting should the program print?"),
            json!(true)
        )
    );
    assert_eq!(
        item["options"][1],
        json!({ "label": "Hi there", "description": "Informal" })
    );
    // While it waits: the run runs, the ticket needs input, and the model is not asked again.
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        (got["ticket"]["status"].clone(), got["runs"][0]["status"].clone()),
        (json!("needs_input"), json!("running"))
    );
    assert_eq!(responses(&mock).len(), 1);
    // What the model wrote before it asked is stored before the question.
    let events = transcript(&mut s, run);
    let before = events.iter().position(|e| e["kind"] == "text").unwrap();
    let asked = events.iter().position(|e| e["kind"] == "question").unwrap();
    assert!(before < asked, "{events:?}");
    assert_eq!(events[before]["final"], false);

    let answered = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"],
                "answers": [{ "selected": ["Hi there"], "other": "with an exclamation mark" }] }),
    );
    assert_eq!(answered["runId"], run, "the same run goes on");
    assert_planned(&mut s, ticket, run, "Plan with the chosen greeting");
    // One process, two model requests; the second carries the answer, keyed by question id.
    let reqs = responses(&mock);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let output = call_output(&reqs[1], "call_ask_1").unwrap_or_else(|| panic!("no answer: {}", reqs[1]["body"]));
    let output: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(
        output,
        json!({ "answers": { "greeting": { "answers": ["Hi there", "with an exclamation mark"] } } })
    );
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["questions"][0]["status"], "answered");
    assert_eq!(got["runs"].as_array().unwrap().len(), 1);
    group_gone(&w, run);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_dismissed_question_goes_on_with_assumptions() {
    let w = World::new();
    let (mock, mut s, ticket, run, q) = asking(&w, "declined to answer", "Plan on assumptions");
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "dismiss": true }),
    );
    assert_eq!(r["runId"], run);
    assert_planned(&mut s, ticket, run, "Plan on assumptions");
    let reqs = responses(&mock);
    assert_eq!(reqs.len(), 2);
    let output = call_output(&reqs[1], "call_ask_1").unwrap();
    assert!(
        output.contains("The user declined to answer. Continue on your stated assumptions"),
        "{output}"
    );
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["questions"][0]["status"], "dismissed");
    group_gone(&w, run);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_stop_while_a_question_waits() {
    let w = World::new();
    let (mock, mut s, ticket, run, q) = asking(&w, "A: Hi there", "Plan after the stop");
    let (pgid, start) = run_group(&w, run);
    assert!(group_alive(pgid, start));
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start), "the process group is gone when stop returns");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "cancelled", "{got}");
    assert_eq!(got["questions"][0]["status"], "stale", "{got}");
    assert_eq!(
        got["ticket"]["status"], "needs_input",
        "the stale question still waits: {got}"
    );
    assert_eq!(responses(&mock).len(), 1, "the model was not asked again");
    // The interrupted thread resumes with the answer.
    s.seen.clear();
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "answers": [{ "selected": ["Hi there"] }] }),
    );
    let resumed = r["runId"].as_i64().unwrap();
    assert_ne!(resumed, run);
    let got = assert_planned(&mut s, ticket, resumed, "Plan after the stop");
    assert_eq!(got["runs"][0]["providerSessionId"], got["runs"][1]["providerSessionId"]);
    group_gone(&w, resumed);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_kill_9_while_a_question_waits_then_the_stale_answer_resumes() {
    let w = World::new();
    let (mock, mut s, ticket, run, q) = asking(&w, "A: Hi there", "Plan after the crash");
    let (pgid, start) = run_group(&w, run);
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The waiting app-server dies with planwire (parent-death signal).
    eventually("the app-server is gone", Duration::from_secs(10), || {
        !group_alive(pgid, start)
    });
    assert_eq!(responses(&mock).len(), 1);

    let mut next = codex_server(&w, &mock);
    let got = next.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "interrupted", "{got}");
    assert_eq!(got["ticket"]["openQuestions"][0]["status"], "stale", "{got}");
    let session = got["runs"][0]["providerSessionId"].as_str().unwrap().to_owned();
    let r = next.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "answers": [{ "selected": ["Hi there"] }] }),
    );
    let resumed = r["runId"].as_i64().unwrap();
    assert_ne!(resumed, run);
    let got = assert_planned(&mut next, ticket, resumed, "Plan after the crash");
    assert_eq!(got["runs"][0]["providerSessionId"], session, "the same thread");
    // The resumed request holds the whole conversation: the question Codex closed as aborted,
    // then the answer as the next prompt. Codex guarantees the call an output that says it was
    // aborted; its wording varies with how the turn ended ("aborted" when it rebuilds a missing
    // output, "aborted by user after 0.1s" when it timed the abort itself).
    let reqs = responses(&mock);
    assert_eq!(reqs.len(), 2);
    let aborted = call_output(&reqs[1], "call_ask_1");
    assert!(
        aborted.as_deref().is_some_and(|o| o.contains("aborted")),
        "the asking call's output in the resumed request: {aborted:?}"
    );
    let body = reqs[1]["body"].to_string();
    assert!(body.contains("Make it say hi.") && body.contains("Which greeting should the program print?"));
    group_gone(&w, resumed);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_long_answer_streams_as_it_is_written() {
    let w = World::new();
    let words: Vec<String> = (0..60).map(|i| format!("word{i}")).collect();
    let long = format!("{}\n\n{}", words.join(" "), plan_answer("Streamed plan"));
    // About 45 chunks, 100 ms apart: the block takes at least 4 s to write.
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "text": long, "chunk_size": 16, "chunk_delay_ms": 100 }] }),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
    let run = plan(&mut s, ticket);
    s.wait_for("the first delta", |m| {
        m["method"] == "planwire/delta" && m["params"]["runId"] == run
    });
    let first = Instant::now();
    let stored = |m: &Value| {
        m["method"] == "planwire/transcript"
            && m["params"]["runId"] == run
            && m["params"]["events"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e["kind"] == "text"))
    };
    s.wait_for("the stored text", stored);
    let lead = first.elapsed();
    eprintln!("codex delta lead: first piece {lead:?} before the stored text");
    assert!(
        lead > Duration::from_millis(1500),
        "the first piece came only {lead:?} before the block closed"
    );
    assert_planned(&mut s, ticket, run, "Streamed plan");
    let deltas: Vec<&Value> = s
        .seen
        .iter()
        .filter(|m| m["method"] == "planwire/delta" && m["params"]["runId"] == run)
        .map(|m| &m["params"])
        .collect();
    assert!(deltas.len() > 10, "{} delta notifications", deltas.len());
    assert_eq!(deltas[0]["offset"], 0);
    let joined: String = deltas
        .iter()
        .filter(|d| d["kind"] == "text")
        .map(|d| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined, long, "the deltas join to exactly the text");
    let stored_texts: Vec<String> = w
        .sqlite()
        .prepare("SELECT payload FROM transcript WHERE run_id = ?1 AND kind = 'text'")
        .unwrap()
        .query_map([run], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(stored_texts.len(), 1, "stored once: {stored_texts:?}");
    assert!(stored_texts[0].contains("word59"));
    group_gone(&w, run);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_proposed_plan_is_the_plan_when_there_is_no_planwire_plan() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "text": "Here it is.\n\n<proposed_plan>\n# Greet with hi\n\n1. Edit `src/main.rs`.\n</proposed_plan>" }] }),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
    let run = plan(&mut s, ticket);
    let got = assert_planned(&mut s, ticket, run, "Greet with hi");
    assert!(
        got["ticket"]["plan"]["description"]
            .as_str()
            .unwrap()
            .contains("Edit `src/main.rs`"),
        "{got}"
    );
    assert!(got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["kind"] == "plan_candidate"));
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_unknown_session_starts_fresh() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "text": plan_answer("First plan") }, { "text": plan_answer("Fresh plan") }] }),
    );
    let mut s = codex_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "codex");
    let first = plan(&mut s, ticket);
    assert_planned(&mut s, ticket, first, "First plan");
    // A session this CODEX_HOME never had (another machine, a cleaned home).
    w.sqlite()
        .execute(
            "UPDATE tickets SET session_tool = 'codex', session_id = '01a231db-0000-7000-8000-000000000000' WHERE id = ?1",
            [ticket],
        )
        .unwrap();
    let resumed = plan(&mut s, ticket);
    let fresh = s.wait_for("a fresh run", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"].as_i64() > Some(resumed)
            && m["params"]["run"]["status"] == "completed"
    })["params"]["run"]["id"]
        .as_i64()
        .unwrap();
    let got = assert_planned(&mut s, ticket, fresh, "Fresh plan");
    let failed = got["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == resumed)
        .unwrap();
    assert_eq!(failed["failure"]["code"], "session_not_found", "{failed}");
    assert!(
        failed["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("no rollout found"),
        "{failed}"
    );
    group_gone(&w, resumed);
    group_gone(&w, fresh);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_codex_breaks_down_an_initiative_in_one_thread() {
    let w = World::new();
    let outline = json!({ "tickets": [
        { "key": "api", "title": "Greeting API", "scope": "Serve it.", "dependencies": [] },
        { "key": "ui", "title": "Greeting UI", "scope": "Show it.", "dependencies": ["api"] } ] });
    let expansion = json!({ "tickets": [
        { "key": "api", "title": "Greeting API", "description": "## Steps\n1. Add the route.", "acceptanceCriteria": ["GET works"], "openQuestions": [], "dependencies": [] },
        { "key": "ui", "title": "Greeting UI", "description": "## Steps\n1. Call the route.", "acceptanceCriteria": ["shows it"], "openQuestions": [], "dependencies": ["api"] } ] });
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "text": format!("Outline ready.\n<planwire-outline>{outline}</planwire-outline>") },
            { "match": "Second pass: the expansion", "text": format!("Expanded.\n<planwire-expansion>{expansion}</planwire-expansion>") },
        ]}),
    );
    let mut s = codex_server(&w, &mock);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "A greeting service and a UI.", "tool": "codex" }),
    )["runId"]
        .as_i64()
        .unwrap();
    let ended = run_ends(&mut s, run);
    assert_eq!(ended["status"], "completed", "{ended}\nstderr:\n{}", s.stderr());
    let tickets = s.ok("planwire/listTickets", json!({ "initiativeRunId": run }))["tickets"].clone();
    let titles: Vec<&str> = tickets
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles.len(), 2, "{tickets}");
    assert!(titles.contains(&"Greeting UI") && titles.contains(&"Greeting API"));
    // The expansion resumed the outline's thread: its request carries the outline answer.
    let reqs = responses(&mock);
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1]["body"].to_string().contains("Outline ready."));
    group_gone(&w, run);
}

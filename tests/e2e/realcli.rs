//! The real-CLI tier through planwire: the pinned real CLIs (installed by
//! `tests/realcli/install.sh` into `.cache/planners/`) plan tickets through the real binary
//! against our mock model server (`tests/realcli/mock_model.py`). Ignored by default; CI runs
//! them with `--ignored` after the install succeeded (`tests/run-all.sh`).
//! Claude's live questions and deltas are in `realcli_claude_live.rs`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::harness::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// A binary path from `.cache/planners/paths.env` (e.g. `CLAUDE_BIN`).
pub fn cli(var: &str) -> String {
    let env = repo().join(".cache/planners/paths.env");
    let text = std::fs::read_to_string(&env)
        .unwrap_or_else(|e| panic!("{}: {e}; run tests/realcli/install.sh first", env.display()));
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{var}=")))
        .map(|v| v.trim_matches(['"', '\'']).to_owned())
        .unwrap_or_else(|| panic!("{var} is not in {}", env.display()))
}

pub struct Mock {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Mock {
    pub fn start(w: &World, script: Value) -> Mock {
        let script_path = w.path("mock-script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let log = w.path("mock-requests.jsonl");
        let mut child = Command::new("python3")
            .arg(repo().join("tests/realcli/mock_model.py"))
            .args([
                "--script",
                script_path.to_str().unwrap(),
                "--log",
                log.to_str().unwrap(),
                "--port",
                "0",
            ])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(w.path("mock.stderr")).unwrap())
            .spawn()
            .expect("python3 runs the mock");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let port = first
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .expect("PORT line");
        Mock { child, port, log }
    }

    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn plan_answer(title: &str) -> String {
    let plan = json!({ "title": title, "description": "## Steps\n1. Edit `src/main.rs`.", "acceptanceCriteria": ["it prints hi"], "openQuestions": [], "dependencies": [] });
    format!("I looked at the code.\n\n<planwire-plan>{plan}</planwire-plan>")
}

pub fn claude_server(w: &World, mock: &Mock) -> Server {
    let base = format!("http://127.0.0.1:{}", mock.port);
    let ceiling = w.dir.path().display().to_string();
    let mut s = Server::start(
        w,
        &[
            ("ANTHROPIC_BASE_URL", &base),
            ("ANTHROPIC_API_KEY", "sk-ant-mock"),
            ("GIT_CEILING_DIRECTORIES", &ceiling),
        ],
    );
    s.initialize(
        json!({ "dbPath": w.db(), "stopGraceMs": 2000, "planners": { "claude": { "path": cli("CLAUDE_BIN") } } }),
    );
    s
}

pub fn new_ticket(s: &mut Server, w: &World, tool: &str) -> i64 {
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "Make it say hi.", "tool": tool }),
    );
    t["id"].as_i64().unwrap()
}

pub fn kinds(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["kind"].as_str().unwrap().to_owned()).collect()
}

pub fn transcript(s: &mut Server, run: i64) -> Vec<Value> {
    let page = s.ok("planwire/getTranscript", json!({ "runId": run }));
    let events = page["events"].as_array().unwrap().clone();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "contiguous");
    events
}

pub use crate::harness::run_ends;

pub fn plan(s: &mut Server, ticket: i64) -> i64 {
    s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap()
}

/// Asserts the run succeeded, the ticket holds a plan titled `title` and the run's process
/// group is gone; returns the ticket view.
pub fn assert_planned(s: &mut Server, w: &World, ticket: i64, run: i64, title: &str) -> Value {
    let r = run_ends(s, run);
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(r["status"], "completed", "{got}\nstderr:\n{}", s.stderr());
    assert_eq!(got["ticket"]["status"], "planned", "{got}");
    assert_eq!(got["ticket"]["plan"]["title"], title, "{got}");
    group_gone(w, run);
    got
}

/// The run's planner (its whole process group) is gone: nothing outlives its run.
pub fn group_gone(w: &World, run: i64) {
    let (pgid, start) = run_group(w, run);
    assert!(pgid > 0, "run {run} recorded its process group");
    eventually("the run's process group is gone", WAIT, || !group_alive(pgid, start));
}

/// Waits for the run's live question (open); returns it.
pub fn live_question(s: &mut Server, run: i64) -> Value {
    let q = s.wait_for("the live question", |m| {
        m["method"] == "planwire/question" && m["params"]["runId"] == run
    })["params"]["question"]
        .clone();
    assert_eq!(
        (q["source"].clone(), q["status"].clone()),
        (json!("live"), json!("open")),
        "{q}"
    );
    q
}

/// A run on `tool` (planwire from `server`) whose model asks with the turn `ask`, then answers
/// a request holding `then` with the plan `title`: the mock, planwire, the ticket, the run and
/// the question, once asked.
pub fn asking_with(
    w: &World,
    tool: &str,
    server: fn(&World, &Mock) -> Server,
    ask: Value,
    then: &str,
    title: &str,
) -> (Mock, Server, i64, i64, Value) {
    let mock = Mock::start(
        w,
        json!({ "turns": [ask, { "match": then, "text": plan_answer(title) }] }),
    );
    let mut s = server(w, &mock);
    let ticket = new_ticket(&mut s, w, tool);
    let run = plan(&mut s, ticket);
    let q = live_question(&mut s, run);
    (mock, s, ticket, run, q)
}

/// planwire dies by SIGKILL while `run` waits on a live question. The planner dies with it
/// (parent-death signal), and the next planwire (`restart`) finds the run interrupted and the
/// question stale; returns that planwire.
pub fn crash_while_asking(mut s: Server, w: &World, ticket: i64, run: i64, restart: impl FnOnce() -> Server) -> Server {
    let (pgid, start) = run_group(w, run);
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    drop(s);
    let mut next = restart();
    eventually("the planner is gone", WAIT, || !group_alive(pgid, start));
    let got = next.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "interrupted", "{got}");
    assert_eq!(got["ticket"]["status"], "needs_input", "{got}");
    assert_eq!(got["ticket"]["openQuestions"][0]["status"], "stale", "{got}");
    next
}

/// Answers `run`'s stale question `q` with "Hi there": a new run resumes the same provider
/// session and plans `title`. Returns the ticket view.
pub fn answer_stale(s: &mut Server, w: &World, ticket: i64, run: i64, q: &Value, title: &str) -> Value {
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "answers": [{ "selected": ["Hi there"] }] }),
    );
    let resumed = r["runId"].as_i64().unwrap();
    assert_ne!(resumed, run);
    let got = assert_planned(s, w, ticket, resumed, title);
    let session =
        |id: i64| got["runs"].as_array().unwrap().iter().find(|r| r["id"] == id).unwrap()["providerSessionId"].clone();
    assert!(session(run).is_string(), "{got}");
    assert_eq!(session(run), session(resumed), "the session was resumed: {got}");
    got
}

/// The text pieces (`planwire/delta`) of `run` seen so far, joined.
pub fn delta_text(s: &Server, run: i64) -> String {
    s.seen
        .iter()
        .filter(|m| m["method"] == "planwire/delta" && m["params"]["runId"] == run && m["params"]["kind"] == "text")
        .map(|m| m["params"]["text"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until the text pieces of `run` hold `chars` bytes or more.
pub fn wait_for_pieces(s: &mut Server, run: i64, chars: usize) {
    let deadline = std::time::Instant::now() + WAIT;
    while delta_text(s, run).len() < chars {
        assert!(
            std::time::Instant::now() < deadline,
            "pieces so far: {:?}",
            delta_text(s, run)
        );
        s.ok("planwire/status", json!({}));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A long answer that the mock holds back after its first 20 pieces of 10 characters, until the
/// file `gate` exists: the turn, and its text.
pub fn gated_answer(gate: &Path) -> (Value, String) {
    let long = format!("{}{}", "word ".repeat(40), plan_answer("Streamed plan"));
    let turn = json!({ "text": long, "chunk_size": 10, "chunk_delay_ms": 20,
                       "gate_file": gate.display().to_string(), "gate_after_chunks": 20 });
    (turn, long)
}

/// `run` (just started) streams [`gated_answer`]'s `long`: its first pieces reach the client
/// while the model holds the rest back, and the block is not stored before it ends. Then the
/// gate opens and the ticket is planned; what was sent is a prefix of the text (pieces still
/// held back for coalescing when the stored text closed the block are not sent), and the text
/// is stored once.
pub fn assert_streams_before_the_block_ends(s: &mut Server, w: &World, ticket: i64, run: i64, gate: &Path, long: &str) {
    let started = std::time::Instant::now();
    s.wait_for("the first piece", |m| {
        m["method"] == "planwire/delta" && m["params"]["runId"] == run
    });
    let first_at = started.elapsed();
    wait_for_pieces(s, run, 200);
    assert!(!gate.exists());
    let sent = delta_text(s, run);
    assert!(
        long.starts_with(&sent),
        "the pieces are a prefix of the answer: {sent:?}"
    );
    assert!(
        !s.notified_events(run).iter().any(|e| e["kind"] == "text"),
        "the block is not stored before it ends"
    );
    let page = s.ok("planwire/getTranscript", json!({ "runId": run }));
    assert_eq!(page["openBlocks"][0]["kind"], "text", "{page}");
    assert!(
        long.starts_with(page["openBlocks"][0]["text"].as_str().unwrap()),
        "{page}"
    );
    std::fs::write(gate, "").unwrap();
    let opened = std::time::Instant::now();
    assert_planned(s, w, ticket, run, "Streamed plan");
    eprintln!(
        "deltas: first piece {first_at:?} after the run started, block stored {:?} after the gate opened",
        opened.elapsed()
    );
    let sent = delta_text(s, run);
    assert!(sent.len() >= 200 && long.starts_with(&sent), "{sent:?}");
    assert_eq!(w.stored_count(run, "text"), 1, "the text is stored once");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_plans_with_a_tool_call_and_resumes() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "text": "Let me read the main file.", "tool_calls": [{ "name": "Read", "input": { "file_path": format!("{}/src/main.rs", w.root()) } }] },
            { "text": plan_answer("First plan") },
            { "text": plan_answer("Second plan") },
        ]}),
    );
    let mut s = claude_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "claude");
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    let t = s.wait_planned(ticket);
    assert_eq!(t["plan"]["title"], "First plan");
    let events = transcript(&mut s, run);
    let k = kinds(&events);
    for want in ["session", "text", "toolCall", "toolResult", "usage"] {
        assert!(k.contains(&want.to_owned()), "{want} missing: {k:?}");
    }
    let result = events.iter().find(|e| e["kind"] == "toolResult").unwrap();
    assert_eq!(result["status"], "completed");
    assert!(result["output"].as_str().unwrap().contains("fn main"));
    let usage = events.iter().find(|e| e["kind"] == "usage").unwrap();
    assert!(usage["inputTokens"].as_u64().unwrap() > 0);
    // Plan mode and the prompt reached the model.
    let first = &mock
        .requests()
        .into_iter()
        .find(|r| r["path"].as_str().unwrap_or("").starts_with("/v1/messages"))
        .unwrap();
    assert!(first["body"].to_string().contains("Make it say hi."));

    // Planning again resumes the session: the next request carries the earlier conversation.
    let run2 = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_for("second run ends", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run2
            && m["params"]["run"]["status"] != "running"
            && m["params"]["run"]["status"] != "queued"
    });
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["ticket"]["plan"]["title"], "Second plan", "{got}");
    assert_eq!(got["runs"][0]["providerSessionId"], got["runs"][1]["providerSessionId"]);
    let last = mock
        .requests()
        .into_iter()
        .rfind(|r| r["path"].as_str().unwrap_or("").starts_with("/v1/messages"))
        .unwrap();
    let body = last["body"].to_string();
    assert!(
        body.contains("Make it say hi.") && body.contains("plan this ticket again"),
        "history and follow-up"
    );
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_subagent_gets_its_own_agent_run() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "text": "I will ask an explorer.", "tool_calls": [{ "name": "Agent", "input": { "description": "Find greeting", "prompt": "SUBAGENT-MARKER: find where the greeting is printed.", "subagent_type": "Explore" } }] },
            { "match": "SUBAGENT-MARKER: find where", "text": "The greeting is in src/main.rs." },
            { "text": plan_answer("Plan after research") },
        ]}),
    );
    let mut s = claude_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "claude");
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_planned(ticket);
    let events = transcript(&mut s, run);
    let sub: Vec<&Value> = events.iter().filter(|e| e["kind"] == "subagent").collect();
    assert_eq!(sub.len(), 2, "{events:?}");
    assert_eq!(
        (sub[0]["phase"].clone(), sub[1]["phase"].clone()),
        (json!("start"), json!("end"))
    );
    assert!(sub[0]["agentRunId"].is_i64());
    assert_eq!(sub[0]["agentRunId"], sub[1]["agentRunId"]);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_auth_error_fails_fast_with_its_message() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "error": { "status": 401, "message": "invalid x-api-key" }, "repeat": -1 }] }),
    );
    let mut s = claude_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "claude");
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(s.wait_ticket(ticket, &["failed", "planned"])["status"], "failed");
    let r = &s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0];
    assert_eq!(r["failure"]["code"], "planner_error", "{r}");
    let events = transcript(&mut s, run);
    let err = events.iter().find(|e| e["kind"] == "error").unwrap();
    assert_eq!(err["errorKind"], "auth", "{err}");
    assert!(mock.requests().len() <= 6, "retries are bounded");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_stop_mid_stream() {
    let w = World::new();
    let long = "word ".repeat(400);
    let mock = Mock::start(
        &w,
        json!({ "turns": [{ "text": long, "chunk_size": 8, "chunk_delay_ms": 100 }] }),
    );
    let mut s = claude_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "claude");
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_for("the session starts", |m| {
        m["method"] == "planwire/transcript"
            && m["params"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["kind"] == "session")
    });
    // Wait until the model is streaming.
    eventually("the model is asked", std::time::Duration::from_secs(30), || {
        !mock.requests().iter().all(|r| r["method"] == "HEAD")
    });
    let (pgid, start) = run_group(&w, run);
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start));
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        (got["ticket"]["status"].clone(), got["runs"][0]["status"].clone()),
        (json!("stopped"), json!("cancelled"))
    );
    assert!(!transcript(&mut s, run).is_empty());
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_breaks_down_an_initiative() {
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
    let mut s = claude_server(&w, &mock);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "A greeting service and a UI.", "tool": "claude" }),
    )["runId"]
        .as_i64()
        .unwrap();
    let ended = run_ends(&mut s, run);
    assert_eq!(ended["status"], "completed", "{ended}");
    let tickets = s.ok("planwire/listTickets", json!({ "initiativeRunId": run }))["tickets"].clone();
    let ui = tickets
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "Greeting UI")
        .unwrap()
        .clone();
    assert_eq!(ui["status"], "planned");
    assert_eq!(ui["dependsOn"].as_array().unwrap().len(), 1);
    // The expansion resumed the outline's session: its request carries the outline answer.
    let last = mock
        .requests()
        .into_iter()
        .rfind(|r| r["path"].as_str().unwrap_or("").starts_with("/v1/messages"))
        .unwrap();
    assert!(last["body"].to_string().contains("Outline ready."));
}

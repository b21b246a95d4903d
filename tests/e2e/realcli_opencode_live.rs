//! The real-CLI tier for what `opencode serve` adds: live questions (answered, dismissed,
//! stopped, and answered after a planwire crash), text streamed as deltas, a write permission
//! rejected by planwire, a cut event stream, and OpenCode's locked database. Same setup as
//! `realcli_opencode.rs`; ignored by default.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::*;
use crate::realcli::{
    answer_stale, assert_planned, assert_streams_before_the_block_ends, cli, crash_while_asking, delta_text,
    gated_answer, live_question, new_ticket, plan, plan_answer, transcript, Mock,
};
use crate::realcli_opencode::{chat_requests, opencode_server, opencode_server_at, title_turn};

const QUESTION: &str = "Which greeting should the program print?";

fn ask_turn() -> Value {
    let ask = json!({ "questions": [{ "question": QUESTION, "header": "Greeting",
        "options": [{ "label": "Hello, world", "description": "Classic" }, { "label": "Hi there", "description": "Informal" }] }] });
    json!({ "text": "Before planning I need one decision.", "tool_calls": [{ "name": "question", "id": "call_ask", "input": ask }] })
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_live_question_is_answered_in_the_same_run() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), ask_turn(), { "match": "Hi there", "text": plan_answer("Plan with the chosen greeting") }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    let q = live_question(&mut s, run);
    let item = &q["items"][0];
    assert_eq!(item["question"], QUESTION);
    assert_eq!(item["options"][1]["label"], "Hi there");
    assert_eq!(
        (item["multiSelect"].clone(), item["allowOther"].clone()),
        (json!(false), json!(true))
    );
    let t = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(t["ticket"]["status"], "needs_input", "{t}");
    assert_eq!(t["runs"][0]["status"], "running", "{t}");
    // The model waits for the answer.
    assert_eq!(chat_requests(&mock).len(), 1);

    let answered = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "answers": [{ "selected": ["Hi there"], "other": "with an exclamation mark" }] }),
    );
    assert_eq!(answered["runId"], run, "the same run goes on");
    assert_planned(&mut s, &w, ticket, run, "Plan with the chosen greeting");
    // The answer reached the model in the next request of the same session.
    let requests = chat_requests(&mock);
    assert_eq!(requests.len(), 2, "one server, two model requests");
    let body = requests[1]["body"].to_string();
    assert!(
        body.contains(QUESTION) && body.contains("Hi there, with an exclamation mark"),
        "{body}"
    );
    // The text before the question, the question's call and its result, once each.
    let events = transcript(&mut s, run);
    let before = events
        .iter()
        .filter(|e| e["kind"] == "text" && e["text"] == "Before planning I need one decision.")
        .count();
    assert_eq!(before, 1, "{events:?}");
    let pos = |kind: &str| events.iter().position(|e| e["kind"] == kind).unwrap();
    assert!(
        pos("toolCall") < pos("question") && pos("question") < pos("toolResult"),
        "{events:?}"
    );
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_dismissed_question_goes_on_with_assumptions() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), ask_turn(), { "match": "stated assumptions", "text": plan_answer("Plan on assumptions") }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    let q = live_question(&mut s, run);
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "dismiss": true }),
    );
    assert_eq!(r["runId"], run);
    assert_planned(&mut s, &w, ticket, run, "Plan on assumptions");
    let body = chat_requests(&mock)[1]["body"].to_string();
    assert!(body.contains("The user declined to answer"), "{body}");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert!(got["ticket"]["openQuestions"].as_array().unwrap().is_empty(), "{got}");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_stop_while_a_question_is_open() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), ask_turn(), { "text": plan_answer("Never") }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    let q = live_question(&mut s, run);
    let (pgid, start) = run_group(&w, run);
    assert!(group_alive(pgid, start));
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start), "the server is gone when stop returns");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "cancelled", "{got}");
    // The question stays answerable: it resumes the session.
    let open = &got["ticket"]["openQuestions"];
    assert_eq!(open[0]["id"], q["id"], "{got}");
    assert_eq!(open[0]["status"], "stale", "{got}");
    assert_eq!(chat_requests(&mock).len(), 1, "the model got no further request");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_kill_9_while_a_question_is_open_then_the_stale_answer_resumes() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), ask_turn(), { "match": "Hi there", "text": plan_answer("Plan after the restart") }] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    let q = live_question(&mut s, run);
    // The server dies with planwire; the next planwire reaps what is left.
    let mut next = crash_while_asking(s, &w, ticket, run, || opencode_server(&w, &mock));
    assert_eq!(
        chat_requests(&mock).len(),
        1,
        "the waiting server made no further request"
    );
    answer_stale(&mut next, &w, ticket, run, &q, "Plan after the restart");
    // A new server took the stored session: its request carries the first prompt and the answer.
    let last = chat_requests(&mock).pop().unwrap()["body"].to_string();
    assert!(last.contains("Make it say hi.") && last.contains("Hi there"), "{last}");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_long_answer_streams_before_the_block_ends() {
    let w = World::new();
    let gate = w.path("gate");
    let (turn, long) = gated_answer(&gate);
    let mock = Mock::start(&w, json!({ "turns": [title_turn(), turn] }));
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    assert_streams_before_the_block_ends(&mut s, &w, ticket, run, &gate, &long);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_write_permission_is_rejected_by_planwire() {
    let w = World::new();
    std::fs::write(w.path("project/.env"), "GREETING=hi\n").unwrap();
    let env_file = format!("{}/.env", w.root());
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            title_turn(),
            { "text": "Let me save a note.", "tool_calls": [
                { "name": "bash", "id": "call_redirect", "input": { "command": "cat src/main.rs > note.txt", "description": "Save a note" } },
                { "name": "read", "id": "call_env", "input": { "filePath": env_file } },
            ] },
            { "text": plan_answer("Plan without writing") },
        ]}),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    assert_planned(&mut s, &w, ticket, run, "Plan without writing");
    assert!(!w.path("project/note.txt").exists(), "the redirection wrote a file");
    let events = transcript(&mut s, run);
    let result = |id: &str| {
        events
            .iter()
            .find(|e| e["kind"] == "toolResult" && e["callId"] == id)
            .unwrap_or_else(|| panic!("no result of {id}: {events:?}"))
            .clone()
    };
    // OpenCode asks about both calls of the step, and planwire rejects each with its reason.
    // When both are pending as the first reply lands, OpenCode rejects the other one itself,
    // without a reason (tests/realcli/README.md, trap 4); planwire's
    // `continue_loop_on_deny` keeps that from ending the turn. Either way both are errors,
    // and the model reads planwire's reason for at least the first.
    let redirect = result("call_redirect");
    let env_read = result("call_env");
    let ours = |r: &Value, reason: &str| {
        assert_eq!(r["status"], "error", "{r}");
        let out = r["output"].as_str().unwrap();
        assert!(out.contains(reason) || out.contains("rejected permission"), "{r}");
        out.contains(reason)
    };
    let redirect_ours = ours(&redirect, "planwire plans in read-only mode");
    // A read OpenCode asks about (a `.env` file) is refused: its secrets stay off the wire.
    let env_ours = ours(&env_read, "planwire does not read secrets");
    assert!(redirect_ours || env_ours, "{redirect} {env_read}");
    assert!(!env_read.to_string().contains("GREETING=hi"), "{env_read}");
    // No question reached the person; the model read planwire's reason.
    assert!(!s.seen.iter().any(|m| m["method"] == "planwire/question"));
    let second = chat_requests(&mock)[1]["body"].to_string();
    assert!(!second.contains("GREETING=hi"), "{second}");
    assert_eq!(
        second.contains("redirect no output to a file"),
        redirect_ours,
        "{second}"
    );
    assert_eq!(second.contains("stays closed"), env_ours, "{second}");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_cut_event_stream_still_yields_the_plan_from_the_api() {
    let w = World::new();
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let proxy = repo.join("tests/realcli/cut_events.py");
    let wrapper = w.fake_cli(
        "opencode-cut",
        &format!("#!/bin/sh\nexec python3 '{}' \"$@\"\n", proxy.display()),
    );
    let long = format!("{}{}", "word ".repeat(30), plan_answer("Plan from the API"));
    let mock = Mock::start(
        &w,
        json!({ "turns": [title_turn(), { "text": long, "chunk_size": 10, "chunk_delay_ms": 30 }] }),
    );
    let opencode = cli("OPENCODE_BIN");
    let mut s = opencode_server_at(
        &w,
        &mock,
        wrapper.to_str().unwrap(),
        &[("CUT_EVENTS_OPENCODE", &opencode), ("CUT_AFTER_DELTAS", "2")],
    );
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run = plan(&mut s, ticket);
    assert_planned(&mut s, &w, ticket, run, "Plan from the API");
    let events = transcript(&mut s, run);
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "error" && e["message"].as_str().unwrap().contains("event stream")),
        "the cut is noted: {events:?}"
    );
    let texts: Vec<&Value> = events.iter().filter(|e| e["kind"] == "text").collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert_eq!(texts[0]["text"], long.as_str());
    assert_eq!(texts[0]["final"], true);
    // The stream was cut well before the answer ended: only its first pieces came live.
    assert!(delta_text(&s, run).len() < long.len(), "{}", delta_text(&s, run));
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_opencode_locked_database_is_retried() {
    let w = World::new();
    let gate = w.path("gate");
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            title_turn(),
            { "text": plan_answer("First plan") },
            { "text": plan_answer("Plan after the lock") },
            { "text": "word ".repeat(20), "chunk_size": 10, "gate_file": gate.display().to_string(), "gate_after_chunks": 1 },
            { "match": "database was locked", "text": plan_answer("Plan after a locked step") },
        ] }),
    );
    let mut s = opencode_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "opencode");
    let run1 = plan(&mut s, ticket);
    assert_planned(&mut s, &w, ticket, run1, "First plan");
    // Another OpenCode process holds OpenCode's database (the test, here) while planning resumes.
    let db = w.path("home/.local/share/opencode/opencode.db");
    assert!(db.exists(), "OpenCode's database is at {}", db.display());
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let run2 = plan(&mut s, ticket);
    let note = s.wait_for("a retry note", |m| {
        m["method"] == "planwire/transcript"
            && m["params"]["runId"] == run2
            && m["params"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["kind"] == "error" && e["message"].as_str().unwrap_or("").contains("retrying in"))
    });
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    let got = assert_planned(&mut s, &w, ticket, run2, "Plan after the lock");
    assert_eq!(got["runs"][0]["providerSessionId"], got["runs"][1]["providerSessionId"]);
    let message = note["params"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "error")
        .unwrap()["message"]
        .clone();
    assert!(message.as_str().unwrap().contains("database"), "{message}");

    // A lock in the middle of a turn fails the turn: planwire prompts the session to go on.
    let holder = rusqlite::Connection::open(&db).unwrap();
    let asked = chat_requests(&mock).len();
    let run3 = plan(&mut s, ticket);
    let deadline = Instant::now() + WAIT;
    while chat_requests(&mock).len() == asked {
        assert!(
            Instant::now() < deadline,
            "the model was not asked; stderr:\n{}",
            s.stderr()
        );
        s.ok("planwire/status", json!({}));
        std::thread::sleep(Duration::from_millis(50));
    }
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    std::fs::write(&gate, "").unwrap();
    s.wait_for("a retry note of the turn", |m| {
        m["method"] == "planwire/transcript"
            && m["params"]["runId"] == run3
            && m["params"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["kind"] == "error" && e["message"].as_str().unwrap_or("").contains("retrying in"))
    });
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    assert_planned(&mut s, &w, ticket, run3, "Plan after a locked step");
    let last = chat_requests(&mock).pop().unwrap()["body"].to_string();
    assert!(last.contains("database was locked"), "{last}");
}

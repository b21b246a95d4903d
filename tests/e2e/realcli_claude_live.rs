//! The real-CLI tier for Claude Code's live cases through planwire: questions (answered,
//! dismissed, stopped, and answered after a planwire crash) and text streamed as deltas. The
//! pinned real `claude` runs in its bidirectional stream-json mode (`--permission-prompt-tool
//! stdio`, `--include-partial-messages`) against our mock model server (Anthropic Messages
//! SSE). Same setup as `realcli.rs`; ignored by default.
//!
//! The model asks with an AskUserQuestion tool call; the CLI asks planwire about it
//! (`control_request` / `can_use_tool`) and waits on stdin, and the model's next request carries
//! planwire's answer, or its refusal for a dismissal, as that call's `tool_result`.

use serde_json::{json, Value};

use crate::harness::*;
use crate::realcli::{
    answer_stale, asking_with, assert_planned, assert_streams_before_the_block_ends, claude_server, crash_while_asking,
    gated_answer, new_ticket, plan, transcript, Mock,
};
use crate::realcli_living::{content_text, model_requests};

const QUESTION: &str = "Which greeting should the program print?";
/// The AskUserQuestion call's tool_use id.
const ASK_ID: &str = "toolu_ask_1";

/// The model's AskUserQuestion call: one question, two options.
fn ask_turn() -> Value {
    let ask = json!({ "questions": [{ "question": QUESTION, "header": "Greeting",
        "options": [{ "label": "Hello, world", "description": "Classic" }, { "label": "Hi there", "description": "Informal" }],
        "multiSelect": false }] });
    json!({ "text": "Before planning I need one decision.", "tool_calls": [{ "name": "AskUserQuestion", "id": ASK_ID, "input": ask }] })
}

/// The `tool_result` block the model got back for call `id`, in the request that carried it.
fn tool_result(req: &Value, id: &str) -> Option<Value> {
    req["body"]["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .cloned()
}

/// The text of the `tool_result` for [`ASK_ID`] in `req`, and whether it is an error.
fn ask_result(req: &Value) -> (String, bool) {
    let block = tool_result(req, ASK_ID).unwrap_or_else(|| panic!("no result of the question: {}", req["body"]));
    (content_text(&block), block["is_error"] == true)
}

/// A run whose model asks [`ask_turn`]'s question, then answers a request holding `then` with
/// the plan `title`: the mock, the server, the ticket, the run and the question, once asked.
fn asking(w: &World, then: &str, title: &str) -> (Mock, Server, i64, i64, Value) {
    asking_with(w, "claude", claude_server, ask_turn(), then, title)
}

/// The resumed run's request (the model's second) carries the conversation so far, then the
/// stale question's answer as the next prompt.
fn assert_resumed_with_the_answer(mock: &Mock) {
    let reqs = model_requests(mock);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let messages = reqs[1]["body"]["messages"].as_array().unwrap();
    let texts: Vec<(String, String)> = messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap_or("").to_owned(), content_text(m)))
        .collect();
    let first = texts
        .iter()
        .position(|(r, t)| r == "user" && t.contains("Make it say hi."));
    let asked = texts
        .iter()
        .position(|(r, t)| r == "assistant" && t.contains("Before planning I need one decision."));
    let answer = format!("Q: {QUESTION}\nA: Hi there");
    let answered = texts.iter().rposition(|(r, t)| r == "user" && t.contains(&answer));
    assert!(
        first.is_some() && first < asked && asked < answered,
        "prompt {first:?}, question {asked:?}, answer {answered:?}: {texts:?}"
    );
}

/// Some session file of the CLI's (under the test's HOME) holds `text`.
fn session_files_hold(w: &World, text: &str) -> bool {
    let projects = w.path("home/.claude/projects");
    let dirs = std::fs::read_dir(projects).into_iter().flatten().flatten();
    dirs.flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .filter(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
        .any(|f| std::fs::read_to_string(f.path()).is_ok_and(|s| s.contains(text)))
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_live_question_is_answered_in_the_same_run() {
    let w = World::new();
    let (mock, mut s, ticket, run, q) = asking(&w, "have been answered", "Plan with the chosen greeting");
    let item = &q["items"][0];
    assert_eq!(
        (item["header"].clone(), item["question"].clone()),
        (json!("Greeting"), json!(QUESTION))
    );
    assert_eq!(
        item["options"][1],
        json!({ "label": "Hi there", "description": "Informal" })
    );
    assert_eq!(
        (item["multiSelect"].clone(), item["allowOther"].clone()),
        (json!(false), json!(true))
    );
    // While it waits: the run runs, the ticket needs input, and the model is not asked again.
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        (got["ticket"]["status"].clone(), got["runs"][0]["status"].clone()),
        (json!("needs_input"), json!("running")),
        "{got}"
    );
    assert_eq!(model_requests(&mock).len(), 1);
    // What the model wrote before it asked is stored before the question.
    let events = transcript(&mut s, run);
    let before = events
        .iter()
        .position(|e| e["kind"] == "text")
        .unwrap_or_else(|| panic!("{events:?}"));
    let asked = events.iter().position(|e| e["kind"] == "question").unwrap();
    assert!(before < asked, "{events:?}");
    assert_eq!(
        (events[before]["text"].clone(), events[before]["final"].clone()),
        (json!("Before planning I need one decision."), json!(false))
    );

    let answered = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"],
                "answers": [{ "selected": ["Hi there"], "other": "with an exclamation mark" }] }),
    );
    assert_eq!(answered["runId"], run, "the same run goes on");
    let got = assert_planned(&mut s, &w, ticket, run, "Plan with the chosen greeting");
    assert_eq!(got["questions"][0]["status"], "answered", "{got}");
    assert_eq!(got["runs"].as_array().unwrap().len(), 1);
    // One process, two model requests; the second carries the answer to the question.
    let reqs = model_requests(&mock);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let (result, is_error) = ask_result(&reqs[1]);
    assert!(!is_error, "{result}");
    assert!(
        result.contains(&format!("\"{QUESTION}\"=\"Hi there, with an exclamation mark\"")),
        "{result}"
    );
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_dismissed_question_goes_on_with_assumptions() {
    let w = World::new();
    let (mock, mut s, ticket, run, q) = asking(&w, "declined to answer", "Plan on assumptions");
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "dismiss": true }),
    );
    assert_eq!(r["runId"], run, "the same run goes on");
    let got = assert_planned(&mut s, &w, ticket, run, "Plan on assumptions");
    assert_eq!(got["questions"][0]["status"], "dismissed", "{got}");
    assert!(got["ticket"]["openQuestions"].as_array().unwrap().is_empty(), "{got}");
    // The model read planwire's refusal of the call, and no answer.
    let reqs = model_requests(&mock);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    let (result, is_error) = ask_result(&reqs[1]);
    assert!(is_error, "a refused call: {result}");
    assert!(
        result.contains("The user declined to answer. Continue on your stated assumptions"),
        "{result}"
    );
    assert!(!result.contains("Hi there"), "{result}");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_stop_while_a_question_is_open() {
    let w = World::new();
    let (mock, mut s, ticket, run, q) = asking(&w, "A: Hi there", "Plan after the stop");
    let (pgid, start) = run_group(&w, run);
    assert!(group_alive(pgid, start), "the CLI waits on the answer");
    assert_eq!(
        s.ok("planwire/stop", json!({ "ticketId": ticket })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start), "the process group is gone when stop returns");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "cancelled", "{got}");
    // The question stays answerable: it resumes the session.
    let open = &got["ticket"]["openQuestions"];
    assert_eq!(
        (open[0]["id"].clone(), open[0]["status"].clone()),
        (q["id"].clone(), json!("stale")),
        "{got}"
    );
    assert_eq!(got["ticket"]["status"], "needs_input", "{got}");
    assert_eq!(model_requests(&mock).len(), 1, "the model was not asked again");

    let got = answer_stale(&mut s, &w, ticket, run, &q, "Plan after the stop");
    assert_eq!(got["questions"][0]["status"], "answered", "{got}");
    // The stop let the CLI end cleanly (SIGTERM first): its session kept the turn that asked.
    assert_resumed_with_the_answer(&mock);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_kill_9_while_a_question_is_open_then_the_stale_answer_resumes() {
    let w = World::new();
    let (mock, s, ticket, run, q) = asking(&w, "A: Hi there", "Plan after the crash");
    // The CLI writes its session file a moment after it asks (and a SIGKILL loses what it has
    // not written): a person takes longer than that to answer, and so does this crash.
    eventually("the CLI saved the turn that asked", WAIT, || {
        session_files_hold(&w, "Before planning I need one decision.")
    });
    let mut next = crash_while_asking(s, &w, ticket, run, || claude_server(&w, &mock));
    assert_eq!(
        model_requests(&mock).len(),
        1,
        "the waiting CLI made no further request"
    );
    answer_stale(&mut next, &w, ticket, run, &q, "Plan after the crash");
    // A new CLI took the stored session.
    assert_resumed_with_the_answer(&mock);
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_long_answer_streams_before_the_block_ends() {
    let w = World::new();
    let gate = w.path("gate");
    let (turn, long) = gated_answer(&gate);
    let mock = Mock::start(&w, json!({ "turns": [turn] }));
    let mut s = claude_server(&w, &mock);
    let ticket = new_ticket(&mut s, &w, "claude");
    let run = plan(&mut s, ticket);
    assert_streams_before_the_block_ends(&mut s, &w, ticket, run, &gate, &long);
    let offsets: Vec<u64> = s
        .seen
        .iter()
        .filter(|m| m["method"] == "planwire/delta" && m["params"]["runId"] == run)
        .map(|m| m["params"]["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets[0], 0, "{offsets:?}");
    // Whole and final, although the CLI printed it as pieces and then as a block.
    let texts: Vec<Value> = transcript(&mut s, run)
        .into_iter()
        .filter(|e| e["kind"] == "text")
        .collect();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert_eq!(
        (texts[0]["text"].clone(), texts[0]["final"].clone()),
        (json!(long), json!(true))
    );
}

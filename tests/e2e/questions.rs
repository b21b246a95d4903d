//! Questions: live ones from Claude's AskUserQuestion (answered on the waiting CLI's stdin),
//! open questions in a plan (answered by resuming the session), stale ones after a restart,
//! and ExitPlanMode, which is never approved.

use serde_json::{json, Value};

use crate::claude_cli::{argv_of, fake_claude_sequence, prompt_of, stdin_of};
use crate::harness::*;

fn started(w: &World) -> Server {
    let mut s = Server::start(
        w,
        &[(
            "PLANWIRE_REPLAY_STDIN_LOG",
            w.path("script-stdin.log").to_str().unwrap(),
        )],
    );
    s.initialize(json!({ "dbPath": w.db() }));
    s
}

fn ticket(s: &mut Server, w: &World, tool: &str, model: &str) -> i64 {
    let t = s.ok("planwire/createTicket", json!({ "root": w.root(), "title": "Change the greeting", "description": "Make it friendlier.", "tool": tool, "model": model }));
    t["id"].as_i64().unwrap()
}

fn question_note(s: &mut Server, ticket: i64) -> Value {
    s.wait_for("a question", |m| {
        m["method"] == "planwire/question" && m["params"]["ticketId"] == ticket
    })["params"]
        .clone()
}

fn control_responses(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "control_response")
        .map(|l| l["response"]["response"].clone())
        .collect()
}

fn script_stdin(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.path("script-stdin.log"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_live_question_is_answered_in_the_same_run() {
    let w = World::new();
    let mut s = started(&w);
    let t = ticket(&mut s, &w, "script", "ask");
    let run = s.ok("planwire/plan", json!({ "ticketId": t }))["runId"]
        .as_i64()
        .unwrap();
    let note = question_note(&mut s, t);
    let q = &note["question"];
    assert_eq!(
        (q["source"].clone(), q["status"].clone(), note["runId"].clone()),
        (json!("live"), json!("open"), json!(run))
    );
    let item = &q["items"][0];
    assert_eq!(item["question"], "Which greeting should the program print?");
    let labels: Vec<&str> = item["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Hello, world (Recommended)", "Hi there"]);
    // While it waits: the run is running, the ticket needs input, and a late client sees it.
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t }));
    assert_eq!(
        (got["ticket"]["status"].clone(), got["runs"][0]["status"].clone()),
        (json!("needs_input"), json!("running"))
    );
    assert_eq!(got["ticket"]["openQuestions"][0]["id"], q["id"]);
    let events = s.ok("planwire/getTranscript", json!({ "runId": run }))["events"].clone();
    assert!(events
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "question" && e["questionId"] == q["id"]));

    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": t, "questionId": q["id"], "answers": [{ "selected": ["Hi there"] }] }),
    );
    assert_eq!(r["runId"], run, "the same run continues");
    s.wait_planned(t);
    // The waiting CLI got Claude's answer shape: updatedInput.answers keyed by question text.
    let responses = control_responses(&script_stdin(&w));
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0]["behavior"], "allow");
    assert_eq!(
        responses[0]["updatedInput"]["answers"]["Which greeting should the program print?"],
        "Hi there"
    );
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t }));
    assert_eq!(got["questions"][0]["status"], "answered");
    assert_eq!(got["questions"][0]["answers"], json!([{ "selected": ["Hi there"] }]));
    assert_eq!(got["ticket"]["openQuestions"], json!([]));
    let kinds: Vec<&str> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"question") && kinds.contains(&"answer"), "{kinds:?}");
    // Answering twice is a conflict.
    let e = s.err(
        "planwire/answer",
        json!({ "ticketId": t, "questionId": q["id"], "answers": [{ "selected": ["Hi there"] }] }),
    );
    assert_eq!(
        (e["code"].clone(), e["data"]["kind"].clone()),
        (json!(-32014), json!("conflict"))
    );
}

#[test]
fn answers_are_checked_against_the_question() {
    let w = World::new();
    let mut s = started(&w);
    let t = ticket(&mut s, &w, "script", "ask");
    s.ok("planwire/plan", json!({ "ticketId": t }));
    let q = question_note(&mut s, t)["question"].clone();
    for (answers, field) in [
        (json!([]), "answers"),
        (json!([{ "selected": ["Bonjour"] }]), "selected"),
        (json!([{ "selected": [] }]), "answers[0]"),
        (
            json!([{ "selected": ["Hi there", "Hello, world (Recommended)"] }]),
            "selected",
        ),
    ] {
        let e = s.err(
            "planwire/answer",
            json!({ "ticketId": t, "questionId": q["id"], "answers": answers }),
        );
        assert_eq!(e["code"], -32602);
        assert!(e["message"].as_str().unwrap().contains(field), "{e}");
    }
    assert_eq!(
        s.err(
            "planwire/answer",
            json!({ "ticketId": t + 1, "questionId": q["id"], "answers": [] })
        )["code"],
        -32011
    );
    // Free text is fine (Claude's own UI offers "Other").
    s.ok(
        "planwire/answer",
        json!({ "ticketId": t, "questionId": q["id"], "answers": [{ "other": "Howdy" }] }),
    );
    s.wait_ticket(t, &["planned"]);
    let responses = control_responses(&script_stdin(&w));
    assert_eq!(
        responses[0]["updatedInput"]["answers"]["Which greeting should the program print?"],
        "Howdy"
    );
}

#[test]
fn dismissing_a_live_question_tells_the_agent_to_go_on_with_assumptions() {
    let w = World::new();
    let mut s = started(&w);
    let t = ticket(&mut s, &w, "script", "ask");
    let run = s.ok("planwire/plan", json!({ "ticketId": t }))["runId"]
        .as_i64()
        .unwrap();
    let q = question_note(&mut s, t)["question"].clone();
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": t, "questionId": q["id"], "dismiss": true }),
    );
    assert_eq!(r["runId"], run);
    s.wait_ticket(t, &["planned", "failed"]);
    let responses = control_responses(&script_stdin(&w));
    assert_eq!(responses[0]["behavior"], "deny");
    assert!(responses[0]["message"].as_str().unwrap().contains("declined"));
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t }));
    assert_eq!(got["questions"][0]["status"], "dismissed");
}

#[test]
fn exit_plan_mode_is_never_approved_and_its_plan_is_kept() {
    let w = World::new();
    let mut s = started(&w);
    let t = ticket(&mut s, &w, "script", "exitplan");
    s.ok("planwire/plan", json!({ "ticketId": t }));
    let done = s.wait_ticket(t, &["planned", "failed"]);
    // No question was raised for it.
    assert!(!s.seen.iter().any(|m| m["method"] == "planwire/question"));
    let responses = control_responses(&script_stdin(&w));
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0]["behavior"], "deny");
    assert!(responses[0]["message"].as_str().unwrap().contains("<planwire-plan>"));
    // The run gave no tagged plan, so the plan it offered became the plan.
    assert_eq!(done["status"], "planned");
    assert_eq!(done["plan"]["title"], "Plan");
    assert!(done["plan"]["description"]
        .as_str()
        .unwrap()
        .contains("Edit src/main.rs"));
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t }));
    assert!(got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["kind"] == "plan_candidate"));
}

#[test]
fn open_questions_in_a_plan_are_answered_by_resuming_the_session() {
    let w = World::new();
    fake_claude_sequence(&w, &["questions", "demo"]);
    let mut s = started(&w);
    let t = ticket(&mut s, &w, "claude", "");
    let first = s.ok("planwire/plan", json!({ "ticketId": t }))["runId"]
        .as_i64()
        .unwrap();
    let status = s.wait_ticket(t, &["needs_input", "planned", "failed"])["status"].clone();
    assert_eq!(
        status,
        "needs_input",
        "{}",
        s.ok("planwire/getTicket", json!({ "ticketId": t }))
    );
    let q = question_note(&mut s, t)["question"].clone();
    assert_eq!(q["source"], "plan");
    let session: String = w
        .sqlite()
        .query_row("SELECT session_id FROM tickets WHERE id = ?1", [t], |r| r.get(0))
        .unwrap();
    s.seen.clear();
    let r = s.ok(
        "planwire/answer",
        json!({ "ticketId": t, "questionId": q["id"], "answers": [{ "other": "Hi there" }, { "other": "Yes, a unit test" }] }),
    );
    let second = r["runId"].as_i64().unwrap();
    assert_ne!(second, first, "a new run refines the plan");
    let done = s.wait_ticket(t, &["planned", "failed", "needs_input"]);
    assert_eq!(done["status"], "planned");
    assert_eq!(done["openQuestions"], json!([]));
    let argv = argv_of(&w, 2);
    assert!(argv.windows(2).any(|p| p == ["--resume", session.as_str()]), "{argv:?}");
    let prompt = prompt_of(&w, 2);
    assert!(
        prompt.contains("Hi there") && prompt.contains("Yes, a unit test"),
        "{prompt}"
    );
    assert!(prompt.contains("Which greeting should the program print?"));
    assert_eq!(
        s.err(
            "planwire/answer",
            json!({ "ticketId": t, "questionId": q["id"], "answers": [{ "other": "x" }, { "other": "y" }] })
        )["code"],
        -32014
    );
}

#[test]
fn a_live_question_survives_a_planwire_crash_and_is_answered_after_restart() {
    let w = World::new();
    fake_claude_sequence(&w, &["ask", "demo"]);
    let mut s = started(&w);
    let t = ticket(&mut s, &w, "claude", "");
    let run = s.ok("planwire/plan", json!({ "ticketId": t }))["runId"]
        .as_i64()
        .unwrap();
    let q = question_note(&mut s, t)["question"].clone();
    let (pgid, start) = run_group(&w, run);
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The waiting CLI dies with planwire: it can make no further model request.
    eventually("the waiting CLI is gone", std::time::Duration::from_secs(5), || {
        !group_alive(pgid, start)
    });
    let stdin_before = stdin_of(&w, 1);
    assert!(control_responses(&stdin_before).is_empty(), "nothing was answered");

    let mut next = started(&w);
    let got = next.ok("planwire/getTicket", json!({ "ticketId": t }));
    assert_eq!(got["runs"][0]["status"], "interrupted");
    assert_eq!(
        got["ticket"]["status"], "needs_input",
        "an open question keeps the ticket waiting"
    );
    assert_eq!(got["ticket"]["openQuestions"][0]["status"], "stale");
    assert_eq!(got["ticket"]["openQuestions"][0]["id"], q["id"]);
    let session: String = w
        .sqlite()
        .query_row("SELECT session_id FROM tickets WHERE id = ?1", [t], |r| r.get(0))
        .unwrap();

    let r = next.ok(
        "planwire/answer",
        json!({ "ticketId": t, "questionId": q["id"], "answers": [{ "selected": ["Hi there"] }] }),
    );
    assert_ne!(r["runId"], run);
    assert_eq!(
        next.wait_ticket(t, &["planned", "failed", "needs_input"])["status"],
        "planned"
    );
    let argv = argv_of(&w, 2);
    assert!(argv.windows(2).any(|p| p == ["--resume", session.as_str()]), "{argv:?}");
    assert!(prompt_of(&w, 2).contains("Hi there"));
}

#[test]
fn planning_again_sets_unanswered_questions_aside() {
    let w = World::new();
    let mut s = started(&w);
    let t = ticket(&mut s, &w, "script", "questions");
    s.ok("planwire/plan", json!({ "ticketId": t }));
    assert_eq!(s.wait_ticket(t, &["needs_input", "failed"])["status"], "needs_input");
    s.seen.clear();
    s.ok("planwire/plan", json!({ "ticketId": t, "model": "demo" }));
    let done = s.wait_ticket(t, &["planned", "needs_input", "failed"]);
    assert_eq!(done["status"], "planned");
    assert_eq!(done["openQuestions"], json!([]));
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t }));
    assert_eq!(got["questions"][0]["status"], "dismissed");
    assert!(got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["text"].as_str().unwrap().contains("set aside")));
}

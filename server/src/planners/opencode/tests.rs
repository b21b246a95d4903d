//! The mapper on event streams recorded from the real `opencode serve` 1.18.33 against the
//! project's mock model (`tests/fixtures/opencode/serve/`, made by `record_serve.py`).

use planwire_protocol::{DeltaKind, ErrorKind, EventBody, SubagentPhase, ToolStatus};
use serde_json::{json, Value};

use super::events::{Mapper, Out};
use crate::planners::test_support::{errors, shape, shape_without_status, texts, usages};
use crate::planners::ParsedEvent;

macro_rules! serve_fixture {
    ($name:literal, $ext:literal) => {
        include_str!(concat!("../../../../tests/fixtures/opencode/serve/", $name, ".", $ext))
    };
}

fn stream(name: &str) -> &'static str {
    match name {
        "plain" => serve_fixture!("plain", "sse.jsonl"),
        "tools" => serve_fixture!("tools", "sse.jsonl"),
        "question" => serve_fixture!("question", "sse.jsonl"),
        "dismiss" => serve_fixture!("dismiss", "sse.jsonl"),
        "subagent" => serve_fixture!("subagent", "sse.jsonl"),
        "http_401" => serve_fixture!("http_401", "sse.jsonl"),
        "permission" => serve_fixture!("permission", "sse.jsonl"),
        "slow" => serve_fixture!("slow", "sse.jsonl"),
        "resume" => serve_fixture!("resume", "sse.jsonl"),
        "abort" => serve_fixture!("abort", "sse.jsonl"),
        other => panic!("no fixture {other}"),
    }
}

fn messages(name: &str) -> Value {
    let text = match name {
        "plain" => serve_fixture!("plain", "messages.json"),
        "question" => serve_fixture!("question", "messages.json"),
        "subagent" => serve_fixture!("subagent", "messages.json"),
        "resume" => serve_fixture!("resume", "messages.json"),
        "resume.history" => serve_fixture!("resume", "history.json"),
        other => panic!("no fixture {other}"),
    };
    serde_json::from_str(text).unwrap()
}

fn events_of(name: &str) -> Vec<Value> {
    stream(name).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The pass's session: the first one created without a parent (or, resumed, the first seen).
fn root_of(events: &[Value]) -> String {
    events
        .iter()
        .find_map(|e| {
            let info = e.pointer("/properties/info")?;
            (e["type"] == "session.created" && info.get("parentID").is_none())
                .then(|| info["id"].as_str().unwrap().to_owned())
        })
        .or_else(|| {
            events
                .iter()
                .find_map(|e| e.pointer("/properties/sessionID")?.as_str().map(str::to_owned))
        })
        .unwrap()
}

/// Everything the mapper gave for a stream, in order, with `finish()` at the end.
struct Run {
    mapper: Mapper,
    outs: Vec<Out>,
}

impl Run {
    fn of(name: &str) -> Run {
        Run::with_history(name, Vec::new())
    }

    fn with_history(name: &str, history: Vec<String>) -> Run {
        let events = events_of(name);
        let mut mapper = Mapper::new();
        mapper.set_root(&root_of(&events), history);
        let mut outs = Vec::new();
        for e in &events {
            outs.extend(mapper.on_event(e));
        }
        outs.push(Out::Events(mapper.finish()));
        Run { mapper, outs }
    }

    fn events(&self) -> Vec<ParsedEvent> {
        events_in(&self.outs)
    }

    fn deltas(&self, kind: DeltaKind) -> String {
        self.outs
            .iter()
            .filter_map(|o| match o {
                Out::Delta { kind: k, text, .. } if *k == kind => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    fn count(&self, pred: impl Fn(&Out) -> bool) -> usize {
        self.outs.iter().filter(|o| pred(o)).count()
    }
}

fn events_in(outs: &[Out]) -> Vec<ParsedEvent> {
    outs.iter()
        .flat_map(|o| match o {
            Out::Events(e) => e.clone(),
            _ => Vec::new(),
        })
        .collect()
}

const PROMPT: &str = "Plan this ticket: make it say hi.";

#[test]
fn plain_streams_deltas_and_stores_each_block_once() {
    let r = Run::of("plain");
    let events = r.events();
    assert_eq!(shape(&events), ["reasoning", "text!", "usage"]);
    let text = r.mapper.final_text();
    assert!(text.starts_with("I looked at the code.\n\n<planwire-plan>"), "{text}");
    assert_eq!(
        r.deltas(DeltaKind::Text),
        text,
        "the deltas join to exactly the stored text"
    );
    assert_eq!(r.deltas(DeltaKind::Reasoning), "Let me think.");
    assert_eq!(usages(&events), [(100, 20, 0, 0, 0.0)]);
    // The prompt came back as a text part of the user message: it is not the agent's.
    assert!(!r.mapper.all_text().contains(PROMPT));
    assert_eq!(r.count(|o| *o == Out::Idle), 1);
    assert!(r.count(|o| *o == Out::Busy) >= 1);
    assert!(r.mapper.answered());
    assert_eq!(r.mapper.explain_missing_answer(""), None);
}

#[test]
fn tools_pair_calls_with_results_and_a_denied_command_is_an_error() {
    let r = Run::of("tools");
    let events = r.events();
    // Results come in completion order (here the denied `touch` first).
    assert_eq!(
        shape_without_status(&events),
        [
            "text",
            "toolCall",
            "toolCall",
            "toolCall",
            "toolResult",
            "toolResult",
            "toolResult",
            "usage",
            "text!",
            "usage"
        ],
        "{events:#?}"
    );
    let result = |id: &str| {
        events
            .iter()
            .find_map(|e| match &e.body {
                EventBody::ToolResult {
                    call_id,
                    output,
                    status,
                } if call_id == id => Some((*status, output.clone())),
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(result("call_read").0, ToolStatus::Completed);
    assert!(result("call_read").1.contains("fn main"));
    assert!(result("call_ls").1.contains("main.rs"));
    let (status, output) = result("call_touch");
    assert_eq!(status, ToolStatus::Error);
    assert!(output.contains("rule which prevents"), "{output}");
    assert_eq!(texts(&events)[0], ("Let me look around.".to_owned(), false));
}

#[test]
fn a_question_is_asked_after_the_text_before_it_and_the_turn_goes_on() {
    let r = Run::of("question");
    let asks: Vec<&Out> = r.outs.iter().filter(|o| matches!(o, Out::Ask { .. })).collect();
    assert_eq!(asks.len(), 1);
    let Out::Ask { request, items } = asks[0] else {
        unreachable!()
    };
    assert!(request.starts_with("que_"), "{request}");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].question, "Which greeting should the program print?");
    assert_eq!(items[0].header, "Greeting");
    let labels: Vec<&str> = items[0].options.iter().map(|o| o.label.as_str()).collect();
    assert_eq!(labels, ["Hello, world", "Hi there"]);
    assert_eq!(items[0].options[0].description.as_deref(), Some("Classic"));
    assert!(!items[0].multi_select && items[0].allow_other);
    // Before the question: the text written before it (stored once), then the call.
    let ask_at = r.outs.iter().position(|o| matches!(o, Out::Ask { .. })).unwrap();
    let before = shape(&events_in(&r.outs[..ask_at]));
    assert_eq!(before, ["text", "toolCall"]);
    let events = r.events();
    assert_eq!(
        shape(&events),
        ["text", "toolCall", "toolResult=ok", "usage", "text!", "usage"]
    );
    assert_eq!(texts(&events)[0].0, "Before planning I need one decision.");
    assert!(matches!(&events[1].body, EventBody::ToolCall { name, input, .. }
        if name == "question" && input == "Which greeting should the program print?"));
    assert!(matches!(&events[2].body, EventBody::ToolResult { output, .. } if output.contains("Hi there")));
    assert!(r.mapper.final_text().contains("Plan with the chosen greeting"));
    // The early text and its deltas agree: nothing stored twice.
    let stored: String = texts(&events).iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(r.deltas(DeltaKind::Text), stored);
}

#[test]
fn a_dismissal_is_a_free_text_answer_and_the_plan_follows() {
    let r = Run::of("dismiss");
    let events = r.events();
    assert!(
        matches!(&events[2].body, EventBody::ToolResult { output, status: ToolStatus::Completed, .. }
        if output.contains("Continue on your stated assumptions"))
    );
    assert!(r.mapper.final_text().contains("Plan on assumptions"));
}

#[test]
fn a_subagent_streams_under_its_own_key() {
    let r = Run::of("subagent");
    let events = r.events();
    let s = shape(&events);
    let child = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::Subagent {
                phase: SubagentPhase::Start,
                label,
                ..
            } => Some((e.agent.clone().unwrap(), label.clone())),
            _ => None,
        })
        .unwrap();
    assert!(child.0.starts_with("ses_"), "{child:?}");
    assert_eq!(child.1, "Find greeting");
    let c = format!("@{}", child.0);
    let expected: Vec<String> = [
        "text",
        "toolCall",
        &format!("subagent:start{c}"),
        &format!("text{c}"),
        &format!("toolCall{c}"),
        &format!("toolResult=ok{c}"),
        "usage",
        &format!("text{c}"),
        "usage",
        &format!("subagent:end{c}"),
        "toolResult=ok",
        "usage",
        "text!",
        "usage",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(s, expected);
    // The task's result is the child's final text; the child's text is not the main agent's.
    assert!(matches!(&events[10].body, EventBody::ToolResult { output, .. } if output.contains("CHILD REPORT")));
    assert!(matches!(&events[9].body, EventBody::Subagent { status: Some(s), .. } if s == "completed"));
    assert!(!r.mapper.all_text().contains("CHILD REPORT"));
    assert!(r.mapper.final_text().contains("Plan after research"));
    // Usage counts the child's steps too: 4 model requests.
    assert_eq!(usages(&events).last().unwrap().0, 400);
}

#[test]
fn a_401_is_a_typed_error_and_ends_the_turn() {
    let r = Run::of("http_401");
    let events = r.events();
    assert_eq!(shape(&events), ["error:Auth"]);
    assert_eq!(errors(&events)[0].1, "Incorrect API key provided: sk-mock.");
    assert_eq!(
        r.mapper.error_message().as_deref(),
        Some("Incorrect API key provided: sk-mock.")
    );
    assert_eq!(r.count(|o| *o == Out::Idle), 1);
    assert!(!r.mapper.answered());
}

#[test]
fn permissions_are_answered_by_the_read_only_rules() {
    let r = Run::of("permission");
    let replies: Vec<&Value> = r
        .outs
        .iter()
        .filter_map(|o| match o {
            Out::Permission { reply, .. } => Some(reply),
            _ => None,
        })
        .collect();
    assert_eq!(replies.len(), 2, "{:?}", r.outs);
    // Both are rejected with a reason: the redirection, and the read of a `.env` file.
    let messages: Vec<&str> = replies
        .iter()
        .map(|r| {
            assert_eq!(r["reply"], "reject", "{r}");
            r["message"].as_str().unwrap()
        })
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("cat src/main.rs > note.txt")),
        "{messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.contains("does not read secrets")),
        "{messages:?}"
    );
    let events = r.events();
    let redirect = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::ToolResult {
                call_id,
                status,
                output,
            } if call_id == "call_redirect" => Some((*status, output.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(redirect.0, ToolStatus::Error);
    assert!(redirect.1.contains("planwire plans read-only"), "{}", redirect.1);
    assert!(r.mapper.final_text().contains("Plan without writing"));
}

#[test]
fn a_long_answer_streams_in_many_deltas_and_is_stored_once() {
    let r = Run::of("slow");
    let n = r.count(|o| matches!(o, Out::Delta { .. }));
    assert!(n > 20, "{n} deltas");
    let events = r.events();
    assert_eq!(shape(&events), ["text!", "usage"]);
    assert_eq!(r.deltas(DeltaKind::Text), texts(&events)[0].0);
    // Every delta comes before the stored text.
    let stored_at = r
        .outs
        .iter()
        .position(|o| matches!(o, Out::Events(e) if !e.is_empty()))
        .unwrap();
    let last_delta = r.outs.iter().rposition(|o| matches!(o, Out::Delta { .. })).unwrap();
    assert!(last_delta < stored_at);
}

#[test]
fn a_resumed_session_replays_none_of_its_history() {
    let history: Vec<String> = messages("resume.history")
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["info"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(history.len(), 2);
    let mut r = Run::with_history("resume", history);
    let events = r.events();
    assert_eq!(shape(&events), ["text!", "usage"]);
    assert!(r.mapper.final_text().contains("Second plan"));
    // All messages from the API, the history included: nothing new.
    let again = r.mapper.reconcile(&messages("resume"));
    assert!(events_in(&again).is_empty(), "{again:?}");
}

#[test]
fn an_abort_says_nothing_and_stores_no_unfinished_block() {
    let r = Run::of("abort");
    let events = r.events();
    // The deltas were a preview of a block that never ended.
    assert!(events.is_empty(), "{events:?}");
    assert!(r.deltas(DeltaKind::Text).starts_with("word wor"));
    assert_eq!(r.mapper.error_message(), None);
    assert!(!r.mapper.answered());
}

#[test]
fn a_cut_stream_is_completed_from_the_messages() {
    let events = events_of("plain");
    let cut = events.iter().position(|e| e["type"] == "message.part.delta").unwrap() + 2;
    let mut mapper = Mapper::new();
    mapper.set_root(&root_of(&events), []);
    let mut outs = Vec::new();
    for e in &events[..cut] {
        outs.extend(mapper.on_event(e));
    }
    assert!(!mapper.answered());
    outs.extend(mapper.reconcile(&messages("plain")));
    assert!(mapper.answered());
    let full = Run::of("plain");
    assert_eq!(mapper.final_text(), full.mapper.final_text());
    // The stream coming back afterwards adds nothing twice.
    for e in &events[cut..] {
        outs.extend(mapper.on_event(e));
    }
    outs.push(Out::Events(mapper.finish()));
    assert_eq!(shape(&events_in(&outs)), ["reasoning", "text!", "usage"]);
}

#[test]
fn a_question_missed_by_a_cut_stream_is_asked_once_from_the_api() {
    let events = events_of("question");
    let at = events.iter().position(|e| e["type"] == "question.asked").unwrap();
    let mut mapper = Mapper::new();
    mapper.set_root(&root_of(&events), []);
    for e in &events[..at] {
        mapper.on_event(e);
    }
    // `GET /question` lists it in the event's shape.
    let pending = events[at]["properties"].clone();
    let asked = mapper.on_pending("question.asked", &pending);
    assert_eq!(asked.iter().filter(|o| matches!(o, Out::Ask { .. })).count(), 1);
    // The live event, should the stream deliver it after all, asks nothing more.
    let again = mapper.on_event(&events[at]);
    assert!(!again.iter().any(|o| matches!(o, Out::Ask { .. })));
    // Questions of another session are not ours.
    let mut other = pending.clone();
    other["sessionID"] = json!("ses_other");
    other["id"] = json!("que_other");
    assert!(mapper.on_pending("question.asked", &other).is_empty());
}

#[test]
fn a_locked_database_is_retryable_not_an_error() {
    let mut mapper = Mapper::new();
    mapper.set_root("ses_a", []);
    let locked = json!({ "type": "session.error", "properties": { "sessionID": "ses_a", "error": {
        "name": "UnknownError", "data": { "message": "effect/sql/SqlError: Failed to execute statement\n  [cause]: SQLiteError: database is locked" } } } });
    assert_eq!(mapper.on_event(&locked), [Out::Locked]);
    assert_eq!(mapper.error_message(), None);
    // A turn that failed on the lock says only this much.
    let bare = json!({ "type": "session.error", "properties": { "sessionID": "ses_a", "error": {
        "name": "UnknownError", "data": { "message": "Failed to execute statement" } } } });
    assert_eq!(mapper.on_event(&bare), [Out::Locked]);
    // Another error is the run's, and ends a turn that never started.
    let other = json!({ "type": "session.error", "properties": { "sessionID": "ses_a", "error": {
        "name": "UnknownError", "data": { "message": "Unexpected server error." } } } });
    let outs = mapper.on_event(&other);
    assert_eq!(shape(&events_in(&outs)), ["error:Unknown"]);
    assert!(outs.contains(&Out::Idle));
    assert_eq!(mapper.error_message().as_deref(), Some("Unexpected server error."));
    // Whether the turn started decides how it is retried.
    assert!(!mapper.started());
    let busy =
        json!({ "type": "session.status", "properties": { "sessionID": "ses_a", "status": { "type": "busy" } } });
    mapper.on_event(&busy);
    assert!(mapper.started());
    mapper.prompted();
    assert!(!mapper.started());
}

#[test]
fn other_sessions_and_noise_give_nothing() {
    let mut mapper = Mapper::new();
    mapper.set_root("ses_mine", []);
    for e in events_of("plain") {
        assert!(mapper.on_event(&e).is_empty(), "{e}");
    }
    for garbage in [
        json!(null),
        json!([1]),
        json!({"type": 7}),
        json!({"type": "message.part.updated", "properties": {"part": "x"}}),
    ] {
        assert!(mapper.on_event(&garbage).is_empty());
    }
    assert_eq!(mapper.finish(), []);
}

#[test]
fn an_error_is_typed_like_run_errors_were() {
    let mut mapper = Mapper::new();
    mapper.set_root("s", []);
    let error = |name: &str, data: Value| json!({ "type": "session.error", "properties": { "sessionID": "s", "error": { "name": name, "data": data } } });
    mapper.on_event(
        &json!({ "type": "session.status", "properties": { "sessionID": "s", "status": { "type": "busy" } } }),
    );
    let outs = mapper.on_event(&error("ContextOverflowError", json!({ "message": "too long" })));
    assert_eq!(
        errors(&events_in(&outs)),
        [(ErrorKind::ContextOverflow, "too long".to_owned())]
    );
    // The same error again is shown once.
    assert!(events_in(&mapper.on_event(&error("ContextOverflowError", json!({ "message": "too long" })))).is_empty());
    let outs = mapper.on_event(&error(
        "APIError",
        json!({ "message": "Rate limit reached", "statusCode": 429 }),
    ));
    assert_eq!(errors(&events_in(&outs))[0].0, ErrorKind::RateLimit);
    // An abort is planwire's own stop.
    assert!(mapper
        .on_event(&error("MessageAbortedError", json!({ "message": "Aborted" })))
        .is_empty());
}

#[test]
fn writes_its_directory_in_each_xdg_base() {
    use crate::planners::writable::tests::{env, paths};
    assert_eq!(
        paths(&super::writable(&env(&[]))),
        [
            "/h/.local/share/opencode",
            "/h/.cache/opencode",
            "/h/.config/opencode",
            "/h/.local/state/opencode"
        ]
    );
    assert_eq!(
        paths(&super::writable(&env(&[("XDG_DATA_HOME", "/d")])))[0],
        "/d/opencode"
    );
}

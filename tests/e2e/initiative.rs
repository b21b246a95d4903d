//! Planning beyond one ticket: a breakdown into dependent tickets (outline, expansion, one
//! repair), and linked research before a plan. Fake `claude` CLIs replay real recordings
//! with scripted answers.

use serde_json::{json, Value};

use crate::claude_cli::{answer_script, argv_of, cwd_of, fake_claude_sequence, prompt_of};
use crate::harness::*;

fn outline(tickets: Value) -> String {
    format!(
        "Here is the outline.\n\n<planwire-outline>{}</planwire-outline>",
        json!({ "tickets": tickets })
    )
}

fn expansion(keys: &[(&str, &str, &[&str])]) -> String {
    let tickets: Vec<Value> = keys
        .iter()
        .map(|(k, t, d)| {
            json!({ "key": k, "title": t, "description": format!("## Steps\n1. Build {k}."),
                    "acceptanceCriteria": [format!("{k} works")], "openQuestions": [], "dependencies": d })
        })
        .collect();
    format!(
        "Expanded.\n\n<planwire-expansion>{}</planwire-expansion>",
        json!({ "tickets": tickets })
    )
}

fn good_outline() -> Value {
    json!([
        { "key": "api", "title": "Greeting API", "scope": "Serve the greeting.", "dependencies": [] },
        { "key": "ui", "title": "Greeting UI", "scope": "Show it.", "dependencies": ["api"] },
    ])
}

fn started(w: &World) -> Server {
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db(), "stopGraceMs": 1000 }));
    s
}

fn labels(agent_runs: &Value) -> Vec<(String, String)> {
    agent_runs
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["label"].as_str().unwrap().to_owned(),
                a["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_breakdown_creates_planned_tickets_with_their_dependencies() {
    let w = World::new();
    let o = answer_script(&w, "outline.jsonl", "sess-b", &outline(good_outline()), 0);
    let e = answer_script(
        &w,
        "expansion.jsonl",
        "sess-b",
        &expansion(&[("api", "x", &[]), ("ui", "y", &["api"])]),
        0,
    );
    fake_claude_sequence(&w, &[&o, &e]);
    let mut s = started(&w);
    let r = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "A greeting service with a UI.", "tool": "claude" }),
    );
    let run = r["runId"].as_i64().unwrap();
    let ended = run_ends(&mut s, run);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(
        (ended["kind"].clone(), ended["ticketId"].clone()),
        (json!("breakdown"), Value::Null)
    );
    assert_eq!(ended["initiative"], "A greeting service with a UI.");
    // Its tickets were announced before the run's end.
    let end_at = s
        .seen
        .iter()
        .position(|m| m["method"] == "planwire/runChanged" && m["params"]["run"]["status"] == "completed")
        .unwrap();
    let announced = s.seen[..end_at]
        .iter()
        .filter(|m| m["method"] == "planwire/ticketChanged")
        .count();
    assert_eq!(announced, 2);
    // Two passes, each its own agent run, in one provider session.
    let got = s.ok("planwire/getRun", json!({ "runId": run }));
    assert_eq!(
        labels(&got["agentRuns"]),
        [
            ("Outline".to_owned(), "completed".to_owned()),
            ("Expansion".to_owned(), "completed".to_owned())
        ]
    );
    assert!(
        argv_of(&w, 2).windows(2).any(|p| p == ["--resume", "sess-b"]),
        "{:?}",
        argv_of(&w, 2)
    );
    assert!(prompt_of(&w, 1).contains("A greeting service with a UI."));
    let events = s.ok("planwire/getTranscript", json!({ "runId": run }))["events"].clone();
    let subagents: Vec<(String, String)> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "subagent")
        .map(|e| {
            (
                e["label"].as_str().unwrap().to_owned(),
                e["phase"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(subagents.len(), 4, "{subagents:?}");
    // The tickets: planned, titles as outlined, dependencies as ticket ids.
    let list = s.ok(
        "planwire/listTickets",
        json!({ "root": w.root(), "initiativeRunId": run }),
    )["tickets"]
        .clone();
    let tickets = list.as_array().unwrap();
    assert_eq!(tickets.len(), 2);
    let api = tickets.iter().find(|t| t["title"] == "Greeting API").unwrap();
    let ui = tickets.iter().find(|t| t["title"] == "Greeting UI").unwrap();
    assert_eq!(api["status"], "planned");
    assert_eq!(ui["dependsOn"], json!([api["id"]]));
    assert_eq!(api["dependsOn"], json!([]));
    assert_eq!(ui["initiativeRunId"], run);
    assert_eq!(ui["plan"]["acceptanceCriteria"], json!(["ui works"]));
    assert_eq!(ui["description"], "Show it.");
    // They survive a restart.
    assert_eq!(s.shutdown_and_exit(), 0);
    let mut again = started(&w);
    let after = again.ok("planwire/listTickets", json!({ "initiativeRunId": run }))["tickets"].clone();
    assert_eq!(after.as_array().unwrap().len(), 2);
}

#[test]
fn an_invalid_graph_is_repaired_once_then_fails_clearly() {
    let w = World::new();
    let cyclic = json!([
        { "key": "a", "title": "A", "scope": "s", "dependencies": ["b"] },
        { "key": "b", "title": "B", "scope": "s", "dependencies": ["a"] },
    ]);
    let bad = answer_script(&w, "bad.jsonl", "sess-c", &outline(cyclic.clone()), 0);
    fake_claude_sequence(&w, &[&bad, &bad]);
    let mut s = started(&w);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "Two things.", "tool": "claude" }),
    )["runId"]
        .as_i64()
        .unwrap();
    let ended = run_ends(&mut s, run);
    assert_eq!(ended["status"], "failed");
    assert_eq!(ended["failure"]["code"], "invalid_outline");
    assert!(
        ended["failure"]["message"].as_str().unwrap().contains("cycle"),
        "{ended}"
    );
    // The repair was one follow-up in the same session, naming the problem.
    assert!(argv_of(&w, 2).windows(2).any(|p| p == ["--resume", "sess-c"]));
    assert!(prompt_of(&w, 2).contains("cycle"), "{}", prompt_of(&w, 2));
    let events = s.ok("planwire/getTranscript", json!({ "runId": run }))["events"].clone();
    assert!(events
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "error" && e["message"].as_str().unwrap().contains("cycle")));
    assert_eq!(
        s.ok("planwire/listTickets", json!({ "initiativeRunId": run }))["tickets"],
        json!([])
    );
}

#[test]
fn a_repaired_outline_goes_on_to_the_expansion() {
    let w = World::new();
    let selfdep = json!([{ "key": "a", "title": "A", "scope": "s", "dependencies": ["a"] }]);
    let bad = answer_script(&w, "bad.jsonl", "sess-d", &outline(selfdep), 0);
    let fixed = answer_script(
        &w,
        "fixed.jsonl",
        "sess-d",
        &outline(json!([{ "key": "a", "title": "A", "scope": "s", "dependencies": [] }])),
        0,
    );
    let exp = answer_script(&w, "exp.jsonl", "sess-d", &expansion(&[("a", "A", &[])]), 0);
    fake_claude_sequence(&w, &[&bad, &fixed, &exp]);
    let mut s = started(&w);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "One thing.", "tool": "claude" }),
    )["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(run_ends(&mut s, run)["status"], "completed");
    assert!(prompt_of(&w, 2).contains("self-dependency"));
    let got = s.ok("planwire/getRun", json!({ "runId": run }));
    let names: Vec<String> = labels(&got["agentRuns"]).into_iter().map(|(l, _)| l).collect();
    assert_eq!(names, ["Outline", "Outline repair", "Expansion"]);
}

#[test]
fn a_stopped_breakdown_creates_no_tickets() {
    let w = World::new();
    let slow = crate::stop::slow_with_grandchild(&w);
    fake_claude_sequence(&w, &[&slow]);
    let mut s = started(&w);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "Big.", "tool": "claude" }),
    )["runId"]
        .as_i64()
        .unwrap();
    s.wait_for("streaming", |m| {
        m["method"] == "planwire/transcript"
            && m["params"]["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["kind"] == "text")
    });
    let (pgid, start) = run_group(&w, run);
    assert_eq!(
        s.ok("planwire/stop", json!({ "runId": run })),
        json!({ "stopped": true })
    );
    assert!(!group_alive(pgid, start));
    let got = s.ok("planwire/getRun", json!({ "runId": run }));
    assert_eq!(got["run"]["status"], "cancelled");
    assert_eq!(
        labels(&got["agentRuns"]),
        [("Outline".to_owned(), "cancelled".to_owned())]
    );
    assert_eq!(s.ok("planwire/listTickets", json!({})), json!({ "tickets": [] }));
}

#[test]
fn linked_research_feeds_the_plan_and_a_failing_project_is_skipped() {
    let w = World::new();
    for dir in ["backend", "docs"] {
        std::fs::create_dir_all(w.path(dir)).unwrap();
    }
    let backend = w.path("backend").canonicalize().unwrap().display().to_string();
    let docs = w.path("docs").canonicalize().unwrap().display().to_string();
    let selection = answer_script(
        &w,
        "selection.jsonl",
        "sess-sel",
        r#"Both matter. <planwire-research-selection>{"requests": [{"name": "backend", "question": "Which endpoint serves the greeting?"}, {"name": "docs", "question": "Is the greeting documented?"}]}</planwire-research-selection>"#,
        0,
    );
    let research = answer_script(
        &w,
        "research.jsonl",
        "sess-back",
        r#"Found it. <planwire-research>{"summary": "The backend serves greetings.", "findings": ["src/api.rs defines it"], "contracts": ["GET /api/greeting -> {\"text\": string}"]}</planwire-research>"#,
        0,
    );
    let broken = answer_script(&w, "broken.jsonl", "sess-docs", "oops", 1);
    // The two research passes run at the same time: each project's script goes by its root.
    fake_claude_sequence(&w, &[&selection, "demo", "demo", "demo"]);
    std::fs::write(w.path("claude-script.backend"), &research).unwrap();
    std::fs::write(w.path("claude-script.docs"), &broken).unwrap();
    let mut s = started(&w);
    s.ok(
        "planwire/linkProject",
        json!({ "root": w.root(), "linkedRoot": backend, "name": "backend", "role": "the HTTP API" }),
    );
    let links = s.ok(
        "planwire/linkProject",
        json!({ "root": w.root(), "linkedRoot": docs, "name": "docs", "role": "user docs" }),
    );
    assert_eq!(links["links"].as_array().unwrap().len(), 2);
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Show the greeting", "description": "In the web app.", "tool": "claude" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_planned(ticket);
    // Each research ran in its own project's root; the plan in the ticket's.
    assert_eq!(cwd_of(&w, 1), w.root());
    let mut research_roots = [cwd_of(&w, 2), cwd_of(&w, 3)];
    research_roots.sort();
    let mut expected = [backend.clone(), docs.clone()];
    expected.sort();
    assert_eq!(research_roots, expected);
    assert_eq!(cwd_of(&w, 4), w.root());
    let plan_prompt = prompt_of(&w, 4);
    assert!(plan_prompt.contains("GET /api/greeting"), "the contract is embedded");
    assert!(plan_prompt.contains("write every external contract"));
    assert!(!plan_prompt.contains("sess-docs"));
    let got = s.ok("planwire/getRun", json!({ "runId": run }));
    assert_eq!(
        labels(&got["agentRuns"]),
        [
            ("Linked research selection".to_owned(), "completed".to_owned()),
            ("Linked research: backend".to_owned(), "completed".to_owned()),
            ("Linked research: docs".to_owned(), "failed".to_owned()),
        ]
    );
    // The ticket's session is the plan's, not a research session.
    let session: String = w
        .sqlite()
        .query_row("SELECT session_id FROM tickets WHERE id = ?1", [ticket], |r| r.get(0))
        .unwrap();
    assert!(!session.starts_with("sess-"), "{session}");
    let unlinked = s.ok("planwire/unlinkProject", json!({ "root": w.root(), "name": "docs" }));
    assert_eq!(unlinked["links"].as_array().unwrap().len(), 1);
    assert_eq!(
        s.err("planwire/unlinkProject", json!({ "root": w.root(), "name": "docs" }))["code"],
        -32011
    );
}

#[test]
fn delete_removes_a_ticket_unless_it_is_being_planned() {
    let w = World::new();
    let mut s = started(&w);
    let (ticket, _) = crate::stop::start_slow(&mut s, &w);
    assert_eq!(
        s.err("planwire/deleteTicket", json!({ "ticketId": ticket }))["code"],
        -32010
    );
    s.ok("planwire/stop", json!({ "ticketId": ticket }));
    assert_eq!(
        s.ok("planwire/deleteTicket", json!({ "ticketId": ticket })),
        json!({ "deleted": true })
    );
    assert_eq!(
        s.err("planwire/getTicket", json!({ "ticketId": ticket }))["code"],
        -32011
    );
    let rows: i64 = w
        .sqlite()
        .query_row("SELECT COUNT(*) FROM transcript", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
}

#[test]
fn the_builtin_breakdown_script_creates_three_dependent_tickets() {
    let w = World::new();
    let mut s = started(&w);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "Greetings everywhere.", "tool": "script", "model": "breakdown" }),
    )["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(run_ends(&mut s, run)["status"], "completed");
    let tickets = s.ok("planwire/listTickets", json!({ "initiativeRunId": run }))["tickets"].clone();
    let deps: Vec<usize> = tickets
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["dependsOn"].as_array().unwrap().len())
        .collect();
    assert_eq!(deps, [0, 1, 2]);
}

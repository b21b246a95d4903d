//! ACP agents as planners (`acp:<name>`), against a scripted ACP agent
//! (`tests/fixtures/acp/fake_agent.py`) that starts in a mode that writes without asking, reads
//! through planwire, asks to write a file, and sends a request planwire does not know.

use serde_json::{json, Value};

use crate::harness::*;

fn fake_agent() -> String {
    format!("{}/../tests/fixtures/acp/fake_agent.py", env!("CARGO_MANIFEST_DIR"))
}

struct Fake {
    w: World,
    s: Server,
    log: std::path::PathBuf,
}

fn start(scenario: &str) -> Fake {
    let w = World::new();
    std::fs::write(
        w.path("project/README.md"),
        "# Demo\nThe greeting lives in src/main.rs.\n",
    )
    .unwrap();
    let log = w.path("agent.log");
    let mut s = w.start();
    // The scripted agent logs what it receives to a file the OS sandbox would refuse: these
    // tests check planwire's own refusals (the real-CLI tier runs ACP agents sandboxed).
    s.initialize(json!({
        "dbPath": w.db(),
        "sandbox": "off",
        "stopGraceMs": 1000,
        "acpAgents": { "fake": {
            "command": "python3",
            "args": [fake_agent()],
            "env": { "FAKE_SCENARIO": scenario, "FAKE_LOG": log.display().to_string() },
        }},
    }));
    Fake { w, s, log }
}

impl Fake {
    fn plan(&mut self) -> (i64, i64) {
        let r = self.s.ok(
            "planwire/plan",
            json!({ "root": self.w.root(), "title": "Change the greeting", "description": "", "tool": "acp:fake" }),
        );
        (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap())
    }

    /// What the agent received, in order.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn methods(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter_map(|m| m["method"].as_str().map(str::to_owned))
            .collect()
    }

    fn forbidden_file(&self) -> bool {
        self.w.path("project/PLANWIRE_FORBIDDEN.md").exists()
    }
}

#[test]
fn an_acp_agent_plans_in_plan_mode_and_every_write_is_refused() {
    let mut f = start("plan");
    let init = f.s.ok("planwire/status", json!({}));
    let fake = init["planners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tool"] == "acp:fake")
        .cloned();
    let fake = fake.expect("the configured agent is listed");
    assert_eq!(fake["found"], true);
    let (ticket, run) = f.plan();
    let t = f.s.wait_planned(ticket);
    assert_eq!(t["plan"]["title"], "Change the greeting");
    assert!(!f.forbidden_file(), "the write never happened");
    // Plan mode was selected before the first prompt.
    let methods = f.methods();
    let mode_at = methods.iter().position(|m| m == "session/set_mode").expect("set_mode");
    let prompt_at = methods.iter().position(|m| m == "session/prompt").expect("prompt");
    assert!(mode_at < prompt_at, "{methods:?}");
    let set = f
        .received()
        .into_iter()
        .find(|m| m["method"] == "session/set_mode")
        .unwrap();
    assert_eq!(set["params"]["modeId"], "plan");
    // The write's permission (no kind: taken from the tool call) was rejected; the read outside
    // the root was refused; the unknown request got -32601.
    let received = f.received();
    let rejected = received.iter().any(|m| m["result"]["outcome"]["optionId"] == "reject");
    assert!(rejected, "{received:?}");
    assert!(received.iter().any(|m| m["outsideRead"] == true));
    assert!(received.iter().any(|m| m["unknownAnswer"] == -32601));
    let initialize = received.iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(initialize["params"]["clientCapabilities"]["fs"]["writeTextFile"], false);
    assert_eq!(initialize["params"]["clientCapabilities"]["terminal"], false);
    // The run records the mode, the tool calls and the failed write.
    let events = f.s.notified_events(run);
    assert!(events
        .iter()
        .any(|e| e["kind"] == "raw" && e["line"].as_str().unwrap().contains(r#""acpMode":"plan""#)));
    assert!(events
        .iter()
        .any(|e| e["kind"] == "toolCall" && e["callId"] == "read-1"));
    assert!(events
        .iter()
        .any(|e| e["kind"] == "toolResult" && e["callId"] == "write-1" && e["status"] == "error"));
    assert!(events
        .iter()
        .any(|e| e["kind"] == "session" && e["providerSessionId"] == "fake-session-1"));
    assert!(events.iter().any(|e| e["kind"] == "usage" && e["costUsd"] == 0.01));
    let r = f.s.ok("planwire/getRun", json!({ "runId": run }));
    assert_eq!(r["run"]["status"], "completed");
    let (pgid, start) = run_group(&f.w, run);
    assert!(!group_alive(pgid, start), "the agent's group is gone");

    // Planning again resumes the agent's session with session/load.
    let again = f.s.ok("planwire/plan", json!({ "ticketId": ticket }));
    let run2 = again["runId"].as_i64().unwrap();
    f.s.wait_for("the second run's end", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run2
            && m["params"]["run"]["status"] != "running"
    });
    let load = f.received().into_iter().find(|m| m["method"] == "session/load");
    assert_eq!(load.expect("session/load")["params"]["sessionId"], "fake-session-1");
    let events = f.s.notified_events(run2);
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "text" && e["text"] == "an old message"),
        "the replayed history is not this run's transcript"
    );
}

#[test]
fn a_refused_permission_that_ends_the_turn_gets_one_more_prompt() {
    let mut f = start("refuse-ends");
    let (ticket, _) = f.plan();
    let t = f.s.wait_ticket(ticket, &["planned", "failed"]);
    let runs = f.s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"].clone();
    assert_eq!(t["status"], "planned", "{runs}");
    let prompts: Vec<Value> = f
        .received()
        .into_iter()
        .filter(|m| m["method"] == "session/prompt")
        .collect();
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1]["params"]["prompt"][0]["text"]
        .as_str()
        .unwrap()
        .contains("refused because planning is read-only"));
    assert!(!f.forbidden_file());
}

#[test]
fn an_elicitation_is_a_live_question() {
    let mut f = start("ask");
    let (ticket, run) = f.plan();
    let q = f.s.wait_for("the question", |m| m["method"] == "planwire/question");
    let question = &q["params"]["question"];
    assert_eq!(question["source"], "live");
    assert_eq!(question["runId"], run);
    assert_eq!(question["items"][0]["question"], "Which greeting?");
    assert_eq!(question["items"][0]["options"][1]["label"], "Hi there");
    f.s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": question["id"], "answers": [{ "selected": ["Hi there"] }] }),
    );
    let t = f.s.wait_ticket(ticket, &["planned", "failed"]);
    let runs = f.s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"].clone();
    assert_eq!(t["status"], "planned", "{runs}");
    assert!(t["plan"]["description"].as_str().unwrap().contains("Hi there"));
    let accepted = f
        .received()
        .into_iter()
        .any(|m| m["result"]["action"] == "accept" && m["result"]["content"]["greeting"] == "Hi there");
    assert!(accepted);
}

#[test]
fn stop_cancels_the_session_then_kills_the_group() {
    let mut f = start("slow");
    let (ticket, run) = f.plan();
    f.s.wait_for("streamed text", |m| {
        m["method"] == "planwire/delta" && m["params"]["runId"] == run
    });
    let (pgid, start) = run_group(&f.w, run);
    assert!(group_alive(pgid, start));
    let r = f.s.ok("planwire/stop", json!({ "ticketId": ticket }));
    assert_eq!(r["stopped"], true);
    assert!(
        !group_alive(pgid, start),
        "the agent stays alive after a cancel: the group must go"
    );
    assert!(f.methods().iter().any(|m| m == "session/cancel"));
    let t = f.s.wait_ticket(ticket, &["stopped"]);
    assert_eq!(t["status"], "stopped");
}

#[test]
fn an_agent_without_a_plan_mode_is_refused_unless_allowed() {
    let mut f = start("no-modes");
    let (ticket, run) = f.plan();
    let t = f.s.wait_ticket(ticket, &["planned", "failed"]);
    assert_eq!(t["status"], "failed");
    let r = f.s.ok("planwire/getRun", json!({ "runId": run }));
    let message = r["run"]["failure"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("offers no plan or read-only mode"), "{message}");
    assert!(
        !f.methods().iter().any(|m| m == "session/prompt"),
        "it never got a prompt"
    );
    assert!(!f.forbidden_file());
}

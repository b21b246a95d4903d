//! Planning context with the real Claude Code against the mock model server (ignored by
//! default, like the rest of the real-CLI tier): a branch planned in its second worktree, a
//! missing branch refused before any CLI starts, a GitHub reference read with a fake `gh`
//! (and its failure before any spawn), the project's settings and the links rule in the
//! plan, feedback, outline, expansion, selection and research requests, and research passes
//! in flight at the same time, seen in the mock's request log.

use serde_json::{json, Value};

use crate::context::{repo_with_worktree, set_guidance};
use crate::harness::*;
use crate::realcli::{claude_server, plan_answer, transcript, Mock};
use crate::realcli_living::{content_text, model_requests};
use crate::references::{fake_gh, ISSUE};

/// The text of the newest user message of a model request: what this pass itself sent.
fn last_user_text(request: &Value) -> String {
    let messages = request["body"]["messages"].as_array().expect("messages");
    let last = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("a user message");
    content_text(last)
}

/// The first model request whose body holds `marker`.
fn request_with(mock: &Mock, marker: &str) -> Value {
    model_requests(mock)
        .into_iter()
        .find(|r| r["body"].to_string().contains(marker))
        .unwrap_or_else(|| panic!("no model request holds {marker:?}"))
}

fn assert_guided(text: &str, kind: &str) {
    for part in [
        "- Tests wait on conditions.",
        "<skill name=\"house style\">\nName every file.\n</skill>",
        "<extra-instructions>\nMention the migration.\n</extra-instructions>",
        "<output-language>German</output-language>",
    ] {
        assert!(text.contains(part), "the {kind} message lacks {part:?}:\n{text}");
    }
}

fn assert_keeps_links(text: &str, kind: &str) {
    assert!(
        text.contains("Keep every URL and link the user gave") && text.contains("\"## References\""),
        "the {kind} message lacks the links rule:\n{text}"
    );
}

fn ticket(s: &mut Server, w: &World, description: &str, branch: Option<&str>) -> i64 {
    s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Change the greeting", "description": description,
                "tool": "claude", "branch": branch }),
    )["id"]
        .as_i64()
        .unwrap()
}

fn run_of(s: &mut Server, ticket: i64) -> Value {
    s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0].clone()
}

/// Sends the mock one request whose body is `marker` (it releases a turn held for it).
fn poke(mock: &Mock, marker: &str) {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", mock.port)).unwrap();
    let request = format!(
        "POST /__poke HTTP/1.1\r\nHost: mock\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{marker}",
        marker.len()
    );
    c.write_all(request.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let _ = c.read_to_end(&mut reply);
}

/// The `PWD` in the environment a process was started with.
fn started_pwd(pid: i32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"PWD="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_plans_a_branch_in_its_second_worktree() {
    let w = World::new();
    let wt = repo_with_worktree(&w);
    // The first answer waits until the test has looked at the running CLI.
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "hold_until": { "match": "RELEASE-PWD" }, "text": "Where am I?",
              "tool_calls": [{ "name": "Bash", "input": { "command": "pwd", "description": "Print the working directory" } }] },
            { "text": plan_answer("Plan on the branch") },
        ]}),
    );
    let mut s = claude_server(&w, &mock);
    let ticket = ticket(&mut s, &w, "Make it say hi.", Some("feature"));
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    eventually("the CLI asks the model", std::time::Duration::from_secs(60), || {
        !model_requests(&mock).is_empty()
    });
    // The real CLI process: its cwd and the PWD planwire started it with are the worktree.
    let pid: i32 = w
        .sqlite()
        .query_row("SELECT child_pid FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd.display().to_string(), wt);
    assert_eq!(started_pwd(pid).as_deref(), Some(wt.as_str()));
    poke(&mock, "RELEASE-PWD");
    s.wait_planned(ticket);
    // Read once the run is over: the held request logs its release on its own thread, a
    // moment after the poke is answered.
    let log = mock.requests();
    let poked = log
        .iter()
        .position(|r| r["path"] == "/__poke")
        .expect("the poke is logged");
    let released = log
        .iter()
        .position(|r| r["event"] == "released")
        .expect("the hold ended");
    assert!(poked < released, "the answer waited for the poke: {log:?}");
    let r = run_of(&mut s, ticket);
    assert_eq!((r["root"].clone(), r["cwd"].clone()), (json!(w.root()), json!(wt)));
    // The agent's shell works there too, and the CLI told the model so.
    let results: Vec<String> = transcript(&mut s, run)
        .iter()
        .filter(|e| e["kind"] == "toolResult")
        .map(|e| e["output"].as_str().unwrap_or("").trim().to_owned())
        .collect();
    assert_eq!(results, std::slice::from_ref(&wt));
    let first = model_requests(&mock).into_iter().next().unwrap();
    assert!(
        first["body"].to_string().contains(&wt),
        "the CLI tells the model it works in the worktree"
    );
    assert!(!first["body"].to_string().contains("not checked out here"));
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_a_missing_branch_is_refused_before_the_cli_starts() {
    let w = World::new();
    repo_with_worktree(&w);
    let mock = Mock::start(&w, json!({ "turns": [{ "text": plan_answer("Never") }] }));
    let mut s = claude_server(&w, &mock);
    git(&w.path("project"), &["branch", "gone"]);
    let ticket = ticket(&mut s, &w, "Make it say hi.", Some("gone"));
    git(&w.path("project"), &["branch", "-D", "-q", "gone"]);
    let e = s.err("planwire/plan", json!({ "ticketId": ticket }));
    assert_eq!(e["code"], -32013, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("the branch gone does not exist"),
        "{e}"
    );
    assert_eq!(
        s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"],
        json!([])
    );
    assert_eq!(mock.requests(), Vec::<Value>::new(), "no CLI ever started");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_gets_a_github_reference_read_with_gh_and_fails_before_spawn_without_it() {
    let w = World::new();
    fake_gh(&w, Ok(include_str!("../fixtures/gh/issue_view.json")));
    let mock = Mock::start(&w, json!({ "turns": [{ "text": plan_answer("Plan with the issue") }] }));
    let mut s = claude_server(&w, &mock);
    let first = ticket(&mut s, &w, &format!("Do what {ISSUE} asks."), None);
    s.ok("planwire/plan", json!({ "ticketId": first }));
    s.wait_planned(first);
    let text = last_user_text(&model_requests(&mock)[0]);
    for part in [
        &format!("<planwire-reference source=\"github\" kind=\"issue\" url=\"{ISSUE}\">"),
        "It should greet the user by name.",
        "- ann-maintainer: Keep the old greeting behind a --legacy flag, please.",
    ] {
        assert!(text.contains(part), "{part:?} reached the model:\n{text}");
    }
    // gh fails: the run fails before any CLI starts, naming the URL and gh's reason.
    fake_gh(&w, Err("HTTP 404: Not Found (https://api.github.com/graphql)"));
    let before = mock.requests().len();
    let second = ticket(&mut s, &w, &format!("See {ISSUE}"), None);
    s.ok("planwire/plan", json!({ "ticketId": second }));
    assert_eq!(s.wait_ticket(second, &["planned", "failed"])["status"], "failed");
    let failure = run_of(&mut s, second)["failure"].clone();
    assert_eq!(failure["code"], "reference_unavailable", "{failure}");
    let message = failure["message"].as_str().unwrap();
    assert!(message.contains(ISSUE) && message.contains("HTTP 404"), "{message}");
    assert_eq!(mock.requests().len(), before, "no CLI started for the failed run");
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_plan_and_feedback_carry_the_settings_and_the_links_rule() {
    let w = World::new();
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "match": "FEEDBACK-5521", "text": plan_answer("Revised plan") },
            { "text": plan_answer("First plan") },
        ]}),
    );
    let mut s = claude_server(&w, &mock);
    set_guidance(&mut s, &w);
    let ticket = ticket(&mut s, &w, "Follow https://www.figma.com/file/abc123/Greeting.", None);
    s.ok("planwire/plan", json!({ "ticketId": ticket }));
    s.wait_planned(ticket);
    let run = s.ok(
        "planwire/plan",
        json!({ "ticketId": ticket, "feedback": "FEEDBACK-5521: add a test." }),
    )["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(run_ends(&mut s, run)["status"], "completed");
    let requests = model_requests(&mock);
    assert_eq!(requests.len(), 2, "one request per pass");
    let plan = last_user_text(&requests[0]);
    assert!(plan.contains("https://www.figma.com/file/abc123/Greeting"));
    // The feedback resumed the session and carries the settings in its own new message.
    let feedback = last_user_text(&requests[1]);
    assert!(feedback.contains("FEEDBACK-5521") && feedback.contains("continuing to plan"));
    for (text, kind) in [(&plan, "plan"), (&feedback, "feedback")] {
        assert_guided(text, kind);
        assert_keeps_links(text, kind);
    }
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_outline_and_expansion_carry_the_settings_and_the_links_rule() {
    let w = World::new();
    let outline =
        json!({ "tickets": [{ "key": "api", "title": "Greeting API", "scope": "Serve it.", "dependencies": [] }] });
    let expansion = json!({ "tickets": [{ "key": "api", "title": "Greeting API", "description": "## Steps\n1. Add the route.", "acceptanceCriteria": ["GET works"], "openQuestions": [], "dependencies": [] }] });
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "match": "First pass: the outline", "text": format!("Outline.\n<planwire-outline>{outline}</planwire-outline>") },
            { "match": "Second pass: the expansion", "text": format!("Expanded.\n<planwire-expansion>{expansion}</planwire-expansion>") },
        ]}),
    );
    let mut s = claude_server(&w, &mock);
    set_guidance(&mut s, &w);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "A greeting API, see https://example.com/spec.", "tool": "claude" }),
    )["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(run_ends(&mut s, run)["status"], "completed");
    let outline = last_user_text(&request_with(&mock, "First pass: the outline"));
    // The expansion's request resumes the outline's session: its newest message is its own.
    let expansion = last_user_text(&request_with(&mock, "Second pass: the expansion"));
    assert!(expansion.contains("Second pass: the expansion") && !expansion.contains("First pass"));
    for (text, kind) in [(&outline, "outline"), (&expansion, "expansion")] {
        assert_guided(text, kind);
        assert_keeps_links(text, kind);
    }
}

#[test]
#[ignore = "needs the real CLIs: tests/realcli/install.sh"]
fn realcli_claude_research_passes_run_at_the_same_time_with_the_settings() {
    let w = World::new();
    let mut roots = Vec::new();
    for name in ["alpha", "beta"] {
        std::fs::create_dir_all(w.path(name)).unwrap();
        std::fs::write(w.path(&format!("{name}/README.md")), format!("The {name} service.\n")).unwrap();
        roots.push(w.path(name).canonicalize().unwrap().display().to_string());
    }
    let selection = json!({ "requests": [
        { "name": "alpha", "question": "QUESTION-ALPHA: which endpoint serves the greeting?" },
        { "name": "beta", "question": "QUESTION-BETA: which schema holds it?" } ] });
    let found = |contract: &str| {
        format!(
            "Found it.\n<planwire-research>{}</planwire-research>",
            json!({ "summary": "S", "findings": ["README.md"], "contracts": [contract] })
        )
    };
    // Each research answer is held until the other pass's request has arrived: both answer
    // only when both passes are in flight at once (sequential passes would time out).
    let mock = Mock::start(
        &w,
        json!({ "turns": [
            { "match": "deciding which linked repositories", "text": format!("Both.\n<planwire-research-selection>{selection}</planwire-research-selection>") },
            { "match": "QUESTION-ALPHA", "hold_until": { "match": "QUESTION-BETA", "timeout_ms": 120000 }, "text": found("GET /alpha/greeting") },
            { "match": "QUESTION-BETA", "hold_until": { "match": "QUESTION-ALPHA", "timeout_ms": 120000 }, "text": found("table beta.greetings") },
            { "text": plan_answer("Plan with research") },
        ]}),
    );
    let mut s = claude_server(&w, &mock);
    set_guidance(&mut s, &w);
    for (name, root) in ["alpha", "beta"].iter().zip(&roots) {
        s.ok(
            "planwire/linkProject",
            json!({ "root": w.root(), "linkedRoot": root, "name": name, "role": format!("the {name} service") }),
        );
    }
    let ticket = ticket(&mut s, &w, "Show the greeting.", None);
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_planned(ticket);
    // The mock's log: both research requests arrived before either was answered.
    let log = mock.requests();
    let seq_of = |pred: &dyn Fn(&Value) -> bool| -> Vec<(u64, f64)> {
        log.iter()
            .filter(|r| pred(r))
            .map(|r| (r["seq"].as_u64().unwrap(), r["ts"].as_f64().unwrap()))
            .collect()
    };
    let asked = seq_of(&|r| {
        r["path"].as_str().unwrap_or("").starts_with("/v1/messages") && (r["turn"] == json!(1) || r["turn"] == json!(2))
    });
    let released = seq_of(&|r| r["event"] == "released");
    // The log in short: seq, path or event, turn.
    let summary: Vec<String> = log
        .iter()
        .map(|r| format!("{} {} {}", r["seq"], r.get("path").unwrap_or(&r["event"]), r["turn"]))
        .collect();
    assert_eq!((asked.len(), released.len()), (2, 2), "{summary:?}");
    assert!(!log.iter().any(|r| r["event"] == "hold timed out"), "{summary:?}");
    let last_asked = asked.iter().map(|(seq, _)| *seq).max().unwrap();
    let first_answer = released.iter().map(|(seq, _)| *seq).min().unwrap();
    assert!(
        last_asked < first_answer,
        "the passes overlapped: {asked:?} before {released:?}"
    );
    let (asked_ts, answered_ts) = (
        asked.iter().map(|(_, ts)| *ts).fold(f64::MIN, f64::max),
        released.iter().map(|(_, ts)| *ts).fold(f64::MAX, f64::min),
    );
    assert!(asked_ts <= answered_ts);
    // Each pass ran in its own project, each its own agent run; the plan got both contracts.
    let agent_runs = s.ok("planwire/getRun", json!({ "runId": run }))["agentRuns"].clone();
    let labels: Vec<&str> = agent_runs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["label"].as_str())
        .filter(|l| l.starts_with("Linked research: "))
        .collect();
    assert_eq!(labels.len(), 2, "{agent_runs}");
    let plan = last_user_text(&request_with(&mock, "table beta.greetings"));
    assert!(plan.contains("GET /alpha/greeting"), "{plan}");
    for (marker, kind) in [
        ("deciding which linked repositories", "selection"),
        ("QUESTION-ALPHA", "alpha research"),
        ("QUESTION-BETA", "beta research"),
    ] {
        assert_guided(&last_user_text(&request_with(&mock, marker)), kind);
    }
    assert_guided(&plan, "plan");
}

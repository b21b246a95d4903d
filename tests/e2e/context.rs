//! Planning context through the real binary, with a fake `claude` that records its argv, cwd,
//! `PWD` and stdin: a ticket's branch (planned in its worktree, named in the prompt when it
//! is checked out nowhere, refused when missing), the project's settings and the links rule
//! in every kind of planning prompt, and session authority (a change of model provider, CLI
//! major version or directory starts fresh, and says why).

use serde_json::{json, Value};

use crate::claude_cli::{answer_script, argv_of, cwd_of, fake_claude_sequence, invocations, prompt_of, pwd_of};
use crate::harness::*;

fn started(w: &World, options: Value) -> Server {
    let mut s = w.start();
    let mut o = json!({ "dbPath": w.db(), "stopGraceMs": 1000 });
    o.as_object_mut().unwrap().extend(options.as_object().unwrap().clone());
    s.initialize(o);
    s
}

/// The project as a git repository on `main`, with `feature` checked out in a second
/// worktree and `idle` checked out nowhere. Returns the worktree's canonical path.
pub(crate) fn repo_with_worktree(w: &World) -> String {
    let project = w.path("project");
    git_init_main(&project);
    git(&project, &["worktree", "add", "-q", "../wt-feature", "-b", "feature"]);
    git(&project, &["branch", "idle"]);
    w.path("wt-feature").canonicalize().unwrap().display().to_string()
}

fn ticket_on(s: &mut Server, w: &World, branch: Option<&str>, model: Option<&str>) -> i64 {
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "Make it say hi.",
                "tool": "claude", "branch": branch, "model": model }),
    );
    t["id"].as_i64().unwrap()
}

/// Plans the ticket (with extra params) to its end; returns the run.
fn plan(s: &mut Server, ticket: i64, extra: Value) -> Value {
    let mut params = json!({ "ticketId": ticket });
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let run = s.ok("planwire/plan", params)["runId"].as_i64().unwrap();
    run_ends(s, run);
    s.ok("planwire/getRun", json!({ "runId": run }))["run"].clone()
}

fn fresh_reason(w: &World, run: &Value) -> Option<String> {
    w.sqlite()
        .query_row(
            "SELECT fresh_reason FROM runs WHERE id = ?1",
            [run["id"].as_i64().unwrap()],
            |r| r.get(0),
        )
        .unwrap()
}

fn resumed(w: &World, n: usize) -> bool {
    argv_of(w, n).iter().any(|a| a == "--resume")
}

#[test]
fn a_branch_checked_out_in_a_worktree_is_planned_and_handed_off_there() {
    let w = World::new();
    let wt = repo_with_worktree(&w);
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({}));
    let ticket = ticket_on(&mut s, &w, Some("feature"), None);
    let run = plan(&mut s, ticket, json!({}));
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!((cwd_of(&w, 1), pwd_of(&w, 1)), (wt.clone(), wt.clone()));
    assert_eq!((run["root"].clone(), run["cwd"].clone()), (json!(w.root()), json!(wt)));
    assert!(!prompt_of(&w, 1).contains("not checked out here"));
    // The implementer starts where the branch is checked out too.
    let h = s.ok("planwire/handoff", json!({ "ticketId": ticket }));
    assert_eq!(h["cwd"], json!(wt), "{h}");
    // planwire changed nothing in git: the worktrees and branches are as they were.
    let out = std::process::Command::new("git")
        .args(["worktree", "list", "--porcelain"])
        .current_dir(w.path("project"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("worktree ").count(), 2);
}

#[test]
fn the_work_tree_check_covers_the_branch_worktree() {
    let w = World::new();
    let wt = repo_with_worktree(&w);
    let plan_text = r#"<planwire-plan>{"title": "Greeting plan", "description": "Edit src/main.rs."}</planwire-plan>"#;
    let script = answer_script(&w, "answer.jsonl", "sess-w", plan_text, 0);
    w.fake_cli(
        "claude",
        &format!(
            "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo \"2.1.197 (Claude Code)\"; exit 0; fi\n\
             echo planted > planted.txt\nexec \"{BIN}\" replay \"{script}\"\n"
        ),
    );
    // Without the OS sandbox the write lands, and the check after the pass finds it there.
    let mut s = started(&w, json!({ "sandbox": "off" }));
    let ticket = ticket_on(&mut s, &w, Some("feature"), None);
    let run = plan(&mut s, ticket, json!({}));
    assert_eq!(
        run["readonlyViolation"],
        json!({ "paths": [format!("{wt}/planted.txt")] }),
        "{run}"
    );
    assert!(!w.path("project/planted.txt").exists());
}

#[test]
fn a_branch_checked_out_nowhere_is_planned_in_the_root_and_named_in_the_prompt() {
    let w = World::new();
    repo_with_worktree(&w);
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({}));
    let ticket = ticket_on(&mut s, &w, Some("idle"), None);
    let run = plan(&mut s, ticket, json!({}));
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!((cwd_of(&w, 1), run["cwd"].clone()), (w.root(), json!(w.root())));
    let prompt = prompt_of(&w, 1);
    for part in [
        "The work is for the git branch `idle`, which is not checked out here",
        "git show idle:PATH",
        "git diff HEAD...idle",
    ] {
        assert!(prompt.contains(part), "{part}: {prompt}");
    }
}

#[test]
fn a_missing_branch_is_refused_with_its_name_before_any_planner() {
    let w = World::new();
    repo_with_worktree(&w);
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({}));
    let e = s.err(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "branch": "nope" }),
    );
    assert_eq!(
        (e["code"].clone(), e["data"]["kind"].clone()),
        (json!(-32013), json!("projectUnavailable"))
    );
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    assert_eq!(s.ok("planwire/listTickets", json!({})), json!({ "tickets": [] }));
    // A branch deleted after the ticket named it: plan refuses before creating a run.
    git(&w.path("project"), &["branch", "gone"]);
    let ticket = ticket_on(&mut s, &w, Some("gone"), None);
    git(&w.path("project"), &["branch", "-D", "-q", "gone"]);
    let e = s.err("planwire/plan", json!({ "ticketId": ticket }));
    assert_eq!(e["code"], -32013);
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("gone") && message.contains("does not exist"),
        "{message}"
    );
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(
        (got["runs"].clone(), got["ticket"]["status"].clone()),
        (json!([]), json!("draft"))
    );
    assert_eq!(invocations(&w), 0, "no planner was started");
    let e = s.err(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "branch": "also-missing" }),
    );
    assert_eq!(e["code"], -32013);
    assert!(e["message"].as_str().unwrap().contains("also-missing"), "{e}");
}

#[test]
fn a_session_resumes_only_with_the_same_provider_and_directory() {
    let w = World::new();
    let wt = repo_with_worktree(&w);
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({}));
    let ticket = ticket_on(&mut s, &w, None, Some("anthropic/claude-sonnet"));
    let first = plan(&mut s, ticket, json!({}));
    assert_eq!(
        (first["status"].clone(), first["cwd"].clone()),
        (json!("completed"), json!(w.root()))
    );
    // Another model of the same provider resumes.
    let same = plan(&mut s, ticket, json!({ "model": "anthropic/claude-opus" }));
    assert!(resumed(&w, 2), "{:?}", argv_of(&w, 2));
    assert_eq!(fresh_reason(&w, &same), None);
    // Another provider starts fresh, and says why.
    let other = plan(&mut s, ticket, json!({ "model": "openai/gpt-5" }));
    assert!(!resumed(&w, 3), "{:?}", argv_of(&w, 3));
    assert_eq!(
        fresh_reason(&w, &other).as_deref(),
        Some("the model provider changed from anthropic to openai")
    );
    // The ticket's branch moved the plan into a worktree: fresh there.
    s.ok(
        "planwire/updateTicket",
        json!({ "ticketId": ticket, "branch": "feature", "model": "openai/gpt-5" }),
    );
    let moved = plan(&mut s, ticket, json!({}));
    assert!(!resumed(&w, 4), "{:?}", argv_of(&w, 4));
    assert_eq!(cwd_of(&w, 4), wt);
    assert_eq!(
        fresh_reason(&w, &moved),
        Some(format!(
            "the planning directory changed from {} to {wt} (the ticket's branch)",
            w.root()
        ))
    );
    // And the next plan in the same place resumes again.
    plan(&mut s, ticket, json!({}));
    assert!(resumed(&w, 5), "{:?}", argv_of(&w, 5));
}

#[test]
fn a_new_major_version_of_the_cli_starts_fresh() {
    let w = World::new();
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({}));
    let ticket = ticket_on(&mut s, &w, None, None);
    plan(&mut s, ticket, json!({}));
    assert_eq!(s.shutdown_and_exit(), 0);
    // The CLI was upgraded across a major version (planwire detects it again at start).
    let fake = w.path("bin/claude");
    let script = std::fs::read_to_string(&fake).unwrap();
    w.fake_cli(
        "claude",
        &script.replace("2.1.197 (Claude Code)", "3.0.0 (Claude Code)"),
    );
    let mut s = started(&w, json!({}));
    let run = plan(&mut s, ticket, json!({}));
    assert_eq!(run["status"], "completed", "{run}");
    assert!(!resumed(&w, 2), "{:?}", argv_of(&w, 2));
    assert_eq!(
        fresh_reason(&w, &run).as_deref(),
        Some("claude's major version changed from 2 to 3")
    );
}

/// Project settings and a memory entry for the world's project.
pub(crate) fn set_guidance(s: &mut Server, w: &World) {
    s.ok(
        "planwire/setProjectSettings",
        json!({ "root": w.root(), "outputLanguage": "German", "extraInstructions": "Mention the migration.",
                "skills": [{ "name": "house style", "text": "Name every file." }] }),
    );
    s.ok(
        "planwire/memory/add",
        json!({ "root": w.root(), "text": "Tests wait on conditions." }),
    );
}

/// The project's guidance is in the prompt of invocation `n`.
fn assert_guided(w: &World, n: usize, kind: &str) {
    let p = prompt_of(w, n);
    for part in [
        "- Tests wait on conditions.",
        "<skill name=\"house style\">\nName every file.\n</skill>",
        "<extra-instructions>\nMention the migration.\n</extra-instructions>",
        "<output-language>German</output-language>",
    ] {
        assert!(p.contains(part), "{kind} prompt (#{n}) lacks {part:?}:\n{p}");
    }
}

/// The links rule is in the prompt of invocation `n`.
fn assert_keeps_links(w: &World, n: usize, kind: &str) {
    let p = prompt_of(w, n);
    assert!(
        p.contains("Keep every URL and link the user gave") && p.contains("under a \"## References\" section"),
        "{kind} prompt (#{n}) lacks the links rule:\n{p}"
    );
}

#[test]
fn settings_and_the_links_rule_reach_plan_continuation_answer_and_feedback_prompts() {
    let w = World::new();
    fake_claude_sequence(&w, &["questions", "demo"]);
    let mut s = started(&w, json!({}));
    set_guidance(&mut s, &w);
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Greet", "tool": "claude",
                "description": "Follow the design at https://www.figma.com/file/abc123/Greeting." }),
    );
    let ticket = t["id"].as_i64().unwrap();
    // 1: the first plan; it ends with open questions.
    s.ok("planwire/plan", json!({ "ticketId": ticket }));
    assert_eq!(
        s.wait_ticket(ticket, &["needs_input", "failed"])["status"],
        "needs_input"
    );
    assert!(prompt_of(&w, 1).contains("https://www.figma.com/file/abc123/Greeting"));
    let q = s.wait_for("the plan's question", |m| m["method"] == "planwire/question")["params"]["question"].clone();
    // 2: the answers resume the session, in their own new message.
    s.ok(
        "planwire/answer",
        json!({ "ticketId": ticket, "questionId": q["id"], "answers": [{ "other": "Hi there" }, { "other": "Yes" }] }),
    );
    s.wait_ticket(ticket, &["planned", "failed"]);
    assert!(resumed(&w, 2));
    // 3: feedback on the resumed session; 4: feedback in a fresh revision; 5: plan again.
    plan(&mut s, ticket, json!({ "feedback": "Add a test." }));
    assert!(resumed(&w, 3));
    plan(&mut s, ticket, json!({ "feedback": "Shorter.", "fresh": true }));
    assert!(!resumed(&w, 4) && prompt_of(&w, 4).contains("<previous-plan>"));
    plan(&mut s, ticket, json!({}));
    assert!(resumed(&w, 5));
    for (n, kind) in [
        (1, "plan"),
        (2, "answer continuation"),
        (3, "resumed feedback"),
        (4, "fresh revision"),
        (5, "continuation"),
    ] {
        assert_guided(&w, n, kind);
        assert_keeps_links(&w, n, kind);
    }
}

#[test]
fn settings_and_the_links_rule_reach_outline_repair_and_expansion_prompts() {
    let w = World::new();
    let outline = |deps: &str| {
        format!(
            "Outline.\n<planwire-outline>{{\"tickets\": [{{\"key\": \"a\", \"title\": \"A\", \"scope\": \"s\", \"dependencies\": [{deps}]}}]}}</planwire-outline>"
        )
    };
    let bad = answer_script(&w, "bad.jsonl", "sess-o", &outline("\"a\""), 0);
    let fixed = answer_script(&w, "fixed.jsonl", "sess-o", &outline(""), 0);
    let expansion = r###"Expanded.
<planwire-expansion>{"tickets": [{"key": "a", "title": "A", "description": "## Steps\n1. Do a.", "acceptanceCriteria": ["a"], "openQuestions": [], "dependencies": []}]}</planwire-expansion>"###;
    let exp = answer_script(&w, "exp.jsonl", "sess-o", expansion, 0);
    fake_claude_sequence(&w, &[&bad, &fixed, &exp]);
    let mut s = started(&w, json!({}));
    set_guidance(&mut s, &w);
    let run = s.ok(
        "planwire/breakdown",
        json!({ "root": w.root(), "description": "One thing, see https://example.com/spec.", "tool": "claude" }),
    )["runId"]
        .as_i64()
        .unwrap();
    let ended = run_ends(&mut s, run);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["cwd"], json!(w.root()));
    // The repair and the expansion resume the outline's session with their own message.
    assert!(resumed(&w, 2) && resumed(&w, 3));
    for (n, kind) in [(1, "outline"), (2, "outline repair"), (3, "expansion")] {
        assert_guided(&w, n, kind);
        assert_keeps_links(&w, n, kind);
    }
    assert!(prompt_of(&w, 3).contains("Second pass: the expansion"));
    // The breakdown recorded the settings it used.
    let recorded: Option<String> = w
        .sqlite()
        .query_row("SELECT settings_json FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap();
    assert!(recorded.unwrap().contains("Mention the migration."));
}

#[test]
fn settings_reach_the_research_selection_and_every_research_pass() {
    let w = World::new();
    std::fs::create_dir_all(w.path("backend")).unwrap();
    let backend = w.path("backend").canonicalize().unwrap().display().to_string();
    let selection = answer_script(
        &w,
        "selection.jsonl",
        "sess-sel",
        r#"<planwire-research-selection>{"requests": [{"name": "backend", "question": "Which endpoint?"}]}</planwire-research-selection>"#,
        0,
    );
    let research = answer_script(
        &w,
        "research.jsonl",
        "sess-r",
        r#"<planwire-research>{"summary": "S", "findings": ["f"], "contracts": ["GET /api/greeting"]}</planwire-research>"#,
        0,
    );
    fake_claude_sequence(&w, &[&selection, &research, "demo"]);
    let mut s = started(&w, json!({}));
    set_guidance(&mut s, &w);
    s.ok(
        "planwire/linkProject",
        json!({ "root": w.root(), "linkedRoot": backend, "name": "backend", "role": "the HTTP API" }),
    );
    let ticket = ticket_on(&mut s, &w, None, None);
    let run = plan(&mut s, ticket, json!({}));
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(cwd_of(&w, 2), backend);
    assert!(prompt_of(&w, 1).contains("<planwire-research-selection>"));
    assert!(prompt_of(&w, 2).contains("<planwire-research>"));
    assert!(prompt_of(&w, 3).contains("GET /api/greeting"));
    for (n, kind) in [(1, "research selection"), (2, "research"), (3, "plan")] {
        assert_guided(&w, n, kind);
    }
}

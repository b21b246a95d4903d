//! GitHub references: an issue or pull request URL in a description is read with the user's
//! `gh` before planning (a fake `gh` here replays recorded `--json` output), and reaches the
//! prompt as a marked reference. When gh fails, the run fails before any planner starts and
//! names the URL and gh's reason; `references: "off"` leaves the URL as text.

use serde_json::{json, Value};

use crate::claude_cli::{fake_claude_sequence, prompt_of};
use crate::harness::*;

pub(crate) const ISSUE: &str = "https://github.com/acme/demo-project/issues/42";

/// A fake gh: records its argv, then prints `stdout` (or fails with `stderr`).
pub(crate) fn fake_gh(w: &World, output: Result<&str, &str>) {
    let d = w.dir.path().display();
    let (out, code) = match output {
        Ok(json) => (format!("cat <<'JSON'\n{json}\nJSON"), 0),
        Err(reason) => (format!("echo '{reason}' >&2"), 1),
    };
    w.fake_cli(
        "gh",
        &format!("#!/bin/sh\necho \"$@\" >> \"{d}/gh-argv\"\npwd >> \"{d}/gh-cwd\"\n{out}\nexit {code}\n"),
    );
}

fn started(w: &World, options: Value) -> Server {
    let mut s = w.start();
    let mut o = json!({ "dbPath": w.db() });
    o.as_object_mut().unwrap().extend(options.as_object().unwrap().clone());
    s.initialize(o);
    s
}

fn plan(s: &mut Server, w: &World, description: &str) -> (i64, i64) {
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "Greet by name", "description": description, "tool": "claude" }),
    );
    (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap())
}

#[test]
fn an_issue_link_is_read_with_gh_and_reaches_the_prompt() {
    let w = World::new();
    fake_gh(&w, Ok(include_str!("../fixtures/gh/issue_view.json")));
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({}));
    let (ticket, _) = plan(&mut s, &w, &format!("Do what {ISSUE} asks."));
    s.wait_planned(ticket);
    let argv = std::fs::read_to_string(w.path("gh-argv")).unwrap();
    assert_eq!(
        argv.trim(),
        format!("issue view {ISSUE} --json title,body,comments,labels")
    );
    assert_eq!(std::fs::read_to_string(w.path("gh-cwd")).unwrap().trim(), w.root());
    let prompt = prompt_of(&w, 1);
    for part in [
        &format!("<planwire-reference source=\"github\" kind=\"issue\" url=\"{ISSUE}\">"),
        "Title: Greet the user by name",
        "Labels: enhancement, good first issue",
        "It should greet the user by name.",
        "- ann-maintainer: Keep the old greeting behind a --legacy flag, please.",
    ] {
        assert!(prompt.contains(part), "{part:?} is in the prompt:\n{prompt}");
    }
}

#[test]
fn when_gh_fails_the_run_fails_before_any_planner_with_the_url_and_the_reason() {
    let w = World::new();
    fake_gh(
        &w,
        Err("GraphQL: Could not resolve to an issue or pull request with the number of 42."),
    );
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({}));
    let (ticket, run) = plan(&mut s, &w, &format!("See {ISSUE}"));
    assert_eq!(s.wait_ticket(ticket, &["planned", "failed"])["status"], "failed");
    let got = s.ok("planwire/getRun", json!({ "runId": run }));
    let failure = &got["run"]["failure"];
    assert_eq!(failure["code"], "reference_unavailable", "{got}");
    let message = failure["message"].as_str().unwrap();
    assert!(message.contains(ISSUE), "{message}");
    assert!(message.contains("Could not resolve to an issue"), "{message}");
    assert!(
        !w.path("home/.claude/planwire-fake/claude-count").exists(),
        "no planner was started"
    );
}

#[test]
fn references_off_leaves_the_link_as_text() {
    let w = World::new();
    fake_gh(&w, Ok("{}"));
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w, json!({ "references": "off" }));
    let (ticket, _) = plan(&mut s, &w, &format!("See {ISSUE}"));
    s.wait_planned(ticket);
    assert!(!w.path("gh-argv").exists(), "gh was not called");
    let prompt = prompt_of(&w, 1);
    assert!(
        prompt.contains(ISSUE) && !prompt.contains("<planwire-reference"),
        "{prompt}"
    );
}

//! A fake `codex` on PATH that breaks the app-server conversation: it cannot start, or it
//! never answers. The run ends clearly, and nothing of it is left running.

use serde_json::{json, Value};

use crate::harness::*;

/// planwire reads the version once (detection): that is not a pass.
const VERSION: &str = "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'codex-cli 0.171.0'; exit 0; fi\n";

fn started(w: &World, options: Value) -> Server {
    let mut s = w.start();
    let mut options = options;
    options["dbPath"] = json!(w.db());
    options["stopGraceMs"] = json!(500);
    s.initialize(options);
    s
}

/// Plans a Codex ticket and waits for its run to end; returns (ticket view, run).
fn plan_until_ended(s: &mut Server, w: &World) -> (Value, i64) {
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "D", "tool": "codex" }),
    );
    let ticket = t["id"].as_i64().unwrap();
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_ticket(ticket, &["failed", "planned"]);
    (s.ok("planwire/getTicket", json!({ "ticketId": ticket })), run)
}

#[test]
fn a_codex_that_cannot_start_fails_with_its_stderr() {
    let w = World::new();
    // What Codex does with a broken config.toml: a message on stderr, exit 1, nothing on stdout.
    w.fake_cli(
        "codex",
        &format!(
            "{VERSION}echo 'Error loading config.toml: invalid type: boolean `true`, expected a map' >&2\nexit 1\n"
        ),
    );
    let mut s = started(&w, json!({}));
    let (got, run) = plan_until_ended(&mut s, &w);
    let r = &got["runs"][0];
    assert_eq!(r["status"], "failed", "{got}");
    assert_eq!(r["failure"]["code"], "exit_code", "{r}");
    assert!(
        r["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("Error loading config.toml"),
        "{r}"
    );
    let (pgid, start) = run_group(&w, run);
    assert!(!group_alive(pgid, start));
}

#[test]
fn a_codex_that_never_answers_is_stopped_by_the_idle_limit() {
    let w = World::new();
    // It reads planwire's `initialize` and says nothing, with a child of its own.
    w.fake_cli("codex", &format!("{VERSION}sleep 300 &\ncat > /dev/null\n"));
    let mut s = started(&w, json!({ "idleTimeoutMs": 1000 }));
    let (got, run) = plan_until_ended(&mut s, &w);
    let r = &got["runs"][0];
    assert_eq!(
        (r["status"].clone(), r["failure"]["code"].clone()),
        (json!("failed"), json!("idle_timeout")),
        "{got}"
    );
    let (pgid, start) = run_group(&w, run);
    assert!(!group_alive(pgid, start), "the grandchild is gone too");
}

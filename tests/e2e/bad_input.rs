use serde_json::json;

use crate::harness::*;

fn started(w: &World) -> Server {
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    s
}

#[test]
fn malformed_json_gets_parse_error_and_the_server_goes_on() {
    let w = World::new();
    let mut s = started(&w);
    s.send_raw(&frame("{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": "));
    let e = s.wait_for("parse error", |m| m["error"]["code"] == -32700);
    assert!(e["id"].is_null());
    s.send_raw(&frame("[1,2,3]"));
    s.wait_for("invalid request", |m| m["error"]["code"] == -32600);
    s.ok("planwire/listTickets", json!({}));
}

#[test]
fn frames_without_a_length_or_with_junk_are_skipped() {
    let w = World::new();
    let mut s = started(&w);
    s.send_raw(b"X-Junk: yes\r\n\r\n");
    s.send_raw(b"Content-Length: abc\r\n\r\n");
    s.send_raw(b"garbage before a header ");
    s.ok("planwire/listTickets", json!({}));
    assert!(s.stderr().contains("skipped a malformed frame"));
}

#[test]
fn an_absurd_content_length_closes_cleanly_without_allocating() {
    let w = World::new();
    let mut s = started(&w);
    s.send_raw(b"Content-Length: 999999999999\r\n\r\n{}");
    assert_eq!(s.wait_exit(), 1);
    let err = s.stderr();
    assert!(err.contains("over the limit"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn invalid_params_name_the_field() {
    let w = World::new();
    let mut s = started(&w);
    let e = s.err(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": 5, "description": "" }),
    );
    assert_eq!(e["code"], -32602);
    assert!(e["message"].as_str().unwrap().contains("title"), "{e}");
    let e = s.err("planwire/createTicket", json!({ "root": w.root(), "title": "T" }));
    assert!(e["message"].as_str().unwrap().contains("description"), "{e}");
    let e = s.err(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "  ", "description": "" }),
    );
    assert!(e["message"].as_str().unwrap().contains("title"), "{e}");
    let e = s.err(
        "planwire/createTicket",
        json!({ "root": "relative/dir", "title": "T", "description": "" }),
    );
    assert_eq!(e["code"], -32602);
    let e = s.err(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "vim" }),
    );
    assert!(e["message"].as_str().unwrap().contains("tool"), "{e}");
    let e = s.err("planwire/getTranscript", json!({ "runId": "one" }));
    assert!(e["message"].as_str().unwrap().contains("runId"), "{e}");
    assert_eq!(s.err("planwire/plan", json!({}))["code"], -32602);
    assert_eq!(s.err("planwire/getTicket", json!({ "ticketId": 77 }))["code"], -32011);
    // Still serving, and nothing was created by the bad calls.
    assert_eq!(s.ok("planwire/listTickets", json!({}))["tickets"], json!([]));
}

#[test]
fn a_root_that_does_not_exist_is_project_unavailable() {
    let w = World::new();
    let mut s = started(&w);
    let missing = w.path("nope").display().to_string();
    let e = s.err(
        "planwire/createTicket",
        json!({ "root": missing, "title": "T", "description": "" }),
    );
    assert_eq!(
        (e["code"].clone(), e["data"]["kind"].clone()),
        (json!(-32013), json!("projectUnavailable"))
    );
    let file = w.path("project/src/main.rs").display().to_string();
    assert_eq!(
        s.err(
            "planwire/createTicket",
            json!({ "root": file, "title": "T", "description": "" })
        )["code"],
        -32013
    );
    // A root removed after the ticket was made: plan says so and changes nothing.
    let gone = w.path("gone");
    std::fs::create_dir(&gone).unwrap();
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": gone, "title": "T", "description": "", "tool": "script" }),
    );
    std::fs::remove_dir(&gone).unwrap();
    assert_eq!(s.err("planwire/plan", json!({ "ticketId": t["id"] }))["code"], -32013);
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t["id"] }));
    assert_eq!(got["ticket"]["status"], "draft");
    assert_eq!(got["runs"], json!([]));
}

#[test]
fn a_missing_cli_is_planner_unavailable_with_what_to_install() {
    let w = World::new();
    let mut s = started(&w);
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "claude" }),
    );
    let e = s.err("planwire/plan", json!({ "ticketId": t["id"] }));
    assert_eq!(
        (e["code"].clone(), e["data"]["kind"].clone()),
        (json!(-32012), json!("plannerUnavailable"))
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("npm install -g @anthropic-ai/claude-code"),
        "{e}"
    );
    assert_eq!(
        s.ok("planwire/getTicket", json!({ "ticketId": t["id"] }))["ticket"]["status"],
        "draft"
    );
    let e = s.err(
        "planwire/plan",
        json!({ "ticketId": t["id"], "tool": "script", "model": "/no/such/script" }),
    );
    assert_eq!(e["code"], -32012);
}

#[test]
fn a_cli_below_the_supported_range_is_refused_at_plan_time_with_the_range() {
    let w = World::new();
    // An old Claude Code that would otherwise run.
    w.fake_cli(
        "claude",
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '1.0.3 (Claude Code)'; exit 0; fi\ntouch \"$0.ran\"\n",
    );
    let mut s = started(&w);
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "claude" }),
    );
    let e = s.err("planwire/plan", json!({ "ticketId": t["id"] }));
    assert_eq!(e["code"], -32012, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("1.0.3") && message.contains("claude 2.0.0 or newer"),
        "{message}"
    );
    assert!(!w.path("bin/claude.ran").exists(), "the old CLI never ran a plan");
    assert_eq!(
        s.ok("planwire/getTicket", json!({ "ticketId": t["id"] }))["ticket"]["status"],
        "draft"
    );
}

#[test]
fn a_configured_cli_path_that_cannot_start_fails_the_run_clearly() {
    let w = World::new();
    // Executable, but not a program the kernel can run.
    let broken = w.fake_cli("claude-broken", "#!/no/such/interpreter\n");
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db(), "planners": { "claude": { "path": broken } } }));
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "claude" }),
    );
    let e = s.err("planwire/plan", json!({ "ticketId": t["id"] }));
    assert_eq!(e["code"], -32012);
    let got = s.ok("planwire/getTicket", json!({ "ticketId": t["id"] }));
    assert_eq!(got["runs"][0]["status"], "failed");
    assert_eq!(got["runs"][0]["failure"]["code"], "spawn_failed");
    assert_eq!(got["ticket"]["status"], "failed");
}

#[test]
fn params_are_named_an_array_is_refused_and_unknown_fields_are_logged() {
    let w = World::new();
    let mut s = w.start();
    let e = s.err("initialize", json!([null, {}]));
    assert_eq!(e["code"], -32602);
    assert!(
        e["message"].as_str().unwrap().contains("params must be an object"),
        "{e}"
    );
    s.initialize(json!({ "dbPath": w.db(), "futureOption": true }));
    // serde would bind these to root, title, description by position: refused.
    let e = s.err("planwire/createTicket", json!([w.root(), "t", ""]));
    assert_eq!(e["code"], -32602);
    assert!(
        e["message"].as_str().unwrap().contains("params must be an object"),
        "{e}"
    );
    assert_eq!(s.err("planwire/getTicket", json!(7))["code"], -32602);
    // Missing params: `{}` where every field is optional, else the missing field is named.
    assert_eq!(
        s.ok("planwire/listTickets", serde_json::Value::Null)["tickets"],
        json!([])
    );
    let e = s.err("planwire/getTicket", serde_json::Value::Null);
    assert!(e["message"].as_str().unwrap().contains("ticketId"), "{e}");
    // Unknown fields are ignored, and said at debug level.
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "T", "description": "", "laterField": 1 }),
    );
    assert_eq!(t["title"], "T");
    let got = s.ok("planwire/listTickets", json!({}));
    assert_eq!(
        got["tickets"].as_array().unwrap().len(),
        1,
        "the array call created nothing"
    );
    let err = s.stderr();
    assert!(err.contains("ignored unknown params: laterField"), "{err}");
    assert!(err.contains("ignored unknown params: futureOption"), "{err}");
}

#[test]
fn identical_duplicate_content_lengths_count_as_one() {
    let w = World::new();
    let mut s = started(&w);
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"planwire/listTickets","params":{}}"#;
    let n = body.len();
    s.send_raw(format!("Content-Length: {n}\r\nContent-Length: {n}\r\n\r\n{body}").as_bytes());
    let r = s.wait_for("the response to 7", |m| m["id"] == 7);
    assert_eq!(r["result"]["tickets"], json!([]));
}

#[test]
fn conflicting_content_lengths_close_the_connection_cleanly() {
    let w = World::new();
    let mut s = started(&w);
    s.send_raw(b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}\n");
    assert_eq!(s.wait_exit_with_stdin_open(), 1);
    let err = s.stderr();
    assert!(err.contains("conflicting Content-Length headers (2 and 3)"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_frame_with_a_wrong_length_does_not_eat_the_next_request() {
    let w = World::new();
    let mut s = started(&w);
    let good = |id: i64| {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"planwire/listTickets","params":{{}}}}"#);
        frame(&body)
    };
    // Too long: its body takes the next frame's header and part of its body.
    let mut bytes = b"Content-Length: 40\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1}".to_vec();
    bytes.extend(good(7));
    // Too short: the rest of its body runs into the next header.
    bytes.extend(b"Content-Length: 5\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":2}");
    bytes.extend(good(8));
    s.send_raw(&bytes);
    for id in [7, 8] {
        let r = s.wait_for(&format!("the response to {id}"), |m| m["id"] == id);
        assert_eq!(r["result"]["tickets"], json!([]), "{r}");
    }
    s.wait_for("a parse error", |m| m["error"]["code"] == -32700);
    s.ok("planwire/status", json!({}));
}

//! `planwire mcp` over its real stdio (newline-delimited JSON-RPC), fed bad input: each gets
//! the MCP error the spec assigns (a JSON-RPC error for an unknown tool, method or resource
//! and a malformed request; an `isError` result for arguments of the wrong type or size and
//! an unknown ticket), and the server keeps serving. And `planwire mcp` refuses to serve
//! inside a planner pass. The happy paths are driven by the official SDKs (tests/mcp).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};

use serde_json::{json, Value};

use crate::harness::*;

struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next_id: i64,
}

impl Mcp {
    fn start(w: &World, env: &[(&str, &str)]) -> Mcp {
        let mut cmd = Command::new(BIN);
        cmd.args(["mcp", "--db", &w.db(), "--tool", "script"])
            .current_dir(w.root())
            .env_clear()
            .env("HOME", w.path("home"))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PLANWIRE_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(w.path("mcp-stderr.log")).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn planwire mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let msg: Value = serde_json::from_str(&line).expect("every line planwire writes is JSON");
                if tx.send(msg).is_err() {
                    return;
                }
            }
        });
        Mcp {
            stdin: child.stdin.take(),
            child,
            rx,
            next_id: 1,
        }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next message with this id (notifications in between are skipped).
    fn response(&mut self, id: &Value) -> Value {
        loop {
            let msg = self.rx.recv_timeout(WAIT).expect("a response before the deadline");
            if msg.get("method").is_none() && &msg["id"] == id {
                return msg;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        self.response(&id)
    }

    fn initialize(&mut self) -> Value {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}),
        );
        self.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        r
    }

    fn tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Closes stdin and waits for the exit code.
    fn finish(&mut self) -> i32 {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(std::time::Instant::now() < deadline, "planwire mcp did not exit");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn error_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {r}"))
}

/// An `isError` result; returns its text.
fn tool_error(r: &Value) -> String {
    assert_eq!(r["result"]["isError"], true, "{r}");
    r["result"]["content"][0]["text"].as_str().unwrap().to_owned()
}

#[test]
fn mcp_bad_input_gets_mcp_errors_and_the_server_stays_up() {
    let w = World::new();
    let mut s = Mcp::start(&w, &[]);
    // Before initialize: only ping; the 2026-07-28 probe is a method the server does not have.
    assert_eq!(error_code(&s.request("tools/list", json!({}))), -32600);
    assert_eq!(error_code(&s.request("server/discover", json!({}))), -32601);
    assert!(s.request("ping", json!({}))["result"].is_object());
    let init = s.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(
        error_code(&s.request("initialize", json!({}))),
        -32600,
        "initialize twice"
    );

    // JSON-RPC errors: unknown tool, malformed tools/call, unknown method, unknown resource.
    let unknown = s.tool("implement_it", json!({}));
    assert_eq!(error_code(&unknown), -32602);
    assert!(unknown["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Unknown tool: implement_it"));
    assert_eq!(
        error_code(&s.request("tools/call", json!({"arguments": {}}))),
        -32602,
        "no name"
    );
    assert_eq!(
        error_code(&s.request("tools/call", json!(["plan"]))),
        -32602,
        "params by position"
    );
    assert_eq!(
        error_code(&s.request("tools/call", json!({"name": "plan", "arguments": [1]}))),
        -32602
    );
    assert_eq!(error_code(&s.request("prompts/list", json!({}))), -32601);
    let missing = s.request("resources/read", json!({"uri": "planwire://ticket/77/plan"}));
    assert_eq!(error_code(&missing), -32002);
    assert_eq!(missing["error"]["data"]["uri"], "planwire://ticket/77/plan");
    assert_eq!(
        error_code(&s.request("resources/subscribe", json!({"uri": "file:///etc/passwd"}))),
        -32002
    );
    assert_eq!(error_code(&s.request("tasks/get", json!({"taskId": "nope"}))), -32602);

    // Tool errors: wrong types, a missing field, an unknown field, oversized strings, unknown ids.
    let text = tool_error(&s.tool("get_ticket", json!({"ticketId": "seven"})));
    assert!(text.contains("`ticketId`") && text.contains("invalid type"), "{text}");
    let text = tool_error(&s.tool("plan", json!({})));
    assert!(text.contains("ticketId"), "{text}");
    let text = tool_error(&s.tool("plan", json!({"ticketId": 1, "fresh": "yes"})));
    assert!(text.contains("`fresh`"), "{text}");
    let text = tool_error(&s.tool("stop", json!({"ticketId": 1, "all": true})));
    assert!(text.contains("all"), "{text}");
    let huge = "é".repeat(100_001);
    let text = tool_error(&s.tool(
        "create_ticket",
        json!({"title": "t", "description": huge, "root": w.root()}),
    ));
    assert!(text.contains("`description`") && text.contains("100000"), "{text}");
    let text = tool_error(&s.tool("create_ticket", json!({"title": "t".repeat(1001), "root": w.root()})));
    assert!(text.contains("`title`"), "{text}");
    let text = tool_error(&s.tool("create_ticket", json!({"title": "t", "root": "relative/dir"})));
    assert!(text.contains("absolute"), "{text}");
    for (tool, args) in [
        ("get_ticket", json!({"ticketId": 404})),
        ("plan", json!({"ticketId": 404})),
        ("get_plan", json!({"ticketId": 404})),
        ("answer", json!({"ticketId": 404, "answers": ["x"]})),
        ("export_plan", json!({"ticketId": 404})),
        ("handoff", json!({"ticketId": 404})),
    ] {
        let text = tool_error(&s.tool(tool, args));
        assert!(text.contains("404"), "{tool}: {text}");
    }

    // A line that is not JSON is a parse error with a null id, and the next line is served.
    s.send_line("{\"jsonrpc\":\"2.0\",\"id\":");
    assert_eq!(error_code(&s.response(&Value::Null)), -32700);
    s.send_line("[1, 2]");
    assert_eq!(error_code(&s.response(&Value::Null)), -32600);
    // Nothing was created by any of it, and the server still answers.
    let listed = s.tool("list_tickets", json!({ "root": "*" }));
    assert_eq!(listed["result"]["structuredContent"]["tickets"], json!([]), "{listed}");
    assert_eq!(
        s.request("tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        10
    );
    assert_eq!(s.finish(), 0, "a clean end of input exits 0");
}

#[test]
fn mcp_answers_the_revision_asked_for_when_it_knows_it_else_its_newest() {
    let w = World::new();
    for (asked, answered) in [("2025-06-18", "2025-06-18"), ("2024-01-01", "2025-11-25")] {
        let mut s = Mcp::start(&w, &[]);
        let r = s.request(
            "initialize",
            json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}),
        );
        assert_eq!(r["result"]["protocolVersion"], answered, "{r}");
        // Tasks are 2025-11-25's.
        assert_eq!(
            r["result"]["capabilities"].get("tasks").is_some(),
            answered == "2025-11-25",
            "{r}"
        );
        let tools = s.request("tools/list", json!({}));
        let plan = &tools["result"]["tools"][1];
        assert_eq!(plan["name"], "plan");
        assert_eq!(plan.get("execution").is_some(), answered == "2025-11-25", "{plan}");
        assert!(tools["result"].get("resultType").is_none(), "{tools}");
        assert_eq!(s.finish(), 0);
    }
}

#[test]
fn mcp_refuses_to_serve_inside_a_planner_pass() {
    // Every planner pass runs with TMPDIR in its scratch directory; an MCP server a planner
    // starts inherits it. planwire's own tools must never reach a planner.
    let w = World::new();
    let scratch = w.path("planwire-run-AbC123");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut s = Mcp::start(&w, &[("TMPDIR", scratch.to_str().unwrap())]);
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude", "version": "1"}}});
    // It may already be gone: a write to its closed stdin is fine.
    let _ = s.stdin.as_mut().unwrap().write_all(format!("{line}\n").as_bytes());
    assert_eq!(s.finish(), 1);
    // Its stdout closed without a line: the reader ends with nothing received.
    assert!(s.rx.recv_timeout(WAIT).is_err(), "it answered nothing");
    let stderr = std::fs::read_to_string(w.path("mcp-stderr.log")).unwrap();
    assert!(stderr.contains("refusing to serve inside a planner"), "{stderr}");
    assert!(!w.path("planwire.db").exists(), "it opened no database");
}

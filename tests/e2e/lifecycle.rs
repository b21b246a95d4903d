use serde_json::{json, Value};

use crate::harness::*;

#[test]
fn version_flag_prints_the_version() {
    let out = std::process::Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("planwire {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn initialize_reports_server_info_protocol_and_planners() {
    let w = World::new();
    let mut s = w.start();
    let r = s.initialize(json!({ "dbPath": w.db() }));
    assert_eq!(r["serverInfo"]["name"], "planwire");
    assert_eq!(r["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    let caps = &r["capabilities"]["experimental"]["planwire"];
    assert_eq!(caps["protocolVersion"], 1);
    let planners = caps["planners"].as_array().unwrap();
    let script = planners.iter().find(|p| p["tool"] == "script").unwrap();
    assert_eq!(
        (script["found"].clone(), script["supported"].clone()),
        (json!(true), json!(true))
    );
    let claude = planners.iter().find(|p| p["tool"] == "claude").unwrap();
    assert_eq!(claude["found"], false, "no claude on this test's PATH");
    assert_eq!(s.shutdown_and_exit(), 0);
    // The database is private to the user.
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(w.db()).unwrap().mode() & 0o777, 0o600);
}

#[test]
fn requests_before_initialize_get_server_not_initialized() {
    let w = World::new();
    let mut s = w.start();
    let e = s.err("planwire/listTickets", json!({}));
    assert_eq!(e["code"], -32002);
    s.initialize(json!({ "dbPath": w.db() }));
    assert_eq!(s.ok("planwire/listTickets", json!({})), json!({ "tickets": [] }));
}

#[test]
fn unknown_method_gets_method_not_found() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    assert_eq!(s.err("planwire/nope", json!({}))["code"], -32601);
    // Unknown notifications are ignored and the server goes on.
    s.send(&json!({ "jsonrpc": "2.0", "method": "$/setTrace", "params": { "value": "off" } }));
    s.ok("planwire/listTickets", Value::Null);
}

#[test]
fn exit_without_shutdown_is_code_1() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    s.send(&json!({ "jsonrpc": "2.0", "method": "exit" }));
    assert_eq!(s.wait_exit(), 1);
}

#[test]
fn end_of_input_without_shutdown_is_code_1() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    assert_eq!(s.wait_exit(), 1);
}

#[test]
fn db_path_from_environment_when_options_have_none() {
    let w = World::new();
    let db = w.path("from-env.db");
    let mut s = Server::start(&w, &[("PLANWIRE_DB", db.to_str().unwrap())]);
    s.initialize(json!({}));
    let status = s.ok("planwire/status", json!({}));
    assert_eq!(status["store"]["path"], db.display().to_string());
    assert!(db.exists());
}

#[test]
fn db_path_defaults_under_xdg_data_home() {
    let w = World::new();
    let data = w.path("data");
    let mut s = Server::start(&w, &[("XDG_DATA_HOME", data.to_str().unwrap())]);
    s.initialize(json!({}));
    assert!(data.join("planwire/planwire.db").exists());
}

#[test]
fn cancel_request_answers_request_cancelled_or_the_result() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    // status probes planners, so it is the slowest request; cancel it at once.
    s.send(&json!({ "jsonrpc": "2.0", "id": 7, "method": "planwire/status", "params": {} }));
    s.send(&json!({ "jsonrpc": "2.0", "method": "$/cancelRequest", "params": { "id": 7 } }));
    match s.response(7) {
        Err(e) => assert_eq!(e["code"], -32800),
        Ok(r) => assert!(r["store"].is_object(), "a request that finished first keeps its result"),
    }
    // Either way exactly one answer came, and the server goes on.
    s.ok("planwire/listTickets", json!({}));
    let extra = s.seen.iter().filter(|m| m.get("id") == Some(&json!(7))).count();
    assert_eq!(extra, 0);
}

#[test]
fn exit_ends_the_process_even_while_the_client_keeps_stdin_open() {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    s.ok("shutdown", Value::Null);
    s.send(&json!({ "jsonrpc": "2.0", "method": "exit" }));
    assert_eq!(s.wait_exit_with_stdin_open(), 0);
}

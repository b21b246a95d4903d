//! What the fuzz targets (`fuzz/`, cargo-fuzz) drive, and the regression tests that replay
//! their finds. Each function takes arbitrary bytes, feeds them to one of planwire's parsers
//! the way planwire itself does, and checks what must hold whatever the input: no panic, no
//! hang, output within its bounds. A fuzz target is a one-line call of one of these.
//!
//! Every input that once crashed one of them is kept in `tests/fixtures/fuzz/<target>/` and
//! replayed by the tests below, together with the seed corpora (the recordings of
//! `tests/fixtures`).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use serde_json::Value;

use crate::handlers;
use crate::planners::{initiative, plan, Tool, TEXT_TAIL};
use crate::supervisor::MAX_LINE;
use crate::transport::framing::{self, Frame, Rescan, MAX_FRAME};
use crate::transport::{ndjson, Incoming};

/// A fuzz target: arbitrary bytes in, a panic when something that must hold does not.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name (as `fuzz/fuzz_targets/<name>.rs` and the regression folders).
pub const TARGETS: &[(&str, Target)] = &[
    ("frames", frames),
    ("ndjson", ndjson_lines),
    ("jsonrpc", jsonrpc),
    ("claude", claude_lines),
    ("codex", codex_lines),
    ("opencode", opencode_lines),
    ("acp", acp_lines),
    ("plan", plan_text),
];

/// Runs a future that never waits: readers over bytes in memory are always ready.
fn now<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("reading from memory waited"),
    }
}

/// The LSP frame reader over an arbitrary byte stream, rescanning bodies that are not JSON as
/// the transport does: it ends (at the end of input or on a fatal error), each body is within
/// [`MAX_FRAME`], and every read makes progress: it consumes at least one byte of the input
/// or of what was handed back, so the reads are bounded by those bytes.
pub fn frames(data: &[u8]) {
    let mut reader = Rescan::new(tokio::io::BufReader::with_capacity(64, data));
    let mut budget = data.len() + 1;
    loop {
        assert!(budget > 0, "the frame reader stopped making progress");
        budget -= 1;
        match now(framing::read_frame(&mut reader)) {
            Ok(Frame::Eof) | Err(_) => return,
            Ok(Frame::Skipped(why)) => assert!(!why.is_empty()),
            Ok(Frame::Body(body)) => {
                assert!(body.len() <= MAX_FRAME);
                if serde_json::from_slice::<Value>(&body).is_err() {
                    budget += body.len();
                    reader.rescan(body);
                }
            }
        }
    }
}

/// The NDJSON codec (ACP peers, `codex app-server`) over an arbitrary byte stream: each body
/// is one line with no newline, and the reader ends.
pub fn ndjson_lines(data: &[u8]) {
    let mut reader = tokio::io::BufReader::with_capacity(64, data);
    // Every read consumes at least one byte.
    for _ in 0..=data.len() {
        match now(ndjson::read_line(&mut reader)) {
            Ok(Frame::Eof) | Err(_) => return,
            Ok(Frame::Skipped(_)) => {}
            Ok(Frame::Body(body)) => {
                assert!(!body.contains(&b'\n') && !body.is_empty());
                let mut out = Vec::new();
                now(ndjson::write_line_unflushed(&mut out, &body)).unwrap();
                assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1, "one line out");
            }
        }
    }
    panic!("the line reader did not reach the end of {} bytes", data.len());
}

/// A JSON-RPC message: classified as the reader does, then its params parsed as every method
/// would (and `initialize`'s options). Errors are always the JSON-RPC ones they should be.
pub fn jsonrpc(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let params = match Incoming::from_value(value) {
        Ok(Incoming::Request { method, params, .. }) | Ok(Incoming::Notification { method, params }) => {
            if let Err(e) = handlers::check_params(&method, params.clone()) {
                assert!([-32601, -32602].contains(&e.code), "{e:?}");
            }
            params
        }
        Ok(Incoming::Response { .. }) => return,
        Err((_, e)) => return assert_eq!(e.code, -32600),
    };
    for method in handlers::METHODS {
        if let Err(e) = handlers::check_params(method, params.clone()) {
            assert_eq!(e.code, -32602, "{method}: {e:?}");
            assert!(e.message.contains(method), "{method}: {}", e.message);
        }
    }
    let init = params.get("initializationOptions").cloned().unwrap_or(Value::Null);
    let _ = handlers::parse_params::<planwire_protocol::InitializationOptions>("initialize", init);
}

/// Claude's stdout, line by line through its parser (state carried across lines), then its
/// end: events serialize, the kept text stays bounded, and `finish` is idempotent.
pub fn claude_lines(data: &[u8]) {
    let mut parser = Tool::Claude.parser();
    let mut longest = 0;
    for raw in data.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(&raw[..raw.len().min(MAX_LINE)]);
        longest = longest.max(line.len());
        check_events(parser.parse_line(&line).into_iter());
        parser.take_control_requests();
    }
    check_events(parser.finish().into_iter());
    assert!(parser.finish().is_empty(), "finish is idempotent");
    assert!(parser.all_text().len() <= TEXT_TAIL + longest + 2);
    let _ = (parser.final_text(), parser.error_message(), parser.session_id());
    let _ = (
        parser.explain_missing_answer(""),
        parser.session_not_found(""),
        parser.saw_result(),
    );
}

/// `codex app-server`'s stdout: each line a JSON-RPC message, its notifications through the
/// event mapper (state carried across lines), then its end: events serialize, the kept text
/// stays bounded, and `finish` is idempotent.
pub fn codex_lines(data: &[u8]) {
    use crate::planners::codex::events::{Mapper, Output};
    let mut map = Mapper::new();
    let mut out = Output::default();
    let mut longest = 0;
    for line in json_lines(data) {
        // A recording wraps each message: `{"dir": "<", "msg": …}`.
        let value = line.get("msg").cloned().unwrap_or(line);
        if let Some(id) = value.pointer("/result/thread/id").and_then(Value::as_str) {
            map.thread(id, &mut out);
        }
        let (Some(method), Some(params)) = (value.get("method").and_then(Value::as_str), value.get("params")) else {
            continue;
        };
        map.notification(method, params, &mut out);
        longest = longest.max(value.to_string().len());
        check_events(out.events.drain(..));
        out.deltas.clear();
        out.plans.clear();
    }
    map.finish(&mut out);
    check_events(out.events.drain(..));
    map.finish(&mut out);
    assert!(out.events.is_empty(), "finish is idempotent");
    assert!(map.all_text().len() <= TEXT_TAIL + longest + 2);
    let _ = (map.final_text(), map.error_message(), map.explain_missing_answer());
}

/// `opencode serve`'s event stream: the bytes through the SSE decoder, each event through the
/// mapper (state carried across events), then its end: events serialize, the kept text stays
/// bounded, and `finish` is idempotent.
pub fn opencode_lines(data: &[u8]) {
    use crate::planners::opencode::events::{Mapper, Out};
    use crate::planners::opencode::sse::{Decoder, MAX_EVENT};
    let mut map = Mapper::new();
    let mut decoder = Decoder::new();
    // The recordings hold one event per line: each line is also sent as an SSE `data` field.
    let mut body = Vec::with_capacity(data.len() * 2);
    for line in data.split(|&b| b == b'\n') {
        if line.starts_with(b"data:") || line.is_empty() || line.starts_with(b":") {
            body.extend_from_slice(line);
        } else {
            body.extend_from_slice(b"data: ");
            body.extend_from_slice(line);
            body.push(b'\n');
        }
        body.push(b'\n');
    }
    let mut longest = 0;
    for event in decoder.feed(&body).into_iter().flatten() {
        assert!(event.len() <= MAX_EVENT);
        let Ok(value) = serde_json::from_str::<Value>(&event) else {
            continue;
        };
        longest = longest.max(event.len());
        for out in map.on_event(&value) {
            if let Out::Events(events) = out {
                check_events(events.into_iter());
            }
        }
    }
    check_events(map.finish().into_iter());
    assert!(map.finish().is_empty(), "finish is idempotent");
    assert!(map.all_text().len() <= TEXT_TAIL + longest + 2);
    let _ = (map.final_text(), map.error_message(), map.explain_missing_answer(""));
}

/// An ACP agent's `session/update` notifications through the turn mapper (state carried
/// across lines), then its end: events serialize, the kept text stays bounded.
pub fn acp_lines(data: &[u8]) {
    use agent_client_protocol_schema::v1::SessionNotification;
    let mut turn = crate::planners::acp::updates::Turn::default();
    for value in json_lines(data) {
        let params = value.get("params").cloned().unwrap_or(value);
        let Ok(n) = serde_json::from_value::<SessionNotification>(params) else {
            continue;
        };
        let (events, _deltas) = turn.update(n.update);
        check_events(events.into_iter());
    }
    check_events(turn.finish().into_iter());
    // The tail goes past the bound only when its one block is larger.
    let last = turn.all_text.last().map_or(0, String::len);
    assert!(turn.all_text.join("\n").len() <= TEXT_TAIL.max(last));
}

/// Each line of `data` that is a JSON value, cut at the longest line planwire reads.
fn json_lines(data: &[u8]) -> impl Iterator<Item = Value> + '_ {
    data.split(|&b| b == b'\n')
        .filter_map(|raw| serde_json::from_slice(&raw[..raw.len().min(MAX_LINE)]).ok())
}

fn check_events(events: impl Iterator<Item = crate::planners::ParsedEvent>) {
    for ev in events {
        serde_json::to_string(&ev.body).expect("an event serializes");
    }
}

/// Plan extraction (and the other answer contracts) from arbitrary text: a plan found has a
/// title or a description, and renders.
pub fn plan_text(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Some(p) = plan::extract_plan(&text) {
        assert!(
            !(p.title.is_empty() && p.description.is_empty()),
            "an empty plan: {p:?}"
        );
        assert!(!plan::plan_markdown(&p).is_empty());
    }
    let stripped = plan::strip_plan_block(&text);
    assert!(stripped.len() <= text.len() + 1);
    let _ = plan::tagged_json(&text, "planwire-outline");
    if let Ok(outline) = initiative::parse_outline(&text) {
        let _ = initiative::validate_graph(&outline);
        let _ = initiative::parse_expansion(&text, &outline);
    }
    let _ = initiative::parse_research(&text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
    }

    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Every input that once crashed a target still passes it.
    #[test]
    fn fuzz_regressions() {
        let mut n = 0;
        for (name, target) in TARGETS {
            for file in files(&repo().join("tests/fixtures/fuzz").join(name)) {
                target(&std::fs::read(&file).unwrap());
                n += 1;
            }
        }
        eprintln!("{n} fuzz regression inputs replayed");
    }

    /// The seed corpora pass their targets.
    #[test]
    fn seeds_pass() {
        let fixtures = repo().join("tests/fixtures");
        for (name, target) in [
            ("claude", claude_lines as fn(&[u8])),
            ("codex", codex_lines),
            ("opencode", opencode_lines),
            ("opencode/serve", opencode_lines),
        ] {
            let seeds = files(&fixtures.join(name));
            assert!(!seeds.is_empty(), "{name}");
            for f in seeds {
                let bytes = std::fs::read(&f).unwrap();
                target(&bytes);
                plan_text(&bytes);
                frames(&bytes);
                ndjson_lines(&bytes);
                for line in bytes.split(|&b| b == b'\n') {
                    jsonrpc(line);
                }
            }
        }
    }

    #[test]
    fn frames_and_messages_of_the_wire() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"planwire/createTicket","params":["/r","t",""]}"#;
        let mut framed = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        framed.extend_from_slice(body);
        frames(&framed);
        jsonrpc(body);
        jsonrpc(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"initializationOptions":[1]}}"#);
    }
}

//! The MCP install snippets of README.md ("Use from Claude Code, Codex, Copilot, Cursor and
//! OpenCode"), read back from the file: each parses as its client's config, names `planwire`
//! with `mcp`, and the command it names, started as written (with `planwire` the binary under
//! test), answers MCP's `initialize`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::harness::*;

pub fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    std::fs::read_to_string(path).expect("README.md")
}

/// The body of the first fenced block after the first line that contains `marker`, and the
/// block's language.
pub fn snippet(readme: &str, marker: &str) -> (String, String) {
    let start = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README.md has no {marker:?}"));
    let rest = &readme[start..];
    let open = rest.find("\n```").expect("a fenced block after it") + 4;
    let lang_end = rest[open..].find('\n').unwrap() + open;
    let lang = rest[open..lang_end].trim().to_owned();
    let close = rest[lang_end..].find("\n```").unwrap() + lang_end;
    (lang, rest[lang_end + 1..close + 1].to_owned())
}

/// The command and arguments of the server entry, as a list of words.
fn words(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .collect()
}

/// `command` followed by `args`, as JSON configs have them.
fn command_and_args(s: &Value) -> Vec<String> {
    let mut argv = vec![s["command"]
        .as_str()
        .unwrap_or_else(|| panic!("no command: {s}"))
        .to_owned()];
    argv.extend(words(&s["args"]));
    argv
}

/// Starts `argv` as a client would (`planwire` is the binary under test) and asks
/// `initialize`; returns the result.
fn starts_and_initializes(w: &World, argv: &[String]) -> Value {
    assert_eq!(argv[0], "planwire", "{argv:?}");
    assert_eq!(argv[1..], ["mcp"], "{argv:?}");
    let mut child = Command::new(BIN)
        .args(&argv[1..])
        .current_dir(w.root())
        .env_clear()
        .env("HOME", w.path("home"))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PLANWIRE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "install", "version": "1"}}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{init}").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(v["result"]["serverInfo"]["name"], "planwire", "{v}");
    v["result"].clone()
}

#[test]
fn mcp_install_snippets_parse_and_start_planwire_mcp() {
    let text = readme();
    let w = World::new();

    // Claude Code: the `claude mcp add` line, whose words after `--` are the server.
    let (lang, body) = snippet(&text, "Claude Code, for one project");
    assert_eq!(lang, "sh");
    let line = body.trim();
    let (head, server) = line.split_once(" -- ").expect("`--` before the server");
    assert_eq!(
        head.split_whitespace().collect::<Vec<_>>(),
        ["claude", "mcp", "add", "planwire"]
    );
    let argv: Vec<String> = server.split_whitespace().map(str::to_owned).collect();
    starts_and_initializes(&w, &argv);

    // Claude Code's `.mcp.json`.
    let (lang, body) = snippet(&text, "or in the project's `.mcp.json`");
    assert_eq!(lang, "json");
    let v: Value = serde_json::from_str(&body).unwrap();
    let s = &v["mcpServers"]["planwire"];
    assert_eq!(s["type"], "stdio");
    starts_and_initializes(&w, &command_and_args(s));

    // Codex: `[mcp_servers.planwire]` in config.toml, with a tool timeout a plan fits in.
    let (lang, body) = snippet(&text, "Codex, in `~/.codex/config.toml`");
    assert_eq!(lang, "toml");
    let v: toml::Table = body.parse().unwrap_or_else(|e| panic!("{e}\n{body}"));
    let s = &v["mcp_servers"]["planwire"];
    assert!(s["tool_timeout_sec"].as_integer().unwrap() >= 600, "{s}");
    let mut argv = vec![s["command"].as_str().unwrap().to_owned()];
    argv.extend(
        s["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );
    starts_and_initializes(&w, &argv);

    // VS Code: `servers` in .vscode/mcp.json.
    let (lang, body) = snippet(&text, "GitHub Copilot in VS Code, in `.vscode/mcp.json`");
    assert_eq!(lang, "json");
    let v: Value = serde_json::from_str(&body).unwrap();
    let s = &v["servers"]["planwire"];
    assert_eq!(s["type"], "stdio");
    starts_and_initializes(&w, &command_and_args(s));

    // Cursor: `mcpServers` in .cursor/mcp.json.
    let (lang, body) = snippet(&text, "Cursor, in `.cursor/mcp.json`");
    assert_eq!(lang, "json");
    let v: Value = serde_json::from_str(&body).unwrap();
    let s = &v["mcpServers"]["planwire"];
    starts_and_initializes(&w, &command_and_args(s));

    // OpenCode: the `mcp` key, a local server whose command is one list.
    let (lang, body) = snippet(&text, "OpenCode, the `mcp` key of `opencode.json`");
    assert_eq!(lang, "json");
    let v: Value = serde_json::from_str(&body).unwrap();
    let s = &v["mcp"]["planwire"];
    assert_eq!(
        (s["type"].as_str(), s["enabled"].as_bool()),
        (Some("local"), Some(true))
    );
    let result = starts_and_initializes(&w, &words(&s["command"]));
    assert_eq!(result["protocolVersion"], "2025-11-25");
}

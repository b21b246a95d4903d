//! Codex adapter: a pass is one `codex app-server` process, driven over JSON-RPC on its stdio.
//!
//! `codex exec` offers the model `request_user_input` but answers it itself ("unavailable in
//! Default mode"); only the app-server's **plan collaboration mode** lets the turn wait on a
//! question (`item/tool/requestUserInput`, a server request) until planwire answers it. It also
//! streams `item/agentMessage/delta`. Ground truth is the recordings in `tests/fixtures/codex/`
//! (made with `record.py` there, from the real CLI 0.171.0 against the project's mock model).
//!
//! A pass ([`app_server`]):
//! 1. `codex app-server -c features.unbounded_connection_retries=false -c
//!    features.daemon_auto_start=false` in the ticket root, stdin a pipe. Newline-delimited
//!    JSON-RPC through the project's one transport ([`crate::transport`], `Codec::Ndjson`).
//! 2. `initialize` with `capabilities.experimentalApi` (without it `turn/start` refuses
//!    `collaborationMode`), then `initialized`.
//! 3. `thread/start` (or `thread/resume` of the ticket's session, `excludeTurns: true`) with
//!    `cwd` = root, `sandbox: "read-only"` (`danger-full-access` inside planwire's OS sandbox, where the
//!    kernel keeps it read-only: see [`inner_sandbox`]), `approvalPolicy: "never"` (and the ticket's model).
//!    The request's own values win over the user's `config.toml`. An unknown thread is `-32600
//!    no rollout found for thread id …`: the pass ends `session_not_found`.
//! 4. `turn/start` with the prompt and `collaborationMode: {mode: "plan", settings: {model,
//!    reasoning_effort, developer_instructions}}`. `settings.model` is required and comes from
//!    the thread's response. Codex's built-in plan instructions (`developer_instructions:
//!    null`) ask for a `<proposed_plan>` block; planwire's [`DEVELOPER_INSTRUCTIONS`] ask for
//!    the answer format the prompt gives, and a `<proposed_plan>` is accepted all the same
//!    (Codex turns it into a `plan` item: a plan candidate).
//! 5. The turn's notifications become events and deltas ([`events`]); its server requests are
//!    answered by the read-only rules ([`requests`]): questions go to the person, every
//!    approval is declined, anything else is -32601.
//! 6. `turn/completed` ends the pass: stdin is closed, and Codex exits 0 (a Codex that
//!    lingers is stopped; a completed turn stays the pass's success). A stop is
//!    `turn/interrupt`, then the process group.
//!
//! Traps: the `codex` on `PATH` is a Node wrapper (`planners::locate` takes the native binary);
//! a connection failure is retried for ever unless `unbounded_connection_retries` is off (as a
//! `-c` value an unknown feature is ignored, where `--disable` would fail); usage comes per
//! model request (`thread/tokenUsage/updated` `last`; `total` is the thread's and restarts with
//! the process), so a pass's usage is the sum of its own requests' and needs no baseline.

pub mod app_server;
pub mod events;
pub mod requests;
mod stdio;

use super::driver::{PassRequest, Prepared};
use super::flag_value_ok;
use super::writable::Env;
use planwire_sandbox::Writable;
use std::path::Path;

// No override keeps the user's MCP servers out (checked with 0.171): `-c mcp_servers={}` is
// merged into the user's table and leaves every server, and `-c mcp_servers.NAME.enabled=false`
// for a server the user does not have fails the config load ("invalid transport"). Their
// servers run inside the pass's sandbox, and `planwire mcp` refuses to serve there
// (`crate::mcp::inside_a_planner`; `tests/e2e/realcli_mcp.rs`).

/// Options that keep a pass bounded and free of background processes. Connection failures are
/// retried for ever by default (one run waited 197 s); with the feature off a refused
/// connection fails in about a second.
const COMMON_CONFIG: [&str; 2] = [
    "features.unbounded_connection_retries=false",
    "features.daemon_auto_start=false",
];

/// Where Codex may write under the OS sandbox (see [`super::writable`]).
///
/// Refused without it: everything in CODEX_HOME (state and session databases, logs,
/// helper binaries under tmp/), and it cannot record the session.
pub fn writable(env: &Env) -> Vec<Writable> {
    let home = env.var("CODEX_HOME").or_else(|| env.home(".codex"));
    home.map(|p| {
        Writable::dir(
            p,
            "Codex's home (CODEX_HOME): sessions, state databases, logs, helper binaries",
        )
    })
    .into_iter()
    .collect()
}

/// Codex's own sandbox for a pass's thread: `read-only`, unless planwire's OS sandbox holds
/// the pass. Codex's Linux sandbox is bubblewrap, which must mount, and a Landlock domain may
/// not (`bwrap: Failed to make / slave: Operation not permitted`; with
/// `features.use_legacy_landlock` its helper panics): inside planwire's sandbox every command
/// of a `read-only` Codex fails, reads included. There Codex runs its commands directly
/// (`danger-full-access`, still declining every approval), and the kernel refuses their
/// writes.
pub fn inner_sandbox(outer_sandbox: bool) -> &'static str {
    if outer_sandbox {
        "danger-full-access"
    } else {
        "read-only"
    }
}

/// What replaces Codex's built-in plan-mode instructions: planwire's prompt gives the answer
/// format (a plan, an outline, a research note), so the model is asked for that, never for
/// Codex's own `<proposed_plan>` block.
pub const DEVELOPER_INSTRUCTIONS: &str = "You are in planwire's planning mode. It is read-only: \
explore as much as you need (read files, search the code, run commands that only inspect), but \
never create, modify or delete a file, never run a command that changes anything, and do not \
start implementing. When a decision that only the user can make blocks the plan, ask it with the \
request_user_input tool (one to three short questions, each with two or three options) and wait \
for the answer; otherwise state your assumptions and go on. Give your final answer exactly in the \
form the user's message asks for (for a plan: a short update, then the complete plan as JSON \
inside <planwire-plan>…</planwire-plan>). Do not use a <proposed_plan> block.";

/// The argv (without the program) of a pass. The prompt, model and session travel over
/// JSON-RPC, never in argv.
pub fn argv() -> Vec<String> {
    let mut args = vec!["app-server".to_owned()];
    for c in COMMON_CONFIG {
        args.extend(["-c".into(), c.into()]);
    }
    args
}

/// Environment for the CLI: no Rust backtrace on fatal errors, so the stderr tail the runner
/// records is the message.
pub fn env() -> Vec<(String, String)> {
    vec![("RUST_BACKTRACE".into(), "0".into())]
}

/// A reasoning effort as Codex names it (`low`, `high`, …): a plain word, else none.
fn effort(variant: Option<&str>) -> Option<String> {
    variant
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_owned)
}

/// Prepares one pass: `codex app-server` in the root, and the driver that talks to it.
pub fn prepare(program: &Path, req: &PassRequest) -> Prepared {
    let args = argv();
    let start = app_server::Start {
        prompt: req.prompt.clone(),
        model: req.model.clone().filter(|m| flag_value_ok(m)),
        effort: effort(req.variant.as_deref()),
        resume: req.resume.clone().filter(|s| flag_value_ok(s)),
        cwd: req.root.clone(),
        sandbox: inner_sandbox(req.outer_sandbox),
    };
    Prepared {
        recorded_args: args.clone(),
        spawn: crate::supervisor::SpawnSpec {
            program: program.to_owned(),
            args,
            cwd: req.root.clone(),
            env: env(),
            stdin_pipe: true,
            // The runner sets the OS sandbox of every pass.
            sandbox: None,
        },
        driver: Box::new(app_server::AppServerDriver { start }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_holds_no_prompt_model_or_session() {
        let req = PassRequest {
            prompt: "Plan the ticket below. --dangerously-bypass-approvals-and-sandbox".into(),
            model: Some("gpt-5.5".into()),
            variant: Some("high".into()),
            resume: Some("01a2-thread".into()),
            ..Default::default()
        };
        let p = prepare(Path::new("/bin/true"), &req);
        assert_eq!(
            p.spawn.args,
            [
                "app-server",
                "-c",
                "features.unbounded_connection_retries=false",
                "-c",
                "features.daemon_auto_start=false"
            ]
        );
        assert_eq!(p.recorded_args, p.spawn.args);
        assert!(p.spawn.stdin_pipe, "JSON-RPC on stdin");
        assert_eq!(p.spawn.env, [("RUST_BACKTRACE".to_string(), "0".to_string())]);
    }

    #[test]
    fn efforts_are_plain_words() {
        assert_eq!(effort(Some("high")).as_deref(), Some("high"));
        assert_eq!(effort(Some("x_high2")).as_deref(), Some("x_high2"));
        assert_eq!(effort(Some("high\"; sandbox")), None);
        assert_eq!(effort(Some("")), None);
        assert_eq!(effort(None), None);
    }

    #[test]
    fn instructions_ask_for_planwire_answers_and_questions() {
        assert!(DEVELOPER_INSTRUCTIONS.contains("<planwire-plan>"));
        assert!(DEVELOPER_INSTRUCTIONS.contains("request_user_input"));
        assert!(DEVELOPER_INSTRUCTIONS.contains("Do not use a <proposed_plan> block"));
    }

    #[test]
    fn writes_its_home_only() {
        use crate::planners::writable::tests::{env, paths};
        assert_eq!(paths(&writable(&env(&[]))), ["/h/.codex"]);
        assert_eq!(paths(&writable(&env(&[("CODEX_HOME", "/x")]))), ["/x"]);
        // Without HOME there is no state to allow.
        assert_eq!(writable(&Env::default()), []);
    }
}

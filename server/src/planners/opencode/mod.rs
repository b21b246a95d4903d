//! OpenCode adapter: each pass runs its own `opencode serve` in the ticket root and drives it
//! over HTTP and server-sent events, so the agent can ask the person mid-run and its text
//! streams as it is written.
//!
//! `opencode run` cannot ask: it creates its session with the `question` tool denied, and it
//! rejects every permission that asks by itself, ending the turn. The server offers `question`
//! (a question blocks the turn until `POST /question/:id/reply`), reports `permission.asked`
//! and streams `message.part.delta`. Ground truth is the shared notes on `opencode serve`
//! (1.18.33) and the event streams recorded from it in `tests/fixtures/opencode/serve/`
//! (`record_serve.py` makes them again).
//!
//! - `config.rs`: the environment (a random `OPENCODE_SERVER_PASSWORD`) and the read-only
//!   permission rules;
//! - `start.rs`: the port, the subscription, the session and the prompt;
//! - `events.rs`, `parts.rs`: server events into planwire's events (the [`events::Mapper`]);
//! - `permissions.rs`: planwire's answers to `permission.asked`;
//! - `driver.rs`: the pass, from the prompt to the end (questions, stop, a cut stream, a
//!   locked database);
//! - `http.rs`, `sse.rs`: the loopback HTTP client and the event-stream decoder.
//!
//! The server's instance directory is its cwd (not `$PWD`, not `?directory=`): the supervisor
//! starts it in the root, and `/event` carries that instance's sessions. It listens on
//! 127.0.0.1 only, always with a password (it runs bash for whoever reaches it), and it never
//! outlives its pass: every end stops its process group.

pub mod config;
mod driver;
pub mod events;
mod http;
mod parts;
mod permissions;
pub(crate) mod sse;
mod start;

use std::path::Path;

use super::driver::{PassRequest, Prepared};
use super::writable::Env;
use crate::supervisor::SpawnSpec;
use planwire_sandbox::Writable;

pub use config::{config_content, readonly_permission, DEFAULT_TITLE};

/// The argv (without the program) of a pass's server. The prompt, the session and the model
/// travel over HTTP, never in argv. Its errors go to stderr (kept on the run): the cause of a
/// `500` (a locked database, an unknown model) is only named there.
pub fn argv() -> Vec<String> {
    [
        "serve",
        "--print-logs",
        "--log-level",
        "ERROR",
        "--hostname",
        "127.0.0.1",
        "--port",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// One pass: its server (no stdin: the server reads none) and its driver.
pub fn prepare(program: &Path, req: &PassRequest) -> Prepared {
    let password = config::password();
    let inherited = std::env::var("OPENCODE_CONFIG_CONTENT").ok();
    let args = argv();
    Prepared {
        recorded_args: args.clone(),
        spawn: SpawnSpec {
            program: program.to_owned(),
            args,
            cwd: req.root.clone(),
            env: config::env(inherited.as_deref(), &password),
            stdin_pipe: false,
            // The runner sets the OS sandbox of every pass.
            sandbox: None,
        },
        driver: Box::new(driver::ServeDriver {
            request: req.clone(),
            password,
        }),
    }
}

/// Where OpenCode may write under the OS sandbox (see [`super::writable`]): its directory in
/// each XDG base directory.
///
/// Refused without these: `mkdir ~/.local`, `~/.config`, `~/.cache`, then it exits 1.
/// Also refused, and harmless: `.git/opencode` in the repository (a cached project id)
/// and writing back to the file OPENCODE_CONFIG names.
pub fn writable(env: &Env) -> Vec<Writable> {
    let xdg = [
        (
            env.xdg("XDG_DATA_HOME", ".local/share"),
            "OpenCode's data: the session database (opencode.db), snapshots, logs",
        ),
        (
            env.xdg("XDG_CACHE_HOME", ".cache"),
            "OpenCode's cache: provider SDK packages and tools it installs",
        ),
        (
            env.xdg("XDG_CONFIG_HOME", ".config"),
            "OpenCode's config directory: its .gitignore and the dependencies of the user's plugins",
        ),
        (env.xdg("XDG_STATE_HOME", ".local/state"), "OpenCode's state: locks"),
    ];
    xdg.into_iter()
        .filter_map(|(base, reason)| Some(Writable::dir(base?.join("opencode"), reason)))
        .collect()
}

#[cfg(test)]
mod tests;

//! The sandbox policy as data: where a planner may write, and why. Everything not listed is
//! read-only to it (reads and execution are allowed everywhere).
//!
//! Each CLI's entries were found by running the pinned real CLI under the sandbox with only
//! the scratch directory and `/dev` writable and tracing the writes it was refused (`strace -f
//! -Z -e trace=%file`), then adding the fewest entries that let it plan, resume and keep its
//! state. What each CLI was refused and can do without is named beside its entries.

use std::path::{Path, PathBuf};

use crate::planners::Tool;

/// A directory (everything beneath it) or a single file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// One file, written in place; when missing it is created holding `initial`.
    File {
        initial: &'static str,
    },
}

/// One place a sandboxed planner may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writable {
    pub path: PathBuf,
    pub kind: Kind,
    /// Why the planner needs it.
    pub reason: &'static str,
}

/// The environment the policy is computed from (the planner inherits planwire's).
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub xdg_config: Option<PathBuf>,
    pub xdg_data: Option<PathBuf>,
    pub xdg_cache: Option<PathBuf>,
    pub xdg_state: Option<PathBuf>,
    pub claude_config_dir: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub replay_stdin_log: Option<PathBuf>,
}

impl Env {
    pub fn from_process() -> Env {
        let var = |k: &str| std::env::var_os(k).map(PathBuf::from).filter(|p| p.is_absolute());
        Env {
            home: var("HOME"),
            xdg_config: var("XDG_CONFIG_HOME"),
            xdg_data: var("XDG_DATA_HOME"),
            xdg_cache: var("XDG_CACHE_HOME"),
            xdg_state: var("XDG_STATE_HOME"),
            claude_config_dir: var("CLAUDE_CONFIG_DIR"),
            codex_home: var("CODEX_HOME"),
            replay_stdin_log: var("PLANWIRE_REPLAY_STDIN_LOG"),
        }
    }

    /// An XDG base directory: the variable, else its default under `HOME`.
    fn xdg(&self, set: &Option<PathBuf>, default: &str) -> Option<PathBuf> {
        set.clone().or_else(|| self.home.as_ref().map(|h| h.join(default)))
    }
}

fn dir(path: PathBuf, reason: &'static str) -> Writable {
    Writable {
        path,
        kind: Kind::Dir,
        reason,
    }
}

/// Where a planner of `tool` may write, with `scratch` as its TMPDIR.
pub fn writable(tool: Tool, scratch: &Path, env: &Env) -> Vec<Writable> {
    let mut out = vec![
        dir(
            scratch.to_owned(),
            "the run's private scratch directory (TMPDIR, TMP, TEMP), deleted after the pass: \
             shell snapshots and temporary files of the CLI and its tools",
        ),
        dir(
            "/dev".into(),
            "device files: /dev/null, /dev/tty and the terminals, /dev/shm (shared memory)",
        ),
    ];
    let home = |rel: &str| env.home.as_ref().map(|h| h.join(rel));
    match tool {
        // Refused without these: `mkdir ~/.claude` (sessions, so no --resume) and the
        // `~/.claude.json.tmp.*` + rename into HOME; it then rewrites `.claude.json` in
        // place. Its `~/.claude.json.lock` (a mkdir in HOME) stays refused: it goes on.
        Tool::Claude => match &env.claude_config_dir {
            Some(d) => out.push(dir(
                d.clone(),
                "Claude Code's config directory (CLAUDE_CONFIG_DIR): sessions, plans, its .claude.json",
            )),
            None => {
                out.extend(home(".claude").map(|p| {
                    dir(
                        p,
                        "Claude Code's state: sessions (projects/, for --resume), plans, todos, shell snapshots",
                    )
                }));
                out.extend(home(".claude.json").map(|path| Writable {
                    path,
                    // Claude Code takes an empty .claude.json for a corrupt one.
                    kind: Kind::File { initial: "{}\n" },
                    reason: "Claude Code's global state file, rewritten in place",
                }));
            }
        },
        // Refused without these: `mkdir ~/.local`, `~/.config`, `~/.cache`, then it exits 1.
        // Also refused, and harmless: `.git/opencode` in the repository (a cached project id)
        // and writing back to the file OPENCODE_CONFIG names.
        Tool::OpenCode => {
            let xdg = [
                (
                    env.xdg(&env.xdg_data, ".local/share"),
                    "OpenCode's data: the session database (opencode.db), snapshots, logs",
                ),
                (
                    env.xdg(&env.xdg_cache, ".cache"),
                    "OpenCode's cache: provider SDK packages and tools it installs",
                ),
                (
                    env.xdg(&env.xdg_config, ".config"),
                    "OpenCode's config directory: its .gitignore and the dependencies of the user's plugins",
                ),
                (env.xdg(&env.xdg_state, ".local/state"), "OpenCode's state: locks"),
            ];
            out.extend(
                xdg.into_iter()
                    .filter_map(|(base, reason)| Some(dir(base?.join("opencode"), reason))),
            );
        }
        // Refused without it: everything in CODEX_HOME (state and session databases, logs,
        // helper binaries under tmp/), and it cannot record the session.
        Tool::Codex => out.extend(env.codex_home.clone().or_else(|| home(".codex")).map(|p| {
            dir(
                p,
                "Codex's home (CODEX_HOME): sessions, state databases, logs, helper binaries",
            )
        })),
        // An ACP agent: a preset that is a CLI planwire also drives natively writes where that
        // one does; qwen and gemini keep their state in ~/.qwen and ~/.gemini.
        Tool::Acp(name) => match crate::planners::acp::native_tool(name) {
            Some(native) => return writable(native, scratch, env),
            None => out.extend(
                crate::planners::acp::state_dir(name)
                    .and_then(home)
                    .map(|p| dir(p, "the ACP agent's state: settings, sessions, logs")),
            ),
        },
        // planwire's own replayer writes nothing but the stdin log tests ask for.
        Tool::Script => out.extend(env.replay_stdin_log.clone().map(|path| Writable {
            path,
            kind: Kind::File { initial: "" },
            reason: "the replayer's stdin log (PLANWIRE_REPLAY_STDIN_LOG), which tests read",
        })),
    }
    out
}

/// Creates the entries that do not exist yet (a rule needs an existing path): directories
/// private to the user, a missing file with its initial content.
pub fn create_missing(writable: &[Writable]) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    for w in writable {
        if w.path.exists() {
            continue;
        }
        let made = match w.kind {
            Kind::Dir => std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&w.path),
            Kind::File { initial } => write_new(&w.path, initial.as_bytes()),
        };
        made.map_err(|e| format!("cannot create {}: {e}", w.path.display()))?;
    }
    Ok(())
}

fn write_new(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            home: Some("/h".into()),
            ..Env::default()
        }
    }

    fn paths(tool: Tool, env: &Env) -> Vec<String> {
        writable(tool, Path::new("/s"), env)
            .iter()
            .map(|w| w.path.display().to_string())
            .collect()
    }

    #[test]
    fn each_cli_gets_its_own_state_and_nothing_of_home_or_the_repo() {
        assert_eq!(
            paths(Tool::Claude, &env()),
            ["/s", "/dev", "/h/.claude", "/h/.claude.json"]
        );
        assert_eq!(
            paths(Tool::OpenCode, &env()),
            [
                "/s",
                "/dev",
                "/h/.local/share/opencode",
                "/h/.cache/opencode",
                "/h/.config/opencode",
                "/h/.local/state/opencode"
            ]
        );
        assert_eq!(paths(Tool::Codex, &env()), ["/s", "/dev", "/h/.codex"]);
        assert_eq!(paths(Tool::Script, &env()), ["/s", "/dev"]);
        for tool in Tool::ALL {
            for w in writable(tool, Path::new("/s"), &env()) {
                assert!(!w.reason.is_empty());
                assert_ne!(w.path, Path::new("/h"));
                assert_ne!(w.path, Path::new("/tmp"));
            }
        }
    }

    #[test]
    fn configured_homes_win() {
        let e = Env {
            claude_config_dir: Some("/c".into()),
            codex_home: Some("/x".into()),
            xdg_data: Some("/d".into()),
            ..env()
        };
        assert_eq!(paths(Tool::Claude, &e), ["/s", "/dev", "/c"]);
        assert_eq!(paths(Tool::Codex, &e), ["/s", "/dev", "/x"]);
        assert_eq!(paths(Tool::OpenCode, &e)[2], "/d/opencode");
        // Without HOME there is no state to allow.
        assert_eq!(paths(Tool::Codex, &Env::default()), ["/s", "/dev"]);
    }

    #[test]
    fn missing_entries_are_created_and_a_json_file_is_an_object() {
        let t = tempfile::tempdir().unwrap();
        let w = vec![
            dir(t.path().join("a/b"), "test"),
            Writable {
                path: t.path().join("state.json"),
                kind: Kind::File { initial: "{}\n" },
                reason: "test",
            },
        ];
        create_missing(&w).unwrap();
        assert!(t.path().join("a/b").is_dir());
        assert_eq!(std::fs::read_to_string(t.path().join("state.json")).unwrap(), "{}\n");
        // Existing ones are left as they are.
        std::fs::write(t.path().join("state.json"), "{\"a\":1}").unwrap();
        create_missing(&w).unwrap();
        assert_eq!(
            std::fs::read_to_string(t.path().join("state.json")).unwrap(),
            "{\"a\":1}"
        );
    }
}

//! The server's side of the OS sandbox: what `initializationOptions.sandbox` makes of what
//! this machine offers (the state in `initialize`, `planwire doctor` and every run, the
//! refusal under `required`, a run's warning), and the preparation of one pass (its scratch
//! directory, the work-tree snapshot, the restriction).
//!
//! The OS part is the `planwire-sandbox` crate (`sandbox/` at the top of the repository): the
//! policy types, Landlock, and entering the restriction between fork and exec. It is a crate of
//! its own so that it cannot see the server: it knows nothing of planners or of the protocol,
//! and these messages, which name `initializationOptions`, stay here. This module knows no
//! planner either: the runner (`runner/sandboxed.rs`) joins what every pass may write
//! ([`common`]) with the list of the planner's adapter (`planners::writable`) and hands it to
//! [`prepare`].
//!
//! Planning is read-only because the kernel says so, not because the model behaves. Every
//! planner process is started by [`crate::supervisor::spawn`]; when the sandbox is enforced,
//! its [`SpawnSpec`](crate::supervisor::SpawnSpec) carries the pass's [`Restriction`], built
//! in the parent, and the child enters it before exec. The restriction is inherited by
//! everything the planner starts: hooks, MCP servers, plugins, its shells. The planner may read
//! and execute anywhere and write only beneath its [`Writable`] entries; everything else is
//! refused with `EACCES`: the repository, a linked repository, the rest of `HOME`, `/tmp`. The
//! network stays open (the CLIs need their model APIs).
//!
//! Whether or not the OS enforces it, each pass also compares the work tree before and after
//! ([`crate::worktree`]): what a sandbox could miss, and the only guard where there is none.
//!
//! ## Trying it by hand
//!
//! - `planwire doctor` prints the state (`enforced (Landlock ABI 7)` on a recent kernel).
//! - `cargo test -p planwire-sandbox` runs a child and a grandchild under a policy: their
//!   writes to a project root, `HOME` and `/tmp` fail with `EACCES`, reads and the scratch
//!   directory work (`sandbox/README.md` has a test by hand of the crate alone).
//! - Plan a ticket whose description asks for `touch x` or `cat README.md > x` with any real
//!   CLI: the transcript shows the CLI's shell failing with "Permission denied", and
//!   `git status` in the root stays clean. While it runs, `grep NoNewPrivs /proc/PID/status`
//!   of the planner shows `1`.
//! - `PLANWIRE_TEST_NO_LANDLOCK=1` (test-only) makes planwire behave as on a kernel without
//!   Landlock: `auto` plans with a warning, `required` refuses.

use std::path::{Path, PathBuf};

use planwire_protocol::{SandboxMode, SandboxState};
use planwire_sandbox::{support, Restriction, Writable};

use crate::worktree;

/// The state runs get under `mode` on this machine.
pub fn state(mode: SandboxMode) -> SandboxState {
    match (mode, support()) {
        (SandboxMode::Off, _) => SandboxState::Off,
        (_, Ok(_)) => SandboxState::Enforced,
        (_, Err(_)) => SandboxState::Unavailable,
    }
}

/// One line for `planwire doctor` and logs: the state and why.
pub fn describe(mode: SandboxMode) -> String {
    match (state(mode), support()) {
        (SandboxState::Off, _) => "off (initializationOptions.sandbox is \"off\")".to_owned(),
        (SandboxState::Enforced, Ok(support)) => format!("enforced ({support})"),
        (_, Err(why)) => format!("unavailable: {why}"),
        (_, Ok(_)) => "unavailable".to_owned(),
    }
}

/// Why a plan must be refused: `required` on a machine without the sandbox.
pub fn refusal(mode: SandboxMode) -> Option<String> {
    match (mode, support()) {
        (SandboxMode::Required, Err(why)) => Some(format!(
            "planning was refused: initializationOptions.sandbox is \"required\", but there is no OS \
             sandbox here ({why}). Use a kernel with Landlock (Linux 5.13 or later), or set \
             sandbox to \"auto\" to plan without it."
        )),
        _ => None,
    }
}

/// The warning a run gets when its planner runs without the sandbox.
pub fn warning(state: SandboxState, detail: Option<&str>) -> Option<String> {
    let why = match state {
        SandboxState::Enforced => return None,
        SandboxState::Off => "initializationOptions.sandbox is \"off\"".to_owned(),
        SandboxState::Unavailable => detail
            .map(str::to_owned)
            .or_else(|| support().as_ref().err().cloned())
            .unwrap_or_else(|| "this OS offers none".to_owned()),
    };
    Some(format!(
        "Planning runs without the OS sandbox ({why}). Only the planner's own plan mode keeps \
         it from writing; planwire still checks the work tree after each pass."
    ))
}

/// The name of every pass's scratch directory (its `TMPDIR`) starts so; `planwire mcp` reads it
/// to refuse to serve inside a planner (`crate::mcp::inside_a_planner`).
pub const SCRATCH_PREFIX: &str = "planwire-run-";

/// A pass's private scratch directory (its `TMPDIR`), deleted with the pass.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    pub fn new() -> Result<Scratch, String> {
        use std::os::unix::fs::PermissionsExt;
        tempfile::Builder::new()
            .prefix(SCRATCH_PREFIX)
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map(Scratch)
            .map_err(|e| format!("cannot make the run's scratch directory: {e}"))
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// What every sandboxed pass may write, whatever its planner: `scratch` and `/dev`.
pub fn common(scratch: &Path) -> Vec<Writable> {
    vec![
        Writable::dir(
            scratch.to_owned(),
            "the run's private scratch directory (TMPDIR, TMP, TEMP), deleted after the pass: \
             shell snapshots and temporary files of the CLI and its tools",
        ),
        Writable::dir(
            "/dev".into(),
            "device files: /dev/null, /dev/tty and the terminals, /dev/shm (shared memory)",
        ),
    ]
}

/// One pass's sandbox, made before its process starts and kept until it has ended.
pub struct Pass {
    pub state: SandboxState,
    /// Handed to the supervisor (`SpawnSpec::sandbox`); `None` unless enforced.
    pub restriction: Option<Restriction>,
    /// `TMPDIR`, `TMP` and `TEMP`: the scratch directory.
    pub env: Vec<(String, String)>,
    /// Why the sandbox is missing, when it could not be built although the OS has one.
    pub detail: Option<String>,
    /// Held, not read: deleted when the pass is dropped.
    _scratch: Scratch,
    root: PathBuf,
    before: Option<worktree::Snapshot>,
}

/// Prepares a pass in `root` with `scratch` as its `TMPDIR`: the work-tree snapshot and, when
/// the sandbox is on and the OS has it, the restriction that lets it write only beneath
/// `writable` (which includes [`common`]). `Err` only under `required`, when the restriction
/// cannot be built.
pub async fn prepare(mode: SandboxMode, root: &Path, scratch: Scratch, writable: &[Writable]) -> Result<Pass, String> {
    let before = worktree::take(root).await;
    let mut state = state(mode);
    let mut detail = None;
    let mut restriction = None;
    if state == SandboxState::Enforced {
        if let Some(w) = writable.iter().find(|w| root.starts_with(&w.path)) {
            // The work-tree check still sees what the planner changes there.
            tracing::warn!(
                "{} lies inside {} ({}): the sandbox cannot keep it read-only",
                root.display(),
                w.path.display(),
                w.reason
            );
        }
        match planwire_sandbox::build(writable) {
            Ok(r) => restriction = Some(r),
            Err(e) if mode == SandboxMode::Required => return Err(format!("cannot build the sandbox: {e}")),
            Err(e) => {
                tracing::warn!("planning without the sandbox: {e}");
                state = SandboxState::Unavailable;
                detail = Some(format!("it could not be built: {e}"));
            }
        }
    }
    let dir = scratch.path().display().to_string();
    let env = ["TMPDIR", "TMP", "TEMP"].map(|k| (k.to_owned(), dir.clone())).to_vec();
    Ok(Pass {
        state,
        restriction,
        env,
        detail,
        _scratch: scratch,
        root: root.to_owned(),
        before,
    })
}

impl Pass {
    /// After the pass: the files it changed in its work tree (absolute paths, sorted; empty
    /// when none, or when the root is not a git work tree). Deletes the scratch directory.
    pub async fn finish(self) -> Vec<String> {
        let Some(before) = &self.before else {
            return Vec::new();
        };
        match worktree::take(&self.root).await {
            Some(after) => worktree::changes(before, &after),
            None => {
                tracing::warn!(
                    "{}: the work tree could not be checked after the pass",
                    self.root.display()
                );
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use planwire_sandbox::Kind;

    use super::*;

    async fn prepare_in(mode: SandboxMode, root: &Path) -> Result<Pass, String> {
        let scratch = Scratch::new().unwrap();
        let writable = common(scratch.path());
        prepare(mode, root, scratch, &writable).await
    }

    #[test]
    fn every_pass_may_write_its_scratch_directory_and_dev() {
        let w = common(Path::new("/s"));
        let paths: Vec<&Path> = w.iter().map(|w| w.path.as_path()).collect();
        assert_eq!(paths, [Path::new("/s"), Path::new("/dev")]);
        assert!(w.iter().all(|w| w.kind == Kind::Dir && !w.reason.is_empty()));
    }

    #[tokio::test]
    async fn a_pass_gets_a_private_scratch_directory_deleted_after_it() {
        let root = tempfile::tempdir().unwrap();
        let pass = prepare_in(SandboxMode::Off, root.path()).await.unwrap();
        assert_eq!(pass.state, SandboxState::Off);
        assert!(pass.restriction.is_none());
        let keys: Vec<&str> = pass.env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["TMPDIR", "TMP", "TEMP"]);
        let dir = PathBuf::from(&pass.env[0].1);
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(dir.join("left-behind"), "x").unwrap();
        // Not a git work tree: nothing to compare.
        assert_eq!(pass.finish().await, Vec::<String>::new());
        assert!(!dir.exists(), "the scratch directory outlived its pass");
    }

    #[tokio::test]
    async fn an_enforced_pass_carries_its_restriction() {
        if support().is_err() {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let pass = prepare_in(SandboxMode::Required, root.path()).await.unwrap();
        assert_eq!(pass.state, SandboxState::Enforced);
        assert!(pass.restriction.is_some());
        assert_eq!(warning(pass.state, None), None);
        assert!(warning(SandboxState::Off, None).unwrap().contains("\"off\""));
    }
}

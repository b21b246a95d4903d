//! Linux: Landlock. The ruleset handles every write right of the ABI planwire was tested
//! with (7): writing, truncating, creating, removing, renaming or linking files, making
//! directories, devices, sockets, fifos and symlinks, and device ioctls. Reads and execution
//! are not handled, so they stay allowed everywhere; the network is not handled either. The
//! `landlock` crate builds it in the parent (best effort: an older kernel enforces the rights
//! it knows), and [`enter`] applies it in the child.
//!
//! Two Landlock rules matter to what runs inside: a Landlock domain may not mount (so a CLI's
//! own bubblewrap sandbox cannot start inside it: planwire's Codex adapter then turns Codex's
//! off), and before ABI 3 `truncate(2)` is not controlled (planwire's work-tree check still
//! sees it).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use landlock::{AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, ABI};

use crate::{Kind, Writable};

/// The mechanism, as [`Support`](crate::Support) names it.
pub const NAME: &str = "Landlock ABI";

/// The Landlock ABI whose rights the ruleset handles.
const TESTED_ABI: ABI = ABI::V7;

/// A built ruleset, ready for [`enter`]. Cloning shares the descriptor.
#[derive(Debug, Clone)]
pub struct Restriction {
    fd: Arc<OwnedFd>,
}

/// The kernel's Landlock ABI version, or why there is none.
pub fn abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: the documented version query: no attributes, size 0, the version flag.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if v >= 1 {
        return Ok(v as u32);
    }
    let e = io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOSYS) => "this kernel has no Landlock (it needs Linux 5.13 or later)".to_owned(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)".to_owned()
        }
        _ => format!("Landlock is not usable here: {e}"),
    })
}

fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::from_write(TESTED_ABI)
}

/// The ruleset: writes allowed only beneath `writable`.
pub fn build(writable: &[Writable]) -> Result<Restriction, String> {
    let ruleset = || -> Result<Option<OwnedFd>, RulesetError> {
        let mut created = Ruleset::default().handle_access(write_rights())?.create()?;
        for w in writable {
            let access = match w.kind {
                Kind::Dir => write_rights(),
                Kind::File { .. } => write_rights() & AccessFs::from_file(TESTED_ABI),
            };
            let fd = match PathFd::new(&w.path) {
                Ok(fd) => fd,
                Err(e) => {
                    tracing::debug!("sandbox: {} is not writable: {e}", w.path.display());
                    continue;
                }
            };
            created = created.add_rule(PathBeneath::new(fd, access))?;
        }
        Ok(created.into())
    };
    match ruleset() {
        Ok(Some(fd)) => Ok(Restriction { fd: Arc::new(fd) }),
        Ok(None) => Err("the kernel did not create a Landlock ruleset".to_owned()),
        Err(e) => Err(format!("Landlock: {e}")),
    }
}

/// Applies `r` to the calling process, for good. Runs in the child between fork and exec:
/// two syscalls, nothing that allocates or locks.
pub fn enter(r: &Restriction) -> io::Result<()> {
    // SAFETY: plain syscalls on a descriptor that `r` keeps open.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, r.fd.as_raw_fd(), 0u32) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::path::{Path, PathBuf};

    use super::*;

    /// Runs `script` in `cwd` under a restriction allowing `scratch` (its TMPDIR), /dev and
    /// `more`, and returns its stdout lines.
    fn run_sandboxed_with(scratch: &Path, more: &[Writable], cwd: &Path, script: &str) -> Vec<String> {
        let mut policy = vec![
            Writable::dir(scratch.to_owned(), "scratch"),
            Writable::dir("/dev".into(), "devices"),
        ];
        policy.extend_from_slice(more);
        let restriction = crate::build(&policy).expect("Landlock ruleset");
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", script])
            .current_dir(cwd)
            .env("TMPDIR", scratch)
            .stdin(std::process::Stdio::null());
        // SAFETY: `enter` is two syscalls, nothing that allocates or locks.
        unsafe {
            cmd.pre_exec(move || enter(&restriction));
        }
        let out = cmd.output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn run_sandboxed(scratch: &Path, cwd: &Path, script: &str) -> Vec<String> {
        run_sandboxed_with(scratch, &[], cwd, script)
    }

    /// One line per path: `wrote P` or `denied P: <the shell's error>`.
    const TRY_WRITES: &str = r#"for p in "$@"; do
        if err=$( (echo x > "$p") 2>&1 ); then echo "wrote $p"; else echo "denied $p: $err"; fi
    done"#;

    fn try_writes(paths: &[&Path]) -> String {
        let quoted: Vec<String> = paths.iter().map(|p| format!("'{}'", p.display())).collect();
        format!("set -- {}; {TRY_WRITES}", quoted.join(" "))
    }

    /// A scratch world (`repo/`, `home/`, `scratch/`), or `None` on a kernel without Landlock.
    fn world() -> Option<(tempfile::TempDir, PathBuf, PathBuf, PathBuf)> {
        if crate::support().is_err() {
            eprintln!("skipped: no Landlock on this kernel");
            return None;
        }
        let t = tempfile::tempdir().unwrap();
        let (root, home, scratch) = (t.path().join("repo"), t.path().join("home"), t.path().join("scratch"));
        for d in [&root, &home, &scratch] {
            std::fs::create_dir(d).unwrap();
        }
        Some((t, root, home, scratch))
    }

    #[test]
    fn a_child_writes_only_its_scratch_directory_and_reads_anywhere() {
        let Some((_t, root, home, scratch)) = world() else {
            return;
        };
        std::fs::write(root.join("README.md"), "# hello\n").unwrap();
        let tmp = std::env::temp_dir().join(format!("planwire-sandbox-test-{}", std::process::id()));
        let targets = [
            root.join("new.txt"),
            root.join("README.md"),
            home.join(".bashrc"),
            tmp.clone(),
            scratch.join("ok.txt"),
        ];
        let refs: Vec<&Path> = targets.iter().map(|p| p.as_path()).collect();
        let script = format!(
            "{writes}; cat README.md; head -c 4 /etc/passwd; echo; echo x > /dev/null && echo devnull; \
             echo x > \"$TMPDIR/via-tmpdir\" && echo tmpdir",
            writes = try_writes(&refs),
        );
        let lines = run_sandboxed(&scratch, &root, &script);
        let _ = std::fs::remove_file(&tmp);
        let text = lines.join("\n");
        for p in &targets[..4] {
            let line = lines
                .iter()
                .find(|l| l.contains(&p.display().to_string()))
                .unwrap_or_else(|| panic!("{text}"));
            assert!(
                line.starts_with("denied") && line.contains("Permission denied"),
                "{text}"
            );
        }
        assert!(
            lines.contains(&format!("wrote {}", scratch.join("ok.txt").display())),
            "{text}"
        );
        assert!(lines.contains(&"# hello".to_owned()), "reads the root: {text}");
        assert!(lines.iter().any(|l| l.len() == 4), "reads /etc: {text}");
        assert!(lines.contains(&"devnull".to_owned()), "{text}");
        assert!(lines.contains(&"tmpdir".to_owned()), "{text}");
        assert_eq!(std::fs::read_to_string(root.join("README.md")).unwrap(), "# hello\n");
        assert!(!root.join("new.txt").exists() && !home.join(".bashrc").exists() && !tmp.exists());
    }

    #[test]
    fn a_grandchild_is_bound_too() {
        let Some((t, root, _home, scratch)) = world() else {
            return;
        };
        // Written before the sandbox, run two levels down: sh → sh → sh. The restriction is
        // inherited across fork and exec, and no_new_privs keeps it from being shed.
        let inner = t.path().join("inner.sh");
        let writes = try_writes(&[&root.join("grandchild.txt"), &scratch.join("grandchild-ok.txt")]);
        std::fs::write(&inner, format!("{writes}\ngrep NoNewPrivs /proc/self/status\n")).unwrap();
        let script = format!("sh -c 'sh {}'", inner.display());
        let lines = run_sandboxed(&scratch, &root, &script);
        let text = lines.join("\n");
        assert!(
            lines.iter().any(
                |l| l.starts_with(&format!("denied {}", root.join("grandchild.txt").display()))
                    && l.contains("Permission denied")
            ),
            "{text}"
        );
        assert!(
            lines.contains(&format!("wrote {}", scratch.join("grandchild-ok.txt").display())),
            "{text}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("NoNewPrivs:") && l.ends_with('1')),
            "{text}"
        );
        assert!(!root.join("grandchild.txt").exists());
    }

    #[test]
    fn a_file_entry_is_written_in_place_and_nothing_beside_it() {
        let Some((_t, root, home, scratch)) = world() else {
            return;
        };
        // Made by `build`, as Claude Code's state file is.
        let state = home.join("state.json");
        let file = [Writable::file(state.clone(), "{}\n", "test")];
        let script = format!(
            "cat '{state}'; {writes}",
            state = state.display(),
            writes = try_writes(&[&state, &home.join("state.json.tmp")]),
        );
        let lines = run_sandboxed_with(&scratch, &file, &root, &script);
        let text = lines.join("\n");
        assert_eq!(lines.first().map(String::as_str), Some("{}"), "{text}");
        assert!(lines.contains(&format!("wrote {}", state.display())), "{text}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("denied {}.tmp", state.display()))),
            "{text}"
        );
        assert_eq!(std::fs::read_to_string(&state).unwrap(), "x\n");
        assert!(!home.join("state.json.tmp").exists());
    }

    #[test]
    fn support_names_the_landlock_abi() {
        if let Ok(support) = crate::support() {
            assert_eq!(support.to_string(), format!("Landlock ABI {}", support.version));
            assert!(support.version >= 1);
        }
    }
}

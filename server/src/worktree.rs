//! The work-tree check, on every platform: the state of a git work tree before and after a
//! pass. A snapshot is `git status --porcelain=v1 -z --untracked-files=all` (what is
//! modified, staged, deleted or new) plus a hash of each listed file's metadata (size, inode,
//! modification and change times), so a file that was already modified and is changed again
//! is seen too. Ignored files are not looked
//! at (the sandbox is the guarantee; this is defence in depth). A root that is not in a git
//! work tree is skipped.
//!
//! Its own git never writes: `--no-optional-locks` (no index refresh) and
//! `core.fsmonitor=false` (a repository's config cannot make `git status` run a command).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one git call may take before the check is skipped.
const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// One work tree's state: by path (relative to its top), the status code and a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    top: PathBuf,
    entries: BTreeMap<String, (String, u64)>,
}

/// The snapshot of the work tree `root` is in, or `None` when it is not in one (or git fails).
pub async fn take(root: &Path) -> Option<Snapshot> {
    let top = git(root, &["rev-parse", "--show-toplevel"]).await?;
    let top = PathBuf::from(String::from_utf8_lossy(&top).trim_end_matches('\n'));
    let status = git(
        &top,
        &[
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignore-submodules=none",
        ],
    )
    .await?;
    let mut entries = BTreeMap::new();
    for (code, path) in parse_status(&status) {
        let hash = fingerprint(&top.join(&path));
        entries.insert(path, (code, hash));
    }
    Some(Snapshot { top, entries })
}

/// Absolute paths whose status or content differ between the snapshots, sorted.
pub fn changes(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut changed: Vec<String> = before
        .entries
        .keys()
        .chain(after.entries.keys())
        .filter(|p| before.entries.get(*p) != after.entries.get(*p))
        .map(|p| after.top.join(p).display().to_string())
        .collect();
    changed.sort();
    changed.dedup();
    changed
}

async fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("--no-optional-locks")
        .args(["-c", "core.fsmonitor=false", "-c", "core.quotePath=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(GIT_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) if out.status.success() => Some(out.stdout),
        Ok(Ok(_)) => {
            tracing::debug!("{}: not a git work tree; the work-tree check is skipped", dir.display());
            None
        }
        Ok(Err(e)) => {
            tracing::debug!("git cannot run ({e}); the work-tree check is skipped");
            None
        }
        Err(_) => {
            tracing::warn!(
                "{}: git status took too long; the work-tree check is skipped",
                dir.display()
            );
            None
        }
    }
}

/// `XY PATH\0` entries; a rename or copy is followed by its source path, which is listed too.
fn parse_status(out: &[u8]) -> Vec<(String, String)> {
    let mut fields = out.split(|&b| b == 0).filter(|f| !f.is_empty());
    let mut entries = Vec::new();
    while let Some(f) = fields.next() {
        if f.len() < 4 {
            continue;
        }
        let code = String::from_utf8_lossy(&f[..2]).into_owned();
        entries.push((code.clone(), String::from_utf8_lossy(&f[3..]).into_owned()));
        if code.contains('R') || code.contains('C') {
            if let Some(source) = fields.next() {
                entries.push((format!("{code}<"), String::from_utf8_lossy(source).into_owned()));
            }
        }
    }
    entries
}

/// A fingerprint of what is at `path`: its type, size, inode, mode, and modification and
/// change times (every write moves the change time, and no program can set it back), or a
/// symlink's target. Cheap where a work tree lists many untracked files.
fn fingerprint(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut h = DefaultHasher::new();
    match std::fs::symlink_metadata(path) {
        Err(_) => h.write_u8(0),
        Ok(m) => {
            h.write_u8(1);
            for v in [
                m.mode() as i64,
                m.ino() as i64,
                m.len() as i64,
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
            ] {
                h.write_i64(v);
            }
            if m.file_type().is_symlink() {
                if let Ok(target) = std::fs::read_link(path) {
                    h.write(target.as_os_str().as_encoded_bytes());
                }
            }
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) {
        let ok = std::process::Command::new("sh")
            .args(["-c", script])
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap()
            .success();
        assert!(ok, "{script}");
    }

    #[test]
    fn status_entries_and_renames() {
        let out = b" M src/a.rs\0?? new file.txt\0R  b.rs\0old b.rs\0";
        assert_eq!(
            parse_status(out),
            [
                (" M".into(), "src/a.rs".into()),
                ("??".into(), "new file.txt".into()),
                ("R ".into(), "b.rs".into()),
                ("R <".into(), "old b.rs".into()),
            ]
        );
    }

    #[tokio::test]
    async fn sees_new_changed_and_deleted_files_and_changes_to_dirty_ones() {
        let t = tempfile::tempdir().unwrap();
        let repo = t.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        sh(
            &repo,
            "git init -q && echo a > a.txt && echo b > b.txt && echo c > c.txt && git add -A && \
             git -c user.name=t -c user.email=t@t commit -qm init && echo dirty > c.txt && mkdir sub",
        );
        let before = take(&repo.join("sub")).await.expect("a work tree");
        assert!(
            changes(&before, &take(&repo).await.unwrap()).is_empty(),
            "nothing happened"
        );
        sh(
            &repo,
            "echo new > n.txt && echo changed > a.txt && rm b.txt && echo dirtier > c.txt",
        );
        let after = take(&repo).await.unwrap();
        let top = repo.canonicalize().unwrap();
        let want: Vec<String> = ["a.txt", "b.txt", "c.txt", "n.txt"]
            .iter()
            .map(|f| top.join(f).display().to_string())
            .collect();
        assert_eq!(changes(&before, &after), want);
    }

    #[tokio::test]
    async fn a_directory_outside_git_is_skipped() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(".git"), "not a repository").unwrap();
        assert_eq!(take(t.path()).await, None);
    }
}

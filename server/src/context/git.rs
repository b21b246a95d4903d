//! Where a ticket's branch is: checked out in a worktree of the root's repository (the plan
//! runs there), present but checked out nowhere (the plan runs in the root and the prompt
//! names the branch), or missing (a clear error before any planner runs).
//!
//! Read only: planwire runs `git worktree list --porcelain` and `git rev-parse`, and never
//! checks out, creates or changes anything in git. A root below its repository's top (a
//! package of a monorepo) plans in the same subdirectory of the branch's worktree. A branch name that git would not
//! accept (or that could be read as a flag) is refused before git sees it.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one git call may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BranchPlace {
    /// Checked out in this worktree.
    Worktree(PathBuf),
    /// The branch exists and is checked out nowhere.
    NotCheckedOut,
}

/// Where `branch` of `root`'s repository is; `Err` says why it cannot be planned on.
pub async fn locate_branch(root: &Path, branch: &str) -> Result<BranchPlace, String> {
    if !name_ok(branch) {
        return Err(format!("{branch:?} is not a valid branch name"));
    }
    let list = git(root, &["worktree", "list", "--porcelain"])
        .await
        .map_err(|e| format!("the branch {branch} cannot be looked up: {e}"))?;
    if let Some(top) = worktree_of(&list, branch) {
        return in_worktree(root, &top, branch).await.map(BranchPlace::Worktree);
    }
    let local = format!("refs/heads/{branch}");
    if git(root, &["rev-parse", "--verify", "--quiet", &local]).await.is_ok() {
        return Ok(BranchPlace::NotCheckedOut);
    }
    Err(format!(
        "the branch {branch} does not exist in the repository of {}",
        root.display()
    ))
}

/// The directory of `top` (a worktree) that corresponds to `root`: the same subdirectory of
/// the repository, canonical.
async fn in_worktree(root: &Path, top: &Path, branch: &str) -> Result<PathBuf, String> {
    let prefix = git(root, &["rev-parse", "--show-prefix"])
        .await
        .map_err(|e| format!("the branch {branch} cannot be looked up: {e}"))?;
    let dir = top.join(prefix.trim());
    std::fs::canonicalize(&dir).map_err(|e| {
        format!(
            "the branch {branch} is checked out in {}, but {} is not available there: {e}",
            top.display(),
            dir.display()
        )
    })
}

/// The worktree whose checked-out branch is `branch`, from `git worktree list --porcelain`.
fn worktree_of(porcelain: &str, branch: &str) -> Option<PathBuf> {
    let want = format!("refs/heads/{branch}");
    let mut path: Option<&str> = None;
    for line in porcelain.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            path = Some(p);
        } else if line.strip_prefix("branch ") == Some(want.as_str()) {
            return path.map(PathBuf::from);
        } else if line.is_empty() {
            path = None;
        }
    }
    None
}

/// A name git accepts for a branch, that cannot be read as a flag (after git's
/// `check-ref-format` rules, in short).
fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(['-', '/', '.'])
        && !name.ends_with(['/', '.'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && !name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
}

/// Runs `git -C root ARGS…`; its stdout, or its stderr's last line as the error.
async fn git(root: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C")
        .arg(root)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(GIT_TIMEOUT, cmd.output())
        .await
        .map_err(|_| "git did not answer in time".to_owned())?
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("git failed")
            .trim()
            .to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, script: &str) {
        let ok = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .status()
            .unwrap()
            .success();
        assert!(ok, "{script}");
    }

    #[tokio::test]
    async fn finds_a_worktree_a_branch_checked_out_nowhere_and_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        sh(
            &root,
            "git init -q -b main . && echo a > a && git add a && git commit -qm a \
             && git branch idle && git worktree add -q ../wt-feature -b feature",
        );
        let wt = dir.path().join("wt-feature").canonicalize().unwrap();
        let got = locate_branch(&root, "feature").await.unwrap();
        assert_eq!(got, BranchPlace::Worktree(wt));
        assert_eq!(
            locate_branch(&root, "main").await.unwrap(),
            BranchPlace::Worktree(root.canonicalize().unwrap())
        );
        assert_eq!(locate_branch(&root, "idle").await.unwrap(), BranchPlace::NotCheckedOut);
        let missing = locate_branch(&root, "nope").await.unwrap_err();
        assert!(
            missing.contains("nope") && missing.contains("does not exist"),
            "{missing}"
        );
        let flag = locate_branch(&root, "--output=/tmp/x").await.unwrap_err();
        assert!(flag.contains("not a valid branch name"), "{flag}");
    }

    #[tokio::test]
    async fn a_root_below_the_top_plans_in_the_same_subdirectory_of_the_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("pkg/app")).unwrap();
        sh(
            &repo,
            "git init -q -b main . && echo a > pkg/app/a && git add -A && git commit -qm a \
             && git branch only-top && git worktree add -q ../wt -b feature",
        );
        let root = repo.join("pkg/app");
        let want = dir.path().join("wt/pkg/app").canonicalize().unwrap();
        assert_eq!(
            locate_branch(&root, "feature").await.unwrap(),
            BranchPlace::Worktree(want)
        );
        // A worktree without the root's directory is a clear error.
        sh(&repo, "git worktree add -q ../wt2 only-top && rm -r ../wt2/pkg");
        let e = locate_branch(&root, "only-top").await.unwrap_err();
        assert!(e.contains("only-top") && e.contains("not available there"), "{e}");
    }

    #[test]
    fn branch_names() {
        for ok in ["main", "feature/greet", "v1.2", "user@host"] {
            assert!(name_ok(ok), "{ok}");
        }
        for bad in ["", "-x", "a..b", "a b", "a~1", "x.lock", "a/", "@{u}", ".hidden"] {
            assert!(!name_ok(bad), "{bad}");
        }
    }
}

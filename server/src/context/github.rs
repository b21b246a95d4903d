//! GitHub references in a ticket: an issue or pull request URL in its description is read
//! with the user's own `gh` CLI before planning (planwire keeps no token), and reaches the
//! planner as a clearly marked, size-capped external reference.
//!
//! - Only `https://github.com/OWNER/REPO/issues/N` and `…/pull/N` are resolved, at most
//!   [`MAX_REFERENCES`] per ticket, each with [`GH_TIMEOUT`].
//! - `gh issue view URL --json title,body,comments,labels` or `gh pr view URL --json
//!   title,body,comments,files`, argv only (the URL cannot be read as a flag: it starts with
//!   `https://`), in its own process group like any child.
//! - Without `gh` on `PATH` the URL stays text (`planwire doctor` says what gh would do).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::supervisor::{self, OutputLine, SpawnSpec};

/// References resolved per ticket at most.
pub const MAX_REFERENCES: usize = 3;
/// How long one `gh` call may take.
pub const GH_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest part of one reference that reaches the prompt, in bytes.
const MAX_REFERENCE_BYTES: usize = 24 * 1024;
/// The longest comment kept whole, in bytes.
const MAX_COMMENT_BYTES: usize = 4 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Issue,
    Pull,
}

/// One GitHub URL found in a ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The canonical URL (`https://github.com/O/R/issues/N`).
    pub url: String,
    pub kind: Kind,
}

/// The GitHub issue and pull request URLs in `text`, in order, without repeats.
pub fn find(text: &str) -> Vec<Reference> {
    let mut out: Vec<Reference> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("https://github.com/") {
        let tail = &rest[at + "https://github.com/".len()..];
        rest = tail;
        if let Some(r) = parse(tail) {
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    out
}

/// `OWNER/REPO/(issues|pull)/N` at the start of `tail`.
fn parse(tail: &str) -> Option<Reference> {
    let name_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    let mut parts = tail.splitn(4, '/');
    let (owner, repo, kind) = (parts.next()?, parts.next()?, parts.next()?);
    let number: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    let kind = match kind {
        "issues" => Kind::Issue,
        "pull" => Kind::Pull,
        _ => return None,
    };
    if !name_ok(owner) || !name_ok(repo) || number.is_empty() || repo.starts_with('.') {
        return None;
    }
    let path = match kind {
        Kind::Issue => "issues",
        Kind::Pull => "pull",
    };
    Some(Reference {
        url: format!("https://github.com/{owner}/{repo}/{path}/{number}"),
        kind,
    })
}

/// The `gh` binary on `PATH`, if there is one.
pub fn gh() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("gh"))
        .find(|p| crate::util::is_executable(p))
}

/// gh's argv (without the program) for a reference.
pub fn argv(r: &Reference) -> Vec<String> {
    let (noun, fields) = match r.kind {
        Kind::Issue => ("issue", "title,body,comments,labels"),
        Kind::Pull => ("pr", "title,body,comments,files"),
    };
    [noun, "view", &r.url, "--json", fields]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Reads one reference with gh, in `cwd`. `Err` is gh's reason, in its own words.
pub async fn resolve(gh: &Path, cwd: &Path, r: &Reference) -> Result<Value, String> {
    let mut child = supervisor::spawn(SpawnSpec {
        program: gh.to_owned(),
        args: argv(r),
        cwd: cwd.to_owned(),
        env: vec![
            ("GH_PROMPT_DISABLED".into(), "1".into()),
            ("NO_COLOR".into(), "1".into()),
        ],
        stdin_pipe: false,
        // gh is the user's own tool with the user's own login, not a planner.
        sandbox: None,
    })
    .await
    .map_err(|e| format!("cannot run {}: {e}", gh.display()))?;
    let read = async {
        let mut out = String::new();
        while let Some(line) = child.output.recv().await {
            match line {
                OutputLine::Line(l) => {
                    out.push_str(&l);
                    out.push('\n');
                }
                OutputLine::Truncated { head, .. } => out.push_str(&head),
            }
        }
        let status = child.wait().await.ok();
        (out, status)
    };
    let (out, status) = match tokio::time::timeout(GH_TIMEOUT, read).await {
        Ok(done) => done,
        Err(_) => {
            child.stop(Duration::from_secs(1)).await;
            return Err(format!("gh did not answer within {} s", GH_TIMEOUT.as_secs()));
        }
    };
    child.reap_group().await;
    if !status.is_some_and(|s| s.success()) {
        let tail = child.stderr_tail().await;
        let reason = tail.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("gh failed");
        return Err(reason.trim().to_owned());
    }
    serde_json::from_str(&out).map_err(|e| format!("gh printed something that is not JSON: {e}"))
}

/// A resolved reference as the prompt shows it: title, labels or files, body and comments,
/// cut to its share of the prompt.
pub fn block(r: &Reference, v: &Value) -> String {
    let s = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").trim().to_owned();
    let kind = match r.kind {
        Kind::Issue => "issue",
        Kind::Pull => "pull request",
    };
    let mut text = format!("Title: {}\n", s("title"));
    let names = |key: &str, field: &str| -> Vec<String> {
        v.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.get(field).and_then(Value::as_str).map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let labels = names("labels", "name");
    if !labels.is_empty() {
        text.push_str(&format!("Labels: {}\n", labels.join(", ")));
    }
    let files = names("files", "path");
    if !files.is_empty() {
        text.push_str(&format!("Files changed: {}\n", files.join(", ")));
    }
    text.push_str(&format!("\n{}\n", s("body")));
    let comments = v.get("comments").and_then(Value::as_array).cloned().unwrap_or_default();
    if !comments.is_empty() {
        text.push_str("\nComments:\n");
        for c in &comments {
            let author = c.pointer("/author/login").and_then(Value::as_str).unwrap_or("someone");
            let body = c.get("body").and_then(Value::as_str).unwrap_or("").trim();
            text.push_str(&format!("- {author}: {}\n", cut(body, MAX_COMMENT_BYTES)));
        }
    }
    let text = cut(&text, MAX_REFERENCE_BYTES);
    format!(
        "<planwire-reference source=\"github\" kind=\"{kind}\" url=\"{}\">\n{}\n</planwire-reference>",
        r.url,
        text.trim_end()
    )
}

/// At most `max` bytes of `text`, cut at a character boundary, with a note when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut: {} bytes in all]", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_issue_and_pull_urls_once_each_in_order() {
        let text = "See https://github.com/acme/web/issues/12, and https://github.com/acme/web/pull/7#discussion. \
                    Again https://github.com/acme/web/issues/12 and https://github.com/acme/web/blob/main/x.rs \
                    and https://github.com/acme/web/issues/ and https://github.com/-x/../issues/3";
        let found = find(text);
        assert_eq!(
            found,
            vec![
                Reference {
                    url: "https://github.com/acme/web/issues/12".into(),
                    kind: Kind::Issue
                },
                Reference {
                    url: "https://github.com/acme/web/pull/7".into(),
                    kind: Kind::Pull
                },
            ]
        );
        assert_eq!(
            argv(&found[1])[..3],
            ["pr", "view", "https://github.com/acme/web/pull/7"]
        );
    }

    #[test]
    fn a_block_carries_title_labels_body_and_comments_and_is_capped() {
        let r = Reference {
            url: "https://github.com/acme/web/issues/12".into(),
            kind: Kind::Issue,
        };
        let v = json!({"title": "Greeting is wrong", "body": "It says hi.", "labels": [{"name": "bug"}],
            "comments": [{"author": {"login": "ann"}, "body": "Use hello."}]});
        let b = block(&r, &v);
        assert!(b.starts_with(
            "<planwire-reference source=\"github\" kind=\"issue\" url=\"https://github.com/acme/web/issues/12\">"
        ));
        for part in [
            "Title: Greeting is wrong",
            "Labels: bug",
            "It says hi.",
            "- ann: Use hello.",
        ] {
            assert!(b.contains(part), "{part} in {b}");
        }
        let huge = json!({"title": "t", "body": "x".repeat(100_000)});
        assert!(block(&r, &huge).len() < MAX_REFERENCE_BYTES + 500);
    }
}

//! Session authority: a run resumes the ticket's provider session only when the run that
//! made it used the same tool, a model of the same provider, the same major version of the
//! CLI, and the same directory. Otherwise the run starts fresh and records why
//! (`fresh_reason`): a session of another provider or CLI generation may not load, or load
//! wrong, and one made in another directory (the ticket's branch moved to a worktree)
//! explored other files.
//!
//! A model names its provider before a `/` (OpenCode's `anthropic/…`, `openai/…`); providers
//! are compared when both models name one. Versions are compared by major, when both are
//! known (the run's recorded `--version` line and the one detected now).

use planwire_protocol::Ticket;

use super::HandlerResult;
use crate::context::Workdir;
use crate::planners::{detect, Tool};
use crate::runner::{cached_version, store_error};
use crate::session::Session;
use crate::store::runs::{self, SessionOrigin};
use crate::store::tickets;

/// Whether a new run may resume the ticket's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// Resume this session.
    Session(String),
    /// There is a session, but the run starts fresh, for this reason.
    Fresh(String),
    /// The ticket has no session.
    NoSession,
}

/// What the new run would be.
pub struct NewRun<'a> {
    pub tool: Tool,
    pub model: Option<&'a str>,
    /// The CLI's `--version` line, as detected now.
    pub cli_version: Option<&'a str>,
    pub cwd: &'a str,
}

/// Whether a run of `tool` with `model` in `workdir` may resume the ticket's session.
pub async fn check(
    s: &Session,
    ticket: &Ticket,
    tool: Tool,
    model: Option<&str>,
    workdir: &Workdir,
) -> HandlerResult<Resume> {
    let id = ticket.id;
    let stored = s
        .store
        .read(move |c| {
            let Some((session_tool, session)) = tickets::session(c, id)? else {
                return Ok(None);
            };
            let origin = runs::session_origin(c, id, &session)?;
            Ok(Some((session_tool, session, origin)))
        })
        .await
        .map_err(store_error)?;
    let Some((session_tool, session, origin)) = stored else {
        return Ok(Resume::NoSession);
    };
    let version = cached_version(s, tool);
    let new = NewRun {
        tool,
        model,
        cli_version: version.as_deref(),
        cwd: &workdir.dir,
    };
    Ok(match changed(&session_tool, origin.as_ref(), &ticket.root, &new) {
        Some(reason) => Resume::Fresh(reason),
        None => Resume::Session(session),
    })
}

/// What differs between the session's origin and the new run, in words; `None` when the
/// session may be resumed. A run recorded before planwire kept its directory planned in
/// `root`.
pub fn changed(session_tool: &str, origin: Option<&SessionOrigin>, root: &str, new: &NewRun) -> Option<String> {
    let tool = new.tool.name();
    if session_tool != tool {
        return Some(format!("the ticket's planner changed from {session_tool} to {tool}"));
    }
    let origin = origin?;
    if let (Some(old), Some(now)) = (origin.model.as_deref().and_then(provider), new.model.and_then(provider)) {
        if old != now {
            return Some(format!("the model provider changed from {old} to {now}"));
        }
    }
    if let (Some(old), Some(now)) = (
        origin.cli_version.as_deref().and_then(detect::major),
        new.cli_version.and_then(detect::major),
    ) {
        if old != now {
            return Some(format!("{tool}'s major version changed from {old} to {now}"));
        }
    }
    let old_dir = origin.cwd.as_deref().unwrap_or(root);
    if old_dir != new.cwd {
        return Some(format!(
            "the planning directory changed from {old_dir} to {} (the ticket's branch)",
            new.cwd
        ));
    }
    None
}

/// The provider a model names before its `/` (`openai` of `openai/gpt-5`).
fn provider(model: &str) -> Option<&str> {
    model.split_once('/').map(|(p, _)| p.trim()).filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(model: Option<&str>, version: Option<&str>, cwd: Option<&str>) -> SessionOrigin {
        SessionOrigin {
            model: model.map(Into::into),
            cli_version: version.map(Into::into),
            cwd: cwd.map(Into::into),
        }
    }

    fn new<'a>(model: Option<&'a str>, version: Option<&'a str>, cwd: &'a str) -> NewRun<'a> {
        NewRun {
            tool: Tool::OpenCode,
            model,
            cli_version: version,
            cwd,
        }
    }

    #[test]
    fn the_same_tool_provider_major_and_directory_resume() {
        let o = origin(Some("anthropic/claude-sonnet-4"), Some("1.18.33"), Some("/p"));
        let same = new(Some("anthropic/claude-opus-4"), Some("1.20.0"), "/p");
        assert_eq!(changed("opencode", Some(&o), "/p", &same), None);
        // A model without a provider, or an unknown version, cannot tell a change.
        let o = origin(Some("sonnet"), None, None);
        assert_eq!(
            changed(
                "opencode",
                Some(&o),
                "/p",
                &new(Some("openai/gpt-5"), Some("2.0"), "/p")
            ),
            None
        );
        assert_eq!(changed("opencode", None, "/p", &new(None, None, "/elsewhere")), None);
    }

    #[test]
    fn each_change_is_named() {
        let o = origin(Some("anthropic/claude-sonnet-4"), Some("1.18.33"), Some("/p"));
        let cases = [
            (
                "claude",
                new(Some("anthropic/x"), Some("1.18.33"), "/p"),
                "the ticket's planner changed from claude to opencode",
            ),
            (
                "opencode",
                new(Some("openai/gpt-5"), Some("1.18.33"), "/p"),
                "the model provider changed from anthropic to openai",
            ),
            (
                "opencode",
                new(Some("anthropic/x"), Some("opencode 2.0.1"), "/p"),
                "opencode's major version changed from 1 to 2",
            ),
            (
                "opencode",
                new(Some("anthropic/x"), Some("1.18.33"), "/p-wt"),
                "the planning directory changed from /p to /p-wt (the ticket's branch)",
            ),
        ];
        for (tool, run, want) in cases {
            assert_eq!(changed(tool, Some(&o), "/p", &run).as_deref(), Some(want));
        }
        // A run recorded before runs kept their directory planned in the root.
        let old = origin(None, None, None);
        assert_eq!(changed("opencode", Some(&old), "/p", &new(None, None, "/p")), None);
        assert!(changed("opencode", Some(&old), "/p", &new(None, None, "/wt")).is_some());
    }
}

//! `planwire/createTicket`: a draft ticket in an existing directory. A `branch` must exist
//! in the root's git repository (-32013 otherwise); [`locate`] also tells `planwire/plan`
//! and `planwire/handoff` where the ticket's branch is checked out.

use std::path::Path;
use std::sync::Arc;

use planwire_protocol::{CreateTicketParams, ErrorCode, Ticket};

use super::{invalid_params, HandlerResult};
use crate::context::Workdir;
use crate::planners::Tool;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::tickets::{self, NewTicket};
use crate::transport::ResponseError;

pub async fn handle(s: Arc<Session>, p: CreateTicketParams) -> HandlerResult<Ticket> {
    create(&s, p).await
}

/// Validates and stores a new ticket; shared with `planwire/plan`'s create-and-plan form.
pub async fn create(s: &Session, p: CreateTicketParams) -> HandlerResult<Ticket> {
    let root = check_root(&p.root)?;
    if p.title.trim().is_empty() {
        return Err(invalid_params(
            "invalid params for planwire/createTicket: field `title` must not be empty",
        ));
    }
    let tool = p.tool.clone().unwrap_or_else(|| s.config.default_tool.clone());
    check_tool(&tool)?;
    let branch = check_branch(p.branch.as_deref())?;
    locate(&root, branch.as_deref()).await?;
    let new = NewTicket {
        root,
        title: p.title.trim().to_owned(),
        description: p.description,
        tool,
        model: p.model.filter(|m| !m.is_empty()),
        variant: p.variant.filter(|v| !v.is_empty()),
    };
    s.store
        .write(move |c| {
            let id = tickets::create(c, &new)?;
            if branch.is_some() {
                tickets::set_branch(c, id, branch.as_deref())?;
            }
            tickets::get(c, id)
        })
        .await
        .map_err(store_error)
}

/// A root must be an absolute path of an existing directory; it is stored canonical.
pub fn check_root(root: &str) -> HandlerResult<String> {
    let path = Path::new(root);
    if !path.is_absolute() {
        return Err(invalid_params(format!(
            "field `root` must be an absolute path, got {root:?}"
        )));
    }
    match std::fs::canonicalize(path) {
        Ok(p) if p.is_dir() => Ok(p.display().to_string()),
        Ok(_) => Err(ResponseError::new(
            ErrorCode::ProjectUnavailable,
            format!("{root} is not a directory"),
        )),
        Err(e) => Err(ResponseError::new(
            ErrorCode::ProjectUnavailable,
            format!("{root} is not available: {e}"),
        )),
    }
}

pub fn check_tool(tool: &str) -> HandlerResult<Tool> {
    Tool::parse(tool).ok_or_else(|| {
        let known: Vec<_> = Tool::ALL.iter().map(|t| t.name()).collect();
        invalid_params(format!(
            "field `tool`: unknown planner {tool:?}; one of {}",
            known.join(", ")
        ))
    })
}

/// Where a ticket of `root` on `branch` is planned (the root, or the branch's worktree);
/// -32013 `projectUnavailable`, naming the branch, when it does not exist or cannot be looked
/// up. planwire only reads git.
pub async fn locate(root: &str, branch: Option<&str>) -> HandlerResult<Workdir> {
    crate::context::workdir(root, branch)
        .await
        .map_err(|m| ResponseError::new(ErrorCode::ProjectUnavailable, m))
}

/// A branch name as stored: trimmed, `None` when empty. It will name a git branch, so it may
/// not start with `-` or hold control characters.
pub fn check_branch(branch: Option<&str>) -> HandlerResult<Option<String>> {
    let Some(branch) = branch.map(str::trim).filter(|b| !b.is_empty()) else {
        return Ok(None);
    };
    if branch.starts_with('-') || branch.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(invalid_params(format!(
            "field `branch`: {branch:?} is not a branch name (no leading `-`, spaces or control characters)"
        )));
    }
    Ok(Some(branch.to_owned()))
}

//! `planwire/handoff`: the command that starts an implementation CLI in its normal
//! interactive mode in the ticket's root (or the worktree where the ticket's branch is
//! checked out), with the plan as its first prompt.
//!
//! The plan is written first to a private file (mode 0600, in a fresh directory of mode
//! 0700 under the temp directory) and the prompt names it, so the command line stays short
//! and no plan text is ever an argument. Any supported CLI may implement, not only the one
//! that planned. planwire never runs the command: the editor opens it in a terminal. The
//! ticket records when it was handed off and to which CLI. The file stays after the answer
//! (the CLI reads it once it starts); the system's temp cleaning removes it.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use planwire_protocol::{ErrorCode, HandoffParams, HandoffResult};

use super::create_ticket::{check_tool, locate};
use super::export_plan::{document, ticket_and_plan};
use super::{invalid_params, HandlerResult};
use crate::planners::{self, handoff, Tool};
use crate::runner::{notify_ticket, store_error};
use crate::session::Session;
use crate::store::tickets;
use crate::transport::ResponseError;

pub async fn handle(s: Arc<Session>, p: HandoffParams) -> HandlerResult<HandoffResult> {
    let (ticket, version) = ticket_and_plan(&s, p.ticket_id, p.version).await?;
    let tool = check_tool(p.tool.as_deref().unwrap_or(&ticket.tool))?;
    if tool == Tool::Script {
        return Err(invalid_params(
            "field `tool`: the script planner cannot implement a plan; hand off to claude, opencode or codex",
        ));
    }
    let program = planners::locate(tool, &s.config).ok_or_else(|| {
        let m = format!("{} was not found: {}", tool.name(), tool.install_hint());
        ResponseError::new(ErrorCode::PlannerUnavailable, m)
    })?;
    if !Path::new(&ticket.root).is_dir() {
        let m = format!("the project root {} is not an existing directory", ticket.root);
        return Err(ResponseError::new(ErrorCode::ProjectUnavailable, m));
    }
    // The implementer works where the branch is checked out, as the plan did.
    let workdir = locate(&ticket.root, ticket.branch.as_deref()).await?;
    // The ticket's model belongs to the ticket's CLI; another CLI gets its own default.
    let model = p
        .model
        .filter(|m| !m.is_empty())
        .or_else(|| (tool.name() == ticket.tool).then(|| ticket.model.clone()).flatten());
    let text = document(&ticket, &version);
    let name = format!("ticket-{}-plan-v{}.md", ticket.id, version.version);
    let (dir, plan_path) = tokio::task::spawn_blocking(move || private_file(&name, &text))
        .await
        .map_err(|e| ResponseError::new(ErrorCode::InternalError, e.to_string()))??;
    let prompt = handoff::prompt(&plan_path, ticket.id, version.version);
    let argv = handoff::argv(tool, &program, model.as_deref(), &dir, &prompt).expect("not the script planner");
    let (id, v, name) = (ticket.id, version.version, tool.name());
    s.store
        .write(move |c| tickets::record_handoff(c, id, name, v))
        .await
        .map_err(store_error)?;
    notify_ticket(&s, id).await;
    Ok(HandoffResult {
        argv,
        cwd: workdir.dir,
        plan_path: plan_path.display().to_string(),
        version: version.version,
    })
}

/// A new private directory (0700) holding one private file (0600) with `text`.
fn private_file(name: &str, text: &str) -> HandlerResult<(PathBuf, PathBuf)> {
    let failed = |e: std::io::Error| {
        ResponseError::new(
            ErrorCode::InternalError,
            format!("cannot write the plan for the hand-off: {e}"),
        )
    };
    let dir = tempfile::Builder::new()
        .prefix("planwire-handoff-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(failed)?;
    let path = dir.path().join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(failed)?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(failed)?;
    // Written whole: the directory outlives this request (the CLI reads the file later).
    Ok((dir.keep(), path))
}

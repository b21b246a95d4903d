//! The runner's side of the sandbox: what a pass needs before its process starts, and the
//! work-tree check once it has ended. Here the runner joins what every pass may write with
//! what the planner's adapter lists (`planners::writable`), so the sandbox ([`crate::sandbox`])
//! needs to know no planner; this file records its results on the run and in its transcript.

use std::path::Path;

use planwire_protocol::{EventBody, SandboxState};

use super::Run;
use crate::planners::writable::Env;
use crate::sandbox;
use crate::store::runs;

impl Run {
    /// Prepares the sandbox of a pass about to start in `root`. The run records its state
    /// once (or again when a later pass differs), and a run without the sandbox gets a
    /// `warning` event. `Err` is a message for a failed spawn.
    pub(super) async fn sandbox_pass(&mut self, root: &str) -> Result<sandbox::Pass, String> {
        let scratch = sandbox::Scratch::new()?;
        let mut writable = sandbox::common(scratch.path());
        writable.extend(self.tool.writable(&Env::from_process()));
        let pass = sandbox::prepare(self.s.config.sandbox, Path::new(root), scratch, &writable).await?;
        let state = pass.state;
        if self.sandbox_recorded != Some(state) {
            self.sandbox_recorded = Some(state);
            let run = self.run_id;
            if let Err(e) = self.s.store.write(move |c| runs::set_sandbox(c, run, state)).await {
                tracing::error!("run {run}: cannot record its sandbox state: {e}");
            }
            if let Some(message) = sandbox::warning(state, pass.detail.as_deref()) {
                self.push(None, EventBody::Warning { message }).await;
            }
        }
        Ok(pass)
    }

    /// After a pass: when it changed files in its work tree, the run records them as its
    /// read-only violation and an `error` event names them (the plan is still kept). The
    /// pass's scratch directory is deleted.
    pub(super) async fn check_readonly(&mut self, pass: sandbox::Pass) {
        let changed = pass.finish().await;
        if changed.is_empty() {
            return;
        }
        let (run, paths) = (self.run_id, changed.clone());
        if let Err(e) = self
            .s
            .store
            .write(move |c| runs::add_readonly_violation(c, run, &paths))
            .await
        {
            tracing::error!("run {run}: cannot record its read-only violation: {e}");
        }
        tracing::warn!(run, ?changed, "planning changed files in the work tree");
        let message = format!(
            "Planning changed files in the work tree, which it must never do: {}. The plan is \
             kept; review these changes before you build on it.",
            changed.join(", ")
        );
        self.note_error(message).await;
    }
}

/// Whether the sandbox holds a pass.
pub(super) fn enforced(pass: &sandbox::Pass) -> bool {
    pass.state == SandboxState::Enforced
}

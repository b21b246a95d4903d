//! The plan as a living document: editing a ticket, the versions its plans leave behind,
//! exporting one as a markdown file, and handing one off to an implementation CLI.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Plan, RunId, Ticket, TicketId};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTicketParams {
    pub ticket_id: TicketId,
    /// Non-empty after trimming. Left out (or null): unchanged.
    #[serde(default)]
    pub title: Option<String>,
    /// May be empty. Left out: unchanged.
    #[serde(default)]
    pub description: Option<String>,
    /// `claude`, `opencode`, `codex` or `script`. Left out: unchanged.
    #[serde(default)]
    pub tool: Option<String>,
    /// Left out: unchanged; an empty string clears it.
    #[serde(default)]
    pub model: Option<String>,
    /// Left out: unchanged; an empty string clears it.
    #[serde(default)]
    pub variant: Option<String>,
    /// The git branch the work is for. Left out: unchanged; an empty string clears it.
    #[serde(default)]
    pub branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTicketResult {
    pub ticket: Ticket,
}

/// One stored plan of a ticket. Every completed plan run adds one; none is ever overwritten.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanVersion {
    /// 1 for the ticket's first plan, then one more for each plan after it.
    pub version: u32,
    /// The run that produced it (a breakdown's run for a ticket it created); null only for a
    /// version carried over from before versions were kept, whose run is unknown.
    pub run_id: Option<RunId>,
    pub created_at: String,
    pub plan: Plan,
    /// The plan rendered as markdown, as the `plan` message shows it.
    pub markdown: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListPlansResult {
    /// Oldest first.
    pub plans: Vec<PlanVersion>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetPlanParams {
    pub ticket_id: TicketId,
    pub version: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportPlanParams {
    pub ticket_id: TicketId,
    /// The plan version to export (default: the latest).
    #[serde(default)]
    pub version: Option<u32>,
    /// Where to write: absolute, or relative to the ticket's root (default
    /// `.planwire/plans/<ticketId>-<slug of the title>.md`).
    #[serde(default)]
    pub path: Option<String>,
    /// Replace an existing file (else an existing file is a -32014 conflict).
    #[serde(default)]
    pub overwrite: bool,
    /// Write nothing: answer with the path and size an export would have.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportPlanResult {
    /// The absolute path written.
    pub path: String,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The plan version written.
    pub version: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffParams {
    pub ticket_id: TicketId,
    /// The CLI to implement with: `claude`, `opencode` or `codex` (default: the ticket's tool).
    #[serde(default)]
    pub tool: Option<String>,
    /// The plan version to hand off (default: the latest).
    #[serde(default)]
    pub version: Option<u32>,
    /// The model for that CLI (default: the ticket's model when the tool is the ticket's,
    /// else the CLI's own default).
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffResult {
    /// The command to run, program first, with no shell in between.
    pub argv: Vec<String>,
    /// The directory to run it in: the ticket's root.
    pub cwd: String,
    /// The private file (mode 0600, in a directory of mode 0700) that holds the plan.
    pub plan_path: String,
    /// The plan version handed off.
    pub version: u32,
}

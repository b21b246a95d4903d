//! Planning beyond one ticket: initiative breakdown and linked projects.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{AgentRunId, Run, RunId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BreakdownParams {
    /// Absolute path of an existing directory.
    pub root: String,
    /// The initiative, in the person's words.
    pub description: String,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub variant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BreakdownResult {
    pub run_id: RunId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetRunParams {
    pub run_id: RunId,
}

/// One agent of a run: a pass ("Outline", "Expansion"), a research run ("Linked research:
/// NAME") or a subagent the planner started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentRun {
    pub id: AgentRunId,
    pub run_id: RunId,
    pub parent_id: Option<AgentRunId>,
    pub label: String,
    /// `running`, `completed`, `failed`, `cancelled` or `interrupted`.
    pub status: String,
    pub started_at: String,
    pub ended_at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetRunResult {
    pub run: Run,
    pub agent_runs: Vec<AgentRun>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkProjectParams {
    /// The project that plans.
    pub root: String,
    /// The repository to research (an absolute path of an existing directory).
    pub linked_root: String,
    /// A short unique name within the project, e.g. `backend`.
    pub name: String,
    /// One line: what the linked repository is to this project.
    pub role: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnlinkProjectParams {
    pub root: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListLinksParams {
    pub root: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectLink {
    pub name: String,
    pub linked_root: String,
    pub role: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinksResult {
    pub links: Vec<ProjectLink>,
}

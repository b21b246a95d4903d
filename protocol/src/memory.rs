//! Project memory and prompt settings: durable facts about a project that shape later plans,
//! and the instruction blocks and output language added to every prompt.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::TicketId;

pub type MemoryEntryId = i64;
pub type MemorySuggestionId = i64;

/// A named instruction block (markdown) added to every planning prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    /// Non-empty; a project skill replaces a user default skill of the same name.
    pub name: String,
    /// Markdown.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetProjectSettingsParams {
    /// Absolute path of an existing directory.
    pub root: String,
    /// Put the project's memory into prompts and ask plans for memory suggestions. Left out:
    /// unchanged (a new project starts with true).
    #[serde(default)]
    pub memory_enabled: Option<bool>,
    /// The language plans are written in, for example `German` or `de-DE`. Left out: unchanged;
    /// an empty string clears it (the user default applies again).
    #[serde(default)]
    pub output_language: Option<String>,
    /// Replaces the project's skills. Left out: unchanged; `[]` clears them.
    #[serde(default)]
    pub skills: Option<Vec<Skill>>,
    /// Extra instructions added to every prompt. Left out: unchanged; an empty string clears them.
    #[serde(default)]
    pub extra_instructions: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectRef {
    /// Absolute path of an existing directory.
    pub root: String,
}

/// A project's own prompt settings (user defaults from `initializationOptions` are not merged in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProjectSettings {
    /// The canonical root.
    pub root: String,
    pub memory_enabled: bool,
    /// Null: `initializationOptions.outputLanguage`, else the client's `locale`, else none.
    pub output_language: Option<String>,
    pub skills: Vec<Skill>,
    pub extra_instructions: Option<String>,
}

/// A fact or convention about a project, put into its planning prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryEntry {
    pub id: MemoryEntryId,
    pub text: String,
    /// `user` (added with `planwire/memory/add`) or `suggestion` (an accepted suggestion).
    pub source: String,
    pub created_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemorySuggestionStatus {
    /// Waiting for the user to accept or reject it.
    Open,
    /// Accepted: it became a memory entry.
    Accepted,
    Rejected,
}

/// A memory entry a plan proposed (its `memorySuggestions`), until the user decides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemorySuggestion {
    pub id: MemorySuggestionId,
    pub text: String,
    /// The ticket whose plan proposed it.
    pub ticket_id: TicketId,
    pub status: MemorySuggestionStatus,
    pub created_at: String,
}

/// A memory suggestion as `getTicket` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TicketMemorySuggestion {
    pub id: MemorySuggestionId,
    pub text: String,
    pub status: MemorySuggestionStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryListResult {
    /// Newest first.
    pub entries: Vec<MemoryEntry>,
    /// Every suggestion of the project, in any status, newest first.
    pub suggestions: Vec<MemorySuggestion>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryAddParams {
    /// Absolute path of an existing directory.
    pub root: String,
    /// Non-empty, at most 1000 characters.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRemoveParams {
    pub entry_id: MemoryEntryId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRemoveResult {
    /// False when there was no such entry.
    pub removed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemorySuggestionRef {
    pub suggestion_id: MemorySuggestionId,
}

//! Wire types of the planwire protocol: JSON-RPC 2.0 over LSP base framing.
//!
//! Every custom method is a small uninhabited type implementing [`Request`] or
//! [`Notification`], naming its method string, params and result. A reader learns
//! the whole protocol from this file and `README.md`. Field names are camelCase on
//! the wire. `schema.json` beside this crate is generated from these types
//! (`cargo run -p planwire-protocol --bin planwire-schema`) and a test fails when it drifts.

use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

pub mod errors;
pub mod initiative;
pub mod living;
pub mod memory;
pub mod methods;
pub mod schema;
pub use errors::{ErrorCode, ErrorData, ResponseError};
pub use initiative::*;
pub use living::*;
pub use memory::*;
pub use methods::*;
pub use schema::schema;

/// The protocol version reported under `capabilities.experimental.planwire`.
pub const PROTOCOL_VERSION: u32 = 1;

/// A client → server request.
pub trait Request {
    const METHOD: &'static str;
    /// The method's doc comment, for the schema.
    const DOC: &'static str = "";
    type Params: Serialize + DeserializeOwned + JsonSchema;
    type Result: Serialize + DeserializeOwned + JsonSchema;
}

/// A server → client notification.
pub trait Notification {
    const METHOD: &'static str;
    /// The notification's doc comment, for the schema.
    const DOC: &'static str = "";
    type Params: Serialize + DeserializeOwned + JsonSchema;
}

pub type TicketId = i64;
pub type RunId = i64;
pub type QuestionId = i64;
pub type AgentRunId = i64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TicketStatus {
    /// Created and not planned yet (or back here after its first run was interrupted).
    Draft,
    /// A run was created; its planner has not started yet.
    Queued,
    /// The planner is running.
    Planning,
    /// The ticket holds an `open` or `stale` question (a live question may wait while its run
    /// stays `running`).
    NeedsInput,
    /// The last run produced a plan with no open questions (`plan` is set).
    Planned,
    /// The last run failed; its `failure` says why.
    Failed,
    /// The last run was stopped (`planwire/stop`, `shutdown` or end of input).
    Stopped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Created; the planner process is not started yet.
    Queued,
    /// The planner process runs (in its own process group).
    Running,
    /// The planner exited 0 with a plan.
    Completed,
    /// No plan, a non-zero exit, a planner error, a timeout or a spawn failure: see `failure.code`.
    Failed,
    /// Stopped by `planwire/stop`, `shutdown` or end of input.
    Cancelled,
    /// Its planwire process died while it was active; marked by the next one to open the database.
    Interrupted,
}

impl RunStatus {
    pub fn is_active(self) -> bool {
        matches!(self, RunStatus::Queued | RunStatus::Running)
    }
}

/// `as_str` / `parse` for the status enums: the wire spelling is also the database spelling.
macro_rules! wire_names {
    ($t:ident { $($v:ident = $s:literal),* $(,)? }) => {
        impl $t {
            pub const ALL: &'static [$t] = &[$($t::$v),*];
            pub fn as_str(self) -> &'static str {
                match self { $($t::$v => $s),* }
            }
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($s => Some($t::$v),)* _ => None }
            }
        }
    };
}
wire_names!(TicketStatus { Draft = "draft", Queued = "queued", Planning = "planning", NeedsInput = "needs_input", Planned = "planned", Failed = "failed", Stopped = "stopped" });
wire_names!(RunStatus { Queued = "queued", Running = "running", Completed = "completed", Failed = "failed", Cancelled = "cancelled", Interrupted = "interrupted" });
wire_names!(QuestionStatus { Open = "open", Answered = "answered", Dismissed = "dismissed", Stale = "stale" });
wire_names!(QuestionSource { Live = "live", Plan = "plan" });
wire_names!(MemorySuggestionStatus { Open = "open", Accepted = "accepted", Rejected = "rejected" });

/// The plan a run produced, as the planner returned it inside `<planwire-plan>`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub title: String,
    /// Markdown with the sections an implementer needs.
    pub description: String,
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
    #[serde(default)]
    pub open_questions: Vec<String>,
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// Short durable facts about the project the planner proposes for its memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_suggestions: Vec<String>,
}

/// A ticket: a piece of work in a repository, and the plan made for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ticket {
    pub id: TicketId,
    /// Absolute path of the repository the ticket plans work in.
    pub root: String,
    pub title: String,
    pub description: String,
    pub status: TicketStatus,
    /// Planner CLI: `claude`, `opencode`, `codex` or `script`.
    pub tool: String,
    pub model: Option<String>,
    pub variant: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
    /// Question records that are `open` or `stale`.
    #[serde(default)]
    pub open_questions: Vec<Question>,
    /// Tickets this one depends on (from a breakdown), `[]` when none.
    #[serde(default)]
    pub depends_on: Vec<TicketId>,
    /// The breakdown run that created this ticket, if one did.
    #[serde(default)]
    pub initiative_run_id: Option<RunId>,
    /// The git branch the work is for (stored as given; null when none).
    #[serde(default)]
    pub branch: Option<String>,
    /// The latest plan version (see `planwire/listPlans`); null while never planned.
    #[serde(default)]
    pub plan_version: Option<u32>,
    /// When the plan was last handed off to an implementation CLI (`planwire/handoff`).
    #[serde(default)]
    pub handed_off_at: Option<String>,
    /// The CLI of that hand-off.
    #[serde(default)]
    pub handed_off_tool: Option<String>,
}

/// Why a run failed (or was interrupted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// Machine-readable code: `no_plan`, `exit_code`, `planner_error`, `spawn_failed`,
    /// `reference_unavailable`,
    /// `hard_timeout`, `idle_timeout`, `question_timeout`, `session_not_found`, `interrupted`.
    pub code: String,
    pub message: String,
}

/// One planner process run for a ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: RunId,
    /// The ticket planned; null for a breakdown, which has no ticket of its own.
    pub ticket_id: Option<TicketId>,
    /// `plan` (one ticket) or `breakdown` (an initiative into tickets).
    pub kind: String,
    /// The project root the run planned in.
    pub root: String,
    /// The directory the run's planner ran in: the root, or the git worktree where the
    /// ticket's branch is checked out. Null for runs recorded before planwire kept it.
    #[serde(default)]
    pub cwd: Option<String>,
    /// A breakdown's initiative, in the person's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiative: Option<String>,
    pub status: RunStatus,
    pub tool: String,
    pub model: Option<String>,
    pub variant: Option<String>,
    pub created_at: String,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub failure: Option<Failure>,
    /// The provider session the run used or created.
    pub provider_session_id: Option<String>,
    /// Highest transcript seq so far.
    pub last_seq: u64,
    /// Whether the OS sandbox held the run's planner processes; null until its first process
    /// started (and for runs recorded before planwire had a sandbox).
    #[serde(default)]
    pub sandbox: Option<SandboxState>,
    /// Files the run changed although planning is read-only (found by comparing the work
    /// tree before and after each pass); null when it changed none.
    #[serde(default)]
    pub readonly_violation: Option<ReadonlyViolation>,
    /// How long the run took; null until it has ended (and for a run that never started).
    #[serde(default)]
    pub timing: Option<RunTiming>,
}

/// `initializationOptions.sandbox`: how planner processes are sandboxed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Sandbox when the OS can; without it, plan anyway, with a `warning` event on each run.
    #[default]
    Auto,
    /// Sandbox or refuse: without it, `planwire/plan` and `planwire/breakdown` fail with -32012.
    Required,
    /// Never sandbox (each run still gets its `warning` event and the work-tree check).
    Off,
}

/// Whether planner processes run in the OS sandbox (Landlock on Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SandboxState {
    /// The kernel enforces it: the planner and everything it starts may write only to its
    /// scratch directory, the CLI's own state directories and `/dev`.
    Enforced,
    /// This OS or kernel offers no sandbox (no Landlock, or not Linux yet).
    Unavailable,
    /// `initializationOptions.sandbox` is `off`.
    Off,
}

/// What a run changed in a work tree it was planning in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReadonlyViolation {
    /// Absolute paths of the files created, changed or deleted, sorted.
    pub paths: Vec<String>,
}

/// The timing of an ended run, in milliseconds from its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunTiming {
    /// Until the planner's first output line (null when it printed nothing).
    pub first_output_ms: Option<u64>,
    /// Until the first final answer (null when there was none).
    pub first_final_ms: Option<u64>,
    /// Until the run ended.
    pub total_ms: u64,
}

/// Token counts and cost, as the CLIs report them in `usage` events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_usd: f64,
}

/// One entry of a ticket's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: i64,
    /// `description`, `edit`, `response`, `plan`, `plan_candidate`, `question`, `answer`,
    /// `feedback`, `handoff`, `status` or `error`.
    pub kind: String,
    pub text: String,
    pub run_id: Option<RunId>,
    pub created_at: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuestionStatus {
    /// Waiting for an answer.
    Open,
    Answered,
    Dismissed,
    /// Its run ended (interrupted, stopped, timed out or exited) while it waited; it can still
    /// be answered, which resumes the session in a new run.
    Stale,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QuestionSource {
    /// Asked by the agent while it ran (Claude's AskUserQuestion).
    Live,
    /// Made from the plan's `openQuestions` when the run ended.
    Plan,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionOption {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionItem {
    pub header: String,
    pub question: String,
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    #[serde(default)]
    pub multi_select: bool,
    #[serde(default)]
    pub allow_other: bool,
}

/// A question for the user: one or more items, answered together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: QuestionId,
    pub ticket_id: TicketId,
    pub run_id: RunId,
    pub status: QuestionStatus,
    pub source: QuestionSource,
    pub items: Vec<QuestionItem>,
    /// What the person answered, one entry per item (absent until answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<Vec<Answer>>,
}

/// The answer to one question item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// Labels of the chosen options.
    #[serde(default)]
    pub selected: Vec<String>,
    /// Free text, where the item allows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other: Option<String>,
}

/// One normalized transcript event. `seq` starts at 1 per run and has no gaps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptEvent {
    pub seq: u64,
    /// RFC 3339 time the event was born.
    pub ts: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_run_id: Option<AgentRunId>,
    #[serde(flatten)]
    pub body: EventBody,
}

/// The kind of a live block (`planwire/delta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    Text,
    Reasoning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SubagentPhase {
    Start,
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    Running,
    Completed,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Auth,
    RateLimit,
    Overloaded,
    ContextOverflow,
    Network,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum EventBody {
    /// Assistant text. `final` is true for the run's final answer.
    Text {
        text: String,
        #[serde(rename = "final")]
        is_final: bool,
    },
    Reasoning {
        text: String,
    },
    ToolCall {
        call_id: String,
        name: String,
        /// A short summary of the tool's input (a path, a command, a pattern).
        input: String,
    },
    ToolResult {
        call_id: String,
        status: ToolStatus,
        /// A truncated summary of the tool's output.
        output: String,
    },
    Subagent {
        phase: SubagentPhase,
        label: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<String>,
    },
    Usage {
        input_tokens: u64,
        output_tokens: u64,
        cache_read_tokens: u64,
        cache_write_tokens: u64,
        cost_usd: f64,
    },
    Session {
        provider_session_id: String,
    },
    Error {
        error_kind: ErrorKind,
        message: String,
    },
    Question {
        question_id: QuestionId,
    },
    /// A line the adapter did not recognise, kept verbatim (possibly truncated).
    Raw {
        line: String,
    },
    /// Something the person should know that did not stop the run (planning without the OS
    /// sandbox, for example).
    Warning {
        message: String,
    },
}

impl EventBody {
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::Text { .. } => "text",
            EventBody::Reasoning { .. } => "reasoning",
            EventBody::ToolCall { .. } => "toolCall",
            EventBody::ToolResult { .. } => "toolResult",
            EventBody::Subagent { .. } => "subagent",
            EventBody::Usage { .. } => "usage",
            EventBody::Session { .. } => "session",
            EventBody::Error { .. } => "error",
            EventBody::Question { .. } => "question",
            EventBody::Raw { .. } => "raw",
            EventBody::Warning { .. } => "warning",
        }
    }
}

/// A planner CLI as found on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannerInfo {
    pub tool: String,
    pub found: bool,
    pub path: Option<String>,
    pub version: Option<String>,
    pub supported: bool,
    /// What to install or fix when the planner is not usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The `initialize` result. planwire announces no standard LSP capabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub server_info: ServerInfo,
    pub capabilities: InitializeCapabilities,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    /// Always `planwire`.
    pub name: String,
    /// The server's version (as `planwire --version` prints it).
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    pub experimental: ExperimentalCapabilities,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExperimentalCapabilities {
    pub planwire: ServerCapabilities,
}

/// `capabilities.experimental.planwire` in the `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    pub protocol_version: u32,
    pub planners: Vec<PlannerInfo>,
    /// Whether this session's runs are sandboxed (from `initializationOptions.sandbox` and
    /// what the OS offers); each run records its own in `run.sandbox`.
    pub sandbox: SandboxState,
}

/// `initializationOptions` the server understands. All are optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializationOptions {
    /// SQLite file; else `PLANWIRE_DB`, else `$XDG_DATA_HOME/planwire/planwire.db`.
    pub db_path: Option<String>,
    /// SIGTERM → SIGKILL grace period of a stop, in ms (default 3000).
    pub stop_grace_ms: Option<u64>,
    /// Hard limit of one run, in ms (default 30 min).
    pub hard_timeout_ms: Option<u64>,
    /// A run with no output this long fails, in ms (default 10 min).
    pub idle_timeout_ms: Option<u64>,
    /// A live question waits this long for an answer before the run is stopped, in ms
    /// (default 1 h; the question stays answerable and resumes the session).
    pub question_timeout_ms: Option<u64>,
    /// Planner used when a ticket names none (default `claude`).
    pub default_tool: Option<String>,
    /// How long a write waits for a database that another process has locked, in ms
    /// (default 30 000); past it, a run fails with `storage_busy`.
    pub busy_timeout_ms: Option<u64>,
    /// Per-planner settings, keyed by tool name.
    #[serde(default)]
    pub planners: std::collections::BTreeMap<String, PlannerOptions>,
    /// The language plans are written in, for projects that set none (else the `locale` of
    /// `initialize`; without either, no language is asked for).
    pub output_language: Option<String>,
    /// Skills added to every prompt; a project's skill of the same name replaces one of these.
    #[serde(default)]
    pub skills: Vec<Skill>,
    /// ACP agents to plan with, as tool `acp:<name>`; a name of a preset (`opencode`, `qwen`,
    /// `gemini`, `claude-acp`, `codex-acp`) overrides it.
    #[serde(default)]
    pub acp_agents: std::collections::BTreeMap<String, AcpAgentOptions>,
    /// Linked-research passes that run at the same time (default 3, at least 1).
    pub research_concurrency: Option<u32>,
    /// `"auto"` (the default): GitHub issue and pull request links in a description are read
    /// with `gh` before planning, when gh is on `PATH`; `"off"`: they stay text.
    pub references: Option<ReferencesMode>,
    /// The OS sandbox around planner processes: `auto` (default), `required` or `off`.
    pub sandbox: Option<SandboxMode>,
}

/// How to start an ACP agent that plans (`initializationOptions.acpAgents.<name>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcpAgentOptions {
    /// The program: an absolute path, or a name searched on `PATH`. Never run through a shell.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// The id of the agent's plan or read-only mode (else found by the heuristic: a mode id
    /// containing `plan`, a `mode` config option value containing `plan`, else read-only).
    #[serde(default)]
    pub mode: Option<String>,
    /// Plan even when the agent offers no plan or read-only mode (the sandbox still holds).
    #[serde(default)]
    pub allow_no_plan_mode: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReferencesMode {
    #[default]
    Auto,
    Off,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannerOptions {
    /// Path of the CLI binary (instead of searching `PATH`).
    pub path: Option<String>,
}

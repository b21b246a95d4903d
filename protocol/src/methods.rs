//! Every custom method and notification, in the order a client meets them.

use crate::*;

macro_rules! request {
    ($(#[doc = $doc:literal])* $name:ident, $method:literal, $params:ty, $result:ty) => {
        $(#[doc = $doc])*
        pub enum $name {}
        impl Request for $name {
            const METHOD: &'static str = $method;
            const DOC: &'static str = concat!($($doc, "\n"),*);
            type Params = $params;
            type Result = $result;
        }
    };
}

macro_rules! notification {
    ($(#[doc = $doc:literal])* $name:ident, $method:literal, $params:ty) => {
        $(#[doc = $doc])*
        pub enum $name {}
        impl Notification for $name {
            const METHOD: &'static str = $method;
            const DOC: &'static str = concat!($($doc, "\n"),*);
            type Params = $params;
        }
    };
}

request!(
    /// Creates a draft ticket.
    CreateTicket, "planwire/createTicket", CreateTicketParams, Ticket
);
request!(
    /// Edits a ticket's title, description, planner or branch (refused while it is being planned).
    UpdateTicket, "planwire/updateTicket", UpdateTicketParams, UpdateTicketResult
);
request!(
    /// Lists every ticket, or those of one root, oldest first.
    ListTickets, "planwire/listTickets", ListTicketsParams, ListTicketsResult
);
request!(
    /// The ticket with its conversation, questions and runs (newest first).
    GetTicket, "planwire/getTicket", TicketRef, GetTicketResult
);
request!(
    /// Starts planning a ticket (creating it first when given root, title and description).
    StartPlan, "planwire/plan", PlanParams, PlanResult
);
request!(
    /// Every plan version of a ticket, oldest first.
    ListPlans, "planwire/listPlans", TicketRef, ListPlansResult
);
request!(
    /// One plan version of a ticket.
    GetPlan, "planwire/getPlan", GetPlanParams, PlanVersion
);
request!(
    /// Writes a plan version into the repository as a markdown file.
    ExportPlan, "planwire/exportPlan", ExportPlanParams, ExportPlanResult
);
request!(
    /// The command that starts an implementation CLI in the ticket's root with the plan as its first prompt.
    Handoff, "planwire/handoff", HandoffParams, HandoffResult
);
request!(
    /// Stops the ticket's active run (or the run named, e.g. a breakdown); answers once its process group is gone.
    Stop, "planwire/stop", StopParams, StopResult
);
request!(
    /// Active runs, the planners found, and facts about the store.
    Status, "planwire/status", StatusParams, StatusResult
);
request!(
    /// Answers (or dismisses) a question; planning resumes.
    AnswerQuestion, "planwire/answer", AnswerParams, AnswerResult
);
request!(
    /// A page of a run's transcript after a seq, for catching up.
    GetTranscript, "planwire/getTranscript", GetTranscriptParams, GetTranscriptResult
);
request!(
    /// Deletes a ticket with its runs, transcript, messages and questions (refused while it is being planned).
    DeleteTicket, "planwire/deleteTicket", TicketRef, DeleteTicketResult
);
request!(
    /// Breaks an initiative into dependent tickets: one run, two passes (outline, expansion).
    Breakdown, "planwire/breakdown", BreakdownParams, BreakdownResult
);
request!(
    /// A run with its agent runs (passes, research and subagents); where a breakdown's status lives.
    GetRun, "planwire/getRun", GetRunParams, GetRunResult
);
request!(
    /// Links another repository to a project, for research before planning.
    LinkProject, "planwire/linkProject", LinkProjectParams, LinksResult
);
request!(
    /// Removes a linked repository from a project.
    UnlinkProject, "planwire/unlinkProject", UnlinkProjectParams, LinksResult
);
request!(
    /// The repositories linked to a project.
    ListLinks, "planwire/listLinks", ListLinksParams, LinksResult
);

request!(
    /// Sets a project's prompt settings (fields left out keep their value); returns them all.
    SetProjectSettings, "planwire/setProjectSettings", SetProjectSettingsParams, ProjectSettings
);
request!(
    /// A project's prompt settings (the defaults when it never set any).
    GetProjectSettings, "planwire/getProjectSettings", ProjectRef, ProjectSettings
);
request!(
    /// A project's memory entries and memory suggestions, newest first.
    MemoryList, "planwire/memory/list", ProjectRef, MemoryListResult
);
request!(
    /// Adds an entry to a project's memory.
    MemoryAdd, "planwire/memory/add", MemoryAddParams, MemoryEntry
);
request!(
    /// Removes an entry from a project's memory.
    MemoryRemove, "planwire/memory/remove", MemoryRemoveParams, MemoryRemoveResult
);
request!(
    /// Accepts an open memory suggestion: it becomes a memory entry.
    MemoryAccept, "planwire/memory/accept", MemorySuggestionRef, MemoryEntry
);
request!(
    /// Rejects an open memory suggestion.
    MemoryReject, "planwire/memory/reject", MemorySuggestionRef, MemorySuggestion
);

notification!(
    /// Newly committed transcript events of one run, in seq order.
    TranscriptNotification, "planwire/transcript", TranscriptParams
);
notification!(
    /// A live piece of text or reasoning that extends the open block of its kind; never stored
    /// (the `text` / `reasoning` event that closes the block is the record).
    DeltaNotification, "planwire/delta", DeltaParams
);
notification!(
    /// A ticket changed (status, plan or open questions); carries the whole ticket.
    TicketChanged, "planwire/ticketChanged", TicketChangedParams
);
notification!(
    /// A run started or ended; carries the whole run.
    RunChanged, "planwire/runChanged", RunChangedParams
);
notification!(
    /// A question for the user was recorded.
    QuestionNotification, "planwire/question", QuestionParams
);
notification!(
    /// A ticket was deleted (tickets that depended on it get a `ticketChanged` too).
    TicketDeleted, "planwire/ticketDeleted", TicketRef
);

/// Visits every method's type, for tables built from all of them (the JSON Schema).
pub trait MethodVisitor {
    fn request<R: Request>(&mut self);
    fn notification<N: Notification>(&mut self);
}

/// Calls `v` with every request, then every notification, in the order above.
pub fn visit_methods(v: &mut impl MethodVisitor) {
    v.request::<CreateTicket>();
    v.request::<UpdateTicket>();
    v.request::<ListTickets>();
    v.request::<GetTicket>();
    v.request::<StartPlan>();
    v.request::<ListPlans>();
    v.request::<GetPlan>();
    v.request::<ExportPlan>();
    v.request::<Handoff>();
    v.request::<Stop>();
    v.request::<Status>();
    v.request::<AnswerQuestion>();
    v.request::<GetTranscript>();
    v.request::<DeleteTicket>();
    v.request::<Breakdown>();
    v.request::<GetRun>();
    v.request::<LinkProject>();
    v.request::<UnlinkProject>();
    v.request::<ListLinks>();
    v.request::<SetProjectSettings>();
    v.request::<GetProjectSettings>();
    v.request::<MemoryList>();
    v.request::<MemoryAdd>();
    v.request::<MemoryRemove>();
    v.request::<MemoryAccept>();
    v.request::<MemoryReject>();
    v.notification::<TranscriptNotification>();
    v.notification::<DeltaNotification>();
    v.notification::<TicketChanged>();
    v.notification::<RunChanged>();
    v.notification::<QuestionNotification>();
    v.notification::<TicketDeleted>();
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreateTicketParams {
    /// Absolute path of an existing directory.
    pub root: String,
    /// Non-empty.
    pub title: String,
    /// Required; may be empty.
    pub description: String,
    /// `claude` (default), `opencode`, `codex` or `script`.
    #[serde(default)]
    pub tool: Option<String>,
    /// Model name passed to the CLI. For `script`: a built-in script name or a script file path.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub variant: Option<String>,
    /// The git branch the work is for (stored; an empty string counts as unset).
    #[serde(default)]
    pub branch: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListTicketsParams {
    /// Only tickets of this root.
    #[serde(default)]
    pub root: Option<String>,
    /// Only the tickets a breakdown created.
    #[serde(default)]
    pub initiative_run_id: Option<RunId>,
    /// Page size (default: every ticket).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Only tickets with a larger id: the previous page's `nextAfterId`.
    #[serde(default)]
    pub after_id: Option<TicketId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListTicketsResult {
    pub tickets: Vec<Ticket>,
    /// Set when `limit` cut the list: pass it as `afterId` for the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after_id: Option<TicketId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TicketRef {
    pub ticket_id: TicketId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetTicketResult {
    pub ticket: Ticket,
    pub messages: Vec<Message>,
    pub questions: Vec<Question>,
    pub runs: Vec<Run>,
    /// Usage and cost summed over every run of the ticket.
    pub usage: Usage,
    /// Memory suggestions of the ticket's plans, oldest first; left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory_suggestions: Vec<TicketMemorySuggestion>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanParams {
    #[serde(default)]
    pub ticket_id: Option<TicketId>,
    /// With `title` and `description`: create the ticket, then plan it.
    #[serde(default)]
    pub root: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub variant: Option<String>,
    /// Start a new provider session instead of resuming the ticket's.
    #[serde(default)]
    pub fresh: bool,
    /// Re-run with exactly that run's tool, model and variant (and its feedback, if it had one).
    #[serde(default)]
    pub retry_of: Option<RunId>,
    /// Request changes: the user's message about the current plan, sent as the next message
    /// of the resumed session (or, without one, with the previous plan in a fresh prompt).
    #[serde(default)]
    pub feedback: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanResult {
    pub ticket_id: TicketId,
    pub run_id: RunId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeleteTicketResult {
    pub deleted: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StopParams {
    /// Stop this ticket's active run…
    #[serde(default)]
    pub ticket_id: Option<TicketId>,
    /// …or this run (a breakdown has no ticket).
    #[serde(default)]
    pub run_id: Option<RunId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StopResult {
    /// False when no run was active.
    pub stopped: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusParams {
    #[serde(default)]
    pub ticket_id: Option<TicketId>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    /// Runs that are queued or running (of the ticket, when one was named).
    pub active_runs: Vec<Run>,
    pub planners: Vec<PlannerInfo>,
    pub store: StoreFacts,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreFacts {
    pub path: String,
    pub schema_version: u32,
    pub tickets: u64,
    pub runs: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnswerParams {
    pub ticket_id: TicketId,
    pub question_id: QuestionId,
    /// One entry per question item, in order.
    #[serde(default)]
    pub answers: Vec<Answer>,
    /// Decline to answer instead.
    #[serde(default)]
    pub dismiss: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnswerResult {
    /// The run that continues with the answer.
    pub run_id: RunId,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetTranscriptParams {
    pub run_id: RunId,
    #[serde(default)]
    pub after_seq: u64,
    /// At most this many events (default and maximum 1000).
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GetTranscriptResult {
    pub events: Vec<TranscriptEvent>,
    /// Highest seq the run has so far (not of this page).
    pub last_seq: u64,
    /// The run has ended and this page reaches `lastSeq`.
    pub done: bool,
    /// Blocks of text or reasoning streaming live (`planwire/delta`) that no stored event
    /// has closed yet, with the text sent so far. Only for a run this server drives, and only
    /// on a page that reaches `lastSeq`; left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_blocks: Vec<OpenBlock>,
}

/// A block streaming live, as far as `planwire/delta` has sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenBlock {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_run_id: Option<AgentRunId>,
    pub kind: DeltaKind,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeltaParams {
    /// Null for a breakdown's transcript.
    pub ticket_id: Option<TicketId>,
    pub run_id: RunId,
    /// The agent whose block this extends; left out for the main agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_run_id: Option<AgentRunId>,
    pub kind: DeltaKind,
    /// The piece: it extends the open block of this kind and agent.
    pub text: String,
    /// How many characters (Unicode scalar values) of the block were sent before this piece:
    /// 0 opens a new block.
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptParams {
    /// Null for a breakdown's transcript.
    pub ticket_id: Option<TicketId>,
    pub run_id: RunId,
    pub events: Vec<TranscriptEvent>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TicketChangedParams {
    pub ticket: Ticket,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunChangedParams {
    pub run: Run,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionParams {
    pub ticket_id: TicketId,
    pub run_id: RunId,
    pub question: Question,
}

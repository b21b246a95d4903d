//! The tools: their schemas (made from the argument and result types below with schemars),
//! titles and annotations, and what each call does through the in-process server.
//!
//! Errors follow the spec's split: an unknown tool or a malformed `tools/call` is a JSON-RPC
//! error (-32602); arguments of the wrong type or size, an unknown ticket and anything the
//! server refuses are a result with `isError: true` and the reason, so the model can correct
//! itself.

use std::sync::Arc;

use planwire_protocol::{
    Breakdown, BreakdownParams, CreateTicket, CreateTicketParams, ExportPlan, ExportPlanParams, GetPlan, GetPlanParams,
    GetTicket, Handoff, HandoffParams, ListPlans, ListTickets, ListTicketsParams, Plan, PlanParams, Run, StartPlan,
    Stop, StopParams, Ticket, TicketId, TicketRef, TicketStatus, Usage,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, ListToolsResult, ServerResult, Tool,
    ToolAnnotations,
};
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use super::follow::{self, Call, Outcome};
use super::{parse, tasks, Mcp};
use crate::acp::backend::Key;
use crate::transport::{RequestId, ResponseError};

/// Longest title, tool, model, branch or path accepted (characters).
const SHORT: usize = 1_000;
/// Longest description, feedback or answer (characters).
const LONG: usize = 100_000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateTicketArgs {
    /// The ticket's title: the work in one line.
    #[schemars(length(min = 1, max = 1000))]
    title: String,
    /// What to do and why, in the person's words (markdown).
    #[serde(default)]
    #[schemars(length(max = 100000))]
    description: Option<String>,
    /// Absolute path of the repository; default: the client's first root, else the server's
    /// working directory.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    root: Option<String>,
    /// The planner CLI: claude, codex, opencode, script or acp:NAME (default: the server's).
    #[serde(default)]
    #[schemars(length(max = 1000))]
    tool: Option<String>,
    /// The model the planner uses (default: the CLI's own).
    #[serde(default)]
    #[schemars(length(max = 1000))]
    model: Option<String>,
    /// The git branch the work is for; the plan is made where it is checked out.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    branch: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PlanArgs {
    /// The ticket to plan (from create_ticket or list_tickets).
    ticket_id: TicketId,
    /// Changes you want to the current plan; the planner's session resumes with them.
    #[serde(default)]
    #[schemars(length(max = 100000))]
    feedback: Option<String>,
    /// Start a new planner session instead of resuming the ticket's.
    #[serde(default)]
    fresh: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GetPlanArgs {
    ticket_id: TicketId,
    /// The plan version (default: the latest).
    #[serde(default)]
    #[schemars(range(min = 1))]
    version: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ListTicketsArgs {
    /// Only this repository's tickets (default: the client's first root, else the server's
    /// working directory); `*` lists every repository's.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    root: Option<String>,
    /// Only tickets with this status.
    #[serde(default)]
    status: Option<TicketStatus>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TicketArgs {
    ticket_id: TicketId,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AnswerArgs {
    pub ticket_id: TicketId,
    /// The question (default: the ticket's open question).
    #[serde(default)]
    pub question_id: Option<i64>,
    /// One answer per question item, in order: an option's label, your own words, or
    /// `{selected, other}`. One answer for several items answers the first.
    #[schemars(length(max = 100))]
    pub answers: Vec<AnswerArg>,
    /// Decline to answer: the planner goes on with its assumptions.
    #[serde(default)]
    pub dismiss: bool,
}

/// An answer to one question item.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(super) enum AnswerArg {
    /// An option's label, or your own words.
    Text(#[schemars(length(max = 100000))] String),
    Choice {
        /// Labels of the chosen options.
        #[serde(default)]
        #[schemars(length(max = 100))]
        selected: Vec<String>,
        /// Your own words.
        #[serde(default)]
        #[schemars(length(max = 100000))]
        other: Option<String>,
    },
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BreakdownArgs {
    /// The initiative, in the person's words.
    #[schemars(length(min = 1, max = 100000))]
    description: String,
    /// Absolute path of the repository (default: as create_ticket).
    #[serde(default)]
    #[schemars(length(max = 1000))]
    root: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExportArgs {
    ticket_id: TicketId,
    /// Where to write: absolute, or relative to the ticket's root (default
    /// `.planwire/plans/<ticket>-<slug>.md`). An existing file is never overwritten.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HandoffArgs {
    ticket_id: TicketId,
    /// The CLI to implement with: claude, codex or opencode (default: the ticket's).
    #[serde(default)]
    #[schemars(length(max = 1000))]
    tool: Option<String>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct TicketOut {
    ticket: Ticket,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct PlanOut {
    ticket_id: TicketId,
    version: u32,
    run_id: Option<i64>,
    created_at: String,
    plan: Plan,
    /// The plan as markdown.
    markdown: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct TicketsOut {
    tickets: Vec<TicketLine>,
}

/// A ticket in a list.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct TicketLine {
    id: TicketId,
    title: String,
    status: TicketStatus,
    root: String,
    tool: String,
    /// The latest plan version; absent while never planned.
    #[serde(skip_serializing_if = "Option::is_none")]
    plan_version: Option<u32>,
    open_questions: usize,
    depends_on: Vec<TicketId>,
    updated_at: String,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct GetTicketOut {
    /// The ticket, with its open questions (`ticket.openQuestions`).
    ticket: Ticket,
    /// Its runs, newest first, with their timing.
    runs: Vec<Run>,
    /// Tokens and cost summed over every run.
    usage: Usage,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct StopOut {
    /// False when no run was active.
    stopped: bool,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct BreakdownOut {
    run_id: i64,
    /// `completed`, `failed` or `cancelled`.
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
    /// The tickets made, each with the tickets it depends on.
    tickets: Vec<TicketLine>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ExportOut {
    /// The absolute path written.
    path: String,
    bytes: u64,
    version: u32,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct HandoffOut {
    /// The command, program first; run it yourself in `cwd` (planwire runs nothing).
    argv: Vec<String>,
    cwd: String,
    /// The private file that holds the plan.
    plan_path: String,
    version: u32,
}

/// Whether a tool may run as a 2025-11-25 task.
#[derive(Clone, Copy, PartialEq)]
enum Long {
    No,
    Task,
}

struct Def {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input: fn() -> Arc<JsonObject>,
    output: fn() -> Arc<JsonObject>,
    read_only: bool,
    idempotent: bool,
    open_world: bool,
    long: Long,
}

macro_rules! def {
    ($name:literal, $title:literal, $args:ty => $out:ty, read_only: $ro:literal, idempotent: $idem:literal,
     open_world: $ow:literal, long: $long:expr, $description:literal) => {
        Def {
            name: $name,
            title: $title,
            description: $description,
            input: || schema::<$args>(false),
            output: || schema::<$out>(true),
            read_only: $ro,
            idempotent: $idem,
            open_world: $ow,
            long: $long,
        }
    };
}

/// Every tool, in the order `tools/list` gives them.
fn defs() -> [Def; 10] {
    [
        def!("create_ticket", "Create a ticket", CreateTicketArgs => TicketOut,
            read_only: false, idempotent: false, open_world: false, long: Long::No,
            "Creates a draft ticket: a title and a rough description of work in a repository. Plan it with plan."),
        def!("plan", "Plan a ticket", PlanArgs => Outcome,
            read_only: false, idempotent: false, open_world: true, long: Long::Task,
            "Plans a ticket with a coding-agent CLI in read-only plan mode, in planwire's OS sandbox \
             (minutes; progress is reported). Returns the plan as markdown, or needs_input with the \
             planner's questions: ask the person, then call answer. With feedback, the plan is revised."),
        def!("get_plan", "Read a plan", GetPlanArgs => PlanOut,
            read_only: true, idempotent: true, open_world: false, long: Long::No,
            "A ticket's plan as markdown: the latest version, or the version asked for."),
        def!("list_tickets", "List tickets", ListTicketsArgs => TicketsOut,
            read_only: true, idempotent: true, open_world: false, long: Long::No,
            "The tickets of a repository (default: the client's first root), oldest first."),
        def!("get_ticket", "Show a ticket", TicketArgs => GetTicketOut,
            read_only: true, idempotent: true, open_world: false, long: Long::No,
            "A ticket: its status, plan, open questions, and its runs with their timing and usage."),
        def!("answer", "Answer the planner", AnswerArgs => Outcome,
            read_only: false, idempotent: false, open_world: true, long: Long::Task,
            "Answers (or dismisses) the planner's open question, in the person's words; planning goes \
             on and this returns like plan does."),
        def!("stop", "Stop planning", TicketArgs => StopOut,
            read_only: false, idempotent: true, open_world: false, long: Long::No,
            "Stops the ticket's active run; returns once its planner processes are gone."),
        def!("breakdown", "Break down an initiative", BreakdownArgs => BreakdownOut,
            read_only: false, idempotent: false, open_world: true, long: Long::Task,
            "Breaks an initiative into dependent tickets (minutes); returns them with their dependencies."),
        def!("export_plan", "Export a plan", ExportArgs => ExportOut,
            read_only: false, idempotent: false, open_world: false, long: Long::No,
            "Writes the ticket's latest plan into its repository as a markdown file (never over an \
             existing file); the only write planwire makes in a repository."),
        def!("handoff", "Hand a plan off", HandoffArgs => HandoffOut,
            read_only: false, idempotent: false, open_world: false, long: Long::No,
            "The command that starts an implementation CLI in the ticket's root with the plan as its \
             first prompt, and the plan's file. It runs nothing."),
    ]
}

/// A type's JSON Schema as MCP wants it: an object schema, every subschema inlined, no
/// `$schema` (2020-12 is the default) and only the standard `format`s.
fn schema<T: JsonSchema>(output: bool) -> Arc<JsonObject> {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let settings = if output {
        settings.for_serialize()
    } else {
        settings.for_deserialize()
    };
    let mut value = settings.into_generator().into_root_schema_for::<T>().to_value();
    clean(&mut value);
    match value {
        Value::Object(o) => Arc::new(o),
        _ => unreachable!("a struct's schema is an object"),
    }
}

/// Drops schemars' integer `format`s (int64, uint32…), which JSON Schema does not define.
fn clean(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if o.get("format").and_then(Value::as_str).is_some_and(|f| {
                matches!(
                    f,
                    "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "uint"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "float"
                        | "double"
                )
            }) {
                o.remove("format");
            }
            o.values_mut().for_each(clean);
        }
        Value::Array(a) => a.iter_mut().for_each(clean),
        _ => {}
    }
}

pub(super) fn list(mcp: &Mcp) -> Result<Value, ResponseError> {
    let defs = defs();
    let tools = defs
        .iter()
        .map(|d| {
            let annotations = ToolAnnotations::with_title(d.title)
                .read_only(d.read_only)
                .destructive(false)
                .idempotent(d.idempotent)
                .open_world(d.open_world);
            Tool::new(d.name, d.description, (d.input)())
                .with_title(d.title)
                .with_raw_output_schema((d.output)())
                .with_annotations(annotations)
        })
        .collect();
    let mut value = mcp.result(ServerResult::ListToolsResult(ListToolsResult::with_all_items(tools)))?;
    if mcp.has_tasks() {
        // 2025-11-25 `execution.taskSupport`, which the pinned rmcp's Tool no longer carries.
        if let Some(tools) = value["tools"].as_array_mut() {
            for (tool, d) in tools.iter_mut().zip(&defs) {
                if d.long == Long::Task {
                    tool["execution"] = tasks::OPTIONAL.clone();
                }
            }
        }
    }
    Ok(value)
}

/// `tools/call`: a result (or, for a task-augmented call, the task), or the protocol error.
pub(super) async fn call(
    mcp: &Arc<Mcp>,
    id: &RequestId,
    params: Value,
    cancel: watch::Receiver<bool>,
) -> Result<Value, ResponseError> {
    let task = tasks::requested(&params);
    let req: CallToolRequestParams = parse("tools/call", params)?;
    let name = req.name.to_string();
    let Some(def) = defs().into_iter().find(|d| d.name == name) else {
        return Err(super::invalid(format!("Unknown tool: {name}")));
    };
    let progress = req.meta.as_ref().and_then(|m| m.get_progress_token());
    let args = Value::Object(req.arguments.unwrap_or_default());
    match task {
        Some(ttl) if mcp.has_tasks() && def.long == Long::Task => {
            let mcp2 = mcp.clone();
            let started = mcp.tasks.create(mcp, ttl, id, move |task, cancel| async move {
                let call = Call::new(&mcp2, progress, cancel, Some(task));
                run(&mcp2, &name, args, call).await
            });
            Ok(started)
        }
        _ => {
            let call = Call::new(mcp, progress, cancel, None);
            run(mcp, &name, args, call).await
        }
    }
}

/// Runs one tool; a tool error becomes an `isError` result.
async fn run(mcp: &Arc<Mcp>, name: &str, args: Value, call: Call) -> Result<Value, ResponseError> {
    let result = match tool(mcp, name, args, call).await {
        Ok(result) => result,
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.message)]),
    };
    mcp.result(ServerResult::CallToolResult(result))
}

async fn tool(mcp: &Arc<Mcp>, name: &str, args: Value, mut call: Call) -> Result<CallToolResult, ResponseError> {
    let b = &mcp.backend;
    match name {
        "create_ticket" => {
            let a: CreateTicketArgs = arguments(name, args)?;
            check(&[
                ("title", Some(&a.title), SHORT),
                ("description", a.description.as_ref(), LONG),
            ])?;
            check(&short(&[
                ("root", &a.root),
                ("tool", &a.tool),
                ("model", &a.model),
                ("branch", &a.branch),
            ]))?;
            let root = match a.root {
                Some(r) => r,
                None => mcp.default_root().await,
            };
            let ticket = b
                .call::<CreateTicket>(CreateTicketParams {
                    root,
                    title: a.title,
                    description: a.description.unwrap_or_default(),
                    tool: a.tool.or_else(|| mcp.defaults.0.clone()),
                    model: a.model.or_else(|| mcp.defaults.1.clone()),
                    variant: None,
                    branch: a.branch,
                })
                .await?;
            let text = format!(
                "Created ticket {} \"{}\" in {} (planner {}). Plan it with plan {{\"ticketId\": {}}}.",
                ticket.id, ticket.title, ticket.root, ticket.tool, ticket.id
            );
            structured(text, &TicketOut { ticket })
        }
        "plan" => {
            let a: PlanArgs = arguments(name, args)?;
            check(&[("feedback", a.feedback.as_ref(), LONG)])?;
            let sub = b.subscribe(&[Key::Ticket(a.ticket_id)]);
            let params = PlanParams {
                ticket_id: Some(a.ticket_id),
                feedback: a.feedback,
                fresh: a.fresh,
                ..PlanParams::default()
            };
            let run = b.call::<StartPlan>(params).await?.run_id;
            call.say(&format!("Planning ticket {}", a.ticket_id)).await;
            follow::follow(mcp, &mut call, a.ticket_id, run, sub).await?.result()
        }
        "answer" => {
            let a: AnswerArgs = arguments(name, args)?;
            follow::answer(mcp, &mut call, a).await?.result()
        }
        "get_plan" => {
            let a: GetPlanArgs = arguments(name, args)?;
            let v = match a.version {
                Some(version) => {
                    b.call::<GetPlan>(GetPlanParams {
                        ticket_id: a.ticket_id,
                        version,
                    })
                    .await?
                }
                None => b
                    .call::<ListPlans>(TicketRef { ticket_id: a.ticket_id })
                    .await?
                    .plans
                    .pop()
                    .ok_or_else(|| not_planned(a.ticket_id))?,
            };
            let out = PlanOut {
                ticket_id: a.ticket_id,
                version: v.version,
                run_id: v.run_id,
                created_at: v.created_at,
                plan: v.plan,
                markdown: v.markdown.clone(),
            };
            structured(v.markdown, &out)
        }
        "list_tickets" => {
            let a: ListTicketsArgs = arguments(name, args)?;
            check(&short(&[("root", &a.root)]))?;
            let root = match a.root {
                Some(r) if r == "*" => None,
                Some(r) => Some(r),
                None => Some(mcp.default_root().await),
            };
            let root = match root {
                Some(r) => Some(crate::handlers::create_ticket::check_root(&r)?),
                None => None,
            };
            let params = ListTicketsParams {
                root,
                ..ListTicketsParams::default()
            };
            let tickets: Vec<TicketLine> = b
                .call::<ListTickets>(params)
                .await?
                .tickets
                .into_iter()
                .filter(|t| a.status.is_none_or(|s| s == t.status))
                .map(line)
                .collect();
            let text = if tickets.is_empty() {
                "No tickets.".to_owned()
            } else {
                tickets
                    .iter()
                    .map(|t| format!("{} [{}] {}", t.id, t.status.as_str(), t.title))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            structured(text, &TicketsOut { tickets })
        }
        "get_ticket" => {
            let a: TicketArgs = arguments(name, args)?;
            let got = b.call::<GetTicket>(TicketRef { ticket_id: a.ticket_id }).await?;
            let t = &got.ticket;
            let mut text = format!("Ticket {} [{}] {}\n", t.id, t.status.as_str(), t.title);
            if let Some(v) = t.plan_version {
                text.push_str(&format!(
                    "Plan version {v}: {}\n",
                    t.plan.as_ref().map_or("", |p| &p.title)
                ));
            }
            for q in &t.open_questions {
                text.push_str(&follow::question_text(q));
            }
            for r in &got.runs {
                let ms = r.timing.map(|t| format!(", {} ms", t.total_ms)).unwrap_or_default();
                text.push_str(&format!("Run {} {} ({}{ms})\n", r.id, r.status.as_str(), r.tool));
            }
            let out = GetTicketOut {
                ticket: got.ticket,
                runs: got.runs,
                usage: got.usage,
            };
            structured(text, &out)
        }
        "stop" => {
            let a: TicketArgs = arguments(name, args)?;
            let r = b
                .call::<Stop>(StopParams {
                    ticket_id: Some(a.ticket_id),
                    run_id: None,
                })
                .await?;
            let text = if r.stopped {
                format!("Stopped ticket {}'s run; its planner processes are gone.", a.ticket_id)
            } else {
                format!("Ticket {} had no active run.", a.ticket_id)
            };
            structured(text, &StopOut { stopped: r.stopped })
        }
        "breakdown" => {
            let a: BreakdownArgs = arguments(name, args)?;
            check(&[("description", Some(&a.description), LONG)])?;
            check(&short(&[("root", &a.root)]))?;
            let root = match a.root {
                Some(r) => r,
                None => mcp.default_root().await,
            };
            let params = BreakdownParams {
                root,
                description: a.description,
                tool: mcp.defaults.0.clone(),
                model: mcp.defaults.1.clone(),
                variant: None,
            };
            breakdown(mcp, &mut call, params).await
        }
        "export_plan" => {
            let a: ExportArgs = arguments(name, args)?;
            check(&short(&[("path", &a.path)]))?;
            let r = b
                .call::<ExportPlan>(ExportPlanParams {
                    ticket_id: a.ticket_id,
                    path: a.path,
                    ..ExportPlanParams::default()
                })
                .await?;
            let text = format!("Wrote plan version {} to {} ({} bytes).", r.version, r.path, r.bytes);
            structured(
                text,
                &ExportOut {
                    path: r.path,
                    bytes: r.bytes,
                    version: r.version,
                },
            )
        }
        "handoff" => {
            let a: HandoffArgs = arguments(name, args)?;
            check(&short(&[("tool", &a.tool)]))?;
            let r = b
                .call::<Handoff>(HandoffParams {
                    ticket_id: a.ticket_id,
                    tool: a.tool,
                    ..HandoffParams::default()
                })
                .await?;
            let text = format!(
                "Run this in {} to implement plan version {} (planwire runs nothing):\n\n{}\n\nThe plan is in {}.",
                r.cwd,
                r.version,
                r.argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "),
                r.plan_path
            );
            structured(
                text,
                &HandoffOut {
                    argv: r.argv,
                    cwd: r.cwd,
                    plan_path: r.plan_path,
                    version: r.version,
                },
            )
        }
        _ => unreachable!("the caller found {name} among the tools"),
    }
}

async fn breakdown(mcp: &Arc<Mcp>, call: &mut Call, params: BreakdownParams) -> Result<CallToolResult, ResponseError> {
    let b = &mcp.backend;
    let run = b.call::<Breakdown>(params).await?.run_id;
    let mut sub = b.subscribe(&[Key::Run(run)]);
    call.say("Breaking the initiative down").await;
    let ended: Run = follow::run_end(mcp, call, None, run, &mut sub).await?;
    let params = ListTicketsParams {
        initiative_run_id: Some(run),
        ..ListTicketsParams::default()
    };
    let tickets: Vec<TicketLine> = b
        .call::<ListTickets>(params)
        .await?
        .tickets
        .into_iter()
        .map(line)
        .collect();
    let mut text = format!("Breakdown run {run}: {}\n", ended.status.as_str());
    for t in &tickets {
        let deps = t
            .depends_on
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        text.push_str(&format!(
            "- {} {}{}\n",
            t.id,
            t.title,
            if deps.is_empty() {
                String::new()
            } else {
                format!(" (after {deps})")
            }
        ));
    }
    let failure = ended.failure.map(|f| f.message);
    if let Some(f) = &failure {
        text.push_str(f);
    }
    let out = BreakdownOut {
        run_id: run,
        status: ended.status.as_str().to_owned(),
        failure,
        tickets,
    };
    let mut result = structured(text, &out)?;
    if ended.status != planwire_protocol::RunStatus::Completed {
        result.is_error = Some(true);
    }
    Ok(result)
}

fn line(t: Ticket) -> TicketLine {
    TicketLine {
        id: t.id,
        title: t.title,
        status: t.status,
        root: t.root,
        tool: t.tool,
        plan_version: t.plan_version,
        open_questions: t.open_questions.len(),
        depends_on: t.depends_on,
        updated_at: t.updated_at,
    }
}

fn not_planned(ticket: TicketId) -> ResponseError {
    ResponseError::new(
        planwire_protocol::ErrorCode::NotFound,
        format!("ticket {ticket} has no plan yet: plan it first"),
    )
}

/// A result whose text is `text` and whose `structuredContent` is `out`.
pub(super) fn structured<T: Serialize>(text: String, out: &T) -> Result<CallToolResult, ResponseError> {
    let value = super::to_value(out)?;
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    Ok(result)
}

/// A tool's arguments; a wrong field names itself.
fn arguments<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ResponseError> {
    crate::handlers::parse_params(tool, args).map_err(|mut e| {
        e.message = e.message.replacen("invalid params for", "invalid arguments for", 1);
        e
    })
}

fn short<'a>(fields: &[(&'static str, &'a Option<String>)]) -> Vec<(&'static str, Option<&'a String>, usize)> {
    fields.iter().map(|(n, v)| (*n, v.as_ref(), SHORT)).collect()
}

/// Refuses a string over its limit, naming the field.
fn check(fields: &[(&'static str, Option<&String>, usize)]) -> Result<(), ResponseError> {
    for (name, value, max) in fields {
        if let Some(v) = value {
            let n = v.chars().count();
            if n > *max {
                return Err(super::invalid(format!(
                    "field `{name}`: at most {max} characters (got {n})"
                )));
            }
        }
    }
    Ok(())
}

/// A word as a POSIX shell would read it back, for showing a command.
fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_object_schemas_a_title_and_annotations() {
        for d in defs() {
            let input = (d.input)();
            let output = (d.output)();
            assert_eq!(input["type"], "object", "{}", d.name);
            assert_eq!(output["type"], "object", "{}", d.name);
            assert!(
                !input.contains_key("$schema") && !input.contains_key("$defs"),
                "{}",
                d.name
            );
            let text = serde_json::to_string(&*output).unwrap();
            assert!(
                !text.contains("\"$ref\"") && !text.contains("int64"),
                "{}: {text}",
                d.name
            );
            assert!(!d.title.is_empty());
        }
        let plan = schema::<PlanArgs>(false);
        assert_eq!(plan["required"], serde_json::json!(["ticketId"]));
        assert_eq!(plan["properties"]["feedback"]["maxLength"], 100000);
    }

    #[test]
    fn long_strings_are_refused_by_name() {
        let long = "x".repeat(SHORT + 1);
        let e = check(&short(&[("root", &Some(long))])).unwrap_err();
        assert!(
            e.message.contains("`root`") && e.message.contains("1000"),
            "{}",
            e.message
        );
        assert!(check(&short(&[("root", &Some("/r".into()))])).is_ok());
    }

    #[test]
    fn commands_are_shown_quoted() {
        assert_eq!(quote("claude"), "claude");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}

//! `planwire plan`: create a ticket and plan it through the in-process server, streaming the
//! transcript as readable text and printing the plan as markdown at the end.
//!
//! Exit codes: 0 planned (or needs input: the open questions are printed), 1 failed (with the
//! run's failure message), 128 + signal when stopped by Ctrl-C (130) or SIGTERM (143): the
//! stop goes through `planwire/stop`, so the planner's process group is gone and the run is
//! recorded `cancelled` before planwire exits.

use std::collections::HashMap;
use std::io::{IsTerminal, Read};
use std::path::Path;
use std::time::Instant;

use planwire_protocol::{
    AgentRunId, Answer, AnswerParams, AnswerQuestion, EventBody, GetTicket, GetTicketResult, GetTranscript,
    GetTranscriptParams, PlanParams, PlanResult, QuestionItem, QuestionNotification, QuestionSource, RunChanged,
    RunStatus, StartPlan, Stop, StopParams, SubagentPhase, TicketRef, TicketStatus, ToolStatus, TranscriptEvent,
    TranscriptNotification,
};
use tokio::signal::unix::{signal, SignalKind};

use super::client::Client;
use super::output::{paint, Screen, Style};
use super::{fail, PlanArgs};
use crate::planners::plan::plan_markdown;
use crate::planners::plan::strip_plan_block;

/// Longest tool input shown on a tool line.
const TOOL_INPUT_MAX: usize = 120;
/// Longest reasoning excerpt shown.
const REASONING_MAX: usize = 160;

pub async fn run(args: PlanArgs) -> i32 {
    let description = match read_description(&args) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let root = match std::fs::canonicalize(&args.root) {
        Ok(r) if r.is_dir() => r,
        Ok(r) => return fail(format!("{} is not a directory", r.display())),
        Err(e) => return fail(format!("--root {}: {e}", args.root.display())),
    };
    // Installed before anything starts, so a Ctrl-C is never lost: it waits in the stream.
    let (mut sigint, mut sigterm) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(i), Ok(t)) => (i, t),
        _ => return fail("cannot install the Ctrl-C handler"),
    };
    let db = args.db.path();
    let agents = match args.agents.options() {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let mut options = serde_json::Map::new();
    options.insert("acpAgents".into(), serde_json::Value::Object(agents));
    let (mut client, _) = match Client::start_with(&db, options).await {
        Ok(c) => c,
        Err(e) => return fail(e.message),
    };
    let screen = Screen::start();
    let tool = args.tool.clone().unwrap_or_else(|| "claude".into());
    screen.status(&format!("Starting {tool}…"));
    let params = PlanParams {
        root: Some(root.display().to_string()),
        title: Some(args.title.clone()),
        description: Some(description),
        tool: args.tool.clone(),
        model: args.model.clone(),
        ..PlanParams::default()
    };
    let started = Instant::now();
    let PlanResult { ticket_id, run_id } = match client.call::<StartPlan>(params).await {
        Ok(r) => r,
        Err(e) => {
            screen.finish();
            client.shutdown().await;
            return fail(e.message);
        }
    };
    screen.status(&format!("Planning with {tool}"));
    let mut view = View::new(&root, screen.color);
    let mut last_seq = 0u64;
    let mut stopped_by: Option<i32> = None;
    loop {
        tokio::select! {
            note = client.next() => {
                let Some(note) = note else { break };
                if let Some(t) = note.params_of::<TranscriptNotification>() {
                    if t.run_id != run_id {
                        continue;
                    }
                    let first = t.events.first().map_or(0, |e| e.seq);
                    if first > last_seq + 1 {
                        // A gap (never expected in-process): catch up from the store.
                        catch_up(&mut client, run_id, &mut last_seq, &mut view, &screen).await;
                    }
                    for event in &t.events {
                        if event.seq <= last_seq {
                            continue;
                        }
                        last_seq = event.seq;
                        show_event(&mut view, &screen, event);
                    }
                } else if let Some(q) = note.params_of::<QuestionNotification>() {
                    if q.run_id != run_id || q.question.source != QuestionSource::Live {
                        continue;
                    }
                    let interactive = std::io::stdin().is_terminal();
                    screen.lines(&view.question(&q.question, interactive));
                    let reply = if interactive {
                        screen.pause(true);
                        let items = q.question.items.clone();
                        let read = tokio::task::spawn_blocking(move || ask(&items));
                        let reply = tokio::select! {
                            r = read => r.ok().flatten(),
                            _ = sigint.recv() => {
                                screen.pause(false);
                                stopped_by = Some(libc::SIGINT);
                                stop(&mut client, &screen, ticket_id).await;
                                continue;
                            }
                        };
                        screen.pause(false);
                        reply
                    } else {
                        None
                    };
                    answer(&mut client, &screen, ticket_id, q.question.id, reply).await;
                } else if let Some(r) = note.params_of::<RunChanged>() {
                    if r.run.id == run_id && !r.run.status.is_active() {
                        break;
                    }
                }
            }
            _ = sigint.recv(), if stopped_by.is_none() => {
                stopped_by = Some(libc::SIGINT);
                stop(&mut client, &screen, ticket_id).await;
            }
            _ = sigterm.recv(), if stopped_by.is_none() => {
                stopped_by = Some(libc::SIGTERM);
                stop(&mut client, &screen, ticket_id).await;
            }
        }
    }
    // Whatever was committed but not yet shown (the end is recorded after the last batch).
    catch_up(&mut client, run_id, &mut last_seq, &mut view, &screen).await;
    let got = client.call::<GetTicket>(TicketRef { ticket_id }).await;
    screen.finish();
    client.shutdown().await;
    let got = match got {
        Ok(g) => g,
        Err(e) => return fail(e.message),
    };
    finish(&got, run_id, started, stopped_by, &view)
}

fn read_description(args: &PlanArgs) -> Result<String, String> {
    match (&args.description, &args.description_file) {
        (Some(d), _) => Ok(d.clone()),
        (None, Some(f)) if f.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| format!("cannot read the description from stdin: {e}"))?;
            Ok(text)
        }
        (None, Some(f)) => {
            std::fs::read_to_string(f).map_err(|e| format!("cannot read the description file {}: {e}", f.display()))
        }
        (None, None) => Ok(String::new()),
    }
}

/// Asks the server to stop the ticket's run and waits until its process group is gone; a
/// second Ctrl-C quits at once (the planner's parent-death signal takes it down, and the next
/// planwire to open the database records the run as interrupted).
async fn stop(client: &mut Client, screen: &Screen, ticket_id: i64) {
    screen.note("Stopping the planner… (Ctrl-C again to quit at once)");
    screen.status("Stopping…");
    tokio::spawn(async {
        if let Ok(mut again) = signal(SignalKind::interrupt()) {
            again.recv().await;
            std::process::exit(130);
        }
    });
    if let Err(e) = client
        .call::<Stop>(StopParams {
            ticket_id: Some(ticket_id),
            run_id: None,
        })
        .await
    {
        screen.error(&format!("planwire: stop failed: {}", e.message));
    }
}

/// Reads the answer to each item of a live question from the terminal: option numbers
/// (comma-separated), or free text. `None` (dismiss) when every reply is empty.
fn ask(items: &[QuestionItem]) -> Option<Vec<Answer>> {
    let mut answers = Vec::new();
    for item in items {
        let hint = match (item.options.is_empty(), item.multi_select) {
            (true, _) => "your answer",
            (false, false) => "an option number, or your own text",
            (false, true) => "option numbers (1,3), or your own text",
        };
        super::output::prompt(&format!("{}: {hint} (Enter to skip): ", item.header));
        let mut line = String::new();
        if std::io::stdin().read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        answers.push(parse_answer(item, line.trim()));
    }
    answers
        .iter()
        .any(|a| !a.selected.is_empty() || a.other.is_some())
        .then_some(answers)
}

fn parse_answer(item: &QuestionItem, reply: &str) -> Answer {
    let picks: Option<Vec<String>> = reply
        .split(',')
        .map(|p| {
            let n = p.trim().parse::<usize>().ok()?;
            item.options.get(n.checked_sub(1)?).map(|o| o.label.clone())
        })
        .collect();
    match picks {
        Some(selected) if !reply.is_empty() && (item.multi_select || selected.len() == 1) => {
            Answer { selected, other: None }
        }
        _ => Answer {
            selected: Vec::new(),
            other: (!reply.is_empty()).then(|| reply.to_owned()),
        },
    }
}

async fn answer(client: &mut Client, screen: &Screen, ticket_id: i64, question_id: i64, reply: Option<Vec<Answer>>) {
    let params = AnswerParams {
        ticket_id,
        question_id,
        dismiss: reply.is_none(),
        answers: reply.unwrap_or_default(),
    };
    if let Err(e) = client.call::<AnswerQuestion>(params).await {
        screen.error(&format!(
            "planwire: cannot answer question {question_id}: {}; answer it in an editor",
            e.message
        ));
    }
}

async fn catch_up(client: &mut Client, run_id: i64, last_seq: &mut u64, view: &mut View, screen: &Screen) {
    loop {
        let page = client
            .call::<GetTranscript>(GetTranscriptParams {
                run_id,
                after_seq: *last_seq,
                limit: None,
            })
            .await;
        let Ok(page) = page else { return };
        for event in &page.events {
            if event.seq <= *last_seq {
                continue;
            }
            *last_seq = event.seq;
            show_event(view, screen, event);
        }
        if page.events.is_empty() || *last_seq >= page.last_seq {
            return;
        }
    }
}

fn show_event(view: &mut View, screen: &Screen, event: &TranscriptEvent) {
    let lines = view.event(event);
    screen.lines(&lines);
    if let Some(status) = view.status.take() {
        screen.status(&status);
    }
}

/// The end: the plan as markdown on stdout, a summary or the failure on stderr.
fn finish(got: &GetTicketResult, run_id: i64, started: Instant, stopped_by: Option<i32>, view: &View) -> i32 {
    let ticket = &got.ticket;
    let run = got.runs.iter().find(|r| r.id == run_id);
    let status = run.map(|r| r.status);
    let elapsed = format!("{:.1}s", started.elapsed().as_secs_f64());
    let out = super::output::print_lines;
    let note = super::output::note_line;
    match (status, &ticket.plan) {
        (Some(RunStatus::Completed), Some(plan)) => {
            let mut lines = Vec::new();
            if view.printed {
                lines.push(String::new());
            }
            lines.extend(plan_markdown(plan).trim_end().lines().map(str::to_owned));
            out(&lines);
            if ticket.status == TicketStatus::NeedsInput {
                note(&format!(
                    "\nTicket {} needs input: the plan has {} open question(s), listed above. \
                     Answer them in an editor, or refine the description and plan again.",
                    ticket.id,
                    plan.open_questions.len()
                ));
            } else {
                note(&format!(
                    "\nPlanned ticket {} in {elapsed}. `planwire show {}` prints it again.",
                    ticket.id, ticket.id
                ));
            }
            0
        }
        (Some(RunStatus::Cancelled), _) if stopped_by.is_some() => {
            note(&format!(
                "Stopped: run {run_id} of ticket {} is recorded as cancelled.",
                ticket.id
            ));
            128 + stopped_by.unwrap_or(libc::SIGINT)
        }
        _ => {
            let message = run
                .and_then(|r| r.failure.as_ref())
                .map(|f| f.message.clone())
                .unwrap_or_else(|| match status {
                    Some(RunStatus::Cancelled) => "the run was stopped".into(),
                    Some(s) => format!("the run ended {}", s.as_str()),
                    None => "the run is missing".into(),
                });
            fail(format!("planning failed: {message}"))
        }
    }
}

/// Turns transcript events into readable lines.
struct View {
    root: String,
    color: bool,
    /// Whether anything was printed (for spacing).
    printed: bool,
    /// The last line printed was part of a text block.
    in_text: bool,
    subagents: HashMap<AgentRunId, String>,
    /// Tool names by call id, for their results.
    calls: HashMap<String, String>,
    /// A new spinner status, taken after each event.
    status: Option<String>,
}

impl View {
    fn new(root: &Path, color: bool) -> View {
        View {
            root: format!("{}/", root.display()),
            color,
            printed: false,
            in_text: false,
            subagents: HashMap::new(),
            calls: HashMap::new(),
            status: None,
        }
    }

    fn paint(&self, text: &str, style: Style) -> String {
        paint(text, style, self.color)
    }

    /// Paths under the root are shown relative to it.
    fn relative(&self, text: &str) -> String {
        text.replace(&self.root, "")
    }

    fn event(&mut self, event: &TranscriptEvent) -> Vec<String> {
        let indent = if event.agent_run_id.is_some() { "    " } else { "" };
        let mut lines = Vec::new();
        let mut text_block = false;
        match &event.body {
            EventBody::Text { text, .. } => {
                let text = strip_plan_block(text);
                if !text.is_empty() {
                    text_block = true;
                    if self.printed {
                        lines.push(String::new());
                    }
                    lines.extend(text.lines().map(|l| format!("{indent}{l}")));
                    self.status = Some("Writing…".into());
                }
            }
            EventBody::Reasoning { text } => {
                let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                if !first.is_empty() {
                    let excerpt = crate::planners::truncate_chars(first.trim(), REASONING_MAX);
                    lines.push(format!("{indent}{}", self.paint(&format!("∴ {excerpt}"), Style::Dim)));
                    self.status = Some("Thinking…".into());
                }
            }
            EventBody::ToolCall { call_id, name, input } => {
                if name == "AskUserQuestion" {
                    // Shown as the question itself, from its own notification.
                    return Vec::new();
                }
                let input = self.relative(input.lines().next().unwrap_or(""));
                let input = crate::planners::truncate_chars(input.trim(), TOOL_INPUT_MAX);
                let line = format!("▸ {name} {input}").trim_end().to_owned();
                self.calls.insert(call_id.clone(), name.clone());
                self.status = Some(line.clone());
                lines.push(format!("{indent}{}", self.paint(&line, Style::Dim)));
            }
            EventBody::ToolResult {
                call_id,
                status: ToolStatus::Error,
                output,
            } => {
                let name = self.calls.get(call_id).cloned().unwrap_or_default();
                let first = output.lines().next().unwrap_or("").trim();
                let first = crate::planners::truncate_chars(first, TOOL_INPUT_MAX);
                let line = format!("  ✗ {name} failed: {first}");
                lines.push(format!("{indent}{}", self.paint(&line, Style::Red)));
            }
            EventBody::ToolResult { .. } => {}
            EventBody::Subagent { phase, label, status } => {
                let key = event.agent_run_id.unwrap_or(0);
                match phase {
                    SubagentPhase::Start => {
                        self.subagents.insert(key, label.clone());
                        self.status = Some(format!("Subagent: {label}"));
                        lines.push(format!(
                            "  {}",
                            self.paint(&format!("↳ subagent started: {label}"), Style::Bold)
                        ));
                    }
                    SubagentPhase::End => {
                        let label = self.subagents.remove(&key).unwrap_or(label.clone());
                        let status = status.as_deref().unwrap_or("done");
                        lines.push(format!(
                            "  {}",
                            self.paint(&format!("↳ subagent finished: {label} ({status})"), Style::Bold)
                        ));
                    }
                }
            }
            EventBody::Error { error_kind, message } => {
                let kind = serde_json::to_value(error_kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                for (i, l) in message.lines().enumerate() {
                    let l = if i == 0 {
                        format!("✗ error ({kind}): {l}")
                    } else {
                        format!("  {l}")
                    };
                    lines.push(format!("{indent}{}", self.paint(&l, Style::Red)));
                }
            }
            EventBody::Warning { message } => {
                let l = format!("! warning: {message}");
                lines.push(format!("{indent}{}", self.paint(&l, Style::Bold)));
            }
            // Live questions arrive with their own notification; usage, session ids and
            // unrecognised lines are stored but not shown.
            EventBody::Question { .. }
            | EventBody::Usage { .. }
            | EventBody::Session { .. }
            | EventBody::Raw { .. } => {}
        }
        if !lines.is_empty() {
            // A text block stands apart from the tool lines around it.
            if !text_block && self.in_text {
                lines.insert(0, String::new());
            }
            self.in_text = text_block;
            self.printed = true;
        }
        lines
    }

    fn question(&mut self, q: &planwire_protocol::Question, interactive: bool) -> Vec<String> {
        let mut lines = vec![String::new()];
        for item in &q.items {
            lines.push(self.paint(&format!("? {}: {}", item.header, item.question), Style::Bold));
            for (n, o) in item.options.iter().enumerate() {
                match &o.description {
                    Some(d) => lines.push(format!("    {}. {} — {d}", n + 1, o.label)),
                    None => lines.push(format!("    {}. {}", n + 1, o.label)),
                }
            }
        }
        if !interactive {
            lines.push("  (stdin is not a terminal: the question is dismissed and planning goes on)".into());
        }
        self.printed = true;
        self.in_text = false;
        lines
    }
}

//! `planwire tickets`, `planwire show` and `planwire export`: the store, read (and a plan
//! written) through the in-process server.

use planwire_protocol::{
    ErrorCode, ExportPlan, ExportPlanParams, GetTicket, ListPlans, ListTickets, ListTicketsParams, PlanVersion, Run,
    Ticket, TicketRef, Usage,
};

use super::client::Client;
use super::output::{note_line, print_lines};
use super::{fail, ExportArgs, ShowArgs, TicketsArgs};
use crate::planners::plan::plan_markdown;

pub async fn list(args: TicketsArgs) -> i32 {
    let root = match &args.root {
        None => None,
        Some(r) => match std::fs::canonicalize(r) {
            Ok(p) => Some(p.display().to_string()),
            Err(e) => return fail(format!("--root {}: {e}", r.display())),
        },
    };
    let (mut client, _) = match Client::start(&args.db.path()).await {
        Ok(c) => c,
        Err(e) => return fail(e.message),
    };
    let result = client
        .call::<ListTickets>(ListTicketsParams {
            root: root.clone(),
            ..Default::default()
        })
        .await;
    client.shutdown().await;
    let tickets = match result {
        Ok(r) => r.tickets,
        Err(e) => return fail(e.message),
    };
    if tickets.is_empty() {
        super::output::note_line(match root {
            Some(_) => "No tickets for this root yet. Plan one: planwire plan --root DIR --title T",
            None => "No tickets yet. Plan one: planwire plan --root DIR --title T",
        });
        return 0;
    }
    print_lines(&table(&tickets, root.is_none()));
    0
}

/// One row per ticket: id, status, title, and the root when tickets of every root are listed.
fn table(tickets: &[Ticket], with_root: bool) -> Vec<String> {
    let id_w = tickets.iter().map(|t| t.id.to_string().len()).max().unwrap_or(2).max(2);
    let status_w = tickets
        .iter()
        .map(|t| t.status.as_str().len())
        .max()
        .unwrap_or(6)
        .max(6);
    let title_w = tickets
        .iter()
        .map(|t| t.title.chars().count().min(60))
        .max()
        .unwrap_or(5)
        .max(5);
    let row = |id: &str, status: &str, title: &str, root: &str| {
        let line = if with_root {
            format!("{id:>id_w$}  {status:<status_w$}  {title:<title_w$}  {root}")
        } else {
            format!("{id:>id_w$}  {status:<status_w$}  {title}")
        };
        line.trim_end().to_owned()
    };
    let mut lines = vec![row("ID", "STATUS", "TITLE", "ROOT")];
    for t in tickets {
        let title = crate::planners::truncate_chars(&t.title, 60);
        lines.push(row(&t.id.to_string(), t.status.as_str(), &title, &t.root));
    }
    lines
}

pub async fn show(args: ShowArgs) -> i32 {
    let (mut client, _) = match Client::start(&args.db.path()).await {
        Ok(c) => c,
        Err(e) => return fail(e.message),
    };
    let id = args.ticket;
    let result = client.call::<GetTicket>(TicketRef { ticket_id: id }).await;
    let plans = client.call::<ListPlans>(TicketRef { ticket_id: id }).await;
    client.shutdown().await;
    let (got, plans) = match (result, plans) {
        (Ok(g), Ok(p)) => (g, p.plans),
        (Err(e), _) | (_, Err(e)) => return fail(e.message),
    };
    let t = &got.ticket;
    let mut lines = vec![
        format!("Ticket {}: {}", t.id, t.title),
        format!("status:  {}", t.status.as_str()),
        format!("root:    {}", t.root),
        format!("planner: {}", tool_and_model(&t.tool, t.model.as_deref())),
    ];
    if let Some(branch) = &t.branch {
        lines.push(format!("branch:  {branch}"));
    }
    lines.push(format!("created: {}   updated: {}", t.created_at, t.updated_at));
    if let (Some(at), Some(tool)) = (&t.handed_off_at, &t.handed_off_tool) {
        lines.push(format!("handed off to {tool} at {at}"));
    }
    lines.push(format!("usage:   {}", usage_line(&got.usage)));
    lines.extend([String::new(), "Description:".into()]);
    if t.description.trim().is_empty() {
        lines.push("  (none)".into());
    } else {
        lines.extend(t.description.trim_end().lines().map(|l| format!("  {l}")));
    }
    lines.push(String::new());
    match (&t.plan, t.plan_version) {
        (Some(plan), version) => {
            if let Some(v) = version {
                lines.push(format!("Plan (version {v}):"));
                lines.push(String::new());
            }
            lines.extend(plan_markdown(plan).trim_end().lines().map(str::to_owned));
        }
        (None, _) => lines.push("No plan yet.".into()),
    }
    if plans.len() > 1 {
        lines.push(String::new());
        lines.push("Plan versions:".into());
        lines.extend(plans.iter().map(version_line));
    }
    let open: Vec<_> = t
        .open_questions
        .iter()
        .flat_map(|q| q.items.iter().map(move |i| (q.id, i)))
        .collect();
    if !open.is_empty() {
        lines.push(String::new());
        lines.push("Waiting for answers:".into());
        for (id, item) in open {
            lines.push(format!("  [question {id}] {}: {}", item.header, item.question));
        }
    }
    lines.push(String::new());
    if got.runs.is_empty() {
        lines.push("No runs yet.".into());
    } else {
        lines.push("Runs (newest first):".into());
        lines.extend(got.runs.iter().map(run_line));
    }
    print_lines(&lines);
    0
}

fn tool_and_model(tool: &str, model: Option<&str>) -> String {
    match model {
        Some(m) => format!("{tool} ({m})"),
        None => tool.to_owned(),
    }
}

fn run_line(r: &Run) -> String {
    let mut line = format!(
        "  run {}  {}  {}  started {}",
        r.id,
        r.status.as_str(),
        tool_and_model(&r.tool, r.model.as_deref()),
        r.started_at.as_deref().unwrap_or(&r.created_at),
    );
    if let Some(ended) = &r.ended_at {
        line.push_str(&format!("  ended {ended}"));
    }
    match (r.exit_code, r.signal) {
        (Some(code), _) => line.push_str(&format!("  exit {code}")),
        (None, Some(sig)) => line.push_str(&format!("  signal {sig}")),
        _ => {}
    }
    if let Some(t) = &r.timing {
        let ms = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), seconds);
        line.push_str(&format!(
            "\n      first output {}, first answer {}, total {}",
            ms(t.first_output_ms),
            ms(t.first_final_ms),
            seconds(t.total_ms)
        ));
    }
    if let Some(f) = &r.failure {
        line.push_str(&format!("\n      {}: {}", f.code, f.message));
    }
    line
}

fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

fn usage_line(u: &Usage) -> String {
    format!(
        "{} input + {} output tokens ({} cache read, {} cache write), ${:.4}",
        u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_usd
    )
}

fn version_line(v: &PlanVersion) -> String {
    let run = v.run_id.map_or_else(String::new, |r| format!("  run {r}"));
    format!("  v{}  {}{run}  {}", v.version, v.created_at, v.plan.title)
}

pub async fn export(args: ExportArgs) -> i32 {
    let (mut client, _) = match Client::start(&args.db.path()).await {
        Ok(c) => c,
        Err(e) => return fail(e.message),
    };
    let params = ExportPlanParams {
        ticket_id: args.ticket,
        version: args.version,
        path: args.path,
        overwrite: args.overwrite,
        dry_run: false,
    };
    let result = client.call::<ExportPlan>(params).await;
    client.shutdown().await;
    match result {
        Ok(r) => {
            print_lines(&[r.path]);
            note_line(&format!("Wrote plan version {} ({} bytes).", r.version, r.bytes));
            0
        }
        Err(e) if e.code == ErrorCode::Conflict.code() => fail(format!("{}; --overwrite replaces it", e.message)),
        Err(e) => fail(e.message),
    }
}

//! Slash commands of a planwire session, announced with `available_commands_update`:
//! `/replan`, `/fresh`, `/breakdown`, `/tickets`, `/status`.

use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate, StopReason,
    UnstructuredCommandInput,
};
use planwire_protocol::{
    Breakdown, BreakdownParams, GetTicket, ListTickets, ListTicketsParams, RunStatus, Status, StatusParams, TicketRef,
};
use tokio::sync::watch;

use super::backend::Key;
use super::render::agent_text;
use super::session::{ticket_session, Session};
use super::turn::{self, Ended};
use super::{invalid, Agent};
use crate::transport::ResponseError;

const COMMANDS: &[(&str, &str, Option<&str>)] = &[
    ("replan", "Plan this ticket again, resuming the planner's session", None),
    ("fresh", "Plan this ticket again in a new planner session", None),
    (
        "breakdown",
        "Break an initiative into dependent tickets, each with its plan",
        Some("the initiative"),
    ),
    ("tickets", "List the tickets of this project", None),
    ("status", "Show this ticket's status and runs", None),
];

pub fn announce() -> Vec<SessionUpdate> {
    let commands = COMMANDS
        .iter()
        .map(|(name, description, hint)| {
            let c = AvailableCommand::new(*name, *description);
            match hint {
                Some(h) => c.input(AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(*h))),
                None => c,
            }
        })
        .collect();
    vec![SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(
        commands,
    ))]
}

/// `/name rest` when `name` is one of ours.
pub fn parse(text: &str) -> Option<(&str, &str)> {
    let text = text.trim_start().strip_prefix('/')?;
    let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    COMMANDS.iter().any(|(n, _, _)| *n == name).then(|| (name, rest.trim()))
}

pub async fn run(
    agent: &Arc<Agent>,
    session: &Arc<Session>,
    name: &str,
    rest: &str,
    cancel: watch::Receiver<u64>,
) -> Result<StopReason, ResponseError> {
    let sid = session.acp_id();
    let ticket = session.state().ticket;
    match (name, ticket) {
        ("replan" | "fresh", Some(t)) => turn::replan(agent, session, t, name == "fresh", cancel).await,
        ("replan" | "fresh", None) => {
            let text = "There is no plan yet: describe the ticket (its first line is the title) to plan it.";
            agent.update(&sid, vec![agent_text(text)]).await;
            Ok(StopReason::EndTurn)
        }
        ("breakdown", _) => breakdown(agent, session, rest, cancel).await,
        ("tickets", _) => {
            let text = tickets(agent, &session.cwd).await?;
            agent.update(&sid, vec![agent_text(text)]).await;
            Ok(StopReason::EndTurn)
        }
        _ => {
            let text = status(agent, ticket).await?;
            agent.update(&sid, vec![agent_text(text)]).await;
            Ok(StopReason::EndTurn)
        }
    }
}

async fn tickets(agent: &Agent, root: &str) -> Result<String, ResponseError> {
    let list = agent
        .backend
        .call::<ListTickets>(ListTicketsParams {
            root: Some(root.to_owned()),
            ..ListTicketsParams::default()
        })
        .await?;
    if list.tickets.is_empty() {
        return Ok(format!("No tickets in {root} yet."));
    }
    let mut text = format!("Tickets in {root} (load one as a session by its id):\n");
    for t in &list.tickets {
        text.push_str(&format!(
            "\n- `{}` {} ({})",
            ticket_session(t.id),
            t.title,
            t.status.as_str()
        ));
    }
    Ok(text)
}

async fn status(agent: &Agent, ticket: Option<i64>) -> Result<String, ResponseError> {
    let Some(ticket) = ticket else {
        let s = agent.backend.call::<Status>(StatusParams { ticket_id: None }).await?;
        let usable: Vec<String> = s
            .planners
            .iter()
            .filter(|p| p.supported)
            .map(|p| p.tool.clone())
            .collect();
        return Ok(format!(
            "No ticket yet in this session. {} active run(s) in the database; usable planners: {}.",
            s.active_runs.len(),
            usable.join(", ")
        ));
    };
    let got = agent.backend.call::<GetTicket>(TicketRef { ticket_id: ticket }).await?;
    let t = &got.ticket;
    let mut text = format!(
        "`{}` {}: {} (planner {}).",
        ticket_session(t.id),
        t.title,
        t.status.as_str(),
        t.tool
    );
    for run in got.runs.iter().take(5) {
        let failure = run
            .failure
            .as_ref()
            .map(|f| format!(": {}", f.message))
            .unwrap_or_default();
        text.push_str(&format!(
            "\n- run {} {} {}{failure}",
            run.id,
            run.status.as_str(),
            run.started_at.as_deref().unwrap_or("")
        ));
    }
    if !t.open_questions.is_empty() {
        text.push_str(&format!("\n{} open question(s).", t.open_questions.len()));
    }
    Ok(text)
}

/// `/breakdown TEXT`: one breakdown run; its tickets are announced as sessions to load.
async fn breakdown(
    agent: &Arc<Agent>,
    session: &Arc<Session>,
    text: &str,
    mut cancel: watch::Receiver<u64>,
) -> Result<StopReason, ResponseError> {
    if text.is_empty() {
        return Err(invalid("/breakdown needs the initiative: /breakdown <what to build>"));
    }
    let sid = session.acp_id();
    let state = session.state();
    let run = agent
        .backend
        .call::<Breakdown>(BreakdownParams {
            root: session.cwd.clone(),
            description: text.to_owned(),
            tool: Some(state.tool.clone()),
            model: state.model.clone(),
            variant: None,
        })
        .await?
        .run_id;
    let mut sub = agent.backend.subscribe(&[Key::Run(run)]);
    let ended = match turn::stream_run(agent, session, None, run, &mut sub, &mut cancel).await? {
        Ended::Run { run, .. } => run,
        Ended::Waiting => return Ok(StopReason::EndTurn),
    };
    if ended.status == RunStatus::Cancelled {
        agent
            .update(&sid, vec![agent_text("\n\nThe breakdown was stopped.")])
            .await;
        return Ok(StopReason::Cancelled);
    }
    let created = agent
        .backend
        .call::<ListTickets>(ListTicketsParams {
            initiative_run_id: Some(run),
            ..ListTicketsParams::default()
        })
        .await?
        .tickets;
    let text = if created.is_empty() {
        let why = ended.failure.map(|f| f.message).unwrap_or_else(|| "no tickets".into());
        format!("\n\nThe breakdown created no tickets: {why}")
    } else {
        let mut text = format!(
            "\n\nThe breakdown created {} tickets, each planned. Load one as a session by its id:\n",
            created.len()
        );
        for t in &created {
            let deps: Vec<String> = t
                .depends_on
                .iter()
                .map(|d| format!("`{}`", ticket_session(*d)))
                .collect();
            let deps = if deps.is_empty() {
                String::new()
            } else {
                format!(", after {}", deps.join(", "))
            };
            text.push_str(&format!("\n- `{}` {}{deps}", ticket_session(t.id), t.title));
        }
        text
    };
    agent.update(&sid, vec![agent_text(text)]).await;
    Ok(StopReason::EndTurn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_commands_parse() {
        assert_eq!(
            parse("/breakdown Serve it over HTTP"),
            Some(("breakdown", "Serve it over HTTP"))
        );
        assert_eq!(parse("  /replan"), Some(("replan", "")));
        assert_eq!(parse("/unknown thing"), None);
        assert_eq!(parse("plain text /replan"), None);
        let v = serde_json::to_value(&announce()[0]).unwrap();
        assert_eq!(v["sessionUpdate"], "available_commands_update");
        assert_eq!(v["availableCommands"].as_array().unwrap().len(), 5);
        assert_eq!(v["availableCommands"][2]["input"]["hint"], "the initiative");
    }
}

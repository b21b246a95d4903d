//! History: `session/list` lists tickets, `session/load` replays one (its conversation and the
//! transcript of each run, in order) before it answers, and `session/resume` binds one
//! without a replay.

use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ListSessionsRequest, ListSessionsResponse, LoadSessionResponse, SessionInfo, SessionUpdate,
};
use planwire_protocol::{
    ErrorCode, GetTicket, GetTicketResult, ListTickets, ListTicketsParams, RunId, Ticket, TicketRef,
};

use super::render::{self, RunStream};
use super::session::{self, ticket_of, ticket_session, Session};
use super::turn::catch_up;
use super::Agent;
use crate::transport::ResponseError;

/// Sessions per `session/list` page.
const PAGE: usize = 50;

pub async fn list(agent: &Agent, req: ListSessionsRequest) -> Result<ListSessionsResponse, ResponseError> {
    let root = req.cwd.map(|c| c.display().to_string());
    let mut tickets = agent
        .backend
        .call::<ListTickets>(ListTicketsParams {
            root,
            ..ListTicketsParams::default()
        })
        .await?
        .tickets;
    let (page, next) = page(&mut tickets, req.cursor.as_deref(), PAGE)?;
    let sessions = page.into_iter().map(info).collect();
    Ok(ListSessionsResponse::new(sessions).next_cursor(next))
}

/// One page of tickets, newest first; the cursor is the last (updatedAt, id) of the
/// previous page, so a ticket changed meanwhile is neither skipped nor repeated twice.
fn page<'a>(
    tickets: &'a mut [Ticket],
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<&'a Ticket>, Option<String>), ResponseError> {
    tickets.sort_by(|a, b| (&b.updated_at, b.id).cmp(&(&a.updated_at, a.id)));
    let start = match cursor.map(parse_cursor) {
        None => 0,
        Some(Some((at, id))) => tickets
            .iter()
            .position(|t| (t.updated_at.as_str(), t.id) < (at.as_str(), id))
            .unwrap_or(tickets.len()),
        Some(None) => return Err(super::invalid("session/list: this cursor is not one planwire gave")),
    };
    let page: Vec<&Ticket> = tickets.iter().skip(start).take(size).collect();
    let next = (start + page.len() < tickets.len())
        .then(|| page.last().map(|t| format!("{}|{}", t.updated_at, t.id)))
        .flatten();
    Ok((page, next))
}

fn parse_cursor(cursor: &str) -> Option<(String, i64)> {
    let (at, id) = cursor.rsplit_once('|')?;
    Some((at.to_owned(), id.parse().ok()?))
}

fn info(t: &Ticket) -> SessionInfo {
    SessionInfo::new(ticket_session(t.id), t.root.clone())
        .title(t.title.clone())
        .updated_at(t.updated_at.clone())
}

/// `session/load` (with `replay`) or `session/resume`; returns the answer and the session's id.
pub async fn load(agent: &Arc<Agent>, id: &str, replay: bool) -> Result<(LoadSessionResponse, String), ResponseError> {
    let known = session::lookup(&agent.sessions.lock().expect("sessions"), id);
    let ticket = match (&known, ticket_of(id)) {
        (Some(s), _) => s.state().ticket,
        (None, t) => t,
    };
    let Some(ticket) = ticket else {
        return Err(ResponseError::new(
            ErrorCode::InvalidParams,
            format!("unknown session {id}: it has no ticket yet (a draft lives only in its own process)"),
        ));
    };
    let got = agent.backend.call::<GetTicket>(TicketRef { ticket_id: ticket }).await?;
    let session = match known {
        Some(s) => s,
        None => {
            let defaults = (got.ticket.tool.clone(), got.ticket.model.clone());
            let s = Session::new(got.ticket.root.clone(), Some(ticket), defaults);
            agent.sessions.lock().expect("sessions").insert(s.key(), s.clone());
            s
        }
    };
    if replay {
        replay_ticket(agent, &session, &got).await;
    }
    let response = LoadSessionResponse::new()
        .modes(session::modes())
        .config_options(session.config_options(&agent.planners));
    Ok((response, session.acp_id()))
}

/// The ticket's conversation in order, each run's transcript where the run comes in.
async fn replay_ticket(agent: &Agent, session: &Session, got: &GetTicketResult) {
    let sid = session.acp_id();
    let mut runs: Vec<RunId> = got.runs.iter().map(|r| r.id).collect();
    runs.sort_unstable();
    let mut replayed: Vec<RunId> = Vec::new();
    for m in &got.messages {
        if let Some(run) = m.run_id {
            // The runs before the message come first: the person's words (feedback) before
            // the run that took them, planwire's (a plan, an error) after the run they end.
            let users = matches!(render::message(m), Some(SessionUpdate::UserMessageChunk(_)));
            let before = |r: &RunId| if users { *r < run } else { *r <= run };
            for r in runs
                .iter()
                .copied()
                .filter(|r| before(r) && !replayed.contains(r))
                .collect::<Vec<_>>()
            {
                replay_run(agent, session, r).await;
                replayed.push(r);
            }
        }
        let mut updates: Vec<SessionUpdate> = render::message(m).into_iter().collect();
        if m.kind == "plan" {
            if let Some(plan) = plan_of_message(got, m.run_id) {
                updates.push(plan);
            }
        }
        agent.update(&sid, updates).await;
    }
    for r in runs.into_iter().filter(|r| !replayed.contains(r)) {
        replay_run(agent, session, r).await;
    }
}

/// The `plan` entries of the ticket's current plan, for its latest plan message only.
fn plan_of_message(got: &GetTicketResult, run: Option<RunId>) -> Option<SessionUpdate> {
    let last_plan_run = got.messages.iter().rev().find(|m| m.kind == "plan")?.run_id;
    (last_plan_run == run)
        .then(|| got.ticket.plan.as_ref().map(render::plan_update))
        .flatten()
}

async fn replay_run(agent: &Agent, session: &Session, run: RunId) {
    let mut stream = RunStream::new(run, 0);
    catch_up(agent, &session.acp_id(), &mut stream).await;
    session.with_state(|s| {
        s.seen.insert(run, stream.last_seq);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwire_protocol::TicketStatus;

    fn ticket(id: i64, updated: &str) -> Ticket {
        Ticket {
            id,
            root: "/p".into(),
            title: format!("t{id}"),
            description: String::new(),
            status: TicketStatus::Draft,
            tool: "script".into(),
            model: None,
            variant: None,
            created_at: updated.into(),
            updated_at: updated.into(),
            plan: None,
            open_questions: vec![],
            depends_on: vec![],
            initiative_run_id: None,
            branch: None,
            plan_version: None,
            handed_off_at: None,
            handed_off_tool: None,
        }
    }

    #[test]
    fn pages_are_newest_first_and_the_cursor_continues_exactly() {
        let mut all = vec![
            ticket(1, "2026-01-01"),
            ticket(2, "2026-01-03"),
            ticket(3, "2026-01-02"),
            ticket(4, "2026-01-03"),
        ];
        let (first, next) = page(&mut all, None, 2).unwrap();
        assert_eq!(first.iter().map(|t| t.id).collect::<Vec<_>>(), [4, 2]);
        let cursor = next.unwrap();
        let (second, next) = page(&mut all, Some(&cursor), 2).unwrap();
        assert_eq!(second.iter().map(|t| t.id).collect::<Vec<_>>(), [3, 1]);
        assert_eq!(next, None);
        assert!(page(&mut all, Some("garbage"), 2).is_err());
    }
}

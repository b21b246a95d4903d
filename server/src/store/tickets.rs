//! Projects, tickets and the ticket's conversation (messages).

use planwire_protocol::{Message, Plan, Ticket, TicketId, TicketStatus};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{questions, Result, StoreError};
use crate::util::now;

pub struct NewTicket {
    pub root: String,
    pub title: String,
    pub description: String,
    pub tool: String,
    pub model: Option<String>,
    pub variant: Option<String>,
}

pub fn project_id(conn: &Connection, root: &str) -> Result<i64> {
    conn.execute(
        "INSERT INTO projects (root, created_at) VALUES (?1, ?2) ON CONFLICT(root) DO NOTHING",
        params![root, now()],
    )?;
    Ok(conn.query_row("SELECT id FROM projects WHERE root = ?1", [root], |r| r.get(0))?)
}

pub fn create(conn: &Connection, t: &NewTicket) -> Result<TicketId> {
    let project = project_id(conn, &t.root)?;
    let ts = now();
    conn.execute(
        "INSERT INTO tickets (project_id, title, description, status, tool, model, variant, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'draft', ?4, ?5, ?6, ?7, ?7)",
        params![project, t.title, t.description, t.tool, t.model, t.variant, ts],
    )?;
    let id = conn.last_insert_rowid();
    add_message(
        conn,
        id,
        None,
        "description",
        &format!("# {}\n\n{}", t.title, t.description),
    )?;
    Ok(id)
}

const SELECT: &str = "SELECT t.id, p.root, t.title, t.description, t.status, t.tool, t.model, t.variant,
    t.created_at, t.updated_at, t.plan_json, t.initiative_run_id FROM tickets t JOIN projects p ON p.id = t.project_id";

fn from_row(r: &Row) -> rusqlite::Result<Ticket> {
    let status: String = r.get(4)?;
    let plan: Option<String> = r.get(10)?;
    Ok(Ticket {
        id: r.get(0)?,
        root: r.get(1)?,
        title: r.get(2)?,
        description: r.get(3)?,
        status: TicketStatus::parse(&status).unwrap_or(TicketStatus::Draft),
        tool: r.get(5)?,
        model: r.get(6)?,
        variant: r.get(7)?,
        created_at: r.get(8)?,
        updated_at: r.get(9)?,
        plan: plan.and_then(|p| serde_json::from_str::<Plan>(&p).ok()),
        open_questions: Vec::new(),
        depends_on: Vec::new(),
        initiative_run_id: r.get(11)?,
    })
}

pub fn get(conn: &Connection, id: TicketId) -> Result<Ticket> {
    let mut ticket = conn
        .query_row(&format!("{SELECT} WHERE t.id = ?1"), [id], from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("ticket {id}")))?;
    ticket.open_questions = questions::open_for_ticket(conn, id)?;
    ticket.depends_on = depends_on(conn, id)?;
    Ok(ticket)
}

/// Which tickets [`list`] returns.
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter<'a> {
    pub root: Option<&'a str>,
    pub initiative: Option<i64>,
    pub after_id: Option<TicketId>,
    pub limit: Option<u32>,
}

pub fn list(conn: &Connection, f: Filter) -> Result<Vec<Ticket>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE (?1 IS NULL OR p.root = ?1) AND (?2 IS NULL OR t.initiative_run_id = ?2) AND t.id > ?3
         ORDER BY t.id LIMIT ?4"
    ))?;
    let limit = f.limit.map_or(-1, i64::from);
    let params = params![f.root, f.initiative, f.after_id.unwrap_or(0), limit];
    let mut tickets = stmt
        .query_map(params, from_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut open = questions::open_by_ticket(conn, f.root)?;
    let mut deps = all_depends_on(conn)?;
    for t in &mut tickets {
        t.open_questions = open.remove(&t.id).unwrap_or_default();
        t.depends_on = deps.remove(&t.id).unwrap_or_default();
    }
    Ok(tickets)
}

pub fn depends_on(conn: &Connection, id: TicketId) -> Result<Vec<TicketId>> {
    let mut stmt =
        conn.prepare_cached("SELECT depends_on FROM ticket_deps WHERE ticket_id = ?1 ORDER BY depends_on")?;
    let rows = stmt.query_map([id], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn all_depends_on(conn: &Connection) -> Result<std::collections::HashMap<TicketId, Vec<TicketId>>> {
    let mut stmt =
        conn.prepare_cached("SELECT ticket_id, depends_on FROM ticket_deps ORDER BY ticket_id, depends_on")?;
    let mut map: std::collections::HashMap<TicketId, Vec<TicketId>> = Default::default();
    for row in stmt.query_map([], |r| Ok((r.get::<_, TicketId>(0)?, r.get::<_, TicketId>(1)?)))? {
        let (t, d) = row?;
        map.entry(t).or_default().push(d);
    }
    Ok(map)
}

/// A ticket a breakdown created: planned, with its plan, linked to the breakdown run.
pub fn create_planned(conn: &Connection, t: &NewTicket, plan: &Plan, initiative: i64) -> Result<TicketId> {
    let id = create(conn, t)?;
    set_plan(conn, id, plan)?;
    conn.execute(
        "UPDATE tickets SET status = 'planned', initiative_run_id = ?2 WHERE id = ?1",
        params![id, initiative],
    )?;
    add_message(
        conn,
        id,
        Some(initiative),
        "plan",
        &crate::planners::plan::plan_markdown(plan),
    )?;
    Ok(id)
}

/// Deletes a ticket and all that was recorded for it; refused while a run is active.
/// Returns the tickets that depended on it.
pub fn delete(conn: &Connection, id: TicketId) -> Result<Vec<TicketId>> {
    status(conn, id)?; // not found → error
    let active: i64 = conn.query_row(
        "SELECT COUNT(*) FROM runs WHERE ticket_id = ?1 AND status IN ('queued', 'running')",
        [id],
        |r| r.get(0),
    )?;
    if active > 0 {
        return Err(StoreError::Busy(id));
    }
    let dependents: Vec<TicketId> = {
        let mut stmt = conn.prepare("SELECT ticket_id FROM ticket_deps WHERE depends_on = ?1")?;
        let rows = stmt.query_map([id], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for sql in [
        "DELETE FROM transcript WHERE run_id IN (SELECT id FROM runs WHERE ticket_id = ?1)",
        "DELETE FROM agent_runs WHERE run_id IN (SELECT id FROM runs WHERE ticket_id = ?1)",
        "DELETE FROM run_events WHERE run_id IN (SELECT id FROM runs WHERE ticket_id = ?1)",
        "DELETE FROM questions WHERE ticket_id = ?1",
        "DELETE FROM messages WHERE ticket_id = ?1",
        "DELETE FROM ticket_deps WHERE ticket_id = ?1 OR depends_on = ?1",
        "DELETE FROM runs WHERE ticket_id = ?1",
        "DELETE FROM tickets WHERE id = ?1",
    ] {
        conn.execute(sql, [id])?;
    }
    Ok(dependents)
}

pub fn add_dependency(conn: &Connection, ticket: TicketId, depends_on: TicketId) -> Result<()> {
    conn.execute(
        "INSERT OR IGNORE INTO ticket_deps (ticket_id, depends_on) VALUES (?1, ?2)",
        params![ticket, depends_on],
    )?;
    Ok(())
}

pub fn status(conn: &Connection, id: TicketId) -> Result<TicketStatus> {
    let s: String = conn
        .query_row("SELECT status FROM tickets WHERE id = ?1", [id], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("ticket {id}")))?;
    Ok(TicketStatus::parse(&s).unwrap_or(TicketStatus::Draft))
}

pub fn set_status(conn: &Connection, id: TicketId, status: TicketStatus) -> Result<()> {
    conn.execute(
        "UPDATE tickets SET status = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, status.as_str(), now()],
    )?;
    Ok(())
}

pub fn set_plan(conn: &Connection, id: TicketId, plan: &Plan) -> Result<()> {
    let json = serde_json::to_string(plan).expect("a plan serializes");
    conn.execute(
        "UPDATE tickets SET plan_json = ?2, updated_at = ?3 WHERE id = ?1",
        params![id, json, now()],
    )?;
    Ok(())
}

/// The provider session a ticket continues: (tool, session id).
pub fn session(conn: &Connection, id: TicketId) -> Result<Option<(String, String)>> {
    Ok(conn
        .query_row(
            "SELECT session_tool, session_id FROM tickets WHERE id = ?1 AND session_id IS NOT NULL",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

pub fn set_session(conn: &Connection, id: TicketId, tool: &str, session_id: &str) -> Result<()> {
    conn.execute(
        "UPDATE tickets SET session_tool = ?2, session_id = ?3 WHERE id = ?1",
        params![id, tool, session_id],
    )?;
    Ok(())
}

pub fn add_message(conn: &Connection, ticket: TicketId, run: Option<i64>, kind: &str, text: &str) -> Result<i64> {
    conn.execute(
        "INSERT INTO messages (ticket_id, run_id, kind, text, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![ticket, run, kind, text, now()],
    )?;
    Ok(conn.last_insert_rowid())
}

pub fn messages(conn: &Connection, ticket: TicketId) -> Result<Vec<Message>> {
    let mut stmt = conn
        .prepare_cached("SELECT id, kind, text, run_id, created_at FROM messages WHERE ticket_id = ?1 ORDER BY id")?;
    let rows = stmt.query_map([ticket], |r| {
        Ok(Message {
            id: r.get(0)?,
            kind: r.get(1)?,
            text: r.get(2)?,
            run_id: r.get(3)?,
            created_at: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn counts(conn: &Connection) -> Result<(u64, u64)> {
    Ok(conn.query_row(
        "SELECT (SELECT COUNT(*) FROM tickets), (SELECT COUNT(*) FROM runs)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn new_ticket(conn: &Connection) -> TicketId {
        create(
            conn,
            &NewTicket {
                root: "/tmp/x".into(),
                title: "T".into(),
                description: "D".into(),
                tool: "script".into(),
                model: None,
                variant: None,
            },
        )
        .unwrap()
    }

    #[test]
    fn create_get_list() {
        let conn = crate::store::test_conn();
        let id = new_ticket(&conn);
        let t = get(&conn, id).unwrap();
        assert_eq!((t.title.as_str(), t.status), ("T", TicketStatus::Draft));
        assert_eq!(
            list(
                &conn,
                Filter {
                    root: Some("/tmp/x"),
                    ..Filter::default()
                }
            )
            .unwrap()
            .len(),
            1
        );
        assert_eq!(
            list(
                &conn,
                Filter {
                    root: Some("/elsewhere"),
                    ..Filter::default()
                }
            )
            .unwrap()
            .len(),
            0
        );
        assert_eq!(messages(&conn, id).unwrap()[0].kind, "description");
        assert!(matches!(get(&conn, 999), Err(StoreError::NotFound(_))));
    }
}

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
    t.created_at, t.updated_at, t.plan_json, t.initiative_run_id, t.branch, t.plan_version, t.handed_off_at,
    t.handed_off_tool FROM tickets t JOIN projects p ON p.id = t.project_id";

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
        branch: r.get(12)?,
        plan_version: r.get(13)?,
        handed_off_at: r.get(14)?,
        handed_off_tool: r.get(15)?,
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
    super::plans::record(conn, id, Some(initiative), plan)?;
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
        "DELETE FROM plan_versions WHERE ticket_id = ?1",
        // Accepted suggestions live on as memory entries, which name no ticket.
        "DELETE FROM memory_suggestions WHERE ticket_id = ?1",
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

/// What `planwire/updateTicket` changes; `None` keeps a field. For the optional fields,
/// `Some(None)` clears them.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    pub title: Option<String>,
    pub description: Option<String>,
    pub tool: Option<String>,
    pub model: Option<Option<String>>,
    pub variant: Option<Option<String>>,
    pub branch: Option<Option<String>>,
}

/// Applies an edit, refused (busy) while a run of the ticket is active, and records it as an
/// `edit` message that says what changed. Returns false when nothing changed (no message).
pub fn update(conn: &Connection, id: TicketId, e: &Edit) -> Result<bool> {
    super::runs::ensure_idle(conn, id)?;
    let t = get(conn, id)?;
    let none = || "none".to_owned();
    let shown = |v: &Option<String>| v.clone().unwrap_or_else(none);
    let mut lines = Vec::new();
    let mut changed = |label: &str, old: String, new: Option<String>| match new {
        Some(new) if new != old => {
            lines.push(format!("{label}: {old} → {new}"));
            true
        }
        _ => false,
    };
    let title = changed("Title", t.title.clone(), e.title.clone());
    let tool = changed("Planner", t.tool.clone(), e.tool.clone());
    let model = changed("Model", shown(&t.model), e.model.as_ref().map(shown));
    let variant = changed("Variant", shown(&t.variant), e.variant.as_ref().map(shown));
    let branch = changed("Branch", shown(&t.branch), e.branch.as_ref().map(shown));
    let description = e.description.as_ref().filter(|d| **d != t.description);
    if let Some(d) = description {
        let d = if d.trim().is_empty() { "(no description)" } else { d };
        let gap = if lines.is_empty() { "" } else { "\n" };
        lines.push(format!("{gap}Description:\n\n{d}"));
    }
    if !(title || tool || model || variant || branch || description.is_some()) {
        return Ok(false);
    }
    let pick = |edited: bool, new: &Option<Option<String>>, old: &Option<String>| {
        if edited {
            new.clone().flatten()
        } else {
            old.clone()
        }
    };
    conn.execute(
        "UPDATE tickets SET title = ?2, description = ?3, tool = ?4, model = ?5, variant = ?6, branch = ?7,
            updated_at = ?8 WHERE id = ?1",
        params![
            id,
            e.title.as_ref().filter(|_| title).unwrap_or(&t.title),
            description.unwrap_or(&t.description),
            e.tool.as_ref().filter(|_| tool).unwrap_or(&t.tool),
            pick(model, &e.model, &t.model),
            pick(variant, &e.variant, &t.variant),
            pick(branch, &e.branch, &t.branch),
            now()
        ],
    )?;
    add_message(
        conn,
        id,
        None,
        "edit",
        &format!("The ticket was edited.\n\n{}", lines.join("\n")),
    )?;
    Ok(true)
}

pub fn set_branch(conn: &Connection, id: TicketId, branch: Option<&str>) -> Result<()> {
    conn.execute("UPDATE tickets SET branch = ?2 WHERE id = ?1", params![id, branch])?;
    Ok(())
}

/// Records that a plan version was handed off to an implementation CLI.
pub fn record_handoff(conn: &Connection, id: TicketId, tool: &str, version: u32) -> Result<()> {
    let ts = now();
    conn.execute(
        "UPDATE tickets SET handed_off_at = ?2, handed_off_tool = ?3, updated_at = ?2 WHERE id = ?1",
        params![id, ts, tool],
    )?;
    let text = format!("Plan version {version} was handed off to {tool} for implementation.");
    add_message(conn, id, None, "handoff", &text)?;
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

/// Ties a message written before its run started to that run.
pub fn set_message_run(conn: &Connection, message: i64, run: i64) -> Result<()> {
    conn.execute("UPDATE messages SET run_id = ?2 WHERE id = ?1", params![message, run])?;
    Ok(())
}

pub fn delete_message(conn: &Connection, message: i64) -> Result<()> {
    conn.execute("DELETE FROM messages WHERE id = ?1", [message])?;
    Ok(())
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
    fn an_edit_is_a_message_and_refused_while_a_run_is_active() {
        let conn = crate::store::test_conn();
        let id = new_ticket(&conn);
        assert!(!update(&conn, id, &Edit::default()).unwrap(), "nothing to change");
        let same = Edit {
            title: Some("T".into()),
            ..Edit::default()
        };
        assert!(!update(&conn, id, &same).unwrap(), "the same title is no change");
        let edit = Edit {
            title: Some("New".into()),
            description: Some("Longer\ntext".into()),
            model: Some(Some("opus".into())),
            branch: Some(Some("feature/x".into())),
            ..Edit::default()
        };
        assert!(update(&conn, id, &edit).unwrap());
        let t = get(&conn, id).unwrap();
        assert_eq!(
            (
                t.title.as_str(),
                t.description.as_str(),
                t.model.as_deref(),
                t.branch.as_deref(),
                t.tool.as_str()
            ),
            ("New", "Longer\ntext", Some("opus"), Some("feature/x"), "script")
        );
        let m = messages(&conn, id).unwrap().pop().unwrap();
        assert_eq!(m.kind, "edit");
        assert_eq!(
            m.text,
            "The ticket was edited.\n\nTitle: T → New\nModel: none → opus\nBranch: none → feature/x\n\n\
             Description:\n\nLonger\ntext"
        );
        let clear = Edit {
            model: Some(None),
            ..Edit::default()
        };
        assert!(update(&conn, id, &clear).unwrap());
        assert_eq!(get(&conn, id).unwrap().model, None);

        let (pid, start) = crate::util::self_identity();
        let owner = super::super::runs::Owner { pid, start };
        super::super::runs::create(&conn, &super::super::runs::tests::new_run(id), owner).unwrap();
        let before = messages(&conn, id).unwrap().len();
        assert!(matches!(update(&conn, id, &edit), Err(StoreError::Busy(_))));
        assert_eq!(get(&conn, id).unwrap().title, "New");
        assert_eq!(messages(&conn, id).unwrap().len(), before);
    }

    #[test]
    fn delete_takes_the_versions_and_memory_suggestions_along() {
        let conn = crate::store::test_conn();
        let id = new_ticket(&conn);
        let (pid, start) = crate::util::self_identity();
        let owner = super::super::runs::Owner { pid, start };
        let (run, _) = super::super::runs::create(&conn, &super::super::runs::tests::new_run(id), owner).unwrap();
        conn.execute("UPDATE runs SET status = 'completed' WHERE id = ?1", [run])
            .unwrap();
        super::super::plans::record(&conn, id, Some(run), &Plan::default()).unwrap();
        super::super::memory::record_suggestions(&conn, id, run, &["A fact.".to_owned()]).unwrap();
        delete(&conn, id).unwrap();
        for table in ["plan_versions", "memory_suggestions", "tickets", "runs"] {
            let n: i64 = conn
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 0, "{table}");
        }
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

//! Question records: open → answered | dismissed, or stale when the run that asked died.

use std::collections::HashMap;

use planwire_protocol::{Answer, Question, QuestionId, QuestionItem, QuestionSource, QuestionStatus, TicketId};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{Result, StoreError};
use crate::util::now;

const SELECT: &str = "SELECT id, ticket_id, run_id, status, source, items_json, answer_json FROM questions";

fn from_row(r: &Row) -> rusqlite::Result<Question> {
    let status: String = r.get(3)?;
    let source: String = r.get(4)?;
    let items: String = r.get(5)?;
    Ok(Question {
        id: r.get(0)?,
        ticket_id: r.get(1)?,
        run_id: r.get(2)?,
        status: QuestionStatus::parse(&status).unwrap_or(QuestionStatus::Open),
        source: QuestionSource::parse(&source).unwrap_or(QuestionSource::Plan),
        items: serde_json::from_str(&items).unwrap_or_default(),
        answers: r
            .get::<_, Option<String>>(6)?
            .and_then(|a| serde_json::from_str::<Vec<Answer>>(&a).ok())
            .filter(|a| !a.is_empty()),
    })
}

pub fn create(
    conn: &Connection,
    ticket: TicketId,
    run: i64,
    source: QuestionSource,
    items: &[QuestionItem],
    request_id: Option<&str>,
) -> Result<Question> {
    let json = serde_json::to_string(items).expect("items serialize");
    conn.execute(
        "INSERT INTO questions (ticket_id, run_id, source, status, items_json, request_id, created_at)
         VALUES (?1, ?2, ?3, 'open', ?4, ?5, ?6)",
        params![ticket, run, source.as_str(), json, request_id, now()],
    )?;
    get(conn, conn.last_insert_rowid())
}

pub fn get(conn: &Connection, id: QuestionId) -> Result<Question> {
    conn.query_row(&format!("{SELECT} WHERE id = ?1"), [id], from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("question {id}")))
}

/// The CLI's id of the control request a live question waits on.
pub fn request_id(conn: &Connection, id: QuestionId) -> Result<Option<String>> {
    Ok(conn
        .query_row("SELECT request_id FROM questions WHERE id = ?1", [id], |r| r.get(0))
        .optional()?
        .flatten())
}

pub fn for_ticket(conn: &Connection, ticket: TicketId) -> Result<Vec<Question>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} WHERE ticket_id = ?1 ORDER BY id"))?;
    let rows = stmt.query_map([ticket], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn open_for_ticket(conn: &Connection, ticket: TicketId) -> Result<Vec<Question>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE ticket_id = ?1 AND status IN ('open', 'stale') ORDER BY id"
    ))?;
    let rows = stmt.query_map([ticket], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn open_by_ticket(conn: &Connection, root: Option<&str>) -> Result<HashMap<TicketId, Vec<Question>>> {
    let mut stmt = conn.prepare_cached(
        "SELECT q.id, q.ticket_id, q.run_id, q.status, q.source, q.items_json, q.answer_json FROM questions q
         JOIN tickets t ON t.id = q.ticket_id JOIN projects p ON p.id = t.project_id
         WHERE q.status IN ('open', 'stale') AND (?1 IS NULL OR p.root = ?1) ORDER BY q.id",
    )?;
    let mut map: HashMap<TicketId, Vec<Question>> = HashMap::new();
    for q in stmt.query_map([root], from_row)? {
        let q = q?;
        map.entry(q.ticket_id).or_default().push(q);
    }
    Ok(map)
}

/// Settles an open or stale question; a second answer is a conflict.
pub fn settle(conn: &Connection, id: QuestionId, status: QuestionStatus, answers: &[Answer]) -> Result<Question> {
    let json = serde_json::to_string(answers).expect("answers serialize");
    let changed = conn.execute(
        "UPDATE questions SET status = ?2, answer_json = ?3, answered_at = ?4
         WHERE id = ?1 AND status IN ('open', 'stale')",
        params![id, status.as_str(), json, now()],
    )?;
    if changed == 0 {
        let q = get(conn, id)?;
        return Err(StoreError::Conflict(format!(
            "question {id} is already {}",
            q.status.as_str()
        )));
    }
    get(conn, id)
}

/// Undoes [`settle`] when what the answer was for could not start.
pub fn reopen(conn: &Connection, id: QuestionId, status: QuestionStatus) -> Result<()> {
    conn.execute(
        "UPDATE questions SET status = ?2, answer_json = NULL, answered_at = NULL WHERE id = ?1",
        params![id, status.as_str()],
    )?;
    Ok(())
}

/// Dismisses a ticket's open and stale questions; returns how many.
pub fn supersede(conn: &Connection, ticket: TicketId) -> Result<usize> {
    Ok(conn.execute(
        "UPDATE questions SET status = 'dismissed', answered_at = ?2 WHERE ticket_id = ?1 AND status IN ('open', 'stale')",
        params![ticket, now()],
    )?)
}

/// Marks the open questions of a run stale (its process is gone); returns how many.
pub fn mark_stale(conn: &Connection, run: i64) -> Result<usize> {
    Ok(conn.execute(
        "UPDATE questions SET status = 'stale' WHERE run_id = ?1 AND status = 'open'",
        [run],
    )?)
}

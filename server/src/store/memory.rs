//! Project memory: entries (facts and conventions put into planning prompts) and the
//! suggestions plans make for it (open → accepted | rejected).

use planwire_protocol::{
    MemoryEntry, MemoryEntryId, MemoryListResult, MemorySuggestion, MemorySuggestionId, MemorySuggestionStatus, RunId,
    TicketId, TicketMemorySuggestion,
};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{settings, tickets, Result, StoreError};
use crate::util::now;

/// The longest memory entry or suggestion, in characters.
pub const MAX_TEXT_CHARS: usize = 1000;
/// At most this many suggestions are kept from one plan.
pub const MAX_SUGGESTIONS_PER_RUN: usize = 10;

/// An entry the user added with `planwire/memory/add`.
pub const SOURCE_USER: &str = "user";
/// An entry made from an accepted suggestion.
pub const SOURCE_SUGGESTION: &str = "suggestion";

const SELECT_ENTRY: &str = "SELECT e.id, e.text, e.source, e.created_at FROM memory_entries e";
const SELECT_SUGGESTION: &str = "SELECT s.id, s.text, s.ticket_id, s.status, s.created_at FROM memory_suggestions s";

fn entry_row(r: &Row) -> rusqlite::Result<MemoryEntry> {
    Ok(MemoryEntry {
        id: r.get(0)?,
        text: r.get(1)?,
        source: r.get(2)?,
        created_at: r.get(3)?,
    })
}

fn suggestion_row(r: &Row) -> rusqlite::Result<MemorySuggestion> {
    let status: String = r.get(3)?;
    Ok(MemorySuggestion {
        id: r.get(0)?,
        text: r.get(1)?,
        ticket_id: r.get(2)?,
        status: MemorySuggestionStatus::parse(&status).unwrap_or(MemorySuggestionStatus::Open),
        created_at: r.get(4)?,
    })
}

/// The project's entries, newest first (empty for an unknown project).
pub fn entries(conn: &Connection, root: &str) -> Result<Vec<MemoryEntry>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT_ENTRY} JOIN projects p ON p.id = e.project_id WHERE p.root = ?1 ORDER BY e.id DESC"
    ))?;
    let rows = stmt.query_map([root], entry_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The project's suggestions in any status, newest first.
pub fn suggestions(conn: &Connection, root: &str) -> Result<Vec<MemorySuggestion>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT_SUGGESTION} JOIN projects p ON p.id = s.project_id WHERE p.root = ?1 ORDER BY s.id DESC"
    ))?;
    let rows = stmt.query_map([root], suggestion_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn list(conn: &Connection, root: &str) -> Result<MemoryListResult> {
    Ok(MemoryListResult {
        entries: entries(conn, root)?,
        suggestions: suggestions(conn, root)?,
    })
}

/// The suggestions made by a ticket's plans, oldest first.
pub fn for_ticket(conn: &Connection, ticket: TicketId) -> Result<Vec<TicketMemorySuggestion>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT_SUGGESTION} WHERE s.ticket_id = ?1 ORDER BY s.id"))?;
    let rows = stmt.query_map([ticket], suggestion_row)?;
    Ok(rows
        .map(|r| {
            r.map(|s| TicketMemorySuggestion {
                id: s.id,
                text: s.text,
                status: s.status,
            })
        })
        .collect::<rusqlite::Result<_>>()?)
}

fn insert_entry(conn: &Connection, project: i64, text: &str, source: &str) -> Result<MemoryEntry> {
    conn.execute(
        "INSERT INTO memory_entries (project_id, text, source, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![project, text, source, now()],
    )?;
    let id = conn.last_insert_rowid();
    Ok(conn.query_row(&format!("{SELECT_ENTRY} WHERE e.id = ?1"), [id], entry_row)?)
}

/// Adds an entry (the text as given: the caller trims and checks it).
pub fn add(conn: &Connection, root: &str, text: &str, source: &str) -> Result<MemoryEntry> {
    let project = tickets::project_id(conn, root)?;
    insert_entry(conn, project, text, source)
}

/// Removes an entry; false when there was none.
pub fn remove(conn: &Connection, id: MemoryEntryId) -> Result<bool> {
    Ok(conn.execute("DELETE FROM memory_entries WHERE id = ?1", [id])? > 0)
}

pub fn suggestion(conn: &Connection, id: MemorySuggestionId) -> Result<MemorySuggestion> {
    conn.query_row(&format!("{SELECT_SUGGESTION} WHERE s.id = ?1"), [id], suggestion_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("memory suggestion {id}")))
}

fn settle(conn: &Connection, id: MemorySuggestionId, to: MemorySuggestionStatus) -> Result<MemorySuggestion> {
    let s = suggestion(conn, id)?;
    if s.status != MemorySuggestionStatus::Open {
        return Err(StoreError::Conflict(format!(
            "memory suggestion {id} is already {}",
            s.status.as_str()
        )));
    }
    conn.execute(
        "UPDATE memory_suggestions SET status = ?2 WHERE id = ?1",
        params![id, to.as_str()],
    )?;
    Ok(MemorySuggestion { status: to, ..s })
}

/// Accepts an open suggestion: it becomes an entry of its project (source `suggestion`).
pub fn accept(conn: &Connection, id: MemorySuggestionId) -> Result<MemoryEntry> {
    let s = settle(conn, id, MemorySuggestionStatus::Accepted)?;
    let project: i64 = conn.query_row("SELECT project_id FROM memory_suggestions WHERE id = ?1", [id], |r| {
        r.get(0)
    })?;
    insert_entry(conn, project, &s.text, SOURCE_SUGGESTION)
}

/// Rejects an open suggestion.
pub fn reject(conn: &Connection, id: MemorySuggestionId) -> Result<MemorySuggestion> {
    settle(conn, id, MemorySuggestionStatus::Rejected)
}

/// Stores a plan's `memorySuggestions` as open suggestions of the ticket's project.
///
/// Nothing is stored when the project has memory turned off. Texts are trimmed; empty ones,
/// ones longer than [`MAX_TEXT_CHARS`], and ones the project already has as an entry or an
/// open suggestion (ignoring case) are dropped; at most [`MAX_SUGGESTIONS_PER_RUN`] are kept.
pub fn record_suggestions(conn: &Connection, ticket_id: TicketId, run_id: RunId, texts: &[String]) -> Result<()> {
    if texts.is_empty() || !settings::memory_enabled_for_ticket(conn, ticket_id)? {
        return Ok(());
    }
    let project: i64 = conn
        .query_row("SELECT project_id FROM tickets WHERE id = ?1", [ticket_id], |r| {
            r.get(0)
        })
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("ticket {ticket_id}")))?;
    let mut known: Vec<String> = {
        let mut stmt = conn.prepare_cached(
            "SELECT text FROM memory_entries WHERE project_id = ?1
             UNION ALL SELECT text FROM memory_suggestions WHERE project_id = ?1 AND status = 'open'",
        )?;
        let rows = stmt.query_map([project], |r| r.get::<_, String>(0))?;
        rows.map(|t| t.map(|t| t.to_lowercase()))
            .collect::<rusqlite::Result<_>>()?
    };
    let ts = now();
    let mut kept = 0;
    for text in texts {
        let text = text.trim();
        let key = text.to_lowercase();
        if text.is_empty() || text.chars().count() > MAX_TEXT_CHARS || known.contains(&key) {
            continue;
        }
        if kept == MAX_SUGGESTIONS_PER_RUN {
            break;
        }
        conn.execute(
            "INSERT INTO memory_suggestions (project_id, ticket_id, run_id, text, status, created_at)
             VALUES (?1, ?2, ?3, ?4, 'open', ?5)",
            params![project, ticket_id, run_id, text, ts],
        )?;
        known.push(key);
        kept += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::settings::{self, Changes};
    use crate::store::{test_conn, tickets::tests::new_ticket};

    const ROOT: &str = "/tmp/x";

    /// A run row, written directly so the test does not depend on how runs are created.
    fn new_run(conn: &Connection, ticket: TicketId) -> RunId {
        conn.execute(
            "INSERT INTO runs (ticket_id, status, tool, prev_ticket_status, created_at)
             VALUES (?1, 'completed', 'script', 'draft', ?2)",
            params![ticket, now()],
        )
        .unwrap();
        conn.last_insert_rowid()
    }

    fn texts(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn entries_are_added_listed_newest_first_and_removed() {
        let conn = test_conn();
        let a = add(&conn, ROOT, "Use tokio.", SOURCE_USER).unwrap();
        let b = add(&conn, ROOT, "Tests live in tests/e2e.", SOURCE_USER).unwrap();
        add(&conn, "/tmp/other", "Elsewhere.", SOURCE_USER).unwrap();
        assert_eq!((a.source.as_str(), a.text.as_str()), ("user", "Use tokio."));
        let listed = list(&conn, ROOT).unwrap();
        assert_eq!(listed.entries, [b.clone(), a.clone()]);
        assert!(listed.suggestions.is_empty());
        assert!(remove(&conn, a.id).unwrap());
        assert!(!remove(&conn, a.id).unwrap());
        assert_eq!(entries(&conn, ROOT).unwrap(), [b]);
        assert!(list(&conn, "/tmp/unknown").unwrap().entries.is_empty());
    }

    #[test]
    fn suggestions_are_recorded_cleaned_and_deduplicated() {
        let conn = test_conn();
        let ticket = new_ticket(&conn);
        let run = new_run(&conn, ticket);
        add(&conn, ROOT, "Use tokio.", SOURCE_USER).unwrap();
        let long = "x".repeat(MAX_TEXT_CHARS + 1);
        let given = texts(&[
            "  The CLI uses clap. ",
            "",
            "use TOKIO.",
            &long,
            "the cli uses clap.",
            "SQLite is bundled.",
        ]);
        record_suggestions(&conn, ticket, run, &given).unwrap();
        let s = suggestions(&conn, ROOT).unwrap();
        let got: Vec<&str> = s.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(got, ["SQLite is bundled.", "The CLI uses clap."]);
        assert!(s
            .iter()
            .all(|s| s.ticket_id == ticket && s.status == MemorySuggestionStatus::Open));
        // The same suggestion from a later run is not repeated while it is open.
        record_suggestions(&conn, ticket, new_run(&conn, ticket), &texts(&["SQLite is bundled."])).unwrap();
        assert_eq!(suggestions(&conn, ROOT).unwrap().len(), 2);
        let many: Vec<String> = (0..20).map(|i| format!("fact {i}")).collect();
        record_suggestions(&conn, ticket, new_run(&conn, ticket), &many).unwrap();
        assert_eq!(suggestions(&conn, ROOT).unwrap().len(), 2 + MAX_SUGGESTIONS_PER_RUN);
        let run_of: RunId = conn
            .query_row("SELECT run_id FROM memory_suggestions ORDER BY id LIMIT 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(run_of, run);
    }

    #[test]
    fn nothing_is_recorded_when_memory_is_off() {
        let conn = test_conn();
        let ticket = new_ticket(&conn);
        let run = new_run(&conn, ticket);
        let off = Changes {
            memory_enabled: Some(false),
            ..Changes::default()
        };
        settings::set(&conn, ROOT, off).unwrap();
        record_suggestions(&conn, ticket, run, &texts(&["A fact."])).unwrap();
        assert!(suggestions(&conn, ROOT).unwrap().is_empty());
    }

    #[test]
    fn accept_makes_an_entry_and_reject_settles() {
        let conn = test_conn();
        let ticket = new_ticket(&conn);
        let run = new_run(&conn, ticket);
        record_suggestions(&conn, ticket, run, &texts(&["Keep it.", "Drop it."])).unwrap();
        let s = suggestions(&conn, ROOT).unwrap();
        let (drop, keep) = (s[0].id, s[1].id);
        let entry = accept(&conn, keep).unwrap();
        assert_eq!(
            (entry.text.as_str(), entry.source.as_str()),
            ("Keep it.", SOURCE_SUGGESTION)
        );
        assert_eq!(entries(&conn, ROOT).unwrap(), [entry]);
        let rejected = reject(&conn, drop).unwrap();
        assert_eq!(rejected.status, MemorySuggestionStatus::Rejected);
        assert!(matches!(accept(&conn, keep), Err(StoreError::Conflict(_))));
        assert!(matches!(accept(&conn, drop), Err(StoreError::Conflict(_))));
        assert!(matches!(reject(&conn, keep), Err(StoreError::Conflict(_))));
        assert!(matches!(accept(&conn, 999), Err(StoreError::NotFound(_))));
        let on_ticket = for_ticket(&conn, ticket).unwrap();
        let statuses: Vec<_> = on_ticket.iter().map(|s| (s.text.as_str(), s.status)).collect();
        assert_eq!(
            statuses,
            [
                ("Keep it.", MemorySuggestionStatus::Accepted),
                ("Drop it.", MemorySuggestionStatus::Rejected)
            ]
        );
    }

    #[test]
    fn run_settings_are_recorded() {
        let conn = test_conn();
        let run = new_run(&conn, new_ticket(&conn));
        assert_eq!(settings::run_settings(&conn, run).unwrap(), None);
        settings::set_run_settings(&conn, run, "{\"memory\":[]}").unwrap();
        assert_eq!(
            settings::run_settings(&conn, run).unwrap().as_deref(),
            Some("{\"memory\":[]}")
        );
    }
}

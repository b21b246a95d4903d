//! The transcript: append-only numbered events, and the agent runs they belong to.
//! Streaming N bytes writes O(N) bytes: rows are inserted, never rewritten.

use planwire_protocol::{AgentRunId, EventBody, RunId, TicketId, TranscriptEvent, Usage};
use rusqlite::{params, Connection};

use super::Result;
use crate::util::now;

/// Appends a batch of events (already numbered, in order) and advances the run's `last_seq`.
/// Each event is serialized once, here; the JSON is returned so notifications send the same
/// bytes that were stored.
pub fn append(conn: &Connection, run: RunId, events: &[TranscriptEvent]) -> Result<Vec<String>> {
    let Some(last) = events.last() else {
        return Ok(Vec::new());
    };
    let mut stmt = conn.prepare_cached(
        "INSERT INTO transcript (run_id, seq, agent_run_id, kind, payload) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut payloads = Vec::with_capacity(events.len());
    for e in events {
        let payload = serde_json::to_string(e).expect("an event serializes");
        stmt.execute(params![run, e.seq, e.agent_run_id, e.body.kind(), payload])?;
        payloads.push(payload);
    }
    conn.execute("UPDATE runs SET last_seq = ?2 WHERE id = ?1", params![run, last.seq])?;
    Ok(payloads)
}

/// Events with `seq > after`, at most `limit`, as the JSON the store holds (unparsed); with
/// the last seq of the page and the run's highest seq.
pub fn page_raw(conn: &Connection, run: RunId, after: u64, limit: u32) -> Result<(Vec<String>, Option<u64>, u64)> {
    let mut stmt = conn
        .prepare_cached("SELECT seq, payload FROM transcript WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")?;
    let mut payloads = Vec::new();
    let mut page_end = None;
    for row in stmt.query_map(params![run, after, limit], |r| {
        Ok((r.get::<_, u64>(0)?, r.get::<_, String>(1)?))
    })? {
        let (seq, payload) = row?;
        page_end = Some(seq);
        payloads.push(payload);
    }
    let last: u64 = conn.query_row("SELECT last_seq FROM runs WHERE id = ?1", [run], |r| r.get(0))?;
    Ok((payloads, page_end, last))
}

/// The main agent's `text` events of a run, newest first, one at a time, until `f` finds
/// what it looks for: how the runner reads back text a parser let go of.
pub fn find_in_main_text<T>(conn: &Connection, run: RunId, mut f: impl FnMut(&str) -> Option<T>) -> Result<Option<T>> {
    let mut stmt = conn.prepare_cached(
        "SELECT payload FROM transcript WHERE run_id = ?1 AND kind = 'text' AND agent_run_id IS NULL ORDER BY seq DESC",
    )?;
    let mut rows = stmt.query([run])?;
    while let Some(row) = rows.next()? {
        let payload = row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
        let Ok(event) = serde_json::from_str::<TranscriptEvent>(payload) else {
            continue;
        };
        if let EventBody::Text { text, .. } = event.body {
            if let Some(found) = f(&text) {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

/// The `usage` events of every run of a ticket, summed (a partial index finds them).
pub fn ticket_usage(conn: &Connection, ticket: TicketId) -> Result<Usage> {
    let sum = |field: &str| format!("COALESCE(SUM(json_extract(t.payload, '$.{field}')), 0)");
    let sql = format!(
        "SELECT {}, {}, {}, {}, {} FROM transcript t
         WHERE t.kind = 'usage' AND t.run_id IN (SELECT id FROM runs WHERE ticket_id = ?1)",
        sum("inputTokens"),
        sum("outputTokens"),
        sum("cacheReadTokens"),
        sum("cacheWriteTokens"),
        sum("costUsd"),
    );
    Ok(conn.prepare_cached(&sql)?.query_row([ticket], |r| {
        Ok(Usage {
            input_tokens: r.get(0)?,
            output_tokens: r.get(1)?,
            cache_read_tokens: r.get(2)?,
            cache_write_tokens: r.get(3)?,
            cost_usd: r.get(4)?,
        })
    })?)
}

pub fn start_agent_run(
    conn: &Connection,
    run: RunId,
    parent: Option<AgentRunId>,
    key: Option<&str>,
    label: &str,
) -> Result<AgentRunId> {
    conn.execute(
        "INSERT INTO agent_runs (run_id, parent_id, key, label, status, started_at)
         VALUES (?1, ?2, ?3, ?4, 'running', ?5)",
        params![run, parent, key, label, now()],
    )?;
    Ok(conn.last_insert_rowid())
}

pub fn end_agent_run(conn: &Connection, id: AgentRunId, status: &str) -> Result<()> {
    conn.execute(
        "UPDATE agent_runs SET status = ?2, ended_at = ?3 WHERE id = ?1 AND ended_at IS NULL",
        params![id, status, now()],
    )?;
    Ok(())
}

pub fn agent_runs(conn: &Connection, run: RunId) -> Result<Vec<planwire_protocol::AgentRun>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, run_id, parent_id, label, status, started_at, ended_at FROM agent_runs WHERE run_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([run], |r| {
        Ok(planwire_protocol::AgentRun {
            id: r.get(0)?,
            run_id: r.get(1)?,
            parent_id: r.get(2)?,
            label: r.get(3)?,
            status: r.get(4)?,
            started_at: r.get(5)?,
            ended_at: r.get(6)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Ends every agent run of a run that is still open.
pub fn end_open_agent_runs(conn: &Connection, run: RunId, status: &str) -> Result<()> {
    conn.execute(
        "UPDATE agent_runs SET status = ?2, ended_at = ?3 WHERE run_id = ?1 AND ended_at IS NULL",
        params![run, status, now()],
    )?;
    Ok(())
}

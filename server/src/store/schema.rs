//! Numbered migrations, tracked with `PRAGMA user_version`. Append; never edit a shipped one.

use rusqlite::{Connection, TransactionBehavior};

const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    r#"
    CREATE TABLE projects (
        id INTEGER PRIMARY KEY,
        root TEXT NOT NULL UNIQUE,
        created_at TEXT NOT NULL
    );
    CREATE TABLE tickets (
        id INTEGER PRIMARY KEY,
        project_id INTEGER NOT NULL REFERENCES projects(id),
        title TEXT NOT NULL,
        description TEXT NOT NULL,
        status TEXT NOT NULL,
        tool TEXT NOT NULL,
        model TEXT,
        variant TEXT,
        plan_json TEXT,
        initiative_run_id INTEGER,
        session_tool TEXT,
        session_id TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX tickets_by_project ON tickets(project_id, id);
    CREATE INDEX tickets_by_initiative ON tickets(initiative_run_id) WHERE initiative_run_id IS NOT NULL;
    CREATE TABLE ticket_deps (
        ticket_id INTEGER NOT NULL REFERENCES tickets(id),
        depends_on INTEGER NOT NULL REFERENCES tickets(id),
        PRIMARY KEY (ticket_id, depends_on)
    ) WITHOUT ROWID;
    CREATE TABLE project_links (
        project_id INTEGER NOT NULL REFERENCES projects(id),
        name TEXT NOT NULL,
        linked_root TEXT NOT NULL,
        role TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (project_id, name)
    ) WITHOUT ROWID;
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        -- NULL for a breakdown, which has no ticket of its own.
        ticket_id INTEGER REFERENCES tickets(id),
        project_id INTEGER REFERENCES projects(id),
        kind TEXT NOT NULL DEFAULT 'plan',
        -- A breakdown's initiative, in the person's words.
        initiative TEXT,
        status TEXT NOT NULL,
        tool TEXT NOT NULL,
        model TEXT,
        variant TEXT,
        prev_ticket_status TEXT NOT NULL,
        owner_pid INTEGER,
        owner_start INTEGER,
        heartbeat_at TEXT,
        child_pid INTEGER,
        child_start INTEGER,
        pgid INTEGER,
        argv_json TEXT,
        cli_version TEXT,
        session_id TEXT,
        resume_of TEXT,
        fresh_reason TEXT,
        retry_of INTEGER,
        exit_code INTEGER,
        signal INTEGER,
        failure_code TEXT,
        failure_message TEXT,
        stderr_tail TEXT,
        last_seq INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        started_at TEXT,
        ended_at TEXT,
        first_output_ms INTEGER,
        first_final_ms INTEGER,
        total_ms INTEGER,
        stop_requested INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX runs_by_ticket ON runs(ticket_id, id);
    CREATE UNIQUE INDEX runs_one_active_per_ticket ON runs(ticket_id) WHERE status IN ('queued', 'running');
    CREATE TABLE run_events (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        event TEXT NOT NULL,
        at TEXT NOT NULL,
        reason TEXT
    );
    CREATE INDEX run_events_by_run ON run_events(run_id);
    CREATE TABLE agent_runs (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        parent_id INTEGER REFERENCES agent_runs(id),
        key TEXT,
        label TEXT NOT NULL,
        status TEXT NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT
    );
    CREATE INDEX agent_runs_by_run ON agent_runs(run_id);
    CREATE TABLE transcript (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        seq INTEGER NOT NULL,
        agent_run_id INTEGER,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        ticket_id INTEGER NOT NULL REFERENCES tickets(id),
        run_id INTEGER REFERENCES runs(id),
        kind TEXT NOT NULL,
        text TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX messages_by_ticket ON messages(ticket_id, id);
    CREATE TABLE questions (
        id INTEGER PRIMARY KEY,
        ticket_id INTEGER NOT NULL REFERENCES tickets(id),
        run_id INTEGER NOT NULL REFERENCES runs(id),
        source TEXT NOT NULL,
        status TEXT NOT NULL,
        items_json TEXT NOT NULL,
        answer_json TEXT,
        request_id TEXT,
        created_at TEXT NOT NULL,
        answered_at TEXT
    );
    CREATE INDEX questions_by_ticket ON questions(ticket_id, id);
    CREATE TABLE planner_versions (
        path TEXT PRIMARY KEY,
        mtime INTEGER NOT NULL,
        size INTEGER NOT NULL,
        version TEXT NOT NULL,
        checked_at TEXT NOT NULL
    );
    "#,
    // 2: project memory and prompt settings.
    r#"
    CREATE TABLE project_settings (
        project_id INTEGER PRIMARY KEY REFERENCES projects(id),
        memory_enabled INTEGER NOT NULL DEFAULT 1,
        output_language TEXT,
        skills_json TEXT NOT NULL DEFAULT '[]',
        extra_instructions TEXT,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE memory_entries (
        id INTEGER PRIMARY KEY,
        project_id INTEGER NOT NULL REFERENCES projects(id),
        text TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX memory_entries_by_project ON memory_entries(project_id, id);
    CREATE TABLE memory_suggestions (
        id INTEGER PRIMARY KEY,
        project_id INTEGER NOT NULL REFERENCES projects(id),
        ticket_id INTEGER NOT NULL REFERENCES tickets(id),
        run_id INTEGER REFERENCES runs(id),
        text TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('open', 'accepted', 'rejected')),
        created_at TEXT NOT NULL
    );
    CREATE INDEX memory_suggestions_by_project ON memory_suggestions(project_id, id);
    CREATE INDEX memory_suggestions_by_ticket ON memory_suggestions(ticket_id, id);
    -- The prompt settings a run used (JSON), so a retry uses the same ones.
    ALTER TABLE runs ADD COLUMN settings_json TEXT;
    "#,
    // 3: the OS sandbox a run's planner ran in, and what it changed in a work tree anyway.
    r#"
    -- 'enforced', 'unavailable' or 'off'; NULL until its first process started.
    ALTER TABLE runs ADD COLUMN sandbox TEXT;
    -- JSON array of absolute paths the run changed although planning is read-only.
    ALTER TABLE runs ADD COLUMN readonly_violation_json TEXT;
    "#,
    // 4: plan versions, ticket edits, branches and hand-offs.
    r#"
    CREATE TABLE plan_versions (
        ticket_id INTEGER NOT NULL REFERENCES tickets(id),
        version INTEGER NOT NULL,
        -- The run that produced it (a breakdown's, for a ticket it created).
        run_id INTEGER REFERENCES runs(id),
        plan_json TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (ticket_id, version)
    ) WITHOUT ROWID;
    -- A ticket planned before versions were kept keeps its plan as version 1: the plan of its
    -- last completed run, else of the breakdown that created it.
    INSERT INTO plan_versions (ticket_id, version, run_id, plan_json, created_at)
    SELECT t.id, 1,
        COALESCE((SELECT MAX(r.id) FROM runs r WHERE r.ticket_id = t.id AND r.status = 'completed'),
            t.initiative_run_id),
        t.plan_json,
        COALESCE((SELECT r.ended_at FROM runs r WHERE r.ticket_id = t.id AND r.status = 'completed'
            ORDER BY r.id DESC LIMIT 1), t.updated_at)
    FROM tickets t WHERE t.plan_json IS NOT NULL;
    -- The latest version's number, kept beside plan_json (listing tickets reads no other table).
    ALTER TABLE tickets ADD COLUMN plan_version INTEGER;
    UPDATE tickets SET plan_version = 1 WHERE plan_json IS NOT NULL;
    ALTER TABLE tickets ADD COLUMN branch TEXT;
    ALTER TABLE tickets ADD COLUMN handed_off_at TEXT;
    ALTER TABLE tickets ADD COLUMN handed_off_tool TEXT;
    -- What a plan run was given: the ticket's text when it was created, and the user's
    -- feedback (a retry sends it again; a resumed run tells the planner what was edited since).
    ALTER TABLE runs ADD COLUMN ticket_title TEXT;
    ALTER TABLE runs ADD COLUMN ticket_description TEXT;
    ALTER TABLE runs ADD COLUMN feedback TEXT;
    -- A ticket's summed usage reads only its runs' usage events.
    CREATE INDEX transcript_usage ON transcript(run_id, seq) WHERE kind = 'usage';
    "#,
    // 5: the directory a run planned in (the root, or the worktree of the ticket's branch).
    r#"
    ALTER TABLE runs ADD COLUMN cwd TEXT;
    "#,
];

/// The schema version this build writes.
pub const VERSION: u32 = MIGRATIONS.len() as u32;

pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as u32)?;
    }
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database at version 2 with a planned ticket (two completed runs), a ticket a
    /// breakdown created, and a draft: migration 3 keeps each current plan as version 1.
    #[test]
    fn migration_3_keeps_current_plans_as_version_1() {
        let mut conn = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..2] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 2).unwrap();
        conn.execute_batch(
            r#"
            INSERT INTO projects (id, root, created_at) VALUES (1, '/p', 't0');
            INSERT INTO tickets (id, project_id, title, description, status, tool, plan_json, created_at, updated_at)
                VALUES (1, 1, 'A', '', 'planned', 'script', '{"title":"second","description":"d"}', 't0', 't9');
            INSERT INTO runs (id, ticket_id, project_id, status, tool, prev_ticket_status, created_at, ended_at)
                VALUES (1, 1, 1, 'completed', 'script', 'draft', 't1', 't2'),
                       (2, 1, 1, 'completed', 'script', 'planned', 't3', 't4'),
                       (3, 1, 1, 'failed', 'script', 'planned', 't5', 't6'),
                       (4, NULL, 1, 'completed', 'script', 'draft', 't7', 't8');
            INSERT INTO tickets (id, project_id, title, description, status, tool, plan_json, initiative_run_id,
                created_at, updated_at)
                VALUES (2, 1, 'B', '', 'planned', 'script', '{"title":"from breakdown","description":"d"}', 4, 't8', 't8');
            INSERT INTO tickets (id, project_id, title, description, status, tool, created_at, updated_at)
                VALUES (3, 1, 'C', '', 'draft', 'script', 't0', 't0');
            "#,
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let rows: Vec<(i64, u32, Option<i64>, String, String)> = conn
            .prepare("SELECT ticket_id, version, run_id, plan_json, created_at FROM plan_versions ORDER BY ticket_id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            (rows[0].0, rows[0].1, rows[0].2, rows[0].4.as_str()),
            (1, 1, Some(2), "t4")
        );
        assert!(rows[0].3.contains("second"));
        assert_eq!(
            (rows[1].0, rows[1].1, rows[1].2, rows[1].4.as_str()),
            (2, 1, Some(4), "t8")
        );
        let latest: Vec<Option<u32>> = conn
            .prepare("SELECT plan_version FROM tickets ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(latest, [Some(1), Some(1), None]);
        let version: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
    }
}

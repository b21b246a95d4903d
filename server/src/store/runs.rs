//! Runs, their lifecycle events, and recovery of runs whose owner died.

use planwire_protocol::{
    Failure, ReadonlyViolation, Run, RunId, RunStatus, RunTiming, SandboxState, TicketId, TicketStatus,
};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{questions, tickets, Result, StoreError};
use crate::util::{now, same_process_alive};

pub struct NewRun {
    pub ticket_id: TicketId,
    pub tool: String,
    pub model: Option<String>,
    pub variant: Option<String>,
    pub retry_of: Option<RunId>,
    /// The provider session this run resumes.
    pub resume_of: Option<String>,
    /// Why a run that could have resumed starts fresh.
    pub fresh_reason: Option<String>,
    /// A new plan asked for while questions are unanswered supersedes them.
    pub supersede_questions: bool,
    /// The directory its passes run in: the root, or the worktree of the ticket's branch.
    pub cwd: String,
}

/// The process that owns a run: a planwire sidecar.
#[derive(Debug, Clone, Copy)]
pub struct Owner {
    pub pid: i32,
    pub start: u64,
}

/// The planner process of a run, as recorded once it started.
#[derive(Debug, Clone)]
pub struct ChildInfo {
    pub pid: i32,
    pub start: u64,
    pub pgid: i32,
    pub argv: Vec<String>,
    pub cli_version: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Ending {
    pub status: RunStatus,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub failure: Option<Failure>,
    pub stderr_tail: Option<String>,
    pub session_id: Option<String>,
    pub first_output_ms: Option<i64>,
    pub first_final_ms: Option<i64>,
    pub total_ms: Option<i64>,
}

/// A leftover planner process group found during recovery.
#[derive(Debug, Clone)]
pub struct Leftover {
    pub run_id: RunId,
    pub ticket_id: Option<TicketId>,
    pub pgid: Option<i32>,
    pub child_start: Option<u64>,
}

const SELECT: &str = "SELECT r.id, r.ticket_id, r.status, r.tool, r.model, r.variant, r.created_at, r.started_at,
    r.ended_at, r.exit_code, r.signal, r.failure_code, r.failure_message, r.session_id, r.last_seq, r.kind, p.root,
    r.initiative, r.sandbox, r.readonly_violation_json, r.first_output_ms, r.first_final_ms, r.total_ms, r.cwd
    FROM runs r JOIN projects p ON p.id = r.project_id";

fn from_row(r: &Row) -> rusqlite::Result<Run> {
    let status: String = r.get(2)?;
    let code: Option<String> = r.get(11)?;
    let message: Option<String> = r.get(12)?;
    Ok(Run {
        id: r.get(0)?,
        ticket_id: r.get(1)?,
        status: RunStatus::parse(&status).unwrap_or(RunStatus::Failed),
        tool: r.get(3)?,
        model: r.get(4)?,
        variant: r.get(5)?,
        created_at: r.get(6)?,
        started_at: r.get(7)?,
        ended_at: r.get(8)?,
        exit_code: r.get(9)?,
        signal: r.get(10)?,
        failure: code.map(|code| Failure {
            code,
            message: message.unwrap_or_default(),
        }),
        provider_session_id: r.get(13)?,
        last_seq: r.get(14)?,
        kind: r.get(15)?,
        root: r.get(16)?,
        initiative: r.get(17)?,
        sandbox: r.get::<_, Option<String>>(18)?.as_deref().and_then(sandbox_state),
        readonly_violation: r
            .get::<_, Option<String>>(19)?
            .and_then(|j| serde_json::from_str(&j).ok())
            .map(|paths| ReadonlyViolation { paths }),
        timing: timing(r.get(20)?, r.get(21)?, r.get(22)?),
        cwd: r.get(23)?,
    })
}

/// A run's timing, once its end recorded the total.
fn timing(first_output_ms: Option<u64>, first_final_ms: Option<u64>, total_ms: Option<u64>) -> Option<RunTiming> {
    total_ms.map(|total_ms| RunTiming {
        first_output_ms,
        first_final_ms,
        total_ms,
    })
}

fn sandbox_state(s: &str) -> Option<SandboxState> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).ok()
}

/// Records the sandbox state of a run's planner (set when its first process starts).
pub fn set_sandbox(conn: &Connection, run: RunId, state: SandboxState) -> Result<()> {
    let name = serde_json::to_value(state).expect("a state serializes");
    conn.execute(
        "UPDATE runs SET sandbox = ?2 WHERE id = ?1",
        params![run, name.as_str()],
    )?;
    Ok(())
}

/// Adds paths a run changed in a work tree to its read-only violation (kept sorted, once each).
pub fn add_readonly_violation(conn: &Connection, run: RunId, paths: &[String]) -> Result<()> {
    let old: Option<String> = conn.query_row("SELECT readonly_violation_json FROM runs WHERE id = ?1", [run], |r| {
        r.get(0)
    })?;
    let mut all: Vec<String> = old.and_then(|j| serde_json::from_str(&j).ok()).unwrap_or_default();
    all.extend(paths.iter().cloned());
    all.sort();
    all.dedup();
    let json = serde_json::to_string(&all).expect("paths serialize");
    conn.execute(
        "UPDATE runs SET readonly_violation_json = ?2 WHERE id = ?1",
        params![run, json],
    )?;
    Ok(())
}

pub fn get(conn: &Connection, id: RunId) -> Result<Run> {
    conn.query_row(&format!("{SELECT} WHERE r.id = ?1"), [id], from_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("run {id}")))
}

/// Runs of a ticket, newest first.
pub fn for_ticket(conn: &Connection, ticket: TicketId) -> Result<Vec<Run>> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT} WHERE r.ticket_id = ?1 ORDER BY r.id DESC"))?;
    let rows = stmt.query_map([ticket], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub fn active(conn: &Connection, ticket: Option<TicketId>) -> Result<Vec<Run>> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT} WHERE r.status IN ('queued', 'running') AND (?1 IS NULL OR r.ticket_id = ?1) ORDER BY r.id"
    ))?;
    let rows = stmt.query_map([ticket], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn log_event(conn: &Connection, run: RunId, event: &str, reason: Option<&str>) -> Result<()> {
    conn.execute(
        "INSERT INTO run_events (run_id, event, at, reason) VALUES (?1, ?2, ?3, ?4)",
        params![run, event, now(), reason],
    )?;
    Ok(())
}

/// Creates a queued run, unless the ticket already has a live one. A run left active by an
/// owner that is gone is interrupted first, so a crashed sidecar never blocks a ticket.
pub fn create(conn: &Connection, new: &NewRun, owner: Owner) -> Result<(RunId, Vec<Leftover>)> {
    let mut leftovers = Vec::new();
    let existing: Option<(RunId, Option<i32>, Option<u64>)> = conn
        .query_row(
            "SELECT id, owner_pid, owner_start FROM runs WHERE ticket_id = ?1 AND status IN ('queued', 'running')",
            [new.ticket_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    if let Some((run, pid, start)) = existing {
        let alive = matches!((pid, start), (Some(p), Some(s)) if same_process_alive(p, s));
        if alive {
            return Err(StoreError::Busy(new.ticket_id));
        }
        leftovers.push(interrupt(conn, run, "its planwire process is gone")?);
    }
    let prev = tickets::status(conn, new.ticket_id)?;
    let prev = match prev {
        TicketStatus::Queued | TicketStatus::Planning => TicketStatus::Draft,
        s => s,
    };
    // The run keeps the ticket's text as it was planned: a later resumed run says what changed.
    conn.execute(
        "INSERT INTO runs (ticket_id, project_id, status, tool, model, variant, prev_ticket_status, owner_pid,
            owner_start, heartbeat_at, retry_of, resume_of, fresh_reason, created_at, ticket_title, ticket_description,
            cwd)
         SELECT ?1, project_id, 'queued', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?8, title, description, ?12
         FROM tickets WHERE id = ?1",
        params![
            new.ticket_id,
            new.tool,
            new.model,
            new.variant,
            prev.as_str(),
            owner.pid,
            owner.start,
            now(),
            new.retry_of,
            new.resume_of,
            new.fresh_reason,
            new.cwd
        ],
    )?;
    let id = conn.last_insert_rowid();
    log_event(conn, id, "created", new.fresh_reason.as_deref())?;
    if new.supersede_questions && questions::supersede(conn, new.ticket_id)? > 0 {
        let m = "The unanswered questions were set aside: a new plan was asked for.";
        tickets::add_message(conn, new.ticket_id, Some(id), "status", m)?;
    }
    tickets::set_status(conn, new.ticket_id, TicketStatus::Queued)?;
    Ok((id, leftovers))
}

/// Refuses (busy) while the ticket has a queued or running run whose planwire process lives
/// (a run whose owner is gone is recovered by the next plan; it does not hold the ticket).
pub fn ensure_idle(conn: &Connection, ticket: TicketId) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT owner_pid, owner_start FROM runs WHERE ticket_id = ?1 AND status IN ('queued', 'running')",
    )?;
    let owners = stmt.query_map([ticket], |r| {
        Ok((r.get::<_, Option<i32>>(0)?, r.get::<_, Option<u64>>(1)?))
    })?;
    for owner in owners {
        if let (Some(pid), Some(start)) = owner? {
            if same_process_alive(pid, start) {
                return Err(StoreError::Busy(ticket));
            }
        }
    }
    Ok(())
}

/// Records the ticket's text a run's prompt was built from (an edit may land between the
/// handler's read and the run's creation, which copied the ticket's text then).
pub fn set_ticket_text(conn: &Connection, run: RunId, title: &str, description: &str) -> Result<()> {
    conn.execute(
        "UPDATE runs SET ticket_title = ?2, ticket_description = ?3 WHERE id = ?1",
        params![run, title, description],
    )?;
    Ok(())
}

/// Records the feedback a run was started with.
pub fn set_feedback(conn: &Connection, run: RunId, feedback: &str) -> Result<()> {
    conn.execute("UPDATE runs SET feedback = ?2 WHERE id = ?1", params![run, feedback])?;
    Ok(())
}

/// The feedback a run was started with, if any.
pub fn feedback_of(conn: &Connection, run: RunId) -> Result<Option<String>> {
    Ok(conn
        .query_row("SELECT feedback FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .optional()?
        .flatten())
}

/// The ticket's title and description as the last run of a provider session was given them
/// (unknown for runs recorded before runs kept them).
pub fn planned_text(conn: &Connection, ticket: TicketId, session: &str) -> Result<Option<(String, String)>> {
    Ok(conn
        .query_row(
            "SELECT ticket_title, ticket_description FROM runs
             WHERE ticket_id = ?1 AND session_id = ?2 ORDER BY id DESC LIMIT 1",
            params![ticket, session],
            |r| Ok(r.get::<_, Option<String>>(0)?.zip(r.get::<_, Option<String>>(1)?)),
        )
        .optional()?
        .flatten())
}

/// What made a provider session: the model, CLI version and directory of the last run of
/// the ticket that used it (a resume must match them; `handlers/authority.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOrigin {
    pub model: Option<String>,
    pub cli_version: Option<String>,
    pub cwd: Option<String>,
}

/// The origin of `session`, from the ticket's last run that used it (`None` when no run
/// recorded it).
pub fn session_origin(conn: &Connection, ticket: TicketId, session: &str) -> Result<Option<SessionOrigin>> {
    Ok(conn
        .query_row(
            "SELECT model, cli_version, cwd FROM runs
             WHERE ticket_id = ?1 AND session_id = ?2 ORDER BY id DESC LIMIT 1",
            params![ticket, session],
            |r| {
                Ok(SessionOrigin {
                    model: r.get(0)?,
                    cli_version: r.get(1)?,
                    cwd: r.get(2)?,
                })
            },
        )
        .optional()?)
}

/// A breakdown run: it belongs to a project, not to a ticket.
pub fn create_breakdown(
    conn: &Connection,
    root: &str,
    initiative: &str,
    tool: &str,
    model: Option<&str>,
    variant: Option<&str>,
    owner: Owner,
) -> Result<RunId> {
    let project = tickets::project_id(conn, root)?;
    conn.execute(
        "INSERT INTO runs (ticket_id, project_id, kind, initiative, status, tool, model, variant, prev_ticket_status,
            owner_pid, owner_start, heartbeat_at, created_at, cwd)
         VALUES (NULL, ?1, 'breakdown', ?8, 'queued', ?2, ?3, ?4, 'draft', ?5, ?6, ?7, ?7, ?9)",
        params![
            project,
            tool,
            model,
            variant,
            owner.pid,
            owner.start,
            now(),
            initiative,
            root
        ],
    )?;
    let id = conn.last_insert_rowid();
    log_event(conn, id, "created", None)?;
    Ok(id)
}

/// The ticket a run plans, if it has one.
pub fn ticket_of(conn: &Connection, run: RunId) -> Result<Option<TicketId>> {
    Ok(conn.query_row("SELECT ticket_id FROM runs WHERE id = ?1", [run], |r| r.get(0))?)
}

/// Records the process of a later pass of a run (so recovery finds its group).
pub fn set_child(conn: &Connection, run: RunId, child: &ChildInfo) -> Result<()> {
    conn.execute(
        "UPDATE runs SET child_pid = ?2, child_start = ?3, pgid = ?4 WHERE id = ?1",
        params![run, child.pid, child.start, child.pgid],
    )?;
    Ok(())
}

pub fn mark_started(conn: &Connection, run: RunId, child: &ChildInfo) -> Result<()> {
    let argv = serde_json::to_string(&child.argv).expect("argv serializes");
    conn.execute(
        "UPDATE runs SET status = 'running', started_at = ?2, child_pid = ?3, child_start = ?4, pgid = ?5,
            argv_json = ?6, cli_version = ?7 WHERE id = ?1",
        params![run, now(), child.pid, child.start, child.pgid, argv, child.cli_version],
    )?;
    log_event(conn, run, "started", None)?;
    match ticket_of(conn, run)? {
        Some(ticket) => tickets::set_status(conn, ticket, TicketStatus::Planning),
        None => Ok(()),
    }
}

pub fn set_session(conn: &Connection, run: RunId, session_id: &str) -> Result<()> {
    conn.execute(
        "UPDATE runs SET session_id = ?2 WHERE id = ?1",
        params![run, session_id],
    )?;
    Ok(())
}

/// Records how a run ended. The caller settles the ticket.
pub fn finish(conn: &Connection, run: RunId, e: &Ending) -> Result<()> {
    let (code, message) = match &e.failure {
        Some(f) => (Some(f.code.as_str()), Some(f.message.as_str())),
        None => (None, None),
    };
    conn.execute(
        "UPDATE runs SET status = ?2, ended_at = ?3, exit_code = ?4, signal = ?5, failure_code = ?6,
            failure_message = ?7, stderr_tail = ?8, session_id = COALESCE(?9, session_id),
            first_output_ms = ?10, first_final_ms = ?11, total_ms = ?12
         WHERE id = ?1",
        params![
            run,
            e.status.as_str(),
            now(),
            e.exit_code,
            e.signal,
            code,
            message,
            e.stderr_tail,
            e.session_id,
            e.first_output_ms,
            e.first_final_ms,
            e.total_ms
        ],
    )?;
    log_event(conn, run, e.status.as_str(), message)
}

/// The ticket status a run found before it started.
pub fn prev_ticket_status(conn: &Connection, run: RunId) -> Result<TicketStatus> {
    let s: String = conn.query_row("SELECT prev_ticket_status FROM runs WHERE id = ?1", [run], |r| r.get(0))?;
    Ok(TicketStatus::parse(&s).unwrap_or(TicketStatus::Draft))
}

pub fn heartbeat(conn: &Connection, owner: Owner) -> Result<()> {
    conn.execute(
        "UPDATE runs SET heartbeat_at = ?3 WHERE owner_pid = ?1 AND owner_start = ?2 AND status IN ('queued', 'running')",
        params![owner.pid, owner.start, now()],
    )?;
    Ok(())
}

/// Marks one active run interrupted and returns its ticket to its settled status (or keeps
/// it `needs_input` when it holds an open or stale question).
fn interrupt(conn: &Connection, run: RunId, why: &str) -> Result<Leftover> {
    let (ticket, pgid, child_start): (Option<TicketId>, Option<i32>, Option<u64>) = conn.query_row(
        "SELECT ticket_id, pgid, child_start FROM runs WHERE id = ?1",
        [run],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let message = format!("Planning was interrupted: {why}.");
    conn.execute(
        "UPDATE runs SET status = 'interrupted', ended_at = ?2, failure_code = 'interrupted', failure_message = ?3
         WHERE id = ?1",
        params![run, now(), message],
    )?;
    log_event(conn, run, "interrupted", Some(why))?;
    conn.execute(
        "UPDATE agent_runs SET status = 'interrupted', ended_at = ?2 WHERE run_id = ?1 AND ended_at IS NULL",
        params![run, now()],
    )?;
    questions::mark_stale(conn, run)?;
    if let Some(ticket) = ticket {
        let status = if questions::open_for_ticket(conn, ticket)?.is_empty() {
            prev_ticket_status(conn, run)?
        } else {
            TicketStatus::NeedsInput
        };
        tickets::set_status(conn, ticket, status)?;
        tickets::add_message(conn, ticket, Some(run), "status", &message)?;
    }
    Ok(Leftover {
        run_id: run,
        ticket_id: ticket,
        pgid,
        child_start,
    })
}

/// Interrupts every active run whose owner is gone. The caller kills the leftover groups.
pub fn recover(conn: &Connection) -> Result<Vec<Leftover>> {
    let candidates: Vec<(RunId, Option<i32>, Option<u64>)> = {
        let mut stmt =
            conn.prepare("SELECT id, owner_pid, owner_start FROM runs WHERE status IN ('queued', 'running')")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut out = Vec::new();
    for (run, pid, start) in candidates {
        let alive = matches!((pid, start), (Some(p), Some(s)) if same_process_alive(p, s));
        if !alive {
            out.push(interrupt(conn, run, "its planwire process exited while it was active")?);
        }
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::tickets::tests::new_ticket;

    pub(crate) fn new_run(ticket: TicketId) -> NewRun {
        NewRun {
            ticket_id: ticket,
            tool: "script".into(),
            model: None,
            variant: None,
            retry_of: None,
            resume_of: None,
            fresh_reason: None,
            supersede_questions: false,
            cwd: "/p".into(),
        }
    }

    #[test]
    fn a_session_remembers_the_model_version_and_directory_of_its_last_run() {
        let conn = crate::store::test_conn();
        let t = new_ticket(&conn);
        let (pid, start) = crate::util::self_identity();
        let me = Owner { pid, start };
        assert_eq!(session_origin(&conn, t, "s1").unwrap(), None);
        let mut new = new_run(t);
        new.model = Some("anthropic/claude".into());
        new.cwd = "/p/wt".into();
        let (run, _) = create(&conn, &new, me).unwrap();
        let child = ChildInfo {
            pid,
            start,
            pgid: pid,
            argv: vec!["claude".into()],
            cli_version: Some("2.1.197 (Claude Code)".into()),
        };
        mark_started(&conn, run, &child).unwrap();
        set_session(&conn, run, "s1").unwrap();
        assert_eq!(get(&conn, run).unwrap().cwd.as_deref(), Some("/p/wt"));
        let origin = session_origin(&conn, t, "s1").unwrap().unwrap();
        assert_eq!(
            origin,
            SessionOrigin {
                model: Some("anthropic/claude".into()),
                cli_version: Some("2.1.197 (Claude Code)".into()),
                cwd: Some("/p/wt".into()),
            }
        );
    }

    #[test]
    fn one_active_run_per_ticket_while_the_owner_lives() {
        let conn = crate::store::test_conn();
        let t = new_ticket(&conn);
        let (pid, start) = crate::util::self_identity();
        let me = Owner { pid, start };
        let (run, _) = create(&conn, &new_run(t), me).unwrap();
        assert!(matches!(create(&conn, &new_run(t), me), Err(StoreError::Busy(_))));
        assert_eq!(tickets::status(&conn, t).unwrap(), TicketStatus::Queued);
        // A dead owner does not block: its run is interrupted.
        conn.execute("UPDATE runs SET owner_start = 1 WHERE id = ?1", [run])
            .unwrap();
        let (second, leftovers) = create(&conn, &new_run(t), me).unwrap();
        assert_eq!(leftovers.len(), 1);
        assert_eq!(get(&conn, run).unwrap().status, RunStatus::Interrupted);
        assert_eq!(get(&conn, second).unwrap().status, RunStatus::Queued);
    }

    #[test]
    fn sandbox_state_and_violations_are_kept() {
        let conn = crate::store::test_conn();
        let t = new_ticket(&conn);
        let (pid, start) = crate::util::self_identity();
        let (run, _) = create(&conn, &new_run(t), Owner { pid, start }).unwrap();
        assert_eq!(
            (
                get(&conn, run).unwrap().sandbox,
                get(&conn, run).unwrap().readonly_violation
            ),
            (None, None)
        );
        set_sandbox(&conn, run, SandboxState::Unavailable).unwrap();
        add_readonly_violation(&conn, run, &["/r/b".into()]).unwrap();
        add_readonly_violation(&conn, run, &["/r/a".into(), "/r/b".into()]).unwrap();
        let r = get(&conn, run).unwrap();
        assert_eq!(r.sandbox, Some(SandboxState::Unavailable));
        assert_eq!(r.readonly_violation.unwrap().paths, ["/r/a", "/r/b"]);
    }

    #[test]
    fn recovery_returns_ticket_to_settled_status() {
        let conn = crate::store::test_conn();
        let t = new_ticket(&conn);
        let ghost = Owner {
            pid: i32::MAX,
            start: 1,
        };
        let (run, _) = create(&conn, &new_run(t), ghost).unwrap();
        let left = recover(&conn).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(get(&conn, run).unwrap().status, RunStatus::Interrupted);
        assert_eq!(tickets::status(&conn, t).unwrap(), TicketStatus::Draft);
        assert!(recover(&conn).unwrap().is_empty());
    }
}

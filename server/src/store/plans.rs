//! Plan versions: every plan a ticket was given, numbered from 1, never overwritten. The
//! ticket's own `plan_json` and `plan_version` are a copy of its latest version, written in
//! the same transaction as the version, so listing tickets reads no other table.

use planwire_protocol::{Plan, RunId, TicketId};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::{tickets, Result, StoreError};
use crate::util::now;

/// One stored version (the handlers add its markdown).
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub version: u32,
    pub run_id: Option<RunId>,
    pub created_at: String,
    pub plan: Plan,
}

/// Stores `plan` as the ticket's next version and makes it the ticket's plan. Returns the
/// version number.
pub fn record(conn: &Connection, ticket: TicketId, run: Option<RunId>, plan: &Plan) -> Result<u32> {
    let json = serde_json::to_string(plan).expect("a plan serializes");
    let ts = now();
    let version: u32 = conn.query_row(
        "INSERT INTO plan_versions (ticket_id, version, run_id, plan_json, created_at)
         VALUES (?1, (SELECT COALESCE(MAX(version), 0) + 1 FROM plan_versions WHERE ticket_id = ?1), ?2, ?3, ?4)
         RETURNING version",
        params![ticket, run, json, ts],
        |r| r.get(0),
    )?;
    conn.execute(
        "UPDATE tickets SET plan_json = ?2, plan_version = ?3, updated_at = ?4 WHERE id = ?1",
        params![ticket, json, version, ts],
    )?;
    Ok(version)
}

const SELECT: &str = "SELECT version, run_id, created_at, plan_json FROM plan_versions";

fn from_row(r: &Row) -> rusqlite::Result<Stored> {
    let json: String = r.get(3)?;
    let plan = serde_json::from_str(&json)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e)))?;
    Ok(Stored {
        version: r.get(0)?,
        run_id: r.get(1)?,
        created_at: r.get(2)?,
        plan,
    })
}

/// Every version of a ticket, oldest first (a ticket that does not exist is an error).
pub fn list(conn: &Connection, ticket: TicketId) -> Result<Vec<Stored>> {
    tickets::status(conn, ticket)?;
    let mut stmt = conn.prepare_cached(&format!("{SELECT} WHERE ticket_id = ?1 ORDER BY version"))?;
    let rows = stmt.query_map([ticket], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// One version of a ticket, or its latest with `None`.
pub fn get(conn: &Connection, ticket: TicketId, version: Option<u32>) -> Result<Stored> {
    tickets::status(conn, ticket)?;
    let found = match version {
        Some(v) => conn
            .query_row(
                &format!("{SELECT} WHERE ticket_id = ?1 AND version = ?2"),
                params![ticket, v],
                from_row,
            )
            .optional()?,
        None => conn
            .query_row(
                &format!("{SELECT} WHERE ticket_id = ?1 ORDER BY version DESC LIMIT 1"),
                [ticket],
                from_row,
            )
            .optional()?,
    };
    found.ok_or_else(|| match version {
        Some(v) => StoreError::NotFound(format!("plan version {v} of ticket {ticket}")),
        None => StoreError::NotFound(format!("a plan of ticket {ticket}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tickets::tests::new_ticket;

    fn plan(title: &str) -> Plan {
        Plan {
            title: title.into(),
            description: "d".into(),
            ..Plan::default()
        }
    }

    #[test]
    fn versions_count_up_and_the_ticket_shows_the_latest() {
        let conn = crate::store::test_conn();
        let t = new_ticket(&conn);
        let other = new_ticket(&conn);
        assert!(list(&conn, t).unwrap().is_empty());
        assert!(matches!(get(&conn, t, None), Err(StoreError::NotFound(_))));
        assert_eq!(record(&conn, t, None, &plan("one")).unwrap(), 1);
        assert_eq!(record(&conn, other, None, &plan("other")).unwrap(), 1);
        assert_eq!(record(&conn, t, None, &plan("two")).unwrap(), 2);
        let all = list(&conn, t).unwrap();
        let titles: Vec<_> = all.iter().map(|v| (v.version, v.plan.title.as_str())).collect();
        assert_eq!(titles, [(1, "one"), (2, "two")]);
        assert_eq!(get(&conn, t, Some(1)).unwrap().plan.title, "one");
        assert_eq!(get(&conn, t, None).unwrap().version, 2);
        assert!(matches!(get(&conn, t, Some(3)), Err(StoreError::NotFound(_))));
        assert!(matches!(list(&conn, 999), Err(StoreError::NotFound(_))));
        let ticket = tickets::get(&conn, t).unwrap();
        assert_eq!(
            (ticket.plan.unwrap().title, ticket.plan_version),
            ("two".into(), Some(2))
        );
    }
}

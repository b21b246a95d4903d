//! Linked projects: other repositories a project's plans may research.

use planwire_protocol::ProjectLink;
use rusqlite::{params, Connection};

use super::{tickets, Result, StoreError};
use crate::util::now;

pub fn list(conn: &Connection, root: &str) -> Result<Vec<ProjectLink>> {
    let mut stmt = conn.prepare_cached(
        "SELECT l.name, l.linked_root, l.role FROM project_links l JOIN projects p ON p.id = l.project_id
         WHERE p.root = ?1 ORDER BY l.name",
    )?;
    let rows = stmt.query_map([root], |r| {
        Ok(ProjectLink {
            name: r.get(0)?,
            linked_root: r.get(1)?,
            role: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Adds a link, or updates the one of that name.
pub fn link(conn: &Connection, root: &str, link: &ProjectLink) -> Result<()> {
    let project = tickets::project_id(conn, root)?;
    conn.execute(
        "INSERT INTO project_links (project_id, name, linked_root, role, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(project_id, name) DO UPDATE SET linked_root = excluded.linked_root, role = excluded.role",
        params![project, link.name, link.linked_root, link.role, now()],
    )?;
    Ok(())
}

pub fn unlink(conn: &Connection, root: &str, name: &str) -> Result<()> {
    let removed = conn.execute(
        "DELETE FROM project_links WHERE name = ?2 AND project_id = (SELECT id FROM projects WHERE root = ?1)",
        params![root, name],
    )?;
    if removed == 0 {
        return Err(StoreError::NotFound(format!("link {name:?} of {root}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_update_unlink() {
        let conn = crate::store::test_conn();
        let l = ProjectLink {
            name: "backend".into(),
            linked_root: "/b".into(),
            role: "API".into(),
        };
        link(&conn, "/p", &l).unwrap();
        link(
            &conn,
            "/p",
            &ProjectLink {
                role: "the API".into(),
                ..l.clone()
            },
        )
        .unwrap();
        assert_eq!(list(&conn, "/p").unwrap()[0].role, "the API");
        assert!(list(&conn, "/other").unwrap().is_empty());
        unlink(&conn, "/p", "backend").unwrap();
        assert!(matches!(unlink(&conn, "/p", "backend"), Err(StoreError::NotFound(_))));
    }
}

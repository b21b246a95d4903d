//! A project's prompt settings, and the settings each run used (`runs.settings_json`).

use planwire_protocol::{ProjectSettings, RunId, Skill};
use rusqlite::{params, Connection, OptionalExtension};

use super::{tickets, Result};
use crate::util::now;

/// What `planwire/setProjectSettings` changes: `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub memory_enabled: Option<bool>,
    /// `Some(None)` clears the language.
    pub output_language: Option<Option<String>>,
    pub skills: Option<Vec<Skill>>,
    /// `Some(None)` clears them.
    pub extra_instructions: Option<Option<String>>,
}

/// The settings of a project that never set any.
pub fn defaults(root: &str) -> ProjectSettings {
    ProjectSettings {
        root: root.to_owned(),
        memory_enabled: true,
        output_language: None,
        skills: Vec::new(),
        extra_instructions: None,
    }
}

/// The settings of the project at `root` (the defaults when it has none, or is unknown).
pub fn get(conn: &Connection, root: &str) -> Result<ProjectSettings> {
    let row = conn
        .query_row(
            "SELECT s.memory_enabled, s.output_language, s.skills_json, s.extra_instructions
             FROM project_settings s JOIN projects p ON p.id = s.project_id WHERE p.root = ?1",
            [root],
            |r| {
                Ok((
                    r.get::<_, bool>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            },
        )
        .optional()?;
    Ok(match row {
        None => defaults(root),
        Some((memory_enabled, output_language, skills, extra_instructions)) => ProjectSettings {
            root: root.to_owned(),
            memory_enabled,
            output_language,
            skills: serde_json::from_str(&skills).unwrap_or_default(),
            extra_instructions,
        },
    })
}

/// Applies `changes` to the project's settings (creating the project if needed); returns them all.
pub fn set(conn: &Connection, root: &str, changes: Changes) -> Result<ProjectSettings> {
    let project = tickets::project_id(conn, root)?;
    let mut s = get(conn, root)?;
    if let Some(v) = changes.memory_enabled {
        s.memory_enabled = v;
    }
    if let Some(v) = changes.output_language {
        s.output_language = v;
    }
    if let Some(v) = changes.skills {
        s.skills = v;
    }
    if let Some(v) = changes.extra_instructions {
        s.extra_instructions = v;
    }
    let skills = serde_json::to_string(&s.skills).expect("skills serialize");
    conn.execute(
        "INSERT INTO project_settings (project_id, memory_enabled, output_language, skills_json, extra_instructions,
            updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(project_id) DO UPDATE SET memory_enabled = ?2, output_language = ?3, skills_json = ?4,
            extra_instructions = ?5, updated_at = ?6",
        params![
            project,
            s.memory_enabled,
            s.output_language,
            skills,
            s.extra_instructions,
            now()
        ],
    )?;
    Ok(s)
}

/// Whether the project of `ticket` keeps memory (true when it never set it).
pub fn memory_enabled_for_ticket(conn: &Connection, ticket: i64) -> Result<bool> {
    let enabled: Option<bool> = conn
        .query_row(
            "SELECT s.memory_enabled FROM tickets t JOIN project_settings s ON s.project_id = t.project_id
             WHERE t.id = ?1",
            [ticket],
            |r| r.get(0),
        )
        .optional()?;
    Ok(enabled.unwrap_or(true))
}

/// Records the prompt settings (JSON) a run used.
pub fn set_run_settings(conn: &Connection, run: RunId, json: &str) -> Result<()> {
    conn.execute("UPDATE runs SET settings_json = ?2 WHERE id = ?1", params![run, json])?;
    Ok(())
}

/// The prompt settings (JSON) a run used, when they were recorded.
pub fn run_settings(conn: &Connection, run: RunId) -> Result<Option<String>> {
    Ok(conn
        .query_row("SELECT settings_json FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .optional()?
        .flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_until_set_and_fields_left_out_keep_their_value() {
        let conn = crate::store::test_conn();
        let s = get(&conn, "/tmp/p").unwrap();
        assert_eq!(s, defaults("/tmp/p"));
        let skill = Skill {
            name: "rust".into(),
            text: "Use anyhow.".into(),
        };
        set(
            &conn,
            "/tmp/p",
            Changes {
                output_language: Some(Some("German".into())),
                skills: Some(vec![skill.clone()]),
                ..Changes::default()
            },
        )
        .unwrap();
        let s = set(
            &conn,
            "/tmp/p",
            Changes {
                memory_enabled: Some(false),
                extra_instructions: Some(Some("Be brief.".into())),
                ..Changes::default()
            },
        )
        .unwrap();
        assert_eq!(s, get(&conn, "/tmp/p").unwrap());
        assert!(!s.memory_enabled);
        assert_eq!(s.output_language.as_deref(), Some("German"));
        assert_eq!(s.skills, [skill]);
        assert_eq!(s.extra_instructions.as_deref(), Some("Be brief."));
        let cleared = set(
            &conn,
            "/tmp/p",
            Changes {
                output_language: Some(None),
                skills: Some(Vec::new()),
                ..Changes::default()
            },
        )
        .unwrap();
        assert_eq!((cleared.output_language, cleared.skills.len()), (None, 0));
        // Another project is untouched.
        assert_eq!(get(&conn, "/tmp/q").unwrap(), defaults("/tmp/q"));
    }

    #[test]
    fn memory_enabled_for_a_ticket_follows_its_project() {
        let conn = crate::store::test_conn();
        let ticket = crate::store::tickets::tests::new_ticket(&conn);
        assert!(memory_enabled_for_ticket(&conn, ticket).unwrap());
        let off = Changes {
            memory_enabled: Some(false),
            ..Changes::default()
        };
        set(&conn, "/tmp/x", off).unwrap();
        assert!(!memory_enabled_for_ticket(&conn, ticket).unwrap());
    }
}

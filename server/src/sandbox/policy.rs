//! The sandbox policy as data: where a sandboxed process may write, and why. Everything not
//! listed is read-only to it (reads and execution are allowed everywhere). The lists come
//! from the caller (each planner adapter names its CLI's); this module knows no planner.

use std::path::{Path, PathBuf};

/// A directory (everything beneath it) or a single file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// One file, written in place; when missing it is created holding `initial`.
    File {
        initial: &'static str,
    },
}

/// One place a sandboxed planner may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writable {
    pub path: PathBuf,
    pub kind: Kind,
    /// Why the planner needs it.
    pub reason: &'static str,
}

impl Writable {
    /// The directory `path` and everything beneath it.
    pub fn dir(path: PathBuf, reason: &'static str) -> Writable {
        Writable {
            path,
            kind: Kind::Dir,
            reason,
        }
    }

    /// The single file `path`, created holding `initial` when missing.
    pub fn file(path: PathBuf, initial: &'static str, reason: &'static str) -> Writable {
        Writable {
            path,
            kind: Kind::File { initial },
            reason,
        }
    }
}

/// Creates the entries that do not exist yet (a rule needs an existing path): directories
/// private to the user, a missing file with its initial content.
pub fn create_missing(writable: &[Writable]) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    for w in writable {
        if w.path.exists() {
            continue;
        }
        let made = match w.kind {
            Kind::Dir => std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&w.path),
            Kind::File { initial } => write_new(&w.path, initial.as_bytes()),
        };
        made.map_err(|e| format!("cannot create {}: {e}", w.path.display()))?;
    }
    Ok(())
}

fn write_new(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_entries_are_created_and_a_json_file_is_an_object() {
        let t = tempfile::tempdir().unwrap();
        let w = vec![
            Writable::dir(t.path().join("a/b"), "test"),
            Writable::file(t.path().join("state.json"), "{}\n", "test"),
        ];
        create_missing(&w).unwrap();
        assert!(t.path().join("a/b").is_dir());
        assert_eq!(std::fs::read_to_string(t.path().join("state.json")).unwrap(), "{}\n");
        // Existing ones are left as they are.
        std::fs::write(t.path().join("state.json"), "{\"a\":1}").unwrap();
        create_missing(&w).unwrap();
        assert_eq!(
            std::fs::read_to_string(t.path().join("state.json")).unwrap(),
            "{\"a\":1}"
        );
    }
}

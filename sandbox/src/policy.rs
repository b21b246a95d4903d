//! The policy as data: where a sandboxed process may write, and why. Everything not listed
//! is read-only to it (reads and execution are allowed everywhere). The lists come from the
//! caller; every platform's file builds its restriction from the same entries.

use std::path::{Path, PathBuf};

use crate::Error;

/// A directory (everything beneath it) or a single file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    /// One file, written in place; when missing it is created holding `initial`.
    File {
        initial: &'static str,
    },
}

/// One place a sandboxed process may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writable {
    pub path: PathBuf,
    pub kind: Kind,
    /// Why the process needs it.
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
pub(crate) fn create_missing(writable: &[Writable]) -> Result<(), Error> {
    for w in writable {
        if w.path.exists() {
            continue;
        }
        let made = match w.kind {
            Kind::Dir => create_dir(&w.path),
            Kind::File { initial } => write_new(&w.path, initial.as_bytes()),
        };
        made.map_err(|source| Error::Create {
            path: w.path.clone(),
            source,
        })?;
    }
    Ok(())
}

/// A directory and its missing parents, private to the user (mode 0700 on Unix).
fn create_dir(path: &Path) -> std::io::Result<()> {
    let mut dir = std::fs::DirBuilder::new();
    dir.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
    dir.create(path)
}

/// A new file holding `content`, private to the user (mode 0600 on Unix).
fn write_new(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(content)
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
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &str| std::fs::metadata(t.path().join(p)).unwrap().permissions().mode() & 0o777;
            assert_eq!((mode("a/b"), mode("state.json")), (0o700, 0o600));
        }
        assert_eq!(std::fs::read_to_string(t.path().join("state.json")).unwrap(), "{}\n");
        // Existing ones are left as they are.
        std::fs::write(t.path().join("state.json"), "{\"a\":1}").unwrap();
        create_missing(&w).unwrap();
        assert_eq!(
            std::fs::read_to_string(t.path().join("state.json")).unwrap(),
            "{\"a\":1}"
        );
        // One that cannot be made is named.
        let blocked = [Writable::dir(t.path().join("state.json/sub"), "test")];
        let e = create_missing(&blocked).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "cannot create {}: ",
                t.path().join("state.json/sub").display()
            )),
            "{e}"
        );
    }
}

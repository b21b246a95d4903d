//! Opening the database file without harming it.
//!
//! A user's file that fails to open is left exactly as it was: its bytes, its mode, and no
//! `-wal`, `-shm` or `-journal` next to it. So nothing that can write touches a file until it
//! is known to be a planwire database this build can use:
//!
//! 1. The directory is created (0700) when missing; a path that is a directory is refused.
//! 2. A file that exists is checked with plain reads of its 100-byte header: the SQLite
//!    magic, a valid page size and layout, a size that matches the file, and `user_version`
//!    (offset 60): a schema newer than this build's is refused here, before SQLite opens it.
//! 3. SQLite opens it without creating anything and reads its schema (a damaged first page
//!    fails here; SQLite removes the `-wal` and `-shm` it made when the connection closes).
//!    The file must hold no tables, or planwire's.
//! 4. Only then: WAL mode, and the migrations.
//!
//! A missing file is created here (exclusively, mode 0600), so only a file planwire made is
//! private from its first byte; the mode of an existing file is never changed.
//!
//! The header is read with a plain `File`, so this must not run for a file this process
//! already has open in SQLite (closing a descriptor drops the process's POSIX locks on it).

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::faults::{self, sibling};
use super::schema;

/// Why the database cannot be used, in words.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("its directory {dir} cannot be created: {source}")]
    Directory { dir: String, source: std::io::Error },
    #[error("the path is a directory, not a database file")]
    IsDirectory,
    #[error("it cannot be read or written: {0}")]
    Access(std::io::Error),
    #[error("it is not a planwire database ({0}); planwire left it as it was")]
    NotPlanwire(String),
    #[error("it is damaged ({0}); planwire left it as it was")]
    Damaged(String),
    #[error(
        "it was written by a newer planwire (schema version {found}; this planwire knows up to {known}); \
         planwire left it as it was: use the newer planwire, or another database file"
    )]
    Newer { found: u32, known: u32 },
    #[error("{0}")]
    Sqlite(rusqlite::Error),
}

/// What the header says, for a file that has one.
struct Header {
    user_version: u32,
}

/// Creates the directory, checks an existing file or creates a new one. Returns whether the
/// file was created now.
pub(super) fn prepare(path: &Path) -> Result<bool, OpenError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| OpenError::Directory {
                    dir: dir.display().to_string(),
                    source,
                })?;
        }
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(OpenError::IsDirectory),
        Ok(_) => {
            check_file(path)?;
            Ok(false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
            {
                Ok(_) => Ok(true),
                // Another process made it just now: check it like any existing file.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => check_file(path).map(|_| false),
                Err(e) => Err(OpenError::Access(e)),
            }
        }
        Err(e) => Err(OpenError::Access(e)),
    }
}

/// For a check that must change nothing: the path, when it exists, is a usable file; when it
/// does not, its directory exists or could be made.
pub(super) fn check_path(path: &Path) -> Result<bool, OpenError> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(OpenError::IsDirectory),
        Ok(_) => check_file(path).map(|_| true),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            match dir.ancestors().find(|a| a.exists()) {
                Some(a) if !a.is_dir() => Err(OpenError::Directory {
                    dir: dir.display().to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotADirectory,
                        format!("{} is not a directory", a.display()),
                    ),
                }),
                _ => Ok(false),
            }
        }
        Err(e) => Err(OpenError::Access(e)),
    }
}

/// An existing file: readable and writable, and either empty or a planwire-compatible
/// SQLite header.
fn check_file(path: &Path) -> Result<(), OpenError> {
    // Opening for writing changes nothing, and says early that the file is not writable.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(OpenError::Access)?;
    let len = file.metadata().map_err(OpenError::Access)?.len();
    if len == 0 {
        return Ok(()); // a new, empty database (or one whose pages are all in its WAL)
    }
    let mut bytes = [0u8; 100];
    let mut got = 0;
    while got < bytes.len() {
        match file.read(&mut bytes[got..]).map_err(OpenError::Access)? {
            0 => break,
            n => got += n,
        }
    }
    drop(file);
    let wal_has_frames = std::fs::metadata(sibling(path, "-wal")).is_ok_and(|m| m.len() > 32);
    let header = parse_header(&bytes[..got], len, wal_has_frames)?;
    if header.user_version > schema::VERSION {
        return Err(OpenError::Newer {
            found: header.user_version,
            known: schema::VERSION,
        });
    }
    Ok(())
}

const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Checks a database header (SQLite's file format, section 1.3).
fn parse_header(b: &[u8], file_len: u64, wal_has_frames: bool) -> Result<Header, OpenError> {
    if b.len() < 16 || &b[..16] != MAGIC {
        return Err(OpenError::NotPlanwire("not an SQLite file".into()));
    }
    if b.len() < 100 {
        return Err(OpenError::Damaged("its header is cut short".into()));
    }
    let be16 = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]) as u64;
    let be32 = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let page = match be16(16) {
        1 => 65536,
        n if (512..=32768).contains(&n) && n.is_power_of_two() => n,
        n => return Err(OpenError::Damaged(format!("its header names an invalid page size {n}"))),
    };
    if !matches!(b[18], 1 | 2) || !matches!(b[19], 1 | 2) || (b[21], b[22], b[23]) != (64, 32, 32) {
        return Err(OpenError::Damaged("its header has invalid format fields".into()));
    }
    if file_len < page || !file_len.is_multiple_of(page) {
        return Err(OpenError::Damaged(format!(
            "its size, {file_len} bytes, is not a whole number of {page}-byte pages"
        )));
    }
    // The page count is valid when its version stamp matches (offset 92 = offset 96); with
    // a WAL that still holds pages, the file may be shorter than it says.
    let pages = be32(28) as u64;
    if pages > 0 && be32(92) == be32(96) && !wal_has_frames && pages * page > file_len {
        return Err(OpenError::Damaged(format!(
            "it is cut short: {file_len} bytes of the {} its header says",
            pages * page
        )));
    }
    Ok(Header { user_version: be32(60) })
}

/// Opens the checked file in SQLite (never creating it) and checks what it holds.
pub(super) fn connect(path: &Path, busy: Duration) -> Result<Connection, OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(OpenError::Sqlite)?;
    conn.busy_timeout(busy).map_err(OpenError::Sqlite)?;
    check_contents(&conn)?;
    Ok(conn)
}

/// The schema reads (page 1 is sound), its version is one this build knows, and its tables
/// are planwire's (or there are none yet).
fn check_contents(conn: &Connection) -> Result<(), OpenError> {
    let damaged = |e: rusqlite::Error| {
        if faults::is_damaged(&e) {
            OpenError::Damaged(e.to_string())
        } else {
            OpenError::Sqlite(e)
        }
    };
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
        .map_err(damaged)?;
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(damaged)?;
    if version > schema::VERSION {
        return Err(OpenError::Newer {
            found: version,
            known: schema::VERSION,
        });
    }
    let ours = ["tickets", "runs", "transcript"];
    let is_ours = ours.iter().all(|t| tables.iter().any(|n| n == t));
    match (version, tables.is_empty()) {
        (_, true) if version == 0 => Ok(()),
        (v, false) if v > 0 && is_ours => Ok(()),
        _ => {
            let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
            let what = if tables.is_empty() {
                format!("schema version {version} but no tables")
            } else {
                format!("an SQLite database of another program: tables {}", shown.join(", "))
            };
            Err(OpenError::NotPlanwire(what))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(page: u16, version: u32) -> Vec<u8> {
        let mut b = vec![0u8; 100];
        b[..16].copy_from_slice(MAGIC);
        b[16..18].copy_from_slice(&page.to_be_bytes());
        b[18] = 2;
        b[19] = 2;
        b[21..24].copy_from_slice(&[64, 32, 32]);
        b[60..64].copy_from_slice(&version.to_be_bytes());
        b
    }

    #[test]
    fn headers_are_judged_before_sqlite_sees_the_file() {
        assert!(parse_header(&header(4096, 2), 8192, false).is_ok());
        assert_eq!(parse_header(&header(1, 0), 65536, false).unwrap().user_version, 0);
        assert!(matches!(
            parse_header(b"hello", 5, false),
            Err(OpenError::NotPlanwire(_))
        ));
        assert!(matches!(
            parse_header(&MAGIC[..], 16, false),
            Err(OpenError::Damaged(_))
        ));
        assert!(matches!(
            parse_header(&header(1000, 0), 4000, false),
            Err(OpenError::Damaged(_))
        ));
        assert!(matches!(
            parse_header(&header(4096, 0), 5000, false),
            Err(OpenError::Damaged(_))
        ));
        let mut cut = header(4096, 1);
        cut[28..32].copy_from_slice(&4u32.to_be_bytes());
        cut[92..96].copy_from_slice(&7u32.to_be_bytes());
        cut[96..100].copy_from_slice(&7u32.to_be_bytes());
        assert!(matches!(parse_header(&cut, 8192, false), Err(OpenError::Damaged(m)) if m.contains("cut short")));
        assert!(parse_header(&cut, 8192, true).is_ok(), "the rest may be in the WAL");
        assert_eq!(
            parse_header(&header(4096, 1002), 4096, false).unwrap().user_version,
            1002
        );
    }
}

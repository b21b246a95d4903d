//! What went wrong with the database file, in words a person can act on: a full disk (and
//! how much is free), a lock held by another process (and which one, where the OS can tell),
//! a damaged file. Also the space kept in reserve so a run's end can still be recorded once
//! the disk is full.
//!
//! The lock holder is read from `/proc/locks`, which lists every POSIX lock with its pid,
//! device and inode. In WAL mode the write lock is byte 120 of the `-shm` file (SQLite's
//! `WAL_WRITE_LOCK`); in rollback mode it is on the database file itself. The files are only
//! `stat`ed, never opened: closing any descriptor of a file drops every POSIX lock this
//! process holds on it, including SQLite's own.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::ffi;

/// Space kept in `<db>-reserve`: enough for the few rows that record how runs ended.
pub const RESERVE_BYTES: u64 = 1024 * 1024;

/// Free space under which a disk counts as full once a write found it so (and `doctor` says
/// it is): room for the reserve, and as much again.
pub const ROOM_BYTES: u64 = 2 * RESERVE_BYTES;

/// Byte of the `-shm` file that SQLite locks to write in WAL mode.
const WAL_WRITE_LOCK: u64 = 120;

/// The primary and extended SQLite result codes of an error, when it is SQLite's.
fn codes(e: &rusqlite::Error) -> Option<(ffi::ErrorCode, i32)> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some((f.code, f.extended_code)),
        _ => None,
    }
}

/// SQLITE_FULL, or an I/O error while the filesystem has (almost) no room left.
pub fn is_full(e: &rusqlite::Error, db: &Path) -> bool {
    match codes(e) {
        Some((ffi::ErrorCode::DiskFull, _)) => true,
        Some((ffi::ErrorCode::SystemIoFailure, _)) => free_bytes(db).is_some_and(|free| free < 64 * 1024),
        _ => false,
    }
}

/// SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock we need.
pub fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        codes(e),
        Some((ffi::ErrorCode::DatabaseBusy | ffi::ErrorCode::DatabaseLocked, _))
    )
}

/// SQLITE_CORRUPT or SQLITE_NOTADB.
pub fn is_damaged(e: &rusqlite::Error) -> bool {
    matches!(
        codes(e),
        Some((ffi::ErrorCode::DatabaseCorrupt | ffi::ErrorCode::NotADatabase, _))
    )
}

/// Bytes an unprivileged writer may still use on the filesystem holding `path` (or its
/// nearest existing ancestor).
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = path.ancestors().find(|p| p.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a local struct for the kernel to fill.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// `1.5 MiB`, `312 KiB`, `0 bytes`.
pub fn human_bytes(n: u64) -> String {
    match n {
        0..=1023 => format!("{n} bytes"),
        1024..=1048575 => format!("{} KiB", n / 1024),
        _ => format!("{:.1} MiB", n as f64 / 1048576.0),
    }
}

/// "pid 4242 (python3)": the other process holding the write lock of the database at `db`,
/// when `/proc/locks` tells.
pub fn lock_holder(db: &Path) -> Option<String> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let me = std::process::id() as i64;
    let shm = sibling(db, "-shm");
    let targets = [(shm, Some(WAL_WRITE_LOCK)), (db.to_owned(), None)];
    for (file, byte) in targets {
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        let dev = (libc::major(meta.dev()) as u64, libc::minor(meta.dev()) as u64);
        for lock in locks.lines().filter_map(parse_lock) {
            let covers = byte.is_none_or(|b| lock.start <= b && lock.end.is_none_or(|e| b <= e));
            if lock.write && lock.pid != me && lock.pid > 0 && lock.inode == meta.ino() && lock.dev == dev && covers {
                return Some(describe_pid(lock.pid));
            }
        }
    }
    None
}

/// `pid N (comm)`.
fn describe_pid(pid: i64) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => format!("pid {pid} ({})", comm.trim()),
        Err(_) => format!("pid {pid}"),
    }
}

struct Lock {
    write: bool,
    pid: i64,
    dev: (u64, u64),
    inode: u64,
    start: u64,
    end: Option<u64>,
}

/// One line of `/proc/locks`: `1: POSIX  ADVISORY  WRITE 4242 00:2f:1234 120 120`. Locks
/// still waiting (`1: -> POSIX …`) are not held, and are skipped.
fn parse_lock(line: &str) -> Option<Lock> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.get(1) == Some(&"->") || fields.len() < 8 {
        return None;
    }
    let mut id = fields[5].split(':');
    let major = u64::from_str_radix(id.next()?, 16).ok()?;
    let minor = u64::from_str_radix(id.next()?, 16).ok()?;
    let inode = id.next()?.parse().ok()?;
    Some(Lock {
        write: fields[3] == "WRITE",
        pid: fields[4].parse().ok()?,
        dev: (major, minor),
        inode,
        start: fields[6].parse().ok()?,
        end: fields[7].parse().ok(),
    })
}

/// `planwire.db` → `planwire.db-shm`.
pub fn sibling(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `<db>-reserve`: [`RESERVE_BYTES`] really allocated on the database's filesystem. When
/// the disk fills, it is deleted so the ends of runs can be written; once there is room
/// again, it is made again.
pub struct Reserve {
    path: PathBuf,
}

impl Reserve {
    pub fn new(db: &Path) -> Reserve {
        Reserve {
            path: sibling(db, "-reserve"),
        }
    }

    pub fn is_held(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= RESERVE_BYTES)
    }

    /// Makes the reserve when it is missing and the filesystem has room to spare.
    pub fn ensure(&self) {
        if self.is_held() || free_bytes(&self.path).is_none_or(|free| free < ROOM_BYTES) {
            return;
        }
        if let Err(e) = self.allocate() {
            tracing::debug!("cannot keep space in reserve at {}: {e}", self.path.display());
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn allocate(&self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.path)?;
        // SAFETY: a valid descriptor; the kernel allocates the blocks (tmpfs and ext4 do).
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, RESERVE_BYTES as libc::off_t) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Gives the reserved space back to the filesystem; true when there was some.
    pub fn release(&self) -> bool {
        let held = self.is_held();
        let _ = std::fs::remove_file(&self.path);
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_locks_lines() {
        let l = parse_lock("1: POSIX  ADVISORY  WRITE 4242 00:2f:1234 120 120").unwrap();
        assert!(l.write);
        assert_eq!(
            (l.pid, l.dev, l.inode, l.start, l.end),
            (4242, (0, 0x2f), 1234, 120, Some(120))
        );
        let l = parse_lock("2: POSIX  ADVISORY  READ 7 fd:01:99 0 EOF").unwrap();
        assert!(!l.write);
        assert_eq!((l.dev, l.end), ((0xfd, 1), None));
        assert!(parse_lock("3: -> POSIX  ADVISORY  WRITE 8 00:2f:1234 120 120").is_none());
        assert!(parse_lock("garbage").is_none());
    }

    #[test]
    fn names_another_process_holding_the_write_lock_never_this_one() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);")
            .unwrap();
        assert_eq!(lock_holder(&db), None, "this process holds it");
        conn.execute_batch("COMMIT").unwrap();
        // A second process (the e2e tests hold the lock from theirs, against the real binary).
        let script = "import sqlite3, sys, time\n\
            c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
            c.execute('BEGIN EXCLUSIVE')\n\
            print('locked', flush=True)\n\
            time.sleep(60)\n";
        let Ok(mut child) = std::process::Command::new("python3")
            .args(["-c", script, &db.display().to_string()])
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            return; // no python3 here: the e2e lock tests cover it
        };
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), "locked");
        let holder = lock_holder(&db);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(holder, Some(format!("pid {} (python3)", child.id())));
    }

    #[test]
    fn sizes_read_as_words() {
        assert_eq!(human_bytes(0), "0 bytes");
        assert_eq!(human_bytes(2048), "2 KiB");
        assert_eq!(human_bytes(3 * 1048576 / 2), "1.5 MiB");
    }

    #[test]
    fn the_reserve_is_made_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let r = Reserve::new(&dir.path().join("p.db"));
        r.ensure();
        assert!(r.is_held());
        assert!(r.release());
        assert!(!r.is_held());
        assert!(!r.release());
    }
}

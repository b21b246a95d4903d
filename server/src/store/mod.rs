//! The SQLite store: one file per user, WAL, numbered migrations.
//!
//! One thread owns the connection. Async code sends it closures over a channel and awaits
//! the answer ([`Store::call`]), so every write is serialised through one owner and no
//! async task ever blocks on SQLite. Every write transaction is `BEGIN IMMEDIATE`.
//! Several sidecars may share the file: the database, not memory, decides whether a ticket
//! is busy (a partial unique index allows one active run per ticket).
//!
//! The query functions in the submodules are plain synchronous functions on a
//! `&Connection`, so they are easy to test and to compose inside one transaction.

pub mod links;
pub mod memory;
pub mod plans;
pub mod questions;
pub mod runs;
pub mod schema;
pub mod settings;
pub mod tickets;
pub mod transcript;

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot open the database at {path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("the database thread is gone")]
    Gone,
    #[error("not found: {0}")]
    NotFound(String),
    #[error("ticket {0} already has an active run")]
    Busy(i64),
    #[error("{0}")]
    Conflict(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// A handle to the store's owner thread. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    tx: std::sync::mpsc::Sender<Job>,
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed, mode 0600) and migrates the database.
    pub fn open(path: &Path) -> Result<Store> {
        let mut conn = open_connection(path)?;
        schema::migrate(&mut conn)?;
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("planwire-store".into())
            .spawn(move || {
                for job in rx {
                    job(&mut conn);
                }
            })
            .map_err(|source| StoreError::Open {
                path: path.display().to_string(),
                source,
            })?;
        Ok(Store {
            tx,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the owner thread.
    pub async fn call<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |conn| {
            let _ = tx.send(f(conn));
        });
        self.tx.send(job).map_err(|_| StoreError::Gone)?;
        rx.await.map_err(|_| StoreError::Gone)?
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction on the owner thread.
    pub async fn write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.call(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    /// Runs a read on the owner thread.
    pub async fn read<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.call(move |conn| f(conn)).await
    }
}

fn open_connection(path: &Path) -> Result<Connection> {
    let io_err = |source| StoreError::Open {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err)?;
        }
    }
    // Create the file ourselves so it is private from its first byte; SQLite gives the
    // -wal and -shm files the same mode.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_err)?;
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

/// The DB path: `initializationOptions.dbPath`, then `PLANWIRE_DB`, then
/// `$XDG_DATA_HOME/planwire/planwire.db`, then `~/.local/share/planwire/planwire.db`.
pub fn default_path(from_options: Option<&str>) -> PathBuf {
    if let Some(p) = from_options.filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("PLANWIRE_DB").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("planwire").join("planwire.db")
}

#[cfg(test)]
pub(crate) fn test_conn() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    schema::migrate(&mut conn).unwrap();
    conn
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[tokio::test]
    async fn creates_a_private_file_and_migrates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/planwire.db");
        let store = Store::open(&path).unwrap();
        let version: u32 = store
            .read(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(version, schema::VERSION);
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let mode: String = store
            .read(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?))
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        drop(store);
        // Reopening is idempotent.
        Store::open(&path).unwrap();
    }
}

//! The SQLite store: one file per user, WAL, numbered migrations.
//!
//! Two threads each own a connection. Async code sends them closures over a channel and
//! awaits the answer, so no async task ever blocks on SQLite. Every write goes through the
//! writer ([`Store::write`], one `BEGIN IMMEDIATE` transaction each), so writes are
//! serialised through one owner; reads go to the reader ([`Store::read`]), which WAL lets
//! answer while a write waits for a lock. Several sidecars may share the file: the database,
//! not memory, decides whether a ticket is busy (a partial unique index allows one active run
//! per ticket).
//!
//! Faults are classified here, with what a person needs to know ([`StoreError::Full`],
//! [`StoreError::Locked`], [`StoreError::Open`]); see `faults.rs` and `open.rs`. A write that
//! finds the database locked waits and retries, within a bound ([`StoreOptions::busy_limit`]).
//! A write that finds the disk full fails whole (nothing of it is stored), and gives back the
//! space kept in reserve, which only [`Store::write_ending`] may then use: the writes that
//! record how runs ended. Other writes fail fast until the filesystem has room again.
//!
//! The query functions in the submodules are plain synchronous functions on a
//! `&Connection`, so they are easy to test and to compose inside one transaction.

mod faults;
pub mod links;
pub mod memory;
mod open;
pub mod plans;
pub mod questions;
pub mod runs;
pub mod schema;
pub mod settings;
pub mod tickets;
pub mod transcript;

pub use faults::{free_bytes, human_bytes};
pub use open::OpenError;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use faults::Reserve;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot open the database {path}: {problem}")]
    Open { path: String, problem: OpenError },
    #[error("the disk is full: the database {path} cannot grow ({} free on its filesystem)", human_bytes(*.free))]
    Full { path: String, free: u64 },
    #[error("the database {path} is locked by {} and stayed locked for {waited_s} s", holder.as_deref().unwrap_or("another process"))]
    Locked {
        path: String,
        /// `pid N (name)`, where the OS can tell.
        holder: Option<String>,
        waited_s: u64,
    },
    #[error("the database {path} is damaged: {source}")]
    Damaged { path: String, source: rusqlite::Error },
    #[error("the database thread is gone")]
    Gone,
    #[error("not found: {0}")]
    NotFound(String),
    #[error("ticket {0} already has an active run")]
    Busy(i64),
    #[error("{0}")]
    Conflict(String),
}

impl StoreError {
    /// A fault of the database file or its disk (as opposed to a refusal of the request).
    pub fn is_storage_fault(&self) -> bool {
        matches!(
            self,
            StoreError::Sqlite(_)
                | StoreError::Open { .. }
                | StoreError::Full { .. }
                | StoreError::Locked { .. }
                | StoreError::Damaged { .. }
                | StoreError::Gone
        )
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// How the store behaves under faults.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// The longest a write waits for a lock another process holds before it fails with
    /// [`StoreError::Locked`].
    pub busy_limit: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            busy_limit: Duration::from_secs(30),
        }
    }
}

/// How long [`Store::write_ending`] keeps trying while the disk is full or the file locked.
pub const ENDING_PATIENCE: Duration = Duration::from_secs(60);

/// SQLite waits at most this long per attempt, so a long wait is logged as it goes.
const BUSY_STEP: Duration = Duration::from_millis(500);

type WriteJob = Box<dyn FnOnce(&mut Writer) + Send>;
type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

/// A handle to the store's threads. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    writer: std::sync::mpsc::Sender<WriteJob>,
    reader: std::sync::mpsc::Sender<ReadJob>,
    path: PathBuf,
}

/// The writer thread's state.
struct Writer {
    conn: Connection,
    path: PathBuf,
    opts: StoreOptions,
    reserve: Reserve,
    /// A write found the disk full, and none has succeeded since.
    full: bool,
}

impl Store {
    /// Opens (creating if needed, mode 0600) and migrates the database, with default options.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_with(path, StoreOptions::default())
    }

    /// Opens and migrates the database; a file that cannot be used is left as it was (see
    /// `open.rs`).
    pub fn open_with(path: &Path, opts: StoreOptions) -> Result<Store> {
        let open_err = |problem| StoreError::Open {
            path: path.display().to_string(),
            problem,
        };
        let created = open::prepare(path).map_err(open_err)?;
        let opened = Store::connect_and_migrate(path, opts);
        if opened.is_err() && created {
            // Ours and still empty: leave nothing behind.
            let _ = std::fs::remove_file(path);
        }
        let (writer, reader) = opened?;
        let reserve = Reserve::new(path);
        reserve.ensure();
        let mut w = Writer {
            conn: writer,
            path: path.to_owned(),
            opts,
            reserve,
            full: false,
        };
        let (wtx, wrx) = std::sync::mpsc::channel::<WriteJob>();
        let (rtx, rrx) = std::sync::mpsc::channel::<ReadJob>();
        let spawn_err = |source| open_err(OpenError::Access(source));
        std::thread::Builder::new()
            .name("planwire-store".into())
            .spawn(move || {
                for job in wrx {
                    job(&mut w);
                }
            })
            .map_err(spawn_err)?;
        std::thread::Builder::new()
            .name("planwire-read".into())
            .spawn(move || {
                for job in rrx {
                    job(&reader);
                }
            })
            .map_err(spawn_err)?;
        Ok(Store {
            writer: wtx,
            reader: rtx,
            path: path.to_owned(),
        })
    }

    fn connect_and_migrate(path: &Path, opts: StoreOptions) -> Result<(Connection, Connection)> {
        let open_err = |problem| StoreError::Open {
            path: path.display().to_string(),
            problem,
        };
        let mut conn = open::connect(path, BUSY_STEP.min(opts.busy_limit)).map_err(open_err)?;
        let setup = |c: &Connection| -> rusqlite::Result<()> {
            c.pragma_update(None, "journal_mode", "WAL")?;
            c.pragma_update(None, "synchronous", "NORMAL")?;
            c.pragma_update(None, "foreign_keys", "ON")
        };
        setup(&conn).map_err(|e| classify(e, path, Duration::ZERO))?;
        let deadline = Instant::now() + opts.busy_limit;
        loop {
            match schema::migrate(&mut conn) {
                Ok(()) => break,
                Err(e) if faults::is_busy(&e) && Instant::now() < deadline => {
                    tracing::warn!(
                        "the database {} is locked by {}; waiting",
                        path.display(),
                        faults::lock_holder(path).as_deref().unwrap_or("another process")
                    );
                }
                Err(e) => return Err(classify(e, path, opts.busy_limit)),
            }
        }
        let reader = open::connect(path, Duration::from_secs(5)).map_err(open_err)?;
        reader.pragma_update(None, "query_only", "ON")?;
        Ok((conn, reader))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn on_writer<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Writer) -> Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: WriteJob = Box::new(move |w| {
            let _ = tx.send(f(w));
        });
        self.writer.send(job).map_err(|_| StoreError::Gone)?;
        rx.await.map_err(|_| StoreError::Gone)?
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction on the writer thread. Nothing of it
    /// is stored unless all of it is.
    pub async fn write<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        self.on_writer(move |w| w.transaction(false, f)).await
    }

    /// [`write`](Self::write) for what records how something ended (a run's end): it may use
    /// the space kept in reserve once the disk is full, and it is tried again while the disk
    /// stays full or the lock stays held, for up to [`ENDING_PATIENCE`], so a run's end is
    /// recorded as soon as it can be. `f` may run more than once (never twice successfully).
    pub async fn write_ending<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: Fn(&Connection) -> Result<R> + Send + Sync + 'static,
    {
        let f = std::sync::Arc::new(f);
        let started = Instant::now();
        let mut pause = Duration::from_millis(100);
        loop {
            let g = f.clone();
            match self.on_writer(move |w| w.transaction(true, |c| g(c))).await {
                Err(e @ (StoreError::Full { .. } | StoreError::Locked { .. }))
                    if started.elapsed() < ENDING_PATIENCE =>
                {
                    tracing::warn!(
                        "cannot record an ending yet ({e}); trying again in {} ms",
                        pause.as_millis()
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }

    /// Runs a read on the reader thread.
    pub async fn read<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let path = self.path.clone();
        let job: ReadJob = Box::new(move |conn| {
            let _ = tx.send(f(conn).map_err(|e| reclassify(e, &path)));
        });
        self.reader.send(job).map_err(|_| StoreError::Gone)?;
        rx.await.map_err(|_| StoreError::Gone)?
    }
}

impl Writer {
    fn transaction<R>(&mut self, ending: bool, f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
        if self.full && !ending {
            let free = free_bytes(&self.path).unwrap_or(0);
            // Room for the reserve, and then some: until then, the space is for endings.
            if free < faults::ROOM_BYTES {
                return Err(self.full_error());
            }
        }
        let result = self.begin().and_then(|tx| {
            let out = f(&tx)?;
            tx.commit()?;
            Ok(out)
        });
        match result {
            Ok(out) => {
                // An ending may have used the reserve; only an ordinary write says there is room.
                if self.full && !ending {
                    self.full = false;
                    tracing::info!("the database {} can be written again", self.path.display());
                    self.reserve.ensure();
                }
                Ok(out)
            }
            Err(e) => Err(self.on_error(e)),
        }
    }

    /// `BEGIN IMMEDIATE`, retried while another process holds the lock, up to the limit.
    /// Once it succeeds the write lock is ours: nothing later in the transaction waits.
    fn begin(&self) -> Result<rusqlite::Transaction<'_>> {
        let started = Instant::now();
        let mut attempts = 0u32;
        loop {
            match rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate) {
                Ok(tx) => return Ok(tx),
                Err(e) if faults::is_busy(&e) => {
                    let waited = started.elapsed();
                    if waited >= self.opts.busy_limit {
                        return Err(StoreError::Locked {
                            path: self.path.display().to_string(),
                            holder: faults::lock_holder(&self.path),
                            waited_s: waited.as_secs(),
                        });
                    }
                    if attempts.is_multiple_of(20) {
                        tracing::warn!(
                            "the database {} is locked by {}; a write waits (up to {} s)",
                            self.path.display(),
                            faults::lock_holder(&self.path).as_deref().unwrap_or("another process"),
                            self.opts.busy_limit.as_secs()
                        );
                    }
                    attempts += 1;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn full_error(&self) -> StoreError {
        StoreError::Full {
            path: self.path.display().to_string(),
            free: free_bytes(&self.path).unwrap_or(0),
        }
    }

    /// Classifies a failed write; a full disk gives back the reserve, for the endings.
    fn on_error(&mut self, e: StoreError) -> StoreError {
        let e = reclassify(e, &self.path);
        if let StoreError::Full { .. } = e {
            if !self.full {
                self.full = true;
                let released = self.reserve.release();
                tracing::error!(
                    "the disk holding {} is full; {}",
                    self.path.display(),
                    if released {
                        "the space kept in reserve is now used to record how runs end"
                    } else {
                        "there is no space in reserve"
                    }
                );
            }
            return self.full_error();
        }
        e
    }
}

/// The state of a database file, for `planwire doctor`.
pub enum Health {
    /// Not there yet: planwire creates it on first use.
    Missing,
    /// Opens, and a write would not wait.
    Ready {
        version: u32,
        free: Option<u64>,
    },
    /// The disk holding it is (almost) full.
    Full {
        version: u32,
        free: u64,
    },
    Problem(StoreError),
}

/// Checks the database as [`Store::open`] would, but never creates, migrates or writes it
/// (it may take the write lock for a moment, to see whether another process holds it).
pub fn check(path: &Path, busy: Duration) -> Health {
    let problem = |problem| {
        Health::Problem(StoreError::Open {
            path: path.display().to_string(),
            problem,
        })
    };
    match open::check_path(path) {
        Ok(true) => {}
        Ok(false) => return Health::Missing,
        Err(e) => return problem(e),
    }
    let conn = match open::connect(path, busy) {
        Ok(c) => c,
        Err(e) => return problem(e),
    };
    let version = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap_or(0);
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;") {
        return Health::Problem(classify(e, path, busy));
    }
    match free_bytes(path) {
        Some(free) if free < faults::ROOM_BYTES => Health::Full { version, free },
        free => Health::Ready { version, free },
    }
}

/// A SQLite error as the fault it is.
fn classify(e: rusqlite::Error, path: &Path, waited: Duration) -> StoreError {
    let p = || path.display().to_string();
    if faults::is_full(&e, path) {
        StoreError::Full {
            path: p(),
            free: free_bytes(path).unwrap_or(0),
        }
    } else if faults::is_busy(&e) {
        StoreError::Locked {
            path: p(),
            holder: faults::lock_holder(path),
            waited_s: waited.as_secs(),
        }
    } else if faults::is_damaged(&e) {
        StoreError::Damaged { path: p(), source: e }
    } else {
        StoreError::Sqlite(e)
    }
}

fn reclassify(e: StoreError, path: &Path) -> StoreError {
    match e {
        StoreError::Sqlite(e) => classify(e, path, Duration::ZERO),
        other => other,
    }
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

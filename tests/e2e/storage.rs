//! Storage faults against the real binary: a disk that really fills (a small tmpfs this test
//! mounts; CI runs as root), a second process holding the write lock, and files that must not
//! be opened (damaged, foreign, newer, unreachable), each checked byte for byte afterwards.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::harness::*;

/// A tmpfs of a fixed size, mounted for one test and unmounted (lazily) when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// None (and the reason said) when this user may not mount: the test needs root.
    fn mount(w: &World, bytes: u64) -> Option<Tmpfs> {
        let dir = w.path("tmpfs");
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0700"), "tmpfs"])
            .arg(&dir)
            .output()
            .expect("run mount");
        if !out.status.success() {
            // SAFETY: a plain libc query.
            let root = unsafe { libc::geteuid() } == 0;
            assert!(
                !root,
                "root cannot mount a tmpfs: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("SKIPPED: mounting a tmpfs needs root (CI runs as root)");
            return None;
        }
        Some(Tmpfs { dir })
    }

    /// Fills the filesystem up to `leave` free bytes with a filler file.
    fn fill(&self, leave: u64) -> PathBuf {
        let filler = self.dir.join("filler");
        let free = planwire::store::free_bytes(&self.dir).unwrap();
        let size = free.saturating_sub(leave);
        let f = std::fs::File::create(&filler).unwrap();
        // Really allocated, like a disk that filled.
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, size as libc::off_t) };
        assert_eq!(rc, 0, "fallocate the filler");
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn run_ended(s: &mut Server, run: i64) -> Value {
    let n = s.wait_for(&format!("run {run} ended"), |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run
            && !["queued", "running"].contains(&m["params"]["run"]["status"].as_str().unwrap_or(""))
    });
    n["params"]["run"].clone()
}

fn plan(s: &mut Server, w: &World, title: &str, script: &str) -> (i64, i64) {
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": title, "description": "", "tool": "script", "model": script }),
    );
    (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap())
}

/// The disk fills mid-run: the run fails `storage_full` saying so and where, everything
/// notified is stored, reads answer, and once space is freed the next plan works.
fn disk_fills_mid_run(size: u64, leave: u64, text_len: usize) {
    let w = World::new();
    let Some(fs) = Tmpfs::mount(&w, size) else {
        return;
    };
    let db = fs.dir.join("planwire.db");
    let mut s = Server::start(&w, &[("PLANWIRE_HEARTBEAT_MS", "200")]);
    s.initialize(json!({ "dbPath": db }));
    let reserve = fs.dir.join("planwire.db-reserve");
    assert!(reserve.exists(), "space is kept in reserve");
    let flood = flood_script(&w, "flood.jsonl", 200_000, text_len);
    let filler = fs.fill(leave);
    let (ticket, run) = plan(&mut s, &w, "Fills the disk", &flood);
    let ended = run_ended(&mut s, run);
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(ended["failure"]["code"], "storage_full", "{ended}");
    let message = ended["failure"]["message"].as_str().unwrap();
    assert!(message.contains("the disk is full"), "{message}");
    assert!(message.contains(&db.display().to_string()), "{message}");
    // Nothing notified is missing; the store stopped where the disk did.
    let stored = assert_notified_are_stored(&db.display().to_string(), &s, run);
    assert!(stored > 0 && stored < 200_000, "{stored} events stored; {}", s.stderr());
    assert_eq!(ended["lastSeq"], stored as u64);
    // Reads still answer.
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["ticket"]["status"], "failed");
    assert_eq!(got["runs"][0]["failure"]["code"], "storage_full");
    let page = s.ok(
        "planwire/getTranscript",
        json!({ "runId": run, "afterSeq": 0, "limit": 5 }),
    );
    assert_eq!(page["events"].as_array().unwrap().len(), 5.min(stored));
    let page = s.ok("planwire/getTranscript", json!({ "runId": run, "afterSeq": stored }));
    assert_eq!(
        (page["lastSeq"].clone(), page["done"].clone()),
        (json!(stored), json!(true))
    );
    // While less than 2 MiB is free (the reserve, and as much again), other writes are
    // refused, clearly: the space is kept for the ends of runs.
    if planwire::store::free_bytes(&fs.dir).unwrap() < (2 << 20) - (64 << 10) {
        let e = s.err(
            "planwire/createTicket",
            json!({ "root": w.root(), "title": "T", "description": "" }),
        );
        assert!(e["message"].as_str().unwrap().contains("the disk is full"), "{e}");
        wait_stderr(&s, "the heartbeat fails", "cannot write the heartbeat (will retry)");
        let doctor = doctor(&w, &db);
        assert!(doctor.contains("the disk holding it is full"), "{doctor}");
    }
    // Space freed: the next plan works, without a restart, and the reserve is kept again.
    std::fs::remove_file(filler).unwrap();
    let again = s.ok("planwire/plan", json!({ "ticketId": ticket, "model": "demo" }));
    let ended = run_ended(&mut s, again["runId"].as_i64().unwrap());
    assert_eq!(ended["status"], "completed", "{ended}");
    eventually("the reserve is back", WAIT, || reserve.exists());
    wait_stderr(&s, "the heartbeat goes on", "the heartbeat is written again");
    assert!(!s.stderr().contains("panicked"));
    assert_eq!(s.shutdown_and_exit(), 0);
}

#[test]
fn the_disk_fills_mid_run_with_a_little_room_left() {
    disk_fills_mid_run(8 << 20, 256 << 10, 200);
}

#[test]
fn the_disk_fills_on_a_small_filesystem() {
    disk_fills_mid_run(3 << 20, 700 << 10, 150);
}

#[test]
fn the_disk_fills_mid_run_with_more_room_and_longer_lines() {
    disk_fills_mid_run(24 << 20, 4 << 20, 2000);
}

/// What `planwire doctor` prints for the database at `db`.
fn doctor(w: &World, db: &Path) -> String {
    let out = Command::new(BIN)
        .args(["doctor", "--db"])
        .arg(db)
        .env("HOME", w.path("home"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A paced stream: text lines for about `secs` seconds.
fn paced_script(w: &World, secs: u64) -> String {
    let lines: Vec<Value> = std::iter::once(json!({"format": "claude"}))
        .chain((0..secs * 20).map(|i| {
            let line = json!({"type": "assistant", "message": {"id": format!("msg_paced_{i}"), "type": "message",
                "role": "assistant", "content": [{"type": "text", "text": format!("paced line {i}")}]},
                "parent_tool_use_id": null, "session_id": "paced"});
            json!({"out": line.to_string(), "delayMs": 50})
        }))
        .chain([json!({"exit": 1})])
        .collect();
    w.script("paced.jsonl", &lines)
}

/// Another process holds `BEGIN EXCLUSIVE` on the database until dropped.
struct Holder {
    conn: rusqlite::Connection,
}

impl Holder {
    fn take(db: &Path) -> Holder {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
        Holder { conn }
    }
    fn release(self) {
        self.conn.execute_batch("ROLLBACK").unwrap();
    }
}

fn wait_stderr(s: &Server, what: &str, needle: &str) {
    eventually(what, WAIT, || s.stderr().contains(needle));
}

/// A sidecar with `busyTimeoutMs`, running a paced plan of about `secs` seconds that has
/// streamed some events: (world, server, ticket, run).
fn paced_run(busy_ms: u64, secs: u64) -> (World, Server, i64, i64) {
    let w = World::new();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db(), "busyTimeoutMs": busy_ms }));
    let script = paced_script(&w, secs);
    let (ticket, run) = plan(&mut s, &w, "Locked", &script);
    s.wait_for("some events", |m| m["method"] == "planwire/transcript");
    (w, s, ticket, run)
}

#[test]
fn reads_answer_while_a_write_waits_for_the_lock_and_nothing_is_lost() {
    // Longer than any wait below: a read that queued behind the write would time out.
    let (w, mut s, ticket, run) = paced_run(300_000, 20);
    let holder = Holder::take(Path::new(&w.db()));
    let me = format!("is locked by pid {}", std::process::id());
    wait_stderr(&s, "a write waits for the lock", &me);
    // The write waits; reads answer now, from their own connection.
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["runs"][0]["status"], "running");
    s.ok("planwire/getTranscript", json!({ "runId": run }));
    s.ok("planwire/listTickets", json!({}));
    holder.release();
    s.ok("planwire/stop", json!({ "ticketId": ticket }));
    let ended = run_ended(&mut s, run);
    assert_eq!(ended["status"], "cancelled", "{ended}");
    let stored = assert_notified_are_stored(&w.db(), &s, run);
    assert!(stored > 1);
}

#[test]
fn a_lock_held_past_the_busy_timeout_fails_the_run_storage_busy_naming_the_holder() {
    let (w, mut s, ticket, run) = paced_run(1000, 60);
    let (pgid, start) = run_group(&w, run);
    let holder = Holder::take(Path::new(&w.db()));
    let doctor = doctor(&w, Path::new(&w.db()));
    assert!(
        doctor.contains(&format!("is locked by pid {}", std::process::id())),
        "{doctor}"
    );
    wait_stderr(&s, "the batch gave up", "the run ends here");
    // The planner is stopped at once; the run's end waits for the lock.
    eventually("the planner is gone", WAIT, || !group_alive(pgid, start));
    holder.release();
    let ended = run_ended(&mut s, run);
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(ended["failure"]["code"], "storage_busy", "{ended}");
    let message = ended["failure"]["message"].as_str().unwrap();
    let me = format!("locked by pid {}", std::process::id());
    assert!(message.contains(&me) && message.contains(&w.db()), "{message}");
    assert_notified_are_stored(&w.db(), &s, run);
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(got["ticket"]["status"], "failed");
    // The lock is gone: the next plan works.
    let again = s.ok("planwire/plan", json!({ "ticketId": ticket, "model": "demo" }));
    let ended = run_ended(&mut s, again["runId"].as_i64().unwrap());
    assert_eq!(ended["status"], "completed", "{ended}");
}

// ---------------------------------------------------------------------------------------
// Files that must not be opened: each left exactly as it was.

/// A file's bytes and mode, and the names in its directory.
fn snapshot(path: &Path) -> (Vec<u8>, u32, Vec<String>) {
    let bytes = std::fs::read(path).unwrap_or_default();
    let mode = std::fs::metadata(path).map(|m| m.permissions().mode()).unwrap_or(0);
    let mut names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    (bytes, mode, names)
}

/// A real planwire database with a ticket in it, checkpointed into its main file.
fn planwire_db(w: &World, name: &str) -> PathBuf {
    let path = w.path(&format!("dbs/{name}"));
    let mut s = w.start();
    s.initialize(json!({ "dbPath": path }));
    s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Kept", "description": "" }),
    );
    assert_eq!(s.shutdown_and_exit(), 0);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    drop(conn);
    let _ = std::fs::remove_file(format!("{}-reserve", path.display()));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path
}

/// Deterministic noise.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `initialize` on `path` fails with `expect` in its message (and the path), the exit is 1
/// with no panic, `doctor` says the same in words, and the file and its directory are as
/// they were.
fn refused(w: &World, path: &Path, expect: &str) {
    let before = snapshot(path);
    let mut s = w.start();
    let e = s.err(
        "initialize",
        json!({ "processId": null, "capabilities": {}, "initializationOptions": { "dbPath": path } }),
    );
    let message = e["message"].as_str().unwrap();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(expect), "{expect:?} in {message}");
    s.send(&json!({ "jsonrpc": "2.0", "method": "exit" }));
    assert_eq!(s.wait_exit(), 1);
    assert!(!s.stderr().contains("panicked"), "{}", s.stderr());
    let out = doctor(w, path);
    assert!(out.contains(expect), "doctor says {expect:?}:\n{out}");
    assert!(out.contains("The database cannot be used"), "{out}");
    let after = snapshot(path);
    assert!(before.0 == after.0, "{}: the bytes changed", path.display());
    assert_eq!(before.1, after.1, "{}: the mode changed", path.display());
    assert_eq!(
        before.2,
        after.2,
        "{}: files appeared or vanished next to it",
        path.display()
    );
}

#[test]
fn damaged_and_foreign_files_are_refused_and_left_untouched() {
    let w = World::new();
    std::fs::create_dir_all(w.path("dbs")).unwrap();
    let mut cases: Vec<(PathBuf, &str)> = Vec::new();
    for (i, n) in [1usize, 100, 4096, 70_001].into_iter().enumerate() {
        let p = w.path(&format!("dbs/random-{n}.db"));
        std::fs::write(&p, noise(n, i as u64 + 7)).unwrap();
        cases.push((p, "is not a planwire database"));
    }
    let magic_then_noise = w.path("dbs/magic.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend(noise(8192 - 16, 99));
    std::fs::write(&magic_then_noise, bytes).unwrap();
    cases.push((magic_then_noise, "is damaged"));
    // A real database whose first page (schema) is overwritten after its header.
    let page_one = planwire_db(&w, "page-one.db");
    let mut bytes = std::fs::read(&page_one).unwrap();
    bytes[100..4096].copy_from_slice(&noise(3996, 5));
    std::fs::write(&page_one, bytes).unwrap();
    cases.push((page_one, "is damaged"));
    // …whose header names an impossible page size.
    let header = planwire_db(&w, "header.db");
    let mut bytes = std::fs::read(&header).unwrap();
    bytes[16..18].copy_from_slice(&[0x03, 0x00]);
    std::fs::write(&header, bytes).unwrap();
    cases.push((header, "is damaged"));
    // …cut in half.
    let cut = planwire_db(&w, "cut.db");
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2 / 4096 * 4096]).unwrap();
    cases.push((cut, "is damaged"));
    // Another program's SQLite database.
    let foreign = w.path("dbs/notes.db");
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
        .unwrap();
    drop(conn);
    cases.push((foreign, "another program"));
    for (path, expect) in &cases {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        refused(&w, path, expect);
    }
}

#[test]
fn a_database_from_a_newer_planwire_is_refused_naming_both_versions() {
    let w = World::new();
    let path = planwire_db(&w, "newer.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.pragma_update(None, "user_version", 1002).unwrap();
    drop(conn);
    refused(&w, &path, "schema version 1002; this planwire knows up to");
    // The same file still opens for the planwire that wrote it: nothing was lost.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let title: String = conn.query_row("SELECT title FROM tickets", [], |r| r.get(0)).unwrap();
    assert_eq!(title, "Kept");
}

#[test]
fn a_path_whose_directory_cannot_be_made_is_named() {
    let w = World::new();
    std::fs::write(w.path("a-file"), "not a directory").unwrap();
    let path = w.path("a-file/sub/planwire.db");
    let mut s = w.start();
    let e = s.err(
        "initialize",
        json!({ "processId": null, "capabilities": {}, "initializationOptions": { "dbPath": path } }),
    );
    let message = e["message"].as_str().unwrap();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("cannot be created"), "{message}");
    // The connection stays uninitialized: a good path works.
    s.initialize(json!({ "dbPath": w.db() }));
    assert_eq!(s.shutdown_and_exit(), 0);
    let doctor = Command::new(BIN).args(["doctor", "--db"]).arg(&path).output().unwrap();
    let out = String::from_utf8_lossy(&doctor.stdout);
    assert!(out.contains("cannot be created"), "{out}");
    assert_eq!(doctor.status.code(), Some(1));
    // A directory where the file should be.
    std::fs::create_dir_all(w.path("dbs/dir.db")).unwrap();
    refused(&w, &w.path("dbs/dir.db"), "is a directory");
}

#[test]
fn only_a_file_planwire_creates_is_made_private() {
    let w = World::new();
    // An empty file the person made, with their mode: used, and its mode kept.
    let theirs = w.path("theirs.db");
    std::fs::write(&theirs, "").unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut s = w.start();
    s.initialize(json!({ "dbPath": theirs }));
    s.ok("planwire/listTickets", json!({}));
    assert_eq!(s.shutdown_and_exit(), 0);
    assert_eq!(std::fs::metadata(&theirs).unwrap().permissions().mode() & 0o777, 0o640);
}

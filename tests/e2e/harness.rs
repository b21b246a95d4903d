//! A small LSP-framed JSON-RPC client that drives the real `planwire` binary over stdio,
//! with a temporary HOME and database. Every wait has a deadline and waits on a condition,
//! never on a fixed sleep, so the tests hold on a busy 2-core machine.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const BIN: &str = env!("CARGO_BIN_EXE_planwire");
/// Generous: a deadline only matters when something is broken.
pub const WAIT: Duration = Duration::from_secs(60);

/// A scratch world for one test: a HOME, a project root and a database path.
pub struct World {
    pub dir: tempfile::TempDir,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project/src")).unwrap();
        std::fs::write(dir.path().join("project/src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        World { dir }
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    pub fn root(&self) -> String {
        self.path("project").canonicalize().unwrap().display().to_string()
    }
    pub fn db(&self) -> String {
        self.path("planwire.db").display().to_string()
    }
    /// Writes an executable file into the world's `bin/` (put first on the server's PATH).
    pub fn fake_cli(&self, name: &str, script: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.path(&format!("bin/{name}"));
        std::fs::write(&p, script).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }
    /// Writes a script-planner file and returns its path.
    pub fn script(&self, name: &str, lines: &[Value]) -> String {
        let p = self.path(name);
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(&p, text.join("\n") + "\n").unwrap();
        p.display().to_string()
    }
    pub fn start(&self) -> Server {
        Server::start(self, &[])
    }
    pub fn sqlite(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.db()).unwrap()
    }
    /// How many events of `kind` the database holds for `run`.
    pub fn stored_count(&self, run: i64, kind: &str) -> i64 {
        self.sqlite()
            .query_row(
                "SELECT count(*) FROM transcript WHERE run_id = ?1 AND kind = ?2",
                rusqlite::params![run, kind],
                |r| r.get(0),
            )
            .unwrap()
    }
}

pub struct Server {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    /// While true, nothing is read from the server's stdout (a client that stopped reading).
    paused: Arc<(Mutex<bool>, Condvar)>,
    next_id: i64,
    /// Every notification and server→client request seen so far, in order.
    pub seen: Vec<Value>,
    pub stderr_path: PathBuf,
}

impl Server {
    pub fn start(world: &World, env: &[(&str, &str)]) -> Server {
        let stderr_path = world.path(&format!("stderr-{}.log", crate::harness::unique()));
        let path = format!(
            "{}:{}",
            world.path("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(BIN);
        cmd.arg("--stdio")
            .env_clear()
            .env("HOME", world.path("home"))
            .env("PATH", path)
            .env("PLANWIRE_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_path).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn planwire");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let paused = Arc::new((Mutex::new(false), Condvar::new()));
        let gate = paused.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let (lock, cv) = &*gate;
                let _open = cv.wait_while(lock.lock().unwrap(), |p| *p).unwrap();
                drop(_open);
                let Some(msg) = read_frame(&mut reader) else {
                    return;
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            rx,
            paused,
            next_id: 100,
            seen: Vec::new(),
            stderr_path,
        }
    }

    pub fn send(&mut self, msg: &Value) {
        self.send_raw(&frame(&msg.to_string()));
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Takes in whatever arrives for `d` (a scenario's pause, not a wait for a condition).
    pub fn pump_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        while let Some(msg) = self.recv(end) {
            self.on_other(msg);
        }
    }

    /// After the process died: takes in everything it wrote before, up to the pipe's end.
    pub fn drain_closed(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(msg) => self.seen.push(msg),
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => panic!("the server's stdout did not close"),
            }
        }
    }

    /// Stops reading the server's stdout (after the frame being read, if any), as a client
    /// that is busy or hung would; [`resume_reading`](Self::resume_reading) goes on.
    pub fn pause_reading(&self) {
        *self.paused.0.lock().unwrap() = true;
    }

    pub fn resume_reading(&self) {
        *self.paused.0.lock().unwrap() = false;
        self.paused.1.notify_all();
    }

    /// A `kB` field of the server's /proc status (VmRSS, RssAnon …), in bytes.
    pub fn status_bytes(&self, key: &str) -> u64 {
        proc_status_kb(self.child.id() as i32, key) * 1024
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    fn recv(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.rx.recv_timeout(left) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Sends a request and waits for its response; returns `result` or `error`.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        self.response(id)
    }

    pub fn response(&mut self, id: i64) -> Result<Value, Value> {
        let deadline = Instant::now() + WAIT;
        loop {
            let msg = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("no response to request {id}; stderr:\n{}", self.stderr()));
            if msg.get("id") == Some(&json!(id)) && msg.get("method").is_none() {
                return match msg.get("error") {
                    Some(e) => Err(e.clone()),
                    None => Ok(msg["result"].clone()),
                };
            }
            self.on_other(msg);
        }
    }

    fn on_other(&mut self, msg: Value) {
        // Answer server→client requests (progress creation) like an editor would.
        if msg.get("id").is_some() && msg.get("method").is_some() {
            let reply = json!({ "jsonrpc": "2.0", "id": msg["id"], "result": null });
            self.send(&reply);
        }
        self.seen.push(msg);
    }

    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        self.call(method, params)
            .unwrap_or_else(|e| panic!("{method} failed: {e}"))
    }

    pub fn err(&mut self, method: &str, params: Value) -> Value {
        match self.call(method, params) {
            Ok(v) => panic!("{method} should fail, got {v}"),
            Err(e) => e,
        }
    }

    /// Waits for a notification that satisfies `pred` (already seen ones count).
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(v) = self.seen.iter().find(|v| pred(v)) {
            return v.clone();
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let msg = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("timed out waiting for {what}; stderr:\n{}", self.stderr()));
            let hit = pred(&msg);
            self.on_other(msg.clone());
            if hit {
                return msg;
            }
        }
    }

    /// Waits until the ticket's `ticketChanged` shows one of `statuses`.
    pub fn wait_ticket(&mut self, ticket: i64, statuses: &[&str]) -> Value {
        let n = self.wait_for(&format!("ticket {ticket} in {statuses:?}"), |m| {
            m["method"] == "planwire/ticketChanged"
                && m["params"]["ticket"]["id"] == ticket
                && statuses.iter().any(|s| m["params"]["ticket"]["status"] == *s)
        });
        n["params"]["ticket"].clone()
    }

    /// Waits for the ticket to end its plan, and asserts that it ended `planned`. When it
    /// failed, the panic shows the ticket's history (`planwire/getTicket`: its runs, with why
    /// each failed, and its messages) and planwire's stderr.
    pub fn wait_planned(&mut self, ticket: i64) -> Value {
        let t = self.wait_ticket(ticket, &["planned", "failed"]);
        if t["status"] != "planned" {
            let history = self.ok("planwire/getTicket", json!({ "ticketId": ticket }));
            panic!(
                "ticket {ticket} ended {}: {history}\nstderr:\n{}",
                t["status"],
                self.stderr()
            );
        }
        t
    }

    /// Transcript events notified so far for a run, in arrival order.
    pub fn notified_events(&self, run: i64) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "planwire/transcript" && m["params"]["runId"] == run)
            .flat_map(|m| m["params"]["events"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    pub fn initialize(&mut self, options: Value) -> Value {
        let r = self.ok(
            "initialize",
            json!({ "processId": null, "rootUri": null, "capabilities": { "window": { "workDoneProgress": true } },
                    "initializationOptions": options }),
        );
        self.send(&json!({ "jsonrpc": "2.0", "method": "initialized", "params": {} }));
        r
    }

    pub fn shutdown_and_exit(mut self) -> i32 {
        self.ok("shutdown", Value::Null);
        self.send(&json!({ "jsonrpc": "2.0", "method": "exit" }));
        self.wait_exit()
    }

    pub fn wait_exit(&mut self) -> i32 {
        self.close_stdin();
        self.wait_exit_with_stdin_open()
    }

    /// Waits for the process to exit by itself; stdin stays as it is.
    pub fn wait_exit_with_stdin_open(&mut self) -> i32 {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "planwire did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn frame(body: &str) -> Vec<u8> {
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

fn read_frame(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Polls `cond` until it holds or the deadline passes.
pub fn eventually(what: &str, deadline: Duration, cond: impl Fn() -> bool) {
    let end = Instant::now() + deadline;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The recorded process group and leader start time of a run.
pub fn run_group(world: &World, run: i64) -> (i32, u64) {
    world
        .sqlite()
        .query_row("SELECT pgid, child_start FROM runs WHERE id = ?1", [run], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
}

pub fn group_alive(pgid: i32, start: u64) -> bool {
    !planwire::util::group_members(pgid, start).is_empty()
}

/// A `kB` field of /proc/PID/status, or 0.
pub fn proc_status_kb(pid: i32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.split_whitespace().next()?.parse().ok())?
        })
        .unwrap_or(0)
}

/// A script-planner file that floods: Claude stream-json with `lines` text lines of about
/// `text_len` bytes of text each (one event each, each its own message), then a plan. Small
/// on disk whatever it streams (`repeat`).
pub fn flood_script(world: &World, name: &str, lines: u64, text_len: usize) -> String {
    let init = json!({"type": "system", "subtype": "init", "session_id": "flood-session", "tools": [],
                      "model": "mock", "permissionMode": "plan"});
    let filler = "x".repeat(text_len.saturating_sub(40));
    let text = json!({"type": "assistant", "message": {"id": "msg_flood_@@N@@", "type": "message",
        "role": "assistant", "content": [{"type": "text", "text": format!("flood line @@N@@ {filler}")}]},
        "parent_tool_use_id": null, "session_id": "flood-session"});
    let plan = r#"Done. <planwire-plan>{"title": "Flooded", "description": "A plan after a flood.", "acceptanceCriteria": ["ok"], "openQuestions": [], "dependencies": []}</planwire-plan>"#;
    let last = json!({"type": "assistant", "message": {"id": "msg_flood_final", "type": "message",
        "role": "assistant", "content": [{"type": "text", "text": plan}]},
        "parent_tool_use_id": null, "session_id": "flood-session"});
    let result = json!({"type": "result", "subtype": "success", "is_error": false, "result": plan,
        "session_id": "flood-session", "total_cost_usd": 0.0,
        "usage": {"input_tokens": 1, "output_tokens": 1}});
    world.script(
        name,
        &[
            json!({"format": "claude"}),
            json!({"out": init.to_string()}),
            json!({"out": text.to_string(), "repeat": lines}),
            json!({"out": last.to_string()}),
            json!({"out": result.to_string()}),
            json!({"exit": 0}),
        ],
    )
}

/// The stored events of a run, in seq order, as JSON values.
pub fn stored_events(db: &str, run: i64) -> Vec<Value> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut st = conn
        .prepare("SELECT payload FROM transcript WHERE run_id = ?1 ORDER BY seq")
        .unwrap();
    let rows = st.query_map([run], |r| r.get::<_, String>(0)).unwrap();
    rows.map(|p| serde_json::from_str(&p.unwrap()).unwrap()).collect()
}

/// Everything that was notified of a run is stored, the same, and seqs run 1, 2, 3 … in both
/// with no gap; `lastSeq` is the last stored seq. Returns the number of stored events.
pub fn assert_notified_are_stored(db: &str, server: &Server, run: i64) -> usize {
    let stored = stored_events(db, run);
    for (i, e) in stored.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "run {run}: stored seqs have a gap at {i}");
    }
    let notified = server.notified_events(run);
    for (i, e) in notified.iter().enumerate() {
        assert_eq!(
            e["seq"],
            i as u64 + 1,
            "run {run}: notified seqs have a gap or repeat at {i}"
        );
        assert_eq!(
            Some(e),
            stored.get(i),
            "run {run}: notified event {i} is not the stored one"
        );
    }
    let last: i64 = rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT last_seq FROM runs WHERE id = ?1", [run], |r| r.get(0))
        .unwrap();
    assert_eq!(last as usize, stored.len(), "run {run}: lastSeq is the last stored seq");
    stored.len()
}

/// `git init` (when needed) and a commit of everything in `dir`, with no user config.
pub fn git_commit_all(dir: &std::path::Path, message: &str) {
    let ok = Command::new("sh")
        .args([
            "-c",
            "git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm \"$0\"",
            message,
        ])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git commit in {}", dir.display());
}

/// A git repository in `dir` whose branch `main` holds everything in it, with no user config.
pub fn git_init_main(dir: &std::path::Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git_commit_all(dir, "initial");
}

/// `git ARGS…` in `dir`, with no user config; panics when it fails.
pub fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?} in {}", dir.display());
}

/// Waits until `run` is neither queued nor running (its `runChanged`); returns the run.
pub fn run_ends(s: &mut Server, run: i64) -> Value {
    s.wait_for(&format!("run {run} ends"), |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == run
            && !matches!(m["params"]["run"]["status"].as_str(), Some("queued") | Some("running"))
    })["params"]["run"]
        .clone()
}

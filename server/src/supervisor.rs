//! The process supervisor: starts planner CLIs and makes sure nothing outlives its owner.
//!
//! Every child runs in its own process group, with argv only (never a shell), and with a
//! parent-death signal. The signal fires when the *thread* that forked exits, so all forks
//! happen on one spawner thread that lives as long as the process (tokio's blocking-pool
//! threads exit after 10 s idle). A stop is SIGTERM to the group, a grace period, SIGKILL to
//! the group, then reaping: `Child::kill` alone would leave grandchildren running.
//! A spec may carry an OS sandbox restriction ([`planwire_sandbox::Restriction`], built in
//! the parent when a pass is prepared); the child enters it right after the parent-death
//! signal, before exec, and everything it starts inherits it. The restriction's type comes
//! from the sandbox crate, a layer below: this module knows processes, nothing of planners,
//! of the sandbox's policy or of line formats.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use planwire_sandbox::Restriction;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

use crate::util::{group_members, proc_stat};

/// Longest stdout line kept whole; a longer one arrives truncated.
pub const MAX_LINE: usize = 8 * 1024 * 1024;
/// How much of stderr is kept, from the end.
pub const STDERR_TAIL: usize = 64 * 1024;

#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// A pipe on stdin (else /dev/null: an open, silent pipe makes every CLI wait).
    pub stdin_pipe: bool,
    /// The OS sandbox the child enters before exec (`None`: none).
    pub sandbox: Option<Restriction>,
}

#[derive(Debug, PartialEq)]
pub enum OutputLine {
    Line(String),
    /// A line longer than [`MAX_LINE`]: its head, and its full length in bytes.
    Truncated {
        head: String,
        len: usize,
    },
}

pub struct Supervised {
    pub pid: i32,
    pub pgid: i32,
    pub start_time: u64,
    pub stdin: Option<ChildStdin>,
    pub output: mpsc::Receiver<OutputLine>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    child: Child,
}

type SpawnJob = (SpawnSpec, tokio::runtime::Handle, oneshot::Sender<io::Result<Child>>);

fn spawner() -> &'static std::sync::mpsc::Sender<SpawnJob> {
    static SPAWNER: OnceLock<std::sync::mpsc::Sender<SpawnJob>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("planwire-spawner".into())
            .spawn(move || {
                for (spec, runtime, reply) in rx {
                    let _entered = runtime.enter();
                    let _ = reply.send(spawn_here(&spec));
                }
            })
            .expect("spawner thread");
        tx
    })
}

fn spawn_here(spec: &SpawnSpec) -> io::Result<Child> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .env("PWD", &spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin_pipe { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let parent = std::process::id() as libc::pid_t;
    let restriction = spec.sandbox.clone();
    // SAFETY: only async-signal-safe calls (prctl, getppid, _exit, and the sandbox's prctl and
    // landlock_restrict_self) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            if let Some(r) = &restriction {
                planwire_sandbox::enter(r)?;
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Starts a child as described. Must be called inside the tokio runtime.
pub async fn spawn(spec: SpawnSpec) -> io::Result<Supervised> {
    let (tx, rx) = oneshot::channel();
    spawner()
        .send((spec, tokio::runtime::Handle::current(), tx))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    let mut child = rx.await.map_err(|_| io::Error::other("spawner thread is gone"))??;
    let pid = child
        .id()
        .map(|p| p as i32)
        .ok_or_else(|| io::Error::other("child exited at once"))?;
    let start_time = proc_stat(pid).map(|s| s.start_time).unwrap_or(0);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    // Small: a run whose parser falls behind holds back its reader, not megabytes of lines.
    let (tx, output) = mpsc::channel(64);
    tokio::spawn(read_lines(BufReader::with_capacity(64 * 1024, stdout), tx));
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let stderr_task = Some(tokio::spawn(keep_tail(stderr, tail.clone())));
    Ok(Supervised {
        pid,
        pgid: pid,
        start_time,
        stdin: child.stdin.take(),
        output,
        stderr: tail,
        stderr_task,
        child,
    })
}

async fn read_lines<R: AsyncBufRead + Unpin>(mut reader: R, tx: mpsc::Sender<OutputLine>) {
    loop {
        match read_capped_line(&mut reader, MAX_LINE).await {
            Ok(Some(line)) => {
                if tx.send(line).await.is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("reading planner stdout: {e}");
                return;
            }
        }
    }
}

/// Reads one line (without its `\n`), keeping at most `cap` bytes of it.
pub async fn read_capped_line<R: AsyncBufRead + Unpin>(reader: &mut R, cap: usize) -> io::Result<Option<OutputLine>> {
    let mut buf = Vec::new();
    let mut len = 0usize;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            if len == 0 {
                return Ok(None);
            }
            break;
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        len += take;
        reader.consume(if done { take + 1 } else { take });
        if done {
            break;
        }
    }
    if buf.last() == Some(&b'\r') && len <= cap {
        buf.pop();
        len -= 1;
    }
    // Valid UTF-8 (the usual case) is taken as it is, with no copy.
    let text = String::from_utf8(buf).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    Ok(Some(if len > cap {
        OutputLine::Truncated { head: text, len }
    } else {
        OutputLine::Line(text)
    }))
}

async fn keep_tail<R: tokio::io::AsyncRead + Unpin>(mut reader: R, tail: Arc<Mutex<VecDeque<u8>>>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = reader.read(&mut buf).await {
        if n == 0 {
            return;
        }
        let mut t = tail.lock().expect("stderr tail");
        t.extend(&buf[..n]);
        let excess = t.len().saturating_sub(STDERR_TAIL);
        t.drain(..excess);
    }
}

impl Supervised {
    /// The last [`STDERR_TAIL`] bytes of stderr, as text. Call after the child exited: it
    /// waits (briefly) for stderr to reach its end.
    pub async fn stderr_tail(&mut self) -> String {
        if let Some(task) = self.stderr_task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), task).await;
        }
        let t = self.stderr.lock().expect("stderr tail");
        let (a, b) = t.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }

    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// SIGTERM to the group, up to `grace` for it to go, then SIGKILL; returns once the
    /// leader is reaped and no member of the group is left.
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        signal_group(self.pgid, libc::SIGTERM);
        let gone = tokio::time::timeout(grace, async {
            let status = self.child.wait().await.ok();
            wait_group_empty(self.pgid, self.start_time).await;
            status
        })
        .await;
        match gone {
            Ok(status) => status,
            Err(_) => {
                signal_group(self.pgid, libc::SIGKILL);
                let status = self.child.wait().await.ok();
                self.reap_group().await;
                status
            }
        }
    }

    /// After the leader exited by itself: kills whatever it left behind in its group.
    pub async fn reap_group(&mut self) {
        if group_members(self.pgid, self.start_time).is_empty() {
            return;
        }
        signal_group(self.pgid, libc::SIGKILL);
        let _ = tokio::time::timeout(Duration::from_secs(5), wait_group_empty(self.pgid, self.start_time)).await;
    }
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: plain syscall; a negative pid addresses the group.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

async fn wait_group_empty(pgid: i32, not_before: u64) {
    while !group_members(pgid, not_before).is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops a recorded group this process did not spawn (another sidecar's run): SIGTERM to
/// each of its members, `grace` for them to go, then SIGKILL. A recycled pid is left alone.
pub async fn stop_recorded_group(pgid: i32, leader_start: u64, grace: Duration) {
    if proc_stat(pgid).is_some_and(|s| s.start_time != leader_start) {
        return; // the pid was recycled: not ours
    }
    for pid in group_members(pgid, leader_start) {
        // SAFETY: plain syscall on a pid we just identified.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    if tokio::time::timeout(grace, wait_group_empty(pgid, leader_start))
        .await
        .is_err()
    {
        kill_leftover_group(pgid, leader_start).await;
    }
}

/// Kills a group left by a dead sidecar, but only if it still is that group: the leader is
/// gone or is the recorded process, and each member started no earlier than the leader did.
/// Returns once the members are gone (SIGKILL lands a moment after it is sent; a member that
/// forked meanwhile is killed in turn), or after 5 s. Returns how many members it found.
pub async fn kill_leftover_group(pgid: i32, leader_start: u64) -> usize {
    if let Some(stat) = proc_stat(pgid) {
        if stat.start_time != leader_start {
            return 0; // the pid was recycled: not ours
        }
    }
    let mut left = group_members(pgid, leader_start);
    let killed = left.len();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !left.is_empty() && tokio::time::Instant::now() < deadline {
        for &pid in &left {
            // SAFETY: plain syscall on a pid we just identified (again to a dying one: harmless).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = group_members(pgid, leader_start);
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn caps_long_lines() {
        let mut input = vec![b'a'; 100];
        input.extend_from_slice(b"\nshort\r\nlast");
        let mut r = BufReader::new(&input[..]);
        assert_eq!(
            read_capped_line(&mut r, 10).await.unwrap(),
            Some(OutputLine::Truncated {
                head: "a".repeat(10),
                len: 100
            })
        );
        assert_eq!(
            read_capped_line(&mut r, 10).await.unwrap(),
            Some(OutputLine::Line("short".into()))
        );
        assert_eq!(
            read_capped_line(&mut r, 10).await.unwrap(),
            Some(OutputLine::Line("last".into()))
        );
        assert_eq!(read_capped_line(&mut r, 10).await.unwrap(), None);
    }

    fn sh(script: &str) -> SpawnSpec {
        SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: vec![],
            stdin_pipe: false,
            sandbox: None,
        }
    }

    #[tokio::test]
    async fn stop_kills_the_whole_group_including_grandchildren() {
        let mut child = spawn(sh("sleep 300 & sleep 300 & echo started; wait")).await.unwrap();
        assert_eq!(child.output.recv().await, Some(OutputLine::Line("started".into())));
        let members = group_members(child.pgid, child.start_time);
        assert!(members.len() >= 3, "{members:?}");
        child.stop(Duration::from_secs(2)).await;
        assert!(group_members(child.pgid, child.start_time).is_empty());
    }

    #[tokio::test]
    async fn sigterm_ignored_then_sigkill_after_grace() {
        let mut child = spawn(sh("trap '' TERM; echo ready; while :; do sleep 0.05; done"))
            .await
            .unwrap();
        assert_eq!(child.output.recv().await, Some(OutputLine::Line("ready".into())));
        let status = child.stop(Duration::from_millis(300)).await.unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(group_members(child.pgid, child.start_time).is_empty());
    }

    #[tokio::test]
    async fn a_leftover_group_is_gone_when_the_kill_returns() {
        let mut child = spawn(sh("sleep 300 & sleep 300 & echo ready; wait")).await.unwrap();
        assert_eq!(child.output.recv().await, Some(OutputLine::Line("ready".into())));
        let killed = kill_leftover_group(child.pgid, child.start_time).await;
        assert_eq!(killed, 3, "the shell and its two sleeps");
        assert!(group_members(child.pgid, child.start_time).is_empty());
        child.wait().await.unwrap();
    }

    #[tokio::test]
    async fn keeps_a_bounded_stderr_tail() {
        let mut child = spawn(sh("head -c 200000 /dev/zero | tr '\\0' x >&2; echo -n END >&2"))
            .await
            .unwrap();
        child.wait().await.unwrap();
        let tail = child.stderr_tail().await;
        assert_eq!(tail.len(), STDERR_TAIL);
        assert!(tail.ends_with("END"));
    }
}

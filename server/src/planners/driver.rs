//! The contract between the runner and a planner adapter: how one pass (one planner process,
//! or one planner server) is started and driven.
//!
//! A planner's channel may be lines on stdout (Claude's stream-json), a local HTTP server with
//! SSE (`opencode serve`), or JSON-RPC on stdio (`codex app-server`, any ACP agent). Whatever
//! it is, the adapter hands the runner a [`Prepared`] pass: the process to start, and a
//! [`Driver`] that, once the supervisor has started it, turns its channel into [`Report`]s
//! and carries out [`Command`]s. The three things the runner asks of a driver are: answer a
//! question, stop, and (implicitly, by the read-only rules each driver applies itself) deny
//! every permission that writes or executes.
//!
//! The driver runs as its own task. It sends reports in order on a bounded channel (so a slow
//! store slows the planner through its pipe, never memory), and sends [`Report::End`] last,
//! exactly once, after the process group is gone. The runner owns everything else: seqs,
//! batching, the store, notifications, questions in the store, timeouts (it sends
//! [`Command::Stop`]) and how the run ends.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;

use planwire_protocol::{Answer, QuestionItem};
use tokio::sync::{mpsc, oneshot};

use super::ParsedEvent;
use crate::supervisor::{SpawnSpec, Supervised};

/// A question id within one pass, chosen by the driver.
pub type AskId = u64;

/// What a driver reports up to its run, in order.
#[derive(Debug)]
pub enum Report {
    /// Normalized events, stored and notified in this order.
    Events(Vec<ParsedEvent>),
    /// A live piece of text or reasoning that extends the open block of `kind` of `agent`
    /// (`None` = the main agent). Sent to clients, never stored: the `text` / `reasoning`
    /// event that closes the block is the record.
    Delta {
        agent: Option<String>,
        kind: DeltaKind,
        text: String,
    },
    /// The agent asks the person and waits: the driver expects a [`Command::Answer`] with
    /// this `ask` (or a stop).
    Ask { ask: AskId, items: Vec<QuestionItem> },
    /// A plan the agent offered for approval (which planning never gives): a plan
    /// candidate, used when the final answer holds no `<planwire-plan>`.
    PlanCandidate(String),
    /// The planner is still at work though it printed nothing (a server's busy status): the
    /// idle timeout starts again.
    Busy,
    /// The last report: how the pass ended, and what the run needs to decide its outcome.
    End(PassEnd),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaKind {
    Text,
    Reasoning,
}

/// The person's reply to an [`Report::Ask`].
#[derive(Debug, Clone)]
pub enum Reply {
    /// One answer per question item, in order.
    Answers(Vec<Answer>),
    /// The person declined: the agent goes on with stated assumptions.
    Dismiss,
}

/// What the runner asks of a running driver.
#[derive(Debug)]
pub enum Command {
    /// Deliver the person's reply; `done` says whether the planner took it.
    Answer {
        ask: AskId,
        reply: Reply,
        done: oneshot::Sender<Result<(), String>>,
    },
    /// Stop now: the planner's own stop (an abort or interrupt call) where it has one, then
    /// the process group (SIGTERM, `grace`, SIGKILL). The pass then ends as `why`.
    Stop(StopWhy),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWhy {
    /// The person (or shutdown) asked.
    Stopped,
    /// A time limit: `hard_timeout`, `idle_timeout` or `question_timeout`.
    TimedOut(&'static str),
}

/// How a pass's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Exited(Option<ExitStatus>),
    Stopped(Option<ExitStatus>),
    TimedOut(&'static str, Option<ExitStatus>),
}

impl Exit {
    /// The end of a stop or timeout, from why it was stopped.
    pub fn from_stop(why: StopWhy, status: Option<ExitStatus>) -> Exit {
        match why {
            StopWhy::Stopped => Exit::Stopped(status),
            StopWhy::TimedOut(code) => Exit::TimedOut(code, status),
        }
    }
}

/// How a pass ended, and the facts the run decides its outcome from.
#[derive(Debug, Clone)]
pub struct PassEnd {
    pub exit: Exit,
    /// The tail of the planner's stderr.
    pub stderr_tail: String,
    /// The text of the final answer (where the plan is looked for first).
    pub final_text: String,
    /// The main agent's text, as far as plan extraction needs it (bounded).
    pub all_text: String,
    /// The provider session the pass used or created.
    pub session_id: Option<String>,
    /// The planner's own error, when it reported one.
    pub error_message: Option<String>,
    /// Why a pass that ended cleanly has no final answer, when the adapter can tell.
    pub missing_answer: Option<String>,
    /// The pass failed because the session to resume does not exist (start fresh).
    pub session_not_found: bool,
}

/// The ends of a driver's channels to its run.
pub struct PassIo {
    pub reports: mpsc::Sender<Report>,
    pub commands: mpsc::Receiver<Command>,
    /// SIGTERM → SIGKILL grace of a stop.
    pub grace: Duration,
}

/// A driver: runs as its own task once its process has started.
pub trait Driver: Send {
    fn drive(self: Box<Self>, child: Supervised, io: PassIo) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// One pass as an adapter prepares it: what to start, and what drives it.
pub struct Prepared {
    /// Program, argv, cwd and env (`stdin_pipe` when the driver talks on stdin).
    pub spawn: SpawnSpec,
    /// The argv as recorded on the run (without a prompt, a password or a token).
    pub recorded_args: Vec<String>,
    pub driver: Box<dyn Driver>,
}

/// What a pass asks of its planner.
#[derive(Debug, Clone, Default)]
pub struct PassRequest {
    pub prompt: String,
    pub model: Option<String>,
    /// The ticket's variant (reasoning effort as the CLI names it).
    pub variant: Option<String>,
    /// Continue this provider session.
    pub resume: Option<String>,
    /// The ticket's title (a session title, where the CLI takes one).
    pub title: Option<String>,
    /// The directory the planner runs in.
    pub root: std::path::PathBuf,
    /// Directories the planner may be served reads of (the root and linked roots), for
    /// channels where planwire serves file reads (ACP `fs/read_text_file`).
    pub read_roots: Vec<std::path::PathBuf>,
}

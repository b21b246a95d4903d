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

pub use planwire_protocol::DeltaKind;

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
    /// The main agent's text, as far back as [`TEXT_TAIL`](super::TEXT_TAIL) (where the plan
    /// is looked for after the final answer).
    pub all_text: String,
    /// Older main-agent text than `all_text` holds was let go (it is in the store, as the
    /// run's `text` events, and the plan is looked for there too).
    pub text_dropped: bool,
    /// The provider session the pass used or created.
    pub session_id: Option<String>,
    /// The planner's own error, when it reported one.
    pub error_message: Option<String>,
    /// Why a pass that ended cleanly has no final answer, when the adapter can tell.
    pub missing_answer: Option<String>,
    /// The pass failed because the session to resume does not exist (start fresh).
    pub session_not_found: bool,
}

/// A driver's way to report to its run (the run tells its passes apart by `pass`).
#[derive(Clone)]
pub struct Reporter {
    tx: mpsc::Sender<(u32, Report)>,
    pass: u32,
}

impl Reporter {
    pub fn new(tx: mpsc::Sender<(u32, Report)>, pass: u32) -> Reporter {
        Reporter { tx, pass }
    }

    /// Waits while the run is behind; fails only when the run is gone.
    pub async fn send(&self, report: Report) -> Result<(), Report> {
        self.tx.send((self.pass, report)).await.map_err(|e| e.0 .1)
    }
}

/// The ends of a driver's channels to its run. Commands are few (a stop, one answer per
/// question) and never wait; reports are bounded.
pub struct PassIo {
    pub reports: Reporter,
    pub commands: mpsc::UnboundedReceiver<Command>,
    /// SIGTERM → SIGKILL grace of a stop.
    pub grace: Duration,
}

/// What the agent reads when the person declined to answer.
pub const DECLINED: &str = "The user declined to answer. Continue on your stated assumptions, and list those \
assumptions as open questions in the plan.";

/// One answer as the text a model reads: the chosen labels, then any free text.
pub fn answer_text(answer: &Answer) -> String {
    answer_parts(answer).join(", ")
}

/// One answer's parts: the chosen labels, then the free text when there is some.
pub fn answer_parts(answer: &Answer) -> Vec<String> {
    let mut parts = answer.selected.clone();
    if let Some(other) = answer.other.as_deref().filter(|o| !o.trim().is_empty()) {
        parts.push(other.trim().to_owned());
    }
    parts
}

/// Question/answer pairs as text, in item order.
pub fn answer_pairs(items: &[QuestionItem], answers: &[Answer]) -> Vec<(String, String)> {
    items
        .iter()
        .zip(answers)
        .map(|(i, a)| (i.question.clone(), answer_text(a)))
        .collect()
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
    /// planwire's OS sandbox holds the pass (a CLI whose own sandbox cannot nest inside it,
    /// such as Codex's, then turns its own off: see `codex::inner_sandbox`).
    pub outer_sandbox: bool,
}

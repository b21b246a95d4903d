//! The state of one initialized connection: settings, the store, the way out, and the runs
//! this process owns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use planwire_protocol::{PlannerInfo, QuestionId, RunId, TicketId};
use tokio::sync::{mpsc, oneshot};

use crate::config::Config;
use crate::store::runs::Owner;
use crate::store::Store;
use crate::transport::Outbox;

pub struct Session {
    pub outbox: Outbox,
    pub store: Store,
    pub config: Config,
    pub owner: Owner,
    /// The client advertised `window.workDoneProgress`.
    pub progress: bool,
    pub planners: Mutex<Vec<PlannerInfo>>,
    runs: Mutex<HashMap<RunId, RunHandle>>,
}

/// How to reach a run this process drives.
#[derive(Clone)]
pub struct RunHandle {
    /// None for a breakdown.
    pub ticket_id: Option<TicketId>,
    /// Ask the run to stop; the reply comes once its process group is gone and it is recorded.
    pub stop: mpsc::Sender<oneshot::Sender<()>>,
    /// Answers to the live questions the run is waiting on.
    pub answers: mpsc::Sender<LiveAnswer>,
    /// The blocks it streams live now, as far as they were sent (`getTranscript`'s `openBlocks`).
    pub open_blocks: crate::runner::OpenBlocks,
}

/// The person's reply to a live question, on its way to the waiting CLI.
pub struct LiveAnswer {
    pub question_id: QuestionId,
    pub reply: LiveReply,
    /// `Err` when the run is no longer waiting on that question.
    pub done: oneshot::Sender<Result<(), String>>,
}

pub enum LiveReply {
    Answers(Vec<planwire_protocol::Answer>),
    Dismiss,
}

impl Session {
    pub fn new(outbox: Outbox, store: Store, config: Config, owner: Owner, progress: bool) -> Arc<Session> {
        Arc::new(Session {
            outbox,
            store,
            config,
            owner,
            progress,
            planners: Mutex::new(Vec::new()),
            runs: Mutex::new(HashMap::new()),
        })
    }

    pub fn register(&self, run: RunId, handle: RunHandle) {
        self.runs.lock().expect("runs").insert(run, handle);
    }

    pub fn unregister(&self, run: RunId) {
        self.runs.lock().expect("runs").remove(&run);
    }

    pub fn handle(&self, run: RunId) -> Option<RunHandle> {
        self.runs.lock().expect("runs").get(&run).cloned()
    }

    pub fn run_of_ticket(&self, ticket: TicketId) -> Option<(RunId, RunHandle)> {
        let runs = self.runs.lock().expect("runs");
        runs.iter()
            .find(|(_, h)| h.ticket_id == Some(ticket))
            .map(|(id, h)| (*id, h.clone()))
    }

    pub fn own_runs(&self) -> Vec<(RunId, RunHandle)> {
        self.runs
            .lock()
            .expect("runs")
            .iter()
            .map(|(id, h)| (*id, h.clone()))
            .collect()
    }

    /// Stops one run this process drives; returns once it is recorded as ended.
    pub async fn stop_run(handle: &RunHandle) {
        let (tx, rx) = oneshot::channel();
        if handle.stop.send(tx).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Stops every run this process drives, in parallel: all are asked first, then awaited.
    pub async fn stop_all(&self) {
        let mut waiting = Vec::new();
        for (_, handle) in self.own_runs() {
            let (tx, rx) = oneshot::channel();
            if handle.stop.send(tx).await.is_ok() {
                waiting.push(rx);
            }
        }
        for rx in waiting {
            let _ = rx.await;
        }
    }
}

//! The planwire server behind the ACP front: [`crate::server::serve`] in-process, on one end
//! of a pipe, and a client of it on the other (as `planwire plan` is). Every ACP request
//! becomes planwire requests that take the same handlers, runner, store and stop as an
//! editor's.
//!
//! Requests go out concurrently ([`Backend::call`]). Notifications are routed by ticket and
//! run to the subscriptions of the prompt turns that follow them ([`Backend::subscribe`]). A
//! subscription's channel is bounded, and the router waits on a full one: a slow ACP client
//! slows the planner through its pipe, it never grows memory.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use planwire_protocol::{
    ErrorCode, GetTicket, QuestionNotification, Request, RunChanged, RunId, Stop, StopParams, TicketChanged, TicketId,
    TicketRef, TranscriptNotification,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cli::client::{initialize_params, InProcess, Note};
use crate::transport::{Incoming, Outbox, ReaderEvent, ResponseError};

/// How long a resumed run that lost its session may take to be replaced by a fresh one.
const FALLBACK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Notifications a subscription may hold before the router waits for it.
const SUBSCRIPTION_QUEUE: usize = 1024;

/// What a subscription follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Ticket(TicketId),
    Run(RunId),
}

type Subscribers = Arc<Mutex<HashMap<u64, (Vec<Key>, mpsc::Sender<Note>)>>>;

#[derive(Clone)]
pub struct Backend {
    outbox: Outbox,
    subscribers: Subscribers,
    next_id: Arc<AtomicU64>,
    server: Arc<Mutex<Option<JoinHandle<i32>>>>,
}

/// The notifications of the keys it follows, in the order the server sent them. Dropping it
/// unsubscribes.
pub struct Subscription {
    id: u64,
    rx: mpsc::Receiver<Note>,
    subscribers: Subscribers,
}

impl Subscription {
    pub async fn recv(&mut self) -> Option<Note> {
        self.rx.recv().await
    }

    /// Follows one more key.
    pub fn add(&self, key: Key) {
        if let Some((keys, _)) = self.subscribers.lock().expect("subscribers").get_mut(&self.id) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.subscribers.lock().expect("subscribers").remove(&self.id);
    }
}

impl Backend {
    /// Starts the server in-process and initializes it with `options` (its
    /// `initializationOptions`). Returns the backend and the `initialize` result.
    pub async fn start(options: Value) -> Result<(Backend, Value), ResponseError> {
        let InProcess {
            outbox,
            incoming,
            server,
        } = InProcess::spawn();
        let backend = Backend {
            outbox,
            subscribers: Arc::default(),
            next_id: Arc::new(AtomicU64::new(1)),
            server: Arc::new(Mutex::new(Some(server))),
        };
        tokio::spawn(route(incoming, backend.outbox.clone(), backend.subscribers.clone()));
        let params = initialize_params("planwire-acp", serde_json::json!({}), options);
        let result = backend.outbox.request("initialize", params).await?;
        backend.outbox.notify("initialized", serde_json::json!({})).await;
        Ok((backend, result))
    }

    /// A typed request.
    pub async fn call<R: Request>(&self, params: R::Params) -> Result<R::Result, ResponseError>
    where
        R::Result: DeserializeOwned,
    {
        let value = self.outbox.request(R::METHOD, params).await?;
        serde_json::from_value(value).map_err(|e| {
            ResponseError::new(
                ErrorCode::InternalError,
                format!("unexpected {} result: {e}", R::METHOD),
            )
        })
    }

    pub fn subscribe(&self, keys: &[Key]) -> Subscription {
        let (tx, rx) = mpsc::channel(SUBSCRIPTION_QUEUE);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.subscribers
            .lock()
            .expect("subscribers")
            .insert(id, (keys.to_vec(), tx));
        Subscription {
            id,
            rx,
            subscribers: self.subscribers.clone(),
        }
    }

    /// The run planwire started afresh after `after` lost its provider session (it does so by
    /// itself), as `sub` (which follows the ticket) hears of it; `None` after [`FALLBACK_WAIT`].
    pub async fn next_run(&self, sub: &mut Subscription, ticket: TicketId, after: RunId) -> Option<RunId> {
        if let Ok(got) = self.call::<GetTicket>(TicketRef { ticket_id: ticket }).await {
            if let Some(r) = got.runs.iter().find(|r| r.id > after) {
                return Some(r.id);
            }
        }
        let wait = async {
            while let Some(note) = sub.recv().await {
                if let Some(r) = note.params_of::<RunChanged>() {
                    if r.run.ticket_id == Some(ticket) && r.run.id > after {
                        return Some(r.run.id);
                    }
                }
            }
            None
        };
        tokio::time::timeout(FALLBACK_WAIT, wait).await.ok().flatten()
    }

    /// `planwire/stop` of a run (by its ticket when it has one); returns once its process
    /// group is gone. A failure is logged: the run's end says what happened.
    pub async fn stop(&self, ticket: Option<TicketId>, run: RunId) {
        let params = StopParams {
            ticket_id: ticket,
            run_id: ticket.is_none().then_some(run),
        };
        if let Err(e) = self.call::<Stop>(params).await {
            tracing::warn!("cannot stop run {run}: {}", e.message);
        }
    }

    /// `shutdown` (every run this process drives is stopped and recorded), then `exit`.
    pub async fn shutdown(&self) {
        let _ = self.outbox.request("shutdown", Value::Null).await;
        self.outbox.notify("exit", Value::Null).await;
        self.outbox.flush().await;
        let server = self.server.lock().expect("server").take();
        if let Some(server) = server {
            let _ = server.await;
        }
    }
}

/// The keys a notification concerns.
fn keys_of(note: &Note) -> Vec<Key> {
    let mut keys = Vec::new();
    if let Some(t) = note.params_of::<TranscriptNotification>() {
        keys.extend(t.ticket_id.map(Key::Ticket));
        keys.push(Key::Run(t.run_id));
    } else if let Some(r) = note.params_of::<RunChanged>() {
        keys.extend(r.run.ticket_id.map(Key::Ticket));
        keys.push(Key::Run(r.run.id));
    } else if let Some(t) = note.params_of::<TicketChanged>() {
        keys.push(Key::Ticket(t.ticket.id));
        // A breakdown's new tickets concern the breakdown's run.
        keys.extend(t.ticket.initiative_run_id.map(Key::Run));
    } else if let Some(q) = note.params_of::<QuestionNotification>() {
        keys.push(Key::Ticket(q.ticket_id));
        keys.push(Key::Run(q.run_id));
    } else {
        // `planwire/delta`, `planwire/ticketDeleted` and later notifications: by their ids.
        let id = |k: &str| note.params.get(k).and_then(Value::as_i64);
        keys.extend(id("ticketId").map(Key::Ticket));
        keys.extend(id("runId").map(Key::Run));
    }
    keys
}

async fn route(mut incoming: mpsc::Receiver<ReaderEvent>, outbox: Outbox, subscribers: Subscribers) {
    while let Some(event) = incoming.recv().await {
        let note = match event {
            ReaderEvent::Message(Incoming::Notification { method, params }) => Note { method, params },
            ReaderEvent::Message(Incoming::Request { id, method, .. }) => {
                // The backend advertises nothing the server would ask about.
                tracing::debug!("answering the server's {method}");
                outbox.respond(Some(&id), Ok(Value::Null)).await;
                continue;
            }
            ReaderEvent::Message(Incoming::Response { .. }) => continue,
            ReaderEvent::Closed { .. } => break,
        };
        let keys = keys_of(&note);
        let targets: Vec<mpsc::Sender<Note>> = subscribers
            .lock()
            .expect("subscribers")
            .values()
            .filter(|(wanted, _)| wanted.iter().any(|k| keys.contains(k)))
            .map(|(_, tx)| tx.clone())
            .collect();
        for tx in targets {
            let _ = tx.send(note.clone()).await;
        }
    }
    // The server is gone: every subscription ends.
    subscribers.lock().expect("subscribers").clear();
}

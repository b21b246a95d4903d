//! An in-process LSP client: the terminal front runs [`crate::server::serve`] on one end of a
//! `tokio::io::duplex` pair and talks to it like an editor does, so `planwire plan` takes
//! exactly the path an editor's request takes (same handlers, runner, store and stop).

use std::collections::VecDeque;
use std::path::Path;

use planwire_protocol::{ErrorCode, Notification, Request};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::transport::{self, Incoming, Outbox, ReaderEvent, ResponseError};

/// Bytes buffered in each direction of the in-process pipe.
const PIPE: usize = 256 * 1024;

/// A notification from the server, as received.
#[derive(Debug, Clone)]
pub struct Note {
    pub method: String,
    pub params: Value,
}

impl Note {
    /// The params as `N`'s type when this is an `N` notification.
    pub fn params_of<N: Notification>(&self) -> Option<N::Params> {
        (self.method == N::METHOD)
            .then(|| serde_json::from_value(self.params.clone()).ok())
            .flatten()
    }
}

/// The server running in-process on one end of a pipe, and the transport of the other end.
pub(crate) struct InProcess {
    pub outbox: Outbox,
    pub incoming: mpsc::Receiver<ReaderEvent>,
    /// The server's task; its output is the exit code.
    pub server: JoinHandle<i32>,
}

impl InProcess {
    pub fn spawn() -> InProcess {
        let (client_end, server_end) = tokio::io::duplex(PIPE);
        let (server_read, server_write) = tokio::io::split(server_end);
        let server = tokio::spawn(crate::server::serve(
            tokio::io::BufReader::new(server_read),
            server_write,
        ));
        let (client_read, client_write) = tokio::io::split(client_end);
        let (outbox, incoming) = transport::start(tokio::io::BufReader::new(client_read), client_write);
        InProcess {
            outbox,
            incoming,
            server,
        }
    }
}

/// The `initialize` params of an in-process client.
pub(crate) fn initialize_params(name: &str, capabilities: Value, options: Value) -> Value {
    json!({
        "processId": std::process::id(),
        "clientInfo": { "name": name, "version": env!("CARGO_PKG_VERSION") },
        "rootUri": null,
        "capabilities": capabilities,
        "initializationOptions": options,
    })
}

pub struct Client {
    outbox: Outbox,
    incoming: mpsc::Receiver<ReaderEvent>,
    /// Notifications received while a request was awaited, not yet taken.
    queued: VecDeque<Note>,
    server: JoinHandle<i32>,
    closed: bool,
}

impl Client {
    /// Starts the server in-process and initializes it with `dbPath` (and work-done progress,
    /// whose `create` requests are answered). Returns the client and the `initialize` result.
    pub async fn start(db: &Path) -> Result<(Client, Value), ResponseError> {
        Client::start_with(db, serde_json::Map::new()).await
    }

    /// [`Client::start`] with more `initializationOptions` (the terminal's `--acp-agent`s).
    pub async fn start_with(
        db: &Path,
        mut options: serde_json::Map<String, Value>,
    ) -> Result<(Client, Value), ResponseError> {
        let InProcess {
            outbox,
            incoming,
            server,
        } = InProcess::spawn();
        let mut client = Client {
            outbox,
            incoming,
            queued: VecDeque::new(),
            server,
            closed: false,
        };
        let params = initialize_params("planwire-cli", json!({ "window": { "workDoneProgress": true } }), {
            options.insert("dbPath".into(), json!(db.display().to_string()));
            Value::Object(options)
        });
        let result = client.raw_call("initialize", params).await?;
        client.outbox.notify("initialized", json!({})).await;
        Ok((client, result))
    }

    /// A typed request.
    pub async fn call<R: Request>(&mut self, params: R::Params) -> Result<R::Result, ResponseError>
    where
        R::Result: DeserializeOwned,
    {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        let value = self.raw_call(R::METHOD, params).await?;
        serde_json::from_value(value).map_err(|e| {
            ResponseError::new(
                ErrorCode::InternalError,
                format!("unexpected {} result: {e}", R::METHOD),
            )
        })
    }

    /// Sends a request and waits for its response, meanwhile queueing notifications and
    /// answering the server's requests, so the reader never blocks on a full channel.
    pub async fn raw_call(&mut self, method: &str, params: Value) -> Result<Value, ResponseError> {
        let outbox = self.outbox.clone();
        let method_owned = method.to_owned();
        let mut request = tokio::spawn(async move { outbox.request(&method_owned, params).await });
        loop {
            tokio::select! {
                done = &mut request => {
                    return done.unwrap_or_else(|e| {
                        Err(ResponseError::new(ErrorCode::InternalError, format!("{method}: {e}")))
                    });
                }
                event = self.incoming.recv(), if !self.closed => {
                    if let Some(note) = self.handle(event).await {
                        self.queued.push_back(note);
                    }
                }
            }
        }
    }

    /// The next notification; `None` once the server is gone.
    pub async fn next(&mut self) -> Option<Note> {
        if let Some(note) = self.queued.pop_front() {
            return Some(note);
        }
        while !self.closed {
            let event = self.incoming.recv().await;
            if let Some(note) = self.handle(event).await {
                return Some(note);
            }
        }
        None
    }

    async fn handle(&mut self, event: Option<ReaderEvent>) -> Option<Note> {
        match event {
            Some(ReaderEvent::Message(Incoming::Notification { method, params })) => Some(Note { method, params }),
            Some(ReaderEvent::Message(Incoming::Request { id, method, .. })) => {
                // Only `window/workDoneProgress/create` is expected; accept anything.
                tracing::debug!("answering the server's {method}");
                self.outbox.respond(Some(&id), Ok(Value::Null)).await;
                None
            }
            Some(ReaderEvent::Message(Incoming::Response { .. })) => None,
            Some(ReaderEvent::Closed { .. }) | None => {
                self.closed = true;
                None
            }
        }
    }

    /// `shutdown` (which stops any run still active), then `exit`; returns the server's code.
    pub async fn shutdown(mut self) -> i32 {
        let _ = self.raw_call("shutdown", Value::Null).await;
        self.outbox.notify("exit", Value::Null).await;
        self.outbox.flush().await;
        // Keep draining so the server's writer never blocks while it finishes.
        let Client {
            mut incoming, server, ..
        } = self;
        let drain = tokio::spawn(async move { while incoming.recv().await.is_some() {} });
        let code = server.await.unwrap_or(1);
        drain.abort();
        code
    }
}

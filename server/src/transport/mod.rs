//! The JSON-RPC transport: a reader task and one writer task joined by bounded channels.
//!
//! Hand-written on tokio on purpose (see README, "Dependencies"): everything the server
//! writes goes through one queue ([`Outbox`]), so it leaves in the order it was produced —
//! a notification sent before a response always arrives before it. Responses to the
//! server's own requests are matched by id in the reader and never reach the main loop.

pub mod framing;
pub mod message;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use planwire_protocol::ErrorCode;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use framing::{read_frame, write_frame, Frame, FrameError};
pub use message::{Incoming, RequestId, ResponseError};

/// What the reader hands to the main loop.
#[derive(Debug)]
pub enum ReaderEvent {
    Message(Incoming),
    /// End of input, or a fatal framing error (said on stderr already).
    Closed {
        clean: bool,
    },
}

enum Out {
    Frame(Vec<u8>),
    Flush(oneshot::Sender<()>),
}

type Pending = Arc<Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, ResponseError>>>>>;

/// The single way out. Cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Out>,
    pending: Pending,
    next_id: Arc<AtomicI64>,
}

impl Outbox {
    async fn send(&self, value: &Value) {
        match serde_json::to_vec(value) {
            Ok(bytes) => {
                // A closed writer means the client is gone; there is no one left to tell.
                let _ = self.tx.send(Out::Frame(bytes)).await;
            }
            Err(e) => tracing::error!("cannot serialize an outgoing message: {e}"),
        }
    }

    pub async fn notify(&self, method: &str, params: impl Serialize) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(&message::notification(method, &params)).await;
    }

    pub async fn respond(&self, id: Option<&RequestId>, result: Result<Value, ResponseError>) {
        self.send(&message::response(id, result)).await;
    }

    /// Sends a server → client request and waits for its response.
    pub async fn request(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<Value, ResponseError> {
        let id = RequestId::Str(format!(
            "planwire-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        ));
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .expect("pending map")
            .insert(id.clone(), tx);
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(&message::request(&id, method, &params)).await;
        rx.await.unwrap_or_else(|_| {
            Err(ResponseError::new(
                ErrorCode::InternalError,
                "connection closed",
            ))
        })
    }

    /// Waits until everything queued so far has been written.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Out::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// Starts the reader and writer tasks over the given streams.
pub fn start<R, W>(reader: R, writer: W) -> (Outbox, mpsc::Receiver<ReaderEvent>)
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::channel(1024);
    let outbox = Outbox {
        tx: out_tx,
        pending: Arc::default(),
        next_id: Arc::new(AtomicI64::new(1)),
    };
    let (in_tx, in_rx) = mpsc::channel(256);
    tokio::spawn(write_loop(writer, out_rx));
    tokio::spawn(read_loop(reader, in_tx, outbox.clone()));
    (outbox, in_rx)
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut rx: mpsc::Receiver<Out>) {
    while let Some(out) = rx.recv().await {
        match out {
            Out::Frame(bytes) => {
                if let Err(e) = write_frame(&mut writer, &bytes).await {
                    tracing::warn!("cannot write to the client: {e}");
                    return;
                }
            }
            Out::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

async fn read_loop<R: AsyncBufRead + Unpin>(
    mut reader: R,
    tx: mpsc::Sender<ReaderEvent>,
    outbox: Outbox,
) {
    let clean = loop {
        let body = match read_frame(&mut reader).await {
            Ok(Frame::Body(body)) => body,
            Ok(Frame::Skipped(what)) => {
                tracing::warn!("skipped a malformed frame: {what}");
                continue;
            }
            Ok(Frame::Eof) => break true,
            Err(FrameError::TooLarge(n)) => {
                tracing::error!("closing the connection: Content-Length {n} is over the limit");
                break false;
            }
            Err(FrameError::Io(e)) => {
                tracing::error!("closing the connection: {e}");
                break false;
            }
        };
        let value: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("a frame is not valid JSON: {e}");
                let err = ResponseError::new(ErrorCode::ParseError, format!("parse error: {e}"));
                outbox.respond(None, Err(err)).await;
                continue;
            }
        };
        match Incoming::from_value(value) {
            Ok(Incoming::Response { id, result }) => {
                let waiter = outbox.pending.lock().expect("pending map").remove(&id);
                match waiter {
                    Some(w) => {
                        let _ = w.send(result);
                    }
                    None => tracing::warn!("a response to unknown request {id}"),
                }
            }
            Ok(msg) => {
                if tx.send(ReaderEvent::Message(msg)).await.is_err() {
                    return;
                }
            }
            Err((id, err)) => outbox.respond(id.as_ref(), Err(err)).await,
        }
    };
    let _ = tx.send(ReaderEvent::Closed { clean }).await;
}

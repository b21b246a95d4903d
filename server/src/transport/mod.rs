//! The JSON-RPC transport: a reader task and one writer task joined by bounded channels.
//!
//! One message layer, two framings ([`Codec`]): LSP's `Content-Length` frames for editors
//! (`framing`), and newline-delimited JSON for ACP peers and `codex app-server` (`ndjson`).
//! Only the framing differs; queue, ordering, limits and error handling are shared, and the
//! same layer serves as a server (planwire's own stdio) or as a client of a child process.
//!
//! Hand-written on tokio on purpose (see README, "Dependencies"): everything the server
//! writes goes through one queue ([`Outbox`]), so it leaves in the order it was produced —
//! a notification sent before a response always arrives before it. Responses to the
//! server's own requests are matched by id in the reader and never reach the main loop.
//!
//! The queue is bounded in bytes ([`QUEUE_BYTES`]), not only in messages: a client that reads
//! slowly makes senders wait instead of making the sidecar buffer without limit. The writer
//! writes every frame that is already queued before it flushes, so a burst of notifications
//! costs one flush, and a lone message still leaves at once.

pub mod framing;
pub mod message;
pub mod ndjson;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use planwire_protocol::ErrorCode;
use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use framing::{read_frame, write_frame_unflushed, Frame, FrameError, Rescan};

/// At most this many bytes of outgoing frames wait for the writer; a sender past it waits.
/// A single larger frame still goes out (alone).
pub const QUEUE_BYTES: usize = 4 * 1024 * 1024;

pub use message::{Incoming, RequestId, ResponseError};

/// How messages are framed on the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// `Content-Length: N\r\n\r\n` then N bytes (LSP base protocol).
    Lsp,
    /// One message per line (ACP, `codex app-server`).
    Ndjson,
}

impl Codec {
    async fn read<R: AsyncBufRead + Unpin>(self, reader: &mut R) -> Result<Frame, FrameError> {
        match self {
            Codec::Lsp => read_frame(reader).await,
            Codec::Ndjson => ndjson::read_line(reader).await,
        }
    }

    /// The messages of one frame: one JSON value, or for a line, every value on it in order
    /// (a peer may print several objects on one line), and the error of what could not be
    /// read after them.
    fn decode(self, body: &[u8]) -> (Vec<Value>, Option<serde_json::Error>) {
        match self {
            Codec::Lsp => match serde_json::from_slice(body) {
                Ok(v) => (vec![v], None),
                Err(e) => (Vec::new(), Some(e)),
            },
            Codec::Ndjson => {
                let mut values = Vec::new();
                for v in serde_json::Deserializer::from_slice(body).into_iter::<Value>() {
                    match v {
                        Ok(v) => values.push(v),
                        Err(e) => return (values, Some(e)),
                    }
                }
                (values, None)
            }
        }
    }

    async fn write<W: AsyncWrite + Unpin>(self, writer: &mut W, body: &[u8]) -> std::io::Result<()> {
        match self {
            Codec::Lsp => write_frame_unflushed(writer, body).await,
            Codec::Ndjson => ndjson::write_line_unflushed(writer, body).await,
        }
    }
}

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
    /// A frame body, and its share of [`QUEUE_BYTES`], given back once it is written.
    Frame(Vec<u8>, OwnedSemaphorePermit),
    Flush(oneshot::Sender<()>),
}

type Pending = Arc<Mutex<HashMap<RequestId, oneshot::Sender<Result<Value, ResponseError>>>>>;

/// The single way out. Cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Out>,
    budget: Arc<Semaphore>,
    pending: Pending,
    next_id: Arc<AtomicI64>,
}

/// A notification, serialized straight from its typed params (no `Value` in between: for a
/// batch of transcript events that would copy every string once more).
#[derive(Serialize)]
struct Notification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

/// A response envelope, serialized in one go (`result` may be `null`; absent on errors).
#[derive(Serialize)]
struct Response<'a, T> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ResponseError>,
}

impl Outbox {
    async fn send(&self, value: &Value) {
        match serde_json::to_vec(value) {
            Ok(bytes) => self.send_bytes(bytes).await,
            Err(e) => tracing::error!("cannot serialize an outgoing message: {e}"),
        }
    }

    /// Queues an already serialized message (its JSON text) as one frame.
    pub(crate) async fn send_bytes(&self, bytes: Vec<u8>) {
        let share = bytes.len().clamp(1, QUEUE_BYTES) as u32;
        // A closed semaphore or writer means the client is gone; there is no one left to tell.
        if let Ok(permit) = self.budget.clone().acquire_many_owned(share).await {
            let _ = self.tx.send(Out::Frame(bytes, permit)).await;
        }
    }

    pub async fn notify(&self, method: &str, params: impl Serialize) {
        let note = Notification {
            jsonrpc: "2.0",
            method,
            params,
        };
        match serde_json::to_vec(&note) {
            Ok(bytes) => self.send_bytes(bytes).await,
            Err(e) => tracing::error!("cannot serialize a {method} notification: {e}"),
        }
    }

    /// Answers a request, serializing the result once, straight into the frame.
    pub async fn respond<T: Serialize>(&self, id: Option<&RequestId>, result: Result<T, ResponseError>) {
        let (result, error) = match result {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e)),
        };
        let response = Response {
            jsonrpc: "2.0",
            id,
            result,
            error,
        };
        match serde_json::to_vec(&response) {
            Ok(bytes) => self.send_bytes(bytes).await,
            Err(e) => tracing::error!("cannot serialize a response: {e}"),
        }
    }

    /// Answers a request with an error.
    pub async fn respond_error(&self, id: Option<&RequestId>, error: ResponseError) {
        self.respond::<()>(id, Err(error)).await;
    }

    /// Sends a server → client request and waits for its response.
    pub async fn request(&self, method: &str, params: impl Serialize) -> Result<Value, ResponseError> {
        let id = RequestId::Str(format!("planwire-{}", self.next_id.fetch_add(1, Ordering::Relaxed)));
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending map").insert(id.clone(), tx);
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.send(&message::request(&id, method, &params)).await;
        rx.await
            .unwrap_or_else(|_| Err(ResponseError::new(ErrorCode::InternalError, "connection closed")))
    }

    /// Waits until everything queued so far has been written.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Out::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// Starts the reader and writer tasks over the given streams, with LSP framing.
pub fn start<R, W>(reader: R, writer: W) -> (Outbox, mpsc::Receiver<ReaderEvent>)
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    start_with(Codec::Lsp, reader, writer)
}

/// Starts the reader and writer tasks over the given streams, with the given framing.
pub fn start_with<R, W>(codec: Codec, reader: R, writer: W) -> (Outbox, mpsc::Receiver<ReaderEvent>)
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::channel(1024);
    let outbox = Outbox {
        tx: out_tx,
        budget: Arc::new(Semaphore::new(QUEUE_BYTES)),
        pending: Arc::default(),
        next_id: Arc::new(AtomicI64::new(1)),
    };
    let (in_tx, in_rx) = mpsc::channel(256);
    tokio::spawn(write_loop(codec, writer, out_rx));
    tokio::spawn(read_loop(codec, reader, in_tx, outbox.clone()));
    (outbox, in_rx)
}

async fn write_loop<W: AsyncWrite + Unpin>(codec: Codec, writer: W, mut rx: mpsc::Receiver<Out>) {
    let mut writer = BufWriter::with_capacity(64 * 1024, writer);
    while let Some(first) = rx.recv().await {
        // Everything already queued goes out before one flush.
        let mut next = Some(first);
        while let Some(out) = next.take() {
            let written = match out {
                Out::Frame(bytes, permit) => {
                    let r = codec.write(&mut writer, &bytes).await;
                    drop(permit);
                    r
                }
                Out::Flush(done) => {
                    let r = writer.flush().await;
                    let _ = done.send(());
                    r
                }
            };
            if let Err(e) = written {
                tracing::warn!("cannot write to the client: {e}");
                return;
            }
            next = rx.try_recv().ok();
        }
        if let Err(e) = writer.flush().await {
            tracing::warn!("cannot write to the client: {e}");
            return;
        }
    }
}

async fn read_loop<R: AsyncBufRead + Unpin>(codec: Codec, reader: R, tx: mpsc::Sender<ReaderEvent>, outbox: Outbox) {
    let mut reader = Rescan::new(reader);
    let clean = loop {
        let body = match codec.read(&mut reader).await {
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
            Err(e @ FrameError::Conflicting(..)) => {
                tracing::error!("closing the connection: {e}: where the body ends cannot be known");
                break false;
            }
            Err(FrameError::Io(e)) => {
                tracing::error!("closing the connection: {e}");
                break false;
            }
        };
        let (values, error) = codec.decode(&body);
        for value in values {
            if !deliver(value, &tx, &outbox).await {
                return;
            }
        }
        if let Some(e) = error {
            tracing::warn!("a frame is not valid JSON: {e}");
            let err = ResponseError::new(ErrorCode::ParseError, format!("parse error: {e}"));
            outbox.respond_error(None, err).await;
            if codec == Codec::Lsp {
                // Its length may have been wrong: the next frame's header may be inside.
                reader.rescan(body);
            }
        }
    };
    // Nobody will answer the requests still waiting: they fail now instead of hanging.
    outbox.pending.lock().expect("pending map").clear();
    let _ = tx.send(ReaderEvent::Closed { clean }).await;
}

/// Hands one message to whoever waits for it; false once the main loop is gone.
async fn deliver(value: Value, tx: &mpsc::Sender<ReaderEvent>, outbox: &Outbox) -> bool {
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
        Ok(msg) => return tx.send(ReaderEvent::Message(msg)).await.is_ok(),
        Err((id, err)) => outbox.respond_error(id.as_ref(), err).await,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Two ends of one in-memory pipe, each with its own transport.
    fn pair(
        codec: Codec,
    ) -> (
        (Outbox, mpsc::Receiver<ReaderEvent>),
        (Outbox, mpsc::Receiver<ReaderEvent>),
    ) {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (ar, aw) = tokio::io::split(a);
        let (br, bw) = tokio::io::split(b);
        (
            start_with(codec, tokio::io::BufReader::new(ar), aw),
            start_with(codec, tokio::io::BufReader::new(br), bw),
        )
    }

    #[tokio::test]
    async fn ndjson_request_response_and_notification_order() {
        let ((client, _), (server, mut server_in)) = pair(Codec::Ndjson);
        let answer = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(ReaderEvent::Message(msg)) = server_in.recv().await {
                match msg {
                    Incoming::Notification { method, .. } => seen.push(method),
                    Incoming::Request { id, method, params } => {
                        seen.push(method);
                        server.respond(Some(&id), Ok(json!({"echo": params}))).await;
                        return seen;
                    }
                    Incoming::Response { .. } => unreachable!(),
                }
            }
            seen
        });
        client.notify("first", json!({})).await;
        let result = client.request("second", json!({"text": "a\nb"})).await.unwrap();
        assert_eq!(result, json!({"echo": {"text": "a\nb"}}));
        assert_eq!(answer.await.unwrap(), vec!["first", "second"]);
    }

    #[tokio::test]
    async fn ndjson_reads_several_messages_on_one_line_and_answers_the_rest_as_a_parse_error() {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (ar, mut aw) = tokio::io::split(a);
        let (br, bw) = tokio::io::split(b);
        let (_server, mut server_in) = start_with(Codec::Ndjson, tokio::io::BufReader::new(br), bw);
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        aw.write_all(b"{\"method\":\"one\"}{\"method\":\"two\"} {oops\n")
            .await
            .unwrap();
        for want in ["one", "two"] {
            match server_in.recv().await {
                Some(ReaderEvent::Message(Incoming::Notification { method, .. })) => assert_eq!(method, want),
                other => panic!("{other:?}"),
            }
        }
        let mut reply = String::new();
        tokio::io::BufReader::new(ar).read_line(&mut reply).await.unwrap();
        let reply: Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["error"]["code"], -32700, "{reply}");
    }

    #[tokio::test]
    async fn a_request_fails_when_the_peer_closes() {
        let ((client, _), (server, server_in)) = pair(Codec::Ndjson);
        let waiting = tokio::spawn(async move { client.request("never", json!({})).await });
        // The peer reads nothing and goes away: its end of the pipe closes.
        drop((server, server_in));
        let err = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .expect("the request is not left hanging")
            .unwrap()
            .unwrap_err();
        assert!(err.message.contains("closed"), "{}", err.message);
    }
}

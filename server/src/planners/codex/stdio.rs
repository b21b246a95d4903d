//! The app-server's stdio as the byte streams of the project's one JSON-RPC transport.
//!
//! The supervisor reads a child's stdout as lines (bounded, a line over its limit cut); the
//! transport reads a byte stream and writes one. Two small pumps join them: stdout lines are
//! written back as lines into an in-memory pipe the transport reads, and what the transport
//! writes goes through a pipe to the child's stdin, which [`Stdio::close_stdin`] closes (the
//! app-server exits when its stdin closes; the transport itself keeps its writer until the
//! child's stdout ends, so it cannot be the one to close it).

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::super::driver::{Report, Reporter};
use super::super::truncated_line_event;
use crate::supervisor::{OutputLine, Supervised};
use crate::transport::{self, Codec, Outbox, ReaderEvent};

/// Bytes in flight in each in-memory pipe.
const PIPE: usize = 64 * 1024;

pub(super) struct Stdio {
    pub outbox: Outbox,
    close: Option<oneshot::Sender<()>>,
}

impl Stdio {
    /// Joins the child's stdin and stdout to a transport: its way out, and what Codex sends.
    /// `None` when stdin is not a pipe.
    pub fn connect(child: &mut Supervised, reports: Reporter) -> Option<(Stdio, mpsc::Receiver<ReaderEvent>)> {
        let mut stdin = child.stdin.take()?;
        let mut lines = std::mem::replace(&mut child.output, mpsc::channel(1).1);
        let (to_child, mut from_transport) = tokio::io::duplex(PIPE);
        let (close, closed) = oneshot::channel::<()>();
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::io::copy(&mut from_transport, &mut stdin) => {}
                // Closed on purpose, or the pass is gone: stdin is dropped here, and closes.
                _ = closed => {}
            }
        });
        let (mut to_transport, from_child) = tokio::io::duplex(PIPE);
        tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                match line {
                    OutputLine::Line(text) => {
                        let ok = to_transport.write_all(text.as_bytes()).await.is_ok()
                            && to_transport.write_all(b"\n").await.is_ok();
                        if !ok {
                            return;
                        }
                    }
                    // Not a message the transport could read: kept as a raw event.
                    OutputLine::Truncated { head, len } => {
                        let _ = reports
                            .send(Report::Events(vec![truncated_line_event(&head, len)]))
                            .await;
                    }
                }
            }
        });
        let (outbox, incoming) = transport::start_with(Codec::Ndjson, BufReader::new(from_child), to_child);
        let stdio = Stdio {
            outbox,
            close: Some(close),
        };
        Some((stdio, incoming))
    }

    /// Closes the child's stdin (what is queued for it may be lost: call it when nothing more
    /// needs saying).
    pub fn close_stdin(&mut self) {
        if let Some(close) = self.close.take() {
            let _ = close.send(());
        }
    }
}

//! LSP work-done progress for a run, when the client advertised `window.workDoneProgress`:
//! `window/workDoneProgress/create`, then `$/progress` begin, reports, end. So VS Code's
//! status bar and Neovim's `vim.lsp.status()` show planning with no extension code.
//! Reports are coalesced to at most one every [`REPORT_EVERY`] (the newest wins): a run
//! with a tool call per line would otherwise cost the editor a notification per event.

use std::sync::Arc;

use planwire_protocol::RunId;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::{timeout_at, Duration, Instant};

use crate::session::Session;

/// At most one `report` this often.
const REPORT_EVERY: Duration = Duration::from_millis(250);

enum Msg {
    Report(String),
    End(String),
}

pub struct Progress {
    tx: Option<mpsc::Sender<Msg>>,
}

impl Progress {
    pub fn begin(s: &Arc<Session>, run: RunId, title: &str) -> Progress {
        if !s.progress {
            return Progress { tx: None };
        }
        let (tx, mut rx) = mpsc::channel(64);
        let (outbox, title) = (s.outbox.clone(), title.to_owned());
        tokio::spawn(async move {
            let token = format!("planwire/run/{run}");
            if outbox
                .request("window/workDoneProgress/create", json!({ "token": token }))
                .await
                .is_err()
            {
                return;
            }
            let send = |value: serde_json::Value| {
                let outbox = outbox.clone();
                let token = token.clone();
                async move {
                    outbox
                        .notify("$/progress", json!({ "token": token, "value": value }))
                        .await
                }
            };
            send(json!({ "kind": "begin", "title": title, "cancellable": false })).await;
            let mut latest: Option<String> = None;
            loop {
                let msg = match latest.take() {
                    Some(m) => Some(Msg::Report(m)),
                    None => rx.recv().await,
                };
                let message = match msg {
                    Some(Msg::Report(m)) => m,
                    Some(Msg::End(m)) => return send(json!({ "kind": "end", "message": m })).await,
                    None => return send(json!({ "kind": "end" })).await,
                };
                send(json!({ "kind": "report", "message": message })).await;
                // Until the next report may go, only the newest one is kept.
                let next = Instant::now() + REPORT_EVERY;
                loop {
                    match timeout_at(next, rx.recv()).await {
                        Ok(Some(Msg::Report(m))) => latest = Some(m),
                        Ok(Some(Msg::End(m))) => return send(json!({ "kind": "end", "message": m })).await,
                        Ok(None) => return send(json!({ "kind": "end" })).await,
                        Err(_) => break,
                    }
                }
            }
        });
        Progress { tx: Some(tx) }
    }

    /// A report is dropped rather than queued without bound.
    pub fn report(&self, message: String) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(Msg::Report(message));
        }
    }

    pub fn end(&self, message: &str) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(Msg::End(message.to_owned()));
        }
    }
}

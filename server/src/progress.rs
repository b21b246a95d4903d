//! LSP work-done progress for a run, when the client advertised `window.workDoneProgress`:
//! `window/workDoneProgress/create`, then `$/progress` begin, reports, end. So VS Code's
//! status bar and Neovim's `vim.lsp.status()` show planning with no extension code.

use std::sync::Arc;

use planwire_protocol::RunId;
use serde_json::json;
use tokio::sync::mpsc;

use crate::session::Session;

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
            while let Some(msg) = rx.recv().await {
                match msg {
                    Msg::Report(m) => send(json!({ "kind": "report", "message": m })).await,
                    Msg::End(m) => {
                        send(json!({ "kind": "end", "message": m })).await;
                        return;
                    }
                }
            }
            send(json!({ "kind": "end" })).await;
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

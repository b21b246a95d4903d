//! Live deltas: pieces of text and reasoning as the planner produces them, sent as
//! `planwire/delta` and never stored. The stored `text` / `reasoning` event that closes a
//! block supersedes its deltas, so disk stays O(stream) and `getTranscript` stays exact.
//!
//! - The first piece of a block goes out at once; later pieces are coalesced to at most one
//!   notification per block every [`DELTA_EVERY`] (about 20 a second).
//! - Each delta carries `offset`, the characters of its block sent before it, and the blocks
//!   streaming now (as far as they were sent) are shared with `getTranscript`
//!   (`openBlocks`), so a client that attaches mid-block continues it exactly.
//! - Before a delta goes out, events waiting for their commit are flushed: a block closed by
//!   a stored event is always notified before the first piece of the block after it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use planwire_protocol::{AgentRunId, DeltaKind, DeltaParams, EventBody, OpenBlock};
use tokio::time::Instant;

use super::Run;

/// At most one delta notification per block this often.
pub(super) const DELTA_EVERY: Duration = Duration::from_millis(50);

/// One block streaming live.
struct Block {
    agent_run_id: Option<AgentRunId>,
    kind: DeltaKind,
    /// Received and not sent yet.
    held: String,
    /// Characters sent so far.
    sent_chars: u64,
}

/// The blocks streaming now, as far as they were sent (shared with `getTranscript`).
pub type OpenBlocks = Arc<Mutex<Vec<OpenBlock>>>;

#[derive(Default)]
pub(super) struct Deltas {
    blocks: Vec<Block>,
    last_sent: Option<Instant>,
    pub shared: OpenBlocks,
}

impl Deltas {
    /// When held pieces are due, if any are held.
    pub fn next_send(&self) -> Option<Instant> {
        if !self.blocks.iter().any(|b| !b.held.is_empty()) {
            return None;
        }
        Some(self.last_sent.map_or_else(Instant::now, |t| t + DELTA_EVERY))
    }

    /// A stored event closes its block: the block's held pieces are dropped (the event has
    /// the whole text).
    pub fn close(&mut self, agent_run_id: Option<AgentRunId>, body: &EventBody) {
        let kind = match body {
            EventBody::Text { .. } => DeltaKind::Text,
            EventBody::Reasoning { .. } => DeltaKind::Reasoning,
            _ => return,
        };
        let before = self.blocks.len();
        self.blocks
            .retain(|b| !(b.agent_run_id == agent_run_id && b.kind == kind));
        if self.blocks.len() != before {
            let mut shared = self.shared.lock().expect("open blocks");
            shared.retain(|b| !(b.agent_run_id == agent_run_id && b.kind == kind));
        }
    }

    /// Drops every block (a pass or the run ended: no stored event will close them).
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.shared.lock().expect("open blocks").clear();
    }

    fn block(&mut self, agent_run_id: Option<AgentRunId>, kind: DeltaKind) -> (&mut Block, bool) {
        let found = self
            .blocks
            .iter()
            .position(|b| b.agent_run_id == agent_run_id && b.kind == kind);
        match found {
            Some(i) => (&mut self.blocks[i], false),
            None => {
                self.blocks.push(Block {
                    agent_run_id,
                    kind,
                    held: String::new(),
                    sent_chars: 0,
                });
                self.shared.lock().expect("open blocks").push(OpenBlock {
                    agent_run_id,
                    kind,
                    text: String::new(),
                });
                (self.blocks.last_mut().expect("just pushed"), true)
            }
        }
    }

    /// Takes the held pieces as notifications (and records them as sent).
    fn take_due(&mut self) -> Vec<(Option<AgentRunId>, DeltaKind, String, u64)> {
        let mut out = Vec::new();
        let mut shared = self.shared.lock().expect("open blocks");
        for b in self.blocks.iter_mut().filter(|b| !b.held.is_empty()) {
            let piece = std::mem::take(&mut b.held);
            let offset = b.sent_chars;
            b.sent_chars += piece.chars().count() as u64;
            if let Some(s) = shared
                .iter_mut()
                .find(|s| s.agent_run_id == b.agent_run_id && s.kind == b.kind)
            {
                s.text.push_str(&piece);
            }
            out.push((b.agent_run_id, b.kind, piece, offset));
        }
        out
    }
}

impl Run {
    pub(super) async fn on_delta(&mut self, agent_run_id: Option<AgentRunId>, kind: DeltaKind, text: String) {
        if text.is_empty() {
            return;
        }
        let (block, new) = self.deltas.block(agent_run_id, kind);
        block.held.push_str(&text);
        if new {
            // The first piece of a block goes out at once.
            self.send_deltas().await;
        }
    }

    /// Sends every held piece.
    pub(super) async fn send_deltas(&mut self) {
        if self
            .pending
            .iter()
            .any(|e| matches!(e.body, EventBody::Text { .. } | EventBody::Reasoning { .. }))
        {
            self.flush().await;
        }
        let due = self.deltas.take_due();
        if due.is_empty() {
            return;
        }
        self.deltas.last_sent = Some(Instant::now());
        for (agent_run_id, kind, text, offset) in due {
            let params = DeltaParams {
                ticket_id: self.ticket_id,
                run_id: self.run_id,
                agent_run_id,
                kind,
                text,
                offset,
            };
            self.s.outbox.notify("planwire/delta", params).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_held_then_taken_with_their_offsets_and_closed_by_the_stored_event() {
        let mut d = Deltas::default();
        let (b, new) = d.block(None, DeltaKind::Text);
        assert!(new);
        b.held.push_str("Hé");
        assert_eq!(d.take_due(), vec![(None, DeltaKind::Text, "Hé".to_owned(), 0)]);
        let (b, new) = d.block(None, DeltaKind::Text);
        assert!(!new);
        b.held.push_str("llo");
        assert!(d.next_send().is_some());
        assert_eq!(d.take_due(), vec![(None, DeltaKind::Text, "llo".to_owned(), 2)]);
        assert_eq!(d.shared.lock().unwrap()[0].text, "Héllo");
        d.close(
            None,
            &EventBody::Text {
                text: "Héllo".into(),
                is_final: false,
            },
        );
        assert!(d.shared.lock().unwrap().is_empty());
        assert!(d.next_send().is_none());
        // A reasoning event does not close a text block.
        let (b, _) = d.block(Some(7), DeltaKind::Text);
        b.held.push('x');
        d.close(Some(7), &EventBody::Reasoning { text: "r".into() });
        assert_eq!(d.take_due().len(), 1);
    }
}

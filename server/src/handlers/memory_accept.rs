//! `planwire/memory/accept`: an open memory suggestion becomes a memory entry.

use std::sync::Arc;

use planwire_protocol::{MemoryEntry, MemorySuggestionRef};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::memory;

pub async fn handle(s: Arc<Session>, p: MemorySuggestionRef) -> HandlerResult<MemoryEntry> {
    let id = p.suggestion_id;
    s.store.write(move |c| memory::accept(c, id)).await.map_err(store_error)
}

//! `planwire/memory/remove`: removes an entry from a project's memory.

use std::sync::Arc;

use planwire_protocol::{MemoryRemoveParams, MemoryRemoveResult};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::memory;

pub async fn handle(s: Arc<Session>, p: MemoryRemoveParams) -> HandlerResult<MemoryRemoveResult> {
    let id = p.entry_id;
    let removed = s
        .store
        .write(move |c| memory::remove(c, id))
        .await
        .map_err(store_error)?;
    Ok(MemoryRemoveResult { removed })
}

//! `planwire/memory/reject`: an open memory suggestion is declined.

use std::sync::Arc;

use planwire_protocol::{MemorySuggestion, MemorySuggestionRef};

use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::memory;

pub async fn handle(s: Arc<Session>, p: MemorySuggestionRef) -> HandlerResult<MemorySuggestion> {
    let id = p.suggestion_id;
    s.store.write(move |c| memory::reject(c, id)).await.map_err(store_error)
}

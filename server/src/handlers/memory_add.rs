//! `planwire/memory/add`: a fact or convention for a project's memory.

use std::sync::Arc;

use planwire_protocol::{MemoryAddParams, MemoryEntry};

use super::create_ticket::check_root;
use super::{invalid_params, HandlerResult};
use crate::runner::store_error;
use crate::session::Session;
use crate::store::memory::{self, MAX_TEXT_CHARS, SOURCE_USER};

pub async fn handle(s: Arc<Session>, p: MemoryAddParams) -> HandlerResult<MemoryEntry> {
    let root = check_root(&p.root)?;
    let text = p.text.trim().to_owned();
    if text.is_empty() {
        return Err(invalid_params("field `text` must not be empty"));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(invalid_params(format!(
            "field `text`: at most {MAX_TEXT_CHARS} characters"
        )));
    }
    s.store
        .write(move |c| memory::add(c, &root, &text, SOURCE_USER))
        .await
        .map_err(store_error)
}

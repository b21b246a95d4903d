//! `planwire/memory/list`: a project's memory entries and suggestions, newest first.

use std::sync::Arc;

use planwire_protocol::{MemoryListResult, ProjectRef};

use super::create_ticket::check_root;
use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::memory;

pub async fn handle(s: Arc<Session>, p: ProjectRef) -> HandlerResult<MemoryListResult> {
    let root = check_root(&p.root)?;
    s.store.read(move |c| memory::list(c, &root)).await.map_err(store_error)
}

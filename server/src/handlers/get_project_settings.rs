//! `planwire/getProjectSettings`: a project's prompt settings (the defaults when it set none).

use std::sync::Arc;

use planwire_protocol::{ProjectRef, ProjectSettings};

use super::create_ticket::check_root;
use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::settings;

pub async fn handle(s: Arc<Session>, p: ProjectRef) -> HandlerResult<ProjectSettings> {
    let root = check_root(&p.root)?;
    s.store
        .read(move |c| settings::get(c, &root))
        .await
        .map_err(store_error)
}

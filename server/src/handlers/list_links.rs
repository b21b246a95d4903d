//! `planwire/listLinks`: the repositories linked to a project.

use std::sync::Arc;

use planwire_protocol::{LinksResult, ListLinksParams};

use super::create_ticket::check_root;
use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::links;

pub async fn handle(s: Arc<Session>, p: ListLinksParams) -> HandlerResult<LinksResult> {
    let root = check_root(&p.root)?;
    s.store
        .read(move |c| {
            Ok(LinksResult {
                links: links::list(c, &root)?,
            })
        })
        .await
        .map_err(store_error)
}

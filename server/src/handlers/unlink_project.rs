//! `planwire/unlinkProject`: remove a linked repository from a project.

use std::sync::Arc;

use planwire_protocol::{LinksResult, UnlinkProjectParams};

use super::create_ticket::check_root;
use super::HandlerResult;
use crate::runner::store_error;
use crate::session::Session;
use crate::store::links;

pub async fn handle(s: Arc<Session>, p: UnlinkProjectParams) -> HandlerResult<LinksResult> {
    let root = check_root(&p.root)?;
    s.store
        .write(move |c| {
            links::unlink(c, &root, &p.name)?;
            Ok(LinksResult {
                links: links::list(c, &root)?,
            })
        })
        .await
        .map_err(store_error)
}

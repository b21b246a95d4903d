//! `planwire/linkProject`: link another repository to a project, for research before planning.

use std::sync::Arc;

use planwire_protocol::{LinkProjectParams, LinksResult, ProjectLink};

use super::create_ticket::check_root;
use super::{invalid_params, HandlerResult};
use crate::runner::store_error;
use crate::session::Session;
use crate::store::links;

pub async fn handle(s: Arc<Session>, p: LinkProjectParams) -> HandlerResult<LinksResult> {
    let root = check_root(&p.root)?;
    let linked_root = check_root(&p.linked_root)?;
    let name = p.name.trim().to_owned();
    if name.is_empty() || name.chars().any(|c| c.is_control()) {
        return Err(invalid_params("field `name`: a short non-empty name, e.g. \"backend\""));
    }
    if linked_root == root {
        return Err(invalid_params("field `linkedRoot`: a project cannot link itself"));
    }
    let link = ProjectLink {
        name,
        linked_root,
        role: p.role.trim().to_owned(),
    };
    s.store
        .write(move |c| {
            links::link(c, &root, &link)?;
            Ok(LinksResult {
                links: links::list(c, &root)?,
            })
        })
        .await
        .map_err(store_error)
}

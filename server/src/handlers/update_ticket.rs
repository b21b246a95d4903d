//! `planwire/updateTicket`: edit a ticket's title, description, planner or branch (which must
//! exist in the ticket's repository).
//!
//! Whether the ticket is busy is decided in the same transaction as the edit, so an edit
//! never lands while a run plans the old text, and a refused edit changes nothing. The edit
//! is a message of the ticket's conversation; the next plan sends the new text, and a resumed
//! one tells the planner what changed (`planwire/plan`).

use std::sync::Arc;

use planwire_protocol::{UpdateTicketParams, UpdateTicketResult};

use super::create_ticket::{check_branch, check_tool, locate};
use super::{invalid_params, HandlerResult};
use crate::runner::{notify_ticket, store_error};
use crate::session::Session;
use crate::store::runs;
use crate::store::tickets::{self, Edit};

pub async fn handle(s: Arc<Session>, p: UpdateTicketParams) -> HandlerResult<UpdateTicketResult> {
    let edit = edit_of(p.clone())?;
    let id = p.ticket_id;
    if let Some(Some(branch)) = &edit.branch {
        // A branch must exist in the ticket's repository (plan checks again). A busy ticket
        // is refused as busy first.
        let root = s
            .store
            .read(move |c| {
                runs::ensure_idle(c, id)?;
                Ok(tickets::get(c, id)?.root)
            })
            .await
            .map_err(store_error)?;
        locate(&root, Some(branch)).await?;
    }
    let (changed, ticket) = s
        .store
        .write(move |c| Ok((tickets::update(c, id, &edit)?, tickets::get(c, id)?)))
        .await
        .map_err(store_error)?;
    if changed {
        notify_ticket(&s, id).await;
    }
    Ok(UpdateTicketResult { ticket })
}

/// The params, checked: a non-empty title, a known tool, a branch name; empty optional
/// strings clear their field.
fn edit_of(p: UpdateTicketParams) -> HandlerResult<Edit> {
    let title = match p.title {
        Some(t) if t.trim().is_empty() => {
            return Err(invalid_params(
                "invalid params for planwire/updateTicket: field `title` must not be empty",
            ))
        }
        t => t.map(|t| t.trim().to_owned()),
    };
    if let Some(tool) = &p.tool {
        check_tool(tool)?;
    }
    let clearable = |v: Option<String>| v.map(|v| Some(v).filter(|v| !v.is_empty()));
    let branch = match p.branch {
        Some(b) => Some(check_branch(Some(&b))?),
        None => None,
    };
    Ok(Edit {
        title,
        description: p.description,
        tool: p.tool,
        model: clearable(p.model),
        variant: clearable(p.variant),
        branch,
    })
}

//! Plans as resources: `planwire://ticket/{id}/plan` (markdown, the latest version) and
//! `planwire://ticket/{id}/plan/{version}` (one version, which never changes), both as
//! resource templates. `resources/list` lists the plans of the root's tickets (the client's
//! first root, else the working directory). A subscription to a ticket's plan gets
//! `notifications/resources/updated` when a new version lands: at once for a run this
//! server drives, and within [`POLL`] for one another planwire process (an editor sharing
//! the database) made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use planwire_protocol::{
    GetPlan, GetPlanParams, GetTicket, ListPlans, ListTickets, ListTicketsParams, TicketChanged, TicketId, TicketRef,
};
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ResourceUpdatedNotificationParam, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use serde_json::json;
use tokio::sync::mpsc;

use super::Mcp;
use crate::acp::backend::Key;
use crate::transport::ResponseError;

/// How often subscribed tickets are checked for versions made by another process.
const POLL: Duration = Duration::from_secs(3);
const MARKDOWN: &str = "text/markdown";

/// A plan resource's URI, parsed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Uri {
    pub ticket: TicketId,
    /// `None`: the latest version.
    pub version: Option<u32>,
}

impl Uri {
    pub fn parse(uri: &str) -> Option<Uri> {
        let rest = uri.strip_prefix("planwire://ticket/")?;
        let (id, rest) = rest.split_once('/')?;
        let ticket = id.parse().ok().filter(|t: &TicketId| *t > 0 && !id.starts_with('+'))?;
        let version = match rest {
            "plan" => None,
            _ => Some(rest.strip_prefix("plan/")?.parse().ok().filter(|v: &u32| *v > 0)?),
        };
        Some(Uri { ticket, version })
    }

    pub fn latest(ticket: TicketId) -> String {
        format!("planwire://ticket/{ticket}/plan")
    }
}

/// The resources error of an unknown URI (-32002, as the 2025-11-25 spec has it).
fn not_found(uri: &str) -> ResponseError {
    ResponseError {
        code: -32002,
        message: format!("Resource not found: {uri}"),
        data: Some(json!({ "uri": uri })),
    }
}

pub(super) async fn list(mcp: &Mcp) -> Result<ListResourcesResult, ResponseError> {
    let root = crate::handlers::create_ticket::check_root(&mcp.default_root().await).ok();
    let params = ListTicketsParams {
        root,
        ..ListTicketsParams::default()
    };
    let resources = mcp
        .backend
        .call::<ListTickets>(params)
        .await?
        .tickets
        .into_iter()
        .filter_map(|t| {
            let version = t.plan_version?;
            Some(
                Resource::new(Uri::latest(t.id), format!("ticket-{}-plan", t.id))
                    .with_title(format!("Plan: {}", t.title))
                    .with_description(format!("Ticket {}'s plan, version {version} (the latest)", t.id))
                    .with_mime_type(MARKDOWN),
            )
        })
        .collect();
    Ok(ListResourcesResult::with_all_items(resources))
}

pub(super) fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new("planwire://ticket/{id}/plan", "plan")
            .with_title("A ticket's plan")
            .with_description("The latest plan version of ticket {id}, as markdown")
            .with_mime_type(MARKDOWN),
        ResourceTemplate::new("planwire://ticket/{id}/plan/{version}", "plan-version")
            .with_title("A plan version")
            .with_description("Version {version} of ticket {id}'s plan, as markdown (never changes)")
            .with_mime_type(MARKDOWN),
    ])
}

pub(super) async fn read(mcp: &Mcp, p: ReadResourceRequestParams) -> Result<ReadResourceResult, ResponseError> {
    let uri = Uri::parse(&p.uri).ok_or_else(|| not_found(&p.uri))?;
    let b = &mcp.backend;
    let plan = match uri.version {
        Some(version) => b
            .call::<GetPlan>(GetPlanParams {
                ticket_id: uri.ticket,
                version,
            })
            .await
            .ok(),
        None => b
            .call::<ListPlans>(TicketRef { ticket_id: uri.ticket })
            .await
            .ok()
            .and_then(|mut l| l.plans.pop()),
    };
    let plan = plan.ok_or_else(|| not_found(&p.uri))?;
    let contents = ResourceContents::text(plan.markdown, p.uri.clone()).with_mime_type(MARKDOWN);
    Ok(ReadResourceResult::new(vec![contents]))
}

/// Subscribed URI → its ticket and the latest version it was told of.
type Subscribed = Arc<Mutex<HashMap<String, (Uri, Option<u32>)>>>;

/// The subscriptions of one client, and the task that watches them.
#[derive(Default)]
pub(super) struct Watch {
    subscribed: Subscribed,
    follow: Mutex<Option<mpsc::UnboundedSender<TicketId>>>,
}

impl Watch {
    /// Starts the watcher (at `initialize`); it ends with the connection.
    pub fn start(&self, mcp: &Arc<Mcp>) {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.follow.lock().expect("follow") = Some(tx);
        tokio::spawn(watch(Arc::downgrade(mcp), self.subscribed.clone(), rx));
    }

    pub async fn subscribe(&self, mcp: &Mcp, p: SubscribeRequestParams) -> Result<(), ResponseError> {
        let uri = Uri::parse(&p.uri).ok_or_else(|| not_found(&p.uri))?;
        let got = mcp
            .backend
            .call::<GetTicket>(TicketRef { ticket_id: uri.ticket })
            .await
            .map_err(|_| not_found(&p.uri))?;
        self.subscribed
            .lock()
            .expect("subscribed")
            .insert(p.uri, (uri, got.ticket.plan_version));
        if let Some(tx) = &*self.follow.lock().expect("follow") {
            let _ = tx.send(uri.ticket);
        }
        Ok(())
    }

    pub fn unsubscribe(&self, p: UnsubscribeRequestParams) {
        self.subscribed.lock().expect("subscribed").remove(&p.uri);
    }
}

async fn watch(mcp: Weak<Mcp>, subscribed: Subscribed, mut follow: mpsc::UnboundedReceiver<TicketId>) {
    let Some(sub) = mcp.upgrade().map(|m| m.backend.subscribe(&[])) else {
        return;
    };
    let mut sub = sub;
    let mut tick = tokio::time::interval(POLL);
    loop {
        let changed: Option<(TicketId, Option<u32>)> = tokio::select! {
            t = follow.recv() => match t {
                Some(t) => { sub.add(Key::Ticket(t)); None }
                None => return,
            },
            note = sub.recv() => match note {
                Some(note) => note.params_of::<TicketChanged>().map(|t| (t.ticket.id, t.ticket.plan_version)),
                None => return,
            },
            _ = tick.tick() => {
                let Some(m) = mcp.upgrade() else { return };
                let tickets: Vec<TicketId> = subscribed.lock().expect("subscribed").values().filter(|(u, _)| u.version.is_none()).map(|(u, _)| u.ticket).collect();
                for t in tickets {
                    if let Ok(got) = m.backend.call::<GetTicket>(TicketRef { ticket_id: t }).await {
                        updated(&m, &subscribed, t, got.ticket.plan_version).await;
                    }
                }
                None
            }
        };
        if let (Some((ticket, version)), Some(m)) = (changed, mcp.upgrade()) {
            updated(&m, &subscribed, ticket, version).await;
        }
    }
}

/// Tells the client of a newer version of a subscribed plan.
async fn updated(mcp: &Mcp, subscribed: &Subscribed, ticket: TicketId, version: Option<u32>) {
    let uris: Vec<String> = {
        let mut map = subscribed.lock().expect("subscribed");
        map.iter_mut()
            .filter(|(_, (u, known))| u.ticket == ticket && u.version.is_none() && version > *known)
            .map(|(uri, (_, known))| {
                *known = version;
                uri.clone()
            })
            .collect()
    };
    for uri in uris {
        mcp.notify(
            "notifications/resources/updated",
            ResourceUpdatedNotificationParam::new(uri),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_to_a_ticket_and_a_version() {
        assert_eq!(
            Uri::parse("planwire://ticket/12/plan"),
            Some(Uri {
                ticket: 12,
                version: None
            })
        );
        assert_eq!(
            Uri::parse("planwire://ticket/12/plan/3"),
            Some(Uri {
                ticket: 12,
                version: Some(3)
            })
        );
        for bad in [
            "planwire://ticket/0/plan",
            "planwire://ticket/x/plan",
            "planwire://ticket/+1/plan",
            "planwire://ticket/1/plan/0",
            "planwire://ticket/1/plan/",
            "planwire://ticket/1/notes",
            "file:///etc/passwd",
        ] {
            assert_eq!(Uri::parse(bad), None, "{bad}");
        }
        assert_eq!(Uri::latest(7), "planwire://ticket/7/plan");
    }
}

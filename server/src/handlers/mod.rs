//! Request handlers: one file per method, each a small async function from typed params to
//! a typed result. [`dispatch`] is the table of contents.
//!
//! Execution model: `initialize` and `shutdown` run on the main loop (they change the
//! connection's state); every other request runs as its own task, so a slow one never holds
//! up the rest, and `$/cancelRequest` can abort it.

mod answer;
mod authority;
mod breakdown;
pub(crate) mod create_ticket;
mod delete_ticket;
mod export_plan;
mod get_plan;
mod get_project_settings;
mod get_run;
mod get_ticket;
mod get_transcript;
mod handoff;
mod link_project;
mod list_links;
mod list_plans;
mod list_tickets;
mod memory_accept;
mod memory_add;
mod memory_list;
mod memory_reject;
mod memory_remove;
mod plan;
mod set_project_settings;
pub(crate) mod settings;
mod status;
mod stop;
mod unlink_project;
mod update_ticket;

use std::future::Future;
use std::sync::Arc;

use planwire_protocol::{self as p, ErrorCode, Request};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::session::Session;
use crate::transport::ResponseError;

pub type HandlerResult<T> = Result<T, ResponseError>;

/// The table of contents: every method and its handler. It makes [`dispatch`] and
/// [`check_params`], so a method's params are parsed the same way by both.
macro_rules! methods {
    ($($req:ident => $handler:path),* $(,)?) => {
        pub async fn dispatch(s: Arc<Session>, method: &str, params: Value) -> HandlerResult<RawResult> {
            match method {
                // Its result is assembled from stored JSON, already serialized.
                p::GetTranscript::METHOD => get_transcript::handle(s, parse_params(method, params)?).await,
                $(p::$req::METHOD => call::<p::$req, _, _>(s, params, $handler).await,)*
                _ => Err(unknown_method(method)),
            }
        }

        /// Parses `params` as [`dispatch`] would for `method`, without running anything.
        pub fn check_params(method: &str, params: Value) -> HandlerResult<()> {
            match method {
                p::GetTranscript::METHOD => parse_params::<<p::GetTranscript as Request>::Params>(method, params).map(drop),
                $(p::$req::METHOD => parse_params::<<p::$req as Request>::Params>(method, params).map(drop),)*
                _ => Err(unknown_method(method)),
            }
        }

        /// Every method [`dispatch`] serves.
        pub const METHODS: &[&str] = &[p::GetTranscript::METHOD, $(p::$req::METHOD),*];
    };
}

methods! {
    CreateTicket => create_ticket::handle,
    UpdateTicket => update_ticket::handle,
    ListTickets => list_tickets::handle,
    GetTicket => get_ticket::handle,
    StartPlan => plan::handle,
    ListPlans => list_plans::handle,
    GetPlan => get_plan::handle,
    ExportPlan => export_plan::handle,
    Handoff => handoff::handle,
    Stop => stop::handle,
    Status => status::handle,
    AnswerQuestion => answer::handle,
    SetProjectSettings => set_project_settings::handle,
    GetProjectSettings => get_project_settings::handle,
    MemoryList => memory_list::handle,
    MemoryAdd => memory_add::handle,
    MemoryRemove => memory_remove::handle,
    MemoryAccept => memory_accept::handle,
    MemoryReject => memory_reject::handle,
    DeleteTicket => delete_ticket::handle,
    Breakdown => breakdown::handle,
    GetRun => get_run::handle,
    LinkProject => link_project::handle,
    UnlinkProject => unlink_project::handle,
    ListLinks => list_links::handle,
}

fn unknown_method(method: &str) -> ResponseError {
    ResponseError::new(ErrorCode::MethodNotFound, format!("unknown method {method}"))
}

/// A result serialized once, here; the transport copies it into the frame as it is.
pub type RawResult = Box<RawValue>;

async fn call<R, F, Fut>(s: Arc<Session>, params: Value, f: F) -> HandlerResult<RawResult>
where
    R: Request,
    F: FnOnce(Arc<Session>, R::Params) -> Fut,
    Fut: Future<Output = HandlerResult<R::Result>>,
{
    let params = parse_params::<R::Params>(R::METHOD, params)?;
    let result = f(s, params).await?;
    serde_json::value::to_raw_value(&result).map_err(|e| ResponseError::new(ErrorCode::InternalError, e.to_string()))
}

/// Typed params, with an error that names the offending field.
///
/// Params are named: an object. Absent params (or `null`) count as `{}`, so a method whose
/// fields are all optional needs none, and one with a required field says which is missing.
/// An array is refused: serde would bind its items to the fields by position, so a reordered
/// field would silently take another's value. Fields this version does not know are ignored,
/// as LSP clients expect of a server, and logged at debug.
pub fn parse_params<P: DeserializeOwned>(method: &str, params: Value) -> HandlerResult<P> {
    let params = match params {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => params,
        _ => {
            return Err(invalid_params(format!(
                "invalid params for {method}: params must be an object"
            )))
        }
    };
    let mut ignored = Vec::new();
    let mut note = |path: serde_ignored::Path| ignored.push(path.to_string());
    let parsed = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(params, &mut note));
    if !ignored.is_empty() {
        tracing::debug!("{method}: ignored unknown params: {}", ignored.join(", "));
    }
    parsed.map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if path == "." || path.is_empty() {
            format!("invalid params for {method}: {inner}")
        } else {
            format!("invalid params for {method}: field `{path}`: {inner}")
        };
        invalid_params(message)
    })
}

pub fn invalid_params(message: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorCode::InvalidParams, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn params_are_named_only() {
        for method in METHODS {
            let e = check_params(method, json!(["/repo", "t", ""])).unwrap_err();
            assert_eq!(e.code, -32602, "{method}");
            assert!(
                e.message.contains("params must be an object"),
                "{method}: {}",
                e.message
            );
            assert_eq!(check_params(method, json!("x")).unwrap_err().code, -32602, "{method}");
        }
    }

    #[test]
    fn missing_params_count_as_an_empty_object() {
        // Every field optional: no params is fine.
        check_params(p::ListTickets::METHOD, Value::Null).unwrap();
        check_params(p::Status::METHOD, Value::Null).unwrap();
        // A required field: -32602 naming it.
        let e = check_params(p::GetTicket::METHOD, Value::Null).unwrap_err();
        assert_eq!(e.code, -32602);
        assert!(e.message.contains("ticketId"), "{}", e.message);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let parsed: p::TicketRef =
            parse_params(p::GetTicket::METHOD, json!({"ticketId": 3, "future": {"x": 1}})).unwrap();
        assert_eq!(parsed.ticket_id, 3);
    }

    #[test]
    fn unknown_methods_are_method_not_found() {
        assert_eq!(check_params("planwire/nope", json!({})).unwrap_err().code, -32601);
    }
}

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
use serde_json::value::RawValue;
use serde_json::Value;

use crate::session::Session;
use crate::transport::ResponseError;

pub type HandlerResult<T> = Result<T, ResponseError>;

pub async fn dispatch(s: Arc<Session>, method: &str, params: Value) -> HandlerResult<RawResult> {
    match method {
        p::CreateTicket::METHOD => call::<p::CreateTicket, _, _>(s, params, create_ticket::handle).await,
        p::UpdateTicket::METHOD => call::<p::UpdateTicket, _, _>(s, params, update_ticket::handle).await,
        p::ListTickets::METHOD => call::<p::ListTickets, _, _>(s, params, list_tickets::handle).await,
        p::GetTicket::METHOD => call::<p::GetTicket, _, _>(s, params, get_ticket::handle).await,
        p::StartPlan::METHOD => call::<p::StartPlan, _, _>(s, params, plan::handle).await,
        p::ListPlans::METHOD => call::<p::ListPlans, _, _>(s, params, list_plans::handle).await,
        p::GetPlan::METHOD => call::<p::GetPlan, _, _>(s, params, get_plan::handle).await,
        p::ExportPlan::METHOD => call::<p::ExportPlan, _, _>(s, params, export_plan::handle).await,
        p::Handoff::METHOD => call::<p::Handoff, _, _>(s, params, handoff::handle).await,
        p::Stop::METHOD => call::<p::Stop, _, _>(s, params, stop::handle).await,
        p::Status::METHOD => call::<p::Status, _, _>(s, params, status::handle).await,
        p::AnswerQuestion::METHOD => call::<p::AnswerQuestion, _, _>(s, params, answer::handle).await,
        p::GetTranscript::METHOD => get_transcript::handle(s, parse_params(p::GetTranscript::METHOD, params)?).await,
        p::SetProjectSettings::METHOD => {
            call::<p::SetProjectSettings, _, _>(s, params, set_project_settings::handle).await
        }
        p::GetProjectSettings::METHOD => {
            call::<p::GetProjectSettings, _, _>(s, params, get_project_settings::handle).await
        }
        p::MemoryList::METHOD => call::<p::MemoryList, _, _>(s, params, memory_list::handle).await,
        p::MemoryAdd::METHOD => call::<p::MemoryAdd, _, _>(s, params, memory_add::handle).await,
        p::MemoryRemove::METHOD => call::<p::MemoryRemove, _, _>(s, params, memory_remove::handle).await,
        p::MemoryAccept::METHOD => call::<p::MemoryAccept, _, _>(s, params, memory_accept::handle).await,
        p::MemoryReject::METHOD => call::<p::MemoryReject, _, _>(s, params, memory_reject::handle).await,
        p::DeleteTicket::METHOD => call::<p::DeleteTicket, _, _>(s, params, delete_ticket::handle).await,
        p::Breakdown::METHOD => call::<p::Breakdown, _, _>(s, params, breakdown::handle).await,
        p::GetRun::METHOD => call::<p::GetRun, _, _>(s, params, get_run::handle).await,
        p::LinkProject::METHOD => call::<p::LinkProject, _, _>(s, params, link_project::handle).await,
        p::UnlinkProject::METHOD => call::<p::UnlinkProject, _, _>(s, params, unlink_project::handle).await,
        p::ListLinks::METHOD => call::<p::ListLinks, _, _>(s, params, list_links::handle).await,
        _ => Err(ResponseError::new(
            ErrorCode::MethodNotFound,
            format!("unknown method {method}"),
        )),
    }
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
pub fn parse_params<P: serde::de::DeserializeOwned>(method: &str, params: Value) -> HandlerResult<P> {
    let params = if params.is_null() {
        Value::Object(Default::default())
    } else {
        params
    };
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if path == "." || path.is_empty() {
            format!("invalid params for {method}: {inner}")
        } else {
            format!("invalid params for {method}: field `{path}`: {inner}")
        };
        ResponseError::new(ErrorCode::InvalidParams, message)
    })
}

pub fn invalid_params(message: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorCode::InvalidParams, message)
}

//! JSON-RPC error codes: the standard ones, LSP's, and planwire's application codes.
//! Application errors also carry `error.data.kind`, the camelCase name below.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
    /// LSP: a request arrived before `initialize`.
    ServerNotInitialized,
    /// LSP: the client cancelled the request.
    RequestCancelled,
    /// The ticket already has an active run.
    TicketBusy,
    NotFound,
    /// The planner CLI is missing, unsupported or failed to start.
    PlannerUnavailable,
    /// The root does not exist or is not a directory.
    ProjectUnavailable,
    /// The request conflicts with the current state (for example, answering twice).
    Conflict,
}

impl ErrorCode {
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::ServerNotInitialized => -32002,
            ErrorCode::RequestCancelled => -32800,
            ErrorCode::TicketBusy => -32010,
            ErrorCode::NotFound => -32011,
            ErrorCode::PlannerUnavailable => -32012,
            ErrorCode::ProjectUnavailable => -32013,
            ErrorCode::Conflict => -32014,
        }
    }

    /// `error.data.kind` for application errors.
    pub fn kind(self) -> Option<&'static str> {
        Some(match self {
            ErrorCode::TicketBusy => "ticketBusy",
            ErrorCode::NotFound => "notFound",
            ErrorCode::PlannerUnavailable => "plannerUnavailable",
            ErrorCode::ProjectUnavailable => "projectUnavailable",
            ErrorCode::Conflict => "conflict",
            _ => return None,
        })
    }
}

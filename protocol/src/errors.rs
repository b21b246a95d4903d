//! JSON-RPC error codes: the standard ones, LSP's, and planwire's application codes.
//! Application errors also carry `error.data.kind`, the camelCase name below.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ErrorCode {
    /// JSON-RPC: the frame's body is not valid JSON (answered with `id: null`; the server keeps serving).
    ParseError,
    /// JSON-RPC: not a valid request object; also `initialize` twice, or any request after `shutdown`.
    InvalidRequest,
    /// JSON-RPC: the method is unknown (or not served by this server).
    MethodNotFound,
    /// JSON-RPC: the params do not match the method's params type; the message names the field.
    InvalidParams,
    /// JSON-RPC: the server failed (for example, the database could not be opened).
    InternalError,
    /// LSP: a request arrived before `initialize`.
    ServerNotInitialized,
    /// LSP: the client cancelled the request (`$/cancelRequest`).
    RequestCancelled,
    /// The ticket already has an active run.
    TicketBusy,
    /// The ticket, run or question named does not exist.
    NotFound,
    /// The planner CLI is missing, unsupported or failed to start.
    PlannerUnavailable,
    /// The root does not exist or is not a directory.
    ProjectUnavailable,
    /// The request conflicts with the current state (for example, answering twice, or exporting
    /// a plan onto an existing file without `overwrite`).
    Conflict,
}

impl ErrorCode {
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::ServerNotInitialized,
        ErrorCode::RequestCancelled,
        ErrorCode::TicketBusy,
        ErrorCode::NotFound,
        ErrorCode::PlannerUnavailable,
        ErrorCode::ProjectUnavailable,
        ErrorCode::Conflict,
    ];

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

    /// The code with this numeric value.
    pub fn from_code(code: i64) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.code() == code)
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

/// `error.data` of an application error (codes -32010 to -32014).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorData {
    /// The error's name: `ticketBusy`, `notFound`, `plannerUnavailable`, `projectUnavailable`
    /// or `conflict`.
    pub kind: ErrorCode,
}

/// A JSON-RPC error object as planwire sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResponseError {
    /// One of the codes of [`ErrorCode`] (see `x-error-codes` in the schema).
    pub code: i64,
    pub message: String,
    /// Present on application errors only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<ErrorData>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_the_wire_names_and_codes_are_unique() {
        for &c in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_code(c.code()), Some(c));
            if let Some(kind) = c.kind() {
                assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(kind));
            }
        }
    }
}

//! JSON-RPC 2.0 messages as they cross the wire.

use planwire_protocol::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A request id: a number or a string, kept as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Int(n) => write!(f, "{n}"),
            RequestId::Str(s) => write!(f, "{s:?}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ResponseError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ResponseError {
            code: code.code(),
            message: message.into(),
            data: code.kind().map(|kind| json!({ "kind": kind })),
        }
    }
}

/// An incoming message, classified by its keys.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    Response {
        id: RequestId,
        result: Result<Value, ResponseError>,
    },
}

impl Incoming {
    /// Classifies a parsed JSON value. An invalid message yields the error to answer with,
    /// and the id to answer to when one could be read.
    // The error is the rare path; `serde_json/preserve_order` (which the ACP schema crate
    // turns on) makes a `Value`, and so a `ResponseError`, larger than clippy's threshold.
    #[allow(clippy::result_large_err)]
    pub fn from_value(value: Value) -> Result<Incoming, (Option<RequestId>, ResponseError)> {
        let Value::Object(mut obj) = value else {
            return Err((
                None,
                ResponseError::new(ErrorCode::InvalidRequest, "a message must be a JSON object"),
            ));
        };
        let id = match obj.remove("id") {
            None | Some(Value::Null) => None,
            Some(v) => match serde_json::from_value::<RequestId>(v) {
                Ok(id) => Some(id),
                Err(_) => {
                    return Err((
                        None,
                        ResponseError::new(ErrorCode::InvalidRequest, "id must be a number or a string"),
                    ))
                }
            },
        };
        let params = obj.remove("params").unwrap_or(Value::Null);
        match (obj.remove("method"), id) {
            (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request { id, method, params }),
            (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
            (Some(_), id) => Err((
                id,
                ResponseError::new(ErrorCode::InvalidRequest, "method must be a string"),
            )),
            (None, Some(id)) => {
                let result = match obj.remove("error") {
                    Some(err) => Err(serde_json::from_value(err)
                        .unwrap_or_else(|_| ResponseError::new(ErrorCode::InternalError, "malformed error object"))),
                    None => Ok(obj.remove("result").unwrap_or(Value::Null)),
                };
                Ok(Incoming::Response { id, result })
            }
            (None, None) => Err((
                None,
                ResponseError::new(ErrorCode::InvalidRequest, "a message needs a method or an id"),
            )),
        }
    }
}

pub fn request(id: &RequestId, method: &str, params: &Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_messages() {
        let req = Incoming::from_value(json!({"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}})).unwrap();
        assert!(matches!(req, Incoming::Request { id: RequestId::Int(1), ref method, .. } if method == "m"));
        let note = Incoming::from_value(json!({"jsonrpc":"2.0","method":"n"})).unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
        let resp = Incoming::from_value(json!({"jsonrpc":"2.0","id":"x","result":null})).unwrap();
        assert!(matches!(
            resp,
            Incoming::Response {
                id: RequestId::Str(_),
                result: Ok(Value::Null)
            }
        ));
        let err = Incoming::from_value(json!({"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"no"}})).unwrap();
        assert!(matches!(
            err,
            Incoming::Response {
                result: Err(ResponseError { code: -1, .. }),
                ..
            }
        ));
    }

    #[test]
    fn rejects_invalid_messages_with_their_id() {
        let (id, e) = Incoming::from_value(json!({"id":3,"method":7})).unwrap_err();
        assert_eq!(id, Some(RequestId::Int(3)));
        assert_eq!(e.code, -32600);
        assert!(Incoming::from_value(json!([1, 2])).is_err());
        assert!(Incoming::from_value(json!({"id":{"x":1},"method":"m"})).is_err());
    }

    #[test]
    fn application_errors_carry_their_kind() {
        let e = ResponseError::new(ErrorCode::TicketBusy, "busy");
        assert_eq!(e.code, -32010);
        assert_eq!(e.data, Some(json!({"kind": "ticketBusy"})));
    }
}

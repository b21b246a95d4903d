//! `planwire acp`: planwire as an Agent Client Protocol agent, for Zed, JetBrains, Emacs and
//! Neovim ACP clients (NDJSON JSON-RPC on stdin/stdout, [`crate::transport::Codec::Ndjson`]).
//!
//! The front is a client of an in-process planwire server ([`backend`]): an ACP session is a
//! ticket, a prompt is a plan (the first) or feedback (the next ones), `session/cancel` is
//! `planwire/stop`, and a planner's question is an elicitation. So everything a session does
//! is stored, replayable (`session/load`), stoppable and busy-checked exactly as an editor's
//! plan is. `protocol/README.md` ("ACP") has the full mapping.
//!
//! Wire types are the `agent-client-protocol-schema` crate's (stable v1). What planwire sends
//! validates against the stable schema: unstable updates are never sent.

mod ask;
pub(crate) mod backend;
mod commands;
mod history;
mod render;
mod session;
mod turn;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentCapabilities, CancelNotification, ClientCapabilities, CloseSessionRequest, CloseSessionResponse,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest, LoadSessionRequest, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, ResumeSessionRequest, SessionCapabilities,
    SessionCloseCapabilities, SessionListCapabilities, SessionNotification, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use planwire_protocol::{ErrorCode, PlannerInfo};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncWrite};

use crate::transport::{self, Codec, Incoming, Outbox, ReaderEvent, ResponseError};
use backend::Backend;
use session::{Session, SessionId};

/// Updates of a session to send after a request's answer.
type After = Option<(String, Vec<SessionUpdate>)>;

/// How `planwire acp` was started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The SQLite file (else `PLANWIRE_DB`, else the default path).
    pub db: Option<std::path::PathBuf>,
    /// The planner of new sessions (else `claude`).
    pub tool: Option<String>,
    /// The model of new sessions.
    pub model: Option<String>,
    /// `initializationOptions.acpAgents` of the server: `{name: {command, args?, env?}}`.
    pub acp_agents: serde_json::Map<String, Value>,
}

/// The connection to one ACP client, once it is initialized.
pub(crate) struct Agent {
    out: Outbox,
    backend: Backend,
    /// Elicitations in form mode: the client advertised `elicitation.form`.
    elicitation: bool,
    defaults: (String, Option<String>),
    planners: Vec<PlannerInfo>,
    sessions: Mutex<HashMap<SessionId, Arc<Session>>>,
}

/// Serves ACP on the given streams until the client goes away; returns the exit code.
pub async fn serve<R, W>(reader: R, writer: W, options: Options) -> i32
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut incoming) = transport::start_with(Codec::Ndjson, reader, writer);
    let mut agent: Option<Arc<Agent>> = None;
    let clean = loop {
        let msg = match incoming.recv().await {
            Some(ReaderEvent::Message(msg)) => msg,
            Some(ReaderEvent::Closed { clean }) => break clean,
            None => break false,
        };
        match msg {
            Incoming::Request { id, method, params } => match (method.as_str(), &agent) {
                ("initialize", None) => match initialize(&out, &options, params).await {
                    Ok((a, result)) => {
                        agent = Some(a);
                        out.respond(Some(&id), Ok(result)).await;
                    }
                    Err(e) => out.respond_error(Some(&id), e).await,
                },
                ("initialize", Some(_)) => {
                    let e = ResponseError::new(ErrorCode::InvalidRequest, "initialize was already called");
                    out.respond_error(Some(&id), e).await;
                }
                (_, None) => {
                    let e = ResponseError::new(ErrorCode::InvalidRequest, "call initialize first");
                    out.respond_error(Some(&id), e).await;
                }
                (_, Some(a)) => {
                    let a = a.clone();
                    tokio::spawn(async move {
                        let (result, after) = match a.dispatch(&method, params).await {
                            Ok((value, after)) => (Ok(value), after),
                            Err(e) => (Err(e), None),
                        };
                        a.out.respond(Some(&id), result).await;
                        // Updates that need the client to know the session: after its answer.
                        if let Some((session, updates)) = after {
                            a.update(&session, updates).await;
                        }
                    });
                }
            },
            Incoming::Notification { method, params } => match (method.as_str(), &agent) {
                ("session/cancel", Some(a)) => match serde_json::from_value::<CancelNotification>(params) {
                    Ok(c) => a.cancel(&c.session_id.0),
                    Err(e) => tracing::warn!("an invalid session/cancel: {e}"),
                },
                _ => tracing::debug!("ignored notification {method}"),
            },
            Incoming::Response { .. } => unreachable!("responses are matched by the reader"),
        }
    };
    if let Some(a) = &agent {
        // Every run this process drives is stopped and recorded before we go.
        a.backend.shutdown().await;
    }
    out.flush().await;
    if clean {
        0
    } else {
        1
    }
}

async fn initialize(out: &Outbox, options: &Options, params: Value) -> Result<(Arc<Agent>, Value), ResponseError> {
    let req: InitializeRequest = parse("initialize", params)?;
    let caps: &ClientCapabilities = &req.client_capabilities;
    let elicitation = caps.elicitation.as_ref().is_some_and(|e| e.form.is_some());
    let mut server_options = json!({ "acpAgents": options.acp_agents });
    if let Some(db) = &options.db {
        server_options["dbPath"] = json!(db.display().to_string());
    }
    if let Some(tool) = &options.tool {
        server_options["defaultTool"] = json!(tool);
    }
    let (backend, result) = Backend::start(server_options).await?;
    let planners: Vec<PlannerInfo> = result
        .pointer("/capabilities/experimental/planwire/planners")
        .cloned()
        .and_then(|p| serde_json::from_value(p).ok())
        .unwrap_or_default();
    let tool = options.tool.clone().unwrap_or_else(|| "claude".into());
    let agent = Arc::new(Agent {
        out: out.clone(),
        backend,
        elicitation,
        defaults: (tool, options.model.clone()),
        planners,
        sessions: Mutex::new(HashMap::new()),
    });
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
        .session_capabilities(
            SessionCapabilities::new()
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new())
                .close(SessionCloseCapabilities::new()),
        );
    let response = InitializeResponse::new(agent_client_protocol_schema::ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .agent_info(Implementation::new("planwire", env!("CARGO_PKG_VERSION")).title("planwire"));
    Ok((agent, to_value(&response)?))
}

impl Agent {
    /// Answers one request; the updates to send once it is answered come with the answer.
    async fn dispatch(self: &Arc<Self>, method: &str, params: Value) -> Result<(Value, After), ResponseError> {
        let value = match method {
            "session/new" => {
                let req: NewSessionRequest = parse(method, params)?;
                let session = self.new_session(req.cwd.display().to_string(), None);
                let response = NewSessionResponse::new(session.acp_id())
                    .modes(session::modes())
                    .config_options(session.config_options(&self.planners));
                return Ok((to_value(&response)?, Some((session.acp_id(), commands::announce()))));
            }
            "session/load" | "session/resume" => {
                let id = if method == "session/load" {
                    parse::<LoadSessionRequest>(method, params)?.session_id
                } else {
                    parse::<ResumeSessionRequest>(method, params)?.session_id
                };
                let (response, id) = history::load(self, &id.0, method == "session/load").await?;
                return Ok((to_value(&response)?, Some((id, commands::announce()))));
            }
            _ => self.answer(method, params).await?,
        };
        Ok((value, None))
    }

    async fn answer(self: &Arc<Self>, method: &str, params: Value) -> Result<Value, ResponseError> {
        match method {
            "session/prompt" => {
                let req: PromptRequest = parse(method, params)?;
                let session = self.session(&req.session_id.0)?;
                let reason = turn::prompt(self, &session, req.prompt).await?;
                to_value(&agent_client_protocol_schema::v1::PromptResponse::new(reason))
            }
            "session/list" => to_value(&history::list(self, parse::<ListSessionsRequest>(method, params)?).await?),
            "session/close" => {
                let req: CloseSessionRequest = parse(method, params)?;
                let removed = self
                    .sessions
                    .lock()
                    .expect("sessions")
                    .remove(req.session_id.0.as_ref());
                if let Some(session) = removed {
                    session.cancel();
                }
                to_value(&CloseSessionResponse::new())
            }
            "session/set_mode" => {
                let req: SetSessionModeRequest = parse(method, params)?;
                self.session(&req.session_id.0)?;
                if req.mode_id.0.as_ref() != session::PLAN_MODE {
                    return Err(invalid(format!(
                        "planwire has one mode, `plan` (got `{}`)",
                        req.mode_id.0
                    )));
                }
                to_value(&SetSessionModeResponse::new())
            }
            "session/set_config_option" => {
                let req: SetSessionConfigOptionRequest = parse(method, params)?;
                let session = self.session(&req.session_id.0)?;
                let value = serde_json::to_value(&req.value).unwrap_or(Value::Null);
                let value = match &value["value"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                session.set_option(&req.config_id.0, &value, &self.planners)?;
                let options = session.config_options(&self.planners);
                to_value(&SetSessionConfigOptionResponse::new(options))
            }
            "authenticate" => Ok(json!({})),
            _ => Err(ResponseError::new(
                ErrorCode::MethodNotFound,
                format!("unknown method {method}"),
            )),
        }
    }

    fn new_session(&self, cwd: String, ticket: Option<planwire_protocol::TicketId>) -> Arc<Session> {
        let session = Session::new(cwd, ticket, self.defaults.clone());
        self.sessions
            .lock()
            .expect("sessions")
            .insert(session.key(), session.clone());
        session
    }

    /// A session of this connection, or one the client names by a ticket's session id.
    fn session(&self, id: &str) -> Result<Arc<Session>, ResponseError> {
        if let Some(s) = session::lookup(&self.sessions.lock().expect("sessions"), id) {
            return Ok(s);
        }
        Err(ResponseError::new(
            ErrorCode::InvalidParams,
            format!("unknown session {id}: create it with session/new or load it with session/load"),
        ))
    }

    fn cancel(&self, id: &str) {
        if let Some(s) = session::lookup(&self.sessions.lock().expect("sessions"), id) {
            s.cancel();
        }
    }

    /// Sends updates of a session, in order.
    pub(crate) async fn update(&self, session_id: &str, updates: Vec<SessionUpdate>) {
        for update in updates {
            let note = SessionNotification::new(session_id.to_owned(), update);
            self.out.notify("session/update", note).await;
        }
    }

    /// A request to the ACP client, typed both ways.
    pub(crate) async fn ask_client<P: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        params: P,
    ) -> Result<T, ResponseError> {
        let value = self.out.request(method, params).await?;
        serde_json::from_value(value).map_err(|e| {
            ResponseError::new(
                ErrorCode::InternalError,
                format!("the client's {method} answer does not parse: {e}"),
            )
        })
    }
}

fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, ResponseError> {
    crate::handlers::parse_params(method, params)
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, ResponseError> {
    serde_json::to_value(value).map_err(|e| ResponseError::new(ErrorCode::InternalError, e.to_string()))
}

pub(crate) fn invalid(message: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorCode::InvalidParams, message)
}

/// `planwire acp` on stdin/stdout; returns the exit code.
pub async fn serve_stdio(options: Options) -> i32 {
    let stdin = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    serve(stdin, tokio::io::stdout(), options).await
}

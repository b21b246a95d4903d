//! `planwire mcp`: planwire as a Model Context Protocol server, for agents that reach outside
//! tools through MCP (Claude Code, Codex, Copilot in VS Code, Cursor, OpenCode). Newline-
//! delimited JSON-RPC on stdin/stdout ([`crate::transport::Codec::Ndjson`]), the stdio
//! transport of MCP.
//!
//! Like `planwire acp`, the front is a client of an in-process planwire server
//! ([`crate::acp::backend`]): a tool call becomes planwire requests that take the same
//! handlers, runner, store, sandbox and stop as an editor's. `protocol/README.md` ("MCP") has
//! the tools, the question flow and the resource URIs.
//!
//! - Revision 2025-11-25 (the newest with an `initialize` handshake, which every official
//!   SDK and the agents negotiate today); 2025-06-18 and 2025-03-26 are answered as such.
//!   `server/discover` (2026-07-28's stateless probe) is "method not found", so a client
//!   falls back to `initialize`.
//! - Wire types are the official Rust SDK's (`rmcp`'s `model`, without its service runtime,
//!   which would be a second JSON-RPC stack); the few 2025-11-25 shapes it no longer models
//!   (tasks) are in [`tasks`].
//! - MCP tools never implement: `handoff` returns a command and runs nothing, and `plan` runs
//!   its planner in planwire's sandbox. `planwire mcp` refuses to serve inside a planner pass
//!   ([`inside_a_planner`]), so a planner never sees planwire's own tools.

mod ask;
mod follow;
mod resources;
mod tasks;
mod tools;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use planwire_protocol::ErrorCode;
use rmcp::model::{
    ClientCapabilities, Implementation, InitializeRequestParams, InitializeResult, ProtocolVersion,
    ResourcesCapability, ServerCapabilities, ServerResult, ToolsCapability,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::sync::watch;

use crate::acp::backend::Backend;
use crate::transport::{self, Codec, Incoming, Outbox, ReaderEvent, RequestId, ResponseError};

/// The revisions answered, newest first; a client asking for another gets the first.
const VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_03_26,
];

/// What the server tells the model about itself (`initialize` → `instructions`).
const INSTRUCTIONS: &str = "planwire plans tickets: it runs a coding-agent CLI (Claude Code, \
Codex, OpenCode) read-only, in an OS sandbox, and keeps every ticket, plan version and \
question. Create a ticket with create_ticket, then call plan: it takes minutes and returns the \
plan as markdown. When plan returns needs_input, ask the person the questions and call answer \
with their words. The plans are resources (planwire://ticket/{id}/plan). planwire never \
implements: handoff returns the command that starts an implementation CLI with the plan.";

/// How `planwire mcp` was started.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The SQLite file (else `PLANWIRE_DB`, else the default path).
    pub db: Option<PathBuf>,
    /// The planner of new tickets (else `claude`).
    pub tool: Option<String>,
    /// The model of new tickets.
    pub model: Option<String>,
    /// `initializationOptions.acpAgents` of the server.
    pub acp_agents: serde_json::Map<String, Value>,
}

/// One MCP client, once it is initialized.
pub(crate) struct Mcp {
    out: Outbox,
    backend: Backend,
    client: ClientCapabilities,
    version: ProtocolVersion,
    defaults: (Option<String>, Option<String>),
    /// The client's roots as paths, asked once (`roots/list`) until they change.
    roots: tokio::sync::Mutex<Option<Vec<String>>>,
    /// Requests under way that `notifications/cancelled` may cancel.
    inflight: Mutex<HashMap<RequestId, watch::Sender<bool>>>,
    tasks: tasks::Tasks,
    resources: resources::Watch,
}

/// Serves MCP on the given streams until the client goes away; returns the exit code.
pub async fn serve<R, W>(reader: R, writer: W, options: Options) -> i32
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, mut incoming) = transport::start_with(Codec::Ndjson, reader, writer);
    let mut mcp: Option<Arc<Mcp>> = None;
    let clean = loop {
        let msg = match incoming.recv().await {
            Some(ReaderEvent::Message(msg)) => msg,
            Some(ReaderEvent::Closed { clean }) => break clean,
            None => break false,
        };
        match msg {
            Incoming::Request { id, method, params } => match (method.as_str(), &mcp) {
                ("initialize", None) => match initialize(&out, &options, params).await {
                    Ok((m, result)) => {
                        m.resources.start(&m);
                        mcp = Some(m);
                        out.respond(Some(&id), Ok(result)).await;
                    }
                    Err(e) => out.respond_error(Some(&id), e).await,
                },
                ("initialize", Some(_)) => {
                    let e = ResponseError::new(ErrorCode::InvalidRequest, "initialize was already called");
                    out.respond_error(Some(&id), e).await;
                }
                ("ping", _) => out.respond(Some(&id), Ok(json!({}))).await,
                (_, None) => {
                    let e = if method == "server/discover" {
                        not_found_method(&method)
                    } else {
                        ResponseError::new(ErrorCode::InvalidRequest, "call initialize first")
                    };
                    out.respond_error(Some(&id), e).await;
                }
                (_, Some(m)) => m.spawn_request(id, method, params),
            },
            Incoming::Notification { method, params } => match (&mcp, method.as_str()) {
                (Some(m), "notifications/cancelled") => m.cancelled(params),
                (Some(m), "notifications/roots/list_changed") => *m.roots.lock().await = None,
                _ => tracing::debug!("ignored notification {method}"),
            },
            Incoming::Response { .. } => unreachable!("responses are matched by the reader"),
        }
    };
    if let Some(m) = &mcp {
        // Every run this process drives is stopped and recorded before we go.
        m.backend.shutdown().await;
    }
    out.flush().await;
    if clean {
        0
    } else {
        1
    }
}

async fn initialize(out: &Outbox, options: &Options, params: Value) -> Result<(Arc<Mcp>, Value), ResponseError> {
    let req: InitializeRequestParams = parse("initialize", params)?;
    let version = VERSIONS
        .iter()
        .find(|v| **v == req.protocol_version)
        .unwrap_or(&VERSIONS[0])
        .clone();
    let mut server_options = json!({ "acpAgents": options.acp_agents });
    if let Some(db) = &options.db {
        server_options["dbPath"] = json!(db.display().to_string());
    }
    if let Some(tool) = &options.tool {
        server_options["defaultTool"] = json!(tool);
    }
    let (backend, _) = Backend::start(server_options).await?;
    let mcp = Arc::new(Mcp {
        out: out.clone(),
        backend,
        client: req.capabilities,
        version: version.clone(),
        defaults: (options.tool.clone(), options.model.clone()),
        roots: tokio::sync::Mutex::new(None),
        inflight: Mutex::new(HashMap::new()),
        tasks: tasks::Tasks::default(),
        resources: resources::Watch::default(),
    });
    let mut capabilities = ServerCapabilities::default();
    let mut tools = ToolsCapability::default();
    tools.list_changed = Some(false);
    capabilities.tools = Some(tools);
    let mut resources = ResourcesCapability::default();
    resources.subscribe = Some(true);
    resources.list_changed = Some(false);
    capabilities.resources = Some(resources);
    let result = InitializeResult::new(capabilities)
        .with_protocol_version(version)
        .with_server_info(
            Implementation::new("planwire", env!("CARGO_PKG_VERSION"))
                .with_title("planwire")
                .with_description("Plans tickets with your coding-agent CLI, read-only and sandboxed"),
        )
        .with_instructions(INSTRUCTIONS);
    let mut value = to_value(&result)?;
    if mcp.has_tasks() {
        // 2025-11-25 tasks, which the pinned rmcp's ServerCapabilities no longer carries.
        value["capabilities"]["tasks"] = tasks::server_capability();
    }
    Ok((mcp, value))
}

impl Mcp {
    /// Task-augmented `tools/call` is offered on 2025-11-25 only.
    fn has_tasks(&self) -> bool {
        self.version == ProtocolVersion::V_2025_11_25
    }

    /// Elicitation in form mode: declared with `form`, or as `{}` (form only, by the spec).
    fn elicits(&self) -> bool {
        self.client
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
    }

    fn spawn_request(self: &Arc<Self>, id: RequestId, method: String, params: Value) {
        let (cancel_tx, cancel) = watch::channel(false);
        self.inflight.lock().expect("inflight").insert(id.clone(), cancel_tx);
        let m = self.clone();
        tokio::spawn(async move {
            let result = m.dispatch(&id, &method, params, cancel.clone()).await;
            let cancelled = *cancel.borrow();
            m.inflight.lock().expect("inflight").remove(&id);
            // A cancelled request gets no response (the spec's SHOULD NOT).
            if !cancelled {
                m.out.respond(Some(&id), result).await;
            }
        });
    }

    fn cancelled(&self, params: Value) {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Cancelled {
            request_id: Option<RequestId>,
        }
        let Ok(Cancelled { request_id: Some(id) }) = serde_json::from_value(params) else {
            tracing::debug!("notifications/cancelled without a request id");
            return;
        };
        if let Some(tx) = self.inflight.lock().expect("inflight").get(&id) {
            let _ = tx.send(true);
        }
    }

    async fn dispatch(
        self: &Arc<Self>,
        id: &RequestId,
        method: &str,
        params: Value,
        cancel: watch::Receiver<bool>,
    ) -> Result<Value, ResponseError> {
        let result = match method {
            "tools/list" => return tools::list(self),
            "tools/call" => return tools::call(self, id, params, cancel).await,
            "resources/list" => ServerResult::ListResourcesResult(resources::list(self).await?),
            "resources/templates/list" => ServerResult::ListResourceTemplatesResult(resources::templates()),
            "resources/read" => ServerResult::ReadResourceResult(resources::read(self, parse(method, params)?).await?),
            "resources/subscribe" => {
                self.resources.subscribe(self, parse(method, params)?).await?;
                ServerResult::empty(())
            }
            "resources/unsubscribe" => {
                self.resources.unsubscribe(parse(method, params)?);
                ServerResult::empty(())
            }
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" if self.has_tasks() => {
                return self.tasks.answer(self, method, params).await
            }
            _ => return Err(not_found_method(method)),
        };
        self.result(result)
    }

    /// A result as this session's revision has it (no 2026-07-28 `resultType`).
    fn result(&self, mut result: ServerResult) -> Result<Value, ResponseError> {
        result.strip_result_type_for_legacy_peer();
        to_value(&result)
    }

    /// The client's roots as absolute paths (`roots/list`, when it declared `roots`).
    async fn roots(&self) -> Vec<String> {
        if self.client.roots.is_none() {
            return Vec::new();
        }
        let mut cached = self.roots.lock().await;
        if let Some(roots) = &*cached {
            return roots.clone();
        }
        let roots: Vec<String> = match self.out.request("roots/list", json!({})).await {
            Ok(v) => v["roots"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|r| r["uri"].as_str())
                        .filter_map(file_path)
                        .collect()
                })
                .unwrap_or_default(),
            Err(e) => {
                tracing::warn!("roots/list failed: {}", e.message);
                return Vec::new();
            }
        };
        *cached = Some(roots.clone());
        roots
    }

    /// The root a tool works in when it names none: the client's first root, else the cwd.
    async fn default_root(&self) -> String {
        if let Some(first) = self.roots().await.into_iter().next() {
            return first;
        }
        std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| ".".into())
    }

    async fn notify(&self, method: &str, params: impl Serialize) {
        self.out.notify(method, params).await;
    }
}

/// The path of a `file://` URI (percent-decoded), or `None` for another scheme.
fn file_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    let path = String::from_utf8(out).ok()?;
    path.starts_with('/').then_some(path)
}

fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, ResponseError> {
    crate::handlers::parse_params(method, params)
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, ResponseError> {
    serde_json::to_value(value).map_err(|e| ResponseError::new(ErrorCode::InternalError, e.to_string()))
}

fn invalid(message: impl Into<String>) -> ResponseError {
    ResponseError::new(ErrorCode::InvalidParams, message)
}

fn not_found_method(method: &str) -> ResponseError {
    ResponseError::new(ErrorCode::MethodNotFound, format!("unknown method {method}"))
}

/// True inside a planner pass planwire started: its `TMPDIR` is the pass's scratch directory
/// (every CLI hands `TMPDIR` to the MCP servers it starts, Codex's filtered environment
/// included). `planwire mcp` then refuses to serve: the planner never sees planwire's tools.
pub fn inside_a_planner() -> bool {
    ["TMPDIR", "TMP", "TEMP"].iter().any(|k| {
        std::env::var_os(k).is_some_and(|dir| {
            std::path::Path::new(&dir)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(crate::sandbox::SCRATCH_PREFIX))
        })
    })
}

/// `planwire mcp` on stdin/stdout; returns the exit code.
pub async fn serve_stdio(options: Options) -> i32 {
    if inside_a_planner() {
        crate::cli::output::error_line(
            "planwire mcp: refusing to serve inside a planner that planwire started (no recursion)",
        );
        return 1;
    }
    let stdin = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    serve(stdin, tokio::io::stdout(), options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_path("file:///home/a/my%20repo").as_deref(),
            Some("/home/a/my repo")
        );
        assert_eq!(file_path("file://localhost/srv/x").as_deref(), Some("/srv/x"));
        assert_eq!(file_path("https://example.com/x"), None);
        assert_eq!(file_path("file://relative"), None);
    }
}

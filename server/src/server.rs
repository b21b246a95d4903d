//! The main loop: LSP lifecycle (`initialize` / `initialized` / `shutdown` / `exit`),
//! `$/cancelRequest`, and dispatch of every other request to its own task.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use planwire_protocol::{ErrorCode, InitializationOptions, ServerCapabilities, PROTOCOL_VERSION};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::task::AbortHandle;

use crate::config::Config;
use crate::handlers;
use crate::planners::detect;
use crate::session::Session;
use crate::store::runs::{self, Owner};
use crate::store::{Store, StoreError, StoreOptions};
use crate::supervisor;
use crate::transport::{self, Incoming, Outbox, ReaderEvent, RequestId, ResponseError};

/// How often a sidecar marks its runs alive in the database (tests shorten it with
/// `PLANWIRE_HEARTBEAT_MS`).
const HEARTBEAT: Duration = Duration::from_secs(10);

fn heartbeat_every() -> Duration {
    std::env::var("PLANWIRE_HEARTBEAT_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(HEARTBEAT, Duration::from_millis)
}

type InFlight = Arc<Mutex<HashMap<RequestId, AbortHandle>>>;

/// Serves one connection until `exit` or end of input; returns the process exit code.
pub async fn serve<R, W>(reader: R, writer: W) -> i32
where
    R: AsyncBufRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outbox, mut incoming) = transport::start(reader, writer);
    let mut session: Option<Arc<Session>> = None;
    let mut shutdown = false;
    let in_flight: InFlight = Arc::default();
    let code = loop {
        let Some(event) = incoming.recv().await else {
            break 1;
        };
        let msg = match event {
            ReaderEvent::Message(msg) => msg,
            ReaderEvent::Closed { clean } => {
                if clean && !shutdown {
                    tracing::info!("end of input without shutdown");
                }
                // A client that said `shutdown` and then closed the pipe ended cleanly.
                break if clean && shutdown { 0 } else { 1 };
            }
        };
        match msg {
            Incoming::Request { id, method, params } => match (method.as_str(), &session) {
                ("initialize", None) => match initialize(&outbox, params).await {
                    Ok((s, result)) => {
                        session = Some(s);
                        outbox.respond(Some(&id), Ok(result)).await;
                    }
                    Err(e) => outbox.respond_error(Some(&id), e).await,
                },
                ("initialize", Some(_)) => {
                    let e = ResponseError::new(ErrorCode::InvalidRequest, "initialize was already called");
                    outbox.respond_error(Some(&id), e).await;
                }
                (_, None) => {
                    let e = ResponseError::new(ErrorCode::ServerNotInitialized, "the server is not initialized");
                    outbox.respond_error(Some(&id), e).await;
                }
                (_, Some(_)) if shutdown => {
                    let e = ResponseError::new(ErrorCode::InvalidRequest, "the server is shutting down");
                    outbox.respond_error(Some(&id), e).await;
                }
                ("shutdown", Some(s)) => {
                    s.stop_all().await;
                    shutdown = true;
                    outbox.respond(Some(&id), Ok(Value::Null)).await;
                }
                (_, Some(s)) => spawn_request(s.clone(), &outbox, &in_flight, id, method, params),
            },
            Incoming::Notification { method, params } => match method.as_str() {
                "exit" => break if shutdown { 0 } else { 1 },
                "$/cancelRequest" => cancel(&outbox, &in_flight, params).await,
                _ => tracing::debug!("ignored notification {method}"),
            },
            Incoming::Response { .. } => unreachable!("responses are matched by the reader"),
        }
    };
    if let Some(s) = &session {
        s.stop_all().await;
    }
    outbox.flush().await;
    code
}

fn spawn_request(s: Arc<Session>, outbox: &Outbox, in_flight: &InFlight, id: RequestId, method: String, params: Value) {
    let (outbox, flights, key) = (outbox.clone(), in_flight.clone(), id.clone());
    // Hold the lock across spawn and insert, so the task cannot remove itself first.
    let mut map = in_flight.lock().expect("in-flight map");
    let task = tokio::spawn(async move {
        let result = handlers::dispatch(s, &method, params).await;
        // Once removed from the map, a cancel can no longer abort us mid-response.
        let still_wanted = flights.lock().expect("in-flight map").remove(&id).is_some();
        if still_wanted {
            outbox.respond(Some(&id), result).await;
        }
    });
    map.insert(key, task.abort_handle());
}

async fn cancel(outbox: &Outbox, in_flight: &InFlight, params: Value) {
    let Some(id) = params
        .get("id")
        .cloned()
        .and_then(|v| serde_json::from_value::<RequestId>(v).ok())
    else {
        return;
    };
    let handle = in_flight.lock().expect("in-flight map").remove(&id);
    if let Some(handle) = handle {
        handle.abort();
        let e = ResponseError::new(ErrorCode::RequestCancelled, "the request was cancelled");
        outbox.respond_error(Some(&id), e).await;
    }
}

async fn initialize(outbox: &Outbox, params: Value) -> Result<(Arc<Session>, Value), ResponseError> {
    if !(params.is_object() || params.is_null()) {
        let m = "invalid params for initialize: params must be an object";
        return Err(ResponseError::new(ErrorCode::InvalidParams, m));
    }
    let options = match params.get("initializationOptions") {
        None | Some(Value::Null) => InitializationOptions::default(),
        Some(v) => handlers::parse_params::<InitializationOptions>("initialize (initializationOptions)", v.clone())?,
    };
    let progress = params
        .pointer("/capabilities/window/workDoneProgress")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut config = Config::from_options(&options);
    // LSP's `locale`: the output language when neither the project nor the user set one.
    config.locale = params
        .get("locale")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned);
    let opts = StoreOptions {
        busy_limit: config.busy_timeout,
    };
    let store = Store::open_with(&config.db_path, opts).map_err(|e| {
        tracing::info!("initialize failed: {e}");
        ResponseError::new(ErrorCode::InternalError, e.to_string())
    })?;
    recover(&store).await;
    let (pid, start) = crate::util::self_identity();
    let owner = Owner { pid, start };
    let planners = detect::detect_all(&config, Some(&store)).await;
    let config_sandbox = config.sandbox;
    let session = Session::new(outbox.clone(), store, config, owner, progress);
    *session.planners.lock().expect("planners") = planners.clone();
    tokio::spawn(heartbeat(session.clone()));
    tracing::info!("sandbox: {}", crate::sandbox::describe(config_sandbox));
    let caps = ServerCapabilities {
        protocol_version: PROTOCOL_VERSION,
        planners,
        sandbox: crate::sandbox::state(config_sandbox),
    };
    let result = json!({
        "serverInfo": { "name": "planwire", "version": env!("CARGO_PKG_VERSION") },
        "capabilities": { "experimental": { "planwire": caps } },
    });
    Ok((session, result))
}

/// Marks runs whose owner is gone `interrupted` and kills what is left of their groups.
async fn recover(store: &Store) {
    match store.write(runs::recover).await {
        Ok(leftovers) => {
            for l in leftovers {
                let killed = match (l.pgid, l.child_start) {
                    (Some(pgid), Some(start)) => supervisor::kill_leftover_group(pgid, start).await,
                    _ => 0,
                };
                tracing::warn!(
                    run = l.run_id,
                    ticket = l.ticket_id,
                    killed,
                    "recovered an interrupted run"
                );
            }
        }
        Err(e) => tracing::error!("recovery failed: {e}"),
    }
}

/// Marks this process's runs alive, every [`HEARTBEAT`], for as long as the session lives.
/// A write that fails (a full disk, a lock) is said once and tried again at the next tick.
async fn heartbeat(s: Arc<Session>) {
    let mut tick = tokio::time::interval(heartbeat_every());
    let mut failing = false;
    loop {
        tick.tick().await;
        let owner = s.owner;
        match s.store.write(move |c| runs::heartbeat(c, owner)).await {
            Ok(()) if failing => {
                tracing::info!("the heartbeat is written again");
                failing = false;
            }
            Ok(()) => {}
            Err(StoreError::Gone) => return,
            Err(e) if !failing => {
                tracing::warn!("cannot write the heartbeat (will retry): {e}");
                failing = true;
            }
            Err(_) => {}
        }
    }
}

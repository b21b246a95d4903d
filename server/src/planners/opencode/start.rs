//! Starting a pass on its own `opencode serve`: the port from the server's stdout, the
//! event subscription, the session (created, or the stored one resumed) and the prompt.
//!
//! - **The port.** `--port 0` is not a random port: OpenCode takes 4096 when it is free (it
//!   may be another run's) and a random one otherwise. The port is read from the
//!   `opencode server listening on http://127.0.0.1:PORT` line.
//! - **Subscribe first.** `GET /event` is open before the session is created and prompted,
//!   so no event of the pass is missed.
//! - **Resume** reads the stored session's messages (a `404` means it is gone: the runner
//!   starts afresh); they are the history the mapper never replays.
//! - **OpenCode's own SQLite** is shared by concurrent OpenCode processes of one user. A call
//!   that fails with a server error (a `500` whose cause, "database is locked", only OpenCode's
//!   log names) is retried [`RETRIES`] times with backoff, each retry noted in the transcript.

use std::time::Duration;

use serde_json::{json, Value};

use super::super::driver::{PassRequest, Report, Reporter};
use super::super::ParsedEvent;
use super::http::{segment, Client, EventStream, HttpError, Response};
use planwire_protocol::{ErrorKind, EventBody};

/// How often a failed call is tried again, and the wait before each try.
pub const RETRIES: u32 = 5;
const BACKOFF: [u64; 5] = [1, 2, 4, 8, 8];

/// The port of a `listening on` line.
pub fn listening_port(line: &str) -> Option<u16> {
    let rest = &line[line.find("listening on http://")? + "listening on http://".len()..];
    let rest = rest.strip_prefix("127.0.0.1:")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|p| *p != 0)
}

/// Why a pass could not start.
#[derive(Debug)]
pub struct StartFailure {
    pub message: String,
    pub kind: ErrorKind,
    /// The session to resume does not exist (the runner starts afresh).
    pub session_not_found: bool,
}

impl StartFailure {
    fn new(message: impl Into<String>) -> StartFailure {
        StartFailure {
            message: message.into(),
            kind: ErrorKind::Unknown,
            session_not_found: false,
        }
    }

    fn from_http(e: HttpError) -> StartFailure {
        StartFailure {
            kind: ErrorKind::Network,
            ..StartFailure::new(e.to_string())
        }
    }
}

/// A pass whose session is prompted and whose events are streaming.
pub struct Opened {
    pub events: EventStream,
    pub session: String,
    /// A resumed session's message ids before the prompt.
    pub history: Vec<String>,
}

/// Subscribes, creates or resumes the session, and prompts it.
pub async fn open(client: &Client, req: &PassRequest, reports: &Reporter) -> Result<Opened, StartFailure> {
    let events = subscribe(client, reports).await?;
    let (session, history) = match req.resume.as_deref() {
        Some(id) => (id.to_owned(), history(client, id, reports).await?),
        None => (create(client, req, reports).await?, Vec::new()),
    };
    Ok(Opened {
        events,
        session,
        history,
    })
}

/// `GET /event`. A connection refused is tried again a few times (the server listens, but
/// may still be settling); a server error like any other call (it is the instance's first
/// request, which writes to OpenCode's database).
async fn subscribe(client: &Client, reports: &Reporter) -> Result<EventStream, StartFailure> {
    let mut refused = 0;
    let mut attempt = 0;
    loop {
        match client.events().await {
            Ok(stream) => return Ok(stream),
            Err(HttpError::Connect(_)) if refused < 4 => {
                refused += 1;
                tokio::time::sleep(Duration::from_millis(250 << refused)).await;
            }
            Err(HttpError::Refused(r)) if r.status >= 500 && attempt < RETRIES => {
                attempt += 1;
                retry_note(reports, "open its event stream", &r, attempt).await;
            }
            Err(HttpError::Refused(r)) => {
                return Err(StartFailure::new(format!(
                    "OpenCode refused its event stream: {}",
                    r.message()
                )))
            }
            Err(e) => return Err(StartFailure::from_http(e)),
        }
    }
}

async fn history(client: &Client, id: &str, reports: &Reporter) -> Result<Vec<String>, StartFailure> {
    let Some(seg) = segment(id) else {
        return Err(not_found(id));
    };
    let path = format!("/session/{seg}/message");
    let r = retried(reports, "read the session to resume", || client.get(&path)).await?;
    match r.status {
        404 => Err(not_found(id)),
        _ if r.ok() => Ok(r
            .body
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.pointer("/info/id").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()),
        _ => Err(StartFailure::new(format!(
            "OpenCode could not read session {id}: {}",
            r.message()
        ))),
    }
}

fn not_found(id: &str) -> StartFailure {
    StartFailure {
        session_not_found: true,
        ..StartFailure::new(format!("Session not found: {id}"))
    }
}

async fn create(client: &Client, req: &PassRequest, reports: &Reporter) -> Result<String, StartFailure> {
    let body = json!({ "title": super::config::session_title(req.title.as_deref()) });
    let r = retried(reports, "create its session", || client.post("/session", &body)).await?;
    match r.body.get("id").and_then(Value::as_str) {
        Some(id) if r.ok() && segment(id).is_some() => Ok(id.to_owned()),
        _ => Err(StartFailure::new(format!(
            "OpenCode could not create a session: {}",
            r.message()
        ))),
    }
}

/// `POST /session/:id/prompt_async` (204, no body: what follows comes as events).
pub async fn prompt(
    client: &Client,
    session: &str,
    text: &str,
    req: &PassRequest,
    reports: &Reporter,
) -> Result<(), StartFailure> {
    let mut body = json!({ "agent": "plan", "parts": [{ "type": "text", "text": text }] });
    if let Some(model) = req.model.as_deref().filter(|m| !m.trim().is_empty()) {
        let Some((provider, model)) = model.split_once('/').filter(|(p, m)| !p.is_empty() && !m.is_empty()) else {
            return Err(StartFailure::new(format!(
                "OpenCode names a model provider/model (for example anthropic/claude-sonnet-4-5); got {model:?}"
            )));
        };
        body["model"] = json!({ "providerID": provider, "modelID": model });
    }
    if let Some(variant) = req.variant.as_deref().filter(|v| !v.trim().is_empty()) {
        body["variant"] = json!(variant);
    }
    let path = format!(
        "/session/{}/prompt_async",
        segment(session).ok_or_else(|| not_found(session))?
    );
    let r = retried(reports, "take the prompt", || client.post(&path, &body)).await?;
    match r.status {
        404 => Err(not_found(session)),
        _ if r.ok() => Ok(()),
        _ => Err(StartFailure::new(format!(
            "OpenCode refused the prompt: {}",
            r.message()
        ))),
    }
}

/// A call, tried again after a server error (see the module doc); the last response is
/// returned whatever it is.
async fn retried<F, Fut>(reports: &Reporter, what: &str, mut call: F) -> Result<Response, StartFailure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Response, HttpError>>,
{
    for attempt in 1..=RETRIES {
        let r = call().await.map_err(StartFailure::from_http)?;
        if r.status < 500 {
            return Ok(r);
        }
        retry_note(reports, what, &r, attempt).await;
    }
    call().await.map_err(StartFailure::from_http)
}

/// Notes retry `attempt` (from 1) of what failed with response `r`, then waits its backoff.
async fn retry_note(reports: &Reporter, what: &str, r: &Response, attempt: u32) {
    let wait = backoff(attempt);
    let note = format!(
        "OpenCode could not {what} (HTTP {}: {}). Another OpenCode run may hold its database; \
         retrying in {} s ({attempt} of {RETRIES}).",
        r.status,
        r.message(),
        wait.as_secs()
    );
    tracing::warn!("{note}");
    let _ = reports.send(Report::Events(vec![note_event(note)])).await;
    tokio::time::sleep(wait).await;
}

/// The wait before retry `n` (from 1) of a locked turn.
pub fn backoff(n: u32) -> Duration {
    Duration::from_secs(BACKOFF[(n.saturating_sub(1) as usize).min(BACKOFF.len() - 1)])
}

/// A transcript note (an `error` event of kind `unknown`; the run goes on).
pub fn note_event(message: String) -> ParsedEvent {
    ParsedEvent::main(EventBody::Error {
        error_kind: ErrorKind::Unknown,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_comes_from_the_listening_line() {
        assert_eq!(
            listening_port("opencode server listening on http://127.0.0.1:4096"),
            Some(4096)
        );
        assert_eq!(
            listening_port("opencode server listening on http://127.0.0.1:38211\r"),
            Some(38211)
        );
        assert_eq!(
            listening_port("Warning: OPENCODE_SERVER_PASSWORD is not set; server is unsecured."),
            None
        );
        // Only loopback, and a real port.
        assert_eq!(listening_port("opencode server listening on http://0.0.0.0:4096"), None);
        assert_eq!(listening_port("opencode server listening on http://127.0.0.1:0"), None);
        assert_eq!(
            listening_port("opencode server listening on http://127.0.0.1:99999"),
            None
        );
    }

    #[test]
    fn backoff_is_bounded() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(5), Duration::from_secs(8));
        assert_eq!(backoff(50), Duration::from_secs(8));
    }
}

//! A small HTTP/1.1 client for one `opencode serve` on loopback: JSON calls and the
//! `GET /event` stream, each with Basic auth (the server runs bash for whoever reaches its
//! port, so it always has a password, and every call, `/event` included, sends it).
//!
//! One connection per call (loopback, a few calls per pass), hyper's `client::conn::http1`
//! on a `TcpStream`: no pool, no TLS, no redirects. Every call has a deadline, so a hung
//! server never hangs the pass; the event stream has none (the driver watches its silence).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::sse;

/// How long one call may take, connection included.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// The largest response body read (a long session's messages).
const MAX_BODY: usize = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("cannot reach OpenCode's server: {0}")]
    Connect(#[from] std::io::Error),
    #[error("OpenCode's server broke the connection: {0}")]
    Http(String),
    #[error("OpenCode's server did not answer {0} within {1:?}")]
    Timeout(String, Duration),
    /// The event stream was refused with this status.
    #[error("OpenCode's server answered GET /event with {}", .0.status)]
    Refused(Response),
}

/// A response: its status and its body as JSON (`Null` when empty or not JSON).
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Value,
}

impl Response {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The error message OpenCode put in the body (`data.message`, `message`), else the status.
    pub fn message(&self) -> String {
        let b = &self.body;
        let text = b
            .pointer("/data/message")
            .or_else(|| b.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        text.unwrap_or_else(|| format!("HTTP {}", self.status))
    }
}

#[derive(Clone)]
pub struct Client {
    addr: SocketAddr,
    auth: HeaderValue,
    host: HeaderValue,
}

impl Client {
    pub fn new(port: u16, user: &str, password: &str) -> Client {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut auth = HeaderValue::from_str(&format!("Basic {token}")).expect("base64 is a header value");
        auth.set_sensitive(true);
        Client {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            auth,
            host: HeaderValue::from_str(&format!("127.0.0.1:{port}")).expect("an address is a header value"),
        }
    }

    /// One call; `body` goes as JSON.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Response, HttpError> {
        let what = format!("{method} {path}");
        tokio::time::timeout(CALL_TIMEOUT, self.call_now(method, path, body))
            .await
            .unwrap_or(Err(HttpError::Timeout(what, CALL_TIMEOUT)))
    }

    pub async fn get(&self, path: &str) -> Result<Response, HttpError> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Response, HttpError> {
        self.call(Method::POST, path, Some(body)).await
    }

    async fn call_now(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Response, HttpError> {
        let (mut sender, conn) = self.connect().await?;
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let mut req = self.request(method, path, bytes);
        if body.is_some() {
            req.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let res = sender
            .send_request(req)
            .await
            .map_err(|e| HttpError::Http(e.to_string()));
        let result = match res {
            Ok(res) => {
                let status = res.status().as_u16();
                let collected = Limited::new(res.into_body(), MAX_BODY).collect().await;
                let bytes = collected.map_err(|e| HttpError::Http(e.to_string()))?.to_bytes();
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                Ok(Response { status, body })
            }
            Err(e) => Err(e),
        };
        conn.abort();
        result
    }

    /// Subscribes to `GET /event`: each event's `data` arrives on the receiver, in order
    /// (`None` for one too large to keep); the receiver closes when the stream ends or
    /// breaks. Returns once the server answered 200 (the subscription is live).
    pub async fn events(&self) -> Result<EventStream, HttpError> {
        let what = "GET /event".to_owned();
        let (mut sender, conn) = tokio::time::timeout(CALL_TIMEOUT, self.connect())
            .await
            .unwrap_or(Err(HttpError::Timeout(what.clone(), CALL_TIMEOUT)))?;
        let mut req = self.request(Method::GET, "/event", Bytes::new());
        req.headers_mut()
            .insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let res = tokio::time::timeout(CALL_TIMEOUT, sender.send_request(req))
            .await
            .map_err(|_| HttpError::Timeout(what, CALL_TIMEOUT))?
            .map_err(|e| HttpError::Http(e.to_string()));
        let res = match res {
            Ok(res) if res.status().is_success() => res,
            Ok(res) => {
                let status = res.status().as_u16();
                let bytes = tokio::time::timeout(CALL_TIMEOUT, Limited::new(res.into_body(), MAX_BODY).collect()).await;
                let body = match bytes {
                    Ok(Ok(b)) => serde_json::from_slice(&b.to_bytes()).unwrap_or(Value::Null),
                    _ => Value::Null,
                };
                conn.abort();
                return Err(HttpError::Refused(Response { status, body }));
            }
            Err(e) => {
                conn.abort();
                return Err(e);
            }
        };
        let (tx, rx) = mpsc::channel(256);
        let reader = tokio::spawn(async move {
            let mut body = res.into_body();
            let mut decoder = sse::Decoder::new();
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else { continue };
                for event in decoder.feed(&data) {
                    if tx.send(event).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(EventStream {
            rx,
            tasks: [reader, conn],
        })
    }

    fn request(&self, method: Method, path: &str, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = path.parse().unwrap_or_else(|_| hyper::Uri::from_static("/"));
        let h = req.headers_mut();
        h.insert(HOST, self.host.clone());
        h.insert(AUTHORIZATION, self.auth.clone());
        req
    }

    async fn connect(
        &self,
    ) -> Result<(hyper::client::conn::http1::SendRequest<Full<Bytes>>, JoinHandle<()>), HttpError> {
        let stream = TcpStream::connect(self.addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| HttpError::Http(e.to_string()))?;
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok((sender, conn))
    }
}

/// A live `GET /event` subscription; dropping it closes the connection.
pub struct EventStream {
    pub rx: mpsc::Receiver<Option<String>>,
    tasks: [JoinHandle<()>; 2],
}

impl Drop for EventStream {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A path segment as OpenCode's ids are (`ses_…`, `que_…`, `per_…`): letters, digits, `_`
/// and `-`. Anything else is refused rather than escaped: an id never has it.
pub fn segment(id: &str) -> Option<&str> {
    let ok =
        !id.is_empty() && id.len() <= 200 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_safe_path_segments() {
        assert_eq!(segment("ses_dce2_61a2-2ffe"), Some("ses_dce2_61a2-2ffe"));
        for bad in ["", "../x", "a/b", "a?b", "a b", "ses%2F"] {
            assert_eq!(segment(bad), None, "{bad}");
        }
    }

    #[test]
    fn error_messages_come_from_the_body() {
        let r = Response {
            status: 404,
            body: serde_json::json!({"name": "NotFoundError", "data": {"message": "Session not found: ses_x"}}),
        };
        assert_eq!(r.message(), "Session not found: ses_x");
        let r = Response {
            status: 404,
            body: serde_json::json!({"_tag": "QuestionNotFoundError", "message": "Question request not found"}),
        };
        assert_eq!(r.message(), "Question request not found");
        assert_eq!(
            Response {
                status: 502,
                body: Value::Null
            }
            .message(),
            "HTTP 502"
        );
        assert!(!Response {
            status: 502,
            body: Value::Null
        }
        .ok());
    }
}

#[cfg(test)]
mod wire_tests {
    //! The client against a loopback server that checks what it is sent.

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Serves one connection: returns the request head it read, after writing `response`.
    async fn serve_once(listener: &TcpListener, response: &'static [u8]) -> String {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            assert!(n > 0, "the client closed early");
            head.extend_from_slice(&buf[..n]);
        }
        sock.write_all(response).await.unwrap();
        sock.shutdown().await.unwrap();
        String::from_utf8(head).unwrap()
    }

    #[tokio::test]
    async fn calls_and_the_event_stream_send_basic_auth() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = Client::new(listener.local_addr().unwrap().port(), "opencode", "pw");
        // base64("opencode:pw"); hyper writes header names in lower case.
        let auth = "authorization: Basic b3BlbmNvZGU6cHc=";

        let server = serve_once(
            &listener,
            b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n{\"id\":\"ses_1\"}\n",
        );
        let body = serde_json::json!({ "title": "T" });
        let (head, r) = tokio::join!(server, client.post("/session", &body));
        let r = r.unwrap();
        assert_eq!((r.status, r.body["id"].as_str()), (200, Some("ses_1")));
        assert!(head.starts_with("POST /session HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains(auth) && head.contains("content-type: application/json"),
            "{head}"
        );

        let sse: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
            23\r\ndata: {\"type\":\"server.connected\"}\n\n\r\n\
            14\r\ndata: {\"type\":\"a\"}\n\n\r\n0\r\n\r\n";
        let server = serve_once(&listener, sse);
        let (head, stream) = tokio::join!(server, client.events());
        assert!(head.starts_with("GET /event HTTP/1.1\r\n"), "{head}");
        assert!(head.contains(auth), "{head}");
        let mut stream = stream.unwrap();
        assert_eq!(
            stream.rx.recv().await,
            Some(Some(r#"{"type":"server.connected"}"#.to_owned()))
        );
        assert_eq!(stream.rx.recv().await, Some(Some(r#"{"type":"a"}"#.to_owned())));
        assert_eq!(stream.rx.recv().await, None, "the stream's end closes the receiver");

        // A refused stream says how.
        let server = serve_once(&listener, b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n");
        let (_, refused) = tokio::join!(server, client.events());
        assert!(matches!(refused, Err(HttpError::Refused(r)) if r.status == 401));
    }
}

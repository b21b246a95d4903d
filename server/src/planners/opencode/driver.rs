//! The driver of one `opencode serve` pass: it starts the session (`start.rs`), feeds the
//! event stream to the [`Mapper`], and carries out what comes back and what the run asks.
//!
//! - **Questions** go up as [`Report::Ask`]; the answer is `POST /question/:id/reply` with one
//!   list per question (the chosen labels, then any free text). A dismissal is a free-text
//!   answer telling the agent to go on with stated assumptions (`/reject` would end the turn).
//! - **Permissions** are answered here, never by the person (`permissions.rs`).
//! - **The end** is the root session going idle after its turn. Before the pass ends, the
//!   session's messages are read from the API (`GET /session/:id/message`) and whatever the
//!   stream missed is added, so a completed answer is never lost to a cut stream or a hang. A
//!   final answer (a main step that ended with `stop`) that is not followed by idle within
//!   [`SETTLE`] ends the pass all the same.
//! - **Stop** is `POST /session/:id/abort`, then the process group. A time limit reads the
//!   messages first: a completed answer still ends the pass as planned. The server never
//!   outlives the pass: every end stops its group.
//! - **A cut stream** (its end, or [`SILENCE`] without even a heartbeat) switches to the API:
//!   every second the driver tries to subscribe again, and reads the session's status, its
//!   pending questions and permissions, and its messages, until the turn is over.
//! - **A locked database** failing the turn is retried [`start::RETRIES`] times with backoff
//!   (the same prompt when the turn had not started, else a short "continue": the session
//!   holds the prompt already), each retry noted in the transcript.
//! - **Idle limit.** A busy status, and each heartbeat while busy, is [`Report::Busy`]: the
//!   runner's idle limit then waits for a silent *and* idle server.

use std::collections::HashMap;
use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;

use planwire_protocol::ErrorKind;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::super::driver::{
    answer_parts, AskId, Command, Driver, Exit, PassEnd, PassIo, PassRequest, Reply, Report, StopWhy, DECLINED,
};
use super::events::{Mapper, Out};
use super::http::{segment, Client, EventStream};
use super::start::{self, StartFailure};
use crate::supervisor::{OutputLine, Supervised};

/// How long the stream may be silent (OpenCode sends a heartbeat every 10 s) before it
/// counts as cut.
pub const SILENCE: Duration = Duration::from_secs(30);
/// How long a final answer waits for the session to go idle.
pub const SETTLE: Duration = Duration::from_secs(15);
/// How often a pass whose stream is cut reads the API.
const POLL: Duration = Duration::from_secs(1);
/// How many API reads in a row may fail before the pass gives up on the server.
const POLL_FAILURES: u32 = 30;
/// How many polls may find the session idle with nothing produced before the turn counts as over.
const IDLE_POLLS: u32 = 10;
/// The least wait before a locked turn is prompted again: longer than OpenCode's own SQLite
/// busy timeout (5 s), so the failed turn's second error (its `prompt_async` fails too, one
/// busy timeout later) comes first.
const LOCK_SETTLE: Duration = Duration::from_secs(6);
/// What a turn that failed on a locked database after it started is sent.
const CONTINUE: &str = "The last step failed because OpenCode's database was locked by another run. Continue \
where you stopped, and give your final answer as asked.";

pub struct ServeDriver {
    pub request: PassRequest,
    pub password: String,
}

impl Driver for ServeDriver {
    fn drive(self: Box<Self>, child: Supervised, io: PassIo) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(run(*self, child, io))
    }
}

/// What ended the pass.
enum Ending {
    /// The turn is over (or the pass could not start: `failed`).
    Done,
    Stopped(StopWhy),
    /// The server exited by itself.
    Exited(Option<ExitStatus>),
}

struct Pass {
    client: Client,
    request: PassRequest,
    mapper: Mapper,
    session: String,
    /// Questions waiting, with how many items each has.
    asks: HashMap<AskId, (String, usize)>,
    next_ask: AskId,
    events: Option<EventStream>,
    last_event: Instant,
    /// A final answer came: the pass ends at this time if the session has not gone idle.
    settle_at: Option<Instant>,
    /// A locked turn is prompted again at this time.
    retry_at: Option<Instant>,
    lock_retries: u32,
    /// The stream is cut: the API is read at this time.
    poll_at: Option<Instant>,
    poll_failures: u32,
    idle_polls: u32,
    done: bool,
    session_not_found: bool,
}

async fn run(driver: ServeDriver, mut child: Supervised, mut io: PassIo) {
    let mut output = std::mem::replace(&mut child.output, mpsc::channel(1).1);
    let mut mapper = Mapper::new();
    let mut session_not_found = false;
    let ending = match listen(&mut child, &mut output, &mut io).await {
        Err(ending) => ending,
        Ok(port) => {
            let client = Client::new(port, super::config::USER, &driver.password);
            let reports = io.reports.clone();
            let opened = tokio::select! {
                biased;
                cmd = next_stop(&mut io) => Err(Ending::Stopped(cmd)),
                status = child.wait() => Err(Ending::Exited(status.ok())),
                r = start::open(&client, &driver.request, &reports) => Ok(r),
            };
            match opened {
                Err(ending) => ending,
                Ok(Err(failure)) => {
                    session_not_found = failure.session_not_found;
                    send_outs(&io, mapper.fail(failure.kind, &failure.message)).await;
                    Ending::Done
                }
                Ok(Ok(opened)) => {
                    let session = mapper.set_root(&opened.session, opened.history);
                    let _ = io.reports.send(Report::Events(vec![session])).await;
                    let mut pass = Pass::new(client, driver.request, mapper, opened.session, opened.events);
                    let ending = pass.serve(&mut child, &mut output, &mut io).await;
                    session_not_found = pass.session_not_found;
                    mapper = pass.mapper;
                    ending
                }
            }
        }
    };
    let exit = match ending {
        Ending::Done => {
            child.stop(io.grace).await;
            Exit::Exited(Some(ExitStatus::from_raw(0)))
        }
        Ending::Stopped(why) => Exit::from_stop(why, child.stop(io.grace).await),
        Ending::Exited(status) => {
            child.reap_group().await;
            Exit::Exited(status)
        }
    };
    let events = mapper.finish();
    if !events.is_empty() {
        let _ = io.reports.send(Report::Events(events)).await;
    }
    let stderr_tail = child.stderr_tail().await;
    let end = PassEnd {
        exit,
        final_text: mapper.final_text(),
        all_text: mapper.all_text(),
        text_dropped: mapper.text_dropped(),
        session_id: mapper.session_id(),
        error_message: mapper.error_message(),
        missing_answer: mapper.explain_missing_answer(&stderr_tail),
        session_not_found,
        stderr_tail,
    };
    let _ = io.reports.send(Report::End(end)).await;
}

/// Waits for the server's `listening on` line; answers nothing meanwhile.
async fn listen(
    child: &mut Supervised,
    output: &mut mpsc::Receiver<OutputLine>,
    io: &mut PassIo,
) -> Result<u16, Ending> {
    let mut eof = false;
    loop {
        tokio::select! {
            biased;
            why = next_stop(io) => return Err(Ending::Stopped(why)),
            line = output.recv(), if !eof => match line {
                Some(OutputLine::Line(line)) => {
                    if let Some(port) = start::listening_port(&line) {
                        return Ok(port);
                    }
                }
                Some(OutputLine::Truncated { .. }) => {}
                None => eof = true,
            },
            status = child.wait() => return Err(Ending::Exited(status.ok())),
        }
    }
}

/// The next stop (a gone run is a stop too); answers before any question was asked fail.
async fn next_stop(io: &mut PassIo) -> StopWhy {
    loop {
        match io.commands.recv().await {
            Some(Command::Stop(why)) => return why,
            Some(Command::Answer { done, .. }) => {
                let _ = done.send(Err("the planner is not waiting on this question".into()));
            }
            None => return StopWhy::Stopped,
        }
    }
}

async fn send_outs(io: &PassIo, outs: Vec<Out>) {
    for out in outs {
        if let Out::Events(events) = out {
            let _ = io.reports.send(Report::Events(events)).await;
        }
    }
}

impl Pass {
    fn new(client: Client, request: PassRequest, mapper: Mapper, session: String, events: EventStream) -> Pass {
        Pass {
            client,
            request,
            mapper,
            session,
            asks: HashMap::new(),
            next_ask: 1,
            events: Some(events),
            last_event: Instant::now(),
            settle_at: None,
            retry_at: None,
            lock_retries: 0,
            poll_at: None,
            poll_failures: 0,
            idle_polls: 0,
            done: false,
            session_not_found: false,
        }
    }

    async fn serve(
        &mut self,
        child: &mut Supervised,
        output: &mut mpsc::Receiver<OutputLine>,
        io: &mut PassIo,
    ) -> Ending {
        let prompt = self.request.prompt.clone();
        if let Some(ending) = self.prompt(io, &prompt).await {
            return ending;
        }
        let mut eof = false;
        while !self.done {
            let silent_at = self.last_event + SILENCE;
            let streaming = self.events.is_some();
            tokio::select! {
                biased;
                cmd = io.commands.recv() => match cmd {
                    Some(Command::Answer { ask, reply, done }) => {
                        let _ = done.send(self.answer(ask, reply).await);
                    }
                    Some(Command::Stop(why)) => return self.stop(io, why).await,
                    None => return self.stop(io, StopWhy::Stopped).await,
                },
                event = recv(&mut self.events) => match event {
                    Some(data) => {
                        self.last_event = Instant::now();
                        if let Some(value) = data.and_then(|d| serde_json::from_str::<Value>(&d).ok()) {
                            let outs = self.mapper.on_event(&value);
                            self.handle(io, outs).await;
                        }
                    }
                    None => self.cut(io, "ended").await,
                },
                status = child.wait() => {
                    tracing::warn!("OpenCode's server exited during the pass: {status:?}");
                    return Ending::Exited(status.ok());
                }
                line = output.recv(), if !eof => eof = line.is_none(),
                _ = tokio::time::sleep_until(silent_at), if streaming => self.cut(io, "went silent").await,
                _ = sleep_until(self.poll_at) => self.poll(io).await,
                _ = sleep_until(self.retry_at) => {
                    if let Some(ending) = self.retry(io).await {
                        return ending;
                    }
                }
                _ = sleep_until(self.settle_at) => {
                    tracing::info!("OpenCode gave its final answer but its session did not go idle; ending the pass");
                    self.done = true;
                }
            }
        }
        self.catch_up(io).await;
        Ending::Done
    }

    /// Carries out what the mapper asks, in order.
    async fn handle(&mut self, io: &PassIo, outs: Vec<Out>) {
        for out in outs {
            match out {
                Out::Events(events) => {
                    let _ = io.reports.send(Report::Events(events)).await;
                }
                Out::Delta { agent, kind, text } => {
                    let _ = io.reports.send(Report::Delta { agent, kind, text }).await;
                }
                Out::Ask { request, items } => {
                    let ask = self.next_ask;
                    self.next_ask += 1;
                    self.asks.insert(ask, (request, items.len()));
                    let _ = io.reports.send(Report::Ask { ask, items }).await;
                }
                Out::Permission { request, reply } => self.permit(&request, &reply).await,
                Out::Busy => {
                    let _ = io.reports.send(Report::Busy).await;
                }
                // A locked turn is retried: its idle does not end the pass.
                Out::Idle if self.retry_at.is_none() => self.done = true,
                Out::Idle => {}
                Out::Locked => self.locked(io).await,
            }
        }
        if self.mapper.answered() && self.settle_at.is_none() && self.retry_at.is_none() {
            self.settle_at = Some(Instant::now() + SETTLE);
        }
    }

    /// Prompts the session; a stop meanwhile (the prompt may wait out retries) wins. `Some`
    /// when the pass ends here.
    async fn prompt(&mut self, io: &mut PassIo, text: &str) -> Option<Ending> {
        self.mapper.prompted();
        let reports = io.reports.clone();
        let prompted = tokio::select! {
            biased;
            why = next_stop(io) => Err(why),
            r = start::prompt(&self.client, &self.session, text, &self.request, &reports) => Ok(r),
        };
        match prompted {
            Ok(Ok(())) => None,
            Ok(Err(f)) => {
                self.failed(io, f).await;
                Some(Ending::Done)
            }
            Err(why) => Some(self.stop(io, why).await),
        }
    }

    async fn answer(&mut self, ask: AskId, reply: Reply) -> Result<(), String> {
        let (request, items) = self
            .asks
            .remove(&ask)
            .ok_or_else(|| "the planner is not waiting on this question".to_owned())?;
        let answers: Vec<Vec<String>> = match &reply {
            Reply::Answers(answers) => answers.iter().map(answer_parts).collect(),
            Reply::Dismiss => vec![vec![DECLINED.to_owned()]; items.max(1)],
        };
        let Some(seg) = segment(&request) else {
            return Err("the question's id is not OpenCode's".into());
        };
        let path = format!("/question/{seg}/reply");
        match self.client.post(&path, &json!({ "answers": answers })).await {
            Ok(r) if r.ok() => Ok(()),
            Ok(r) if r.status == 404 => Err("the planner is no longer waiting on this question".into()),
            Ok(r) => Err(format!("OpenCode did not take the answer: {}", r.message())),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn permit(&mut self, request: &str, reply: &Value) {
        let Some(seg) = segment(request) else {
            return;
        };
        let path = format!("/permission/{seg}/reply");
        match self.client.post(&path, reply).await {
            Ok(r) if r.ok() => {}
            Ok(r) => tracing::warn!("OpenCode did not take the permission reply: {}", r.message()),
            Err(e) => tracing::warn!("cannot answer OpenCode's permission request: {e}"),
        }
    }

    /// A time limit reads the messages first (a completed answer is kept); then the abort
    /// and the group.
    async fn stop(&mut self, io: &PassIo, why: StopWhy) -> Ending {
        if matches!(why, StopWhy::TimedOut(_)) {
            self.catch_up(io).await;
            if self.mapper.answered() {
                return Ending::Done;
            }
        }
        if let Some(seg) = segment(&self.session) {
            let (path, body) = (format!("/session/{seg}/abort"), json!({}));
            let abort = self.client.post(&path, &body);
            if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(3), abort).await {
                tracing::debug!("abort: {e}");
            }
        }
        Ending::Stopped(why)
    }

    /// The turn failed on a locked database: retried, or the run's error. A second error of
    /// the same failure (while the retry waits) changes nothing.
    async fn locked(&mut self, io: &PassIo) {
        if self.retry_at.is_some() {
            return;
        }
        if self.lock_retries >= start::RETRIES {
            let outs = self.mapper.fail(
                ErrorKind::Unknown,
                "OpenCode's database stayed locked (another OpenCode run holds it); planning gave up.",
            );
            self.handle_events(io, outs).await;
            self.done = true;
            return;
        }
        self.lock_retries += 1;
        let wait = start::backoff(self.lock_retries).max(LOCK_SETTLE);
        let note = format!(
            "OpenCode's database is locked (another OpenCode run holds it); retrying in {} s ({} of {}).",
            wait.as_secs(),
            self.lock_retries,
            start::RETRIES
        );
        tracing::warn!("{note}");
        let outs = self.mapper.note(&note);
        self.handle_events(io, outs).await;
        self.retry_at = Some(Instant::now() + wait);
        self.settle_at = None;
    }

    async fn retry(&mut self, io: &mut PassIo) -> Option<Ending> {
        self.retry_at = None;
        // A turn that started holds the prompt already: it is told to go on.
        let text = if self.mapper.started() {
            CONTINUE.to_owned()
        } else {
            self.request.prompt.clone()
        };
        self.prompt(io, &text).await
    }

    async fn failed(&mut self, io: &PassIo, f: StartFailure) {
        self.session_not_found |= f.session_not_found;
        let outs = self.mapper.fail(f.kind, &f.message);
        self.handle_events(io, outs).await;
    }

    async fn handle_events(&mut self, io: &PassIo, outs: Vec<Out>) {
        send_outs(io, outs).await;
    }

    /// The stream ended or went silent: the API takes over.
    async fn cut(&mut self, io: &PassIo, how: &str) {
        self.events = None;
        tracing::warn!("OpenCode's event stream {how}; following the session through its API");
        let outs = self.mapper.note(&format!(
            "OpenCode's event stream {how}; planwire follows the session through the server's API."
        ));
        self.handle_events(io, outs).await;
        self.poll_at = Some(Instant::now());
    }

    /// One round on the API while the stream is cut: subscribe again if the server lets us,
    /// then what the stream may have missed (messages, pending questions and permissions),
    /// and whether the turn is over.
    async fn poll(&mut self, io: &PassIo) {
        self.poll_at = None;
        if let Ok(stream) = self.client.events().await {
            self.events = Some(stream);
            self.last_event = Instant::now();
        }
        let busy = match self.client.get("/session/status").await {
            Ok(r) if r.ok() => {
                self.poll_failures = 0;
                let status = r
                    .body
                    .pointer(&format!("/{}/type", self.session))
                    .and_then(Value::as_str);
                matches!(status, Some("busy" | "retry"))
            }
            _ => {
                self.poll_failures += 1;
                if self.poll_failures >= POLL_FAILURES {
                    let outs = self
                        .mapper
                        .fail(ErrorKind::Network, "OpenCode's server stopped answering.");
                    self.handle_events(io, outs).await;
                    self.done = true;
                } else {
                    self.poll_at = Some(Instant::now() + POLL);
                }
                return;
            }
        };
        self.catch_up(io).await;
        for (path, kind) in [("/question", "question.asked"), ("/permission", "permission.asked")] {
            if let Ok(r) = self.client.get(path).await {
                for request in r.body.as_array().into_iter().flatten() {
                    let outs = self.mapper.on_pending(kind, request);
                    self.handle(io, outs).await;
                }
            }
        }
        if busy {
            let _ = io.reports.send(Report::Busy).await;
            self.idle_polls = 0;
        } else if self.retry_at.is_none() {
            self.idle_polls += 1;
            if self.mapper.produced() || self.idle_polls >= IDLE_POLLS {
                self.done = true;
            }
        }
        if self.events.is_none() && !self.done {
            self.poll_at = Some(Instant::now() + POLL);
        }
    }

    /// Adds what the stream missed of the session's messages.
    async fn catch_up(&mut self, io: &PassIo) {
        let Some(seg) = segment(&self.session) else {
            return;
        };
        match self.client.get(&format!("/session/{seg}/message")).await {
            Ok(r) if r.ok() => {
                let outs = self.mapper.reconcile(&r.body);
                self.handle_events(io, outs).await;
            }
            Ok(r) => tracing::warn!("cannot read the session's messages: {}", r.message()),
            Err(e) => tracing::warn!("cannot read the session's messages: {e}"),
        }
    }
}

async fn recv(events: &mut Option<EventStream>) -> Option<Option<String>> {
    match events {
        Some(stream) => stream.rx.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

//! The driver of a planner whose channel is lines on stdout: Claude Code's stream-json, with
//! its control protocol on stdin, and the `script` planner's replays.
//!
//! Each stdout line goes through the adapter's [`LineParser`]; its events, live deltas and
//! control requests become [`Report`]s. In the bidirectional (SDK) mode the CLI asks before it
//! uses a tool (`control_request` / `can_use_tool`) and waits on stdin:
//! - AskUserQuestion becomes a [`Report::Ask`], answered when the person replies;
//! - ExitPlanMode is never approved (planning never leaves plan mode): its plan is reported as a
//!   plan candidate and the agent is asked for the `<planwire-plan>` answer;
//! - any other tool that asks (one that writes or executes) is denied.
//!
//! stdin stays open for answers until the CLI's final `result` line, then it is closed so the
//! CLI exits.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

use super::claude::{self, ControlRequest};
use super::driver::{answer_pairs, AskId, Command, Driver, Exit, PassEnd, PassIo, Reply, Report, StopWhy, DECLINED};
use super::LineParser;
use crate::supervisor::{OutputLine, Supervised};

const EXIT_PLAN_DENIED: &str = "planwire keeps this session in read-only plan mode, so the plan is not approved \
here. Give your final answer now: a short update, then the complete plan as JSON inside \
<planwire-plan>…</planwire-plan> with the keys title, description, acceptanceCriteria, openQuestions and dependencies.";

/// How long lines already written are still read after the process group is gone.
const DRAIN: Duration = Duration::from_secs(2);

pub struct LinesDriver {
    pub parser: Box<dyn LineParser>,
    /// Written to stdin first.
    pub opening: Option<String>,
    /// The CLI talks on stdin (Claude's control protocol): stdin stays open for answers until
    /// its final line. Otherwise stdin is closed once the opening is written (an open pipe
    /// makes the CLIs wait forever).
    pub interactive: bool,
}

impl Driver for LinesDriver {
    fn drive(self: Box<Self>, child: Supervised, io: PassIo) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(self.run(child, io))
    }
}

/// The state of one pass's stdin conversation.
struct Stdin {
    pipe: Option<ChildStdin>,
    /// Questions the CLI waits on, by ask id.
    asks: HashMap<AskId, ControlRequest>,
    next_ask: AskId,
}

impl Stdin {
    async fn write(&mut self, line: String) -> Result<(), String> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Err("the planner's stdin is closed".into());
        };
        let ok = pipe.write_all(format!("{line}\n").as_bytes()).await.is_ok() && pipe.flush().await.is_ok();
        if ok {
            Ok(())
        } else {
            Err("the planner closed its stdin".into())
        }
    }
}

impl LinesDriver {
    async fn run(mut self, mut child: Supervised, mut io: PassIo) {
        let mut stdin = Stdin {
            pipe: None,
            asks: HashMap::new(),
            next_ask: 1,
        };
        if let (Some(text), Some(mut pipe)) = (self.opening.take(), child.stdin.take()) {
            if self.interactive {
                // The opening lines are small: written here, the pipe stays for answers.
                let _ = pipe.write_all(text.as_bytes()).await;
                let _ = pipe.flush().await;
                stdin.pipe = Some(pipe);
            } else {
                tokio::spawn(async move {
                    let _ = pipe.write_all(text.as_bytes()).await;
                    let _ = pipe.shutdown().await;
                });
            }
        }
        let mut output = std::mem::replace(&mut child.output, mpsc::channel(1).1);
        let mut eof = false;
        let exit = loop {
            tokio::select! {
                biased;
                cmd = io.commands.recv() => match cmd {
                    Some(Command::Answer { ask, reply, done }) => {
                        let _ = done.send(self.answer(&mut stdin, ask, reply).await);
                    }
                    Some(Command::Stop(why)) => break Exit::from_stop(why, child.stop(io.grace).await),
                    // The run is gone: nothing may outlive it.
                    None => break Exit::from_stop(StopWhy::Stopped, child.stop(io.grace).await),
                },
                line = output.recv(), if !eof => match line {
                    Some(line) => self.on_line(line, &mut stdin, &io).await,
                    None => eof = true,
                },
                // The leader's exit ends the pass even if a leftover grandchild holds stdout open.
                status = child.wait() => {
                    child.reap_group().await;
                    break Exit::Exited(status.ok());
                }
            }
        };
        stdin.pipe = None;
        let stderr_tail = child.stderr_tail().await;
        // Lines already written before the end are kept too: the group is gone, so the pipe
        // reaches its end at once.
        while let Ok(Some(line)) = tokio::time::timeout(DRAIN, output.recv()).await {
            self.on_line(line, &mut stdin, &io).await;
        }
        let events = self.parser.finish();
        if !events.is_empty() {
            let _ = io.reports.send(Report::Events(events)).await;
        }
        let p = &self.parser;
        let end = PassEnd {
            exit,
            final_text: p.final_text(),
            all_text: p.all_text(),
            text_dropped: p.text_dropped(),
            session_id: p.session_id(),
            error_message: p.error_message(),
            missing_answer: p.explain_missing_answer(&stderr_tail),
            session_not_found: matches!(exit, Exit::Exited(_)) && p.session_not_found(&stderr_tail),
            stderr_tail,
        };
        let _ = io.reports.send(Report::End(end)).await;
    }

    async fn on_line(&mut self, line: OutputLine, stdin: &mut Stdin, io: &PassIo) {
        let events = match line {
            OutputLine::Line(text) => self.parser.parse_line(&text),
            OutputLine::Truncated { head, len } => vec![super::truncated_line_event(&head, len)],
        };
        for (agent, kind, text) in self.parser.take_deltas() {
            let _ = io.reports.send(Report::Delta { agent, kind, text }).await;
        }
        if !events.is_empty() {
            let _ = io.reports.send(Report::Events(events)).await;
        }
        for request in self.parser.take_control_requests() {
            self.on_control_request(request, stdin, io).await;
        }
        if self.parser.saw_result() && stdin.pipe.is_some() {
            // Claude's stream-json input ends after the final result: close it so it exits.
            stdin.pipe = None;
        }
    }

    async fn on_control_request(&mut self, req: ControlRequest, stdin: &mut Stdin, io: &PassIo) {
        let line = if req.subtype != "can_use_tool" {
            claude::control_error(&req.request_id, "planwire does not support this request")
        } else {
            match req.tool_name.as_str() {
                "AskUserQuestion" => match claude::question_items(&req.input) {
                    Some(items) => {
                        let ask = stdin.next_ask;
                        stdin.next_ask += 1;
                        stdin.asks.insert(ask, req);
                        let _ = io.reports.send(Report::Ask { ask, items }).await;
                        return;
                    }
                    None => claude::deny(&req.request_id, "planwire could not read these questions."),
                },
                "ExitPlanMode" => {
                    let plan = req.input.get("plan").and_then(|p| p.as_str()).unwrap_or_default();
                    if !plan.trim().is_empty() {
                        let _ = io.reports.send(Report::PlanCandidate(plan.to_owned())).await;
                    }
                    claude::deny(&req.request_id, EXIT_PLAN_DENIED)
                }
                tool => claude::deny(
                    &req.request_id,
                    &format!("planwire plans in read-only mode: {tool} is not allowed here. Read and search only."),
                ),
            }
        };
        if let Err(e) = stdin.write(line).await {
            tracing::warn!("cannot answer the planner's control request: {e}");
        }
    }

    async fn answer(&mut self, stdin: &mut Stdin, ask: AskId, reply: Reply) -> Result<(), String> {
        let req = stdin
            .asks
            .remove(&ask)
            .ok_or_else(|| "the planner is not waiting on this question".to_owned())?;
        let line = match reply {
            Reply::Answers(answers) => {
                let items = claude::question_items(&req.input).unwrap_or_default();
                claude::answer_questions(&req.request_id, &req.input, &answer_pairs(&items, &answers))
            }
            Reply::Dismiss => claude::deny(&req.request_id, DECLINED),
        };
        stdin.write(line).await
    }
}

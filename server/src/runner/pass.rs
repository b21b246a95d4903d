//! One pass: one planner process, from spawn to exit, stop or timeout.

use std::process::ExitStatus;
use std::time::Duration;

use planwire_protocol::{EventBody, ProjectLink, SubagentPhase};
use tokio::sync::{mpsc, oneshot};

use super::outcome::How;
use super::{cached_version, Control, Driver, FLUSH_AGE, FLUSH_AT, FLUSH_EVERY};
use crate::planners::initiative::selection_prompt;
use crate::planners::{self, LaunchOptions, LaunchRequest, ParsedEvent};
use crate::store::runs;
use crate::supervisor::{self, SpawnSpec, Supervised};

/// What one pass runs.
pub(crate) struct PassSpec<'a> {
    pub root: &'a str,
    pub prompt: std::borrow::Cow<'a, str>,
    /// Continue this provider session.
    pub resume: Option<&'a str>,
    /// The agent-run label of a pass that is one of several ("Outline", "Linked research: api").
    pub label: Option<String>,
    /// Its session becomes the ticket's (false for research in other repositories).
    pub sets_session: bool,
}

impl<'a> PassSpec<'a> {
    /// The ticket's own planning pass.
    pub fn main(root: &'a str, prompt: &'a str, resume: Option<&'a str>) -> Self {
        PassSpec {
            root,
            prompt: prompt.into(),
            resume,
            label: None,
            sets_session: true,
        }
    }

    /// Which linked projects to research, decided in the project's own root.
    pub fn selection(root: &'a str, task: &str, links: &[ProjectLink]) -> Self {
        PassSpec {
            root,
            prompt: selection_prompt(task, links).into(),
            resume: None,
            label: Some("Linked research selection".into()),
            sets_session: false,
        }
    }
}

impl Driver {
    /// Starts a pass's process and resets the pass's state. The first pass marks the run
    /// started; later ones record their process group, so recovery finds whichever runs.
    pub(super) async fn spawn_pass(&mut self, pass: PassSpec<'_>) -> Result<Supervised, String> {
        if let Some(failure) = &self.storage_failure {
            return Err(failure.message.clone());
        }
        let launch = planners::launch_with(
            self.tool,
            &LaunchRequest {
                prompt: &pass.prompt,
                model: self.model.as_deref(),
                resume: pass.resume,
            },
            &LaunchOptions {
                variant: self.variant.as_deref(),
                title: Some(&self.title),
            },
        );
        let spawned = supervisor::spawn(SpawnSpec {
            program: self.program.clone(),
            args: launch.args,
            cwd: pass.root.into(),
            env: launch.env,
            stdin_pipe: launch.stdin.is_some(),
        })
        .await;
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let hint = self.tool.install_hint();
                return Err(format!("cannot start {}: {e}. {hint}", self.program.display()));
            }
        };
        self.stdin = None;
        if let (Some(text), Some(mut pipe)) = (launch.stdin, child.stdin.take()) {
            use tokio::io::AsyncWriteExt;
            if launch.keep_stdin_open {
                // The opening lines are small: written here, the pipe stays for answers.
                let _ = pipe.write_all(text.as_bytes()).await;
                let _ = pipe.flush().await;
                self.stdin = Some(pipe);
            } else {
                // Write the prompt and close stdin: an open pipe makes the CLIs wait forever.
                tokio::spawn(async move {
                    let _ = pipe.write_all(text.as_bytes()).await;
                    let _ = pipe.shutdown().await;
                });
            }
        }
        let info = runs::ChildInfo {
            pid: child.pid,
            start: child.start_time,
            pgid: child.pgid,
            argv: std::iter::once(self.program.display().to_string())
                .chain(launch.recorded_args)
                .collect(),
            cli_version: cached_version(&self.s, self.tool),
        };
        let (run, first) = (self.run_id, self.passes == 0);
        let recorded = self
            .s
            .store
            .write(move |c| {
                if first {
                    runs::mark_started(c, run, &info)
                } else {
                    runs::set_child(c, run, &info)
                }
            })
            .await;
        if let Err(e) = recorded {
            tracing::error!("run {run}: cannot record its process: {e}");
        }
        self.passes += 1;
        self.parser = self.tool.parser();
        self.live.clear();
        self.plan_candidate = None;
        self.sets_session = pass.sets_session;
        if let Some(label) = pass.label {
            let key = format!("pass:{}", self.passes);
            self.pass_agent = Some((key.clone(), label.clone()));
            let body = EventBody::Subagent {
                phase: SubagentPhase::Start,
                label,
                status: None,
            };
            self.push(ParsedEvent { agent: Some(key), body }).await;
        }
        Ok(child)
    }

    /// Closes the current pass's agent run with `status`.
    pub(super) async fn end_pass(&mut self, status: &str) {
        if let Some((key, label)) = self.pass_agent.clone() {
            let body = EventBody::Subagent {
                phase: SubagentPhase::End,
                label,
                status: Some(status.to_owned()),
            };
            self.push(ParsedEvent { agent: Some(key), body }).await;
            self.pass_agent = None;
            self.flush().await;
        }
    }

    /// Drives one process until it exits, is stopped, or times out; every line it printed is
    /// parsed, stored and notified. Returns how it ended and its stderr tail.
    pub(super) async fn run_pass(&mut self, mut child: Supervised, ctl: &mut Control) -> (How, String) {
        let config = self.s.config.clone();
        let hard = tokio::time::sleep(config.hard_timeout);
        let idle = tokio::time::sleep(config.idle_timeout);
        let asked = tokio::time::sleep(config.question_timeout);
        // Armed when the batch goes from empty to not empty.
        let aged = tokio::time::sleep(FLUSH_AGE);
        tokio::pin!(hard, idle, asked, aged);
        let mut aging = false;
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut output = std::mem::replace(&mut child.output, mpsc::channel(1).1);
        let mut eof = false;
        // While the person is asked, the idle and hard limits pause and the question's own runs.
        let mut waiting_since: Option<tokio::time::Instant> = None;
        enum Step {
            Stop(oneshot::Sender<()>),
            Timeout(&'static str),
            Exited(Option<ExitStatus>),
            Storage,
        }
        let step = loop {
            if self.storage_failure.is_some() {
                break Step::Storage;
            }
            let waiting = !self.live.is_empty();
            match (waiting, waiting_since) {
                (true, None) => {
                    let now = tokio::time::Instant::now();
                    waiting_since = Some(now);
                    asked.as_mut().reset(now + config.question_timeout);
                }
                (false, Some(since)) => {
                    let now = tokio::time::Instant::now();
                    let hard_at = hard.deadline() + (now - since);
                    hard.as_mut().reset(hard_at);
                    idle.as_mut().reset(now + config.idle_timeout);
                    waiting_since = None;
                }
                _ => {}
            }
            tokio::select! {
                biased;
                Some(reply) = ctl.stop_rx.recv() => break Step::Stop(reply),
                _ = &mut hard, if !waiting => break Step::Timeout("hard_timeout"),
                _ = &mut idle, if !waiting => break Step::Timeout("idle_timeout"),
                _ = &mut asked, if waiting => break Step::Timeout("question_timeout"),
                Some(answer) = ctl.answer_rx.recv() => self.on_answer(answer).await,
                line = output.recv(), if !eof => match line {
                    Some(line) => {
                        let now = tokio::time::Instant::now();
                        idle.as_mut().reset(now + config.idle_timeout);
                        let was_empty = self.pending.is_empty();
                        self.on_line(line).await;
                        if self.pending.len() >= FLUSH_AT {
                            self.flush().await;
                            aging = false;
                        } else if was_empty && !self.pending.is_empty() {
                            aged.as_mut().reset(now + FLUSH_AGE);
                            aging = true;
                        }
                    }
                    None => eof = true,
                },
                // The leader's exit ends the pass even if a leftover grandchild holds stdout open.
                status = child.wait() => break Step::Exited(status.ok()),
                _ = &mut aged, if aging => {
                    aging = false;
                    self.flush().await;
                }
                _ = tick.tick() => self.flush().await,
            }
        };
        let how = match step {
            Step::Stop(reply) => {
                ctl.waiters.push(reply);
                How::Stopped(child.stop(config.stop_grace).await)
            }
            Step::Timeout(code) => How::TimedOut(code, child.stop(config.stop_grace).await),
            Step::Storage => How::StorageFailed(child.stop(config.stop_grace).await),
            Step::Exited(status) => {
                child.reap_group().await;
                How::Exited(status)
            }
        };
        let tail = child.stderr_tail().await;
        // Lines already written before a stop or timeout are kept too: the group is gone,
        // so the pipe reaches its end at once.
        while let Ok(Some(line)) = tokio::time::timeout(Duration::from_secs(2), output.recv()).await {
            self.on_line(line).await;
        }
        for ev in self.parser.finish() {
            self.push(ev).await;
        }
        self.stdin = None;
        self.flush().await;
        (how, tail)
    }
}

impl How {
    /// The pass ended by itself with exit code 0.
    pub(super) fn succeeded(&self) -> bool {
        matches!(self, How::Exited(Some(s)) if s.success())
    }

    /// The agent-run status of a pass that ended this way.
    pub(super) fn agent_status(&self) -> &'static str {
        match self {
            How::Stopped(_) => "cancelled",
            _ if self.succeeded() => "completed",
            _ => "failed",
        }
    }
}

//! Passes: each one planner process (or planner server), driven by its adapter's driver task
//! (`planners/driver.rs`). A run starts its passes one after another, or several at once
//! (linked research), and [`Run::next_end`] serves them all: it numbers and batches their
//! events, coalesces their live deltas, keeps the time limits, carries stops and answers down
//! to them, and returns each pass's end.

use planwire_protocol::{EventBody, ProjectLink, SubagentPhase};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{cached_version, Run, FLUSH_AGE, FLUSH_AT};
use crate::planners::driver::{Command, PassEnd, PassIo, PassRequest, Report, Reporter, StopWhy};
use crate::planners::initiative::selection_prompt;
use crate::planners::prompt::PromptSettings;
use crate::planners::{self, instructions, ParsedEvent};
use crate::store::runs;
use crate::supervisor;

pub(crate) type PassId = u32;

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

    /// Which linked projects to research, decided in the project's own directory.
    pub fn selection(root: &'a str, task: &str, links: &[ProjectLink], settings: &PromptSettings) -> Self {
        PassSpec {
            root,
            prompt: selection_prompt(task, links, settings).into(),
            resume: None,
            label: Some("Linked research selection".into()),
            sets_session: false,
        }
    }
}

/// A pass that is running.
pub(super) struct LivePass {
    commands: mpsc::UnboundedSender<Command>,
    /// Its OS sandbox, scratch directory and work-tree snapshot, until it has ended.
    sandbox: crate::sandbox::Pass,
    /// The agent-run key and label of a pass that is one of several.
    pub agent: Option<(String, String)>,
    pub sets_session: bool,
    plan_candidate: Option<String>,
}

/// A pass that has ended.
pub(crate) struct Ended {
    pub end: PassEnd,
    /// A plan the agent offered for approval during the pass.
    pub plan_candidate: Option<String>,
    /// The pass's agent-run key and label, when it is one of several.
    pub agent: Option<(String, String)>,
}

impl Ended {
    /// The pass ended by itself with exit code 0.
    pub fn succeeded(&self) -> bool {
        matches!(self.end.exit, planners::driver::Exit::Exited(Some(s)) if s.success())
    }

    pub fn stopped(&self) -> bool {
        matches!(self.end.exit, planners::driver::Exit::Stopped(_))
    }

    /// The agent-run status of a pass that ended this way.
    pub fn agent_status(&self) -> &'static str {
        if self.stopped() {
            "cancelled"
        } else if self.succeeded() {
            "completed"
        } else {
            "failed"
        }
    }
}

/// The run's time limits. While the person is asked, the idle and hard limits pause and the
/// question's own limit runs.
pub(super) struct Limits {
    hard_at: Instant,
    idle_at: Instant,
    asked_at: Instant,
    waiting_since: Option<Instant>,
}

impl Limits {
    pub fn new(config: &crate::config::Config) -> Limits {
        let now = Instant::now();
        Limits {
            hard_at: now + config.hard_timeout,
            idle_at: now + config.idle_timeout,
            asked_at: now + config.question_timeout,
            waiting_since: None,
        }
    }
}

impl Run {
    /// Starts a pass: prepares it with its adapter, spawns it under the supervisor, records
    /// its process (the first pass marks the run started; later ones record their group, so
    /// recovery finds whichever runs), and starts its driver.
    pub(super) async fn start_pass(&mut self, pass: PassSpec<'_>) -> Result<PassId, String> {
        if let Some(failure) = &self.storage_failure {
            return Err(failure.message.clone());
        }
        // The OS sandbox, scratch TMPDIR and work-tree snapshot of the pass.
        let sandbox = self.sandbox_pass(pass.root).await?;
        let root = std::path::Path::new(pass.root);
        // The project's CLAUDE.md / AGENTS.md, for the CLIs whose project config is off.
        let prompt = instructions::add(self.tool, root, &pass.prompt, pass.resume.is_some());
        let request = PassRequest {
            prompt: prompt.into_owned(),
            model: self.model.clone(),
            variant: self.variant.clone(),
            resume: pass.resume.map(str::to_owned),
            title: Some(self.title.clone()),
            root: pass.root.into(),
            read_roots: vec![pass.root.into()],
            outer_sandbox: super::sandboxed::enforced(&sandbox),
        };
        let mut prepared = planners::prepare(self.tool, &self.program, &request, &self.s.config);
        prepared.spawn.env.extend(sandbox.env.iter().cloned());
        prepared.spawn.sandbox = sandbox.restriction.clone();
        let child = match supervisor::spawn(prepared.spawn).await {
            Ok(c) => c,
            Err(e) => {
                let hint = self.tool.install_hint();
                return Err(format!("cannot start {}: {e}. {hint}", self.program.display()));
            }
        };
        let info = runs::ChildInfo {
            pid: child.pid,
            start: child.start_time,
            pgid: child.pgid,
            argv: std::iter::once(self.program.display().to_string())
                .chain(prepared.recorded_args)
                .collect(),
            cli_version: cached_version(&self.s, self.tool),
        };
        let (run, first) = (self.run_id, self.passes_started == 0);
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
        self.passes_started += 1;
        let id = self.passes_started;
        let agent = pass.label.map(|label| (format!("pass:{id}"), label));
        let (commands, commands_rx) = mpsc::unbounded_channel();
        self.passes.insert(
            id,
            LivePass {
                commands,
                sandbox,
                agent: agent.clone(),
                sets_session: pass.sets_session,
                plan_candidate: None,
            },
        );
        if let Some((key, label)) = agent {
            let body = EventBody::Subagent {
                phase: SubagentPhase::Start,
                label,
                status: None,
            };
            self.record(id, ParsedEvent { agent: Some(key), body }).await;
        }
        let io = PassIo {
            reports: Reporter::new(self.reports_tx.clone(), id),
            commands: commands_rx,
            grace: self.s.config.stop_grace,
        };
        tokio::spawn(prepared.driver.drive(child, io));
        if let Some(why) = self.stopping {
            // A stop came while this pass was being started.
            self.stop_pass(id, why);
        }
        Ok(id)
    }

    /// Runs one pass to its end.
    pub(super) async fn run_pass(&mut self, pass: PassSpec<'_>) -> Result<Ended, String> {
        let id = self.start_pass(pass).await?;
        Ok(self.wait(id).await)
    }

    /// Closes a pass's own agent run with `status`.
    pub(super) async fn end_pass(&mut self, ended: &Ended, status: &str) {
        if let Some((key, label)) = ended.agent.clone() {
            let body = EventBody::Subagent {
                phase: SubagentPhase::End,
                label,
                status: Some(status.to_owned()),
            };
            self.push(Some((key, None)), body).await;
            self.flush().await;
        }
    }

    fn stop_pass(&self, id: PassId, why: StopWhy) {
        if let Some(p) = self.passes.get(&id) {
            let _ = p.commands.send(Command::Stop(why));
        }
    }

    /// Stops every live pass; no new pass starts afterwards.
    pub(super) fn stop_all(&mut self, why: StopWhy) {
        if self.stopping.is_none() {
            self.stopping = Some(why);
        }
        for id in self.passes.keys() {
            self.stop_pass(*id, why);
        }
    }

    /// Serves every live pass until one ends, and returns it; `None` when none is live.
    pub(super) async fn next_end(&mut self) -> Option<(PassId, Ended)> {
        let config = self.s.config.clone();
        loop {
            if self.passes.is_empty() {
                return None;
            }
            let waiting = !self.live.is_empty();
            self.pause_limits(waiting, &config);
            let armed = self.stopping.is_none();
            let flush_at = self.pending_since.map(|t| t + FLUSH_AGE);
            let delta_at = self.deltas.next_send();
            let l = &self.limits;
            let (hard_at, idle_at, asked_at) = (l.hard_at, l.idle_at, l.asked_at);
            tokio::select! {
                biased;
                Some(reply) = self.ctl.stop_rx.recv() => {
                    self.ctl.waiters.push(reply);
                    self.stop_all(StopWhy::Stopped);
                }
                _ = tokio::time::sleep_until(hard_at), if armed && !waiting => {
                    self.stop_all(StopWhy::TimedOut("hard_timeout"))
                }
                _ = tokio::time::sleep_until(idle_at), if armed && !waiting => {
                    self.stop_all(StopWhy::TimedOut("idle_timeout"))
                }
                _ = tokio::time::sleep_until(asked_at), if armed && waiting => {
                    self.stop_all(StopWhy::TimedOut("question_timeout"))
                }
                Some(answer) = self.ctl.answer_rx.recv() => self.on_answer(answer).await,
                Some((id, report)) = self.reports_rx.recv() => {
                    self.limits.idle_at = Instant::now() + config.idle_timeout;
                    if let Some(ended) = self.on_report(id, report).await {
                        return Some((id, ended));
                    }
                }
                _ = sleep_until_opt(flush_at), if flush_at.is_some() => self.flush().await,
                _ = sleep_until_opt(delta_at), if delta_at.is_some() => self.send_deltas().await,
            }
        }
    }

    fn pause_limits(&mut self, waiting: bool, config: &crate::config::Config) {
        let l = &mut self.limits;
        match (waiting, l.waiting_since) {
            (true, None) => {
                let now = Instant::now();
                l.waiting_since = Some(now);
                l.asked_at = now + config.question_timeout;
            }
            (false, Some(since)) => {
                let now = Instant::now();
                l.hard_at += now - since;
                l.idle_at = now + config.idle_timeout;
                l.waiting_since = None;
            }
            _ => {}
        }
    }

    async fn on_report(&mut self, id: PassId, report: Report) -> Option<Ended> {
        match report {
            Report::Events(events) => {
                self.first_output_ms.get_or_insert(self.elapsed_ms());
                for ev in events {
                    self.record(id, ev).await;
                }
                if self.pending.len() >= FLUSH_AT {
                    self.flush().await;
                }
            }
            Report::Delta { agent, kind, text } => {
                self.first_output_ms.get_or_insert(self.elapsed_ms());
                let key = self.agent_key(id, agent);
                let agent_run_id = match &key {
                    Some((key, parent)) => Some(self.agent_run(key, parent.as_deref(), None).await),
                    None => None,
                };
                self.on_delta(agent_run_id, kind, text).await;
            }
            Report::Ask { ask, items } => self.ask(id, ask, items).await,
            Report::PlanCandidate(plan) => self.keep_candidate(id, plan).await,
            Report::Busy => {}
            Report::End(end) => {
                let pass = self.passes.remove(&id)?;
                self.live.retain(|_, (p, _)| *p != id);
                self.flush().await;
                // The work tree must be as the pass found it.
                self.check_readonly(pass.sandbox).await;
                return Some(Ended {
                    end,
                    plan_candidate: pass.plan_candidate,
                    agent: pass.agent,
                });
            }
        }
        None
    }

    /// An event of pass `id`: its agent key is namespaced under the pass's own agent run when
    /// the pass is one of several.
    async fn record(&mut self, id: PassId, ev: ParsedEvent) {
        if let EventBody::Session { provider_session_id } = &ev.body {
            if self.passes.get(&id).is_some_and(|p| p.sets_session) {
                self.remember_session(provider_session_id).await;
            }
        }
        let key = self.agent_key(id, ev.agent);
        self.push(key, ev.body).await;
    }

    /// The agent-run key of an event of pass `id`, with the key of its parent agent run.
    fn agent_key(&self, id: PassId, agent: Option<String>) -> Option<(String, Option<String>)> {
        let pass_agent = self
            .passes
            .get(&id)
            .and_then(|p| p.agent.as_ref())
            .map(|(k, _)| k.clone());
        match (agent, pass_agent) {
            (None, None) => None,
            (None, Some(pass)) => Some((pass, None)),
            (Some(key), None) => Some((key, None)),
            (Some(key), Some(pass)) if key == pass => Some((key, None)),
            (Some(key), Some(pass)) => Some((format!("{pass}/{key}"), Some(pass))),
        }
    }

    /// Sends an answer to the pass waiting on it; `done` learns whether the planner took it.
    pub(super) fn deliver(
        &self,
        id: PassId,
        ask: planners::driver::AskId,
        reply: planners::driver::Reply,
    ) -> tokio::sync::oneshot::Receiver<Result<(), String>> {
        let (done, rx) = tokio::sync::oneshot::channel();
        match self.passes.get(&id) {
            Some(p) => {
                let _ = p.commands.send(Command::Answer { ask, reply, done });
            }
            None => {
                let _ = done.send(Err("the pass has ended".into()));
            }
        }
        rx
    }

    pub(super) fn set_candidate(&mut self, id: PassId, plan: String) {
        if let Some(p) = self.passes.get_mut(&id) {
            p.plan_candidate = Some(plan);
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

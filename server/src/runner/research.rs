//! A plan run, with linked research first when the project has linked repositories:
//! a selection pass in the project's root decides what to ask which linked project, one
//! research pass per selected project runs in that project's root — several at the same
//! time (`initializationOptions.researchConcurrency`, 3 by default), each in its own agent
//! run — and their findings and
//! contracts are embedded in the planning prompt. A research pass that fails is recorded as
//! failed and planning goes on without it; a stop stops them all.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use planwire_protocol::{ErrorKind, EventBody, ProjectLink};

use super::outcome::How;
use super::pass::{Ended, PassId, PassSpec};
use super::Run;
use crate::planners::initiative::{parse_research, parse_selection, research_context, research_prompt, Research};

pub(crate) struct PlanJob {
    pub prompt: String,
    pub resume: Option<String>,
    pub links: Vec<ProjectLink>,
}

impl Run {
    /// Serves the run's first pass (already started) and whatever follows it, then records
    /// how the run ended.
    pub(super) async fn run_plan(mut self, first: PassId, job: PlanJob) {
        let ended = self.wait(first).await;
        if job.links.is_empty() {
            return self.finish_plan(How::Ended(Box::new(ended))).await;
        }
        let context = match self.research(ended, &job.links).await {
            Ok(context) => context,
            Err(ended) => return self.finish_plan(How::Ended(Box::new(ended))).await,
        };
        let prompt = match context {
            Some(context) => format!("{}\n\n{context}", job.prompt),
            None => job.prompt,
        };
        let root = self.root.clone();
        match self
            .run_pass(PassSpec::main(&root, &prompt, job.resume.as_deref()))
            .await
        {
            Ok(ended) => self.finish_plan(How::Ended(Box::new(ended))).await,
            Err(message) => self.finish_plan(How::SpawnFailed(message)).await,
        }
    }

    /// After the selection pass has ended: one research pass per selected project. Returns
    /// the context for the planning prompt, or the pass whose stop stopped the run.
    pub(super) async fn research(&mut self, selection: Ended, links: &[ProjectLink]) -> Result<Option<String>, Ended> {
        self.end_pass(&selection, selection.agent_status()).await;
        if selection.stopped() {
            return Err(selection);
        }
        let requests = match selection.succeeded() {
            true => parse_selection(&selection.end.all_text, links),
            false => Err("the selection pass failed".to_owned()),
        };
        let requests = match requests {
            Ok(r) => r,
            Err(e) => {
                self.note_error(format!("Linked research was skipped: {e}.")).await;
                return Ok(None);
            }
        };
        let mut queue: VecDeque<(ProjectLink, String)> = VecDeque::new();
        for request in requests {
            let Some(link) = links.iter().find(|l| l.name == request.name) else {
                continue;
            };
            if !Path::new(&link.linked_root).is_dir() {
                let m = format!(
                    "Linked research: {} skipped: {} is not a directory.",
                    link.name, link.linked_root
                );
                self.note_error(m).await;
                continue;
            }
            queue.push_back((link.clone(), request.question));
        }
        let order: Vec<String> = queue.iter().map(|(l, _)| l.name.clone()).collect();
        let mut running: HashMap<PassId, String> = HashMap::new();
        let mut found: HashMap<String, Research> = HashMap::new();
        let mut stopped: Option<Ended> = None;
        loop {
            while running.len() < self.s.config.research_at_once && self.stopping.is_none() {
                let Some((link, question)) = queue.pop_front() else {
                    break;
                };
                let spec = PassSpec {
                    root: &link.linked_root,
                    prompt: research_prompt(&link.name, &link.role, &question, &self.settings).into(),
                    resume: None,
                    label: Some(format!("Linked research: {}", link.name)),
                    sets_session: false,
                };
                match self.start_pass(spec).await {
                    Ok(id) => {
                        running.insert(id, link.name.clone());
                    }
                    Err(m) => {
                        self.note_error(format!("Linked research: {} failed: {m}", link.name))
                            .await
                    }
                }
            }
            let Some((id, ended)) = self.next_end().await else {
                break;
            };
            let Some(name) = running.remove(&id) else {
                continue;
            };
            let result = ended.succeeded().then(|| parse_research(&ended.end.all_text)).flatten();
            let status = match (ended.stopped(), &result) {
                (true, _) => "cancelled",
                (_, Some(_)) => "completed",
                _ => "failed",
            };
            self.end_pass(&ended, status).await;
            match result {
                _ if ended.stopped() => stopped = Some(ended),
                Some(text) => {
                    found.insert(name, text);
                }
                None => {
                    let why = ended
                        .end
                        .error_message
                        .clone()
                        .unwrap_or_else(|| "no <planwire-research> answer".into());
                    self.note_error(format!("Linked research: {name} failed: {why}")).await;
                }
            }
        }
        if let Some(ended) = stopped {
            return Err(ended);
        }
        // The prompt lists findings in the order the selection asked for them.
        let results: Vec<(String, Research)> = order
            .into_iter()
            .filter_map(|n| found.remove(&n).map(|f| (n, f)))
            .collect();
        Ok(research_context(&results))
    }

    /// Serves the run's passes until pass `id` ends.
    pub(super) async fn wait(&mut self, id: PassId) -> Ended {
        loop {
            match self.next_end().await {
                Some((ended_id, ended)) if ended_id == id => return ended,
                Some(_) => continue,
                None => unreachable!("pass {id} is live"),
            }
        }
    }

    /// An error event in the run's transcript (the run goes on).
    pub(super) async fn note_error(&mut self, message: String) {
        let body = EventBody::Error {
            error_kind: ErrorKind::Unknown,
            message,
        };
        self.push(None, body).await;
        self.flush().await;
    }
}

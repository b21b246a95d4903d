//! A plan run, with linked research first when the project has linked repositories:
//! a selection pass in the project's root decides what to ask which linked project, one
//! research pass per selected project runs in that project's root, and their findings and
//! contracts are embedded in the planning prompt. A research pass that fails is recorded as
//! failed and planning goes on without it; a stop stops them all.

use std::path::Path;

use planwire_protocol::{ErrorKind, EventBody, ProjectLink};

use super::outcome::How;
use super::pass::PassSpec;
use super::{Control, Driver};
use crate::planners::initiative::{parse_research, parse_selection, research_context, research_prompt};
use crate::planners::ParsedEvent;
use crate::supervisor::Supervised;

pub(crate) struct PlanJob {
    pub prompt: String,
    pub resume: Option<String>,
    pub links: Vec<ProjectLink>,
}

impl Driver {
    pub(super) async fn run_plan(mut self, first: Supervised, mut ctl: Control, job: PlanJob) {
        if job.links.is_empty() {
            let (how, tail) = self.run_pass(first, &mut ctl).await;
            return self.finish_plan(how, &tail, ctl).await;
        }
        let context = match self.research(first, &mut ctl, &job.links).await {
            Ok(context) => context,
            Err((how, tail)) => return self.finish_plan(how, &tail, ctl).await,
        };
        let prompt = match context {
            Some(context) => format!("{}\n\n{context}", job.prompt),
            None => job.prompt,
        };
        let root = self.root.clone();
        match self
            .spawn_pass(PassSpec::main(&root, &prompt, job.resume.as_deref()))
            .await
        {
            Ok(child) => {
                let (how, tail) = self.run_pass(child, &mut ctl).await;
                self.finish_plan(how, &tail, ctl).await
            }
            Err(message) => self.finish_plan(How::SpawnFailed(message), "", ctl).await,
        }
    }

    /// Runs the (already started) selection pass, then one research pass per selected
    /// project. Returns the context for the planning prompt, or how the run was stopped.
    pub(super) async fn research(
        &mut self,
        selection: Supervised,
        ctl: &mut Control,
        links: &[ProjectLink],
    ) -> Result<Option<String>, (How, String)> {
        let (how, tail) = self.run_pass(selection, ctl).await;
        self.end_pass(how.agent_status()).await;
        if matches!(how, How::Stopped(_)) {
            return Err((how, tail));
        }
        let requests = match how.succeeded() {
            true => parse_selection(&self.parser.all_text(), links),
            false => Err("the selection pass failed".to_owned()),
        };
        let requests = match requests {
            Ok(r) => r,
            Err(e) => {
                self.note_error(format!("Linked research was skipped: {e}.")).await;
                return Ok(None);
            }
        };
        let mut results = Vec::new();
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
            let spec = PassSpec {
                root: &link.linked_root,
                prompt: research_prompt(&link.name, &link.role, &request.question).into(),
                resume: None,
                label: Some(format!("Linked research: {}", link.name)),
                sets_session: false,
            };
            let child = match self.spawn_pass(spec).await {
                Ok(c) => c,
                Err(m) => {
                    self.note_error(format!("Linked research: {} failed: {m}", link.name))
                        .await;
                    continue;
                }
            };
            let (how, tail) = self.run_pass(child, ctl).await;
            let found = if how.succeeded() {
                parse_research(&self.parser.all_text())
            } else {
                None
            };
            let status = match (&how, &found) {
                (How::Stopped(_), _) => "cancelled",
                (_, Some(_)) => "completed",
                _ => "failed",
            };
            self.end_pass(status).await;
            match (how, found) {
                (how @ How::Stopped(_), _) => return Err((how, tail)),
                (_, Some(found)) => results.push((link.name.clone(), found)),
                (_, None) => {
                    let why = self
                        .parser
                        .error_message()
                        .unwrap_or_else(|| "no <planwire-research> answer".into());
                    self.note_error(format!("Linked research: {} failed: {why}", link.name))
                        .await;
                }
            }
        }
        Ok(research_context(&results))
    }

    /// An error event in the run's transcript (the run goes on).
    pub(super) async fn note_error(&mut self, message: String) {
        let body = EventBody::Error {
            error_kind: ErrorKind::Unknown,
            message,
        };
        self.push(ParsedEvent::main(body)).await;
        self.flush().await;
    }
}

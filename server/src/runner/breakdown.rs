//! A breakdown: one run of kind `breakdown`, with no ticket of its own, that turns an
//! initiative into planned tickets with a dependency graph. Passes, each its own agent run:
//! (linked research), "Outline", at most one "Outline repair" in the same provider session
//! when the graph is invalid, then "Expansion" in the same session. The tickets are created
//! in one transaction at the end, so a stopped or failed breakdown creates none.

use std::collections::HashMap;
use std::sync::Arc;

use planwire_protocol::{BreakdownParams, ErrorKind, EventBody, Failure, RunId, RunStatus, TicketId};

use super::outcome::{decide, failed_ending, Facts, How};
use super::pass::{Ended as PassEnded, PassId, PassSpec};
use super::{close, notify_changed, notify_ticket, planner_program, store_error, Run, RunSpec};
use crate::context::Workdir;
use crate::handlers::create_ticket::{check_root, check_tool};
use crate::planners::initiative::{
    expansion_prompt, outline_prompt, parse_expansion, parse_outline, repair_prompt, validate_graph, OutlineTicket,
};
use crate::planners::prompt::PromptSettings;
use crate::session::Session;
use crate::store::tickets::NewTicket;
use crate::store::{links, runs, tickets, transcript};
use crate::transport::ResponseError;

/// Starts a breakdown of `p.root` with the project's prompt `settings` (the handler reads them).
pub(crate) async fn start_breakdown(
    s: &Arc<Session>,
    p: BreakdownParams,
    settings: PromptSettings,
) -> Result<RunId, ResponseError> {
    let root = check_root(&p.root)?;
    let tool = check_tool(p.tool.as_deref().unwrap_or(&s.config.default_tool))?;
    let program = planner_program(s, tool, p.model.as_deref())?;
    let spec = RunSpec {
        tool,
        model: p.model.clone(),
        variant: p.variant.clone(),
        prompt: String::new(),
        resume: None,
        retry_of: None,
        fresh_reason: None,
        fresh_prompt: None,
        supersede_questions: false,
        workdir: Workdir::root(&root),
        settings,
    };
    let (owner, r, m, v, initiative) = (
        s.owner,
        root.clone(),
        p.model.clone(),
        p.variant.clone(),
        p.description.clone(),
    );
    let (run_id, links) = s
        .store
        .write(move |c| {
            let run = runs::create_breakdown(c, &r, &initiative, tool.name(), m.as_deref(), v.as_deref(), owner)?;
            Ok((run, links::list(c, &r)?))
        })
        .await
        .map_err(store_error)?;
    let mut run = Run::new(s, run_id, None, &root, "Breakdown", &spec, program);
    let outline = outline_prompt(&p.description, None, &spec.settings);
    let first = if links.is_empty() {
        PassSpec {
            root: &root,
            prompt: outline.into(),
            resume: None,
            label: Some("Outline".into()),
            sets_session: false,
        }
    } else {
        PassSpec::selection(&root, &p.description, &links, &spec.settings)
    };
    let first = run.begin(first).await?;
    let job = Job {
        description: p.description,
        has_links: !links.is_empty(),
        links,
    };
    tokio::spawn(run.run_breakdown(first, job));
    Ok(run_id)
}

struct Job {
    description: String,
    has_links: bool,
    links: Vec<planwire_protocol::ProjectLink>,
}

/// How a breakdown ends.
enum Ended {
    Created(Vec<TicketId>),
    Stopped,
    Failed(Failure),
}

impl Run {
    async fn run_breakdown(mut self, first: PassId, job: Job) {
        let ended = self.breakdown(first, &job).await;
        self.finish_breakdown(ended).await;
    }

    async fn breakdown(&mut self, first: PassId, job: &Job) -> Ended {
        let root = self.root.clone();
        let first = self.wait(first).await;
        let outline = if job.has_links {
            let context = match self.research(first, &job.links).await {
                Ok(c) => c,
                Err(ended) => return self.pass_failed(ended).await,
            };
            let prompt = outline_prompt(&job.description, context.as_deref(), &self.settings);
            let spec = PassSpec {
                root: &root,
                prompt: prompt.into(),
                resume: None,
                label: Some("Outline".into()),
                sets_session: false,
            };
            match self.run_pass(spec).await {
                Ok(ended) => ended,
                Err(m) => return spawn_failed(m),
            }
        } else {
            first
        };
        self.end_pass(&outline, outline.agent_status()).await;
        if !outline.succeeded() {
            return self.pass_failed(outline).await;
        }
        let mut session = outline.end.session_id.clone();
        let mut parsed = parse_outline(&outline.end.all_text).and_then(|o| validate_graph(&o).map(|_| o));
        if let Err(problem) = &parsed {
            // One follow-up in the same session, naming the problem.
            let spec = PassSpec {
                root: &root,
                prompt: repair_prompt(problem, &self.settings).into(),
                resume: session.as_deref(),
                label: Some("Outline repair".into()),
                sets_session: false,
            };
            let repaired = match self.run_pass(spec).await {
                Ok(ended) => ended,
                Err(m) => return spawn_failed(m),
            };
            self.end_pass(&repaired, repaired.agent_status()).await;
            if !repaired.succeeded() {
                return self.pass_failed(repaired).await;
            }
            session = repaired.end.session_id.clone().or(session);
            parsed = parse_outline(&repaired.end.all_text).and_then(|o| validate_graph(&o).map(|_| o));
        }
        let outline = match parsed {
            Ok(o) => o,
            Err(problem) => {
                let message = format!("The outline is not a valid set of tickets: {problem}.");
                return Ended::Failed(Failure {
                    code: "invalid_outline".into(),
                    message,
                });
            }
        };
        let spec = PassSpec {
            root: &root,
            prompt: expansion_prompt(&self.settings).into(),
            resume: session.as_deref(),
            label: Some("Expansion".into()),
            sets_session: false,
        };
        let expansion = match self.run_pass(spec).await {
            Ok(ended) => ended,
            Err(m) => return spawn_failed(m),
        };
        self.end_pass(&expansion, expansion.agent_status()).await;
        if !expansion.succeeded() {
            return self.pass_failed(expansion).await;
        }
        match parse_expansion(&expansion.end.all_text, &outline) {
            Ok(expanded) => self.create_tickets(&outline, expanded).await,
            Err(problem) => {
                let message = format!("The expansion does not match the outline: {problem}.");
                Ended::Failed(Failure {
                    code: "invalid_expansion".into(),
                    message,
                })
            }
        }
    }

    /// How a pass that did not succeed ends the breakdown.
    async fn pass_failed(&mut self, ended: PassEnded) -> Ended {
        if ended.stopped() {
            return Ended::Stopped;
        }
        let facts = Facts {
            stop_requested: false,
            ticket_title: "",
            stored_plan: None,
        };
        let (ending, _) = decide(How::Ended(Box::new(ended)), &facts);
        match ending.status {
            RunStatus::Cancelled => Ended::Stopped,
            _ => Ended::Failed(ending.failure.unwrap_or(Failure {
                code: "planner_error".into(),
                message: "the planner failed".into(),
            })),
        }
    }

    async fn create_tickets(
        &mut self,
        outline: &[OutlineTicket],
        expanded: Vec<crate::planners::initiative::ExpandedTicket>,
    ) -> Ended {
        let (run, root, tool, model, variant) = (
            self.run_id,
            self.root.clone(),
            self.tool.name().to_owned(),
            self.model.clone(),
            self.variant.clone(),
        );
        let scopes: HashMap<String, String> = outline.iter().map(|o| (o.key.clone(), o.scope.clone())).collect();
        let created = self
            .s
            .store
            .write(move |c| {
                let mut ids = HashMap::new();
                for e in &expanded {
                    let new = NewTicket {
                        root: root.clone(),
                        title: e.plan.title.clone(),
                        description: scopes.get(&e.key).cloned().unwrap_or_default(),
                        tool: tool.clone(),
                        model: model.clone(),
                        variant: variant.clone(),
                    };
                    ids.insert(e.key.clone(), tickets::create_planned(c, &new, &e.plan, run)?);
                }
                for e in &expanded {
                    for d in &e.dependencies {
                        tickets::add_dependency(c, ids[&e.key], ids[d])?;
                    }
                }
                Ok(expanded.iter().map(|e| ids[&e.key]).collect::<Vec<_>>())
            })
            .await;
        match created {
            Ok(ids) => Ended::Created(ids),
            Err(e) => Ended::Failed(Failure {
                code: "store".into(),
                message: format!("cannot create the tickets: {e}"),
            }),
        }
    }

    async fn finish_breakdown(mut self, ended: Ended) {
        let run = self.run_id;
        self.deltas.clear();
        // A run whose events could not all be stored is never completed.
        let ended = match self.storage_failure.clone() {
            Some(f) => Ended::Failed(f),
            None => ended,
        };
        let (mut ending, created) = match ended {
            Ended::Created(ids) => {
                let mut e = failed_ending("", String::new(), Some(0), None);
                e.status = RunStatus::Completed;
                e.failure = None;
                (e, ids)
            }
            Ended::Stopped => {
                let mut e = failed_ending("", String::new(), None, None);
                e.status = RunStatus::Cancelled;
                e.failure = None;
                (e, Vec::new())
            }
            Ended::Failed(f) => {
                // The failure goes on the run and into the transcript.
                let body = EventBody::Error {
                    error_kind: ErrorKind::Unknown,
                    message: f.message.clone(),
                };
                self.push(None, body).await;
                self.flush().await;
                (failed_ending(&f.code, f.message, None, None), Vec::new())
            }
        };
        ending.total_ms = Some(self.elapsed_ms());
        ending.first_output_ms = self.first_output_ms;
        let status = ending.status;
        let recorded = self
            .s
            .store
            .write_ending(move |c| {
                runs::finish(c, run, &ending)?;
                transcript::end_open_agent_runs(c, run, status.as_str())
            })
            .await;
        if let Err(e) = recorded {
            tracing::error!("run {run}: cannot record its end: {e}");
        }
        self.s.unregister(run);
        // The tickets first, so a client that sees the run end already has them.
        for id in created {
            notify_ticket(&self.s, id).await;
        }
        notify_changed(&self.s, None, run).await;
        self.progress.end("Breakdown ended");
        close(self.ctl).await;
    }
}

fn spawn_failed(message: String) -> Ended {
    Ended::Failed(Failure {
        code: "spawn_failed".into(),
        message,
    })
}

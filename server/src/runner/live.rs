//! Live questions: a CLI in its bidirectional mode asks before it uses a tool
//! (`control_request` / `can_use_tool`) and waits on stdin for our answer.
//!
//! - AskUserQuestion becomes a question record (source `live`), a `planwire/question`
//!   notification and a `question` event; the run stays `running`, the ticket `needs_input`,
//!   until `planwire/answer` arrives and the answer goes back to the waiting CLI.
//! - ExitPlanMode is never approved: planning never leaves plan mode. Its plan is kept as a
//!   `plan_candidate` message, and the agent is asked for the `<planwire-plan>` answer.
//! - Any other tool that asks (one that writes or executes) is denied.

use planwire_protocol::{
    Answer, EventBody, QuestionItem, QuestionParams, QuestionSource, QuestionStatus, TicketStatus,
};
use tokio::io::AsyncWriteExt;

use super::{notify_changed, Driver};
use crate::planners::claude::{self, ControlRequest};
use crate::planners::ParsedEvent;
use crate::session::{LiveAnswer, LiveReply};
use crate::store::{questions, tickets};

const EXIT_PLAN_DENIED: &str = "planwire keeps this session in read-only plan mode, so the plan is not approved \
here. Give your final answer now: a short update, then the complete plan as JSON inside \
<planwire-plan>…</planwire-plan> with the keys title, description, acceptanceCriteria, openQuestions and dependencies.";

const DECLINED: &str = "The user declined to answer. Continue on your stated assumptions, and list those \
assumptions as open questions in the plan.";

/// One answer as the text a model reads: the chosen labels, then any free text.
pub(crate) fn answer_text(answer: &Answer) -> String {
    let mut parts = answer.selected.clone();
    if let Some(other) = answer.other.as_deref().filter(|o| !o.trim().is_empty()) {
        parts.push(other.trim().to_owned());
    }
    parts.join(", ")
}

/// Question/answer pairs, in item order.
pub(crate) fn answer_pairs(items: &[QuestionItem], answers: &[Answer]) -> Vec<(String, String)> {
    items
        .iter()
        .zip(answers)
        .map(|(i, a)| (i.question.clone(), answer_text(a)))
        .collect()
}

impl Driver {
    async fn write_stdin(&mut self, line: String) {
        let Some(stdin) = self.stdin.as_mut() else {
            tracing::warn!("run {}: no stdin to answer on", self.run_id);
            return;
        };
        let ok = stdin.write_all(format!("{line}\n").as_bytes()).await.is_ok() && stdin.flush().await.is_ok();
        if !ok {
            tracing::warn!("run {}: the planner closed its stdin", self.run_id);
        }
    }

    pub(super) async fn on_control_request(&mut self, req: ControlRequest) {
        if req.subtype != "can_use_tool" {
            let line = claude::control_error(&req.request_id, "planwire does not support this request");
            return self.write_stdin(line).await;
        }
        match req.tool_name.as_str() {
            "AskUserQuestion" => match claude::question_items(&req.input) {
                Some(items) => self.ask(req, items).await,
                None => {
                    let line = claude::deny(&req.request_id, "planwire could not read these questions.");
                    self.write_stdin(line).await
                }
            },
            "ExitPlanMode" => {
                let plan = req
                    .input
                    .get("plan")
                    .and_then(|p| p.as_str())
                    .unwrap_or_default()
                    .to_owned();
                if !plan.trim().is_empty() {
                    let (ticket, run, text) = (self.ticket_id, self.run_id, plan.clone());
                    let stored = self
                        .s
                        .store
                        .write(move |c| match ticket {
                            Some(t) => tickets::add_message(c, t, Some(run), "plan_candidate", &text).map(|_| ()),
                            None => Ok(()),
                        })
                        .await;
                    if let Err(e) = stored {
                        tracing::error!("run {run}: cannot keep the plan candidate: {e}");
                    }
                    self.plan_candidate = Some(plan);
                }
                self.write_stdin(claude::deny(&req.request_id, EXIT_PLAN_DENIED)).await
            }
            tool => {
                let message =
                    format!("planwire plans in read-only mode: {tool} is not allowed here. Read and search only.");
                self.write_stdin(claude::deny(&req.request_id, &message)).await
            }
        }
    }

    async fn ask(&mut self, req: ControlRequest, items: Vec<QuestionItem>) {
        let Some(ticket) = self.ticket_id else {
            // A breakdown has no ticket to hold a question: the agent goes on with assumptions.
            return self.write_stdin(claude::deny(&req.request_id, DECLINED)).await;
        };
        let (run, rid) = (self.run_id, req.request_id.clone());
        let text = items
            .iter()
            .map(|i| format!("- {}", i.question))
            .collect::<Vec<_>>()
            .join("\n");
        let created = self
            .s
            .store
            .write(move |c| {
                let q = questions::create(c, ticket, run, QuestionSource::Live, &items, Some(&rid))?;
                tickets::add_message(c, ticket, Some(run), "question", &text)?;
                tickets::set_status(c, ticket, TicketStatus::NeedsInput)?;
                Ok(q)
            })
            .await;
        let question = match created {
            Ok(q) => q,
            Err(e) => {
                tracing::error!("run {run}: cannot store a question: {e}");
                let line = claude::deny(&req.request_id, "planwire could not record this question.");
                return self.write_stdin(line).await;
            }
        };
        self.live.insert(question.id, req);
        self.push(ParsedEvent::main(EventBody::Question {
            question_id: question.id,
        }))
        .await;
        self.flush().await;
        self.progress.report("Waiting for your answer".into());
        let params = QuestionParams {
            ticket_id: ticket,
            run_id: run,
            question,
        };
        self.s.outbox.notify("planwire/question", params).await;
        notify_changed(&self.s, Some(ticket), run).await;
    }

    pub(super) async fn on_answer(&mut self, a: LiveAnswer) {
        let Some(req) = self.live.get(&a.question_id).cloned() else {
            let _ = a
                .done
                .send(Err(format!("question {} is not waiting in this run", a.question_id)));
            return;
        };
        let (run, qid) = (self.run_id, a.question_id);
        let Some(ticket) = self.ticket_id else {
            let _ = a.done.send(Err("this run has no ticket".into()));
            return;
        };
        let (status, answers) = match &a.reply {
            LiveReply::Answers(answers) => (QuestionStatus::Answered, answers.clone()),
            LiveReply::Dismiss => (QuestionStatus::Dismissed, Vec::new()),
        };
        let settled = self
            .s
            .store
            .write(move |c| {
                let q = questions::settle(c, qid, status, &answers)?;
                let text = match status {
                    QuestionStatus::Answered => answer_pairs(&q.items, &answers)
                        .iter()
                        .map(|(q, a)| format!("{q} → {a}"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => "The question was dismissed.".to_owned(),
                };
                tickets::add_message(c, ticket, Some(run), "answer", &text)?;
                if questions::open_for_ticket(c, ticket)?.is_empty() {
                    tickets::set_status(c, ticket, TicketStatus::Planning)?;
                }
                Ok((q, answers))
            })
            .await;
        let (question, answers) = match settled {
            Ok(v) => v,
            Err(e) => {
                let _ = a.done.send(Err(e.to_string()));
                return;
            }
        };
        let line = match a.reply {
            LiveReply::Answers(_) => {
                claude::answer_questions(&req.request_id, &req.input, &answer_pairs(&question.items, &answers))
            }
            LiveReply::Dismiss => claude::deny(&req.request_id, DECLINED),
        };
        self.write_stdin(line).await;
        self.live.remove(&qid);
        let _ = a.done.send(Ok(()));
        self.progress.report("Planning".into());
        notify_changed(&self.s, Some(ticket), run).await;
    }
}

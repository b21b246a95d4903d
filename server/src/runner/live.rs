//! Live questions: a pass's driver reports that the agent asks the person and waits.
//!
//! - The question becomes a record (source `live`), a `planwire/question` notification and a
//!   `question` event; the run stays `running`, the ticket `needs_input`, until
//!   `planwire/answer` arrives and the answer goes down to the waiting driver.
//! - A run without a ticket (a breakdown) has nowhere to hold a question: the agent is told
//!   to go on with stated assumptions.
//! - A plan offered for approval is kept as a `plan_candidate` message.

use planwire_protocol::{EventBody, QuestionItem, QuestionParams, QuestionSource, QuestionStatus, TicketStatus};

use super::pass::PassId;
use super::{notify_changed, Run};
use crate::planners::driver::{answer_pairs, AskId, Reply};
use crate::session::{LiveAnswer, LiveReply};
use crate::store::{questions, tickets};

impl Run {
    pub(super) async fn ask(&mut self, pass: PassId, ask: AskId, items: Vec<QuestionItem>) {
        let Some(ticket) = self.ticket_id else {
            drop(self.deliver(pass, ask, Reply::Dismiss));
            return;
        };
        let run = self.run_id;
        let text = items
            .iter()
            .map(|i| format!("- {}", i.question))
            .collect::<Vec<_>>()
            .join("\n");
        let key = format!("pass:{pass}/ask:{ask}");
        let created = self
            .s
            .store
            .write(move |c| {
                let q = questions::create(c, ticket, run, QuestionSource::Live, &items, Some(&key))?;
                tickets::add_message(c, ticket, Some(run), "question", &text)?;
                tickets::set_status(c, ticket, TicketStatus::NeedsInput)?;
                Ok(q)
            })
            .await;
        let question = match created {
            Ok(q) => q,
            Err(e) => {
                tracing::error!("run {run}: cannot store a question: {e}");
                drop(self.deliver(pass, ask, Reply::Dismiss));
                return;
            }
        };
        self.live.insert(question.id, (pass, ask));
        self.push(
            None,
            EventBody::Question {
                question_id: question.id,
            },
        )
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

    /// A plan the agent offered for approval: kept as a message and as the pass's candidate.
    pub(super) async fn keep_candidate(&mut self, pass: PassId, plan: String) {
        if let Some(ticket) = self.ticket_id {
            let (run, text) = (self.run_id, plan.clone());
            let stored = self
                .s
                .store
                .write(move |c| tickets::add_message(c, ticket, Some(run), "plan_candidate", &text).map(|_| ()))
                .await;
            if let Err(e) = stored {
                tracing::error!("run {run}: cannot keep the plan candidate: {e}");
            }
        }
        self.set_candidate(pass, plan);
    }

    pub(super) async fn on_answer(&mut self, a: LiveAnswer) {
        let Some((pass, ask)) = self.live.get(&a.question_id).copied() else {
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
                Ok(())
            })
            .await;
        if let Err(e) = settled {
            let _ = a.done.send(Err(e.to_string()));
            return;
        }
        let reply = match a.reply {
            LiveReply::Answers(answers) => Reply::Answers(answers),
            LiveReply::Dismiss => Reply::Dismiss,
        };
        self.live.remove(&qid);
        // The driver may be busy reporting: the answer's fate is awaited apart from this loop.
        let delivered = self.deliver(pass, ask, reply);
        let done = a.done;
        tokio::spawn(async move {
            let result = delivered.await.unwrap_or_else(|_| Err("the pass has ended".into()));
            if let Err(e) = &result {
                tracing::warn!("run {run}: the answer to question {qid} did not reach the planner: {e}");
            }
            let _ = done.send(result);
        });
        self.progress.report("Planning".into());
        notify_changed(&self.s, Some(ticket), run).await;
    }
}

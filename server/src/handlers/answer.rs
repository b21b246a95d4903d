//! `planwire/answer`: answer (or dismiss) a question, and planning goes on.
//!
//! A live question whose CLI is still waiting gets its answer on the CLI's stdin: the same run
//! continues. A question from a plan's open questions, or a live one gone stale because its
//! process died, starts a new run that resumes the provider session with the answers (when
//! its authority holds, `authority.rs`; else a fresh run gets them in its prompt).

use std::sync::Arc;

use planwire_protocol::{
    AnswerParams, AnswerResult, ErrorCode, Question, QuestionSource, QuestionStatus, Run, Ticket, TicketStatus,
};
use tokio::sync::oneshot;

use super::authority::{self, Resume};
use super::create_ticket::{check_tool, locate};
use super::{invalid_params, settings, HandlerResult};
use crate::planners::driver::answer_pairs;
use crate::planners::prompt;
use crate::runner::{self, notify_ticket, store_error, RunSpec};
use crate::session::{LiveAnswer, LiveReply, Session};
use crate::store::{questions, runs, tickets};
use crate::transport::ResponseError;

pub async fn handle(s: Arc<Session>, p: AnswerParams) -> HandlerResult<AnswerResult> {
    let qid = p.question_id;
    let q = s
        .store
        .read(move |c| questions::get(c, qid))
        .await
        .map_err(store_error)?;
    if q.ticket_id != p.ticket_id {
        let m = format!("question {} is not a question of ticket {}", q.id, p.ticket_id);
        return Err(ResponseError::new(ErrorCode::NotFound, m));
    }
    if matches!(q.status, QuestionStatus::Answered | QuestionStatus::Dismissed) {
        let m = format!("question {} is already {}", q.id, q.status.as_str());
        return Err(ResponseError::new(ErrorCode::Conflict, m));
    }
    if !p.dismiss {
        validate(&q, &p)?;
    }
    if q.source == QuestionSource::Live && q.status == QuestionStatus::Open {
        return answer_live(&s, &q, p).await;
    }
    if p.dismiss {
        return dismiss_settled(&s, &q).await;
    }
    resume_with_answers(&s, &q, p).await
}

fn validate(q: &Question, p: &AnswerParams) -> HandlerResult<()> {
    if p.answers.len() != q.items.len() {
        return Err(invalid_params(format!(
            "field `answers`: question {} has {} item(s); send one answer per item, in order (got {})",
            q.id,
            q.items.len(),
            p.answers.len()
        )));
    }
    for (i, (item, a)) in q.items.iter().zip(&p.answers).enumerate() {
        let other = a.other.as_deref().is_some_and(|o| !o.trim().is_empty());
        if a.selected.is_empty() && !other {
            return Err(invalid_params(format!(
                "field `answers[{i}]`: choose an option or give `other` text"
            )));
        }
        if other && !item.allow_other {
            return Err(invalid_params(format!(
                "field `answers[{i}].other`: this item takes no free text"
            )));
        }
        if !item.multi_select && a.selected.len() > 1 {
            return Err(invalid_params(format!(
                "field `answers[{i}].selected`: this item takes one option"
            )));
        }
        if let Some(bad) = a.selected.iter().find(|l| !item.options.iter().any(|o| &o.label == *l)) {
            return Err(invalid_params(format!(
                "field `answers[{i}].selected`: {bad:?} is not one of the options"
            )));
        }
    }
    Ok(())
}

async fn answer_live(s: &Session, q: &Question, p: AnswerParams) -> HandlerResult<AnswerResult> {
    let Some(handle) = s.handle(q.run_id) else {
        let m = "the question waits in another planwire process; answer it there (or after that process ends)";
        return Err(ResponseError::new(ErrorCode::Conflict, m));
    };
    let (done, rx) = oneshot::channel();
    let reply = if p.dismiss {
        LiveReply::Dismiss
    } else {
        LiveReply::Answers(p.answers)
    };
    let sent = handle
        .answers
        .send(LiveAnswer {
            question_id: q.id,
            reply,
            done,
        })
        .await;
    let outcome = match sent {
        Ok(()) => rx
            .await
            .unwrap_or_else(|_| Err("the run ended before the answer arrived".into())),
        Err(_) => Err("the run has ended".into()),
    };
    outcome.map_err(|m| ResponseError::new(ErrorCode::Conflict, m))?;
    Ok(AnswerResult { run_id: q.run_id })
}

async fn dismiss_settled(s: &Session, q: &Question) -> HandlerResult<AnswerResult> {
    let (qid, ticket) = (q.id, q.ticket_id);
    s.store
        .write(move |c| {
            questions::settle(c, qid, QuestionStatus::Dismissed, &[])?;
            tickets::add_message(c, ticket, None, "answer", "The question was dismissed.")?;
            if questions::open_for_ticket(c, ticket)?.is_empty() && runs::active(c, Some(ticket))?.is_empty() {
                let planned = tickets::get(c, ticket)?.plan.is_some();
                tickets::set_status(
                    c,
                    ticket,
                    if planned {
                        TicketStatus::Planned
                    } else {
                        TicketStatus::Draft
                    },
                )?;
            }
            Ok(())
        })
        .await
        .map_err(store_error)?;
    notify_ticket(s, ticket).await;
    Ok(AnswerResult { run_id: q.run_id })
}

async fn resume_with_answers(s: &Arc<Session>, q: &Question, p: AnswerParams) -> HandlerResult<AnswerResult> {
    let (qid, ticket_id, run_id, prev) = (q.id, q.ticket_id, q.run_id, q.status);
    let pairs = answer_pairs(&q.items, &p.answers);
    let text = pairs
        .iter()
        .map(|(q, a)| format!("{q} → {a}"))
        .collect::<Vec<_>>()
        .join("\n");
    let answers = p.answers.clone();
    let (ticket, run) = s
        .store
        .write(move |c| {
            // Settled first, so the run that follows never sees it open; undone if it cannot start.
            questions::settle(c, qid, QuestionStatus::Answered, &answers)?;
            Ok((tickets::get(c, ticket_id)?, runs::get(c, run_id)?))
        })
        .await
        .map_err(store_error)?;
    let started = match answers_spec(s, &ticket, &run, &pairs).await {
        Ok(spec) => runner::start(s, &ticket, spec).await,
        Err(e) => Err(e),
    };
    match started {
        Ok(new_run) => {
            let stored = s
                .store
                .write(move |c| tickets::add_message(c, ticket_id, Some(new_run), "answer", &text))
                .await;
            if let Err(e) = stored {
                tracing::error!("ticket {ticket_id}: cannot store the answer message: {e}");
            }
            Ok(AnswerResult { run_id: new_run })
        }
        Err(e) => {
            let _ = s.store.write(move |c| questions::reopen(c, qid, prev)).await;
            Err(e)
        }
    }
}

/// The run that takes the answers: it resumes the ticket's session when its authority holds
/// (`authority.rs`), in the ticket's branch's directory, else starts fresh with the answers in
/// the ticket's text.
async fn answers_spec(s: &Session, ticket: &Ticket, run: &Run, pairs: &[(String, String)]) -> HandlerResult<RunSpec> {
    let tool = check_tool(&run.tool)?;
    let workdir = locate(&ticket.root, ticket.branch.as_deref()).await?;
    let (resume, fresh_reason) = match authority::check(s, ticket, tool, run.model.as_deref(), &workdir).await? {
        Resume::Session(session) => (Some(session), None),
        Resume::Fresh(reason) => (None, Some(reason)),
        Resume::NoSession => (None, Some("no provider session to resume".to_owned())),
    };
    let answers_text = pairs
        .iter()
        .map(|(q, a)| format!("Q: {q}\nA: {a}"))
        .collect::<Vec<_>>()
        .join("\n\n");
    let used = settings::prompt_settings(s, &ticket.root).await;
    let fresh = prompt::plan_prompt(
        &ticket.title,
        &format!(
            "{}\n\nThe user already answered these questions:\n\n{answers_text}",
            ticket.description
        ),
        &used,
    );
    let prompt = match &resume {
        Some(session) => prompt::resume_prompt(
            &ticket.title,
            &ticket.description,
            // The question is settled already: an unreadable history must not strand it.
            super::plan::ticket_since(s, ticket, session)
                .await
                .unwrap_or(prompt::TicketSince::Unknown),
            Some(&format!(
                "The user answered your open questions:\n\n{answers_text}\n\nRefine the plan with these answers."
            )),
            &used,
        ),
        None => fresh.clone(),
    };
    Ok(RunSpec {
        tool,
        model: run.model.clone(),
        variant: run.variant.clone(),
        prompt,
        fresh_reason,
        resume,
        retry_of: None,
        fresh_prompt: Some(fresh),
        supersede_questions: false,
        workdir,
        settings: used,
    })
}

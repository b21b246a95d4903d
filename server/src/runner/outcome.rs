//! How a run ended, decided once, and recorded with its ticket in one transaction.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use planwire_protocol::{
    EventBody, Failure, Plan, Question, QuestionItem, QuestionSource, RunId, RunStatus, TicketId, TicketStatus,
    TranscriptEvent,
};

use super::pass::Ended;
use crate::planners::driver::Exit;
use crate::planners::plan::{extract_plan, plan_markdown, strip_plan_block};
use crate::session::Session;
use crate::store::{plans, questions, runs, tickets, transcript, StoreError};
use crate::util::now;

pub(super) enum How {
    /// A pass of the run could not start.
    SpawnFailed(String),
    /// The run's last pass ended.
    Ended(Box<Ended>),
}

/// How the ticket settles after a run.
pub(super) enum Settle {
    Planned { plan: Plan, update: String },
    Failed(String),
    Stopped,
}

pub(super) fn failed_ending(code: &str, message: String, exit_code: Option<i32>, signal: Option<i32>) -> runs::Ending {
    runs::Ending {
        status: RunStatus::Failed,
        exit_code,
        signal,
        failure: Some(Failure {
            code: code.into(),
            message,
        }),
        stderr_tail: None,
        session_id: None,
        first_output_ms: None,
        first_final_ms: None,
        total_ms: None,
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A plan the agent offered through ExitPlanMode: its first heading is the title.
fn plan_from_candidate(candidate: &str, fallback_title: &str) -> Plan {
    let text = candidate.trim();
    // A leading heading becomes the title (and is not repeated in the description).
    let (title, description) = match text.split_once('\n') {
        Some((first, rest)) if first.starts_with('#') => (first.trim_start_matches('#').trim(), rest.trim()),
        None if text.starts_with('#') => (text.trim_start_matches('#').trim(), ""),
        _ => ("", text),
    };
    let title = if title.is_empty() { fallback_title } else { title };
    Plan {
        title: title.to_owned(),
        description: description.to_owned(),
        ..Plan::default()
    }
}

pub(super) struct Facts<'a> {
    pub stop_requested: bool,
    pub ticket_title: &'a str,
    /// A plan read back from the stored transcript ([`plan_from_store`]).
    pub stored_plan: Option<&'a Plan>,
}

/// The plan, read back from the run's stored `text` events, when the adapter let go of older
/// text (it keeps a bounded tail) and neither the final answer nor the tail holds one.
pub(super) async fn plan_from_store(s: &Session, run: RunId, how: &How) -> Option<Plan> {
    let How::Ended(ended) = how else {
        return None;
    };
    let end = &ended.end;
    if !end.text_dropped || extract_plan(&end.final_text).is_some() || extract_plan(&end.all_text).is_some() {
        return None;
    }
    s.store
        .read(move |c| transcript::find_in_main_text(c, run, extract_plan))
        .await
        .ok()
        .flatten()
}

/// The failure of a run that ends because the store could not take its events: the
/// store's words (where, how full, who holds the lock), and what is kept.
pub(super) fn storage_failure(e: &StoreError) -> Failure {
    let code = match e {
        StoreError::Full { .. } => "storage_full",
        StoreError::Locked { .. } => "storage_busy",
        _ => "storage_error",
    };
    let advice = match e {
        StoreError::Full { .. } => " Free some space, then plan again.",
        StoreError::Locked { .. } => " Close the other program, then plan again.",
        _ => "",
    };
    Failure {
        code: code.into(),
        message: format!(
            "Planning stopped: {e}. Every event shown so far is saved; nothing after it was kept.{advice}"
        ),
    }
}

pub(super) fn decide(how: How, f: &Facts) -> (runs::Ending, Settle) {
    match how {
        How::SpawnFailed(message) => (
            failed_ending("spawn_failed", message.clone(), None, None),
            Settle::Failed(message),
        ),
        How::Ended(ended) => decide_ended(&ended, f),
    }
}

fn decide_ended(ended: &Ended, f: &Facts) -> (runs::Ending, Settle) {
    let status_parts = |s: Option<ExitStatus>| (s.and_then(|s| s.code()), s.and_then(|s| s.signal()));
    let end = &ended.end;
    let stderr = end.stderr_tail.as_str();
    let exit = match end.exit {
        // Another sidecar stopped this run by signalling its group.
        Exit::Exited(st) if f.stop_requested && st.and_then(|s| s.signal()).is_some() => Exit::Stopped(st),
        other => other,
    };
    let (mut ending, settle) = match exit {
        Exit::Stopped(st) => {
            let (code, signal) = status_parts(st);
            let e = runs::Ending {
                status: RunStatus::Cancelled,
                failure: None,
                ..failed_ending("", String::new(), code, signal)
            };
            (e, Settle::Stopped)
        }
        Exit::TimedOut(code, st) => {
            let (exit, signal) = status_parts(st);
            let message = match code {
                "hard_timeout" => "Planning took longer than the hard time limit and was stopped.",
                "question_timeout" => {
                    "A question waited longer than its time limit; planning was stopped. Answer it to resume."
                }
                _ => "The planner printed nothing for longer than the idle time limit and was stopped.",
            }
            .to_owned();
            (
                failed_ending(code, message.clone(), exit, signal),
                Settle::Failed(message),
            )
        }
        Exit::Exited(st) => {
            let (code, signal) = status_parts(st);
            let text = &end.final_text;
            let plan = extract_plan(text)
                .or_else(|| extract_plan(&end.all_text))
                .or_else(|| f.stored_plan.cloned())
                .or_else(|| {
                    ended
                        .plan_candidate
                        .as_deref()
                        .map(|c| plan_from_candidate(c, f.ticket_title))
                });
            match (code, end.error_message.clone(), plan) {
                (Some(0), None, Some(plan)) => {
                    let update = strip_plan_block(text).trim().to_owned();
                    let e = runs::Ending {
                        status: RunStatus::Completed,
                        failure: None,
                        ..failed_ending("", String::new(), code, None)
                    };
                    (e, Settle::Planned { plan, update })
                }
                (Some(0), None, None) => {
                    let m = end.missing_answer.clone().unwrap_or_else(|| {
                        "The planner finished without a plan in the <planwire-plan> form.".to_owned()
                    });
                    (failed_ending("no_plan", m.clone(), code, None), Settle::Failed(m))
                }
                (_, Some(err), _) => (
                    failed_ending("planner_error", err.clone(), code, signal),
                    Settle::Failed(err),
                ),
                _ => {
                    let m = if !stderr.trim().is_empty() {
                        last_lines(stderr, 20)
                    } else if let Some(sig) = signal {
                        format!("the planner was killed by signal {sig}")
                    } else {
                        format!("the planner exited with code {}", code.unwrap_or(-1))
                    };
                    (failed_ending("exit_code", m.clone(), code, signal), Settle::Failed(m))
                }
            }
        }
    };
    ending.stderr_tail = (!stderr.is_empty()).then(|| stderr.to_owned());
    (ending, settle)
}

/// One question record (source `plan`) with an item per open question of the plan.
fn plan_question_items(plan: &Plan) -> Vec<QuestionItem> {
    plan.open_questions
        .iter()
        .enumerate()
        .map(|(i, q)| QuestionItem {
            header: format!("Question {}", i + 1),
            question: q.clone(),
            options: Vec::new(),
            multi_select: false,
            allow_other: true,
        })
        .collect()
}

/// Records the end of a run and settles its ticket in one transaction. Returns the question
/// record created from the plan's open questions, if any, with its transcript event (stored
/// in the same transaction as seq `next_seq`).
pub(super) async fn record_end(
    s: &Session,
    ticket: TicketId,
    run: RunId,
    ending: runs::Ending,
    settle: Settle,
    next_seq: u64,
) -> Option<(Question, TranscriptEvent)> {
    let result = s
        .store
        .write_ending(move |c| {
            runs::finish(c, run, &ending)?;
            transcript::end_open_agent_runs(c, run, ending.status.as_str())?;
            // A live question the run never got answered stays answerable: it resumes the session.
            questions::mark_stale(c, run)?;
            let mut question = None;
            let status = match &settle {
                Settle::Planned { plan, update } => {
                    // A new version, never an overwrite: every plan a ticket was given stays.
                    plans::record(c, ticket, Some(run), plan)?;
                    crate::store::memory::record_suggestions(c, ticket, run, &plan.memory_suggestions)?;
                    if !update.is_empty() {
                        tickets::add_message(c, ticket, Some(run), "response", update)?;
                    }
                    tickets::add_message(c, ticket, Some(run), "plan", &plan_markdown(plan))?;
                    if !plan.open_questions.is_empty() {
                        let q =
                            questions::create(c, ticket, run, QuestionSource::Plan, &plan_question_items(plan), None)?;
                        let text: Vec<String> = plan.open_questions.iter().map(|q| format!("- {q}")).collect();
                        tickets::add_message(c, ticket, Some(run), "question", &text.join("\n"))?;
                        let body = EventBody::Question { question_id: q.id };
                        let event = TranscriptEvent {
                            seq: next_seq,
                            ts: now(),
                            agent_run_id: None,
                            body,
                        };
                        transcript::append(c, run, std::slice::from_ref(&event))?;
                        question = Some((q, event));
                    }
                    TicketStatus::Planned
                }
                Settle::Failed(message) => {
                    tickets::add_message(c, ticket, Some(run), "error", message)?;
                    TicketStatus::Failed
                }
                Settle::Stopped => {
                    tickets::add_message(c, ticket, Some(run), "status", "Planning was stopped.")?;
                    TicketStatus::Stopped
                }
            };
            // A ticket with an open or stale question needs the person, whatever the run did.
            let status = if questions::open_for_ticket(c, ticket)?.is_empty() {
                status
            } else {
                TicketStatus::NeedsInput
            };
            tickets::set_status(c, ticket, status)?;
            Ok(question)
        })
        .await;
    match result {
        Ok(q) => q,
        Err(e) => {
            tracing::error!("run {run}: cannot record its end: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_plan_takes_its_heading_as_title() {
        let p = plan_from_candidate("# Plan: greet\n\n1. Edit main.rs", "Ticket");
        assert_eq!(p.title, "Plan: greet");
        assert_eq!(p.description, "1. Edit main.rs");
        assert_eq!(plan_from_candidate("1. Edit", "Ticket").title, "Ticket");
    }
}

//! A planner's question, put to the person through the ACP client.
//!
//! - The client advertised `elicitation.form`: `elicitation/create` with one field per item
//!   (its options as a choice, and a free-text field where the item allows other text).
//! - Else, one item with options and a single choice: `session/request_permission` with one
//!   option per choice.
//! - Else the turn ends with the questions as text, and the next prompt is the answer.
//!
//! The answer then takes the path of `planwire/answer`, as an editor's does.

use std::collections::BTreeMap;

use agent_client_protocol_schema::v1::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAction, ElicitationContentValue,
    ElicitationFormMode, ElicitationMode, ElicitationSchema, ElicitationSessionScope, EnumOption,
    MultiSelectPropertySchema, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SessionUpdate, StringPropertySchema, ToolCall, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use planwire_protocol::{Answer, Question, QuestionItem};

use super::render;
use super::Agent;

/// What the person did with a question.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    Answers(Vec<Answer>),
    /// Declined: the planner goes on with its assumptions.
    Dismiss,
    /// Shown as text: the next prompt answers it.
    AsText,
}

pub async fn ask(agent: &Agent, session_id: &str, q: &Question) -> Outcome {
    if agent.elicitation {
        if let Some(outcome) = elicit(agent, session_id, q).await {
            return outcome;
        }
    } else if let [item] = &q.items[..] {
        if !item.options.is_empty() && !item.multi_select {
            if let Some(outcome) = permission(agent, session_id, q, item).await {
                return outcome;
            }
        }
    }
    agent.update(session_id, vec![render::agent_text(as_text(q))]).await;
    Outcome::AsText
}

/// The questions as a message that the next prompt answers.
pub fn as_text(q: &Question) -> String {
    let mut text = String::from("\n\nThe planner asks:\n");
    for (i, item) in q.items.iter().enumerate() {
        text.push_str(&format!("\n{}. {}", i + 1, item.question));
        for o in &item.options {
            text.push_str(&format!("\n   - {}", o.label));
        }
    }
    text.push_str("\n\nReply with your answer to continue.");
    text
}

/// A free-text reply to a question shown as text: the whole reply answers the first item, and
/// the others point to it.
pub fn text_answers(items: usize, reply: &str) -> Vec<Answer> {
    (0..items.max(1))
        .map(|i| Answer {
            selected: Vec::new(),
            other: Some(if i == 0 {
                reply.trim().to_owned()
            } else {
                "See my answer to the first question.".to_owned()
            }),
        })
        .collect()
}

fn field(i: usize) -> String {
    format!("q{:02}", i + 1)
}

fn other_field(i: usize) -> String {
    format!("q{:02}_other", i + 1)
}

/// The form of a question: per item a choice (when it has options) and free text.
pub fn form(q: &Question) -> ElicitationSchema {
    let mut schema = ElicitationSchema::new().title(format!("Question {}", q.id));
    for (i, item) in q.items.iter().enumerate() {
        let title = format!("{}: {}", item.header, item.question);
        if item.options.is_empty() {
            schema = schema.property(field(i), StringPropertySchema::new().title(title), true);
            continue;
        }
        let options: Vec<EnumOption> = item
            .options
            .iter()
            .map(|o| EnumOption::new(o.label.clone(), o.label.clone()).description(o.description.clone()))
            .collect();
        schema = if item.multi_select {
            schema.property(field(i), MultiSelectPropertySchema::titled(options).title(title), false)
        } else {
            schema.property(
                field(i),
                StringPropertySchema::new().title(title).one_of(options),
                false,
            )
        };
        if item.allow_other {
            let other = StringPropertySchema::new().title(format!("{}: your own answer (optional)", item.header));
            schema = schema.property(other_field(i), other, false);
        }
    }
    schema
}

/// The answers in an accepted form; `None` when nothing was answered.
pub fn answers_of(items: &[QuestionItem], content: &BTreeMap<String, ElicitationContentValue>) -> Option<Vec<Answer>> {
    let mut any = false;
    let answers: Vec<Answer> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let selected: Vec<String> = match content.get(&field(i)) {
                Some(ElicitationContentValue::String(s)) if !item.options.is_empty() && !s.is_empty() => {
                    vec![s.clone()]
                }
                Some(ElicitationContentValue::StringArray(v)) => v.clone(),
                _ => Vec::new(),
            };
            let typed = match (content.get(&field(i)), content.get(&other_field(i))) {
                (Some(ElicitationContentValue::String(s)), _) if item.options.is_empty() => Some(s.clone()),
                (_, Some(ElicitationContentValue::String(s))) => Some(s.clone()),
                _ => None,
            }
            .filter(|s| !s.trim().is_empty());
            if !selected.is_empty() || typed.is_some() {
                any = true;
            }
            let other = match (&typed, selected.is_empty()) {
                (None, true) => Some("No preference.".to_owned()),
                _ => typed,
            };
            Answer { selected, other }
        })
        .collect();
    any.then_some(answers)
}

async fn elicit(agent: &Agent, session_id: &str, q: &Question) -> Option<Outcome> {
    let mode = ElicitationMode::Form(ElicitationFormMode::new(
        ElicitationSessionScope::new(session_id.to_owned()),
        form(q),
    ));
    let message = q
        .items
        .iter()
        .map(|i| i.question.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let request = CreateElicitationRequest::new(mode, format!("The planner asks:\n{message}"));
    let response: CreateElicitationResponse = match agent.ask_client("elicitation/create", request).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("elicitation/create failed ({}); asking as text", e.message);
            return None;
        }
    };
    Some(match response.action {
        ElicitationAction::Accept(accept) => match accept.content.as_ref().and_then(|c| answers_of(&q.items, c)) {
            Some(answers) => Outcome::Answers(answers),
            None => Outcome::Dismiss,
        },
        _ => Outcome::Dismiss,
    })
}

async fn permission(agent: &Agent, session_id: &str, q: &Question, item: &QuestionItem) -> Option<Outcome> {
    // The question is shown as a (think) tool call the permission refers to.
    let call_id = format!("question-{}", q.id);
    let call = ToolCall::new(call_id.clone(), item.question.clone())
        .kind(ToolKind::Think)
        .status(ToolCallStatus::Pending);
    agent.update(session_id, vec![SessionUpdate::ToolCall(call)]).await;
    let mut options: Vec<PermissionOption> = item
        .options
        .iter()
        .enumerate()
        .map(|(i, o)| PermissionOption::new(format!("option-{i}"), o.label.clone(), PermissionOptionKind::AllowOnce))
        .collect();
    options.push(PermissionOption::new(
        "dismiss",
        "Skip: let the planner assume",
        PermissionOptionKind::RejectOnce,
    ));
    let fields = ToolCallUpdateFields::new().title(item.question.clone());
    let request = RequestPermissionRequest::new(
        session_id.to_owned(),
        ToolCallUpdate::new(call_id.clone(), fields),
        options,
    );
    let response: Result<RequestPermissionResponse, _> = agent.ask_client("session/request_permission", request).await;
    let done = ToolCallUpdate::new(call_id, ToolCallUpdateFields::new().status(ToolCallStatus::Completed));
    agent
        .update(session_id, vec![SessionUpdate::ToolCallUpdate(done)])
        .await;
    let chosen = match response {
        Ok(r) => match r.outcome {
            RequestPermissionOutcome::Selected(s) => s.option_id.0.to_string(),
            _ => return Some(Outcome::Dismiss),
        },
        Err(e) => {
            tracing::warn!("session/request_permission failed ({}); asking as text", e.message);
            return None;
        }
    };
    let index = chosen.strip_prefix("option-").and_then(|n| n.parse::<usize>().ok());
    Some(match index.and_then(|i| item.options.get(i)) {
        Some(option) => Outcome::Answers(vec![Answer {
            selected: vec![option.label.clone()],
            other: None,
        }]),
        None => Outcome::Dismiss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwire_protocol::{QuestionOption, QuestionSource, QuestionStatus};

    fn question() -> Question {
        Question {
            id: 4,
            ticket_id: 1,
            run_id: 2,
            status: QuestionStatus::Open,
            source: QuestionSource::Live,
            items: vec![
                QuestionItem {
                    header: "Greeting".into(),
                    question: "Which greeting?".into(),
                    options: vec![
                        QuestionOption {
                            label: "Hello".into(),
                            description: None,
                        },
                        QuestionOption {
                            label: "Hi".into(),
                            description: Some("Informal".into()),
                        },
                    ],
                    multi_select: false,
                    allow_other: true,
                },
                QuestionItem {
                    header: "Tests".into(),
                    question: "Add a test?".into(),
                    options: vec![],
                    multi_select: false,
                    allow_other: true,
                },
            ],
            answers: None,
        }
    }

    #[test]
    fn the_form_has_a_choice_and_free_text_per_item() {
        let v = serde_json::to_value(form(&question())).unwrap();
        assert_eq!(v["type"], "object");
        assert_eq!(v["properties"]["q01"]["type"], "string");
        assert_eq!(v["properties"]["q01"]["oneOf"][1]["const"], "Hi");
        assert_eq!(v["properties"]["q01"]["oneOf"][1]["description"], "Informal");
        assert_eq!(v["properties"]["q01_other"]["type"], "string");
        assert_eq!(v["properties"]["q02"]["type"], "string");
        assert_eq!(v["required"], serde_json::json!(["q02"]));
    }

    #[test]
    fn form_content_becomes_answers() {
        let q = question();
        let mut content = BTreeMap::new();
        content.insert("q01".to_owned(), ElicitationContentValue::String("Hi".into()));
        content.insert("q02".to_owned(), ElicitationContentValue::String("Yes, one".into()));
        let answers = answers_of(&q.items, &content).unwrap();
        assert_eq!(answers[0].selected, vec!["Hi"]);
        assert_eq!(answers[0].other, None);
        assert_eq!(answers[1].other.as_deref(), Some("Yes, one"));
        assert!(answers_of(&q.items, &BTreeMap::new()).is_none());
    }

    #[test]
    fn a_text_reply_answers_every_item() {
        let a = text_answers(2, " Hi there ");
        assert_eq!(a[0].other.as_deref(), Some("Hi there"));
        assert!(a[1].other.is_some());
        assert!(as_text(&question()).contains("2. Add a test?"));
    }
}

//! A planner's question, put to the person with `elicitation/create` in form mode: one field
//! per question item, its options as an enum (several choices for a multi-select item), and a
//! free-text "other" field where the item allows one. A declined or cancelled form is a
//! dismissal: the planner goes on with its assumptions.

use planwire_protocol::{Answer, Question, QuestionItem};
use rmcp::model::{
    ConstTitle, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, EnumSchema,
    MultiSelectEnumSchema, PrimitiveSchemaDefinition, SingleSelectEnumSchema, StringSchema, TitledItems,
    TitledMultiSelectEnumSchema, TitledSingleSelectEnumSchema,
};
use serde_json::{json, Map, Value};

use super::tasks::Handle;
use super::Mcp;

/// What the person did with a question.
#[derive(Debug, PartialEq)]
pub(super) enum Asked {
    Answers(Vec<Answer>),
    Dismiss,
}

fn field(i: usize) -> String {
    format!("q{:02}", i + 1)
}

fn other_field(i: usize) -> String {
    format!("q{:02}_other", i + 1)
}

/// The form of a question.
pub(super) fn form(q: &Question) -> ElicitationSchema {
    let mut b = ElicitationSchema::builder().title(format!("The planner asks (question {})", q.id));
    for (i, item) in q.items.iter().enumerate() {
        let title = format!("{}: {}", item.header, item.question);
        if item.options.is_empty() {
            b = b.required_property(
                field(i),
                PrimitiveSchemaDefinition::String(StringSchema::new().title(title)),
            );
            continue;
        }
        let options: Vec<ConstTitle> = item
            .options
            .iter()
            .map(|o| match &o.description {
                Some(d) => ConstTitle::new(o.label.clone(), format!("{} — {d}", o.label)),
                None => ConstTitle::new(o.label.clone(), o.label.clone()),
            })
            .collect();
        let choice = if item.multi_select {
            let m = TitledMultiSelectEnumSchema::new(TitledItems::new(options)).with_title(title);
            EnumSchema::Multi(MultiSelectEnumSchema::Titled(m))
        } else {
            let mut s = TitledSingleSelectEnumSchema::new(options);
            s.title = Some(title.into());
            EnumSchema::Single(SingleSelectEnumSchema::Titled(s))
        };
        b = b.property(field(i), PrimitiveSchemaDefinition::Enum(choice));
        if item.allow_other {
            let other = StringSchema::new().title(format!("{}: other (your own answer)", item.header));
            b = b.property(other_field(i), PrimitiveSchemaDefinition::String(other));
        }
    }
    b.build_unchecked()
}

/// The answers in an accepted form; `None` when nothing was answered.
pub(super) fn answers_of(items: &[QuestionItem], content: &Map<String, Value>) -> Option<Vec<Answer>> {
    let text = |k: &str| {
        content
            .get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let mut any = false;
    let answers = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let (selected, typed) = if item.options.is_empty() {
                (Vec::new(), text(&field(i)))
            } else {
                let selected = match content.get(&field(i)) {
                    Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
                    Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
                    _ => Vec::new(),
                };
                (selected, text(&other_field(i)))
            };
            any |= !selected.is_empty() || typed.is_some();
            let other = match (&typed, selected.is_empty()) {
                (None, true) => Some("No preference.".to_owned()),
                _ => typed,
            };
            Answer { selected, other }
        })
        .collect();
    any.then_some(answers)
}

/// Asks the person; `None` when the client could not ask (the caller returns `needs_input`).
pub(super) async fn ask(mcp: &Mcp, task: Option<&Handle>, q: &Question) -> Option<Asked> {
    let message = q
        .items
        .iter()
        .map(|i| i.question.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let request = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("The planner asks:\n{message}"),
        requested_schema: form(q),
    };
    let mut params = serde_json::to_value(&request).ok()?;
    if let Some(task) = task {
        params["_meta"] = json!({ super::tasks::RELATED: { "taskId": task.id() } });
    }
    let reply = match mcp.out.request("elicitation/create", params).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("elicitation/create failed ({}); returning needs_input", e.message);
            return None;
        }
    };
    let reply: ElicitResult = match serde_json::from_value(reply) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("the client's elicitation answer does not parse ({e}); returning needs_input");
            return None;
        }
    };
    Some(match (reply.action, reply.content) {
        (ElicitationAction::Accept, Some(Value::Object(content))) => match answers_of(&q.items, &content) {
            Some(answers) => Asked::Answers(answers),
            None => Asked::Dismiss,
        },
        _ => Asked::Dismiss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwire_protocol::{QuestionOption, QuestionSource, QuestionStatus};

    fn question() -> Question {
        let option = |label: &str, description: Option<&str>| QuestionOption {
            label: label.into(),
            description: description.map(str::to_owned),
        };
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
                    options: vec![option("Hello", None), option("Hi", Some("Informal"))],
                    multi_select: false,
                    allow_other: true,
                },
                QuestionItem {
                    header: "Places".into(),
                    question: "Where?".into(),
                    options: vec![option("CLI", None), option("Docs", None)],
                    multi_select: true,
                    allow_other: false,
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
    fn the_form_has_an_enum_per_item_and_other_as_text() {
        let v = serde_json::to_value(form(&question())).unwrap();
        assert_eq!(v["type"], "object");
        assert_eq!(v["properties"]["q01"]["type"], "string");
        assert_eq!(v["properties"]["q01"]["oneOf"][1]["const"], "Hi");
        assert_eq!(v["properties"]["q01"]["oneOf"][1]["title"], "Hi — Informal");
        assert_eq!(v["properties"]["q01_other"]["type"], "string");
        assert_eq!(v["properties"]["q02"]["type"], "array");
        assert_eq!(v["properties"]["q02"]["items"]["anyOf"][0]["const"], "CLI");
        assert!(v["properties"].get("q02_other").is_none());
        assert_eq!(v["properties"]["q03"]["type"], "string");
        assert_eq!(v["required"], json!(["q03"]));
    }

    #[test]
    fn form_content_becomes_answers() {
        let q = question();
        let content = json!({"q01": "Hi", "q02": ["CLI", "Docs"], "q03": " Yes, one "});
        let answers = answers_of(&q.items, content.as_object().unwrap()).unwrap();
        assert_eq!(answers[0].selected, vec!["Hi"]);
        assert_eq!(answers[0].other, None);
        assert_eq!(answers[1].selected, vec!["CLI", "Docs"]);
        assert_eq!(answers[2].other.as_deref(), Some("Yes, one"));
        let other = json!({"q01_other": "Howdy"});
        let answers = answers_of(&q.items, other.as_object().unwrap()).unwrap();
        assert_eq!(answers[0].other.as_deref(), Some("Howdy"));
        assert_eq!(answers[1].other.as_deref(), Some("No preference."));
        assert!(answers_of(&q.items, &Map::new()).is_none());
    }
}

//! The server requests of `codex app-server`, answered by planwire's read-only rules.
//!
//! - `item/tool/requestUserInput` (plan mode's `request_user_input` tool) is a question for the
//!   person: `{questions: [{id, header, question, isOther, isSecret, options: [{label,
//!   description}] | null}]}`. The turn waits for the response `{answers: {<question id>:
//!   {answers: [strings]}}}`, keyed by each question's `id` (not its text). The chosen labels
//!   and any free text are the strings; Codex passes the JSON to the model as the tool's output.
//!   A dismissal answers every question with [`DECLINED`].
//!   Questions planwire cannot read are answered with a note saying so (an error response
//!   would reach the model as `{"answers":{}}`, with no reason).
//! - Every approval is declined: a command (`item/commandExecution/requestApproval`) or a patch
//!   (`item/fileChange/requestApproval`) gets `decline`, a permission request grants nothing
//!   for the turn, an MCP elicitation is declined, and the legacy `execCommandApproval` /
//!   `applyPatchApproval` are denied. (planwire asks for `approvalPolicy: "never"`, so these
//!   should not come at all.)
//! - Anything else (`item/tool/call` of a dynamic tool planwire never registers, auth refresh,
//!   attestation, a method this version does not know) gets -32601.

use planwire_protocol::{ErrorCode, QuestionItem, QuestionOption};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::super::driver::{answer_parts, Reply, DECLINED};
use crate::transport::ResponseError;

/// What to do with one server request.
#[derive(Debug, PartialEq)]
pub enum Handling {
    /// Ask the person; the answer goes back keyed by these question ids.
    Ask {
        items: Vec<QuestionItem>,
        ids: Vec<String>,
    },
    /// Answer at once.
    Respond(Value),
    Reject(ResponseError),
}

const UNREADABLE: &str = "planwire could not show this question to the user. Continue on your stated \
assumptions, and list those assumptions as open questions in the plan.";

const READ_ONLY: &str = "planwire plans in read-only mode: nothing may be written or run outside the sandbox.";

#[derive(Deserialize)]
struct UserInput {
    questions: Vec<UserQuestion>,
}

#[derive(Deserialize)]
struct UserQuestion {
    id: String,
    #[serde(default)]
    header: String,
    question: String,
    #[serde(default)]
    options: Option<Vec<UserOption>>,
}

#[derive(Deserialize)]
struct UserOption {
    label: String,
    #[serde(default)]
    description: Option<String>,
}

pub fn handle(method: &str, params: &Value) -> Handling {
    match method {
        "item/tool/requestUserInput" => match questions(params) {
            Some((items, ids)) => Handling::Ask { items, ids },
            None => Handling::Respond(unreadable(params)),
        },
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            Handling::Respond(json!({ "decision": "decline" }))
        }
        "item/permissions/requestApproval" => Handling::Respond(json!({ "permissions": {}, "scope": "turn" })),
        "mcpServer/elicitation/request" => {
            Handling::Respond(json!({ "action": "decline", "content": null, "_meta": null }))
        }
        "execCommandApproval" | "applyPatchApproval" => {
            Handling::Respond(json!({ "decision": { "denied": { "rejection": READ_ONLY } } }))
        }
        other => Handling::Reject(ResponseError::new(
            ErrorCode::MethodNotFound,
            format!("planwire does not handle {other}"),
        )),
    }
}

/// The question items of a `requestUserInput`, and the ids to answer them by.
fn questions(params: &Value) -> Option<(Vec<QuestionItem>, Vec<String>)> {
    let input = UserInput::deserialize(params).ok()?;
    if input.questions.is_empty() || input.questions.iter().any(|q| q.id.is_empty()) {
        return None;
    }
    let ids = input.questions.iter().map(|q| q.id.clone()).collect();
    let items = input
        .questions
        .into_iter()
        .map(|q| QuestionItem {
            header: if q.header.trim().is_empty() {
                "Question".into()
            } else {
                q.header
            },
            question: q.question,
            options: q
                .options
                .unwrap_or_default()
                .into_iter()
                .map(|o| QuestionOption {
                    label: o.label,
                    description: o.description.filter(|d| !d.is_empty()),
                })
                .collect(),
            multi_select: false,
            // Free text is one more string in the answer (Codex marks every question `isOther`).
            allow_other: true,
        })
        .collect();
    Some((items, ids))
}

/// What the model reads for questions planwire could not show: every question it can name
/// is answered so (an error response would reach the model as empty answers).
fn unreadable(params: &Value) -> Value {
    let ids: Vec<String> = params
        .get("questions")
        .and_then(Value::as_array)
        .map(|qs| {
            qs.iter()
                .filter_map(|q| q.get("id")?.as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut answers = Map::new();
    for id in ids.into_iter().filter(|id| !id.is_empty()) {
        answers.insert(id, json!({ "answers": [UNREADABLE] }));
    }
    json!({ "answers": answers })
}

/// The response to a `requestUserInput`: the answers keyed by question id, in order.
pub fn answer(ids: &[String], reply: &Reply) -> Value {
    let mut answers = Map::new();
    for (i, id) in ids.iter().enumerate() {
        let parts = match reply {
            Reply::Answers(answers) => answers.get(i).map(answer_parts).unwrap_or_default(),
            Reply::Dismiss => vec![DECLINED.to_owned()],
        };
        answers.insert(id.clone(), json!({ "answers": parts }));
    }
    json!({ "answers": answers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwire_protocol::Answer;

    fn selected(labels: &[&str], other: Option<&str>) -> Answer {
        Answer {
            selected: labels.iter().map(|l| l.to_string()).collect(),
            other: other.map(str::to_owned),
        }
    }

    fn recorded_request(name: &str, method: &str) -> Value {
        let text = match name {
            "ask" => include_str!("../../../../tests/fixtures/codex/ask.jsonl"),
            "approval" => include_str!("../../../../tests/fixtures/codex/approval.jsonl"),
            _ => unreachable!(),
        };
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| l["dir"] == "<" && l["msg"]["method"] == method)
            .unwrap()["msg"]["params"]
            .clone()
    }

    #[test]
    fn a_recorded_question_becomes_items_with_ids() {
        let params = recorded_request("ask", "item/tool/requestUserInput");
        let Handling::Ask { items, ids } = handle("item/tool/requestUserInput", &params) else {
            panic!("not a question");
        };
        assert_eq!(ids, ["greeting"]);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].header, "Greeting");
        assert_eq!(items[0].question, "Which greeting should the program print?");
        let labels: Vec<&str> = items[0].options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Hello, world", "Hi there"]);
        assert_eq!(items[0].options[1].description.as_deref(), Some("Informal"));
        assert!(items[0].allow_other && !items[0].multi_select);
    }

    #[test]
    fn answers_are_keyed_by_question_id_with_free_text_last() {
        let ids = vec!["greeting".to_owned(), "scope".to_owned()];
        let reply = Reply::Answers(vec![
            selected(&["Hi there"], Some(" with an exclamation mark ")),
            selected(&[], Some("only main.rs")),
        ]);
        assert_eq!(
            answer(&ids, &reply),
            json!({ "answers": {
                "greeting": { "answers": ["Hi there", "with an exclamation mark"] },
                "scope": { "answers": ["only main.rs"] },
            } })
        );
        // The recorded answer had this very shape, and the model got it (see `ask.jsonl`).
        let dismissed = answer(&ids[..1], &Reply::Dismiss);
        assert_eq!(dismissed["answers"]["greeting"]["answers"][0], DECLINED);
    }

    #[test]
    fn approvals_are_declined_and_the_unknown_is_method_not_found() {
        let params = recorded_request("approval", "item/commandExecution/requestApproval");
        assert_eq!(
            handle("item/commandExecution/requestApproval", &params),
            Handling::Respond(json!({ "decision": "decline" }))
        );
        assert_eq!(
            handle("item/fileChange/requestApproval", &json!({})),
            Handling::Respond(json!({ "decision": "decline" }))
        );
        assert!(matches!(
            handle("item/permissions/requestApproval", &json!({})),
            Handling::Respond(v) if v["permissions"] == json!({})
        ));
        assert!(matches!(
            handle("applyPatchApproval", &json!({})),
            Handling::Respond(v) if v["decision"]["denied"]["rejection"].is_string()
        ));
        for method in ["item/tool/call", "account/chatgptAuthTokens/refresh", "something/new"] {
            assert!(
                matches!(handle(method, &json!({})), Handling::Reject(e) if e.code == -32601),
                "{method}"
            );
        }
    }

    #[test]
    fn unreadable_questions_are_answered_with_a_note() {
        for params in [
            json!({}),
            json!({ "questions": [] }),
            json!({ "questions": [{ "id": "", "question": "q" }] }),
        ] {
            assert_eq!(
                handle("item/tool/requestUserInput", &params),
                Handling::Respond(json!({ "answers": {} })),
                "{params}"
            );
        }
        let Handling::Respond(v) = handle("item/tool/requestUserInput", &json!({ "questions": [{ "id": "a" }] }))
        else {
            panic!()
        };
        assert_eq!(v["answers"]["a"]["answers"][0], UNREADABLE);
        let Handling::Ask { items, .. } = handle(
            "item/tool/requestUserInput",
            &json!({ "questions": [{ "id": "a", "question": "Free?", "options": null }] }),
        ) else {
            panic!()
        };
        assert_eq!((items[0].header.as_str(), items[0].options.len()), ("Question", 0));
    }
}

//! Plan extraction from a planner's final text.
//!
//! The prompt asks for the plan as JSON inside `<planwire-plan>…</planwire-plan>` after a short
//! natural-language update. Models are not always tidy, so [`extract_plan`] tries, in order:
//!
//! 1. each tagged block, the last one first (the final answer may quote the tag earlier in its
//!    prose); inside it, ```` ```json ```` fences and stray prose around the object are
//!    tolerated, and an unclosed last tag runs to the end of the text;
//! 2. the first balanced JSON object anywhere in the text that reads as a plan.
//!
//! Keys may be camelCase or snake_case (`acceptanceCriteria` / `acceptance_criteria`,
//! `openQuestions` / `open_questions`, `memorySuggestions` / `memory_suggestions`). A plan
//! needs a non-empty `title` or `description`; missing lists are empty; list items may be
//! strings or objects with a `text`, `title`, `question`, `name` or `description` field,
//! normalized to trimmed strings (empty ones are dropped). A single string where a list is
//! expected becomes a one-item list.

use planwire_protocol::Plan;
use serde_json::{Map, Value};

const OPEN: &str = "<planwire-plan>";
const CLOSE: &str = "</planwire-plan>";
/// Upper bound on the candidate `{` positions tried by the untagged fallback, so a
/// pathological text cannot make extraction quadratic without limit.
const MAX_CANDIDATES: usize = 256;

/// The plan in `text`, if there is one. See the module docs for the rules.
pub fn extract_plan(text: &str) -> Option<Plan> {
    for inner in tagged_blocks(text).into_iter().rev() {
        if let Some(plan) = plan_from_fragment(inner) {
            return Some(plan);
        }
    }
    first_plan_object(text)
}

/// `text` without its `<planwire-plan>…</planwire-plan>` blocks (an unclosed tag is removed to
/// the end), trimmed: what a client shows next to the rendered plan.
pub fn strip_plan_block(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after_open = &rest[start + OPEN.len()..];
        match after_open.find(CLOSE) {
            Some(end) => rest = &after_open[end + CLOSE.len()..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    // Blank lines left where the block was.
    let mut cleaned = String::with_capacity(out.len());
    let mut blank_run = 0;
    for line in out.trim().lines() {
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        cleaned.push_str(line.trim_end());
        cleaned.push('\n');
    }
    cleaned.trim_end().to_string()
}

/// Renders a plan as the markdown document a person reads.
pub fn plan_markdown(plan: &Plan) -> String {
    let mut out = format!("# {}\n\n{}\n", plan.title, plan.description.trim());
    for (heading, items) in [
        ("Acceptance criteria", &plan.acceptance_criteria),
        ("Open questions", &plan.open_questions),
        ("Dependencies", &plan.dependencies),
    ] {
        if !items.is_empty() {
            out.push_str(&format!("\n## {heading}\n\n"));
            for item in items {
                out.push_str(&format!("- {item}\n"));
            }
        }
    }
    out
}

/// Which plan a [`plan_document`] is, for its footer.
pub struct DocumentOf<'a> {
    pub ticket_id: i64,
    pub ticket_title: &'a str,
    pub version: u32,
    pub created_at: &'a str,
}

/// A plan as a file for a repository (`planwire/exportPlan`, and the hand-off's prompt file):
/// the title, the description, the acceptance criteria as a checklist, the open questions and
/// the dependencies, and a footer naming the ticket and the version.
pub fn plan_document(plan: &Plan, of: &DocumentOf) -> String {
    let mut out = format!("# {}\n\n{}\n", one_line(&plan.title), plan.description.trim());
    for (heading, marker, items) in [
        ("Acceptance criteria", "- [ ] ", &plan.acceptance_criteria),
        ("Open questions", "- ", &plan.open_questions),
        ("Dependencies", "- ", &plan.dependencies),
    ] {
        if !items.is_empty() {
            out.push_str(&format!("\n## {heading}\n\n"));
            for item in items {
                out.push_str(&list_item(marker, item));
            }
        }
    }
    out.push_str(&format!(
        "\n---\n\nPlan version {} of planwire ticket {} ({}), {}.\n",
        of.version,
        of.ticket_id,
        one_line(of.ticket_title),
        of.created_at
    ));
    out
}

/// A list item whose later lines are indented under its marker, so it stays one item.
fn list_item(marker: &str, text: &str) -> String {
    let indent = " ".repeat(marker.len());
    let mut out = String::from(marker);
    for (i, line) in text.trim().lines().enumerate() {
        if i > 0 {
            out.push('\n');
            if !line.trim().is_empty() {
                out.push_str(&indent);
            }
        }
        out.push_str(line.trim_end());
    }
    out.push('\n');
    out
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The inner text of every tagged block, in order. An unclosed final tag runs to the end.
fn tagged_blocks(text: &str) -> Vec<&str> {
    blocks_between(text, OPEN, CLOSE)
}

/// The JSON inside the last `<tag>…</tag>` block that parses (fences allowed), for the other
/// answer contracts (`planwire-outline`, `planwire-research`, …).
pub(crate) fn tagged_json(text: &str, tag: &str) -> Option<Value> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    blocks_between(text, &open, &close)
        .into_iter()
        .rev()
        .find_map(|b| serde_json::from_str(strip_fences(b)).ok())
}

fn blocks_between<'a>(text: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let after_open = &rest[start + open.len()..];
        // A nested open tag before the close means the first one was prose ("I will use
        // <planwire-plan> tags"); start again from the later one.
        match (after_open.find(close), after_open.find(open)) {
            (Some(c), Some(o)) if o < c => rest = &after_open[o..],
            (Some(c), _) => {
                blocks.push(&after_open[..c]);
                rest = &after_open[c + close.len()..];
            }
            (None, Some(o)) => rest = &after_open[o..],
            (None, None) => {
                blocks.push(after_open);
                break;
            }
        }
    }
    blocks
}

/// A plan from the inside of a tag: the whole fragment as JSON (fences removed), else the
/// first balanced object in it that reads as a plan.
fn plan_from_fragment(fragment: &str) -> Option<Plan> {
    let unfenced = strip_fences(fragment);
    if let Ok(value) = serde_json::from_str::<Value>(unfenced) {
        if let Some(plan) = plan_from_value(&value) {
            return Some(plan);
        }
    }
    first_plan_object(fragment)
}

fn strip_fences(s: &str) -> &str {
    let mut s = s.trim();
    if let Some(rest) = s.strip_prefix("```") {
        // Drop the info string (`json`) with the rest of the fence line.
        s = match rest.find('\n') {
            Some(nl) => &rest[nl + 1..],
            None => rest,
        };
    }
    let s = s.trim_end();
    s.strip_suffix("```").unwrap_or(s).trim()
}

/// The first balanced `{…}` in `text` that parses as JSON and reads as a plan.
fn first_plan_object(text: &str) -> Option<Plan> {
    let bytes = text.as_bytes();
    let mut tried = 0;
    for (start, &b) in bytes.iter().enumerate() {
        if b != b'{' {
            continue;
        }
        tried += 1;
        if tried > MAX_CANDIDATES {
            return None;
        }
        let Some(end) = balanced_end(bytes, start) else {
            continue;
        };
        if let Ok(value) = serde_json::from_str::<Value>(&text[start..=end]) {
            if let Some(plan) = plan_from_value(&value) {
                return Some(plan);
            }
        }
    }
    None
}

/// Index of the `}` closing the object that starts at `start`, skipping braces inside
/// JSON strings.
fn balanced_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

pub(crate) fn plan_from_value(value: &Value) -> Option<Plan> {
    let obj = value.as_object()?;
    // A wrapper such as {"plan": {...}}.
    if let Some(inner) = obj.get("plan").filter(|v| v.is_object()) {
        if !obj.contains_key("title") && !obj.contains_key("description") {
            return plan_from_value(inner);
        }
    }
    let title = text_field(obj.get("title")).unwrap_or_default();
    let description = description_field(obj.get("description")).unwrap_or_default();
    if title.is_empty() && description.is_empty() {
        return None;
    }
    Some(Plan {
        title,
        description,
        acceptance_criteria: list_field(obj, &["acceptanceCriteria", "acceptance_criteria"]),
        open_questions: list_field(obj, &["openQuestions", "open_questions"]),
        dependencies: list_field(obj, &["dependencies"]),
        memory_suggestions: list_field(obj, &["memorySuggestions", "memory_suggestions"]),
    })
}

fn text_field(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The description as markdown: a string, lines of a list, or an object of sections.
fn description_field(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Array(items) => Some(items.iter().filter_map(item_text).collect::<Vec<_>>().join("\n")),
        Value::Object(sections) => Some(
            sections
                .iter()
                .filter_map(|(k, v)| {
                    let body = description_field(Some(v))?;
                    Some(format!("## {k}\n\n{body}"))
                })
                .collect::<Vec<_>>()
                .join("\n\n"),
        ),
        _ => None,
    }
}

fn list_field(obj: &Map<String, Value>, keys: &[&str]) -> Vec<String> {
    let Some(value) = keys.iter().find_map(|k| obj.get(*k)) else {
        return Vec::new();
    };
    match value {
        Value::Array(items) => items.iter().filter_map(item_text).collect(),
        other => item_text(other).into_iter().collect(),
    }
}

fn item_text(item: &Value) -> Option<String> {
    let text = match item {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) => ["text", "title", "question", "name", "description"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str))
            .map(|s| s.trim().to_string())?,
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_document_has_a_checklist_and_a_footer() {
        let plan = Plan {
            title: "Change\nthe greeting".into(),
            description: "## Context\nmain prints hello.\n".into(),
            acceptance_criteria: vec!["`cargo run` prints hi".into(), "two\nlines".into()],
            open_questions: vec!["Which greeting?".into()],
            dependencies: Vec::new(),
            memory_suggestions: vec!["not exported".into()],
        };
        let of = DocumentOf {
            ticket_id: 7,
            ticket_title: "Greeting",
            version: 2,
            created_at: "2026-11-30T11:43:13.117Z",
        };
        assert_eq!(
            plan_document(&plan, &of),
            "# Change the greeting\n\n## Context\nmain prints hello.\n\n## Acceptance criteria\n\n\
             - [ ] `cargo run` prints hi\n- [ ] two\n      lines\n\n## Open questions\n\n- Which greeting?\n\n\
             ---\n\nPlan version 2 of planwire ticket 7 (Greeting), 2026-11-30T11:43:13.117Z.\n"
        );
    }

    use super::*;

    const FULL: &str = r###"{"title": "Change greeting", "description": "## Context\nThe greeting lives in src/main.rs.\n\n## Steps\n1. Edit it.", "acceptanceCriteria": ["prints Hi"], "openQuestions": [], "dependencies": []}"###;

    #[test]
    fn tagged_after_prose() {
        let text = format!("I read the code. Here is the plan.\n\n<planwire-plan>\n{FULL}\n</planwire-plan>");
        let plan = extract_plan(&text).unwrap();
        assert_eq!(plan.title, "Change greeting");
        assert!(plan.description.starts_with("## Context\nThe greeting"));
        assert_eq!(plan.acceptance_criteria, ["prints Hi"]);
        assert!(plan.open_questions.is_empty() && plan.dependencies.is_empty());
    }

    #[test]
    fn fenced_json_inside_tag() {
        let text = format!("Update.\n<planwire-plan>\n```json\n{FULL}\n```\n</planwire-plan>\n");
        assert_eq!(extract_plan(&text).unwrap().title, "Change greeting");
        let bare = format!("<planwire-plan>```{FULL}```</planwire-plan>");
        assert_eq!(extract_plan(&bare).unwrap().title, "Change greeting");
    }

    #[test]
    fn last_tag_wins() {
        let text = r#"Draft: <planwire-plan>{"title": "First"}</planwire-plan>
Revised: <planwire-plan>{"title": "Second"}</planwire-plan>"#;
        assert_eq!(extract_plan(text).unwrap().title, "Second");
    }

    #[test]
    fn broken_last_tag_falls_back_to_earlier_tag() {
        let text = r#"<planwire-plan>{"title": "Good"}</planwire-plan>
<planwire-plan>{"title": "Bad", </planwire-plan>"#;
        assert_eq!(extract_plan(text).unwrap().title, "Good");
    }

    #[test]
    fn tag_mentioned_in_prose_then_real_block() {
        let text = r#"I will answer inside <planwire-plan> tags as asked.
<planwire-plan>{"title": "Real"}</planwire-plan>"#;
        assert_eq!(extract_plan(text).unwrap().title, "Real");
    }

    #[test]
    fn unclosed_tag_runs_to_end() {
        let text = r#"Here: <planwire-plan>{"title": "Cut off", "description": "d"}"#;
        assert_eq!(extract_plan(text).unwrap().title, "Cut off");
    }

    #[test]
    fn untagged_first_balanced_object() {
        let text = r#"No tags, sorry. {"note": "not a plan"} and then
{"title": "Untagged", "description": "braces } { in \"strings\" are fine", "open_questions": ["Which?"]}
and {"title": "Later"}"#;
        let plan = extract_plan(text).unwrap();
        assert_eq!(plan.title, "Untagged");
        assert_eq!(plan.description, r#"braces } { in "strings" are fine"#);
        assert_eq!(plan.open_questions, ["Which?"]);
    }

    #[test]
    fn unbalanced_braces_inside_strings_in_tag() {
        let text = r#"<planwire-plan>
Some prose before the object { not json
{"title": "T", "description": "use `fn x() {` then `}}}`", "dependencies": ["a {"]}
</planwire-plan>"#;
        let plan = extract_plan(text).unwrap();
        assert_eq!(plan.description, "use `fn x() {` then `}}}`");
        assert_eq!(plan.dependencies, ["a {"]);
    }

    #[test]
    fn snake_case_and_object_items() {
        let text = r#"<planwire-plan>{"title": "S", "description": "D",
"acceptance_criteria": [{"text": "works"}, {"title": "fast"}, "  ", "tested"],
"open_questions": [{"question": "Which color?", "options": ["red"]}],
"dependencies": "issue 12"}</planwire-plan>"#;
        let plan = extract_plan(text).unwrap();
        assert_eq!(plan.acceptance_criteria, ["works", "fast", "tested"]);
        assert_eq!(plan.open_questions, ["Which color?"]);
        assert_eq!(plan.dependencies, ["issue 12"]);
        assert!(plan.memory_suggestions.is_empty());
    }

    #[test]
    fn memory_suggestions_in_either_case() {
        let camel = r#"<planwire-plan>{"title": "M", "memorySuggestions": ["Uses clap.", " "]}</planwire-plan>"#;
        assert_eq!(extract_plan(camel).unwrap().memory_suggestions, ["Uses clap."]);
        let snake = r#"<planwire-plan>{"title": "M", "memory_suggestions": "One fact."}</planwire-plan>"#;
        assert_eq!(extract_plan(snake).unwrap().memory_suggestions, ["One fact."]);
    }

    #[test]
    fn title_or_description_required() {
        assert!(extract_plan(r#"<planwire-plan>{"title": " ", "description": ""}</planwire-plan>"#).is_none());
        assert!(extract_plan(r#"{"acceptanceCriteria": ["x"]}"#).is_none());
        let only_desc = extract_plan(r#"{"description": "Just do it"}"#).unwrap();
        assert_eq!(only_desc.title, "");
        assert_eq!(only_desc.description, "Just do it");
    }

    #[test]
    fn description_sections_object_and_wrapper() {
        let text = r#"{"plan": {"title": "W", "description": {"Context": "c", "Steps": ["1. a", "2. b"]}}}"#;
        let plan = extract_plan(text).unwrap();
        assert_eq!(plan.title, "W");
        assert_eq!(plan.description, "## Context\n\nc\n\n## Steps\n\n1. a\n2. b");
    }

    #[test]
    fn garbage_gives_none() {
        for text in [
            "",
            "just words",
            "{",
            "}{",
            "{{{{{{{{",
            "<planwire-plan></planwire-plan>",
            "<planwire-plan>not json</planwire-plan>",
            r#"{"title": 5e999999}"#,
            "[1, 2, {\"x\": 1}]",
            "\u{1F600} { \"é\": \"\u{1F600}\" }",
        ] {
            assert!(extract_plan(text).is_none(), "{text:?}");
        }
        let many = "{".repeat(100_000);
        assert!(extract_plan(&many).is_none());
    }

    #[test]
    fn strip_removes_blocks_for_display() {
        let text = format!("Here is the plan.\n\n<planwire-plan>\n{FULL}\n</planwire-plan>\n");
        assert_eq!(strip_plan_block(&text), "Here is the plan.");
        let two = "A <planwire-plan>{}</planwire-plan>\n\n\n\nB <planwire-plan>{}</planwire-plan> C";
        assert_eq!(strip_plan_block(two), "A\n\nB  C");
        assert_eq!(strip_plan_block("no block"), "no block");
        assert_eq!(strip_plan_block("before <planwire-plan>{\"title\":"), "before");
    }
}

//! planwire's answer to OpenCode's `permission.asked`: under `serve` a permission the rules
//! leave at `ask` waits for a reply (`run` rejected it by itself and stopped the session), so
//! every request is answered here, by the read-only rules, and the person is never asked.
//!
//! - A read (`read`, `glob`, `grep`, `list`, `lsp`, `codesearch`, `skill`) and the planning
//!   tools that touch no file (`question`, `todowrite`, `todoread`, `task`) are allowed
//!   `once` — except a read of a `.env` file (OpenCode's defaults ask for those): its secrets
//!   would go to the model's provider, and the person, who would have been asked in
//!   OpenCode's own UI, is not here to say yes. Planning reads the code, not the secrets.
//! - Everything else is rejected **with a message**: one with a message is the tool's result
//!   and the agent goes on. A rejection without one (OpenCode's `RejectedError`, which it also
//!   gives every other request pending in the session when one is rejected) would end the
//!   turn, so `config.rs` sets `experimental.continue_loop_on_deny`.
//!   What asks here is a bash command with a redirection (`*>*` asks, see `config.rs`), and
//!   whatever a user's own rules set to `ask`.

use serde_json::{json, Value};

const ALLOWED: &[&str] = &[
    "read",
    "glob",
    "grep",
    "list",
    "lsp",
    "codesearch",
    "skill",
    "question",
    "todowrite",
    "todoread",
    "task",
];

/// The body of `POST /permission/:id/reply` for a request of `permission` on `patterns`.
pub fn reply(permission: &str, patterns: &[String]) -> Value {
    if ALLOWED.contains(&permission) && !patterns.iter().any(|p| is_env_file(p)) {
        return json!({ "reply": "once" });
    }
    json!({ "reply": "reject", "message": rejection(permission, patterns) })
}

/// A `.env` file (`.env`, `.env.local`, `config/.env.production`), not `.envrc`'s kin.
fn is_env_file(pattern: &str) -> bool {
    let name = pattern.rsplit('/').next().unwrap_or(pattern);
    name == ".env" || (name.starts_with(".env.") && !name.ends_with(".example") && !name.ends_with(".sample"))
}

fn rejection(permission: &str, patterns: &[String]) -> String {
    let what = patterns.join(", ");
    if patterns.iter().any(|p| is_env_file(p)) {
        return format!(
            "planwire does not read secrets while planning: {what} stays closed. Plan from the \
             code, and name the settings the change needs instead."
        );
    }
    match permission {
        "bash" => format!(
            "planwire plans in read-only mode: `{what}` is not allowed here. Run read-only commands \
             only, and redirect no output to a file."
        ),
        "edit" | "write" | "patch" | "multiedit" => {
            "planwire plans in read-only mode: no file may be changed. Describe the change in the plan instead."
                .to_owned()
        }
        "external_directory" => {
            format!("planwire plans in read-only mode inside the project only: {what} is outside it.")
        }
        "webfetch" | "websearch" => "planwire plans from the project alone: web access is not allowed.".to_owned(),
        "doom_loop" => {
            "planwire stops repeated identical tool calls: try another approach, or give your answer.".to_owned()
        }
        other => format!("planwire plans in read-only mode: `{other}` is not allowed here. Read and search only."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_allowed_once_and_the_rest_rejected_with_a_message() {
        assert_eq!(reply("read", &["src/main.rs".into()]), json!({ "reply": "once" }));
        assert_eq!(reply("question", &[]), json!({ "reply": "once" }));
        for secret in [".env", "/repo/.env.local", "config/.env.production"] {
            let r = reply("read", &[secret.into()]);
            assert_eq!(r["reply"], "reject", "{secret}");
            assert!(r["message"].as_str().unwrap().contains("secrets"), "{r}");
        }
        assert_eq!(reply("read", &[".env.example".into()]), json!({ "reply": "once" }));
        let r = reply("bash", &["cat src/main.rs > note.txt".into()]);
        assert_eq!(r["reply"], "reject");
        assert!(
            r["message"].as_str().unwrap().contains("`cat src/main.rs > note.txt`"),
            "{r}"
        );
        for p in ["edit", "external_directory", "webfetch", "doom_loop", "mystery"] {
            let r = reply(p, &["x".into()]);
            assert_eq!(r["reply"], "reject", "{p}");
            assert!(r["message"].as_str().unwrap().starts_with("planwire "), "{p}: {r}");
        }
    }
}

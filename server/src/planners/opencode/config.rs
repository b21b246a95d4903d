//! The configuration of an `opencode serve` pass: its environment, the read-only permission
//! rules (merged over the user's own config), and the session title.
//!
//! The `plan` agent still runs any bash command, so the read-only rules go in
//! `OPENCODE_CONFIG_CONTENT` (merged over the user's own config, which keeps its providers and
//! models), both as the top-level `permission` (which also binds subagents) and as
//! `agent.plan.permission`, and again in `OPENCODE_PERMISSION`. A tool whose permission is
//! deny-all leaves the model's tool list (`edit`, `write`, `webfetch`); `question` stays
//! allowed, so the agent can ask.

use serde_json::Value;

use super::super::truncate_chars;

/// The Basic-auth user name (OpenCode's default, set explicitly so an inherited
/// `OPENCODE_SERVER_USERNAME` cannot change it).
pub const USER: &str = "opencode";

/// The session title when the ticket has none (a title saves OpenCode a title-generation
/// request to the model).
pub const DEFAULT_TITLE: &str = "planwire plan";
/// Longest title passed, in characters.
const TITLE_MAX: usize = 100;

/// Bash rules of the read-only permission set. OpenCode applies the last matching rule, so
/// the catch-all `deny` comes first, then the read-only commands, then denials of the flags
/// that let those commands write or run something else. (The first two groups were checked
/// against the real CLI: `git status --short` ran, `touch` was denied.) Last, any command
/// with a `>` asks: a rule's pattern is matched against the whole command, redirection
/// included, so `cat a > b` matched `cat *` and wrote `b`. The ask reaches planwire, which
/// rejects it with a message (`permissions.rs`), and the agent goes on.
const BASH_RULES: &[(&str, &str)] = &[
    ("*", "deny"),
    ("ls", "allow"),
    ("ls *", "allow"),
    ("pwd", "allow"),
    ("cat *", "allow"),
    ("head *", "allow"),
    ("tail *", "allow"),
    ("wc *", "allow"),
    ("rg *", "allow"),
    ("grep *", "allow"),
    ("find *", "allow"),
    ("tree *", "allow"),
    ("git status*", "allow"),
    ("git diff*", "allow"),
    ("git log*", "allow"),
    ("git show*", "allow"),
    ("git branch", "allow"),
    ("git ls-files*", "allow"),
    ("git rev-parse*", "allow"),
    ("find *-delete*", "deny"),
    ("find *-exec*", "deny"),
    ("find *-ok*", "deny"),
    ("find *-fprint*", "deny"),
    ("find *-fls*", "deny"),
    ("rg *--pre*", "deny"),
    ("git *--output*", "deny"),
    ("tree *-o *", "deny"),
    ("*>*", "ask"),
];

/// The read-only permission object, as JSON text (built by hand: rule order matters, and
/// `serde_json` maps here are sorted).
pub fn readonly_permission() -> String {
    let bash: Vec<String> = BASH_RULES
        .iter()
        .map(|(pattern, action)| format!("{}:{}", Value::from(*pattern), Value::from(*action)))
        .collect();
    format!(
        r#"{{"edit":"deny","webfetch":"deny","websearch":"deny","external_directory":"deny","bash":{{{}}}}}"#,
        bash.join(",")
    )
}

/// `OPENCODE_CONFIG_CONTENT`: the read-only permission set as the top-level `permission`
/// and as `agent.plan.permission`. When the environment already holds a config object
/// (`inherited`), its other keys are kept, its `permission` and `agent.plan.permission` are
/// replaced.
pub fn config_content(inherited: Option<&str>) -> String {
    let perm = readonly_permission();
    let plan_perm = format!(r#""permission":{perm}"#);
    let inherited = inherited
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .and_then(|v| match v {
            Value::Object(map) => Some(map),
            _ => None,
        });
    let Some(mut map) = inherited else {
        return format!(
            r#"{{"permission":{perm},"agent":{{"plan":{{{plan_perm}}}}},"experimental":{}}}"#,
            experimental(None)
        );
    };
    map.remove("permission");
    let experimental = experimental(map.remove("experimental"));
    let entry = |k: String, v: Value| format!("{}:{}", Value::String(k), v);
    let mut agents: Vec<String> = Vec::new();
    let mut plan: Vec<String> = Vec::new();
    if let Some(Value::Object(mut other_agents)) = map.remove("agent") {
        if let Some(Value::Object(mut old_plan)) = other_agents.remove("plan") {
            old_plan.remove("permission");
            plan.extend(old_plan.into_iter().map(|(k, v)| entry(k, v)));
        }
        agents.extend(other_agents.into_iter().map(|(k, v)| entry(k, v)));
    }
    plan.push(plan_perm);
    agents.push(format!(r#""plan":{{{}}}"#, plan.join(",")));
    let mut parts: Vec<String> = map.into_iter().map(|(k, v)| entry(k, v)).collect();
    parts.push(format!(r#""permission":{perm}"#));
    parts.push(format!(r#""agent":{{{}}}"#, agents.join(",")));
    parts.push(format!(r#""experimental":{experimental}"#));
    format!("{{{}}}", parts.join(","))
}

/// `experimental`, the inherited object's other keys kept, with `continue_loop_on_deny` on.
/// When planwire rejects one permission request, OpenCode also rejects every other request
/// pending in the session, without a message (its `RejectedError`), and by default such a
/// rejection ends the turn: two tool calls in one step, a redirect and a `.env` read, ended
/// the plan without an answer. With the flag, each rejection is only that tool's result.
fn experimental(inherited: Option<Value>) -> Value {
    let mut map = match inherited {
        Some(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    };
    map.insert("continue_loop_on_deny".into(), Value::Bool(true));
    Value::Object(map)
}

/// The session title: the ticket's title on one line, without leading dashes, cut at
/// [`TITLE_MAX`] characters (a title saves OpenCode a title-generation request).
pub fn session_title(title: Option<&str>) -> String {
    let flat: String = title
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let words: Vec<&str> = flat.split_whitespace().collect();
    let joined = words.join(" ");
    let t = joined.trim_start_matches(['-', ' ']);
    if t.is_empty() {
        DEFAULT_TITLE.to_string()
    } else {
        truncate_chars(t, TITLE_MAX)
    }
}

/// Environment for the server: its password, the `cli` client (which offers the `question`
/// tool), and what every OpenCode planwire runs gets ([`readonly_env`]).
pub fn env(inherited_config: Option<&str>, password: &str) -> Vec<(String, String)> {
    let mut env = vec![
        ("OPENCODE_SERVER_USERNAME".into(), USER.into()),
        ("OPENCODE_SERVER_PASSWORD".into(), password.into()),
        ("OPENCODE_CLIENT".into(), "cli".into()),
    ];
    env.extend(readonly_env(inherited_config));
    env
}

/// What every OpenCode planwire runs gets (as `opencode serve` or as the ACP agent `opencode
/// acp`): no models.dev catalogue fetch (offline it logs an error and carries on), no
/// autoupdate, LSP download or sharing, no project config, and the read-only permission rules.
/// `inherited_config` is the caller's own `OPENCODE_CONFIG_CONTENT`, merged in.
pub fn readonly_env(inherited_config: Option<&str>) -> Vec<(String, String)> {
    vec![
        ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
        ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD".into(), "1".into()),
        ("OPENCODE_DISABLE_SHARE".into(), "1".into()),
        // A repository's opencode.json(c) and .opencode/ (plugins, agents, permission rules,
        // MCP servers) stay out: a project plugin hung the run installing its dependencies.
        // AGENTS.md goes too: planwire adds it to the prompt itself (planners/instructions.rs).
        ("OPENCODE_DISABLE_PROJECT_CONFIG".into(), "1".into()),
        ("OPENCODE_CONFIG_CONTENT".into(), config_content(inherited_config)),
        ("OPENCODE_PERMISSION".into(), readonly_permission()),
    ]
}

/// A fresh random password for one server (two v4 UUIDs: 244 random bits).
pub fn password() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_one_clean_line() {
        assert_eq!(session_title(None), DEFAULT_TITLE);
        assert_eq!(session_title(Some("Fix\nthe  bug")), "Fix the bug");
        assert_eq!(session_title(Some("--dangerously")), "dangerously");
        let long = "é".repeat(300);
        assert_eq!(session_title(Some(&long)).chars().count(), TITLE_MAX + 1);
    }

    /// For `tests/fixtures/opencode/record_serve.py` (RECORD_CONFIG_CONTENT).
    #[test]
    #[ignore = "prints planwire's OPENCODE_CONFIG_CONTENT"]
    fn print_config_content() {
        #[allow(clippy::print_stdout)]
        {
            println!("{}", config_content(None));
        }
    }

    #[test]
    fn passwords_are_long_and_fresh() {
        let (a, b) = (password(), password());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }

    #[test]
    fn env_sets_readonly_rules_in_config_content_and_permission() {
        let env = env(None, "pw");
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(get("OPENCODE_DISABLE_MODELS_FETCH"), "1");
        assert_eq!(get("OPENCODE_SERVER_PASSWORD"), "pw");
        assert_eq!(get("OPENCODE_SERVER_USERNAME"), USER);
        let content: Value = serde_json::from_str(&get("OPENCODE_CONFIG_CONTENT")).unwrap();
        let perm: Value = serde_json::from_str(&readonly_permission()).unwrap();
        assert_eq!(content["permission"], perm);
        assert_eq!(content["agent"]["plan"]["permission"], perm);
        assert_eq!(perm["edit"], "deny");
        assert_eq!(perm["external_directory"], "deny");
        assert_eq!(perm["bash"]["git status*"], "allow");
        let permission: Value = serde_json::from_str(&get("OPENCODE_PERMISSION")).unwrap();
        assert_eq!(permission, perm);
        // Rule order: the catch-all deny first (OpenCode applies the last match).
        let text = readonly_permission();
        let bash = &text[text.find(r#""bash":{"#).unwrap()..];
        assert!(bash.starts_with(r#""bash":{"*":"deny","ls":"allow""#), "{bash}");
        assert!(bash.find(r#""git diff*""#) < bash.find(r#""git *--output*""#));
        // Redirections ask last, so they win over every allow rule.
        assert!(bash.ends_with(r#""*>*":"ask"}}"#), "{bash}");
        // `question` is not denied: the agent can ask.
        assert!(perm.get("question").is_none());
        // A rejected permission is that tool's result; it does not end the turn.
        assert_eq!(
            content["experimental"],
            serde_json::json!({ "continue_loop_on_deny": true })
        );
    }

    #[test]
    fn inherited_config_content_is_merged() {
        let inherited = r#"{"model":"mock/mock-model","permission":{"bash":"allow"},"agent":{"plan":{"model":"x/y","permission":{"edit":"allow"}},"build":{"model":"z"}},"experimental":{"batch_tool":true,"continue_loop_on_deny":false}}"#;
        let merged: Value = serde_json::from_str(&config_content(Some(inherited))).unwrap();
        let perm: Value = serde_json::from_str(&readonly_permission()).unwrap();
        assert_eq!(merged["model"], "mock/mock-model");
        assert_eq!(merged["permission"], perm);
        assert_eq!(merged["agent"]["plan"]["permission"], perm);
        assert_eq!(merged["agent"]["plan"]["model"], "x/y");
        assert_eq!(merged["agent"]["build"]["model"], "z");
        assert_eq!(
            merged["experimental"],
            serde_json::json!({ "batch_tool": true, "continue_loop_on_deny": true })
        );
        // Not an object: ignored.
        assert_eq!(config_content(Some("[1]")), config_content(None));
        assert_eq!(config_content(Some("{oops")), config_content(None));
    }
}

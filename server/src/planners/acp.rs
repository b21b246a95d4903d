//! ACP agents as planners: tool `acp:<name>`, where the name is a preset or a key of
//! `initializationOptions.acpAgents` (and of the terminal's `--acp-agent`).
//!
//! planwire is the agent's ACP client (`acp/client.rs`): it starts it under the same
//! supervision and sandbox as any planner, selects its plan or read-only mode before the
//! first prompt (`acp/updates.rs` has the heuristic), refuses every permission that writes,
//! executes or leaves plan mode, serves file reads only inside the roots, and turns its
//! `session/update`s into planwire's events. The facts behind each preset (commands, mode
//! ids, permission shapes, traps) were measured against the real agents; see README.md.

mod client;
pub(crate) mod updates;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use planwire_protocol::AcpAgentOptions;

use super::driver::{PassRequest, Prepared};
use super::writable::Env;
use super::Tool;
use crate::config::Config;
use crate::supervisor::SpawnSpec;
use planwire_sandbox::Writable;

/// The longest agent name.
const NAME_MAX: usize = 64;
/// At most this many distinct agent names are interned (each is kept for the process's life).
const NAMES_MAX: usize = 256;

/// An ACP agent's name, interned: `acp:<name>` as a `&'static str`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AcpName(&'static str);

impl AcpName {
    /// The name of `acp:<name>`, when it is a valid name (letters, digits, `.`, `_`, `-`).
    pub fn intern(name: &str) -> Option<AcpName> {
        let valid = !name.is_empty()
            && name.len() <= NAME_MAX
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !valid {
            return None;
        }
        static NAMES: OnceLock<Mutex<Vec<&'static str>>> = OnceLock::new();
        let mut names = NAMES.get_or_init(Mutex::default).lock().expect("acp names");
        let full = format!("acp:{name}");
        if let Some(known) = names.iter().find(|n| **n == full) {
            return Some(AcpName(known));
        }
        if names.len() >= NAMES_MAX {
            return None;
        }
        let leaked: &'static str = Box::leak(full.into_boxed_str());
        names.push(leaked);
        Some(AcpName(leaked))
    }

    /// `acp:<name>`.
    pub fn tool_name(self) -> &'static str {
        self.0
    }

    /// `<name>`.
    pub fn agent(self) -> &'static str {
        &self.0[4..]
    }

    pub fn install_hint(self) -> &'static str {
        match preset(self.agent()) {
            Some(p) => p.install,
            None => {
                "configure it: initializationOptions.acpAgents.<name> = {command, args?, env?}, \
                 or `--acp-agent NAME=COMMAND` in the terminal"
            }
        }
    }
}

/// A built-in ACP agent.
pub struct Preset {
    pub name: &'static str,
    pub command: &'static str,
    pub args: &'static [&'static str],
    /// The id of its plan (or read-only) mode.
    pub mode: &'static str,
    pub install: &'static str,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "opencode",
        command: "opencode",
        args: &["acp"],
        mode: "plan",
        install: "install OpenCode: npm install -g opencode-ai (its plan mode is the `mode` config option)",
    },
    Preset {
        name: "qwen",
        command: "qwen",
        args: &["--acp"],
        mode: "plan",
        install: "install Qwen Code: npm install -g @qwen-code/qwen-code",
    },
    Preset {
        name: "gemini",
        command: "gemini",
        args: &["--acp"],
        mode: "plan",
        install: "install Gemini CLI: npm install -g @google/gemini-cli",
    },
    Preset {
        name: "claude-acp",
        command: "claude-code-acp",
        args: &[],
        mode: "plan",
        install: "install Claude Code's ACP adapter: npm install -g @zed-industries/claude-code-acp",
    },
    Preset {
        name: "codex-acp",
        command: "codex-acp",
        args: &[],
        mode: "read-only",
        install: "install Codex's ACP adapter: npm install -g @zed-industries/codex-acp",
    },
];

pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// How one ACP agent is started and which mode it plans in.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// The preset's or configured mode id, tried first.
    pub mode: Option<String>,
    pub allow_no_plan_mode: bool,
}

/// The agent's spec: the configured one, else the preset.
pub fn spec(name: &str, config: &Config) -> Option<AgentSpec> {
    if let Some(o) = config.acp_agents.get(name) {
        return Some(from_options(name, o));
    }
    let p = preset(name)?;
    Some(AgentSpec {
        name: name.to_owned(),
        command: p.command.to_owned(),
        args: p.args.iter().map(|a| (*a).to_owned()).collect(),
        env: BTreeMap::new(),
        mode: Some(p.mode.to_owned()),
        allow_no_plan_mode: false,
    })
}

fn from_options(name: &str, o: &AcpAgentOptions) -> AgentSpec {
    AgentSpec {
        name: name.to_owned(),
        command: o.command.clone(),
        args: o.args.clone(),
        env: o.env.clone(),
        mode: o.mode.clone().or_else(|| preset(name).map(|p| p.mode.to_owned())),
        allow_no_plan_mode: o.allow_no_plan_mode,
    }
}

/// The agents worth listing: every configured one, and the presets found on this machine.
pub fn listed(config: &Config) -> Vec<AcpName> {
    let mut names: Vec<&str> = config.acp_agents.keys().map(String::as_str).collect();
    for p in PRESETS {
        if !names.contains(&p.name) && find_program(p.command).is_some() {
            names.push(p.name);
        }
    }
    names.into_iter().filter_map(AcpName::intern).collect()
}

/// The agent's program: `planners.acp:<name>.path`, else its command (a path, or a name on
/// `PATH`). The `opencode` preset uses OpenCode's native binary, found as for `opencode`.
pub fn locate(name: AcpName, config: &Config) -> Option<PathBuf> {
    if let Some(p) = config.planner_paths.get(name.tool_name()) {
        return super::is_executable(p).then(|| p.clone());
    }
    let spec = spec(name.agent(), config)?;
    if name.agent() == "opencode" && !config.acp_agents.contains_key("opencode") {
        return super::locate(Tool::OpenCode, config);
    }
    find_program(&spec.command)
}

fn find_program(command: &str) -> Option<PathBuf> {
    let p = Path::new(command);
    if p.is_absolute() {
        return super::is_executable(p).then(|| p.to_owned());
    }
    if command.contains('/') {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| super::is_executable(p))
}

/// Where an ACP agent may write under the OS sandbox (see [`super::writable`]): a preset that
/// is a CLI planwire also drives natively writes where that one does; qwen and gemini keep
/// their state in ~/.qwen and ~/.gemini; any other agent gets nothing more.
pub fn writable(name: AcpName, env: &Env) -> Vec<Writable> {
    if let Some(native) = native_tool(name) {
        return native.writable(env);
    }
    state_dir(name)
        .and_then(|rel| env.home(rel))
        .map(|p| Writable::dir(p, "the ACP agent's state: settings, sessions, logs"))
        .into_iter()
        .collect()
}

/// The native planner whose state an ACP preset shares (its sandbox allows the same writes).
fn native_tool(name: AcpName) -> Option<Tool> {
    match name.agent() {
        "opencode" => Some(Tool::OpenCode),
        "claude-acp" => Some(Tool::Claude),
        "codex-acp" => Some(Tool::Codex),
        _ => None,
    }
}

/// The state directory under `HOME` of a preset with no native planner.
fn state_dir(name: AcpName) -> Option<&'static str> {
    match name.agent() {
        "qwen" => Some(".qwen"),
        "gemini" => Some(".gemini"),
        _ => None,
    }
}

/// One pass with an ACP agent: its process (argv from its spec only: the prompt travels over
/// ACP), and the client that drives it.
pub fn prepare(name: AcpName, program: &Path, req: &PassRequest, config: &Config) -> Prepared {
    let spec = spec(name.agent(), config).unwrap_or_else(|| AgentSpec {
        name: name.agent().to_owned(),
        command: program.display().to_string(),
        args: Vec::new(),
        env: BTreeMap::new(),
        mode: None,
        allow_no_plan_mode: false,
    });
    let mut env: Vec<(String, String)> = spec.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    // claude-code-acp reads any IS_SANDBOX as leave to offer bypassPermissions and passes
    // Claude Code a flag that, as root, it accepts only with IS_SANDBOX=1: session/new then
    // fails. planwire selects plan mode either way.
    if std::env::var_os("IS_SANDBOX").is_some() && !spec.env.contains_key("IS_SANDBOX") {
        env.push(("IS_SANDBOX".into(), "1".into()));
    }
    if spec.command == "opencode" || program.file_name().is_some_and(|f| f == "opencode") {
        // OpenCode's plan agent still runs any shell command without asking: planwire's own
        // read-only permission rules (those of the `opencode` planner) apply in ACP mode too.
        let inherited = std::env::var("OPENCODE_CONFIG_CONTENT").ok();
        env.extend(super::opencode::config::readonly_env(inherited.as_deref()));
    }
    let mut recorded = spec.args.clone();
    recorded.push(format!("(ACP agent {})", spec.name));
    Prepared {
        recorded_args: recorded,
        spawn: SpawnSpec {
            program: program.to_owned(),
            args: spec.args.clone(),
            cwd: req.root.clone(),
            env,
            stdin_pipe: true,
            // The runner puts the pass's OS sandbox here, as for any planner.
            sandbox: None,
        },
        driver: Box::new(client::AcpDriver::new(spec, req.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwire_protocol::InitializationOptions;

    #[test]
    fn names_are_interned_and_checked() {
        let a = AcpName::intern("qwen").unwrap();
        assert_eq!(a, AcpName::intern("qwen").unwrap());
        assert_eq!(a.tool_name(), "acp:qwen");
        assert_eq!(a.agent(), "qwen");
        assert!(AcpName::intern("").is_none());
        assert!(AcpName::intern("has space").is_none());
        assert!(AcpName::intern("--flag;rm").is_none());
        assert_eq!(Tool::parse("acp:qwen"), Some(Tool::Acp(a)));
        assert_eq!(Tool::parse("acp:qwen").unwrap().name(), "acp:qwen");
        assert_eq!(Tool::parse("acp:"), None);
    }

    #[test]
    fn configured_agents_override_presets_and_keep_the_preset_mode() {
        let mut options = InitializationOptions::default();
        options.acp_agents.insert(
            "qwen".into(),
            AcpAgentOptions {
                command: "/opt/qwen/bin/qwen".into(),
                args: vec!["--acp".into(), "--debug".into()],
                ..AcpAgentOptions::default()
            },
        );
        options.acp_agents.insert(
            "goose".into(),
            AcpAgentOptions {
                command: "goose".into(),
                args: vec!["acp".into()],
                allow_no_plan_mode: true,
                ..AcpAgentOptions::default()
            },
        );
        let config = Config::from_options(&options);
        let q = spec("qwen", &config).unwrap();
        assert_eq!(q.command, "/opt/qwen/bin/qwen");
        assert_eq!(q.mode.as_deref(), Some("plan"));
        let g = spec("goose", &config).unwrap();
        assert_eq!(g.mode, None);
        assert!(g.allow_no_plan_mode);
        assert_eq!(spec("gemini", &config).unwrap().args, ["--acp"]);
        assert!(spec("nobody", &config).is_none());
        let names: Vec<&str> = listed(&config).iter().map(|n| n.agent()).collect();
        assert!(names.contains(&"qwen") && names.contains(&"goose"), "{names:?}");
    }

    #[test]
    fn the_prompt_never_reaches_argv() {
        let config = Config::from_options(&InitializationOptions::default());
        let req = PassRequest {
            prompt: "Plan it. --yolo".into(),
            ..PassRequest::default()
        };
        let p = prepare(
            AcpName::intern("qwen").unwrap(),
            Path::new("/usr/bin/qwen"),
            &req,
            &config,
        );
        assert_eq!(p.spawn.args, ["--acp"]);
        assert!(p.spawn.stdin_pipe);
        assert!(!p.recorded_args.iter().any(|a| a.contains("Plan it")));
    }

    #[test]
    fn a_preset_writes_where_its_native_cli_does_and_other_agents_nowhere() {
        use crate::planners::writable::tests::{env, paths};
        let of = |name: &str| writable(AcpName::intern(name).unwrap(), &env(&[]));
        assert_eq!(of("claude-acp"), Tool::Claude.writable(&env(&[])));
        assert_eq!(of("codex-acp"), Tool::Codex.writable(&env(&[])));
        assert_eq!(of("opencode"), Tool::OpenCode.writable(&env(&[])));
        assert_eq!(paths(&of("qwen")), ["/h/.qwen"]);
        assert_eq!(paths(&of("gemini")), ["/h/.gemini"]);
        assert_eq!(of("goose"), []);
    }
}

//! Settings of one server session, from `initializationOptions` with defaults.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use planwire_protocol::{AcpAgentOptions, InitializationOptions, SandboxMode, Skill};

#[derive(Debug, Clone)]
pub struct Config {
    pub db_path: PathBuf,
    pub stop_grace: Duration,
    pub hard_timeout: Duration,
    pub idle_timeout: Duration,
    /// How long a live question may wait for the person before the run is stopped (the
    /// question stays answerable: the answer resumes the session).
    pub question_timeout: Duration,
    /// How long a write waits for a lock another process holds on the database.
    pub busy_timeout: Duration,
    pub default_tool: String,
    /// Explicit CLI paths, by tool name.
    pub planner_paths: BTreeMap<String, PathBuf>,
    /// The user's default output language (`initializationOptions.outputLanguage`).
    pub output_language: Option<String>,
    /// The user's default skills, added to every project's prompts.
    pub skills: Vec<Skill>,
    /// The `locale` the client sent in `initialize`: the output language when none is set.
    pub locale: Option<String>,
    /// ACP agents configured by name (`initializationOptions.acpAgents`), over the presets.
    pub acp_agents: BTreeMap<String, AcpAgentOptions>,
    /// Linked-research passes that run at the same time.
    pub research_at_once: usize,
    /// Read GitHub references in descriptions with gh before planning.
    pub references: bool,
    /// The OS sandbox around planner processes (`initializationOptions.sandbox`).
    pub sandbox: SandboxMode,
}

impl Config {
    pub fn from_options(opts: &InitializationOptions) -> Config {
        let ms = |v: Option<u64>, default: u64| Duration::from_millis(v.unwrap_or(default));
        Config {
            db_path: crate::store::default_path(opts.db_path.as_deref()),
            stop_grace: ms(opts.stop_grace_ms, 3_000),
            hard_timeout: ms(opts.hard_timeout_ms, 30 * 60_000),
            idle_timeout: ms(opts.idle_timeout_ms, 10 * 60_000),
            question_timeout: ms(opts.question_timeout_ms, 60 * 60_000),
            busy_timeout: ms(opts.busy_timeout_ms, 30_000),
            default_tool: opts.default_tool.clone().unwrap_or_else(|| "claude".into()),
            planner_paths: opts
                .planners
                .iter()
                .filter_map(|(tool, o)| Some((tool.clone(), PathBuf::from(o.path.as_ref()?))))
                .collect(),
            output_language: opts
                .output_language
                .as_deref()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned),
            skills: opts.skills.clone(),
            locale: None,
            acp_agents: opts.acp_agents.clone(),
            research_at_once: opts.research_concurrency.map_or(3, |n| n.max(1) as usize),
            references: opts.references.unwrap_or_default() != planwire_protocol::ReferencesMode::Off,
            sandbox: opts.sandbox.unwrap_or_default(),
        }
    }
}

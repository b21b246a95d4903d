//! The terminal front: `planwire plan`, `tickets`, `show`, `export`, `doctor`, `acp` (the
//! ACP agent on stdio, `crate::acp`) and `mcp` (the MCP server on stdio, `crate::mcp`).
//!
//! `plan`, `tickets`, `show` and `export` run the server in-process ([`client::Client`]) and speak the
//! protocol to it, so a terminal plan takes the same path as an editor's (handlers, runner,
//! store, stop). `doctor` checks the machine directly. Only this module writes to stdout, and
//! only through an explicit `std::io::stdout().lock()` writer: `--stdio` mode never does.

pub mod client;
pub mod doctor;
pub mod output;
pub mod plan;
pub mod tickets;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use tracing_subscriber::EnvFilter;

/// The terminal subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Plan a ticket in the terminal: stream what the planner does, print the plan.
    Plan(PlanArgs),
    /// List tickets: id, status, title (and root, unless one root is asked for).
    Tickets(TicketsArgs),
    /// Show a ticket: its description, plan, versions, usage and runs with their timing.
    Show(ShowArgs),
    /// Write a ticket's plan into its repository as markdown (default
    /// .planwire/plans/<ticket>-<slug>.md under its root).
    Export(ExportArgs),
    /// Check the planners, the database and logging; exits non-zero when no planner is usable.
    Doctor(DoctorArgs),
    /// Serve the Agent Client Protocol on stdin/stdout (for Zed, JetBrains, Emacs, Neovim).
    Acp(AcpArgs),
    /// Serve the Model Context Protocol on stdin/stdout (for Claude Code, Codex, Copilot,
    /// Cursor, OpenCode): plan tickets as tools, plans as resources.
    Mcp(AcpArgs),
}

#[derive(Args)]
pub struct DbArg {
    /// The SQLite file; else PLANWIRE_DB, else $XDG_DATA_HOME/planwire/planwire.db.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

impl DbArg {
    /// The database path, resolved like the server does for `initializationOptions.dbPath`.
    pub fn path(&self) -> PathBuf {
        let given = self.db.as_ref().map(|p| p.display().to_string());
        crate::store::default_path(given.as_deref())
    }

    /// Where the path came from, for `doctor`.
    pub fn source(&self) -> &'static str {
        if self.db.as_ref().is_some_and(|p| !p.as_os_str().is_empty()) {
            "--db"
        } else if std::env::var_os("PLANWIRE_DB").is_some_and(|p| !p.is_empty()) {
            "PLANWIRE_DB"
        } else if std::env::var_os("XDG_DATA_HOME").is_some_and(|p| !p.is_empty()) {
            "$XDG_DATA_HOME"
        } else {
            "the default under $HOME"
        }
    }
}

#[derive(Args)]
pub struct PlanArgs {
    /// The repository to plan in.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
    /// The ticket's title.
    #[arg(long, value_name = "T")]
    pub title: String,
    /// The ticket's description (markdown).
    #[arg(long, value_name = "D", conflicts_with = "description_file")]
    pub description: Option<String>,
    /// Read the description from a file (`-` for stdin).
    #[arg(long, value_name = "F")]
    pub description_file: Option<PathBuf>,
    /// The planner: claude, opencode, codex, script, or acp:NAME (an ACP agent); else claude.
    #[arg(long, value_name = "TOOL")]
    pub tool: Option<String>,
    /// The model passed to the planner; for `script`, the script (demo, slow, questions, fail).
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    #[command(flatten)]
    pub agents: AcpAgentArgs,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Args)]
pub struct TicketsArgs {
    /// Only the tickets of this repository.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Args)]
pub struct ShowArgs {
    /// The ticket's id (as `planwire tickets` lists it).
    pub ticket: i64,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Args)]
pub struct ExportArgs {
    /// The ticket's id (as `planwire tickets` lists it).
    pub ticket: i64,
    /// Where to write: absolute, or relative to the ticket's root.
    pub path: Option<String>,
    /// The plan version (default: the latest).
    #[arg(long = "plan-version", value_name = "N")]
    pub version: Option<u32>,
    /// Replace the file if it exists.
    #[arg(long)]
    pub overwrite: bool,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Args)]
pub struct AcpArgs {
    /// The planner of new sessions (`acp`) or tickets (`mcp`); a session's `planner` option or
    /// a `create_ticket` call's `tool` changes it.
    #[arg(long, value_name = "TOOL")]
    pub tool: Option<String>,
    /// The model of new sessions or tickets; for `script`, the script.
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    #[command(flatten)]
    pub agents: AcpAgentArgs,
    #[command(flatten)]
    pub db: DbArg,
}

#[derive(Args)]
pub struct AcpAgentArgs {
    /// An ACP agent to plan with, as tool `acp:NAME`: `NAME=COMMAND [ARG…]` (split on
    /// spaces, never run through a shell). Repeatable.
    #[arg(long = "acp-agent", value_name = "NAME=COMMAND")]
    pub acp_agent: Vec<String>,
}

impl AcpAgentArgs {
    /// As `initializationOptions.acpAgents`: `{name: {command, args}}`.
    pub fn options(&self) -> Result<serde_json::Map<String, serde_json::Value>, String> {
        let mut agents = serde_json::Map::new();
        for spec in &self.acp_agent {
            let (name, command) = spec
                .split_once('=')
                .ok_or_else(|| format!("--acp-agent {spec:?}: expected NAME=COMMAND [ARG…]"))?;
            let mut words = command.split_whitespace();
            let program = words
                .next()
                .ok_or_else(|| format!("--acp-agent {spec:?}: the command is empty"))?;
            let args: Vec<&str> = words.collect();
            agents.insert(
                name.trim().to_owned(),
                serde_json::json!({ "command": program, "args": args }),
            );
        }
        Ok(agents)
    }
}

#[derive(Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub agents: AcpAgentArgs,
    #[command(flatten)]
    pub db: DbArg,
}

/// The effective log filter and where it came from.
pub struct LogSetting {
    pub filter: String,
    pub source: &'static str,
}

/// Sets up tracing on stderr (never stdout): `--log-level`, else `PLANWIRE_LOG`, else
/// `default` (info for the server, warn in the terminal so the transcript stays readable).
pub fn init_logging(flag: Option<&str>, default: &str) -> LogSetting {
    let env = std::env::var("PLANWIRE_LOG").ok().filter(|v| !v.is_empty());
    let setting = match (flag, env) {
        (Some(f), _) => LogSetting {
            filter: f.to_owned(),
            source: "--log-level",
        },
        (None, Some(e)) => LogSetting {
            filter: e,
            source: "PLANWIRE_LOG",
        },
        (None, None) => LogSetting {
            filter: default.to_owned(),
            source: "default",
        },
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(EnvFilter::try_new(&setting.filter).unwrap_or_else(|_| EnvFilter::new(default)))
        .init();
    setting
}

/// Runs a terminal subcommand; returns the process exit code.
pub fn run(command: Command, log: LogSetting) -> i32 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(async move {
        match command {
            Command::Plan(args) => plan::run(args).await,
            Command::Tickets(args) => tickets::list(args).await,
            Command::Show(args) => tickets::show(args).await,
            Command::Export(args) => tickets::export(args).await,
            Command::Doctor(args) => doctor::run(args, log).await,
            Command::Acp(args) => match args.agents.options() {
                Ok(acp_agents) => {
                    let options = crate::acp::Options {
                        db: Some(args.db.path()),
                        tool: args.tool,
                        model: args.model,
                        acp_agents,
                    };
                    crate::acp::serve_stdio(options).await
                }
                Err(e) => fail(e),
            },
            Command::Mcp(args) => match args.agents.options() {
                Ok(acp_agents) => {
                    let options = crate::mcp::Options {
                        db: Some(args.db.path()),
                        tool: args.tool,
                        model: args.model,
                        acp_agents,
                    };
                    crate::mcp::serve_stdio(options).await
                }
                Err(e) => fail(e),
            },
        }
    });
    // A blocking read of an answer from stdin may still wait: do not wait for it.
    runtime.shutdown_background();
    code
}

/// An error line on stderr, `planwire: …`.
pub(crate) fn fail(message: impl std::fmt::Display) -> i32 {
    output::error_line(&format!("planwire: {message}"));
    1
}

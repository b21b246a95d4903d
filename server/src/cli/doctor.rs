//! `planwire doctor`: each planner (path, version, supported, what is missing), the database
//! (its path, resolved like the server's, and its state in words: missing, ready, damaged,
//! foreign, newer, locked, on a full disk; checked without creating or changing it), the OS
//! sandbox (enforced or why not) and where logs go. Exits 1 when no real planner (claude,
//! opencode, codex) is usable, or when the database cannot be used; the `script` planner is a
//! demo.

use std::path::PathBuf;
use std::time::Duration;

use planwire_protocol::{InitializationOptions, PlannerInfo};

use super::output::{paint, print_lines, stdout_color, Style};
use super::{DoctorArgs, LogSetting};
use crate::config::Config;
use crate::planners::{detect, Tool};
use crate::store::{self, human_bytes, Health, StoreError};

/// One planner as the doctor judges it.
struct Verdict {
    info: PlannerInfo,
    usable: bool,
    /// What is missing or wrong, when not usable.
    problem: Option<String>,
}

pub async fn run(args: DoctorArgs, log: LogSetting) -> i32 {
    let color = stdout_color();
    let ok = |t: &str| paint(t, Style::Green, color);
    let bad = |t: &str| paint(t, Style::Red, color);
    let db_path = args.db.path();
    let acp_agents = match args
        .agents
        .options()
        .map(serde_json::Value::Object)
        .map(serde_json::from_value)
    {
        Ok(Ok(agents)) => agents,
        Ok(Err(e)) => return super::fail(format!("--acp-agent: {e}")),
        Err(e) => return super::fail(e),
    };
    let options = InitializationOptions {
        db_path: Some(db_path.display().to_string()),
        acp_agents,
        ..InitializationOptions::default()
    };
    let config = Config::from_options(&options);
    let health = store::check(&db_path, Duration::from_secs(2));
    let planners = detect::detect_all(&config, None).await;
    let verdicts: Vec<Verdict> = planners.into_iter().map(judge).collect();

    let mut lines = vec![
        format!("planwire {}", env!("CARGO_PKG_VERSION")),
        String::new(),
        "Planners".into(),
    ];
    for v in &verdicts {
        let i = &v.info;
        let mark = if v.usable { ok("ok ") } else { bad("no ") };
        let version = i.version.as_deref().unwrap_or("version unknown");
        let mut line = match (&i.path, Tool::parse(&i.tool)) {
            (_, Some(Tool::Script)) => {
                format!(
                    "  {mark} {:<9} built in (demo planner, no API key): --tool script",
                    i.tool
                )
            }
            (Some(path), _) => format!("  {mark} {:<9} {version}  {path}", i.tool),
            (None, _) => format!("  {mark} {:<9} not found", i.tool),
        };
        if i.found && !i.supported {
            line.push_str("  (unsupported version)");
        }
        lines.push(line);
        if let Some(problem) = &v.problem {
            lines.push(format!("             missing: {problem}"));
        }
    }

    lines.push(String::new());
    lines.push("Database".into());
    lines.push(format!("  {}  (from {})", db_path.display(), args.db.source()));
    let (db_ok, state) = match health {
        Health::Missing => (true, "does not exist yet: planwire creates it on first use".to_owned()),
        Health::Ready { version, free } => {
            let free = free.map(|f| format!(", {} free on its disk", human_bytes(f))).unwrap_or_default();
            (true, format!("opens (schema version {version}){free}"))
        }
        Health::Full { version, free } => (
            false,
            format!(
                "opens (schema version {version}), but the disk holding it is full ({} free):                  runs would fail with storage_full",
                human_bytes(free)
            ),
        ),
        Health::Problem(StoreError::Locked { holder, .. }) => (
            false,
            format!(
                "is locked by {}: writes wait, and runs fail with storage_busy after the busy timeout",
                holder.as_deref().unwrap_or("another process")
            ),
        ),
        Health::Problem(StoreError::Open { problem, .. }) => (false, format!("does not open: {problem}")),
        Health::Problem(e) => (false, format!("does not open: {e}")),
    };
    let mark = if db_ok { ok("ok ") } else { bad("no ") };
    lines.push(format!("  {mark} {state}"));

    lines.push(String::new());
    lines.push("Sandbox".into());
    let sandbox = crate::sandbox::state(config.sandbox);
    let mark = if sandbox == planwire_protocol::SandboxState::Enforced {
        ok("ok ")
    } else {
        bad("no ")
    };
    lines.push(format!("  {mark} {}", crate::sandbox::describe(config.sandbox)));
    if sandbox != planwire_protocol::SandboxState::Enforced {
        lines.push("      planning still runs (sandbox \"auto\"), with a warning on each run".into());
    }

    lines.push(String::new());
    lines.push("References".into());
    lines.push(match crate::context::github::gh() {
        Some(gh) => format!(
            "  {} gh {}: GitHub issue and pull request links in a description are read with it before planning",
            ok("ok "),
            gh.display()
        ),
        None => "  --  gh is not on PATH: GitHub issue and pull request links stay text; \
                 install the GitHub CLI (gh) and run `gh auth login` to have them read"
            .into(),
    });

    lines.push(String::new());
    lines.push("Logs".into());
    let from = match log.source {
        "default" => "the default (warn here; the --stdio server's is info)",
        other => other,
    };
    lines.push(format!(
        "  stderr only (an editor shows it in its output panel); level {:?} from {from}",
        log.filter
    ));
    lines.push(
        "  set it with --log-level LEVEL or PLANWIRE_LOG (error, warn, info, debug, trace, or a tracing filter)".into(),
    );

    let usable: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.usable && Tool::parse(&v.info.tool) != Some(Tool::Script))
        .map(|v| v.info.tool.as_str())
        .collect();
    lines.push(String::new());
    if !db_ok {
        lines.push(bad("The database cannot be used: see above, or pass --db PATH."));
    }
    let code = if usable.is_empty() {
        lines.push(bad(
            "No planner is usable: install Claude Code, OpenCode or Codex (see \"missing\" above).",
        ));
        lines.push("The demo still runs without one: planwire plan --root . --title T --tool script".into());
        1
    } else if !db_ok {
        1
    } else {
        lines.push(ok(&format!("Ready: {} can plan.", usable.join(", "))));
        0
    };
    print_lines(&lines);
    code
}

fn judge(info: PlannerInfo) -> Verdict {
    let tool = Tool::parse(&info.tool);
    let mut problem = if !info.found || !info.supported {
        Some(
            info.hint
                .clone()
                .unwrap_or_else(|| tool.map_or("", |t| t.install_hint()).to_owned()),
        )
    } else {
        None
    };
    if info.found && tool == Some(Tool::OpenCode) && on_path("rg").is_none() {
        problem = Some(
            "ripgrep (`rg`) on PATH: OpenCode's grep and glob tools need it \
             (apt-get install ripgrep, or brew install ripgrep)"
                .into(),
        );
    }
    Verdict {
        usable: info.found && info.supported && problem.is_none(),
        problem,
        info,
    }
}

/// The first executable named `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| crate::util::is_executable(p))
}

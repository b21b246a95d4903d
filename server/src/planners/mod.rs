//! Planner adapters: one module per CLI, each with the same shape.
//!
//! - detect: find the binary (configured path, else `PATH`) and read its version;
//! - launch: the argv and env of a first or resumed plan, always in read-only / plan mode;
//!   the prompt never passes through a shell and can never be read as a flag;
//! - parse: a stateful [`LineParser`] from the CLI's stream to normalized events.
//!
//! An adapter knows a CLI's argv and line format and nothing else.

pub mod claude;
pub mod detect;
pub mod plan;
pub mod prompt;
pub mod script;

use std::path::{Path, PathBuf};

use planwire_protocol::EventBody;

use crate::config::Config;

/// One normalized event as an adapter's parser produces it, before it has a seq.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedEvent {
    /// `None` for the main agent; otherwise a key naming the subagent (the CLI's id of the
    /// tool call that started it). The runner maps keys to agent-run rows.
    pub agent: Option<String>,
    pub body: EventBody,
}

impl ParsedEvent {
    pub fn main(body: EventBody) -> Self {
        ParsedEvent { agent: None, body }
    }
}

/// A CLI's stream, line by line, into normalized events.
pub trait LineParser: Send + Sync {
    fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent>;
    /// At end of output.
    fn finish(&mut self) -> Vec<ParsedEvent>;
    fn session_id(&self) -> Option<String>;
    /// All main-agent text, in order (where the plan is looked for).
    fn all_text(&self) -> String;
    /// The text of the final answer.
    fn final_text(&self) -> String;
    /// The CLI's own error text, when it reported one.
    fn error_message(&self) -> Option<String>;
}

impl LineParser for claude::ClaudeParser {
    fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent> {
        claude::ClaudeParser::parse_line(self, line)
    }
    fn finish(&mut self) -> Vec<ParsedEvent> {
        claude::ClaudeParser::finish(self)
    }
    fn session_id(&self) -> Option<String> {
        claude::ClaudeParser::session_id(self).map(str::to_owned)
    }
    fn all_text(&self) -> String {
        claude::ClaudeParser::all_text(self)
    }
    fn final_text(&self) -> String {
        claude::ClaudeParser::final_text(self)
    }
    fn error_message(&self) -> Option<String> {
        if self.is_error() {
            claude::ClaudeParser::error_message(self)
                .or_else(|| Some("the planner reported an error".into()))
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Claude,
    Script,
}

impl Tool {
    pub const ALL: [Tool; 2] = [Tool::Claude, Tool::Script];

    pub fn parse(name: &str) -> Option<Tool> {
        match name {
            "claude" => Some(Tool::Claude),
            "script" => Some(Tool::Script),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::Claude => "claude",
            Tool::Script => "script",
        }
    }

    /// The binary name searched on `PATH`.
    fn binary(self) -> &'static str {
        match self {
            Tool::Claude => "claude",
            Tool::Script => "planwire",
        }
    }

    /// What to do when the CLI is missing.
    pub fn install_hint(self) -> &'static str {
        match self {
            Tool::Claude => "install Claude Code: npm install -g @anthropic-ai/claude-code (or set initializationOptions.planners.claude.path)",
            Tool::Script => "the script planner is built in",
        }
    }

    pub fn parser(self) -> Box<dyn LineParser> {
        match self {
            Tool::Claude | Tool::Script => Box::new(claude::ClaudeParser::new()),
        }
    }
}

/// Where a tool's binary is: the configured path, else the first match on `PATH`.
pub fn locate(tool: Tool, config: &Config) -> Option<PathBuf> {
    if tool == Tool::Script {
        return std::env::current_exe().ok();
    }
    if let Some(p) = config.planner_paths.get(tool.name()) {
        return is_executable(p).then(|| p.clone());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(tool.binary()))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// What one run asks of its planner.
pub struct Launch {
    /// Arguments after the program (the prompt included).
    pub args: Vec<String>,
    /// The same without the prompt text, as recorded on the run.
    pub recorded_args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Written to the child's stdin, which is then closed (else stdin is /dev/null).
    pub stdin: Option<String>,
}

pub struct LaunchRequest<'a> {
    pub prompt: &'a str,
    pub model: Option<&'a str>,
    /// Continue this provider session.
    pub resume: Option<&'a str>,
}

pub fn launch(tool: Tool, req: &LaunchRequest) -> Launch {
    match tool {
        Tool::Claude => {
            let args = claude::argv(req.model, req.resume, None, req.prompt);
            let mut recorded = args.clone();
            recorded.pop();
            recorded.push("<prompt>".into());
            Launch {
                args,
                recorded_args: recorded,
                env: claude::env()
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
                stdin: None,
            }
        }
        Tool::Script => {
            let script = req.model.unwrap_or("demo").to_owned();
            let args = vec!["replay".to_owned(), script];
            Launch {
                recorded_args: args.clone(),
                args,
                env: Vec::new(),
                stdin: None,
            }
        }
    }
}

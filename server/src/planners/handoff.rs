//! The command that starts a CLI in its normal interactive mode to implement a plan
//! (`planwire/handoff`). planwire never runs it: the editor opens it in a terminal.
//!
//! The plan travels in a file; the first prompt only names it, so the command line stays
//! short. That prompt starts with a fixed word and sits after `--` (or in `--prompt=`), so it
//! can never be read as a flag. As checked against each pinned CLI's `--help`:
//!
//! - Claude Code: `claude [--model M] --add-dir DIR -- PROMPT` (interactive unless `-p`;
//!   `--add-dir` lets it read the plan's private directory without asking, and since it takes
//!   several values, `--` ends it);
//! - Codex: `codex [-m M] -- PROMPT` (the TUI; its default sandbox reads anywhere);
//! - OpenCode: `opencode [-m PROVIDER/MODEL] --prompt=PROMPT` (the TUI; yargs takes the value
//!   after `=` verbatim).

use std::path::Path;

use super::{flag_value_ok, Tool};

/// The first prompt of an implementation session: where the plan is, and what to do.
pub fn prompt(plan_path: &Path, ticket: i64, version: u32) -> String {
    format!(
        "Implement the plan in the file {} (planwire ticket {ticket}, plan version {version}). Read that file \
         first, then carry the plan out in this repository, and check its acceptance criteria when you are done.",
        plan_path.display()
    )
}

/// The argv (program first) that starts `tool` interactively with `prompt`; `None` for the
/// `script` planner, which cannot implement anything, and for an ACP agent, which is a server
/// with no interactive mode of its own (hand off to its CLI instead).
pub fn argv(tool: Tool, program: &Path, model: Option<&str>, plan_dir: &Path, prompt: &str) -> Option<Vec<String>> {
    debug_assert!(!prompt.starts_with('-'), "a hand-off prompt starts with a fixed word");
    let mut args = vec![program.display().to_string()];
    let model = model.filter(|m| flag_value_ok(m));
    match tool {
        Tool::Claude => {
            if let Some(m) = model {
                args.extend(["--model".to_owned(), m.to_owned()]);
            }
            args.extend(["--add-dir".to_owned(), plan_dir.display().to_string()]);
            args.extend(["--".to_owned(), prompt.to_owned()]);
        }
        Tool::Codex => {
            if let Some(m) = model {
                args.extend(["-m".to_owned(), m.to_owned()]);
            }
            args.extend(["--".to_owned(), prompt.to_owned()]);
        }
        Tool::OpenCode => {
            if let Some(m) = model {
                args.extend(["-m".to_owned(), m.to_owned()]);
            }
            args.push(format!("--prompt={prompt}"));
        }
        Tool::Script | Tool::Acp(_) => return None,
    }
    Some(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cli_gets_its_interactive_form_and_one_prompt_argument() {
        let (program, dir) = (Path::new("/usr/bin/x"), Path::new("/tmp/planwire-handoff-1"));
        let p = prompt(&dir.join("plan.md"), 3, 2);
        assert!(p.starts_with("Implement the plan in the file /tmp/planwire-handoff-1/plan.md"));
        let claude = argv(Tool::Claude, program, Some("opus"), dir, &p).unwrap();
        assert_eq!(
            claude,
            [
                "/usr/bin/x",
                "--model",
                "opus",
                "--add-dir",
                "/tmp/planwire-handoff-1",
                "--",
                p.as_str()
            ]
        );
        let codex = argv(Tool::Codex, program, None, dir, &p).unwrap();
        assert_eq!(codex, ["/usr/bin/x", "--", p.as_str()]);
        let opencode = argv(Tool::OpenCode, program, Some("openai/gpt-5"), dir, &p).unwrap();
        assert_eq!(opencode, ["/usr/bin/x", "-m", "openai/gpt-5", &format!("--prompt={p}")]);
        assert!(argv(Tool::Script, program, None, dir, &p).is_none());
        // A model that looks like a flag is left out.
        let hostile = argv(Tool::Claude, program, Some("--dangerously-skip-permissions"), dir, &p).unwrap();
        assert!(!hostile.iter().any(|a| a.contains("dangerously")), "{hostile:?}");
        assert!(!claude.iter().any(|a| a == "-p" || a == "--print"), "interactive");
    }
}

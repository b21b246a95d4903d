//! Where each planner's CLI may write under the OS sandbox. Each adapter names its own
//! entries in its `writable` function, with the reason for each; [`Tool::writable`] asks the
//! tool's adapter. The runner joins that list with what every pass may write (its scratch
//! directory and `/dev`) and hands the whole to the sandbox, which knows nothing of planners.
//!
//! Each CLI's entries were found by running the pinned real CLI under the sandbox with only
//! the scratch directory and `/dev` writable and tracing the writes it was refused (`strace -f
//! -Z -e trace=%file`), then adding the fewest entries that let it plan, resume and keep its
//! state. What each CLI was refused and can do without is named beside its entries.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use planwire_sandbox::Writable;

use super::{acp, claude, codex, opencode, script, Tool};

/// The environment the lists are computed from (the planner inherits planwire's): its
/// variables whose value is an absolute path. A relative one is ignored, as if unset.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: BTreeMap<OsString, PathBuf>,
}

impl Env {
    pub fn from_process() -> Env {
        Env::from_vars(std::env::vars_os())
    }

    pub fn from_vars<K: Into<OsString>, V: Into<PathBuf>>(vars: impl IntoIterator<Item = (K, V)>) -> Env {
        let vars = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(_, v): &(OsString, PathBuf)| v.is_absolute())
            .collect();
        Env { vars }
    }

    /// The variable `name`, when it is set to an absolute path.
    pub fn var(&self, name: &str) -> Option<PathBuf> {
        self.vars.get(OsStr::new(name)).cloned()
    }

    /// `rel` under `HOME`.
    pub fn home(&self, rel: &str) -> Option<PathBuf> {
        self.var("HOME").map(|h| h.join(rel))
    }

    /// An XDG base directory: the variable, else its default under `HOME`.
    pub fn xdg(&self, name: &str, default: &str) -> Option<PathBuf> {
        self.var(name).or_else(|| self.home(default))
    }
}

impl Tool {
    /// Where this tool's CLI may write, besides its pass's scratch directory and `/dev`.
    pub fn writable(self, env: &Env) -> Vec<Writable> {
        match self {
            Tool::Claude => claude::writable(env),
            Tool::OpenCode => opencode::writable(env),
            Tool::Codex => codex::writable(env),
            Tool::Script => script::writable(env),
            Tool::Acp(name) => acp::writable(name, env),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use super::*;

    /// An environment with `HOME=/h` and `vars`.
    pub(crate) fn env(vars: &[(&str, &str)]) -> Env {
        Env::from_vars([("HOME", "/h")].iter().chain(vars).copied())
    }

    pub(crate) fn paths(writable: &[Writable]) -> Vec<String> {
        writable.iter().map(|w| w.path.display().to_string()).collect()
    }

    #[test]
    fn no_cli_gets_home_or_tmp_and_every_entry_has_a_reason() {
        let acp = ["opencode", "qwen", "gemini", "claude-acp", "codex-acp", "goose"]
            .map(|n| Tool::Acp(acp::AcpName::intern(n).unwrap()));
        for tool in Tool::ALL.into_iter().chain(acp) {
            for w in tool.writable(&env(&[])) {
                assert!(!w.reason.is_empty(), "{}", tool.name());
                assert_ne!(w.path, Path::new("/h"), "{}", tool.name());
                assert_ne!(w.path, Path::new("/tmp"), "{}", tool.name());
            }
        }
    }

    #[test]
    fn only_absolute_paths_count() {
        let e = env(&[("CODEX_HOME", "relative/x")]);
        assert_eq!(e.var("CODEX_HOME"), None);
        assert_eq!(e.xdg("XDG_DATA_HOME", ".local/share"), Some("/h/.local/share".into()));
        // Without HOME there is no state to allow.
        assert_eq!(Env::default().home(".codex"), None);
    }
}

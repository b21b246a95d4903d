//! The prompt settings of a run: the project's settings and memory, with the user's defaults
//! from `initializationOptions` and the client's `locale`. A run records the settings it used,
//! so a retry uses the same ones.

use planwire_protocol::{MemoryEntry, ProjectSettings, RunId};

use crate::config::Config;
use crate::planners::prompt::{cap_memory, PromptSettings};
use crate::session::Session;
use crate::store::{memory, settings};

/// What the prompts of a run in `root` (canonical) add to the task.
pub async fn prompt_settings(s: &Session, root: &str) -> PromptSettings {
    let key = root.to_owned();
    let stored = s
        .store
        .read(move |c| Ok((settings::get(c, &key)?, memory::entries(c, &key)?)))
        .await;
    let (project, entries) = stored.unwrap_or_else(|e| {
        tracing::warn!(
            root,
            "cannot read the project's prompt settings, using the defaults: {e}"
        );
        (settings::defaults(root), Vec::new())
    });
    compose(&s.config, project, entries)
}

/// The project's settings over the user's: a project skill replaces a user skill of the same
/// name; the language is the project's, else the user's, else the client's locale, else none.
fn compose(config: &Config, project: ProjectSettings, entries: Vec<MemoryEntry>) -> PromptSettings {
    let mut skills: Vec<(String, String)> = Vec::new();
    for skill in config.skills.iter().chain(&project.skills) {
        let name = skill.name.trim();
        if name.is_empty() || skill.text.trim().is_empty() {
            continue;
        }
        match skills.iter_mut().find(|(n, _)| n == name) {
            Some(existing) => existing.1 = skill.text.clone(),
            None => skills.push((name.to_owned(), skill.text.clone())),
        }
    }
    let memory = if project.memory_enabled {
        cap_memory(entries.into_iter().map(|e| e.text))
    } else {
        Vec::new()
    };
    PromptSettings {
        memory_enabled: project.memory_enabled,
        memory,
        output_language: project
            .output_language
            .or_else(|| config.output_language.clone())
            .or_else(|| config.locale.clone()),
        skills,
        extra_instructions: project.extra_instructions,
    }
}

/// Records the settings a run used (a failure is logged: the run goes on).
pub async fn record(s: &Session, run: RunId, used: &PromptSettings) {
    let json = serde_json::to_string(used).expect("prompt settings serialize");
    if let Err(e) = s.store.write(move |c| settings::set_run_settings(c, run, &json)).await {
        tracing::warn!(run, "cannot record the run's prompt settings: {e}");
    }
}

/// The settings a run recorded, if it recorded any.
pub async fn of_run(s: &Session, run: RunId) -> Option<PromptSettings> {
    let json = s.store.read(move |c| settings::run_settings(c, run)).await.ok()??;
    serde_json::from_str(&json)
        .map_err(|e| tracing::warn!(run, "the run's recorded prompt settings do not parse: {e}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwire_protocol::{InitializationOptions, Skill};

    fn skill(name: &str, text: &str) -> Skill {
        Skill {
            name: name.into(),
            text: text.into(),
        }
    }

    fn entry(text: &str) -> MemoryEntry {
        MemoryEntry {
            id: 1,
            text: text.into(),
            source: "user".into(),
            created_at: String::new(),
        }
    }

    #[test]
    fn project_settings_win_over_user_defaults_and_locale() {
        let mut config = Config::from_options(&InitializationOptions {
            output_language: Some("Spanish".into()),
            skills: vec![skill("style", "user style"), skill("tests", "user tests")],
            ..InitializationOptions::default()
        });
        config.locale = Some("de-DE".into());
        let mut project = settings::defaults("/p");
        project.skills = vec![skill("style", "project style"), skill("docs", "project docs")];
        let s = compose(&config, project.clone(), vec![entry("newest"), entry("older")]);
        assert_eq!(s.output_language.as_deref(), Some("Spanish"));
        let names: Vec<(&str, &str)> = s.skills.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
        assert_eq!(
            names,
            [
                ("style", "project style"),
                ("tests", "user tests"),
                ("docs", "project docs")
            ]
        );
        assert_eq!(s.memory, ["newest", "older"]);
        assert!(s.memory_enabled);

        project.output_language = Some("French".into());
        assert_eq!(
            compose(&config, project.clone(), Vec::new()).output_language.as_deref(),
            Some("French")
        );
        config.output_language = None;
        project.output_language = None;
        assert_eq!(
            compose(&config, project.clone(), Vec::new()).output_language.as_deref(),
            Some("de-DE")
        );
        config.locale = None;
        assert_eq!(compose(&config, project, Vec::new()).output_language, None);
    }

    #[test]
    fn memory_off_leaves_the_entries_out() {
        let config = Config::from_options(&InitializationOptions::default());
        let mut project = settings::defaults("/p");
        project.memory_enabled = false;
        let s = compose(&config, project, vec![entry("a fact")]);
        assert!(!s.memory_enabled && s.memory.is_empty());
    }
}

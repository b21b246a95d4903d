//! `planwire/setProjectSettings`: a project's memory switch, output language, skills and extra
//! instructions. Fields left out keep their value; an empty string clears a text field.

use std::sync::Arc;

use planwire_protocol::{ProjectSettings, SetProjectSettingsParams, Skill};

use super::create_ticket::check_root;
use super::{invalid_params, HandlerResult};
use crate::runner::store_error;
use crate::session::Session;
use crate::store::settings::{self, Changes};

/// The longest output language accepted, in characters.
const MAX_LANGUAGE_CHARS: usize = 100;

pub async fn handle(s: Arc<Session>, p: SetProjectSettingsParams) -> HandlerResult<ProjectSettings> {
    let root = check_root(&p.root)?;
    let output_language = p.output_language.map(|l| cleared_if_empty(&l));
    if let Some(Some(l)) = &output_language {
        if l.chars().count() > MAX_LANGUAGE_CHARS {
            return Err(invalid_params(format!(
                "field `outputLanguage`: at most {MAX_LANGUAGE_CHARS} characters"
            )));
        }
    }
    let changes = Changes {
        memory_enabled: p.memory_enabled,
        output_language,
        skills: p.skills.map(check_skills).transpose()?,
        extra_instructions: p.extra_instructions.map(|e| cleared_if_empty(&e)),
    };
    s.store
        .write(move |c| settings::set(c, &root, changes))
        .await
        .map_err(store_error)
}

fn cleared_if_empty(text: &str) -> Option<String> {
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

/// Names are trimmed, non-empty and unique.
fn check_skills(skills: Vec<Skill>) -> HandlerResult<Vec<Skill>> {
    let mut out: Vec<Skill> = Vec::with_capacity(skills.len());
    for (i, skill) in skills.into_iter().enumerate() {
        let name = skill.name.trim().to_owned();
        if name.is_empty() {
            return Err(invalid_params(format!("field `skills[{i}].name` must not be empty")));
        }
        if out.iter().any(|s| s.name == name) {
            return Err(invalid_params(format!(
                "field `skills[{i}].name`: {name:?} is given twice"
            )));
        }
        out.push(Skill { name, text: skill.text });
    }
    Ok(out)
}

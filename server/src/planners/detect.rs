//! Finding each planner CLI and its version. `--version` costs a CLI start (≈0.3–0.7 s), so
//! versions are cached in the store by the binary's path, mtime and size.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use planwire_protocol::PlannerInfo;
use rusqlite::{params, OptionalExtension};

use super::{locate, missing_requirement, Tool};
use crate::config::Config;
use crate::store::Store;

/// The oldest version of each CLI the adapter accepts. The stream formats were recorded from
/// Claude Code 2.1.197, OpenCode 1.18.33 and Codex 0.171.0 (`tests/realcli` pins those);
/// older versions were not checked, so the floors are the lines those formats belong to:
/// OpenCode from 1.2 (`serve` with the `question` tool and `message.part.delta`, which 1.2
/// introduced; before it, text changes came as whole parts). Codex's floor is the
/// recorded version itself: planwire drives its `app-server` v2 protocol in the experimental
/// plan collaboration mode (`turn/start` `collaborationMode`, `item/tool/requestUserInput`,
/// `thread/resume` `excludeTurns`, `optOutNotificationMethods`), which changed often before.
/// The Codex feature switches are passed as `-c features.…=false`, which a Codex without that
/// feature ignores (where `--disable` would fail with "Unknown feature flag").
fn minimum(tool: Tool) -> Option<(u64, u64, u64)> {
    match tool {
        Tool::Claude => Some((2, 0, 0)),
        Tool::OpenCode => Some((1, 2, 0)),
        Tool::Codex => Some((0, 171, 0)),
        Tool::Script | Tool::Acp(_) => None,
    }
}

/// The versions planwire supports, in words (`2.0.0 or newer`).
pub fn supported_range(tool: Tool) -> Option<String> {
    minimum(tool).map(|(a, b, c)| format!("{} {a}.{b}.{c} or newer", tool.name()))
}

/// The major version in a `--version` line.
pub fn major(text: &str) -> Option<u64> {
    parse_version(text).map(|(major, _, _)| major)
}

fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let token = text
        .split_whitespace()
        .find(|t| t.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut parts = token
        .trim_start_matches('v')
        .split(['.', '-'])
        .map(|p| p.parse::<u64>().ok());
    Some((
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
        parts.next().flatten().unwrap_or(0),
    ))
}

pub fn supported(tool: Tool, version: Option<&str>) -> bool {
    match (minimum(tool), version.and_then(parse_version)) {
        (None, _) => true,
        (Some(min), Some(v)) => v >= min,
        // Found but its version could not be read: let it try.
        (Some(_), None) => true,
    }
}

async fn probe(path: &Path) -> Option<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::process::Command::new(path)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

async fn version(store: Option<&Store>, path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    let (mtime, size) = (meta.mtime(), meta.size() as i64);
    let key = path.display().to_string();
    if let Some(store) = store {
        let k = key.clone();
        let cached = store
            .read(move |c| {
                Ok(c.query_row(
                    "SELECT version FROM planner_versions WHERE path = ?1 AND mtime = ?2 AND size = ?3",
                    params![k, mtime, size],
                    |r| r.get::<_, String>(0),
                )
                .optional()?)
            })
            .await
            .ok()
            .flatten();
        if cached.is_some() {
            return cached;
        }
    }
    let found = probe(path).await?;
    if let Some(store) = store {
        let v = found.clone();
        let _ = store
            .write(move |c| {
                c.execute(
                    "INSERT OR REPLACE INTO planner_versions (path, mtime, size, version, checked_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![key, mtime, size, v, crate::util::now()],
                )?;
                Ok(())
            })
            .await;
    }
    Some(found)
}

pub async fn detect(tool: Tool, config: &Config, store: Option<&Store>) -> PlannerInfo {
    let path = locate(tool, config);
    let version = match (&path, tool) {
        (_, Tool::Script) => Some(env!("CARGO_PKG_VERSION").to_owned()),
        (Some(p), _) => version(store, p).await,
        (None, _) => None,
    };
    let found = path.is_some();
    let supported = found && supported(tool, version.as_deref());
    let hint = if !found {
        Some(tool.install_hint().to_owned())
    } else if !supported {
        Some(format!(
            "{} {} is older than the oldest supported version: planwire needs {}",
            tool.name(),
            version.as_deref().unwrap_or("?"),
            supported_range(tool).unwrap_or_default()
        ))
    } else {
        // Usable, but something it needs is missing (OpenCode without `rg`).
        missing_requirement(tool).map(str::to_owned)
    };
    PlannerInfo {
        tool: tool.name().into(),
        found,
        path: path.map(|p| p.display().to_string()),
        version,
        supported,
        hint,
    }
}

pub async fn detect_all(config: &Config, store: Option<&Store>) -> Vec<PlannerInfo> {
    let mut out = Vec::new();
    for tool in Tool::ALL {
        out.push(detect(tool, config, store).await);
    }
    // The configured ACP agents, and the presets found on this machine.
    for name in super::acp::listed(config) {
        out.push(detect(Tool::Acp(name), config, store).await);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("2.1.197 (Claude Code)"), Some((2, 1, 197)));
        assert_eq!(parse_version("codex-cli 0.171.0"), Some((0, 171, 0)));
        assert!(supported(Tool::Claude, Some("2.1.197 (Claude Code)")));
        assert!(!supported(Tool::Claude, Some("1.0.3 (Claude Code)")));
        assert!(supported(Tool::OpenCode, Some("1.18.33")));
        assert!(!supported(Tool::OpenCode, Some("0.15.8")));
        assert!(!supported(Tool::OpenCode, Some("1.1.65")));
        assert!(supported(Tool::Codex, Some("codex-cli 0.171.0")));
        assert!(!supported(Tool::Codex, Some("codex-cli 0.46.0")));
        assert!(!supported(Tool::Codex, Some("codex-cli 0.170.2")));
    }
}

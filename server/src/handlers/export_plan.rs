//! `planwire/exportPlan`: a plan version as a markdown file in the repository.
//!
//! The one place planwire writes into a repository, and only when asked. A relative path
//! resolves against the ticket's root, missing parent directories are created, and an existing
//! file is replaced only with `overwrite`. A new file is created exclusively (no race can
//! replace a file that appeared meanwhile); a replaced file is written beside it and renamed
//! over it, so a failed write (a full disk) leaves the old file whole.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use planwire_protocol::{ErrorCode, ExportPlanParams, ExportPlanResult, Ticket};

use super::{invalid_params, HandlerResult};
use crate::planners::plan::{plan_document, DocumentOf};
use crate::runner::store_error;
use crate::session::Session;
use crate::store::{plans, tickets};
use crate::transport::ResponseError;

pub async fn handle(s: Arc<Session>, p: ExportPlanParams) -> HandlerResult<ExportPlanResult> {
    let (ticket, version) = ticket_and_plan(&s, p.ticket_id, p.version).await?;
    let text = document(&ticket, &version);
    let path = target(&ticket, p.path.as_deref())?;
    let bytes = text.len() as u64;
    if !p.dry_run {
        let write_path = path.clone();
        tokio::task::spawn_blocking(move || write(&write_path, &text, p.overwrite))
            .await
            .map_err(|e| ResponseError::new(ErrorCode::InternalError, e.to_string()))??;
    }
    Ok(ExportPlanResult {
        path: absolute(&path).display().to_string(),
        bytes,
        version: version.version,
    })
}

/// The ticket and one of its plan versions (the latest by default).
pub(super) async fn ticket_and_plan(
    s: &Session,
    ticket: i64,
    version: Option<u32>,
) -> HandlerResult<(Ticket, plans::Stored)> {
    s.store
        .read(move |c| Ok((tickets::get(c, ticket)?, plans::get(c, ticket, version)?)))
        .await
        .map_err(store_error)
}

/// The markdown file of a plan version.
pub(super) fn document(ticket: &Ticket, v: &plans::Stored) -> String {
    let of = DocumentOf {
        ticket_id: ticket.id,
        ticket_title: &ticket.title,
        version: v.version,
        created_at: &v.created_at,
    };
    plan_document(&v.plan, &of)
}

/// Where to write: the path given (relative to the root), else the default under the root.
fn target(ticket: &Ticket, path: Option<&str>) -> HandlerResult<PathBuf> {
    let root = Path::new(&ticket.root);
    if !root.is_dir() {
        let m = format!("the project root {} is not an existing directory", ticket.root);
        return Err(ResponseError::new(ErrorCode::ProjectUnavailable, m));
    }
    let path = match path {
        None => root.join(default_path(ticket)),
        Some(p) if p.trim().is_empty() || p.ends_with('/') || p.chars().any(char::is_control) => {
            return Err(invalid_params(format!("field `path`: {p:?} is not a file path")))
        }
        Some(p) => root.join(p),
    };
    if path.is_dir() {
        return Err(invalid_params(format!(
            "field `path`: {} is a directory",
            path.display()
        )));
    }
    Ok(path)
}

/// `.planwire/plans/<ticketId>-<slug>.md`, the slug made of the title's words.
pub fn default_path(ticket: &Ticket) -> PathBuf {
    Path::new(".planwire/plans").join(format!("{}-{}.md", ticket.id, slug(&ticket.title)))
}

/// Lowercase letters and digits of `title`, words joined by `-`, at most 60 characters.
fn slug(title: &str) -> String {
    let words: Vec<String> = title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut slug = String::new();
    for w in words {
        if slug.chars().count() + w.chars().count() + 1 > 60 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&w);
    }
    if slug.is_empty() {
        "plan".to_owned()
    } else {
        slug
    }
}

/// The path with its (now existing) parent resolved, for the answer.
fn absolute(path: &Path) -> PathBuf {
    match (path.parent().and_then(|p| p.canonicalize().ok()), path.file_name()) {
        (Some(parent), Some(name)) => parent.join(name),
        _ => path.to_owned(),
    }
}

fn io_error(path: &Path, e: std::io::Error) -> ResponseError {
    ResponseError::new(
        ErrorCode::InternalError,
        format!("cannot write {}: {e}", path.display()),
    )
}

fn write(path: &Path, text: &str, overwrite: bool) -> HandlerResult<()> {
    let parent = path.parent().expect("a path under the root has a parent");
    std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
    let existing = std::fs::metadata(path).ok();
    match existing {
        Some(_) if !overwrite => Err(exists(path)),
        Some(meta) => replace(path, text, meta.permissions()),
        None => create_new(path, text),
    }
}

fn exists(path: &Path) -> ResponseError {
    ResponseError::new(ErrorCode::Conflict, format!("{} already exists", path.display()))
}

/// A new file (mode 0666 less the umask, like any file an editor saves); removed again when
/// its write fails.
fn create_new(path: &Path, text: &str) -> HandlerResult<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => exists(path),
            _ => io_error(path, e),
        })?;
    let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_all());
    if let Err(e) = written {
        drop(file);
        let _ = std::fs::remove_file(path);
        return Err(io_error(path, e));
    }
    Ok(())
}

/// Replaces a file: written beside it with its mode, then renamed over it.
fn replace(path: &Path, text: &str, permissions: std::fs::Permissions) -> HandlerResult<()> {
    let parent = path.parent().expect("a path under the root has a parent");
    let mut tmp = tempfile::NamedTempFile::new_in(parent).map_err(|e| io_error(parent, e))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| io_error(path, e))?;
    let mode = std::fs::Permissions::from_mode(permissions.mode() & 0o7777);
    std::fs::set_permissions(tmp.path(), mode).map_err(|e| io_error(path, e))?;
    tmp.persist(path).map_err(|e| io_error(path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_lowercase_words() {
        assert_eq!(slug("Change the greeting!"), "change-the-greeting");
        assert_eq!(slug("  --Grüße / ändern  "), "grüße-ändern");
        assert_eq!(slug("!!!"), "plan");
        let long = slug(&"word ".repeat(40));
        assert!(long.chars().count() <= 60 && long.ends_with("word"), "{long}");
    }

    #[test]
    fn a_new_file_is_exclusive_and_a_replaced_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/plan.md");
        write(&path, "one", false).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        let e = write(&path, "two", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::Conflict.code());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&path, "three", true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "three");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}

//! Overview's "import available" hint (issue #33): whether this machine has an OpenClaw
//! installation that was not moved here yet, and the commands that move it.
//!
//! Where OpenClaw keeps its state is its own rule, read from the daemon's environment the way
//! OpenClaw reads it: `OPENCLAW_STATE_DIR` when set, else `.openclaw` in `OPENCLAW_HOME` (else
//! `HOME`). `clawvisor import openclaw` takes the same directory when it is given no path, so the
//! command the hint shows imports what the hint found.
//!
//! Invariants: "imported" is the audit row every import that wrote something appends
//! (`import.openclaw`, see `cli/import/apply.rs`): the audit log is append-only, so once the
//! hint is gone it stays gone. Only an existing `openclaw.json` counts as an installation; the
//! database is read only when one exists, so a machine without OpenClaw pays one `stat`.

use std::ffi::OsString;
use std::path::PathBuf;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::openapi::{boolean, object, string};
use super::{ApiError, StudioState};

/// The audit action an import that wrote something records.
pub const IMPORT_ACTION: &str = "import.openclaw";

/// OpenClaw's state directory by its own rule, with `var` reading the environment.
pub fn openclaw_state_dir(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    if let Some(dir) = set("OPENCLAW_STATE_DIR") {
        return PathBuf::from(dir);
    }
    set("OPENCLAW_HOME")
        .or_else(|| set("HOME"))
        .map_or_else(|| PathBuf::from("/"), PathBuf::from)
        .join(".openclaw")
}

/// `GET /api/v1/import/openclaw`: whether an OpenClaw installation waits to be imported, and the
/// exact commands (the daemon's config file and the directory named, so they work from any
/// directory and any shell).
pub async fn openclaw(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let dir = openclaw_state_dir(|name| std::env::var_os(name));
    let found = dir.join("openclaw.json").is_file();
    let imported = if found {
        state
            .store
            .read(|conn| {
                Ok(conn
                    .prepare_cached("SELECT EXISTS(SELECT 1 FROM audit_log WHERE action = ?1)")?
                    .query_row([IMPORT_ACTION], |row| row.get::<_, bool>(0))?)
            })
            .await?
    } else {
        false
    };
    let config = state
        .files
        .get()
        .config_file
        .as_ref()
        .map(|path| format!(" --config {}", shell_quoted(&path.display().to_string())))
        .unwrap_or_default();
    let path = dir.display().to_string();
    let command = format!("clawvisor{config} import openclaw {}", shell_quoted(&path));
    Ok(Json(json!({
        "available": found && !imported,
        "found": found,
        "imported": imported,
        "path": path,
        "dry_run": format!("{command} --dry-run"),
        "command": command,
    })))
}

/// `text` as one shell word (single quotes unless it needs none).
fn shell_quoted(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-~".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// What `GET /api/v1/import/openclaw` answers.
pub fn openclaw_schema() -> Value {
    object([
        ("available", boolean()),
        ("found", boolean()),
        ("imported", boolean()),
        ("path", string()),
        ("dry_run", string()),
        ("command", string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    #[test]
    fn the_state_dir_follows_openclaws_own_rule() {
        let dir = |pairs| openclaw_state_dir(env(pairs));
        assert_eq!(
            dir(&[("HOME", "/home/sam")]),
            PathBuf::from("/home/sam/.openclaw")
        );
        assert_eq!(
            dir(&[("HOME", "/home/sam"), ("OPENCLAW_HOME", "/srv/oc")]),
            PathBuf::from("/srv/oc/.openclaw")
        );
        assert_eq!(
            dir(&[
                ("HOME", "/home/sam"),
                ("OPENCLAW_STATE_DIR", "/var/lib/openclaw")
            ]),
            PathBuf::from("/var/lib/openclaw")
        );
        assert_eq!(
            dir(&[("HOME", "/home/sam"), ("OPENCLAW_STATE_DIR", "")]),
            PathBuf::from("/home/sam/.openclaw")
        );
        assert_eq!(shell_quoted("/srv/a b"), "'/srv/a b'");
        assert_eq!(shell_quoted("/srv/oc"), "/srv/oc");
    }
}

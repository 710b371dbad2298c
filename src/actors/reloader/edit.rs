//! Edits of the files from Studio (`ReloadMsg::Edit`): an agent created, changed, duplicated or
//! deleted, a provider set. In the reloader because an edit is a reload whose files the daemon
//! wrote itself, and one at a time with every other reload.
//!
//! Order, so that a refused edit changes nothing and a crash leaves a file the daemon can boot
//! from: the new text is computed (`config::edit`), the whole configuration is loaded with it in
//! place (an overlay; nothing is written yet) and validated as a reload would be; only then is
//! the file written atomically (or removed), the change audited as the operator's, and the files
//! reloaded. A file that cannot be written is answered with its text, to put there by hand.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::ReloaderState;
use crate::config::LoadedConfig;
use crate::config::edit::{self, Overlay, Setting};
use crate::protocol::reload::{EditOutcome, FileEdit};

/// One edit, worked out: the file, its new text (`None`: removed), and how it is audited.
struct Change {
    path: PathBuf,
    text: Option<String>,
    action: &'static str,
    subject: String,
    details: Value,
    /// A workspace to remove once the agent is gone (a delete that asked for it).
    remove_workspace: Option<PathBuf>,
}

/// Validates, writes, audits and applies `edit` as `by`.
pub(super) async fn edit(state: &mut ReloaderState, edit: FileEdit, by: &str) -> EditOutcome {
    let running = state.context.loaded.clone();
    let change = match plan(&running, &edit) {
        Ok(change) => change,
        Err(reason) => return EditOutcome::Refused(reason),
    };
    if let Err(reason) = validate(state, &running, &change).await {
        return EditOutcome::Refused(reason);
    }
    if let Err(error) = write(&change) {
        return EditOutcome::NotWritable {
            path: change.path.display().to_string(),
            reason: error.to_string(),
            text: change.text,
        };
    }
    audit(state, &change, by).await;
    let trigger = format!("studio ({})", change.action);
    let report = super::reload(state).await;
    super::tell(&state.context, &trigger, &report).await;
    if let Some(workspace) = &change.remove_workspace
        && report.ok
        && let Err(error) = std::fs::remove_dir_all(workspace)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(workspace = %workspace.display(), %error, "the deleted agent's workspace could not be removed");
    }
    EditOutcome::Applied {
        path: change.path.display().to_string(),
        report: Box::new(report),
    }
}

/// Works out which file changes and how.
fn plan(running: &LoadedConfig, edit: &FileEdit) -> Result<Change, String> {
    let agents_dir = running
        .agents_source
        .clone()
        .unwrap_or_else(|| running.config.agents.dir.clone());
    match edit {
        FileEdit::CreateAgent { name, settings } => {
            if running.agent(name).is_some() {
                return Err(format!("`name`: an agent named `{name}` exists already"));
            }
            let text = edit::new_agent(name, settings).map_err(|error| error.to_string())?;
            Ok(Change {
                path: edit::new_agent_path(&agents_dir, name),
                text: Some(text),
                action: "agent.created",
                subject: format!("agent:{name}"),
                details: shown(settings),
                remove_workspace: None,
            })
        }
        FileEdit::UpdateAgent { name, settings } => {
            let path = agent_file(&agents_dir, running, name)?;
            let text = read(&path)?;
            let text = edit::edit_agent(&text, settings).map_err(|error| error.to_string())?;
            Ok(Change {
                path,
                text: Some(text),
                action: "agent.updated",
                subject: format!("agent:{name}"),
                details: shown(settings),
                remove_workspace: None,
            })
        }
        FileEdit::DuplicateAgent { from, name } => {
            if running.agent(name).is_some() {
                return Err(format!("`name`: an agent named `{name}` exists already"));
            }
            let text = read(&agent_file(&agents_dir, running, from)?)?;
            let text = edit::duplicate_agent(&text, name).map_err(|error| error.to_string())?;
            Ok(Change {
                path: edit::new_agent_path(&agents_dir, name),
                text: Some(text),
                action: "agent.created",
                subject: format!("agent:{name}"),
                details: json!({ "copied_from": from }),
                remove_workspace: None,
            })
        }
        FileEdit::DeleteAgent { name, remove_data } => {
            let path = agent_file(&agents_dir, running, name)?;
            let workspace = running.agent(name).map(|spec| {
                spec.workspace
                    .clone()
                    .unwrap_or_else(|| running.config.data_dir.join("workspaces").join(&spec.name))
            });
            Ok(Change {
                path,
                text: None,
                action: "agent.deleted",
                subject: format!("agent:{name}"),
                details: json!({ "workspace_removed": remove_data }),
                remove_workspace: workspace.filter(|_| *remove_data),
            })
        }
        FileEdit::SetProvider {
            name,
            kind,
            base_url,
            api_key_env,
            free,
        } => {
            let crate::config::ConfigSource::File(path) = &running.source else {
                return Err("this daemon runs on the built-in defaults, without a config file: run `clawvisor init` to write one, then set providers here".into());
            };
            let text = read(path)?;
            let text = edit::set_provider(&text, name, kind, base_url, api_key_env, *free)
                .map_err(|error| error.to_string())?;
            Ok(Change {
                path: path.clone(),
                text: Some(text),
                action: "provider.set",
                subject: format!("provider:{name}"),
                details: json!({
                    "kind": kind, "base_url": base_url, "api_key_env": api_key_env, "free": free,
                }),
                remove_workspace: None,
            })
        }
        FileEdit::AddNode { .. } | FileEdit::RemoveNode { .. } => node_change(running, edit),
    }
}

/// A `[[nodes]]` entry added or taken out (issue #34).
fn node_change(running: &LoadedConfig, edit: &FileEdit) -> Result<Change, String> {
    let crate::config::ConfigSource::File(path) = &running.source else {
        return Err("this daemon runs on the built-in defaults, without a config file: run `clawvisor init` to write one, then add nodes here".into());
    };
    let text = read(path)?;
    let (text, action, name, details) = match edit {
        FileEdit::AddNode { name, url, agents } => (
            crate::config::add_node_entry(&text, name, url, agents)?,
            "node.added",
            name,
            json!({ "url": url, "agents": agents }),
        ),
        FileEdit::RemoveNode { name } => (
            crate::config::remove_node_entry(&text, name)?,
            "node.removed",
            name,
            json!({}),
        ),
        _ => return Err("not a node edit".into()),
    };
    Ok(Change {
        path: path.clone(),
        text: Some(text),
        action,
        subject: format!("node:{name}"),
        details,
        remove_workspace: None,
    })
}

/// The file that defines `name`, or why there is none to edit.
fn agent_file(dir: &Path, running: &LoadedConfig, name: &str) -> Result<PathBuf, String> {
    if running.agent(name).is_none() {
        return Err(format!("no agent is named `{name}`"));
    }
    edit::find_agent_file(dir, name).ok_or_else(|| {
        format!(
            "agent `{name}` is the built-in example, not a file in {}: create an agent in Studio (or run `clawvisor init`) to have files to edit",
            dir.display()
        )
    })
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|error| format!("{}: cannot read: {error}", path.display()))
}

/// What the audit row says of the settings: every value but the instructions' text (its length).
fn shown(settings: &[(String, Setting)]) -> Value {
    let shown: serde_json::Map<String, Value> = settings
        .iter()
        .map(|(key, setting)| {
            let value = match setting {
                Setting::Text(text) if key == "instructions" => {
                    json!(format!("{} characters", text.chars().count()))
                }
                Setting::Text(text) => json!(text),
                Setting::Number(number) => json!(number),
                Setting::Integer(number) => json!(number),
                Setting::Flag(flag) => json!(flag),
                Setting::Texts(texts) => json!(texts),
                Setting::Integers(numbers) => json!(numbers),
                Setting::Absent => Value::Null,
            };
            (key.clone(), value)
        })
        .collect();
    Value::Object(shown)
}

/// Loads the whole configuration with the change in place and checks it as a reload would.
async fn validate(
    state: &ReloaderState,
    running: &LoadedConfig,
    change: &Change,
) -> Result<(), String> {
    let overlay = Overlay::one(change.path.clone(), change.text.clone());
    let overrides = state.context.overrides.clone();
    let env = crate::reload::environment(running);
    let read = tokio::task::spawn_blocking(move || {
        crate::config::load_with_overlay(&overrides, env, &overlay)
    })
    .await;
    let new = match read {
        Ok(Ok(new)) => new,
        Ok(Err(error)) => return Err(error.to_string()),
        Err(_) => return Err("reading the files failed unexpectedly (a panic)".into()),
    };
    crate::reload::validate(running, &new)
}

/// Writes the new text atomically, creating the agents directory if needed, or removes the file.
fn write(change: &Change) -> std::io::Result<()> {
    match &change.text {
        Some(text) => {
            if let Some(dir) = change.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            edit::write_atomically(&change.path, text)
        }
        None => std::fs::remove_file(&change.path),
    }
}

/// The change as the operator's, in the audit log (the file's path and what was set).
async fn audit(state: &ReloaderState, change: &Change, by: &str) {
    let details = json!({ "file": change.path.display().to_string(), "set": change.details });
    let (action, subject, actor) = (change.action, change.subject.clone(), by.to_string());
    let audited_subject = subject.clone();
    let written = state
        .context
        .store
        .write(move |conn| crate::audit::append(conn, &actor, action, &audited_subject, &details))
        .await;
    match written {
        Ok(_) => crate::audit::announce(&state.context.events, action, &subject),
        Err(error) => tracing::warn!(%error, action, "a file edit could not be audited"),
    }
}

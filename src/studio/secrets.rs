//! Keys & tokens: `/api/v1/secrets` lists every secret variable the configuration names (what
//! uses it, whether it is set, from the environment or the secrets store, and its last
//! characters), `PUT /api/v1/secrets/{name}` keeps a value in the store and `DELETE` removes one;
//! both are audited (`secret.set`, `secret.deleted`, with the name only) and then reload the
//! files, so that a new bot token or API key takes effect, and answer with the reload's report.
//!
//! The store is `config::secrets_file` (only `config` reads or writes it); this module is its
//! door for the console. The running side (which variables the files name, where each running
//! value came from) is [`SecretsView`], replaced by every reload like Studio's other views.
//!
//! Invariant: no answer of this module holds a value: not the one sent, not a stored one, not
//! in an error (the store's errors never quote one, and a body that is not `{"value": "..."}` is
//! refused without echoing it). What is shown of a value is `secrets_file::ending` (the last 4
//! characters of a value of 20 or more).

use std::collections::BTreeMap;
use std::path::PathBuf;

use axum::Json;
use axum::extract::{Path, State};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, integer, nullable, object, one_of, string};
use super::{ApiError, StudioState};
use crate::config::secrets_file::{self, Change, SecretsFileError};
use crate::config::{LoadedConfig, SecretSource, SecretUse};
use crate::secrets::Secret;

/// The running side of Keys & tokens: the data directory, the variables the files name with
/// their uses, and the running values with where each came from. Its `Debug` shows no value.
#[derive(Debug, Clone, Default)]
pub struct SecretsView {
    pub data_dir: PathBuf,
    pub uses: BTreeMap<String, Vec<SecretUse>>,
    pub running: BTreeMap<String, (SecretSource, Secret)>,
}

impl SecretsView {
    pub fn new(loaded: &LoadedConfig) -> SecretsView {
        SecretsView {
            data_dir: loaded.config.data_dir.clone(),
            uses: loaded.secret_uses(),
            running: loaded
                .secrets
                .iter()
                .map(|(var, secret)| {
                    let source = loaded
                        .secret_sources
                        .get(var)
                        .copied()
                        .unwrap_or(SecretSource::Environment);
                    (var.clone(), (source, secret.clone()))
                })
                .collect(),
        }
    }
}

/// A store error as an API error: the name or value at fault is a 400 naming the field; a file
/// that cannot be read or written is a 500 that says which file and why (never its content).
fn api_error(error: SecretsFileError) -> ApiError {
    match error {
        SecretsFileError::Name(_) | SecretsFileError::Value(_) => {
            ApiError::bad_request(error.to_string())
        }
        other => ApiError(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "The keys and tokens file could not be used: {other}. Fix or remove it, then try again."
            ),
        ),
    }
}

/// Runs a blocking store operation off the async runtime.
async fn blocking<T: Send + 'static>(
    job: impl FnOnce() -> Result<T, SecretsFileError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(job)
        .await
        .map_err(|_| {
            ApiError(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "reading the keys and tokens file failed unexpectedly; see the daemon's log".into(),
            )
        })?
        .map_err(api_error)
}

/// One variable as the page shows it.
fn entry(view: &SecretsView, stored: &BTreeMap<String, Secret>, name: &str) -> Value {
    let uses = view.uses.get(name).cloned().unwrap_or_default();
    let running = view.running.get(name);
    let in_environment = matches!(running, Some((SecretSource::Environment, _)));
    let kept = stored.get(name);
    let shown = if in_environment {
        running.map(|(_, secret)| secret)
    } else {
        kept
    };
    let in_use = match (running, kept) {
        (Some((SecretSource::Environment, _)), _) => true,
        (Some((SecretSource::Store, running)), Some(kept)) => running == kept,
        _ => false,
    };
    let describe = |uses: &[SecretUse]| {
        uses.iter()
            .map(SecretUse::describe)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let note = if in_environment && kept.is_some() {
        "Also set in the daemon's environment, which wins: the value kept here is not used. Remove it from the environment and restart to use this one.".to_string()
    } else if in_environment {
        "Set in the daemon's environment. A value kept here would not be used while it is.".into()
    } else if uses.is_empty() {
        "Nothing in the configuration uses it. Delete it if you no longer need it.".into()
    } else if kept.is_none() && !uses.iter().any(SecretUse::required) {
        format!(
            "Optional: {} is needed only when Studio is reached from other machines; the login link works without it.",
            describe(&uses)
        )
    } else if kept.is_none() {
        format!("Not set: {} will not work until it is.", describe(&uses))
    } else if !in_use {
        "Kept, but not in use yet: the last reload did not take it. Reload from the Overview, and read its report.".into()
    } else if uses.iter().all(SecretUse::applies_at_reload) {
        "In use.".into()
    } else {
        "In use by what reloads; what reads it only at start uses the new value after the next restart.".into()
    };
    json!({
        "name": name,
        "used_by": uses.iter().map(|one| json!({
            "kind": one.kind, "name": one.name, "text": one.describe(),
            "applies_at_reload": one.applies_at_reload(),
        })).collect::<Vec<_>>(),
        "used": !uses.is_empty(),
        "required": uses.iter().any(SecretUse::required),
        "set": shown.is_some(),
        "source": if in_environment { Some("environment") } else if kept.is_some() { Some("store") } else { None },
        "in_environment": in_environment,
        "in_store": kept.is_some(),
        "in_use": in_use,
        "ends_with": shown.and_then(|secret| secrets_file::ending(secret.expose())),
        "note": note,
    })
}

/// One variable as [`entry`] shows it (never its value).
fn entry_schema() -> Value {
    let used_by = object([
        (
            "kind",
            one_of(&[
                "provider",
                "bot",
                "studio_token",
                "metrics_token",
                "mcp_server",
                "web_search",
            ]),
        ),
        ("name", string()),
        ("text", described("what uses it, in words", string())),
        ("applies_at_reload", boolean()),
    ]);
    object([
        ("name", string()),
        ("used_by", array(used_by)),
        ("used", boolean()),
        ("required", boolean()),
        ("set", boolean()),
        ("source", nullable(one_of(&["environment", "store"]))),
        ("in_environment", boolean()),
        ("in_store", boolean()),
        ("in_use", boolean()),
        (
            "ends_with",
            described(
                "its last characters (values of 20 or more only)",
                nullable(string()),
            ),
        ),
        (
            "note",
            described("what to do about it, in a sentence", string()),
        ),
    ])
}

/// Every variable the files name, then those only the store holds; by name.
fn entries(view: &SecretsView, stored: &BTreeMap<String, Secret>) -> Vec<Value> {
    let mut names: Vec<&String> = view.uses.keys().collect();
    names.extend(stored.keys().filter(|name| !view.uses.contains_key(*name)));
    names
        .into_iter()
        .map(|name| entry(view, stored, name))
        .collect()
}

/// `GET /api/v1/secrets`
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let view = state.secrets.get();
    let data_dir = view.data_dir.clone();
    let stored = blocking(move || secrets_file::read(&data_dir)).await?;
    Ok(Json(json!({
        "file": secrets_file::path(&view.data_dir).display().to_string(),
        "ending_shown_from": secrets_file::ENDING_SHOWN_FROM,
        "secrets": entries(&view, &stored.values),
        "warnings": stored.warnings,
    })))
}

/// What `GET /api/v1/secrets` answers.
pub fn list_schema() -> Value {
    object([
        ("file", described("the secrets store", string())),
        ("ending_shown_from", integer()),
        ("secrets", array(entry_schema())),
        ("warnings", array(string())),
    ])
}

/// The body of `PUT /api/v1/secrets/{name}`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretBody {
    /// The key or token (never answered back).
    value: String,
}

/// `PUT /api/v1/secrets/{name}` with `{"value": "..."}`: keeps it, audits, reloads.
pub async fn set(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    body: Result<Json<SecretBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    secrets_file::check_name(&name).map_err(api_error)?;
    // The rejection's own text could quote the body, which holds the value: not echoed.
    let Ok(Json(body)) = body else {
        return Err(ApiError::bad_request(
            "`value`: the body must be JSON of the form {\"value\": \"<the key or token>\"}",
        ));
    };
    let data_dir = state.secrets.get().data_dir.clone();
    let change = {
        let (name, data_dir) = (name.clone(), data_dir.clone());
        blocking(move || secrets_file::set(&data_dir, &name, &body.value)).await?
    };
    let reload = if change == Change::Unchanged {
        None
    } else {
        audit(&state, "secret.set", &name, change.as_str()).await?;
        Some(super::reload::run(&state, "studio: keys & tokens").await?)
    };
    answer(&state, &name, change.as_str(), reload).await
}

/// `DELETE /api/v1/secrets/{name}`: removes it from the store, audits, reloads.
pub async fn delete(
    State(state): State<StudioState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    secrets_file::check_name(&name).map_err(api_error)?;
    let data_dir = state.secrets.get().data_dir.clone();
    let removed = {
        let name = name.clone();
        blocking(move || secrets_file::delete(&data_dir, &name)).await?
    };
    if !removed {
        let in_environment = matches!(
            state.secrets.get().running.get(&name),
            Some((SecretSource::Environment, _))
        );
        return Err(ApiError::not_found(if in_environment {
            format!(
                "`name`: `{name}` is set in the daemon's environment, not kept by Studio: remove it from the service's environment and restart"
            )
        } else {
            format!("`name`: Studio keeps no `{name}`; nothing was deleted")
        }));
    }
    audit(&state, "secret.deleted", &name, "deleted").await?;
    let reload = super::reload::run(&state, "studio: keys & tokens").await?;
    answer(&state, &name, "deleted", Some(reload)).await
}

/// Appends the audit row (the name and what happened, never the value) and announces it.
async fn audit(
    state: &StudioState,
    action: &str,
    name: &str,
    change: &str,
) -> Result<(), ApiError> {
    let details = json!({ "name": name, "change": change });
    let (action_owned, subject) = (action.to_string(), format!("secret:{name}"));
    let written = state
        .store
        .write(move |conn| {
            crate::audit::append(conn, "operator", &action_owned, &subject, &details)
        })
        .await;
    match written {
        Ok(_) => {
            crate::audit::announce(&state.events, action, &format!("secret:{name}"));
            Ok(())
        }
        Err(error) => {
            tracing::warn!(%error, action, "studio: a change of a secret could not be audited");
            Err(ApiError(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!(
                    "The change of `{name}` was made, but the audit log could not record it; see the daemon's log."
                ),
            ))
        }
    }
}

/// The answer to a change: a plain sentence, the variable as the list shows it now, and the
/// reload's report.
async fn answer(
    state: &StudioState,
    name: &str,
    change: &str,
    reload: Option<Value>,
) -> Result<Json<Value>, ApiError> {
    let view = state.secrets.get();
    let data_dir = view.data_dir.clone();
    let stored = blocking(move || secrets_file::read(&data_dir)).await?;
    let reloaded = reload.as_ref().map(|report| report["ok"] == true);
    let message = match (change, reloaded) {
        ("unchanged", _) => format!("{name} already had this value; nothing changed."),
        ("deleted", Some(true)) => {
            format!("Deleted {name}, and the daemon reloaded its configuration.")
        }
        ("deleted", _) => {
            format!("Deleted {name}, but the reload did not go through; see its report below.")
        }
        (_, Some(true)) => format!("Saved {name}, and the daemon reloaded its configuration."),
        _ => format!("Saved {name}, but the reload did not go through; see its report below."),
    };
    Ok(Json(json!({
        "name": name,
        "change": change,
        "message": message,
        "secret": entry(&view, &stored.values, name),
        "reload": reload,
    })))
}

/// What `PUT` and `DELETE /api/v1/secrets/{name}` answer.
pub fn change_schema() -> Value {
    object([
        ("name", string()),
        (
            "change",
            one_of(&["added", "replaced", "unchanged", "deleted"]),
        ),
        ("message", string()),
        ("secret", entry_schema()),
        (
            "reload",
            described(
                "the reload's report (null: nothing changed, no reload)",
                nullable(super::reload::report_schema()),
            ),
        ),
    ])
}

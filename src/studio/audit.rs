//! The audit log: `/api/v1/audit` (filtered by actor, action, agent, subject and time),
//! `/api/v1/audit/facets` (what the filters can choose from), `/api/v1/audit/verify`
//! (spending is `costs.rs`).
//!
//! Query parameters are read as text and checked here, so that a wrong one is refused with its
//! name and what it should be ([`number_param`], shared with the Logs page's routes).

use std::str::FromStr;

use axum::Json;
use axum::extract::{Query, State};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{any, array, boolean, described, integer, nullable, object, string};
use super::{ApiError, StudioState};
use crate::audit::query::{AuditFilter, facets as audit_facets, matching};
use crate::audit::{self, Verification};

/// `GET /api/v1/audit`'s parameters, as text (see [`number_param`]).
#[derive(Deserialize, JsonSchema)]
pub struct EntriesQuery {
    /// Entries older than this id (the previous page's `next_before`).
    #[schemars(with = "Option<i64>")]
    before: Option<String>,
    /// How many (default 100, at most 1,000).
    #[schemars(with = "Option<u32>")]
    limit: Option<String>,
    /// Only this actor's (who did it).
    actor: Option<String>,
    /// Only this action, or a family of them (`approval.*`).
    action: Option<String>,
    /// Only entries by or about this agent.
    agent: Option<String>,
    /// Only about this subject (`job:7`, `secret:OPENAI_API_KEY`, ...).
    subject: Option<String>,
    /// From this time on (milliseconds since 1970).
    #[schemars(with = "Option<i64>")]
    since_ms: Option<String>,
    /// Before this time (milliseconds since 1970).
    #[schemars(with = "Option<i64>")]
    until_ms: Option<String>,
}

/// The number in query parameter `name`: `None` when absent or empty, a 400 naming the
/// parameter when it is not a number of type `T`.
pub fn number_param<T: FromStr>(name: &str, value: Option<&str>) -> Result<Option<T>, ApiError> {
    let Some(text) = value.map(str::trim).filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    text.parse().map(Some).map_err(|_| {
        ApiError::bad_request(format!(
            "`{name}` must be a whole number (got `{text}`); fix it or leave it out"
        ))
    })
}

/// The text in a query parameter, `None` when absent or blank.
fn text_param(value: Option<String>) -> Option<String> {
    value
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
}

impl EntriesQuery {
    /// The filter these parameters ask for, or a 400 naming the parameter that is wrong.
    fn filter(&self) -> Result<AuditFilter, ApiError> {
        let filter = AuditFilter {
            actor: text_param(self.actor.clone()),
            action: text_param(self.action.clone()),
            agent: text_param(self.agent.clone()),
            subject: text_param(self.subject.clone()),
            since_ms: number_param("since_ms", self.since_ms.as_deref())?,
            until_ms: number_param("until_ms", self.until_ms.as_deref())?,
        };
        if let (Some(since), Some(until)) = (filter.since_ms, filter.until_ms)
            && until <= since
        {
            return Err(ApiError::bad_request(format!(
                "`until_ms` ({until}) must be later than `since_ms` ({since}): the range would hold no time"
            )));
        }
        Ok(filter)
    }
}

/// `GET /api/v1/audit?actor=&action=&agent=&subject=&since_ms=&until_ms=&before=ID&limit=100`:
/// the matching entries, newest first; `next_before` pages on.
pub async fn entries(
    State(state): State<StudioState>,
    Query(query): Query<EntriesQuery>,
) -> Result<Json<Value>, ApiError> {
    let filter = query.filter()?;
    let limit = number_param::<u32>("limit", query.limit.as_deref())?
        .unwrap_or(100)
        .clamp(1, 1_000);
    let before = number_param::<i64>("before", query.before.as_deref())?;
    let rows = state
        .store
        .read(move |conn| matching(conn, &filter, before, limit))
        .await?;
    let next_before = (rows.len() == limit as usize)
        .then(|| rows.last().map(|row| row.id))
        .flatten();
    Ok(Json(json!({
        "entries": rows.iter().map(|row| json!({
            "id": row.id, "at_ms": row.at_ms, "actor": row.actor, "action": row.action,
            "subject": row.subject,
            "details": serde_json::from_str::<Value>(&row.details).unwrap_or_else(|_| Value::String(row.details.clone())),
            "hash": row.hash,
        })).collect::<Vec<_>>(),
        "next_before": next_before,
    })))
}

/// What `GET /api/v1/audit` answers.
pub fn entries_schema() -> Value {
    let entry = object([
        ("id", integer()),
        ("at_ms", integer()),
        ("actor", string()),
        ("action", string()),
        ("subject", string()),
        (
            "details",
            described("what the entry records (JSON as written)", any()),
        ),
        ("hash", string()),
    ]);
    object([
        ("entries", array(entry)),
        (
            "next_before",
            described(
                "where the next page starts (null: this is the last)",
                nullable(integer()),
            ),
        ),
    ])
}

/// `GET /api/v1/audit/facets`: the actors and actions in the log (with their entry counts) and
/// the configured agents, for the Audit page's filters.
pub async fn facets(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let found = state.store.read(audit_facets).await?;
    let pairs = |pairs: &[(String, i64)], key: &str| -> Vec<Value> {
        pairs
            .iter()
            .map(|(name, entries)| json!({ key: name, "entries": entries }))
            .collect()
    };
    let agents: Vec<String> = state
        .agents
        .get()
        .iter()
        .map(|agent| agent.name.clone())
        .collect();
    Ok(Json(json!({
        "actors": pairs(&found.actors, "actor"),
        "actions": pairs(&found.actions, "action"),
        "agents": agents,
    })))
}

/// What `GET /api/v1/audit/facets` answers.
pub fn facets_schema() -> Value {
    object([
        (
            "actors",
            array(object([("actor", string()), ("entries", integer())])),
        ),
        (
            "actions",
            array(object([("action", string()), ("entries", integer())])),
        ),
        ("agents", array(string())),
    ])
}

/// `GET /api/v1/audit/verify`: walks the whole hash chain.
pub async fn verify(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let verification = state.store.read(|conn| audit::verify(conn, None)).await?;
    Ok(Json(match verification {
        Verification::Valid { rows } => json!({"ok": true, "entries": rows, "problem": null}),
        Verification::Broken { row, reason } => json!({
            "ok": false, "entries": null,
            "problem": format!("entry {row}: {reason}"),
        }),
    }))
}

/// What `GET /api/v1/audit/verify` answers.
pub fn verify_schema() -> Value {
    object([
        ("ok", described("the chain is whole", boolean())),
        (
            "entries",
            described(
                "how many entries were checked (null: broken)",
                nullable(integer()),
            ),
        ),
        (
            "problem",
            described("where the chain breaks and what to do", nullable(string())),
        ),
    ])
}

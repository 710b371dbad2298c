//! Time zones: `/api/v1/timezones` (the daemon's zone and where it came from, each agent's
//! file setting, each known person's chosen zone) and `/api/v1/users/{id}/timezone` (the
//! operator sets or clears a person's zone, as `/timezone` does in the chat; audited).
//!
//! A person's zone is daemon-wide (one person, one zone) and stored in `user_timezones`; it has
//! no owning actor: runs read it when they start (`agent::zone`), so the write goes to the store
//! directly, with its audit row in the same transaction.

use axum::Json;
use axum::extract::{Path, State};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{array, described, integer, nullable, object, string};
use super::{ApiError, StudioState, json_body};
use crate::agent::zone::{local_time_text, resolve, set_user_zone};
use crate::config::{AgentSpec, DaemonTimezone};
use crate::schedule::parse_timezone;
use crate::store::timezones;

/// What Studio knows of zones without asking anyone: from the config, once per boot.
#[derive(Debug, Clone)]
pub struct Directory {
    pub daemon: DaemonTimezone,
    pub agents: Vec<AgentZone>,
}

/// An agent's file setting and the Telegram people its file names.
#[derive(Debug, Clone)]
pub struct AgentZone {
    pub agent: String,
    pub timezone: Option<String>,
    pub people: Vec<i64>,
}

impl Directory {
    /// The zone of `agent`'s file, else the daemon's.
    pub fn agent_zone(&self, agent: &str) -> chrono_tz::Tz {
        let file = self
            .agents
            .iter()
            .find(|entry| entry.agent == agent)
            .and_then(|entry| entry.timezone.as_deref());
        resolve(None, file, &self.daemon).zone
    }

    pub fn new(daemon: &DaemonTimezone, agents: &[AgentSpec]) -> Directory {
        Directory {
            daemon: daemon.clone(),
            agents: agents
                .iter()
                .map(|spec| AgentZone {
                    agent: spec.name.clone(),
                    timezone: spec.timezone.clone(),
                    people: spec.telegram_people(),
                })
                .collect(),
        }
    }
}

/// `GET /api/v1/timezones`
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let (stored, names) = state
        .store
        .read(|conn| {
            Ok((
                timezones::user_timezones(conn)?,
                timezones::known_names(conn)?,
            ))
        })
        .await?;
    let directory = state.timezones.get();
    let now = chrono::Utc::now();
    let agents: Vec<Value> = directory
        .agents
        .iter()
        .map(|agent| {
            let effective = resolve(None, agent.timezone.as_deref(), &directory.daemon);
            json!({
                "agent": agent.agent, "timezone": agent.timezone,
                "effective": effective.zone.name(), "source": effective.describe_source(),
                "local_time": local_time_text(now, effective.zone),
            })
        })
        .collect();
    let mut people: std::collections::BTreeSet<i64> =
        stored.iter().map(|row| row.user_id).collect();
    people.extend(names.iter().map(|(id, _)| *id));
    people.extend(
        directory
            .agents
            .iter()
            .flat_map(|agent| agent.people.iter().copied()),
    );
    let people: Vec<Value> = people
        .into_iter()
        .map(|user_id| {
            let row = stored.iter().find(|row| row.user_id == user_id);
            let name = names
                .iter()
                .find(|(id, _)| *id == user_id)
                .map(|(_, name)| name);
            let agents: Vec<&str> = directory
                .agents
                .iter()
                .filter(|agent| agent.people.contains(&user_id))
                .map(|agent| agent.agent.as_str())
                .collect();
            json!({
                "user_id": user_id, "name": name, "agents": agents,
                "timezone": row.map(|row| &row.timezone),
                "changed_ms": row.map(|row| row.changed_ms),
                "changed_by": row.map(|row| &row.changed_by),
                "local_time": row.and_then(|row| parse_timezone(&row.timezone).ok())
                    .map(|zone| local_time_text(now, zone)),
            })
        })
        .collect();
    Ok(Json(json!({
        "daemon": {
            "timezone": directory.daemon.zone.name(), "origin": directory.daemon.origin,
            "local_time": local_time_text(now, directory.daemon.zone),
        },
        "agents": agents,
        "people": people,
    })))
}

/// What `GET /api/v1/timezones` answers.
pub fn list_schema() -> Value {
    let agent = object([
        ("agent", string()),
        (
            "timezone",
            described("the agent file's zone (null: none set)", nullable(string())),
        ),
        ("effective", described("the zone it lives in", string())),
        (
            "source",
            described("where that zone comes from, in words", string()),
        ),
        ("local_time", string()),
    ]);
    let person = object([
        ("user_id", integer()),
        ("name", nullable(string())),
        ("agents", array(string())),
        ("timezone", nullable(string())),
        ("changed_ms", nullable(integer())),
        ("changed_by", nullable(string())),
        ("local_time", nullable(string())),
    ]);
    object([
        (
            "daemon",
            object([
                ("timezone", string()),
                ("origin", string()),
                ("local_time", string()),
            ]),
        ),
        ("agents", array(agent)),
        ("people", array(person)),
    ])
}

/// A person's zone.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimezoneBody {
    /// An IANA name; empty or null: forget the person's choice.
    timezone: Option<String>,
}

/// `PATCH /api/v1/users/{id}/timezone` with `{"timezone": "Europe/Berlin"}` (or `""` to clear).
pub async fn set_user(
    State(state): State<StudioState>,
    Path(user_id): Path<i64>,
    body: Result<Json<TimezoneBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = json_body(body)?;
    if user_id <= 0 {
        return Err(ApiError::bad_request(format!(
            "`{user_id}` is not a Telegram user id (a positive number)"
        )));
    }
    let zone = match body.timezone.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(name) => {
            Some(parse_timezone(name).map_err(|error| ApiError::bad_request(error.to_string()))?)
        }
    };
    set_user_zone(&state.store, &state.events, user_id, zone, "operator").await?;
    Ok(Json(json!({
        "user_id": user_id,
        "timezone": zone.map(|zone| zone.name()),
        "local_time": zone.map(|zone| local_time_text(chrono::Utc::now(), zone)),
    })))
}

/// What `PATCH /api/v1/users/{id}/timezone` answers.
pub fn set_user_schema() -> Value {
    object([
        ("user_id", integer()),
        ("timezone", nullable(string())),
        ("local_time", nullable(string())),
    ])
}

//! Agents, their sessions and transcripts: `/api/v1/agents`, `/api/v1/sessions` (Studio's chat
//! is `chat.rs`).
//!
//! Runtime settings (autonomy, model, paused) are changed through the agent's handle, which
//! stores them before applying them to its sessions. A session carries a `label` a person reads
//! ("Telegram chat 42"); a transcript's events carry what a tool was asked (`tool_calls`, with
//! their arguments) and what answered (`tool`), so that a request for tools is drawn as tool
//! cards, never as an empty message. What is shown was redacted when it was stored, and is
//! redacted again on the way out.

use axum::Json;
use axum::extract::{Path, Query, State};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{
    any, array, boolean, described, extend, integer, map, nullable, object, one_of, requiring,
    string,
};
use super::{ApiError, StudioState};
use crate::config::AgentSpec;
use crate::domain::ChatKey;
use crate::protocol::agent::{Agent, AgentError, AgentView, SkillView};
use crate::store::sessions::{self, EventKindRow, EventRow, SessionRow};

fn agent(state: &StudioState, name: &str) -> Result<Agent, ApiError> {
    if !state.agents.get().iter().any(|agent| agent.name == name) {
        return Err(ApiError::not_found(format!("no agent is named `{name}`")));
    }
    Ok(Agent::new(&state.registry, name))
}

/// An agent's refusal is the operator's mistake; anything else: the agent is not reachable.
fn api_error(name: &str, error: AgentError) -> ApiError {
    match error {
        AgentError::Unavailable(_) => ApiError::unavailable(&format!("agent `{name}`")),
        error @ AgentError::NoSkill(_) => ApiError::not_found(error.to_string()),
        AgentError::Refused(message) => ApiError::bad_request(message),
    }
}

pub async fn view(state: &StudioState, name: &str) -> Result<AgentView, ApiError> {
    agent(state, name)?
        .view()
        .await
        .map_err(|error| api_error(name, error))
}

/// An agent as Studio lists it.
///
/// `not_in_file` lists the settings the agent runs with that its file does not say: values an
/// earlier version kept in the database when they were set in Studio, which the boot could not
/// move into a file Studio cannot write (`key`, `running`, `file`).
pub(super) fn agent_json(view: &AgentView, file: Option<&AgentSpec>) -> Value {
    let mut not_in_file = Vec::new();
    if let Some(file) = file {
        if file.model != view.model {
            not_in_file.push(json!({"key": "model", "running": view.model, "file": file.model}));
        }
        if file.autonomy != view.autonomy {
            not_in_file.push(json!({
                "key": "autonomy", "running": view.autonomy.as_str(), "file": file.autonomy.as_str(),
            }));
        }
    }
    json!({
        "name": view.name, "reachable": true, "description": view.description, "provider": view.provider,
        "model": view.model, "autonomy": view.autonomy.as_str(), "paused": view.paused,
        "tools": view.tools, "sessions_open": view.sessions, "telegram": view.has_telegram,
        "skills": view.skills.iter().map(skill_json).collect::<Vec<_>>(),
        "not_in_file": not_in_file,
    })
}

/// An agent as [`agent_json`] shows it.
pub fn agent_schema() -> Value {
    object([
        ("name", string()),
        (
            "reachable",
            described("its actor answered (false: `reason` says why)", boolean()),
        ),
        ("description", string()),
        ("provider", string()),
        ("model", string()),
        (
            "autonomy",
            one_of(&["trust_first", "require_approval", "supervised"]),
        ),
        (
            "paused",
            described(
                "runtime state: messages wait until it is resumed",
                boolean(),
            ),
        ),
        ("tools", array(string())),
        ("sessions_open", integer()),
        ("telegram", described("it has a Telegram bot", boolean())),
        ("skills", array(skill_schema())),
        (
            "not_in_file",
            described(
                "settings it runs with that its file does not say (kept in the database by an earlier version)",
                array(object([
                    ("key", one_of(&["model", "autonomy"])),
                    ("running", string()),
                    ("file", string()),
                ])),
            ),
        ),
    ])
}

/// A skill as one agent has it: the catalogue entry with its validation status (`valid`,
/// `error`), its front matter (`tools`, `mcp`, `risk`, `requires`, `limited_to` — the front
/// matter's `agents` — and `unknown_keys`, kept and shown, never used), and this agent's
/// `enabled`, `available` (it could use it), `usable` (enabled and available: its runs load it)
/// and `reason` (why it is not available).
pub fn skill_json(skill: &SkillView) -> Value {
    json!({
        "name": skill.name, "description": skill.description, "level": skill.level,
        "path": skill.path, "valid": skill.invalid.is_none(), "error": skill.invalid,
        "tools": skill.tools, "mcp": skill.mcp, "risk": skill.risk,
        "requires": {"env": skill.requires.env, "bins": skill.requires.bins},
        "limited_to": skill.agents, "unknown_keys": skill.unknown, "files": skill.files,
        "enabled": skill.enabled, "available": skill.unavailable.is_none(),
        "usable": skill.enabled && skill.unavailable.is_none(), "reason": skill.unavailable,
    })
}

/// A skill as [`skill_json`] shows it.
fn skill_schema() -> Value {
    object([
        ("name", string()),
        ("description", string()),
        ("level", one_of(&["bundled", "installed", "workspace"])),
        ("path", string()),
        ("valid", boolean()),
        ("error", nullable(string())),
        ("tools", array(string())),
        ("mcp", array(string())),
        ("risk", nullable(string())),
        (
            "requires",
            object([("env", array(string())), ("bins", array(string()))]),
        ),
        ("limited_to", nullable(array(string()))),
        ("unknown_keys", map(string())),
        ("files", array(string())),
        ("enabled", boolean()),
        ("available", boolean()),
        ("usable", boolean()),
        ("reason", nullable(string())),
    ])
}

/// What is said of an agent whose actor does not answer (restarting, or stopped for good).
fn unreachable_reason(name: &str) -> String {
    format!(
        "agent `{name}` is not answering right now (it may be restarting); try again in a moment"
    )
}

fn session_json(row: &SessionRow) -> Value {
    json!({
        "id": row.id, "agent": row.agent, "chat": row.chat, "label": chat_label(&row.chat),
        "continuable": continuable(&row.chat), "status": row.status.as_str(),
        "created_ms": row.created_ms, "updated_ms": row.updated_ms,
    })
}

/// A session as [`session_json`] shows it.
fn session_schema() -> Value {
    object([
        ("id", integer()),
        ("agent", string()),
        (
            "chat",
            described(
                "the conversation's key: `tg:<chat id>`, `wa:<number>`, `sg:<number or group>`, `studio:<id>`, ...",
                string(),
            ),
        ),
        ("label", described("the conversation in words", string())),
        (
            "continuable",
            described("Studio's chat can continue it", boolean()),
        ),
        ("status", string()),
        ("created_ms", integer()),
        ("updated_ms", integer()),
    ])
}

/// A conversation's name for people: "Studio: operator", "Telegram chat 42, topic 7".
pub fn chat_label(chat: &str) -> String {
    let Some(key) = ChatKey::parse(chat) else {
        return chat.to_string();
    };
    let id = key.id();
    match chat.split_once(':').map(|(prefix, _)| prefix) {
        Some("tg") => match (key.telegram_chat_id(), key.telegram_thread_id()) {
            (Some(chat), Some(topic)) => format!("Telegram chat {chat}, topic {topic}"),
            (Some(chat), None) => format!("Telegram chat {chat}"),
            _ => format!("Telegram {id}"),
        },
        Some("wa") => format!("WhatsApp +{id}"),
        Some("sg") if id.starts_with('+') => format!("Signal {id}"),
        Some("sg") => format!("Signal group {id}"),
        Some("studio") => format!("Studio: {id}"),
        Some("cli") => format!("Terminal: {id}"),
        Some("api") => format!("API: {id}"),
        Some("sched") => format!("Scheduled job {id}"),
        Some("trigger") => format!("Webhook trigger {id}"),
        Some("handoff") => format!("Handed-over task {id}"),
        _ => chat.to_string(),
    }
}

/// Whether Studio's chat can continue this conversation (Studio ones and those on a person's
/// channel: Telegram, WhatsApp, Signal).
fn continuable(chat: &str) -> bool {
    chat.starts_with("studio:") || ChatKey::parse(chat).is_some_and(|key| key.kind().has_outbox())
}

/// A transcript event for Studio: a request for tools carries its calls (`tool_calls`: id, name,
/// arguments), a tool result its call (`tool`: call id, name, error or not).
fn event_json(event: &EventRow) -> Value {
    let redact = |text: &str| crate::secrets::redact(text).into_owned();
    let data: Value = event
        .data
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or(Value::Null);
    let mut body = json!({
        "id": event.id, "kind": event.kind.as_str(), "sender": event.sender,
        "content": redact(&event.content), "run_id": event.run_id, "created_ms": event.created_ms,
    });
    match event.kind {
        EventKindRow::Assistant => {
            let calls: Vec<Value> = crate::agent::transcript::parse_tool_calls(event.data.as_deref())
                .iter()
                .map(|call| {
                    let arguments = redact(&call.arguments);
                    json!({
                        "id": call.id, "name": call.name,
                        "arguments": serde_json::from_str::<Value>(&arguments).unwrap_or(Value::String(arguments)),
                    })
                })
                .collect();
            if !calls.is_empty() {
                body["tool_calls"] = Value::Array(calls);
            }
        }
        EventKindRow::ToolResult => {
            body["tool"] = json!({
                "call_id": data["call_id"], "name": data["name"], "is_error": data["is_error"],
            });
        }
        EventKindRow::User | EventKindRow::Notice => {}
    }
    body
}

/// A transcript event as [`event_json`] shows it.
fn event_schema() -> Value {
    let call = object([("id", string()), ("name", string()), ("arguments", any())]);
    object([
        ("id", integer()),
        (
            "kind",
            one_of(&["user", "assistant", "tool_result", "notice"]),
        ),
        ("sender", nullable(string())),
        ("content", string()),
        ("run_id", nullable(integer())),
        ("created_ms", integer()),
        (
            "tool_calls?",
            described("an assistant's request for tools", array(call)),
        ),
        (
            "tool?",
            described(
                "the call a tool result answers",
                object([
                    ("call_id", nullable(string())),
                    ("name", nullable(string())),
                    ("is_error", nullable(boolean())),
                ]),
            ),
        ),
    ])
}

/// `GET /api/v1/agents`: every configured agent; one that does not answer is listed with
/// `reachable: false` and the reason instead of failing the whole list.
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let mut agents = Vec::new();
    for agent in state.agents.get().iter() {
        agents.push(match view(&state, &agent.name).await {
            Ok(view) => agent_json(&view, state.files.get().agents.get(&agent.name)),
            Err(_) => json!({
                "name": agent.name, "telegram": agent.telegram, "reachable": false,
                "reason": unreachable_reason(&agent.name),
            }),
        });
    }
    Ok(Json(json!({"agents": agents})))
}

/// What `GET /api/v1/agents` answers: an agent that does not answer has only `name`,
/// `telegram`, `reachable: false` and `reason`.
pub fn list_schema() -> Value {
    let agent = extend(agent_schema(), [("reason?", string())]);
    object([(
        "agents",
        array(requiring(agent, &["name", "reachable", "telegram"])),
    )])
}

/// `GET /api/v1/agents/{name}`: the agent and its newest sessions.
pub async fn detail(
    State(state): State<StudioState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let view = view(&state, &name).await?;
    let mut body = agent_json(&view, state.files.get().agents.get(&name));
    let agent = name.clone();
    let rows = state
        .store
        .read(move |conn| sessions::list(conn, Some(&agent), 50))
        .await?;
    body["sessions"] = rows.iter().map(session_json).collect();
    Ok(Json(body))
}

/// What `GET /api/v1/agents/{name}` answers.
pub fn detail_schema() -> Value {
    extend(agent_schema(), [("sessions", array(session_schema()))])
}

/// `GET /api/v1/skills`: the catalogue across agents. Each skill carries its catalogue entry
/// (see [`skill_json`]; `available` there: some agent can use it) and `agents`: per configured
/// agent `enabled`, `available`, `usable`, `reason` and `shadowed` (why the agent's workspace
/// skill of the same name is not used, if it has one) — also for an agent whose workspace lacks
/// the skill (`present: false`) or that does not answer (`reachable: false`; such agents are
/// also listed under `unreachable`, and never make the whole catalogue fail).
pub async fn skills(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let mut views = Vec::new();
    let mut unreachable = Vec::new();
    for agent in state.agents.get().iter() {
        match view(&state, &agent.name).await {
            Ok(view) => views.push(view),
            Err(_) => unreachable.push(agent.name.clone()),
        }
    }
    // Catalogue entries from the first agent that sees each skill (bundled and installed skills
    // are the same for all; a workspace skill is its agent's own).
    let mut catalogue: std::collections::BTreeMap<String, Value> = Default::default();
    for view in &views {
        for skill in &view.skills {
            catalogue
                .entry(skill.name.clone())
                .or_insert_with(|| skill_json(skill));
        }
    }
    for (name, entry) in catalogue.iter_mut() {
        let mut agents = Vec::new();
        for agent in state.agents.get().iter() {
            let seen = views.iter().find(|view| view.name == agent.name);
            let skill = seen.and_then(|view| view.skills.iter().find(|s| &s.name == name));
            agents.push(match (seen, skill) {
                (Some(view), Some(skill)) => json!({
                    "agent": agent.name, "reachable": true, "present": true,
                    "enabled": skill.enabled, "available": skill.unavailable.is_none(),
                    "usable": skill.enabled && skill.unavailable.is_none(),
                    "reason": skill.unavailable, "level": skill.level,
                    // A second entry of the same name is a workspace skill shadowed by this one.
                    "shadowed": view.skills.iter().filter(|s| &s.name == name).nth(1)
                        .and_then(|shadowed| shadowed.unavailable.clone()),
                }),
                (Some(_), None) => json!({
                    "agent": agent.name, "reachable": true, "present": false,
                    "enabled": false, "available": false, "usable": false,
                    "reason": "not in this agent's skills folders (it is another agent's workspace skill)",
                }),
                (None, _) => json!({
                    "agent": agent.name, "reachable": false, "present": null,
                    "enabled": null, "available": false, "usable": false,
                    "reason": unreachable_reason(&agent.name),
                }),
            });
        }
        let any = agents.iter().any(|agent| agent["available"] == true);
        entry["available"] = json!(any);
        if any {
            entry["reason"] = Value::Null;
        }
        // Enablement is per agent only.
        if let Some(object) = entry.as_object_mut() {
            object.remove("enabled");
            object.remove("usable");
        }
        entry["agents"] = Value::Array(agents);
    }
    Ok(Json(json!({
        "skills": catalogue.into_values().collect::<Vec<_>>(),
        "unreachable": unreachable.iter().map(|name| json!({
            "agent": name, "reason": unreachable_reason(name),
        })).collect::<Vec<_>>(),
    })))
}

/// What `GET /api/v1/skills` answers.
pub fn skills_schema() -> Value {
    let per_agent = object([
        ("agent", string()),
        ("reachable", boolean()),
        (
            "present",
            described(
                "the skill is in this agent's folders (null: it does not answer)",
                nullable(boolean()),
            ),
        ),
        ("enabled", nullable(boolean())),
        ("available", boolean()),
        ("usable", boolean()),
        ("reason", nullable(string())),
        ("level?", string()),
        ("shadowed?", nullable(string())),
    ]);
    let mut skill = extend(skill_schema(), [("agents", array(per_agent))]);
    if let Some(keys) = skill["properties"].as_object_mut() {
        keys.remove("enabled");
        keys.remove("usable");
    }
    if let Some(required) = skill["required"].as_array_mut() {
        required.retain(|key| key != "enabled" && key != "usable");
    }
    object([
        ("skills", array(skill)),
        (
            "unreachable",
            array(object([("agent", string()), ("reason", string())])),
        ),
    ])
}

/// Which sessions `GET /api/v1/sessions` lists.
#[derive(Deserialize, JsonSchema)]
pub struct SessionsQuery {
    /// Only this agent's.
    agent: Option<String>,
    /// How many (default 100, at most 1,000).
    limit: Option<u32>,
}

/// `GET /api/v1/sessions?agent=NAME`
pub async fn list_sessions(
    State(state): State<StudioState>,
    Query(query): Query<SessionsQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = query.limit.unwrap_or(100).clamp(1, 1_000);
    let agent = query.agent.filter(|agent| !agent.is_empty());
    let rows = state
        .store
        .read(move |conn| sessions::list(conn, agent.as_deref(), limit))
        .await?;
    Ok(Json(
        json!({"sessions": rows.iter().map(session_json).collect::<Vec<_>>()}),
    ))
}

/// What `GET /api/v1/sessions` answers.
pub fn sessions_schema() -> Value {
    object([("sessions", array(session_schema()))])
}

/// `GET /api/v1/sessions/{id}`: the session and its transcript (the newest 500 events).
pub async fn session_detail(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let (row, events) = state
        .store
        .read(move |conn| {
            let Some(row) = sessions::get(conn, id)? else {
                return Ok(None);
            };
            Ok(Some((row, sessions::recent_events(conn, id, 500)?)))
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no session {id}")))?;
    let mut body = session_json(&row);
    body["events"] = events.iter().map(event_json).collect();
    Ok(Json(body))
}

/// What `GET /api/v1/sessions/{id}` answers.
pub fn session_detail_schema() -> Value {
    extend(session_schema(), [("events", array(event_schema()))])
}

//! Agents, their sessions and transcripts, and Studio's chat: `/api/v1/agents`,
//! `/api/v1/sessions`.
//!
//! Runtime settings (autonomy, model, paused) are changed through the agent's handle, which
//! stores them before applying them to its sessions. Chat goes through the local channel like
//! the terminal chat: the message is a real inbound of chat `studio:<id>`, and the answer streams
//! back as Server-Sent Events (`tool`, `partial`, `notice`, `final`).

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, StudioState, json_body};
use crate::domain::{ChatKey, Inbound, InboundSource, OutEvent, Sender};
use crate::protocol::agent::{Agent, AgentError, AgentView, SkillView};
use crate::protocol::local::LocalChannel;
use crate::store::sessions::{self, SessionRow};

/// How long a Studio chat answer may take before the stream ends with a notice.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

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

pub(super) fn agent_json(view: &AgentView) -> Value {
    json!({
        "name": view.name, "reachable": true, "description": view.description, "provider": view.provider,
        "model": view.model, "autonomy": view.autonomy.as_str(), "paused": view.paused,
        "tools": view.tools, "sessions_open": view.sessions, "telegram": view.has_telegram,
        "skills": view.skills.iter().map(skill_json).collect::<Vec<_>>(),
    })
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

/// What is said of an agent whose actor does not answer (restarting, or stopped for good).
fn unreachable_reason(name: &str) -> String {
    format!(
        "agent `{name}` is not answering right now (it may be restarting); try again in a moment"
    )
}

fn session_json(row: &SessionRow) -> Value {
    json!({
        "id": row.id, "agent": row.agent, "chat": row.chat, "status": row.status.as_str(),
        "created_ms": row.created_ms, "updated_ms": row.updated_ms,
    })
}

/// `GET /api/v1/agents`: every configured agent; one that does not answer is listed with
/// `reachable: false` and the reason instead of failing the whole list.
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let mut agents = Vec::new();
    for agent in state.agents.get().iter() {
        agents.push(match view(&state, &agent.name).await {
            Ok(view) => agent_json(&view),
            Err(_) => json!({
                "name": agent.name, "telegram": agent.telegram, "reachable": false,
                "reason": unreachable_reason(&agent.name),
            }),
        });
    }
    Ok(Json(json!({"agents": agents})))
}

/// `GET /api/v1/agents/{name}`: the agent and its newest sessions.
pub async fn detail(
    State(state): State<StudioState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let view = view(&state, &name).await?;
    let mut body = agent_json(&view);
    let agent = name.clone();
    let rows = state
        .store
        .read(move |conn| sessions::list(conn, Some(&agent), 50))
        .await?;
    body["sessions"] = rows.iter().map(session_json).collect();
    Ok(Json(body))
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

#[derive(Deserialize)]
pub struct SessionsQuery {
    agent: Option<String>,
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
    body["events"] = events
        .iter()
        .map(|event| {
            json!({
                "id": event.id, "kind": event.kind.as_str(), "sender": event.sender,
                "content": event.content, "run_id": event.run_id, "created_ms": event.created_ms,
            })
        })
        .collect();
    Ok(Json(body))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatBody {
    text: String,
    /// The conversation id (letters, digits, `-`, `_`); default `operator`.
    chat: Option<String>,
}

/// `POST /api/v1/agents/{name}/chat` with `{"text": "...", "chat": "id"}`: the answer as SSE.
pub async fn chat(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    body: Result<Json<ChatBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(body)?;
    let text = body.text.trim().to_string();
    if text.is_empty() {
        return Err(ApiError::bad_request("`text` must not be empty"));
    }
    let id = body.chat.unwrap_or_else(|| "operator".into());
    if id.is_empty()
        || id.len() > 64
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ApiError::bad_request(
            "`chat` must be 1-64 letters, digits, `-` or `_`",
        ));
    }
    let agent = agent(&state, &name)?;
    let chat = ChatKey::studio(&id);
    let receiver = LocalChannel::new(&state.registry)
        .subscribe(&chat)
        .await
        .ok_or_else(|| ApiError::unavailable("the local channel"))?;
    let correlation = format!("studio-{:016x}", rand::random::<u64>());
    let inbound = Inbound {
        agent: name.clone(),
        chat,
        sender: Sender::new("studio:operator".to_string(), "operator".to_string()),
        text,
        attachments: Vec::new(),
        source: InboundSource::Local,
        received_ms: crate::clock::now_ms(),
        context: None,
        correlation: Some(correlation.clone()),
    };
    agent
        .inbound(inbound)
        .map_err(|_| ApiError::unavailable(&format!("agent `{name}`")))?;
    Ok(Sse::new(answer_stream(receiver, correlation))
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn sse(kind: &str, data: Value) -> Event {
    Event::default().event(kind).data(data.to_string())
}

fn answer_stream(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<crate::domain::Outbound>,
    correlation: String,
) -> impl Stream<Item = Result<Event, Infallible>> {
    super::gateway::async_stream(move |sender| async move {
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        loop {
            let Ok(Some(outbound)) = tokio::time::timeout_at(deadline, receiver.recv()).await
            else {
                let _ = sender.send(sse(
                    "notice",
                    json!({"text": "no answer in time; the run goes on and is visible under Runs"}),
                ));
                let _ = sender.send(sse("final", json!({"text": "", "run_id": null})));
                break;
            };
            // A Studio chat has one subscriber per request; other requests' output is skipped.
            if outbound
                .correlation
                .as_deref()
                .is_some_and(|c| c != correlation)
            {
                continue;
            }
            let event = match outbound.event {
                OutEvent::Partial { text } => sse("partial", json!({"text": text})),
                OutEvent::Tool { name, status } => {
                    sse("tool", json!({"name": name, "status": status}))
                }
                OutEvent::Notice { text } => sse("notice", json!({"text": text})),
                OutEvent::Final { text, .. } => {
                    let _ = sender.send(sse(
                        "final",
                        json!({"text": text, "run_id": outbound.run_id}),
                    ));
                    break;
                }
                OutEvent::Working | OutEvent::Silent { .. } => continue,
            };
            if sender.send(event).is_err() {
                break;
            }
        }
    })
}

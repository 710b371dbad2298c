//! The first-run setup's state (`GET /api/v1/setup`): what is done of the three steps that make
//! an agent reachable — a model provider it can use (its key kept), the agent itself, and a
//! Telegram bot (its token kept, the bot online, claimed by its owner: the claim itself is read
//! from `/api/v1/people`). Studio's Setup page (`studio/pages/setup.js`) draws from it and
//! makes each step with the routes that already exist: `/api/v1/providers/check`, `PUT
//! /api/v1/secrets/{name}`, `PUT /api/v1/providers/{name}`, `POST`/`PATCH /api/v1/agents`,
//! `/api/v1/telegram/check`. Nothing here writes.
//!
//! The agent the setup is about is the first one the files define (by name); a house that has
//! several set up already does not need the wizard.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, integer, nullable, object, string};
use super::{ApiError, StudioState};
use crate::config::ProviderConfig;

/// Whether a provider can be used as configured: it needs no key, or its key is set.
fn key_set(state: &StudioState, provider: &ProviderConfig) -> bool {
    let var = provider.api_key_env.trim();
    var.is_empty() || state.secrets.get().running.contains_key(var)
}

/// Whether the house still needs the setup: no agent, or the first agent's provider lacks its
/// key. (A missing bot is a step the operator may skip; the Overview says so on its own.)
pub fn needed(state: &StudioState) -> bool {
    let files = state.files.get();
    let Some(agent) = files.agents.values().next() else {
        return true;
    };
    match files.providers.get(&agent.provider) {
        Some(provider) => !key_set(state, provider),
        None => true,
    }
}

/// `GET /api/v1/setup`
pub async fn status(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let files = state.files.get();
    let agent = files.agents.values().next().cloned();
    let provider_name = agent
        .as_ref()
        .map(|agent| agent.provider.clone())
        .or_else(|| files.providers.keys().next().cloned());
    let provider = provider_name.as_ref().and_then(|name| {
        files.providers.get(name).map(|provider| {
            json!({
                "name": name,
                "kind": provider.kind.as_str(),
                "base_url": provider.base_url,
                "api_key_env": provider.api_key_env,
                "key_set": key_set(&state, provider),
            })
        })
    });
    let username = match &agent {
        Some(agent) if agent.telegram.is_some() => bot_username(&state, &agent.name).await?,
        _ => None,
    };
    let secrets = state.secrets.get();
    let agent = agent.map(|agent| {
        json!({
            "name": agent.name,
            "provider": agent.provider,
            "model": agent.model,
            "instructions": agent.instructions,
            "tools": agent.tools,
            "bot": agent.telegram.as_ref().map(|telegram| json!({
                "token_env": telegram.token_env,
                "token_set": secrets.running.contains_key(telegram.token_env.trim()),
                "api_url": telegram.api_url,
                "username": username,
            })),
        })
    });
    Ok(Json(json!({
        "needed": needed(&state),
        "config_file": files.config_file,
        "provider": provider,
        "agent": agent,
        "agents": files.agents.len(),
    })))
}

/// What `GET /api/v1/setup` answers.
pub fn status_schema() -> Value {
    let provider = object([
        ("name", string()),
        ("kind", string()),
        ("base_url", string()),
        (
            "api_key_env",
            described(
                "the variable (or stored secret) holding its key; empty: none",
                string(),
            ),
        ),
        (
            "key_set",
            described("its key is set (or none is needed)", boolean()),
        ),
    ]);
    let bot = object([
        ("token_env", string()),
        ("token_set", boolean()),
        ("api_url", string()),
        (
            "username",
            described(
                "the bot's @name as it said when it came online",
                nullable(string()),
            ),
        ),
    ]);
    let agent = object([
        ("name", string()),
        ("provider", string()),
        ("model", string()),
        ("instructions", string()),
        ("tools", array(string())),
        ("bot", nullable(bot)),
    ]);
    object([
        (
            "needed",
            described(
                "the house cannot answer yet: no agent, or its provider's key is missing",
                boolean(),
            ),
        ),
        ("config_file", nullable(string())),
        ("provider", nullable(provider)),
        ("agent", nullable(agent)),
        ("agents", integer()),
    ])
}

/// The bot's @name as it last said when it came online.
async fn bot_username(state: &StudioState, agent: &str) -> Result<Option<String>, ApiError> {
    let agent = agent.to_string();
    Ok(state
        .store
        .read(move |conn| {
            Ok(crate::store::events::recent(conn, Some("bot_status"), 200)?
                .into_iter()
                .filter_map(|event| {
                    let data: Value = serde_json::from_str(event.data.as_deref()?).ok()?;
                    (data["agent"] == agent.as_str())
                        .then(|| data["username"].as_str().map(str::to_string))
                        .flatten()
                })
                .next())
        })
        .await?)
}

//! Model providers and bots as the setup wizard and the agent editor need them: a provider's live
//! model list (`GET /api/v1/providers/{name}/models`), a provider checked before it is saved
//! (`POST /api/v1/providers/check`: does it answer, does it take the key, which models), a
//! provider written into the daemon's config (`PUT /api/v1/providers/{name}`), a bot token
//! checked with Telegram (`POST /api/v1/telegram/check`: the bot's @name), and a QR code of a
//! link (`GET /api/v1/qr.svg`, the claim link of a new bot for a phone's camera).
//!
//! A key or token given to a check is used for that one request and never stored, logged or
//! returned; storing one is the secrets store's job.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, object, string};
use super::{ApiError, StudioState, json_body};
use crate::config::edit::Setting;
use crate::config::{ProviderConfig, ProviderKind};
use crate::llm::Provider;
use crate::protocol::reload::{EditOutcome, FileEdit, Reloader};
use crate::secrets::Secret;

/// `GET /api/v1/providers/{name}/models`: asks the provider for its models now.
pub async fn models(
    State(state): State<StudioState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let providers = state.providers.get();
    let Some(provider) = providers.get(&name) else {
        return Err(ApiError::not_found(format!(
            "no model provider is named `{name}` (the config's [providers])"
        )));
    };
    let outcome = provider.probe().await;
    Ok(Json(json!({
        "provider": name, "ok": outcome.ok, "detail": outcome.detail, "models": outcome.models,
    })))
}

/// What `GET /api/v1/providers/{name}/models` answers.
pub fn models_schema() -> Value {
    object([
        ("provider", string()),
        ("ok", described("it answered and took its key", boolean())),
        (
            "detail",
            described(
                "one sentence for the operator (a 401 says the key was refused)",
                string(),
            ),
        ),
        ("models", array(string())),
    ])
}

/// A provider to try before it is saved.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckBody {
    /// `openai` (any OpenAI-compatible server), `anthropic`, `gemini`, or `ollama` (a local
    /// OpenAI-compatible server without a key).
    kind: String,
    /// Its address (empty: the kind's usual one).
    #[serde(default)]
    base_url: String,
    /// The key to try (empty: none).
    #[serde(default)]
    key: String,
}

/// The wire kind of a wizard's provider choice and its usual address.
fn kind_and_url(kind: &str, base_url: &str) -> Result<(ProviderKind, String), ApiError> {
    let (kind, default) = match kind {
        "openai" => (ProviderKind::Openai, "https://api.openai.com/v1"),
        "anthropic" => (ProviderKind::Anthropic, "https://api.anthropic.com"),
        "gemini" => (
            ProviderKind::Gemini,
            "https://generativelanguage.googleapis.com/v1beta",
        ),
        "ollama" => (ProviderKind::Openai, "http://127.0.0.1:11434/v1"),
        other => {
            return Err(ApiError::bad_request(format!(
                "`kind` must be openai, anthropic, gemini or ollama (got `{other}`)"
            )));
        }
    };
    let url = if base_url.trim().is_empty() {
        default.to_string()
    } else {
        base_url.trim().to_string()
    };
    if url::Url::parse(&url).is_err() {
        return Err(ApiError::bad_request(format!(
            "`base_url` is not a URL: `{url}` (write it like https://api.openai.com/v1)"
        )));
    }
    Ok((kind, url))
}

/// `POST /api/v1/providers/check`: a provider tried before it is saved. Answers whether it
/// answered and took the key (a 401 says so), and its models for the picker.
pub async fn check(
    body: Result<Json<CheckBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = json_body(body)?;
    let (kind, base_url) = kind_and_url(&body.kind, &body.base_url)?;
    let config: ProviderConfig =
        serde_json::from_value(json!({"kind": kind.as_str(), "base_url": base_url}))
            .map_err(|error| ApiError::bad_request(error.to_string()))?;
    let mut provider = Provider::from_config("check", &config);
    if !body.key.trim().is_empty() {
        crate::secrets::register(body.key.trim());
        provider = provider.with_key(Secret::new(body.key.trim()));
    }
    let outcome = provider.probe().await;
    Ok(Json(json!({
        "ok": outcome.ok, "detail": outcome.detail, "models": outcome.models,
        "kind": kind.as_str(), "base_url": base_url,
    })))
}

/// What `POST /api/v1/providers/check` answers.
pub fn check_schema() -> Value {
    object([
        ("ok", boolean()),
        ("detail", string()),
        ("models", array(string())),
        (
            "kind",
            described(
                "the wire format: `openai`, `anthropic` or `gemini`",
                string(),
            ),
        ),
        ("base_url", string()),
    ])
}

/// A provider to write into the daemon's config.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderBody {
    /// `openai`, `anthropic`, `gemini` or `ollama`.
    kind: String,
    /// Its address (empty: the kind's usual one).
    #[serde(default)]
    base_url: String,
    /// The variable (or stored secret) that holds its key; empty: no key (a local server).
    #[serde(default)]
    api_key_env: String,
    /// Its models cost nothing (a local server).
    #[serde(default)]
    free: bool,
}

/// `PUT /api/v1/providers/{name}`: writes `[providers.<name>]` into the daemon's config file
/// (validated first, comments kept) and applies it; agents using it restart with it.
pub async fn set(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    body: Result<Json<ProviderBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match json_body(body) {
        Ok(body) => body,
        Err(error) => return error.into_response(),
    };
    if let Err(error) = crate::config::edit::check_agent_name(&name) {
        return ApiError::bad_request(error.to_string().replace("`name`", "the provider's name"))
            .into_response();
    }
    let (kind, base_url) = match kind_and_url(&body.kind, &body.base_url) {
        Ok(found) => found,
        Err(error) => return error.into_response(),
    };
    let free = body.free || body.kind == "ollama";
    let edit = FileEdit::SetProvider {
        name: name.clone(),
        kind: kind.as_str().to_string(),
        base_url,
        api_key_env: body.api_key_env.trim().to_string(),
        free,
    };
    match Reloader::new(&state.registry)
        .edit(edit, "operator (studio)")
        .await
    {
        Ok(EditOutcome::Applied { path, report }) => Json(json!({
            "provider": name, "file": path, "reload": report.summary(), "reload_ok": report.ok,
        }))
        .into_response(),
        Ok(EditOutcome::Refused(reason)) => ApiError::bad_request(reason).into_response(),
        Ok(EditOutcome::NotWritable { path, reason, text }) => super::error::unwritable(
            format!(
                "The provider is valid, but {path} cannot be written ({reason}). Put this text in that file yourself, then reload."
            ),
            path,
            text,
        ),
        Err(_) => ApiError::unavailable("the reloader").into_response(),
    }
}

/// What `PUT /api/v1/providers/{name}` answers (a file that cannot be written: a 409 with the
/// text to put there).
pub fn set_schema() -> Value {
    object([
        ("provider", string()),
        ("file", described("the config file written", string())),
        (
            "reload",
            described("the reload's one-line summary", string()),
        ),
        ("reload_ok", boolean()),
    ])
}

/// A bot token to ask Telegram about.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenBody {
    /// The token BotFather gave (`123456789:AAE…`); used for this one request, never stored.
    token: String,
    /// The Bot API's address (default Telegram's; a test or a local Bot API server).
    api_url: Option<String>,
}

/// `POST /api/v1/telegram/check`: asks Telegram whose token this is (`getMe`); answers the
/// bot's @name, or what is wrong with the token. The token is not stored.
pub async fn check_token(
    body: Result<Json<TokenBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = json_body(body)?;
    let token = Secret::new(body.token.trim());
    if crate::telegram::client::bot_id(&token).is_none() {
        return Err(ApiError::bad_request(
            "`token` is not a bot token: BotFather gives one like 123456789:AAE… (copy it whole)",
        ));
    }
    crate::secrets::register(body.token.trim());
    let api_url = body
        .api_url
        .unwrap_or_else(|| crate::config::DEFAULT_TELEGRAM_API.to_string());
    match crate::telegram::client::check_token(&token, &api_url).await {
        Ok(username) => Ok(Json(json!({"ok": true, "username": username}))),
        Err(error) => Ok(Json(json!({
            "ok": false,
            "detail": format!("Telegram did not accept the token: {error}. Copy it again from @BotFather (/token)."),
        }))),
    }
}

/// What `POST /api/v1/telegram/check` answers: the bot's @name, or what is wrong.
pub fn check_token_schema() -> Value {
    object([
        ("ok", boolean()),
        (
            "username?",
            described(
                "the bot's @name, when Telegram accepted the token",
                string(),
            ),
        ),
        (
            "detail?",
            described("what is wrong with the token, when it did not", string()),
        ),
    ])
}

/// What to draw as a QR code.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QrQuery {
    /// The text (1 to 1000 characters), e.g. a bot's claim link.
    text: String,
}

/// `GET /api/v1/qr.svg?text=…`: `text` as a QR code, an SVG image (shown with `<img>`, so it can
/// never run anything).
pub async fn qr(Query(query): Query<QrQuery>) -> Response {
    if query.text.is_empty() || query.text.len() > 1000 {
        return ApiError::bad_request("`text` must be 1 to 1000 characters").into_response();
    }
    let code = match qrcode::QrCode::new(query.text.as_bytes()) {
        Ok(code) => code,
        Err(error) => {
            return ApiError::bad_request(format!("`text` cannot be a QR code: {error}"))
                .into_response();
        }
    };
    let svg = code
        .render::<qrcode::render::svg::Color>()
        .min_dimensions(200, 200)
        .quiet_zone(true)
        .build();
    ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response()
}

/// Settings for an agent file's `[telegram]` from a token variable and its owner (a helper of the
/// wizard's last step).
pub fn telegram_settings(token_env: &str, api_url: Option<&str>) -> Vec<(String, Setting)> {
    let mut settings = vec![(
        "telegram.token_env".to_string(),
        Setting::Text(token_env.to_string()),
    )];
    if let Some(api_url) = api_url {
        settings.push(("telegram.api_url".into(), Setting::Text(api_url.into())));
    }
    settings
}

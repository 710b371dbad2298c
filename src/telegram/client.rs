//! Building a bot client and reading Telegram's errors.
//!
//! Architecture Invariant: only `telegram` knows teloxide types. Everything leaving this module is
//! plain data: ids, strings, [`TelegramError`].

use std::time::Duration;

use teloxide::ApiError;
use teloxide::RequestError;
use teloxide::prelude::*;
use teloxide::types::Seconds;

use crate::secrets::Secret;

/// What went wrong talking to the Bot API, in the terms the daemon reacts to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TelegramError {
    /// 409: another process polls this token.
    #[error("another instance is polling this bot token (409 Conflict)")]
    Conflict,
    /// 401 / 404 on the token: it is wrong or revoked.
    #[error(
        "Telegram rejected the bot token (401 Unauthorized): check the environment variable that holds it"
    )]
    Unauthorized,
    /// 429: wait this long.
    #[error("rate limited by Telegram: retry after {0:?}")]
    RetryAfter(Duration),
    /// An edit with the same content: not an error for us.
    #[error("message is not modified")]
    NotModified,
    /// Telegram could not parse our HTML entities; resend as plain text.
    #[error("Telegram could not parse the message's formatting: {0}")]
    ParseEntities(String),
    #[error("the message is too long for Telegram")]
    TooLong,
    /// The chat cannot be reached (blocked the bot, deleted, not found): do not retry.
    #[error("the chat cannot be reached: {0}")]
    Undeliverable(String),
    /// The forum topic is gone or closed ("message thread not found", `TOPIC_CLOSED`).
    #[error("the forum topic cannot be written to: {0}")]
    TopicGone(String),
    /// What was to be sent cannot be (a file Telegram refused, or whose copy is gone): sending
    /// it again cannot help.
    #[error("{0}")]
    Rejected(String),
    #[error("network error: {0}")]
    Network(String),
    #[error("{0}")]
    Other(String),
}

impl TelegramError {
    /// Worth trying again later (the message stays in the outbox).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            TelegramError::RetryAfter(_) | TelegramError::Network(_) | TelegramError::Other(_)
        )
    }
}

impl From<RequestError> for TelegramError {
    fn from(error: RequestError) -> Self {
        // reqwest errors carry the request URL, and the URL carries the token: always redact.
        let text =
            |error: &dyn std::fmt::Display| crate::secrets::redact(&error.to_string()).into_owned();
        match error {
            RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => TelegramError::Conflict,
            RequestError::Api(ApiError::InvalidToken) => TelegramError::Unauthorized,
            RequestError::Api(ApiError::MessageNotModified) => TelegramError::NotModified,
            RequestError::Api(ApiError::CantParseEntities(detail)) => {
                TelegramError::ParseEntities(text(&detail))
            }
            RequestError::Api(ApiError::MessageIsTooLong | ApiError::EditedMessageIsTooLong) => {
                TelegramError::TooLong
            }
            RequestError::Api(
                ref api @ (ApiError::BotBlocked
                | ApiError::ChatNotFound
                | ApiError::UserDeactivated
                | ApiError::BotKicked
                | ApiError::BotKickedFromSupergroup
                | ApiError::CantInitiateConversation
                | ApiError::CantTalkWithBots
                | ApiError::MessageToEditNotFound),
            ) => TelegramError::Undeliverable(text(api)),
            RequestError::Api(ApiError::Unknown(ref description)) if is_topic_gone(description) => {
                TelegramError::TopicGone(text(description))
            }
            RequestError::RetryAfter(seconds) => TelegramError::RetryAfter(retry_duration(seconds)),
            RequestError::Network(error) => TelegramError::Network(text(&error)),
            other => TelegramError::Other(text(&other)),
        }
    }
}

/// Whether an API error's description is a 4xx refusal of the request itself (rather than a
/// server error worth another try).
pub fn is_refusal(description: &str) -> bool {
    let description = description.to_ascii_lowercase();
    ["bad request", "request entity too large", "forbidden"]
        .iter()
        .any(|refusal| description.starts_with(refusal))
}

/// Telegram's descriptions for a send into a forum topic that no longer takes messages.
fn is_topic_gone(description: &str) -> bool {
    let description = description.to_ascii_lowercase();
    ["message thread not found", "topic_deleted", "topic_closed"]
        .iter()
        .any(|known| description.contains(known))
}

fn retry_duration(seconds: Seconds) -> Duration {
    seconds.duration().max(Duration::from_secs(1))
}

/// The bot's Telegram id: the number before the colon of its token (no network needed).
pub fn bot_id(token: &Secret) -> Option<i64> {
    token
        .expose()
        .split_once(':')
        .and_then(|(id, _)| id.parse().ok())
}

/// A bot client for `api_url` whose HTTP timeout outlasts the long poll.
pub fn build(token: &Secret, api_url: &str, poll_timeout: Duration) -> Result<Bot, TelegramError> {
    let shared = shared_http_client(poll_timeout + Duration::from_secs(20))?;
    let url = reqwest::Url::parse(api_url.trim_end_matches('/'))
        .map_err(|error| TelegramError::Other(format!("invalid api_url `{api_url}`: {error}")))?;
    Ok(Bot::with_client(token.expose(), shared.client().clone()).set_api_url(url))
}

/// A client for uploads, on the same bot: without the long poll's timeout, which a large file
/// on a slow line outlasts (each upload sets its own limit, growing with the file's size); the
/// hour here only bounds a connection nobody watches any more.
pub fn upload_bot(bot: &Bot) -> Result<Bot, TelegramError> {
    let shared = shared_http_client(Duration::from_secs(3600))?;
    Ok(Bot::with_client(bot.token(), shared.client().clone()).set_api_url(bot.api_url()))
}

/// One HTTP client per timeout for all the process's bots, held by a token-less [`Bot`] (the
/// only handle on teloxide's reqwest 0.12 client type we can name). Each client has its own TLS
/// configuration, session cache and connection pool, some 30 KiB resident before its first
/// request, and every bot talks to the same API host anyway. A bot's token travels in each
/// request's path, never in the client.
fn shared_http_client(timeout: Duration) -> Result<Bot, TelegramError> {
    static CLIENTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::BTreeMap<Duration, Bot>>,
    > = std::sync::OnceLock::new();
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    if let Some(shared) = clients.get(&timeout) {
        return Ok(shared.clone());
    }
    let client = teloxide::net::default_reqwest_settings()
        .timeout(timeout)
        .build()
        .map_err(|error| TelegramError::Other(format!("cannot build the HTTP client: {error}")))?;
    let shared = Bot::with_client("", client);
    clients.insert(timeout, shared.clone());
    Ok(shared)
}

/// Asks Telegram who this token belongs to (`getMe`), within ten seconds.
pub async fn check_token(token: &Secret, api_url: &str) -> Result<String, TelegramError> {
    let bot = build(token, api_url, Duration::from_secs(5))?;
    match tokio::time::timeout(Duration::from_secs(10), bot.get_me()).await {
        Ok(Ok(me)) => Ok(me.username.clone().unwrap_or_default()),
        Ok(Err(error)) => Err(TelegramError::from(error)),
        Err(_) => Err(TelegramError::Network("no answer within 10 s".into())),
    }
}

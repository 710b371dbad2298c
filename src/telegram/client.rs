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
    /// The request did not get through: the whole cause, advice first (`crate::cause`).
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
            RequestError::Network(error) => TelegramError::Network(network_text(error.as_ref())),
            // Reading a file to send: not the network, but its cause matters as much.
            RequestError::Io(error) => TelegramError::Other(network_text(error.as_ref())),
            other => TelegramError::Other(text(&other)),
        }
    }
}

/// A network error's whole cause, its URL (which carries the token) left out: what a person can
/// do about it first, when it is known (too many open files, nothing listening), then every
/// layer down to the operating system's error — `error sending request` alone says nothing.
fn network_text(error: &(dyn std::error::Error + 'static)) -> String {
    let explained = crate::cause::explain(error);
    crate::secrets::redact(&without_url(&explained)).into_owned()
}

/// `text` without reqwest's ` for url (...)` parts.
fn without_url(text: &str) -> String {
    let mut rest = text;
    let mut out = String::with_capacity(text.len());
    while let Some(start) = rest.find(" for url (") {
        out.push_str(&rest[..start]);
        let after = &rest[start + " for url (".len()..];
        match after.find(')') {
            Some(end) => rest = &after[end + 1..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out
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

/// File descriptors a bot leaves free when it goes online (its long poll then holds one for as
/// long as it runs): room for Studio and `/readyz`, the database's readers, model calls and
/// replies, so that a process with too few descriptors for all its bots runs the ones that fit
/// and says plainly why the others are off, instead of starving everything.
pub const FD_RESERVE: u64 = 8;

/// Whether this process has room for one more bot (`FD_RESERVE` left after it); otherwise the
/// reason, advice first. Where the headroom cannot be read (not Linux), there is room.
pub fn room_for_a_bot() -> Result<(), TelegramError> {
    let headroom = match crate::fds::headroom() {
        Ok(headroom) => headroom,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(TelegramError::Network(crate::cause::explain(&error)));
        }
    };
    if headroom.free() > FD_RESERVE {
        return Ok(());
    }
    Err(TelegramError::Network(format!(
        "{} ({} of {} open; a bot goes online only with more than {FD_RESERVE} left for Studio, the database and replies)",
        crate::cause::TOO_MANY_OPEN_FILES,
        headroom.open,
        headroom.limit
    )))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_with_its_token_is_left_out_of_a_network_error() {
        assert_eq!(
            without_url(
                "error sending request for url (http://127.0.0.1:9/bot1:AAH/GetMe): client error (Connect)"
            ),
            "error sending request: client error (Connect)"
        );
        assert_eq!(without_url("no url here"), "no url here");
        assert_eq!(without_url("cut for url (http://x"), "cut");
    }
}

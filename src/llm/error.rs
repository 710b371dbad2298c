//! `LlmError`: every way a model call can fail, and the helpers that build those errors from HTTP
//! answers and reqwest errors.
//!
//! Invariant: no error text contains an API key or a request URL. Texts are built from the status
//! and the provider's own `error.message` (truncated), reqwest errors are stripped of their URL,
//! and every text passes through [`crate::secrets::redact`] before it is stored in an error.

use std::time::Duration;

use crate::llm::ModelRef;

/// Longest provider message kept in an error, in characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// Which timeout fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// The whole call (request, answer and, for streams, every chunk) took longer than the
    /// provider's `timeout`.
    WholeCall,
    /// A stream sent nothing for longer than the idle timeout.
    BetweenChunks,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error(
        "provider `{provider}` needs an API key: set {env} in Studio's Keys & tokens page or in the daemon's environment (named by [providers.{provider}].api_key_env)"
    )]
    MissingKey { provider: String, env: String },

    #[error("provider `{provider}`: {}", timeout_text(*.kind, *.after))]
    Timeout {
        provider: String,
        kind: TimeoutKind,
        after: Duration,
    },

    #[error("provider `{provider}`: rate limited (HTTP 429){}: {message}", retry_after_text(*.retry_after))]
    RateLimited {
        provider: String,
        retry_after: Option<Duration>,
        message: String,
    },

    /// Any other non-success HTTP status. `retry_after` is set when the answer carried a
    /// `Retry-After` header (503 often does).
    #[error("provider `{provider}`: HTTP {status}: {message}")]
    Http {
        provider: String,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },

    /// The request never got an answer: refused connection, DNS failure, reset, body cut short.
    #[error("{0}")]
    Connection(String),

    /// A stream that ended before its end marker, carried a malformed chunk, or was cut.
    #[error("{0}")]
    BrokenStream(String),

    /// A complete answer that is not what the protocol says it should be.
    #[error("{0}")]
    Malformed(String),

    /// The request cannot be sent at all (for example a model name that cannot go in a URL).
    #[error("{0}")]
    InvalidRequest(String),

    /// A fallback chain names a provider that is not configured.
    #[error("provider `{0}` is not configured: add [providers.{0}] to the config")]
    UnknownProvider(String),

    /// `chat_with_fallback` was given an empty chain.
    #[error("no model to call: the fallback chain is empty")]
    EmptyChain,

    /// Every model of a fallback chain failed; the failures in the order they were tried.
    #[error("all models failed: {}", failures_text(.failures))]
    AllModelsFailed { failures: Vec<(ModelRef, LlmError)> },
}

impl LlmError {
    /// Whether the same call may succeed if tried again later: rate limits, server errors,
    /// timeouts, connection problems and broken streams. Client errors (4xx other than 408 and
    /// 429), missing keys and malformed answers are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Timeout { .. }
            | LlmError::RateLimited { .. }
            | LlmError::Connection(_)
            | LlmError::BrokenStream(_) => true,
            LlmError::Http { status, .. } => *status == 408 || *status >= 500,
            LlmError::AllModelsFailed { failures } => {
                failures.iter().any(|(_, error)| error.is_retryable())
            }
            LlmError::MissingKey { .. }
            | LlmError::Malformed(_)
            | LlmError::InvalidRequest(_)
            | LlmError::UnknownProvider(_)
            | LlmError::EmptyChain => false,
        }
    }

    /// The wait the provider asked for, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after, .. } | LlmError::Http { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }
}

fn timeout_text(kind: TimeoutKind, after: Duration) -> String {
    match kind {
        TimeoutKind::WholeCall => format!(
            "no complete answer within {} (raise the provider's `timeout` if the model is slow)",
            humantime::format_duration(after)
        ),
        TimeoutKind::BetweenChunks => format!(
            "the stream sent nothing for {} (the server stalled or the model is overloaded)",
            humantime::format_duration(after)
        ),
    }
}

fn retry_after_text(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(wait) => format!(", retry after {}", humantime::format_duration(wait)),
        None => String::new(),
    }
}

fn failures_text(failures: &[(ModelRef, LlmError)]) -> String {
    failures
        .iter()
        .map(|(model, error)| format!("[{}/{}] {error}", model.provider, model.model))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Redacts secrets and cuts `text` to [`MAX_MESSAGE_CHARS`] characters.
pub(crate) fn clean_text(text: &str) -> String {
    let redacted = crate::secrets::redact(text.trim());
    match redacted.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &redacted[..cut]),
        None => redacted.into_owned(),
    }
}

/// The provider's own explanation from an error body: `error.message` (OpenAI, Anthropic,
/// Gemini), `error` as a string, a top-level `message`, or else the body itself when it is short
/// text. Always cleaned.
pub(crate) fn message_from_error_body(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
        let error = value.get("error");
        let message = error
            .and_then(|error| error.get("message"))
            .and_then(|message| message.as_str())
            .or_else(|| error.and_then(|error| error.as_str()))
            .or_else(|| value.get("message").and_then(|message| message.as_str()))
            .or_else(|| value.get("detail").and_then(|detail| detail.as_str()));
        if let Some(message) = message {
            return clean_text(message);
        }
    }
    let text = String::from_utf8_lossy(body);
    if text.trim().is_empty() {
        return "(empty error body)".to_string();
    }
    clean_text(&text)
}

/// The text of a reqwest error with its URL removed and its causes appended, redacted; a cause
/// a person must fix on the machine (too many open files, ...) is said first, in plain words.
pub(crate) fn reqwest_error_text(error: reqwest::Error) -> String {
    let error = error.without_url();
    clean_text(&crate::cause::explain(&error))
}

/// Parses a `Retry-After` value: delay seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>()
        && seconds.is_finite()
        && seconds >= 0.0
    {
        // More seconds than a `Duration` holds (`1e30`): longer than any caller waits.
        return Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    // A date in the past means "now".
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_accepts_seconds_and_http_dates() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        let in_ten_seconds = std::time::SystemTime::now() + Duration::from_secs(10);
        let parsed = parse_retry_after(&httpdate::fmt_http_date(in_ten_seconds)).unwrap();
        assert!(parsed <= Duration::from_secs(10) && parsed >= Duration::from_secs(8));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after("-3"), None);
        assert_eq!(parse_retry_after("1e30"), Some(Duration::MAX));
    }

    #[test]
    fn error_bodies_give_the_provider_message_cut_and_redacted() {
        crate::secrets::register("sk-error-body-secret-123");
        let openai = br#"{"error":{"message":"Incorrect API key provided: sk-error-body-secret-123","type":"invalid_request_error"}}"#;
        assert_eq!(
            message_from_error_body(openai),
            "Incorrect API key provided: ***"
        );
        assert_eq!(
            message_from_error_body(br#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(message_from_error_body(b""), "(empty error body)");
        let long = "x".repeat(1000);
        let cut = message_from_error_body(long.as_bytes());
        assert_eq!(cut.chars().count(), MAX_MESSAGE_CHARS + 1);
    }

    #[test]
    fn retryable_errors_are_the_transient_ones() {
        let http = |status| LlmError::Http {
            provider: "p".into(),
            status,
            message: String::new(),
            retry_after: None,
        };
        assert!(http(500).is_retryable());
        assert!(http(529).is_retryable());
        assert!(http(408).is_retryable());
        assert!(!http(400).is_retryable());
        assert!(!http(401).is_retryable());
        assert!(LlmError::BrokenStream("cut".into()).is_retryable());
        assert!(!LlmError::Malformed("junk".into()).is_retryable());
        assert!(
            !LlmError::MissingKey {
                provider: "p".into(),
                env: "K".into()
            }
            .is_retryable()
        );
    }
}

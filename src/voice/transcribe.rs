//! The OpenAI-compatible transcription client: `POST <base_url>/audio/transcriptions` with a
//! multipart body (`file`: the audio bytes with their file name and MIME type, `model`,
//! `response_format=json`), answered `{"text": "..."}`. OpenAI, Groq, faster-whisper servers
//! (`speaches`, `faster-whisper-server`) and whisper.cpp's `server --inference-path
//! /v1/audio/transcriptions` all speak it.
//!
//! Invariant (as in `llm`): no [`TranscriptionError`] text contains the API key or the URL — the
//! texts are built from the status, the provider's own `error.message` (cut and redacted) and
//! reqwest errors stripped of their URL.

use std::time::Duration;

use crate::secrets::Secret;

/// How long connecting may take before the attempt counts as a connection failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer body read (a transcript of ten minutes is a few kilobytes).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// The first wait before retrying a transient failure; doubled per attempt.
const RETRY_BASE: Duration = Duration::from_millis(500);

/// Why a voice note was not transcribed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TranscriptionError {
    #[error(
        "provider `{provider}` needs an API key for transcription: set the environment variable {env} (named by [providers.{provider}].api_key_env)"
    )]
    MissingKey { provider: String, env: String },

    #[error("provider `{provider}`: no transcript within {} (raise the provider's `timeout` if the server is slow)", humantime::format_duration(*.after))]
    Timeout { provider: String, after: Duration },

    /// The request never got an answer: refused connection, DNS failure, reset.
    #[error("{0}")]
    Connection(String),

    /// A non-success HTTP status; 400 and 415 usually mean the audio could not be decoded.
    #[error("provider `{provider}`: HTTP {status}: {message}")]
    Http {
        provider: String,
        status: u16,
        message: String,
    },

    /// A success answer that is not `{"text": "..."}`.
    #[error("provider `{provider}`: the answer is not a transcript: {reason}")]
    Malformed { provider: String, reason: String },
}

impl TranscriptionError {
    /// Whether trying again later may succeed: timeouts, unreachable servers, 408, 429 and 5xx.
    /// A refused file (4xx) or a missing key will fail the same way every time.
    pub fn is_transient(&self) -> bool {
        match self {
            TranscriptionError::Timeout { .. } | TranscriptionError::Connection(_) => true,
            TranscriptionError::Http { status, .. } => {
                *status == 408 || *status == 429 || *status >= 500
            }
            TranscriptionError::MissingKey { .. } | TranscriptionError::Malformed { .. } => false,
        }
    }

    /// Whether the provider said the audio itself is unusable (a 4xx other than auth, rate and
    /// size limits), as opposed to a configuration or server problem.
    pub fn is_unreadable_audio(&self) -> bool {
        matches!(self, TranscriptionError::Http { status, .. }
            if matches!(status, 400 | 415 | 422))
    }
}

/// The audio to transcribe.
#[derive(Debug, Clone)]
pub struct Audio {
    pub bytes: Vec<u8>,
    /// The name sent with the bytes; servers use its extension to pick the decoder.
    pub file_name: String,
    pub mime: String,
}

/// A configured transcription provider.
#[derive(Debug, Clone)]
pub struct Transcriber {
    provider: String,
    /// `<base_url>/audio/transcriptions`; never put into an error.
    endpoint: String,
    model: String,
    key: Option<Secret>,
    timeout: Duration,
    max_retries: u32,
    client: Result<reqwest::Client, String>,
}

impl Transcriber {
    /// A client for `provider`'s `<base_url>/audio/transcriptions` with `model`. `key` is sent as
    /// `Authorization: Bearer` when present; `timeout` bounds each attempt; transient failures are
    /// retried `max_retries` times with a doubling wait.
    pub fn new(
        provider: &str,
        base_url: &str,
        model: &str,
        key: Option<Secret>,
        timeout: Duration,
        max_retries: u32,
    ) -> Transcriber {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(crate::llm::reqwest_error_text);
        Transcriber {
            provider: provider.to_string(),
            endpoint: format!(
                "{}/audio/transcriptions",
                base_url.trim().trim_end_matches('/')
            ),
            model: model.trim().to_string(),
            key,
            timeout,
            max_retries,
            client,
        }
    }

    /// The provider's name (for logs and notes; never its URL).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    pub fn model(&self) -> &str {
        &self.model
    }

    /// The transcript of `audio`, trimmed (it may be empty: the server heard nothing).
    pub async fn transcribe(&self, audio: &Audio) -> Result<String, TranscriptionError> {
        let mut attempt = 0;
        loop {
            match self.attempt(audio).await {
                Err(error) if error.is_transient() && attempt < self.max_retries => {
                    let wait = RETRY_BASE.saturating_mul(1 << attempt.min(6));
                    tracing::debug!(provider = %self.provider, %error, ?wait, "transcription failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn attempt(&self, audio: &Audio) -> Result<String, TranscriptionError> {
        let client = self
            .client
            .as_ref()
            .map_err(|reason| TranscriptionError::Connection(reason.clone()))?;
        let file = reqwest::multipart::Part::bytes(audio.bytes.clone())
            .file_name(audio.file_name.clone())
            .mime_str(&audio.mime)
            .or_else(|_| {
                reqwest::multipart::Part::bytes(audio.bytes.clone())
                    .file_name(audio.file_name.clone())
                    .mime_str("application/octet-stream")
            })
            .map_err(|error| {
                TranscriptionError::Connection(crate::llm::reqwest_error_text(error))
            })?;
        let form = reqwest::multipart::Form::new()
            .part("file", file)
            .text("model", self.model.clone())
            .text("response_format", "json");
        let mut request = client
            .post(&self.endpoint)
            .timeout(self.timeout)
            .multipart(form);
        if let Some(key) = &self.key {
            let mut value = reqwest::header::HeaderValue::from_str(&format!(
                "Bearer {}",
                key.expose()
            ))
            .map_err(|_| {
                TranscriptionError::Connection(format!(
                    "provider `{}`: the API key contains characters an HTTP header cannot carry",
                    self.provider
                ))
            })?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let response = request
            .send()
            .await
            .map_err(|error| self.request_error(error))?;
        let status = response.status().as_u16();
        let body = read_limited(response)
            .await
            .map_err(|error| self.request_error(error))?;
        if !(200..300).contains(&status) {
            let mut message = crate::llm::message_from_error_body(&body);
            if status == 404 {
                message.push_str(
                    " (check transcription_model and base_url, which for OpenAI-compatible servers ends in /v1)",
                );
            }
            if status == 401 || status == 403 {
                message.push_str(" (check the API key the provider's api_key_env names)");
            }
            return Err(TranscriptionError::Http {
                provider: self.provider.clone(),
                status,
                message,
            });
        }
        parse_answer(&body).map_err(|reason| TranscriptionError::Malformed {
            provider: self.provider.clone(),
            reason,
        })
    }

    fn request_error(&self, error: reqwest::Error) -> TranscriptionError {
        if error.is_timeout() && !error.is_connect() {
            return TranscriptionError::Timeout {
                provider: self.provider.clone(),
                after: self.timeout,
            };
        }
        TranscriptionError::Connection(format!(
            "provider `{}`: could not reach the transcription server: {}",
            self.provider,
            crate::llm::reqwest_error_text(error)
        ))
    }
}

/// Reads at most [`MAX_ANSWER_BYTES`] of the body.
async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(piece) = response.chunk().await? {
        body.extend_from_slice(&piece);
        if body.len() >= MAX_ANSWER_BYTES {
            body.truncate(MAX_ANSWER_BYTES);
            break;
        }
    }
    Ok(body)
}

/// The transcript in an answer body: `{"text": "..."}` (extra fields such as `language`,
/// `duration` or `segments` are ignored), trimmed. Any other shape is the reason it is not one.
pub fn parse_answer(body: &[u8]) -> Result<String, String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|error| {
        format!(
            "not JSON ({error}); the server must answer response_format=json with {{\"text\": ...}}"
        )
    })?;
    match value.get("text") {
        Some(serde_json::Value::String(text)) => Ok(text.trim().to_string()),
        Some(_) => Err("`text` is not a string".to_string()),
        None => Err("no `text` field".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_give_their_text_or_say_what_is_wrong() {
        assert_eq!(
            parse_answer(br#"{"text": "  hello there \n"}"#),
            Ok("hello there".into())
        );
        assert_eq!(
            parse_answer(br#"{"text": "", "language": "en", "duration": 1.5}"#),
            Ok(String::new())
        );
        assert!(parse_answer(b"hello").unwrap_err().contains("not JSON"));
        assert!(
            parse_answer(br#"{"text": 5}"#)
                .unwrap_err()
                .contains("not a string")
        );
        assert!(parse_answer(br#"[]"#).unwrap_err().contains("no `text`"));
    }

    #[test]
    fn only_server_trouble_is_transient() {
        let http = |status| TranscriptionError::Http {
            provider: "p".into(),
            status,
            message: String::new(),
        };
        assert!(http(500).is_transient() && http(503).is_transient() && http(429).is_transient());
        assert!(!http(400).is_transient() && !http(401).is_transient());
        assert!(http(400).is_unreadable_audio() && !http(500).is_unreadable_audio());
        assert!(TranscriptionError::Connection("x".into()).is_transient());
    }
}

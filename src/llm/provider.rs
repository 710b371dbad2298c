//! `Provider`: one configured model endpoint and the call machinery around it — the HTTP request,
//! the per-call and idle timeouts, streaming over SSE, and retries with backoff (a `Retry-After`
//! is honoured up to a limit; one asking for longer fails the call at once so the chain moves on).
//!
//! Invariants:
//! - A streamed answer is complete only when the protocol's end marker arrived; anything else
//!   (a cut connection, a malformed chunk, a missing `[DONE]`/`message_stop`/finish reason) is
//!   `LlmError::BrokenStream`, never a short answer.
//! - Text already streamed to the caller is withdrawn with `StreamDelta::Reset` whenever it stops
//!   being the start of the answer: before a retry and when the call fails. After a success, the
//!   `Text` pieces since the last `Reset` concatenate to `ChatResponse::text`.
//! - The API key is sent in a header marked sensitive and never appears in an error; redirects are
//!   not followed, so a key header can never be replayed to another host.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc::UnboundedSender;

use crate::config::{ProviderConfig, ProviderKind};
use crate::llm::error::{
    TimeoutKind, clean_text, message_from_error_body, parse_retry_after, reqwest_error_text,
};
use crate::llm::sse::{SseEvent, SseParser};
use crate::llm::wire::{CallMode, StreamProgress};
use crate::llm::{ChatRequest, ChatResponse, LlmError, StreamDelta, anthropic, gemini, openai};
use crate::secrets::Secret;

mod probe;
pub use probe::ProbeOutcome;

/// First retry waits about this long; each further retry doubles it.
const DEFAULT_RETRY_BASE: Duration = Duration::from_secs(1);
/// No backoff wait is longer than this.
const DEFAULT_RETRY_CAP: Duration = Duration::from_secs(30);
/// A `Retry-After` longer than this is not waited for: the call fails at once so that the
/// fallback chain can move on to another model.
const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Time allowed to open a TCP/TLS connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an error body read to find the provider's message.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Where the API key comes from.
#[derive(Debug, Clone)]
enum ApiKey {
    /// `api_key_env` is empty: a local server that needs no key.
    NotNeeded,
    Present(Secret),
    /// `api_key_env` names a variable that is not set.
    Missing {
        env: String,
    },
}

/// One configured provider. Calls may run concurrently; clones share the connection pool.
#[derive(Debug, Clone)]
pub struct Provider {
    name: String,
    kind: ProviderKind,
    base_url: String,
    key: ApiKey,
    /// The variable the key is read from (`api_key_env`), for messages.
    key_env: String,
    timeout: Duration,
    idle_timeout: Duration,
    max_retries: u32,
    retry_base: Duration,
    retry_cap: Duration,
    max_retry_after: Duration,
    /// The HTTP client, or why it could not be built (then every call fails with that reason).
    client: Result<reqwest::Client, String>,
}

impl Provider {
    /// Reads the key from the environment variable named in the config (`api_key_env`, may be
    /// empty for local servers). A missing key is not an error here; calls then fail with
    /// `LlmError::MissingKey` naming the variable.
    ///
    /// The idle timeout of streams is half the call timeout.
    pub fn from_config(name: &str, config: &ProviderConfig) -> Provider {
        let env = config.api_key_env.trim();
        let key = if env.is_empty() {
            ApiKey::NotNeeded
        } else {
            match Secret::from_env(env) {
                Some(secret) => ApiKey::Present(secret),
                None => ApiKey::Missing {
                    env: env.to_string(),
                },
            }
        };
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(reqwest_error_text);
        let timeout = config.timeout.0;
        Provider {
            name: name.to_string(),
            kind: config.kind,
            base_url: config.base_url.trim().trim_end_matches('/').to_string(),
            key,
            key_env: env.to_string(),
            timeout,
            idle_timeout: timeout / 2,
            max_retries: config.max_retries,
            retry_base: DEFAULT_RETRY_BASE,
            retry_cap: DEFAULT_RETRY_CAP,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            client,
        }
    }

    /// Sets the first backoff wait (tests use a few milliseconds).
    pub fn with_retry_base(mut self, base: Duration) -> Provider {
        self.retry_base = base;
        self
    }

    /// Sets the whole-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Provider {
        self.timeout = timeout;
        self
    }

    /// Sets the longest silence allowed between two chunks of a stream.
    pub fn with_idle_timeout(mut self, idle_timeout: Duration) -> Provider {
        self.idle_timeout = idle_timeout;
        self
    }

    pub fn with_max_retries(mut self, max_retries: u32) -> Provider {
        self.max_retries = max_retries;
        self
    }

    /// Sets the longest `Retry-After` that is waited for; a longer one fails the call at once.
    pub fn with_max_retry_after(mut self, max_retry_after: Duration) -> Provider {
        self.max_retry_after = max_retry_after;
        self
    }

    /// Uses this key instead of the one from the environment.
    pub fn with_key(mut self, key: Secret) -> Provider {
        self.key = ApiKey::Present(key);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> ProviderKind {
        self.kind
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// One call with retries (429/5xx/connection errors/timeouts/broken streams, exponential
    /// backoff with jitter, honouring `Retry-After`, at most `max_retries`). When `stream` is
    /// `Some` the call streams and sends `StreamDelta::Text` pieces, and `StreamDelta::Reset`
    /// whenever streamed text is discarded (before a retry, and when the call fails).
    pub async fn chat(
        &self,
        request: &ChatRequest,
        stream: Option<&UnboundedSender<StreamDelta>>,
    ) -> Result<ChatResponse, LlmError> {
        let mut attempt = 0;
        loop {
            let mut streamed_text = false;
            let outcome = match tokio::time::timeout(
                self.timeout,
                self.attempt(request, stream, &mut streamed_text),
            )
            .await
            {
                Ok(outcome) => outcome,
                Err(_) => Err(LlmError::Timeout {
                    provider: self.name.clone(),
                    kind: TimeoutKind::WholeCall,
                    after: self.timeout,
                }),
            };
            let error = match outcome {
                Ok(response) => return Ok(response),
                Err(error) => error,
            };
            if streamed_text && let Some(sender) = stream {
                // The receiver may be gone; the caller then does not care about the preview.
                let _ = sender.send(StreamDelta::Reset);
            }
            let Some(wait) = self.retry_wait(attempt, &error) else {
                return Err(error);
            };
            attempt += 1;
            tracing::warn!(
                provider = %self.name,
                model = %request.model,
                attempt,
                wait_ms = wait.as_millis() as u64,
                error = %error,
                "model call failed, retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// How long to wait before retry number `attempt + 1`, or `None` when the error is final.
    fn retry_wait(&self, attempt: u32, error: &LlmError) -> Option<Duration> {
        if !error.is_retryable() || attempt >= self.max_retries {
            return None;
        }
        if let Some(retry_after) = error.retry_after() {
            if retry_after > self.max_retry_after {
                return None;
            }
            return Some(retry_after);
        }
        let exponential = self
            .retry_base
            .saturating_mul(2u32.saturating_pow(attempt))
            .min(self.retry_cap);
        // Equal jitter: half fixed, half random, so that callers that failed together spread out.
        let half = exponential / 2;
        Some(half + half.mul_f64(rand::random::<f64>()))
    }

    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let key = match &self.key {
            ApiKey::NotNeeded => None,
            ApiKey::Present(secret) => Some(secret),
            ApiKey::Missing { env } => {
                return Err(LlmError::MissingKey {
                    provider: self.name.clone(),
                    env: env.clone(),
                });
            }
        };
        if self.kind == ProviderKind::Anthropic {
            headers.insert(
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(anthropic::API_VERSION),
            );
        }
        let Some(key) = key else {
            return Ok(headers);
        };
        let (name, value) = match self.kind {
            ProviderKind::Openai => (AUTHORIZATION, format!("Bearer {}", key.expose())),
            ProviderKind::Anthropic => (
                HeaderName::from_static("x-api-key"),
                key.expose().to_string(),
            ),
            ProviderKind::Gemini => (
                HeaderName::from_static("x-goog-api-key"),
                key.expose().to_string(),
            ),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            LlmError::InvalidRequest(format!(
                "provider `{}`: the API key contains characters that cannot go in an HTTP header (check the variable for stray quotes or newlines)",
                self.name
            ))
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
        Ok(headers)
    }

    fn url_and_body(
        &self,
        request: &ChatRequest,
        mode: CallMode,
    ) -> Result<(String, serde_json::Value), LlmError> {
        Ok(match self.kind {
            ProviderKind::Openai => (
                openai::endpoint(&self.base_url),
                openai::request_body(&self.base_url, request, mode),
            ),
            ProviderKind::Anthropic => (
                anthropic::endpoint(&self.base_url),
                anthropic::request_body(request, mode),
            ),
            ProviderKind::Gemini => (
                gemini::endpoint(&self.name, &self.base_url, &request.model, mode)?,
                gemini::request_body(request),
            ),
        })
    }

    /// One HTTP exchange, without retries or the whole-call timeout.
    async fn attempt(
        &self,
        request: &ChatRequest,
        stream: Option<&UnboundedSender<StreamDelta>>,
        streamed_text: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let client = self.client.as_ref().map_err(|reason| {
            LlmError::Connection(format!(
                "provider `{}`: the HTTP client could not be built: {reason}",
                self.name
            ))
        })?;
        let headers = self.headers()?;
        let mode = if stream.is_some() {
            CallMode::Stream
        } else {
            CallMode::Complete
        };
        let (url, body) = self.url_and_body(request, mode)?;
        let body = serde_json::to_vec(&body).map_err(|error| {
            LlmError::InvalidRequest(format!(
                "provider `{}`: the request could not be serialized: {error}",
                self.name
            ))
        })?;
        let response = client
            .post(url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|error| self.request_error(error))?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.status_error(response).await);
        }
        let is_event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        match stream {
            Some(sender) if is_event_stream => {
                self.read_stream(response, &request.model, sender, streamed_text)
                    .await
            }
            _ => {
                // A server that ignored `stream: true` answered in one piece: hand its text over
                // as one delta.
                let answer = self.read_complete(response, &request.model).await?;
                if let Some(sender) = stream
                    && !answer.text.is_empty()
                {
                    let _ = sender.send(StreamDelta::Text(answer.text.clone()));
                    *streamed_text = true;
                }
                Ok(answer)
            }
        }
    }

    fn request_error(&self, error: reqwest::Error) -> LlmError {
        if error.is_timeout() && !error.is_connect() {
            return LlmError::Timeout {
                provider: self.name.clone(),
                kind: TimeoutKind::WholeCall,
                after: self.timeout,
            };
        }
        LlmError::Connection(format!(
            "provider `{}`: could not reach {}: {}",
            self.name,
            self.host_for_errors(),
            reqwest_error_text(error)
        ))
    }

    /// Scheme, host and port of the base URL (no path or query, which could hold a key).
    fn host_for_errors(&self) -> String {
        match reqwest::Url::parse(&self.base_url) {
            Ok(url) => {
                let host = url.host_str().unwrap_or("?");
                match url.port() {
                    Some(port) => format!("{}://{host}:{port}", url.scheme()),
                    None => format!("{}://{host}", url.scheme()),
                }
            }
            Err(_) => "the configured base_url (it is not a valid URL)".to_string(),
        }
    }

    async fn status_error(&self, mut response: reqwest::Response) -> LlmError {
        let status = response.status().as_u16();
        let headers = response.headers();
        let retry_after = headers
            .get("retry-after-ms")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
            .or_else(|| {
                headers
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|value| value.to_str().ok())
                    .and_then(parse_retry_after)
            });
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY_BYTES {
            match response.chunk().await {
                Ok(Some(piece)) => body.extend_from_slice(&piece),
                Ok(None) | Err(_) => break,
            }
        }
        let mut message = message_from_error_body(&body);
        if (status == 401 || status == 403)
            && let ApiKey::Present(_) = self.key
        {
            message.push_str(" (check the API key the provider's api_key_env names)");
        }
        if (300..400).contains(&status) {
            message.push_str(
                " (the server redirected; redirects are not followed, so set base_url to the final address)",
            );
        }
        if status == 404 {
            message.push_str(" (check the model name and base_url");
            message.push_str(if self.kind == ProviderKind::Openai {
                ", which for OpenAI-compatible servers ends in /v1)"
            } else {
                ")"
            });
        }
        if status == 429 {
            return LlmError::RateLimited {
                provider: self.name.clone(),
                retry_after,
                message,
            };
        }
        LlmError::Http {
            provider: self.name.clone(),
            status,
            message,
            retry_after,
        }
    }

    async fn read_complete(
        &self,
        response: reqwest::Response,
        requested_model: &str,
    ) -> Result<ChatResponse, LlmError> {
        let bytes = response.bytes().await.map_err(|error| {
            LlmError::Connection(format!(
                "provider `{}`: the answer was cut off: {}",
                self.name,
                reqwest_error_text(error)
            ))
        })?;
        let body: serde_json::Value = serde_json::from_slice(&bytes).map_err(|error| {
            LlmError::Malformed(format!(
                "provider `{}`: the answer is not JSON ({error}): {}",
                self.name,
                clean_text(&String::from_utf8_lossy(&bytes[..bytes.len().min(200)]))
            ))
        })?;
        match self.kind {
            ProviderKind::Openai => openai::parse_response(&self.name, &body, requested_model),
            ProviderKind::Anthropic => {
                anthropic::parse_response(&self.name, &body, requested_model)
            }
            ProviderKind::Gemini => gemini::parse_response(&self.name, &body, requested_model),
        }
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        requested_model: &str,
        sender: &UnboundedSender<StreamDelta>,
        streamed_text: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let mut decoder = StreamDecoder::new(self.kind, requested_model);
        let mut parser = SseParser::new();
        let mut events: Vec<SseEvent> = Vec::new();
        let mut emit = |text: &str| {
            *streamed_text = true;
            // The receiver may be gone; the caller then only wants the final answer.
            let _ = sender.send(StreamDelta::Text(text.to_string()));
        };
        loop {
            let piece = match tokio::time::timeout(self.idle_timeout, response.chunk()).await {
                Err(_) => {
                    return Err(LlmError::Timeout {
                        provider: self.name.clone(),
                        kind: TimeoutKind::BetweenChunks,
                        after: self.idle_timeout,
                    });
                }
                Ok(Err(error)) => {
                    return Err(LlmError::BrokenStream(format!(
                        "provider `{}`: the stream was cut: {}",
                        self.name,
                        reqwest_error_text(error)
                    )));
                }
                Ok(Ok(piece)) => piece,
            };
            let parsed = match &piece {
                Some(bytes) => parser.feed(bytes, &mut events),
                None => parser.finish(&mut events),
            };
            parsed.map_err(|error| {
                LlmError::BrokenStream(format!("provider `{}`: {error}", self.name))
            })?;
            for event in events.drain(..) {
                if decoder.on_data(&self.name, &event.data, &mut emit)? == StreamProgress::Done {
                    return decoder.finish(&self.name);
                }
            }
            if piece.is_none() {
                return decoder.finish(&self.name);
            }
        }
    }
}

/// The stream decoder of each wire format.
enum StreamDecoder {
    Openai(openai::StreamDecoder),
    Anthropic(anthropic::StreamDecoder),
    Gemini(gemini::StreamDecoder),
}

impl StreamDecoder {
    fn new(kind: ProviderKind, requested_model: &str) -> StreamDecoder {
        match kind {
            ProviderKind::Openai => {
                StreamDecoder::Openai(openai::StreamDecoder::new(requested_model))
            }
            ProviderKind::Anthropic => {
                StreamDecoder::Anthropic(anthropic::StreamDecoder::new(requested_model))
            }
            ProviderKind::Gemini => {
                StreamDecoder::Gemini(gemini::StreamDecoder::new(requested_model))
            }
        }
    }

    fn on_data(
        &mut self,
        provider: &str,
        data: &str,
        emit: &mut dyn FnMut(&str),
    ) -> Result<StreamProgress, LlmError> {
        match self {
            StreamDecoder::Openai(decoder) => decoder.on_data(provider, data, emit),
            StreamDecoder::Anthropic(decoder) => decoder.on_data(provider, data, emit),
            StreamDecoder::Gemini(decoder) => decoder.on_data(provider, data, emit),
        }
    }

    fn finish(self, provider: &str) -> Result<ChatResponse, LlmError> {
        match self {
            StreamDecoder::Openai(decoder) => decoder.finish(provider),
            StreamDecoder::Anthropic(decoder) => decoder.finish(provider),
            StreamDecoder::Gemini(decoder) => decoder.finish(provider),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Dur;

    fn provider() -> Provider {
        let config = ProviderConfig {
            kind: ProviderKind::Openai,
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key_env: String::new(),
            timeout: Dur::secs(10),
            max_retries: 3,
            embeddings_model: String::new(),
            transcription_model: String::new(),
            speech_model: String::new(),
            speech_voice: String::new(),
            free: false,
        };
        Provider::from_config("p", &config).with_retry_base(Duration::from_millis(100))
    }

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after_up_to_its_cap() {
        let provider = provider();
        let transient = LlmError::Connection("refused".into());
        for _ in 0..100 {
            let first = provider.retry_wait(0, &transient).unwrap();
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = provider.retry_wait(2, &transient).unwrap();
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
        }
        assert_eq!(provider.retry_wait(3, &transient), None, "max_retries is 3");
        let capped = provider.clone().with_retry_base(Duration::from_secs(20));
        assert!(capped.retry_wait(2, &transient).unwrap() <= DEFAULT_RETRY_CAP);

        let rate_limited = |seconds| LlmError::RateLimited {
            provider: "p".into(),
            retry_after: Some(Duration::from_secs(seconds)),
            message: String::new(),
        };
        assert_eq!(
            provider.retry_wait(0, &rate_limited(7)),
            Some(Duration::from_secs(7))
        );
        assert_eq!(provider.retry_wait(0, &rate_limited(61)), None);
        assert_eq!(
            provider.retry_wait(0, &LlmError::Malformed("junk".into())),
            None
        );
    }

    #[test]
    fn the_key_header_is_sensitive_and_anthropic_gets_its_version() {
        let key = Secret::new("sk-header-test-key-123456");
        let openai = provider().with_key(key.clone());
        let headers = openai.headers().unwrap();
        let authorization = headers.get(AUTHORIZATION).unwrap();
        assert!(authorization.is_sensitive());
        assert_eq!(
            authorization.to_str().unwrap(),
            "Bearer sk-header-test-key-123456"
        );
        assert!(!format!("{openai:?}").contains(key.expose()));

        let mut anthropic = provider().with_key(key);
        anthropic.kind = ProviderKind::Anthropic;
        let headers = anthropic.headers().unwrap();
        assert!(headers.get("x-api-key").unwrap().is_sensitive());
        assert_eq!(
            headers.get("anthropic-version").unwrap(),
            anthropic::API_VERSION
        );
        assert!(headers.get(AUTHORIZATION).is_none());
    }
}

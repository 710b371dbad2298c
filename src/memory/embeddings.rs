//! Embeddings providers over HTTP: OpenAI-compatible `POST {base_url}/embeddings` (OpenAI,
//! Ollama `/v1`, LM Studio, vLLM) and Gemini `POST {base_url}/v1beta/models/{model}:batchEmbedContents`.
//!
//! Invariants:
//! - Every vector handed back has been validated: one per input, in input order, all of the
//!   same dimension (equal to the configured one when given, and to the one this client saw
//!   first otherwise), finite, not all zeros. A provider that answers anything else produces an
//!   [`EmbeddingsError`], never a vector that would poison the index.
//! - The API key travels in a header (`Authorization: Bearer` for OpenAI-compatible servers,
//!   `x-goog-api-key` for Gemini, never in the URL) marked sensitive, and every error text
//!   passes through [`crate::secrets::redact`], so no key appears in an error or a log.
//! - Inputs are sent in batches of `batch_size`, one request at a time, each with its own
//!   timeout. 408, 429, 5xx and transport errors are retried with exponential backoff and
//!   jitter; a `Retry-After` header (seconds or HTTP date) replaces the backoff, and one that
//!   asks for longer than `max_retry_after` ends the call with [`EmbeddingsError::RateLimited`]
//!   instead of parking the caller.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use serde::Deserialize;
use serde_json::json;

use crate::secrets::{Secret, redact};

/// The longest excerpt of an error body kept in an error.
const BODY_EXCERPT_CHARS: usize = 300;

/// Which wire protocol the provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingsProtocol {
    /// `POST {base_url}/embeddings` with `{"model", "input": [..]}`; base_url ends in `/v1`.
    OpenAiCompatible,
    /// `POST {base_url}/v1beta/models/{model}:batchEmbedContents`; base_url is the API host.
    Gemini,
}

impl EmbeddingsProtocol {
    fn label(self) -> &'static str {
        match self {
            EmbeddingsProtocol::OpenAiCompatible => "OpenAI-compatible",
            EmbeddingsProtocol::Gemini => "Gemini",
        }
    }
}

/// Everything the client needs; the daemon's config maps onto it.
#[derive(Debug, Clone)]
pub struct EmbeddingsConfig {
    pub protocol: EmbeddingsProtocol,
    /// `https://api.openai.com/v1`, `http://localhost:11434/v1` (Ollama),
    /// `https://generativelanguage.googleapis.com` (Gemini).
    pub base_url: String,
    pub model: String,
    /// None for local servers that need no key.
    pub api_key: Option<Secret>,
    /// The dimension the index expects; vectors of any other length are refused.
    pub expected_dimension: Option<usize>,
    /// Ask the provider for this many dimensions (`dimensions` for OpenAI `text-embedding-3-*`,
    /// `outputDimensionality` for Gemini). None sends nothing (the model's native size).
    pub requested_dimension: Option<usize>,
    /// Inputs per request. OpenAI accepts up to 2048, Gemini 100; local servers prefer less.
    pub batch_size: usize,
    /// Timeout of one HTTP request (connect + response).
    pub request_timeout: Duration,
    /// Retries after the first attempt, per batch.
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this ends the call instead of waiting.
    pub max_retry_after: Duration,
}

impl EmbeddingsConfig {
    /// Defaults for everything but the provider itself.
    pub fn new(
        protocol: EmbeddingsProtocol,
        base_url: impl Into<String>,
        model: impl Into<String>,
    ) -> EmbeddingsConfig {
        EmbeddingsConfig {
            protocol,
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            expected_dimension: None,
            requested_dimension: None,
            batch_size: 64,
            request_timeout: Duration::from_secs(30),
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Errors of the embeddings client. Texts are redacted and say what to check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EmbeddingsError {
    #[error("embeddings configuration: {0}")]
    Config(String),
    #[error("embeddings input {index} is empty; providers refuse empty texts, skip it instead")]
    EmptyInput { index: usize },
    #[error(
        "{provider} embeddings request to {url} failed after {attempts} attempt(s): {reason}; \
         check that the server is reachable"
    )]
    Unavailable {
        provider: &'static str,
        url: String,
        attempts: u32,
        reason: String,
    },
    #[error(
        "{provider} embeddings provider at {url} is rate limiting and asks to wait {retry_after:?}, \
         longer than the configured maximum; try again later"
    )]
    RateLimited {
        provider: &'static str,
        url: String,
        retry_after: Duration,
    },
    #[error("{provider} embeddings provider at {url} answered HTTP {status}: {body}{hint}")]
    Http {
        provider: &'static str,
        url: String,
        status: u16,
        body: String,
        hint: &'static str,
    },
    #[error("{provider} embeddings response from {url} is malformed: {reason}")]
    Malformed {
        provider: &'static str,
        url: String,
        reason: String,
    },
    #[error("{provider} embeddings provider returned {got} vectors for {sent} inputs")]
    CountMismatch {
        provider: &'static str,
        sent: usize,
        got: usize,
    },
    #[error(
        "{provider} embeddings vector for input {index} has {got} dimensions, expected {expected}; \
         check the model name and the configured dimension"
    )]
    DimensionMismatch {
        provider: &'static str,
        index: usize,
        got: usize,
        expected: usize,
    },
    #[error("{provider} embeddings vector for input {index} is unusable: {detail}")]
    BadVector {
        provider: &'static str,
        index: usize,
        detail: String,
    },
}

/// A client for one embeddings provider and model. Cheap to share behind an `Arc`.
pub struct EmbeddingsClient {
    config: EmbeddingsConfig,
    http: reqwest::Client,
    endpoint: String,
    /// The dimension seen first (0 until then), so a model switch behind our back is caught.
    learned_dimension: AtomicUsize,
}

impl std::fmt::Debug for EmbeddingsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingsClient")
            .field("protocol", &self.config.protocol)
            .field("endpoint", &self.endpoint)
            .field("model", &self.config.model)
            .finish()
    }
}

/// One attempt's result, before the retry policy decides.
enum Attempt {
    Answered(Vec<u8>),
    Retryable {
        reason: String,
        retry_after: Option<Duration>,
    },
    Failed(EmbeddingsError),
}

impl EmbeddingsClient {
    pub fn new(config: EmbeddingsConfig) -> Result<EmbeddingsClient, EmbeddingsError> {
        let base_url = config.base_url.trim().trim_end_matches('/').to_string();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(EmbeddingsError::Config(format!(
                "base_url `{}` must start with http:// or https://",
                redact(&base_url)
            )));
        }
        let model = config.model.trim();
        if model.is_empty() {
            return Err(EmbeddingsError::Config(
                "model is empty; name the embeddings model".to_string(),
            ));
        }
        if config.batch_size == 0 {
            return Err(EmbeddingsError::Config(
                "batch_size is 0; use at least 1 (64 is usual)".to_string(),
            ));
        }
        if config.request_timeout.is_zero() {
            return Err(EmbeddingsError::Config(
                "request_timeout is 0; use a few seconds".to_string(),
            ));
        }
        if config.expected_dimension == Some(0) || config.requested_dimension == Some(0) {
            return Err(EmbeddingsError::Config(
                "a dimension of 0 was configured; leave it unset or give the model's size"
                    .to_string(),
            ));
        }
        let endpoint = match config.protocol {
            EmbeddingsProtocol::OpenAiCompatible => format!("{base_url}/embeddings"),
            EmbeddingsProtocol::Gemini => {
                let model = model.strip_prefix("models/").unwrap_or(model);
                format!("{base_url}/v1beta/models/{model}:batchEmbedContents")
            }
        };
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            let (name, value) = match config.protocol {
                EmbeddingsProtocol::OpenAiCompatible => {
                    ("authorization", format!("Bearer {}", key.expose()))
                }
                EmbeddingsProtocol::Gemini => ("x-goog-api-key", key.expose().to_string()),
            };
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                EmbeddingsError::Config(
                    "the API key contains characters that cannot go in an HTTP header".to_string(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .default_headers(headers)
            .build()
            .map_err(|error| {
                EmbeddingsError::Config(format!(
                    "cannot build the HTTP client: {}",
                    redact(&error.to_string())
                ))
            })?;
        let learned_dimension = AtomicUsize::new(config.expected_dimension.unwrap_or(0));
        Ok(EmbeddingsClient {
            config,
            http,
            endpoint,
            learned_dimension,
        })
    }

    /// The dimension vectors have: the configured one, or the first one seen, or None yet.
    pub fn dimension(&self) -> Option<usize> {
        match self.learned_dimension.load(Ordering::Relaxed) {
            0 => None,
            dimension => Some(dimension),
        }
    }

    pub fn model(&self) -> &str {
        &self.config.model
    }

    pub fn protocol(&self) -> EmbeddingsProtocol {
        self.config.protocol
    }

    /// Embeds `texts` (one vector per text, same order), in batches of `batch_size`.
    pub async fn embed<S: AsRef<str>>(
        &self,
        texts: &[S],
    ) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        if let Some(index) = texts
            .iter()
            .position(|text| text.as_ref().trim().is_empty())
        {
            return Err(EmbeddingsError::EmptyInput { index });
        }
        let mut vectors = Vec::with_capacity(texts.len());
        for (batch_number, batch) in texts.chunks(self.config.batch_size).enumerate() {
            let first_index = batch_number * self.config.batch_size;
            let body = self.request_body(batch);
            let answer = self.post_with_retries(&body).await?;
            let batch_vectors = self.parse(&answer, batch.len())?;
            self.check_batch(first_index, &batch_vectors)?;
            vectors.extend(batch_vectors);
        }
        Ok(vectors)
    }

    /// Embeds one text.
    pub async fn embed_one(&self, text: &str) -> Result<Vec<f32>, EmbeddingsError> {
        let mut vectors = self.embed(&[text]).await?;
        vectors.pop().ok_or(EmbeddingsError::CountMismatch {
            provider: self.config.protocol.label(),
            sent: 1,
            got: 0,
        })
    }

    fn request_body<S: AsRef<str>>(&self, batch: &[S]) -> serde_json::Value {
        let model = self.config.model.trim();
        match self.config.protocol {
            EmbeddingsProtocol::OpenAiCompatible => {
                let inputs: Vec<&str> = batch.iter().map(AsRef::as_ref).collect();
                let mut body = json!({ "model": model, "input": inputs });
                if let Some(dimensions) = self.config.requested_dimension {
                    body["dimensions"] = json!(dimensions);
                }
                body
            }
            EmbeddingsProtocol::Gemini => {
                let qualified = if model.starts_with("models/") {
                    model.to_string()
                } else {
                    format!("models/{model}")
                };
                let requests: Vec<serde_json::Value> = batch
                    .iter()
                    .map(|text| {
                        let mut request = json!({
                            "model": qualified,
                            "content": { "parts": [ { "text": text.as_ref() } ] },
                        });
                        if let Some(dimensions) = self.config.requested_dimension {
                            request["outputDimensionality"] = json!(dimensions);
                        }
                        request
                    })
                    .collect();
                json!({ "requests": requests })
            }
        }
    }

    async fn post_with_retries(
        &self,
        body: &serde_json::Value,
    ) -> Result<Vec<u8>, EmbeddingsError> {
        let provider = self.config.protocol.label();
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let (reason, retry_after) = match self.post_once(body).await {
                Attempt::Answered(bytes) => return Ok(bytes),
                Attempt::Failed(error) => return Err(error),
                Attempt::Retryable {
                    reason,
                    retry_after,
                } => (reason, retry_after),
            };
            if attempt > self.config.max_retries {
                return Err(EmbeddingsError::Unavailable {
                    provider,
                    url: self.redacted_endpoint(),
                    attempts: attempt,
                    reason,
                });
            }
            let delay = match retry_after {
                Some(wait) if wait > self.config.max_retry_after => {
                    return Err(EmbeddingsError::RateLimited {
                        provider,
                        url: self.redacted_endpoint(),
                        retry_after: wait,
                    });
                }
                Some(wait) => wait,
                None => self.backoff(attempt),
            };
            tracing::warn!(
                provider,
                attempt,
                delay_ms = delay.as_millis() as u64,
                reason = %reason,
                "embeddings request failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// Exponential backoff with "equal jitter": half fixed, half random, capped.
    fn backoff(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(20);
        let full = self
            .config
            .initial_backoff
            .saturating_mul(1u32 << exponent)
            .min(self.config.max_backoff);
        let half = full / 2;
        let jitter = half.mul_f64(rand::random::<f64>());
        half + jitter
    }

    async fn post_once(&self, body: &serde_json::Value) -> Attempt {
        let provider = self.config.protocol.label();
        let response = match self.http.post(&self.endpoint).json(body).send().await {
            Ok(response) => response,
            Err(error) => {
                let builder_error = error.is_builder();
                let reason = redact(&error.without_url().to_string()).into_owned();
                if builder_error {
                    return Attempt::Failed(EmbeddingsError::Config(format!(
                        "cannot build the request to {}: {reason}",
                        self.redacted_endpoint()
                    )));
                }
                return Attempt::Retryable {
                    reason,
                    retry_after: None,
                };
            }
        };
        let status = response.status();
        let retry_after = parse_retry_after(response.headers());
        let bytes = match response.bytes().await {
            Ok(bytes) => bytes.to_vec(),
            Err(error) => {
                return Attempt::Retryable {
                    reason: format!(
                        "reading the response failed: {}",
                        redact(&error.without_url().to_string())
                    ),
                    retry_after: None,
                };
            }
        };
        if status.is_success() {
            return Attempt::Answered(bytes);
        }
        let excerpt = body_excerpt(&bytes);
        if status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT
            || status.is_server_error()
        {
            return Attempt::Retryable {
                reason: format!("HTTP {}: {excerpt}", status.as_u16()),
                retry_after,
            };
        }
        let hint = match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                " (check the API key and its permissions)"
            }
            StatusCode::NOT_FOUND => " (check base_url and the model name)",
            _ => "",
        };
        Attempt::Failed(EmbeddingsError::Http {
            provider,
            url: self.redacted_endpoint(),
            status: status.as_u16(),
            body: excerpt,
            hint,
        })
    }

    fn redacted_endpoint(&self) -> String {
        redact(&self.endpoint).into_owned()
    }

    fn malformed(&self, reason: impl Into<String>) -> EmbeddingsError {
        EmbeddingsError::Malformed {
            provider: self.config.protocol.label(),
            url: self.redacted_endpoint(),
            reason: redact(&reason.into()).into_owned(),
        }
    }

    /// Decodes a successful answer into vectors in input order.
    fn parse(&self, bytes: &[u8], sent: usize) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        let provider = self.config.protocol.label();
        let vectors = match self.config.protocol {
            EmbeddingsProtocol::OpenAiCompatible => {
                let answer: OpenAiAnswer = self.decode(bytes)?;
                order_openai(answer.data, sent).map_err(|reason| self.malformed(reason))?
            }
            EmbeddingsProtocol::Gemini => {
                let answer: GeminiAnswer = self.decode(bytes)?;
                answer
                    .embeddings
                    .into_iter()
                    .map(|embedding| embedding.values)
                    .collect()
            }
        };
        if vectors.len() != sent {
            return Err(EmbeddingsError::CountMismatch {
                provider,
                sent,
                got: vectors.len(),
            });
        }
        Ok(vectors)
    }

    fn decode<T: for<'de> Deserialize<'de>>(&self, bytes: &[u8]) -> Result<T, EmbeddingsError> {
        serde_json::from_slice(bytes).map_err(|error| {
            // Python servers write NaN and Infinity as bare words, which JSON does not allow:
            // say so plainly rather than "expected value at column 4711".
            let text = String::from_utf8_lossy(bytes);
            if text.contains("NaN") || text.contains("Infinity") {
                EmbeddingsError::BadVector {
                    provider: self.config.protocol.label(),
                    index: first_non_finite_index(&text),
                    detail: "the response contains NaN or Infinity values; the model produced \
                             a broken embedding"
                        .to_string(),
                }
            } else {
                self.malformed(format!("{error} (body starts: {})", body_excerpt(bytes)))
            }
        })
    }

    /// Checks one batch: every vector usable, all of one dimension, equal to the configured or
    /// previously seen dimension. The first batch ever checked fixes the dimension.
    fn check_batch(&self, first_index: usize, vectors: &[Vec<f32>]) -> Result<(), EmbeddingsError> {
        let provider = self.config.protocol.label();
        for (offset, vector) in vectors.iter().enumerate() {
            let index = first_index + offset;
            let problem = if vector.is_empty() {
                Some("the vector is empty".to_string())
            } else if let Some(position) = vector.iter().position(|value| !value.is_finite()) {
                Some(format!("value {position} is not finite"))
            } else if vector.iter().all(|value| *value == 0.0) {
                Some("the vector is all zeros".to_string())
            } else {
                None
            };
            if let Some(detail) = problem {
                return Err(EmbeddingsError::BadVector {
                    provider,
                    index,
                    detail,
                });
            }
        }
        let Some(first) = vectors.first() else {
            return Ok(());
        };
        let expected = match self.learned_dimension.load(Ordering::Relaxed) {
            0 => first.len(),
            known => known,
        };
        if let Some((offset, vector)) = vectors
            .iter()
            .enumerate()
            .find(|(_, vector)| vector.len() != expected)
        {
            return Err(EmbeddingsError::DimensionMismatch {
                provider,
                index: first_index + offset,
                got: vector.len(),
                expected,
            });
        }
        // Another call may have fixed the dimension in the meantime; it must agree.
        if let Err(known) = self.learned_dimension.compare_exchange(
            0,
            expected,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) && known != expected
        {
            return Err(EmbeddingsError::DimensionMismatch {
                provider,
                index: first_index,
                got: expected,
                expected: known,
            });
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct OpenAiAnswer {
    data: Vec<OpenAiEmbedding>,
}

#[derive(Deserialize)]
struct OpenAiEmbedding {
    /// Position of the input; some servers omit it and answer in input order.
    index: Option<usize>,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct GeminiAnswer {
    embeddings: Vec<GeminiEmbedding>,
}

#[derive(Deserialize)]
struct GeminiEmbedding {
    values: Vec<f32>,
}

/// Puts OpenAI-style items in input order by their `index` (a permutation of 0..n), or keeps
/// the answer order when no item has an index.
fn order_openai(items: Vec<OpenAiEmbedding>, sent: usize) -> Result<Vec<Vec<f32>>, String> {
    if items.iter().all(|item| item.index.is_none()) {
        return Ok(items.into_iter().map(|item| item.embedding).collect());
    }
    if items.len() != sent {
        // The count check after this reports it; the order does not matter then.
        return Ok(items.into_iter().map(|item| item.embedding).collect());
    }
    let mut ordered: Vec<Option<Vec<f32>>> = vec![None; sent];
    for item in items {
        let Some(index) = item.index else {
            return Err("some items have an `index` and some do not".to_string());
        };
        match ordered.get_mut(index) {
            Some(slot @ None) => *slot = Some(item.embedding),
            Some(Some(_)) => return Err(format!("index {index} appears twice")),
            None => return Err(format!("index {index} is out of range for {sent} inputs")),
        }
    }
    // Every slot is filled: n distinct indexes in 0..n.
    Ok(ordered.into_iter().flatten().collect())
}

/// Best effort: which vector of an answer holds the first NaN/Infinity (counting arrays of
/// numbers), for the error text. 0 when it cannot tell.
fn first_non_finite_index(text: &str) -> usize {
    let position = [text.find("NaN"), text.find("Infinity")]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0);
    let before = &text[..position];
    before
        .matches("\"embedding\"")
        .count()
        .max(before.matches("\"values\"").count())
        .saturating_sub(1)
}

/// `Retry-After` as seconds or as an HTTP date.
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        if seconds.is_finite() && seconds >= 0.0 {
            return Some(Duration::from_secs_f64(seconds.min(86_400.0)));
        }
        return None;
    }
    let date = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let wait = date.signed_duration_since(chrono::Utc::now());
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// The start of an error body, on one line, redacted.
fn body_excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let one_line: String = text
        .chars()
        .map(|character| {
            if character.is_control() {
                ' '
            } else {
                character
            }
        })
        .take(BODY_EXCERPT_CHARS)
        .collect();
    let mut excerpt = redact(one_line.trim()).into_owned();
    if text.chars().count() > BODY_EXCERPT_CHARS {
        excerpt.push('…');
    }
    excerpt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_accepts_seconds_and_dates() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(parse_retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&headers), Some(Duration::ZERO));
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(parse_retry_after(&headers), None);
    }

    #[test]
    fn openai_items_are_put_in_input_order() {
        let items = vec![
            OpenAiEmbedding {
                index: Some(1),
                embedding: vec![1.0],
            },
            OpenAiEmbedding {
                index: Some(0),
                embedding: vec![0.0],
            },
        ];
        assert_eq!(order_openai(items, 2), Ok(vec![vec![0.0], vec![1.0]]));
        let repeated = vec![
            OpenAiEmbedding {
                index: Some(0),
                embedding: vec![1.0],
            },
            OpenAiEmbedding {
                index: Some(0),
                embedding: vec![0.0],
            },
        ];
        assert!(order_openai(repeated, 2).is_err());
    }

    #[test]
    fn configuration_mistakes_are_named() {
        let mut config = EmbeddingsConfig::new(
            EmbeddingsProtocol::OpenAiCompatible,
            "localhost:11434/v1",
            "nomic-embed-text",
        );
        assert!(matches!(
            EmbeddingsClient::new(config.clone()),
            Err(EmbeddingsError::Config(text)) if text.contains("http://")
        ));
        config.base_url = "http://localhost:11434/v1/".to_string();
        config.batch_size = 0;
        assert!(EmbeddingsClient::new(config.clone()).is_err());
        config.batch_size = 8;
        let client = EmbeddingsClient::new(config).expect("valid configuration");
        assert_eq!(client.endpoint, "http://localhost:11434/v1/embeddings");
    }
}

//! A deterministic embeddings server on `127.0.0.1:0` speaking both the OpenAI-compatible
//! (`POST /v1/embeddings`) and the Gemini (`POST /v1beta/models/{model}:batchEmbedContents`)
//! protocols, so that the real [`crate::memory::embeddings::EmbeddingsClient`] can be tested.
//!
//! Its vectors make similarity controllable:
//! - By default a text becomes a normalized *hashed bag of words*: each lowercase word (a few
//!   stop words aside) adds ±1 to one of `dimension` coordinates chosen by a stable hash. Texts
//!   sharing words are similar (cosine ≈ shared words / √(words₁ × words₂)); a paraphrase with
//!   different words is nearly orthogonal, like a poor embedding model would make it.
//! - [`FakeEmbeddings::set_vector`] fixes the vector of an exact text.
//! - Faults for the next requests: HTTP errors with `Retry-After`, a wrong dimension, NaN (written
//!   as the bare word `NaN`, as Python servers do), and stalls (for timeouts).
//!
//! It counts requests and inputs and records each request's batch size. A key, when required,
//! is checked in `Authorization: Bearer` (OpenAI) or `x-goog-api-key` (Gemini); a wrong key is
//! answered 401 with the presented key echoed in the body, as some proxies do, which lets tests
//! check that the client never repeats it in an error.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The default dimension (that of small sentence-embedding models such as all-MiniLM-L6-v2).
pub const DEFAULT_DIMENSION: usize = 384;

/// Words too common to carry meaning; left out so that unrelated sentences stay unrelated.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "in", "is", "it", "my",
    "of", "on", "or", "that", "the", "this", "to", "was", "with",
];

/// How the fake starts.
#[derive(Debug, Clone)]
pub struct FakeEmbeddingsOptions {
    pub dimension: usize,
    /// When set, requests must carry this key (Bearer for OpenAI, `x-goog-api-key` for Gemini).
    pub required_api_key: Option<String>,
}

impl Default for FakeEmbeddingsOptions {
    fn default() -> Self {
        FakeEmbeddingsOptions {
            dimension: DEFAULT_DIMENSION,
            required_api_key: None,
        }
    }
}

/// A running fake. Stops when [`FakeEmbeddings::stop`] is awaited or when dropped.
pub struct FakeEmbeddings {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

struct Shared {
    dimension: usize,
    required_api_key: Option<String>,
    state: Mutex<FakeState>,
}

#[derive(Default)]
struct FakeState {
    overrides: HashMap<String, Vec<f32>>,
    failures: Option<Failure>,
    wrong_dimension_remaining: usize,
    nan_remaining: usize,
    stall: Option<(usize, Duration)>,
    requests: usize,
    inputs: usize,
    batch_sizes: Vec<usize>,
    key_seen_in_url: bool,
}

#[derive(Clone, Copy)]
struct Failure {
    remaining: usize,
    status: StatusCode,
    retry_after: Option<Duration>,
}

/// What one request should get, decided under the lock, acted on after it.
enum Plan {
    Fail(Failure),
    Answer {
        vectors: Vec<Vec<f32>>,
        stall: Option<Duration>,
    },
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, FakeState> {
        // A panic while holding the lock cannot leave the counters half-written in a way that
        // matters to a test; keep serving.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Counts the request and decides its answer, consuming one unit of each pending fault.
    fn plan(&self, inputs: &[String]) -> Plan {
        let mut state = self.lock();
        state.requests += 1;
        state.inputs += inputs.len();
        state.batch_sizes.push(inputs.len());
        if let Some(failure) = state.failures.as_mut() {
            let planned = *failure;
            failure.remaining -= 1;
            if failure.remaining == 0 {
                state.failures = None;
            }
            return Plan::Fail(planned);
        }
        let mut vectors: Vec<Vec<f32>> = inputs
            .iter()
            .map(|text| {
                state
                    .overrides
                    .get(text)
                    .cloned()
                    .unwrap_or_else(|| hashed_bag_of_words(text, self.dimension))
            })
            .collect();
        if state.wrong_dimension_remaining > 0 {
            state.wrong_dimension_remaining -= 1;
            if let Some(last) = vectors.last_mut() {
                last.push(0.5);
            }
        }
        if state.nan_remaining > 0 {
            state.nan_remaining -= 1;
            if let Some(first) = vectors.first_mut().and_then(|vector| vector.first_mut()) {
                *first = f32::NAN;
            }
        }
        let stall = match state.stall.as_mut() {
            Some((remaining, duration)) => {
                let duration = *duration;
                *remaining -= 1;
                if *remaining == 0 {
                    state.stall = None;
                }
                Some(duration)
            }
            None => None,
        };
        Plan::Answer { vectors, stall }
    }
}

impl FakeEmbeddings {
    /// Starts a fake with the default dimension (384) and no key.
    pub async fn start() -> std::io::Result<FakeEmbeddings> {
        FakeEmbeddings::start_with(FakeEmbeddingsOptions::default()).await
    }

    pub async fn start_with(options: FakeEmbeddingsOptions) -> std::io::Result<FakeEmbeddings> {
        if options.dimension == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the fake embeddings dimension must be at least 1",
            ));
        }
        let shared = Arc::new(Shared {
            dimension: options.dimension,
            required_api_key: options.required_api_key,
            state: Mutex::new(FakeState::default()),
        });
        let app = Router::new()
            .route("/v1/embeddings", post(openai_embeddings))
            .route("/v1beta/models/{model_and_method}", post(gemini_batch))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (shutdown, shutdown_signal) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = shutdown_signal.await;
            });
            if let Err(error) = serving.await {
                tracing::warn!(%error, "fake embeddings server stopped with an error");
            }
        });
        Ok(FakeEmbeddings {
            address,
            shared,
            shutdown: Some(shutdown),
            server: Some(server),
        })
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL for an OpenAI-compatible client.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// `http://127.0.0.1:PORT`, the base URL for a Gemini client.
    pub fn gemini_base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn dimension(&self) -> usize {
        self.shared.dimension
    }

    /// The vector the server answers for `text` when no fault is pending.
    pub fn vector_for(&self, text: &str) -> Vec<f32> {
        self.shared
            .lock()
            .overrides
            .get(text)
            .cloned()
            .unwrap_or_else(|| hashed_bag_of_words(text, self.shared.dimension))
    }

    /// From now on, `text` embeds to exactly `vector` (sent as given, not normalized).
    pub fn set_vector(&self, text: &str, vector: Vec<f32>) {
        self.shared
            .lock()
            .overrides
            .insert(text.to_string(), vector);
    }

    /// The next `count` requests get `status` (with `Retry-After` in whole seconds if given).
    pub fn fail_next(&self, count: usize, status: u16, retry_after: Option<Duration>) {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        self.shared.lock().failures = (count > 0).then_some(Failure {
            remaining: count,
            status,
            retry_after,
        });
    }

    /// In the next `count` answers, the last vector has one value too many.
    pub fn wrong_dimension_next(&self, count: usize) {
        self.shared.lock().wrong_dimension_remaining = count;
    }

    /// In the next `count` answers, the first value of the first vector is `NaN`.
    pub fn nan_next(&self, count: usize) {
        self.shared.lock().nan_remaining = count;
    }

    /// The next `count` answers are delayed by `delay` (to exercise client timeouts).
    pub fn stall_next(&self, count: usize, delay: Duration) {
        self.shared.lock().stall = (count > 0).then_some((count, delay));
    }

    /// Requests received, failed ones included.
    pub fn request_count(&self) -> usize {
        self.shared.lock().requests
    }

    /// Texts received over all requests, failed ones included.
    pub fn input_count(&self) -> usize {
        self.shared.lock().inputs
    }

    /// The number of texts in each request, in arrival order.
    pub fn batch_sizes(&self) -> Vec<usize> {
        self.shared.lock().batch_sizes.clone()
    }

    /// Whether any request carried a `key=` query parameter (Gemini keys belong in a header).
    pub fn key_seen_in_url(&self) -> bool {
        self.shared.lock().key_seen_in_url
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for FakeEmbeddings {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// The default vector of a text: see the module documentation.
pub fn hashed_bag_of_words(text: &str, dimension: usize) -> Vec<f32> {
    let mut vector = vec![0f32; dimension];
    let lowercase = text.to_lowercase();
    let mut words = 0;
    for word in lowercase
        .split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty() && !STOP_WORDS.contains(word))
    {
        add_hashed(&mut vector, word);
        words += 1;
    }
    if words == 0 {
        // No content words: still a deterministic, non-zero vector.
        add_hashed(&mut vector, &lowercase);
    }
    let norm = vector
        .iter()
        .map(|value| f64::from(*value).powi(2))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        for value in &mut vector {
            *value = (f64::from(*value) / norm) as f32;
        }
    }
    vector
}

fn add_hashed(vector: &mut [f32], word: &str) {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in word.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let position = (hash % vector.len() as u64) as usize;
    let sign = if hash >> 63 == 1 { -1.0 } else { 1.0 };
    vector[position] += sign;
}

#[derive(Deserialize)]
struct OpenAiRequest {
    model: String,
    input: OpenAiInput,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OpenAiInput {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct GeminiRequest {
    requests: Vec<GeminiItem>,
}

#[derive(Deserialize)]
struct GeminiItem {
    model: String,
    content: GeminiContent,
}

#[derive(Deserialize)]
struct GeminiContent {
    parts: Vec<GeminiPart>,
}

#[derive(Deserialize)]
struct GeminiPart {
    text: String,
}

async fn openai_embeddings(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(expected) = &shared.required_api_key {
        let presented = header_text(&headers, header::AUTHORIZATION.as_str());
        if presented != format!("Bearer {expected}") {
            return error_response(
                StatusCode::UNAUTHORIZED,
                &format!("Incorrect API key provided: {presented}"),
                None,
            );
        }
    }
    let request: OpenAiRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return error_response(StatusCode::BAD_REQUEST, &error.to_string(), None),
    };
    let inputs = match request.input {
        OpenAiInput::One(text) => vec![text],
        OpenAiInput::Many(texts) => texts,
    };
    if inputs.iter().any(String::is_empty) {
        return error_response(
            StatusCode::BAD_REQUEST,
            "'$.input' is invalid: empty strings are not allowed",
            None,
        );
    }
    let (vectors, stall) = match shared.plan(&inputs) {
        Plan::Fail(failure) => return failure_response(failure),
        Plan::Answer { vectors, stall } => (vectors, stall),
    };
    if let Some(delay) = stall {
        tokio::time::sleep(delay).await;
    }
    // Answered in reverse order on purpose: clients must sort by `index`.
    let items: Vec<String> = vectors
        .iter()
        .enumerate()
        .rev()
        .map(|(index, vector)| {
            format!(
                r#"{{"object":"embedding","index":{index},"embedding":{}}}"#,
                json_numbers(vector)
            )
        })
        .collect();
    let body = format!(
        r#"{{"object":"list","data":[{}],"model":{},"usage":{{"prompt_tokens":{},"total_tokens":{}}}}}"#,
        items.join(","),
        serde_json::Value::String(request.model),
        inputs.len(),
        inputs.len()
    );
    json_response(body)
}

async fn gemini_batch(
    State(shared): State<Arc<Shared>>,
    Path(model_and_method): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if query
        .as_deref()
        .is_some_and(|query| query.split('&').any(|pair| pair.starts_with("key=")))
    {
        shared.lock().key_seen_in_url = true;
    }
    let Some(model) = model_and_method.strip_suffix(":batchEmbedContents") else {
        return error_response(StatusCode::NOT_FOUND, "unknown method", None);
    };
    if let Some(expected) = &shared.required_api_key {
        let presented = header_text(&headers, "x-goog-api-key");
        if presented != *expected {
            return error_response(
                StatusCode::UNAUTHORIZED,
                &format!("API key not valid: {presented}"),
                None,
            );
        }
    }
    let request: GeminiRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return error_response(StatusCode::BAD_REQUEST, &error.to_string(), None),
    };
    let qualified = format!("models/{model}");
    let mut inputs = Vec::with_capacity(request.requests.len());
    for item in request.requests {
        if item.model != qualified {
            return error_response(
                StatusCode::BAD_REQUEST,
                &format!(
                    "request model `{}` differs from the URL's `{qualified}`",
                    item.model
                ),
                None,
            );
        }
        let text: String = item
            .content
            .parts
            .into_iter()
            .map(|part| part.text)
            .collect();
        inputs.push(text);
    }
    let (vectors, stall) = match shared.plan(&inputs) {
        Plan::Fail(failure) => return failure_response(failure),
        Plan::Answer { vectors, stall } => (vectors, stall),
    };
    if let Some(delay) = stall {
        tokio::time::sleep(delay).await;
    }
    let items: Vec<String> = vectors
        .iter()
        .map(|vector| format!(r#"{{"values":{}}}"#, json_numbers(vector)))
        .collect();
    json_response(format!(r#"{{"embeddings":[{}]}}"#, items.join(",")))
}

/// Numbers as JSON, except that non-finite values are written the way Python's `json` module
/// writes them (`NaN`, `Infinity`), which is what a misbehaving server sends.
fn json_numbers(vector: &[f32]) -> String {
    let parts: Vec<String> = vector
        .iter()
        .map(|value| {
            if value.is_nan() {
                "NaN".to_string()
            } else if value.is_infinite() {
                if *value > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                }
                .to_string()
            } else {
                format!("{value:?}")
            }
        })
        .collect();
    format!("[{}]", parts.join(","))
}

fn header_text(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_string()
}

fn json_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn failure_response(failure: Failure) -> Response {
    error_response(
        failure.status,
        "injected failure from the fake embeddings server",
        failure.retry_after,
    )
}

fn error_response(status: StatusCode, message: &str, retry_after: Option<Duration>) -> Response {
    let body = serde_json::json!({ "error": { "message": message, "code": status.as_u16() } });
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(wait) = retry_after {
        let seconds = wait.as_secs_f64().ceil() as u64;
        if let Ok(value) = seconds.to_string().parse() {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
    }
    response
}

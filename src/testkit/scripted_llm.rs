//! A scripted OpenAI-compatible chat-completions server on loopback.
//!
//! It speaks the protocol the way api.openai.com does — the same JSON shapes, SSE chunks with
//! `choices[0].delta`, tool-call fragments by `index`, `finish_reason`, the usage chunk when
//! `stream_options.include_usage` is set, `data: [DONE]`, and OpenAI-shaped errors — and it
//! refuses the requests OpenAI refuses (a tool message that answers no call, calls left
//! unanswered), so a bug in how a conversation is built shows up against it.
//!
//! Answers come from a [`Script`]: rules tried in order, the first whose matcher fits answers;
//! a rule with `times = N` is skipped once used N times; when nothing matches the answer is
//! `echo: <last user message>`. Usage is reported as characters / 4 (rounded up): prompt tokens
//! from the text of every message (and tool-call arguments) of the request, completion tokens
//! from the answer's text, tool names and arguments.
//!
//! A script in TOML (eval scenario files embed one):
//!
//! ```toml
//! [[rules]]
//! when = { last_user_contains = "weather" }
//! times = 1
//! text = "Let me look."
//! tool_calls = [{ name = "get_weather", arguments = '{"city":"Paris"}' }]
//!
//! [[rules]]
//! when = { after_tool_result = "get_weather", last_tool_result_contains = "sunny" }
//! text = "It is sunny in Paris."
//!
//! [[rules]]
//! when = { model = "flaky" }
//! error = { status = 429, message = "slow down", retry_after = "1" }
//! ```
//!
//! A rule's answer, when several are set, is the first of: `error`, `cut_stream_after`,
//! `malformed_chunk`, `text` and/or `tool_calls`, else `echo`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

mod request;
mod script;

use request::*;
pub use script::{Matcher, Rule, Script, ScriptedError, ScriptedToolCall};

/// Characters of answer text per streamed chunk.
const TEXT_CHUNK_CHARS: usize = 8;
/// Characters of tool-call arguments per streamed chunk.
const ARGUMENT_CHUNK_CHARS: usize = 16;
/// Pause before cutting a connection, so that the bytes sent before the cut reach the client.
const CUT_FLUSH_PAUSE: Duration = Duration::from_millis(20);

/// A script in use, with how often each rule has answered.
struct ActiveScript {
    rules: Vec<Rule>,
    uses: Vec<AtomicU32>,
}

impl ActiveScript {
    fn new(script: Script) -> ActiveScript {
        let uses = script.rules.iter().map(|_| AtomicU32::new(0)).collect();
        ActiveScript {
            rules: script.rules,
            uses,
        }
    }

    /// The first rule that fits and has uses left; its use is counted.
    fn choose(&self, request: &Value) -> Option<&Rule> {
        for (rule, uses) in self.rules.iter().zip(&self.uses) {
            if !matches(&rule.when, request) {
                continue;
            }
            let Some(limit) = rule.times else {
                return Some(rule);
            };
            let taken = uses.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used < limit).then_some(used + 1)
            });
            if taken.is_ok() {
                return Some(rule);
            }
        }
        None
    }
}

/// State shared by the handle and the server's handlers.
struct Shared {
    script: RwLock<Arc<ActiveScript>>,
    requests: Mutex<Vec<Value>>,
    request_count: AtomicU64,
    record: AtomicBool,
    required_key: RwLock<Option<String>>,
}

/// A running scripted server. Dropping it stops the server.
pub struct ScriptedLlm {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl ScriptedLlm {
    /// Starts a server on 127.0.0.1 with a free port.
    pub async fn start(script: Script) -> std::io::Result<ScriptedLlm> {
        let shared = Arc::new(Shared {
            script: RwLock::new(Arc::new(ActiveScript::new(script))),
            requests: Mutex::new(Vec::new()),
            request_count: AtomicU64::new(0),
            record: AtomicBool::new(true),
            required_key: RwLock::new(None),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let router = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let (shutdown, shutdown_signal) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = shutdown_signal.await;
                })
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "scripted LLM server stopped with an error");
            }
        });
        Ok(ScriptedLlm {
            address,
            shared,
            shutdown: Some(shutdown),
        })
    }

    /// `http://127.0.0.1:PORT/v1`: the `base_url` of an OpenAI-compatible provider.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Every request body received (that was JSON), in order.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared.requests).clone()
    }

    /// How many chat-completion requests arrived, recorded or not.
    pub fn request_count(&self) -> u64 {
        self.shared.request_count.load(Ordering::Acquire)
    }

    /// Replaces the script; the new rules start with no uses.
    pub fn set_script(&self, script: Script) {
        let active = Arc::new(ActiveScript::new(script));
        *self
            .shared
            .script
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = active;
    }

    /// Turns recording of request bodies on or off (off for benchmarks).
    pub fn record_requests(&self, record: bool) {
        self.shared.record.store(record, Ordering::Release);
    }

    /// Requires `Authorization: Bearer <key>`. A wrong key is answered 401 with a message that
    /// repeats the key it received, the worst a real server may do, so tests can check that no
    /// error text leaks it.
    pub fn require_api_key(&self, key: impl Into<String>) {
        *self
            .shared
            .required_key
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = Some(key.into());
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a test thread panicked while holding it; the data is still valid.
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The model list (`GET /v1/models`, what `doctor`'s provider check asks), behind the same key.
async fn models(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let required_key = shared
        .required_key
        .read()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone();
    if let Some(refused) = key_refusal(&headers, required_key.as_deref()) {
        return refused;
    }
    json_response(
        StatusCode::OK,
        &json!({ "object": "list", "data": [{ "id": "scripted", "object": "model", "created": 0, "owned_by": "clawvisor-testkit" }] }),
    )
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let number = shared.request_count.fetch_add(1, Ordering::AcqRel) + 1;
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(_) => {
            return error_response(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
                None,
                None,
            );
        }
    };
    let script = shared
        .script
        .read()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone();
    let required_key = shared
        .required_key
        .read()
        .unwrap_or_else(|poison| poison.into_inner())
        .clone();
    // Recorded on arrival, so that the order is the order requests came in even when a
    // scripted delay makes an earlier one answer later.
    if shared.record.load(Ordering::Acquire) {
        lock(&shared.requests).push(request.clone());
    }
    answer(&script, &request, &headers, required_key.as_deref(), number).await
}

/// OpenAI's 401 (which echoes the presented key) when a key is required and another was given.
fn key_refusal(headers: &HeaderMap, required_key: Option<&str>) -> Option<Response> {
    let expected = required_key?;
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    (given != expected).then(|| {
        error_response(
            401,
            &format!(
                "Incorrect API key provided: {given}. You can find your API key at https://platform.openai.com/account/api-keys."
            ),
            Some("invalid_request_error"),
            None,
        )
    })
}

async fn answer(
    script: &ActiveScript,
    request: &Value,
    headers: &HeaderMap,
    required_key: Option<&str>,
    number: u64,
) -> Response {
    if let Some(refused) = key_refusal(headers, required_key) {
        return refused;
    }
    if let Err(message) = validate(request) {
        return error_response(400, &message, Some("invalid_request_error"), None);
    }
    let rule = script.choose(request);
    let echo_rule = Rule::echo();
    let rule = rule.unwrap_or(&echo_rule);
    if rule.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(rule.delay_ms)).await;
    }
    if let Some(error) = &rule.error {
        return error_response(
            error.status,
            &error.message,
            error.error_type.as_deref(),
            error.retry_after.as_deref(),
        );
    }
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    let reply = Reply {
        id: format!("chatcmpl-scripted-{number}"),
        number,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or(0),
        model: request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("scripted")
            .to_string(),
        prompt_tokens: approximate_tokens(prompt_chars(request)),
        chunk_delay: Duration::from_millis(rule.chunk_delay_ms),
    };
    if let Some(text) = &rule.cut_stream_after {
        return if streaming {
            reply.stream(text, &[], StreamEnd::Cut, include_usage)
        } else {
            reply.cut_body(text)
        };
    }
    if rule.malformed_chunk {
        return if streaming {
            reply.stream("", &[], StreamEnd::Malformed, include_usage)
        } else {
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    "{\"id\": \"chatcmpl-broken\", oops this is not json",
                ))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        };
    }
    let echo_text;
    let text = if rule.text.is_some() || !rule.tool_calls.is_empty() {
        rule.text.as_deref().unwrap_or("")
    } else {
        echo_text = format!("echo: {}", last_user_text(request).unwrap_or_default());
        echo_text.as_str()
    };
    if streaming {
        reply.stream(text, &rule.tool_calls, StreamEnd::Finished, include_usage)
    } else {
        reply.complete(text, &rule.tool_calls)
    }
}

/// Splits `text` into pieces of at most `size` characters.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut result = Vec::with_capacity(text.len() / size + 1);
    let mut start = 0;
    let mut count = 0;
    for (offset, _) in text.char_indices() {
        if count == size {
            result.push(&text[start..offset]);
            start = offset;
            count = 0;
        }
        count += 1;
    }
    if start < text.len() {
        result.push(&text[start..]);
    }
    result
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(
    status: u16,
    message: &str,
    error_type: Option<&str>,
    retry_after: Option<&str>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (default_type, code) = match status.as_u16() {
        429 => ("requests", Value::String("rate_limit_exceeded".into())),
        401 => (
            "invalid_request_error",
            Value::String("invalid_api_key".into()),
        ),
        400..=499 => ("invalid_request_error", Value::Null),
        _ => ("server_error", Value::Null),
    };
    let body = json!({
        "error": {
            "message": message,
            "type": error_type.unwrap_or(default_type),
            "param": null,
            "code": code,
        }
    });
    let mut response = json_response(status, &body);
    if let Some(retry_after) = retry_after
        && let Ok(value) = HeaderValue::from_str(retry_after)
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// How a scripted stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamEnd {
    /// finish_reason, the usage chunk when asked, `[DONE]`.
    Finished,
    /// The connection is closed mid-answer.
    Cut,
    /// A data line that is not JSON, then `[DONE]` (a client must not trust what follows).
    Malformed,
}

/// The parts of an answer shared by its chunks.
struct Reply {
    id: String,
    number: u64,
    created: u64,
    model: String,
    prompt_tokens: u64,
    chunk_delay: Duration,
}

impl Reply {
    fn usage(&self, completion_tokens: u64) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        })
    }

    fn call_id(&self, index: usize) -> String {
        format!("call_scripted_{}_{index}", self.number)
    }

    fn complete(&self, text: &str, tool_calls: &[ScriptedToolCall]) -> Response {
        let mut message = json!({
            "role": "assistant",
            "content": if text.is_empty() && !tool_calls.is_empty() { Value::Null } else { Value::String(text.to_string()) },
            "refusal": null,
        });
        if !tool_calls.is_empty() {
            message["tool_calls"] = tool_calls
                .iter()
                .enumerate()
                .map(|(index, call)| {
                    json!({
                        "id": self.call_id(index),
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
        }
        let finish = if tool_calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        let body = json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "message": message, "logprobs": null, "finish_reason": finish }],
            "usage": self.usage(completion_tokens(text, tool_calls)),
            "system_fingerprint": null,
        });
        json_response(StatusCode::OK, &body)
    }

    /// Half of a JSON body, then the connection is cut.
    fn cut_body(&self, text: &str) -> Response {
        let start = format!(
            "{{\"id\":\"{}\",\"object\":\"chat.completion\",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":{}",
            self.id,
            Value::String(text.to_string())
        );
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(streamed_body(vec![start], StreamEnd::Cut, Duration::ZERO))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>, include_usage: bool) -> String {
        let mut chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason }],
        });
        if include_usage {
            chunk["usage"] = Value::Null;
        }
        format!("data: {chunk}\n\n")
    }

    fn stream(
        &self,
        text: &str,
        tool_calls: &[ScriptedToolCall],
        end: StreamEnd,
        include_usage: bool,
    ) -> Response {
        let mut events: Vec<String> = Vec::new();
        events.push(self.chunk(
            json!({ "role": "assistant", "content": "", "refusal": null }),
            None,
            include_usage,
        ));
        for piece in pieces(text, TEXT_CHUNK_CHARS) {
            events.push(self.chunk(json!({ "content": piece }), None, include_usage));
        }
        for (index, call) in tool_calls.iter().enumerate() {
            events.push(self.chunk(
                json!({ "tool_calls": [{
                    "index": index,
                    "id": self.call_id(index),
                    "type": "function",
                    "function": { "name": call.name, "arguments": "" },
                }] }),
                None,
                include_usage,
            ));
            for piece in pieces(&call.arguments, ARGUMENT_CHUNK_CHARS) {
                events.push(self.chunk(
                    json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] }),
                    None,
                    include_usage,
                ));
            }
        }
        match end {
            StreamEnd::Finished => {
                let finish = if tool_calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                events.push(self.chunk(json!({}), Some(finish), include_usage));
                if include_usage {
                    let usage = json!({
                        "id": self.id,
                        "object": "chat.completion.chunk",
                        "created": self.created,
                        "model": self.model,
                        "system_fingerprint": null,
                        "choices": [],
                        "usage": self.usage(completion_tokens(text, tool_calls)),
                    });
                    events.push(format!("data: {usage}\n\n"));
                }
                events.push("data: [DONE]\n\n".to_string());
            }
            StreamEnd::Malformed => {
                events
                    .push("data: {\"id\": \"chatcmpl-broken\", \"choices\": [oops\n\n".to_string());
                events.push("data: [DONE]\n\n".to_string());
            }
            StreamEnd::Cut => {}
        }
        let body = if end == StreamEnd::Cut || !self.chunk_delay.is_zero() {
            streamed_body(events, end, self.chunk_delay)
        } else {
            Body::from(events.concat())
        };
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(body)
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
    }
}

fn cut_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "scripted cut of the stream",
    )
}

/// A body sending each event as its own frame, `delay` apart, then cut when `end` says so.
fn streamed_body(events: Vec<String>, end: StreamEnd, delay: Duration) -> Body {
    let mut frames: Vec<Result<Bytes, std::io::Error>> = events
        .into_iter()
        .map(|event| Ok(Bytes::from(event)))
        .collect();
    if end == StreamEnd::Cut {
        frames.push(Err(cut_error()));
    }
    let stream = futures::stream::unfold(
        (frames.into_iter(), true),
        move |(mut frames, first)| async move {
            let frame = frames.next()?;
            if frame.is_err() {
                // Let the server flush what came before, so the cut lands mid-answer rather
                // than before the status line.
                tokio::time::sleep(CUT_FLUSH_PAUSE.max(delay)).await;
            } else if !first && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Some((frame, (frames, false)))
        },
    );
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests;

//! The fake signal-cli's JSON-RPC methods: parameters as signal-cli reads them (single values or
//! lists, camelCase names), answers and error codes as it writes them.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::{SentSignal, SentSignalAttachment, Shared, SignalCall, SignalPerson, status};

/// JSON-RPC error codes signal-cli uses.
const USER_ERROR: i64 = -1;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const PARSE_ERROR: i64 = -32700;
/// A request body above this is refused.
const MAX_BODY: usize = 128 * 1024 * 1024;

type Failure = (i64, String);

pub(super) async fn answer(shared: Arc<Shared>, request: Request<Body>) -> Response {
    let json_body = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !json_body {
        return status(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let Ok(bytes) = axum::body::to_bytes(request.into_body(), MAX_BODY).await else {
        return status(StatusCode::PAYLOAD_TOO_LARGE);
    };
    let request: Value = match serde_json::from_slice(&bytes) {
        Ok(request) => request,
        Err(error) => return reply(Value::Null, Err((PARSE_ERROR, error.to_string()))),
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(method) = request.get("method").and_then(Value::as_str) else {
        return reply(
            id,
            Err((INVALID_REQUEST, "method field must be set".into())),
        );
    };
    let params = match request.get("params") {
        Some(Value::Object(params)) => params.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => {
            return reply(
                id,
                Err((INVALID_REQUEST, "params must be an object".into())),
            );
        }
    };
    let outcome = run(&shared, method, params).await;
    shared.activity.notify_waiters();
    reply(id, outcome)
}

fn reply(id: Value, outcome: Result<Value, Failure>) -> Response {
    let body = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "result": result, "id": id}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "error": {"code": code, "message": message, "data": null}, "id": id})
        }
    };
    let mut response = Response::new(Body::from(body.to_string()));
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

async fn run(
    shared: &Arc<Shared>,
    method: &str,
    mut params: Map<String, Value>,
) -> Result<Value, Failure> {
    let account = {
        let state = shared.lock();
        match params
            .remove("account")
            .and_then(|value| value.as_str().map(str::to_string))
        {
            Some(account) if state.multi_account => {
                if !state.accounts.contains(&account) {
                    return Err((INVALID_PARAMS, "Specified account does not exist".into()));
                }
                account
            }
            None if state.multi_account => {
                return Err((INVALID_PARAMS, "Method requires account parameter".into()));
            }
            _ => state.accounts.first().cloned().unwrap_or_default(),
        }
    };
    shared.lock().calls.push(SignalCall {
        account: account.clone(),
        method: method.to_string(),
        params: Value::Object(params.clone()),
    });
    match method {
        "send" => send(shared, &account, &params),
        "sendTyping" | "sendReceipt" | "sendReaction" => {
            let recipients = strings(&params, &["recipient", "recipients"]);
            let groups = strings(&params, &["groupId", "group"]);
            if recipients.is_empty() && groups.is_empty() {
                return Err((USER_ERROR, "No recipients given".into()));
            }
            Ok(results(shared, &recipients, groups.first()))
        }
        "getAttachment" => {
            let id = params.get("id").and_then(Value::as_str).unwrap_or("");
            match shared.lock().attachments.get(id) {
                Some(bytes) => {
                    Ok(json!({"data": base64::engine::general_purpose::STANDARD.encode(bytes)}))
                }
                None => Err((USER_ERROR, format!("Unable to find attachment: {id}"))),
            }
        }
        "receive" => receive(shared, &account, &params).await,
        _ => Err((METHOD_NOT_FOUND, "Method not implemented".into())),
    }
}

/// A parameter given as one string or a list of strings, under any of `names`.
fn strings(params: &Map<String, Value>, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter_map(|name| params.get(*name))
        .flat_map(|value| match value {
            Value::String(text) => vec![text.clone()],
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The answer of a sending method: a fresh timestamp and one SUCCESS per recipient.
fn results(shared: &Arc<Shared>, recipients: &[String], group: Option<&String>) -> Value {
    let mut state = shared.lock();
    state.next_timestamp += 1;
    let entries: Vec<Value> = recipients
        .iter()
        .map(|number| {
            let person = SignalPerson::new(number, "");
            let mut entry = json!({"recipientAddress": {"uuid": person.uuid, "number": number}, "type": "SUCCESS"});
            if let Some(group) = group {
                entry["groupId"] = json!(group);
            }
            entry
        })
        .collect();
    json!({"timestamp": state.next_timestamp, "results": entries})
}

fn send(
    shared: &Arc<Shared>,
    account: &str,
    params: &Map<String, Value>,
) -> Result<Value, Failure> {
    let recipients = strings(params, &["recipient", "recipients"]);
    let groups = strings(params, &["groupId", "group"]);
    if recipients.is_empty() && groups.is_empty() {
        return Err((USER_ERROR, "No recipients given".into()));
    }
    let mut attachments = Vec::new();
    for attachment in strings(params, &["attachment", "attachments"]) {
        attachments.push(decode_attachment(&attachment).map_err(|error| (USER_ERROR, error))?);
    }
    let text = params
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if text.is_empty() && attachments.is_empty() {
        return Err((USER_ERROR, "Message or attachment is required".into()));
    }
    let rate_limited = {
        let mut state = shared.lock();
        let limited = state.rate_limited_sends > 0;
        state.rate_limited_sends = state.rate_limited_sends.saturating_sub(1);
        limited
    };
    let mut answer = results(shared, &recipients, groups.first());
    if rate_limited {
        for entry in answer["results"].as_array_mut().into_iter().flatten() {
            entry["type"] = json!("RATE_LIMIT_FAILURE");
            entry["retryAfterSeconds"] = json!(3);
        }
        return Ok(answer);
    }
    let quote = params
        .get("quoteTimestamp")
        .and_then(Value::as_i64)
        .map(|timestamp| {
            let author = params
                .get("quoteAuthor")
                .and_then(Value::as_str)
                .unwrap_or("");
            (timestamp, author.to_string())
        });
    shared.lock().sent.push(SentSignal {
        account: account.to_string(),
        recipients,
        group_id: groups.first().cloned(),
        text,
        attachments,
        voice_note: params
            .get("voiceNote")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        quote,
        timestamp: answer["timestamp"].as_i64().unwrap_or(0),
    });
    Ok(answer)
}

/// `data:<mime>;filename=<name>;base64,<data>` (RFC 2397 plus signal-cli's `filename`).
fn decode_attachment(text: &str) -> Result<SentSignalAttachment, String> {
    let Some(rest) = text.strip_prefix("data:") else {
        return Err(format!("Failed to read attachment file {text}: not found"));
    };
    let (header, data) = rest
        .split_once(',')
        .ok_or_else(|| "Invalid data URI: no comma".to_string())?;
    let mut parts = header.split(';');
    let mime = parts.next().unwrap_or("").to_string();
    let mut file_name = None;
    let mut base64 = false;
    for part in parts {
        if part == "base64" {
            base64 = true;
        } else if let Some(name) = part.strip_prefix("filename=") {
            file_name = Some(name.to_string());
        }
    }
    if !base64 {
        return Err("Invalid data URI: only base64 is supported here".into());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|error| format!("Invalid data URI: {error}"))?;
    Ok(SentSignalAttachment {
        mime,
        file_name,
        bytes,
    })
}

/// `receive` in manual mode: what waits, else what arrives within `timeout`.
async fn receive(
    shared: &Arc<Shared>,
    account: &str,
    params: &Map<String, Value>,
) -> Result<Value, Failure> {
    let timeout = params.get("timeout").and_then(Value::as_f64).unwrap_or(3.0);
    let max = params
        .get("maxMessages")
        .and_then(Value::as_i64)
        .filter(|max| *max > 0)
        .map_or(usize::MAX, |max| max as usize);
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
    loop {
        let woken = shared.activity.notified();
        {
            let mut state = shared.lock();
            state.streams.retain(|stream| !stream.sender.is_closed());
            if state.streams.iter().any(|stream| {
                stream
                    .account
                    .as_deref()
                    .is_none_or(|wanted| wanted == account)
            }) {
                return Err((
                    USER_ERROR,
                    "Receive command cannot be used if messages are already being received.".into(),
                ));
            }
            let waiting = state.waiting.entry(account.to_string()).or_default();
            if !waiting.is_empty() {
                let take = waiting.len().min(max);
                return Ok(Value::Array(waiting.drain(..take).collect()));
            }
        }
        if tokio::time::timeout_at(deadline, woken).await.is_err() {
            return Ok(json!([]));
        }
    }
}

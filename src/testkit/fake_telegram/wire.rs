//! The HTTP side of the fake Bot API server: serving connections, reading a method's parameters
//! from any of the encodings Telegram accepts, and writing Bot API answers.
//!
//! Connections are served by our own accept loop on hyper rather than `axum::serve`, because the
//! fake must be able to close one connection without answering (fault injection) and to cut every
//! connection at once on stop, including long polls that are still waiting.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequest, Multipart};
use axum::http::header::CONTENT_TYPE;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

/// Bodies above this are refused; Telegram's own upload limit for bots is 50 MB.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Accepts connections until `shutdown` turns true (or its sender is dropped), then closes every
/// connection, waiting or not. `handler` answers one request; `None` means "close the connection
/// without an answer".
pub(super) async fn serve<H, F>(
    listener: TcpListener,
    handler: H,
    mut shutdown: watch::Receiver<bool>,
) where
    H: Fn(Request<Body>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Option<Response>> + Send + 'static,
{
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    connections.spawn(serve_connection(stream, handler.clone(), shutdown.clone()));
                }
                Err(error) => {
                    // Out of file descriptors and the like: back off briefly instead of spinning.
                    tracing::debug!(%error, "fake Telegram: accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_finished) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

async fn serve_connection<H, F>(stream: TcpStream, handler: H, mut shutdown: watch::Receiver<bool>)
where
    H: Fn(Request<Body>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Option<Response>> + Send + 'static,
{
    // Small JSON answers must not wait for Nagle's algorithm.
    let _ = stream.set_nodelay(true);
    // Notified by a request whose answer is "no answer": the connection is then dropped.
    let kill = Arc::new(Notify::new());
    let kill_from_requests = Arc::clone(&kill);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let handler = handler.clone();
        let kill = Arc::clone(&kill_from_requests);
        async move {
            match handler(request.map(Body::new)).await {
                Some(response) => Ok::<Response, Infallible>(response),
                None => {
                    kill.notify_one();
                    std::future::pending::<Result<Response, Infallible>>().await
                }
            }
        }
    });
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _served = connection => {}
        () = kill.notified() => {}
        _changed = shutdown.changed() => {}
    }
}

/// A file part of a multipart request.
pub(super) struct UploadedFile {
    /// The part's name: `document`, or the id that an `attach://<id>` value points to.
    pub(super) field: String,
    pub(super) file_name: Option<String>,
    pub(super) bytes: Vec<u8>,
}

/// A method's parameters, from the query string and a JSON, form or multipart body, as
/// Telegram accepts all four. Values from form and multipart bodies arrive as strings; the
/// accessors convert.
#[derive(Default)]
pub(super) struct Params {
    values: Map<String, Value>,
    files: Vec<UploadedFile>,
}

impl Params {
    pub(super) async fn from_request(request: Request<Body>) -> Result<Params, String> {
        let mut params = Params::default();
        if let Some(query) = request.uri().query() {
            for (key, value) in form_urlencoded::parse(query.as_bytes()) {
                params
                    .values
                    .insert(key.into_owned(), Value::String(value.into_owned()));
            }
        }
        let content_type = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("multipart/form-data") {
            let mut multipart = Multipart::from_request(request, &())
                .await
                .map_err(|error| format!("Bad Request: invalid multipart body: {error}"))?;
            while let Some(field) = multipart
                .next_field()
                .await
                .map_err(|error| format!("Bad Request: invalid multipart body: {error}"))?
            {
                let name = field.name().unwrap_or_default().to_string();
                let file_name = field.file_name().map(str::to_string);
                let bytes = field
                    .bytes()
                    .await
                    .map_err(|error| format!("Bad Request: invalid multipart body: {error}"))?;
                if file_name.is_some() {
                    params.files.push(UploadedFile {
                        field: name,
                        file_name: file_name.filter(|name| !name.is_empty()),
                        bytes: bytes.to_vec(),
                    });
                } else {
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    params.values.insert(name, Value::String(text));
                }
            }
            return Ok(params);
        }
        let bytes = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|error| format!("Bad Request: unreadable request body: {error}"))?;
        if bytes.is_empty() {
            return Ok(params);
        }
        if content_type.starts_with("application/x-www-form-urlencoded") {
            for (key, value) in form_urlencoded::parse(&bytes) {
                params
                    .values
                    .insert(key.into_owned(), Value::String(value.into_owned()));
            }
            return Ok(params);
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(object)) => {
                params.values.extend(object);
                Ok(params)
            }
            _ => Err("Bad Request: the request body is not a JSON object".to_string()),
        }
    }

    /// An integer parameter, given as a JSON number or a decimal string.
    pub(super) fn integer(&self, key: &str) -> Result<Option<i64>, String> {
        match self.values.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(number)) => number
                .as_i64()
                .map(Some)
                .ok_or_else(|| format!("Bad Request: field \"{key}\" must be an integer")),
            Some(Value::String(text)) if text.is_empty() => Ok(None),
            Some(Value::String(text)) => text
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("Bad Request: field \"{key}\" must be an integer")),
            Some(_) => Err(format!("Bad Request: field \"{key}\" must be an integer")),
        }
    }

    /// A string parameter; numbers and booleans are given as their text.
    pub(super) fn string(&self, key: &str) -> Option<String> {
        match self.values.get(key)? {
            Value::String(text) => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            _ => None,
        }
    }

    /// A boolean parameter, given as JSON or as `true`/`false`/`1`/`0` text.
    pub(super) fn flag(&self, key: &str) -> bool {
        match self.values.get(key) {
            Some(Value::Bool(flag)) => *flag,
            Some(Value::String(text)) => matches!(text.as_str(), "true" | "True" | "1"),
            Some(Value::Number(number)) => number.as_i64() == Some(1),
            _ => false,
        }
    }

    /// An object or array parameter, given as JSON or as a string holding JSON (as in forms).
    pub(super) fn json(&self, key: &str) -> Result<Option<Value>, String> {
        match self.values.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if text.is_empty() => Ok(None),
            Some(Value::String(text)) => serde_json::from_str(text)
                .map(Some)
                .map_err(|_| format!("Bad Request: can't parse {key} JSON object")),
            Some(value) => Ok(Some(value.clone())),
        }
    }

    /// The uploaded file for `field`: a part named `field`, or the part that the value
    /// `attach://<name>` of `field` points to (teloxide's way).
    pub(super) fn file(&self, field: &str) -> Option<&UploadedFile> {
        let target = self
            .string(field)
            .and_then(|value| value.strip_prefix("attach://").map(str::to_string))
            .unwrap_or_else(|| field.to_string());
        self.files.iter().find(|file| file.field == target)
    }
}

/// The answer to one Bot API call.
pub(super) enum Reply {
    /// `{"ok":true,"result":...}`.
    Done(Value),
    /// `{"ok":false,"error_code":...,"description":...}`, with `parameters.retry_after` for 429.
    Failed {
        status: StatusCode,
        description: String,
        retry_after: Option<u64>,
    },
    /// A file download's bytes.
    File(Vec<u8>),
}

impl Reply {
    pub(super) fn bad_request(description: impl Into<String>) -> Reply {
        Reply::Failed {
            status: StatusCode::BAD_REQUEST,
            description: description.into(),
            retry_after: None,
        }
    }

    pub(super) fn unauthorized() -> Reply {
        Reply::Failed {
            status: StatusCode::UNAUTHORIZED,
            description: "Unauthorized".to_string(),
            retry_after: None,
        }
    }

    pub(super) fn not_found() -> Reply {
        Reply::Failed {
            status: StatusCode::NOT_FOUND,
            description: "Not Found".to_string(),
            retry_after: None,
        }
    }

    pub(super) fn conflict() -> Reply {
        Reply::Failed {
            status: StatusCode::CONFLICT,
            description: super::CONFLICT_DESCRIPTION.to_string(),
            retry_after: None,
        }
    }

    pub(super) fn bad_gateway() -> Reply {
        Reply::Failed {
            status: StatusCode::BAD_GATEWAY,
            description: "Bad Gateway".to_string(),
            retry_after: None,
        }
    }

    pub(super) fn too_many_requests(retry_after_secs: u64) -> Reply {
        Reply::Failed {
            status: StatusCode::TOO_MANY_REQUESTS,
            description: format!("Too Many Requests: retry after {retry_after_secs}"),
            retry_after: Some(retry_after_secs),
        }
    }

    pub(super) fn into_response(self) -> Response {
        match self {
            Reply::Done(result) => (
                StatusCode::OK,
                axum::Json(json!({"ok": true, "result": result})),
            )
                .into_response(),
            Reply::Failed {
                status,
                description,
                retry_after,
            } => {
                let mut body = json!({
                    "ok": false,
                    "error_code": status.as_u16(),
                    "description": description,
                });
                if let Some(seconds) = retry_after {
                    body["parameters"] = json!({"retry_after": seconds});
                }
                (status, axum::Json(body)).into_response()
            }
            Reply::File(bytes) => (
                StatusCode::OK,
                [(CONTENT_TYPE, "application/octet-stream")],
                bytes,
            )
                .into_response(),
        }
    }
}

/// Canonical Bot API spelling of the methods the fake knows, keyed by lowercase name.
pub(super) fn canonical_method(lowercase: &str) -> Option<&'static str> {
    const METHODS: &[&str] = &[
        "getMe",
        "logOut",
        "close",
        "getUpdates",
        "deleteWebhook",
        "getWebhookInfo",
        "sendMessage",
        "sendDocument",
        "sendPhoto",
        "sendVoice",
        "editMessageText",
        "editMessageReplyMarkup",
        "deleteMessage",
        "sendChatAction",
        "answerCallbackQuery",
        "setMyCommands",
        "getMyCommands",
        "deleteMyCommands",
        "getFile",
    ];
    METHODS
        .iter()
        .copied()
        .find(|method| method.eq_ignore_ascii_case(lowercase))
}

/// A user's Bot API JSON.
pub(super) fn user_json(id: i64, is_bot: bool, first_name: &str, username: Option<&str>) -> Value {
    let mut user = json!({"id": id, "is_bot": is_bot, "first_name": first_name});
    if let Some(username) = username {
        user["username"] = Value::String(username.to_string());
    }
    if !is_bot {
        user["language_code"] = Value::String("en".to_string());
    }
    user
}

/// Entities Telegram detects in a user's text on its own: `@mentions` and `/commands`.
pub(super) fn detected_entities(text: &str) -> Vec<Value> {
    let mut entities = Vec::new();
    let characters: Vec<char> = text.chars().collect();
    let mut utf16_offsets = Vec::with_capacity(characters.len() + 1);
    let mut offset = 0;
    for character in &characters {
        utf16_offsets.push(offset);
        offset += character.len_utf16();
    }
    utf16_offsets.push(offset);
    let is_word = |character: char| character.is_alphanumeric() || character == '_';
    let mut index = 0;
    while index < characters.len() {
        let marker = characters[index];
        let at_word_start = index == 0 || !is_word(characters[index - 1]);
        let kind = match marker {
            '@' if at_word_start => "mention",
            '/' if index == 0 || characters[index - 1].is_whitespace() => "bot_command",
            _ => {
                index += 1;
                continue;
            }
        };
        let mut end = index + 1;
        while end < characters.len()
            && (is_word(characters[end]) || (kind == "bot_command" && characters[end] == '@'))
        {
            end += 1;
        }
        if end > index + 1 {
            entities.push(json!({
                "type": kind,
                "offset": utf16_offsets[index],
                "length": utf16_offsets[end] - utf16_offsets[index],
            }));
        }
        index = end.max(index + 1);
    }
    entities
}

/// A MIME type guessed from a file name, for document messages.
pub(super) fn mime_type_for(file_name: &str) -> &'static str {
    let extension = file_name
        .rsplit_once('.')
        .map(|(_, extension)| extension.to_ascii_lowercase())
        .unwrap_or_default();
    let known: HashMap<&str, &'static str> = [
        ("txt", "text/plain"),
        ("md", "text/markdown"),
        ("csv", "text/csv"),
        ("json", "application/json"),
        ("pdf", "application/pdf"),
        ("png", "image/png"),
        ("jpg", "image/jpeg"),
        ("jpeg", "image/jpeg"),
        ("ogg", "audio/ogg"),
        ("zip", "application/zip"),
    ]
    .into_iter()
    .collect();
    known
        .get(extension.as_str())
        .copied()
        .unwrap_or("application/octet-stream")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_and_commands_are_detected_with_utf16_offsets() {
        let entities = detected_entities("😀 @helper_bot hi /start@helper_bot mail a@b.c");
        let spans: Vec<(String, u64, u64)> = entities
            .iter()
            .map(|entity| {
                (
                    entity["type"].as_str().unwrap_or_default().to_string(),
                    entity["offset"].as_u64().unwrap_or_default(),
                    entity["length"].as_u64().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            spans,
            vec![
                ("mention".to_string(), 3, 11),
                ("bot_command".to_string(), 18, 17),
            ]
        );
    }
}

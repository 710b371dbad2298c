//! A transcription server on `127.0.0.1:0` speaking the OpenAI-compatible
//! `POST /v1/audio/transcriptions` (multipart/form-data with a `file` part and a `model` field,
//! answered `{"text": ...}`), so that the real [`crate::voice::Transcriber`] can be tested.
//!
//! The body is parsed as a real multipart form (axum's `Multipart`, which is multer): a request
//! without a `file` part (with a file name) or without `model` is answered 400 as OpenAI does.
//! Every request is recorded (file bytes, file name, content type, model, response format,
//! `Authorization` header). The transcript is the one set for the exact audio bytes, else the
//! default text. Faults for the next requests: HTTP 500 (a server in trouble), HTTP 400
//! ("could not decode the audio", what OpenAI answers for bytes that are not audio), a stall,
//! and a 401 that echoes the key it was sent.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::multipart::Field;
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

/// The largest upload accepted (OpenAI's limit is 25 MB).
const MAX_UPLOAD_BYTES: usize = 25 * 1024 * 1024;

/// One request the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptionRequest {
    pub file_bytes: Vec<u8>,
    pub file_name: String,
    pub content_type: String,
    pub model: String,
    pub response_format: Option<String>,
    /// The `Authorization` header as sent, if any.
    pub authorization: Option<String>,
    /// What the fake answered (status code).
    pub status: u16,
}

/// A fault for the next requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TranscriptionFault {
    /// HTTP 500 with an OpenAI-style error body.
    ServerError,
    /// HTTP 400 "could not decode the audio file".
    Unreadable,
    /// No answer for this long (then the transcript): a server that hangs, for timeouts and for
    /// stopping the daemon mid-transcription.
    Stall(Duration),
    /// HTTP 401 whose body repeats the `Authorization` header it got, as some proxies do (the
    /// client must not pass it on).
    EchoAuthorization,
}

#[derive(Default)]
struct FakeState {
    default_text: String,
    by_audio: HashMap<Vec<u8>, String>,
    faults: Vec<TranscriptionFault>,
    requests: Vec<TranscriptionRequest>,
}

struct Shared {
    state: Mutex<FakeState>,
    activity: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, FakeState> {
        // A panic while holding the lock leaves the records usable for a test.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// A running fake. Stops when dropped.
pub struct FakeTranscription {
    address: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl FakeTranscription {
    /// Starts the fake; every transcript is `default_text` until told otherwise.
    pub async fn start(default_text: &str) -> std::io::Result<FakeTranscription> {
        let shared = Arc::new(Shared {
            state: Mutex::new(FakeState {
                default_text: default_text.to_string(),
                ..FakeState::default()
            }),
            activity: Notify::new(),
        });
        let app = Router::new()
            .route("/v1/audio/transcriptions", post(transcribe))
            .layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (shutdown, shutdown_signal) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = shutdown_signal.await;
            });
            if let Err(error) = serving.await {
                tracing::warn!(%error, "fake transcription server stopped with an error");
            }
        });
        Ok(FakeTranscription {
            address,
            shared,
            shutdown: Some(shutdown),
            server: Some(server),
        })
    }

    /// The base URL a provider's `base_url` takes (ends in `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The transcript for exactly these audio bytes.
    pub fn set_transcript(&self, audio: &[u8], text: &str) {
        self.shared
            .lock()
            .by_audio
            .insert(audio.to_vec(), text.to_string());
    }

    /// The next requests fail, one fault each, in order.
    pub fn fail_next(&self, faults: &[TranscriptionFault]) {
        self.shared.lock().faults.extend_from_slice(faults);
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<TranscriptionRequest> {
        self.shared.lock().requests.clone()
    }

    /// Waits until at least `count` requests arrived; `false` if `timeout` passed first.
    pub async fn wait_for_requests(&self, count: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.activity.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.shared.lock().requests.len() >= count {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.shared.lock().requests.len() >= count;
            }
        }
    }
}

impl Drop for FakeTranscription {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

fn openai_error(status: StatusCode, message: &str, kind: &str) -> Response {
    (
        status,
        axum::Json(
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
        ),
    )
        .into_response()
}

/// Answers one transcription request: the next fault if one is set, else the transcript; every
/// well-formed request is recorded.
async fn transcribe(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    form: Multipart,
) -> Response {
    let upload = match read_upload(form).await {
        Ok(upload) => upload,
        Err(response) => return response,
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let mut stall = None;
    let response = {
        let mut state = shared.lock();
        let fault = (!state.faults.is_empty()).then(|| state.faults.remove(0));
        if let Some(TranscriptionFault::Stall(duration)) = fault {
            stall = Some(duration);
        }
        let (status, response) =
            answer(&state, fault, &upload.file_bytes, authorization.as_deref());
        state.requests.push(TranscriptionRequest {
            file_bytes: upload.file_bytes,
            file_name: upload.file_name,
            content_type: upload.content_type,
            model: upload.model,
            response_format: upload.response_format,
            authorization,
            status,
        });
        response
    };
    shared.activity.notify_waiters();
    if let Some(stall) = stall {
        tokio::time::sleep(stall).await;
    }
    response
}

/// What the fake reads from a transcription request's form.
struct Upload {
    file_bytes: Vec<u8>,
    file_name: String,
    content_type: String,
    model: String,
    response_format: Option<String>,
}

/// Reads the multipart form; a malformed form, a `file` part without a file name, or a missing
/// `file` or `model` is answered 400 as OpenAI does.
async fn read_upload(mut form: Multipart) -> Result<Upload, Response> {
    let mut file: Option<(Vec<u8>, String, String)> = None;
    let mut model = None;
    let mut response_format = None;
    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => read_field(field).await?,
            Ok(None) => break,
            Err(error) => {
                return Err(openai_error(
                    StatusCode::BAD_REQUEST,
                    &format!("malformed multipart body: {error}"),
                    "invalid_request_error",
                ));
            }
        };
        match field.name.as_str() {
            "file" => match field.file_name {
                Some(file_name) => file = Some((field.bytes, file_name, field.content_type)),
                None => {
                    return Err(openai_error(
                        StatusCode::BAD_REQUEST,
                        "the `file` part must carry a filename",
                        "invalid_request_error",
                    ));
                }
            },
            "model" => model = Some(String::from_utf8_lossy(&field.bytes).into_owned()),
            "response_format" => {
                response_format = Some(String::from_utf8_lossy(&field.bytes).into_owned())
            }
            _ => {}
        }
    }
    let (Some((file_bytes, file_name, content_type)), Some(model)) = (file, model) else {
        return Err(openai_error(
            StatusCode::BAD_REQUEST,
            "you must provide a `file` and a `model`",
            "invalid_request_error",
        ));
    };
    Ok(Upload {
        file_bytes,
        file_name,
        content_type,
        model,
        response_format,
    })
}

/// One part of a multipart form, read whole.
struct FormField {
    name: String,
    file_name: Option<String>,
    content_type: String,
    bytes: Vec<u8>,
}

/// Reads one part of the form; a part whose body cannot be read is answered 400.
async fn read_field(field: Field<'_>) -> Result<FormField, Response> {
    let name = field.name().unwrap_or_default().to_string();
    let file_name = field.file_name().map(str::to_string);
    let content_type = field.content_type().unwrap_or_default().to_string();
    match field.bytes().await {
        Ok(bytes) => Ok(FormField {
            name,
            file_name,
            content_type,
            bytes: bytes.to_vec(),
        }),
        Err(error) => Err(openai_error(
            StatusCode::BAD_REQUEST,
            &format!("malformed multipart field `{name}`: {error}"),
            "invalid_request_error",
        )),
    }
}

/// The status and answer for a request with `file_bytes` under `fault`: the fault's error, or
/// the transcript (a stall answers with it too, late).
fn answer(
    state: &FakeState,
    fault: Option<TranscriptionFault>,
    file_bytes: &[u8],
    authorization: Option<&str>,
) -> (u16, Response) {
    match fault {
        Some(TranscriptionFault::ServerError) => (
            500,
            openai_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The server had an error while processing your request.",
                "server_error",
            ),
        ),
        Some(TranscriptionFault::Unreadable) => (
            400,
            openai_error(
                StatusCode::BAD_REQUEST,
                "Audio file might be corrupted or unsupported",
                "invalid_request_error",
            ),
        ),
        Some(TranscriptionFault::EchoAuthorization) => (
            401,
            openai_error(
                StatusCode::UNAUTHORIZED,
                &format!(
                    "Incorrect API key provided: {}",
                    authorization.unwrap_or("(none)")
                ),
                "invalid_request_error",
            ),
        ),
        Some(TranscriptionFault::Stall(_)) | None => {
            let text = state
                .by_audio
                .get(file_bytes)
                .cloned()
                .unwrap_or_else(|| state.default_text.clone());
            (200, axum::Json(json!({"text": text})).into_response())
        }
    }
}

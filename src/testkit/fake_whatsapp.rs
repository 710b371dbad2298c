//! A fake of Meta's WhatsApp Business Cloud API (the Graph API) on loopback, and the webhook
//! deliveries Meta would make to the daemon.
//!
//! It answers like graph.facebook.com: `GET /{phone_number_id}` (the number's name),
//! `POST /{phone_number_id}/messages` (text, interactive buttons, media by id, templates, read
//! receipts; `{"messages":[{"id":"wamid…"}]}`), `POST /{phone_number_id}/media` (multipart upload),
//! `GET /{media_id}` (its URL) and the URL itself; every call needs the bearer token. It keeps
//! the 24-hour customer-service window per person (a free-form message to someone who has not
//! written in 24 h is refused with 131047; a template always goes) and answers queued errors
//! (130429 throughput, 131056 pair rate, ...) before anything else. Deliveries to the daemon are
//! signed like Meta's: `X-Hub-Signature-256: sha256=HMAC-SHA256(app secret, raw body)`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::whatsapp::webhook::sign;

const DAY_MS: i64 = 24 * 3_600_000;

#[derive(Default)]
struct Inner {
    /// Every accepted message body (`/messages`), read receipts excluded.
    sent: Vec<Value>,
    /// Message ids marked read.
    reads: Vec<String>,
    /// Uploaded and downloadable media: id → (bytes, mime, name).
    media: HashMap<String, (Vec<u8>, String, String)>,
    /// When each person last wrote (ms).
    last_inbound: HashMap<String, i64>,
    /// Errors to answer next: (HTTP status, Meta's code).
    errors: VecDeque<(u16, i64)>,
    /// Refused sends, by Meta's code.
    refused: Vec<i64>,
    next_id: u64,
}

struct Shared {
    phone_number_id: String,
    token: String,
    app_secret: String,
    address: Mutex<Option<SocketAddr>>,
    inner: Mutex<Inner>,
}

/// A running fake. Dropping it stops the server.
pub struct FakeWhatsApp {
    address: SocketAddr,
    shared: Arc<Shared>,
    http: reqwest::Client,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

impl FakeWhatsApp {
    /// Starts the fake for one phone number, its access token and app secret.
    pub async fn start(phone_number_id: &str, token: &str, app_secret: &str) -> FakeWhatsApp {
        let shared = Arc::new(Shared {
            phone_number_id: phone_number_id.to_string(),
            token: token.to_string(),
            app_secret: app_secret.to_string(),
            address: Mutex::new(None),
            inner: Mutex::new(Inner::default()),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("a loopback port for the fake Graph API");
        let address = listener
            .local_addr()
            .expect("a bound listener has an address");
        *shared.address.lock().expect("fake lock") = Some(address);
        let router = Router::new()
            .route("/v21.0/{id}", get(get_object))
            .route("/v21.0/{id}/messages", post(messages))
            .route("/v21.0/{id}/media", post(upload))
            .route("/files/{id}", get(file))
            .with_state(shared.clone());
        let (shutdown, signal) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = signal.await;
                })
                .await;
        });
        FakeWhatsApp {
            address,
            shared,
            http: reqwest::Client::new(),
            _shutdown: shutdown,
        }
    }

    /// The `api_url` of a `[whatsapp]` table pointed at this fake.
    pub fn api_url(&self) -> String {
        format!("http://{}/v21.0", self.address)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().expect("fake lock")
    }

    /// Every accepted message body, in order.
    pub fn sent(&self) -> Vec<Value> {
        self.lock().sent.clone()
    }

    /// The texts (text bodies, interactive bodies, template parameters) sent to `to`.
    pub fn texts_to(&self, to: &str) -> Vec<String> {
        self.sent()
            .iter()
            .filter(|body| body["to"] == to)
            .filter_map(|body| {
                body["text"]["body"]
                    .as_str()
                    .or(body["interactive"]["body"]["text"].as_str())
                    .or(body["template"]["components"][0]["parameters"][0]["text"].as_str())
                    .map(str::to_string)
            })
            .collect()
    }

    /// Message ids marked read.
    pub fn reads(&self) -> Vec<String> {
        self.lock().reads.clone()
    }

    /// Meta's codes of the sends refused so far.
    pub fn refused(&self) -> Vec<i64> {
        self.lock().refused.clone()
    }

    /// The next send is refused with Meta's `code` (and HTTP `status`).
    pub fn fail_next(&self, status: u16, code: i64) {
        self.lock().errors.push_back((status, code));
    }

    /// Says `user` last wrote at `at_ms` (to open or close their window).
    pub fn set_last_inbound(&self, user: &str, at_ms: i64) {
        self.lock().last_inbound.insert(user.to_string(), at_ms);
    }

    /// Media a person sends: stored here under a new id for the daemon to download.
    pub fn add_media(&self, bytes: Vec<u8>, mime: &str) -> String {
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = format!("media-in-{}", inner.next_id);
        inner
            .media
            .insert(id.clone(), (bytes, mime.to_string(), "in".into()));
        id
    }

    /// The bytes of an uploaded medium, by the id a message named.
    pub fn media(&self, id: &str) -> Option<(Vec<u8>, String, String)> {
        self.lock().media.get(id).cloned()
    }

    /// A webhook body carrying one message object from `from` (named `name`).
    pub fn delivery(&self, from: &str, name: &str, message: Value) -> Vec<u8> {
        json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "waba-1", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550001111", "phone_number_id": self.shared.phone_number_id},
                "contacts": [{"profile": {"name": name}, "wa_id": from}],
                "messages": [message]
            }}]}]
        })
        .to_string()
        .into_bytes()
    }

    /// A text message object with id `id`.
    pub fn text_message(from: &str, id: &str, text: &str) -> Value {
        json!({"from": from, "id": id, "timestamp": (crate::clock::now_ms() / 1000).to_string(),
               "type": "text", "text": {"body": text}})
    }

    /// A pressed reply button.
    pub fn button_message(from: &str, id: &str, button_id: &str, title: &str) -> Value {
        json!({"from": from, "id": id, "timestamp": (crate::clock::now_ms() / 1000).to_string(),
               "type": "interactive", "interactive": {"type": "button_reply",
               "button_reply": {"id": button_id, "title": title}}})
    }

    /// A voice note whose audio is media `media_id`.
    pub fn voice_message(from: &str, id: &str, media_id: &str) -> Value {
        json!({"from": from, "id": id, "timestamp": (crate::clock::now_ms() / 1000).to_string(),
               "type": "audio", "audio": {"id": media_id, "mime_type": "audio/ogg; codecs=opus", "voice": true}})
    }

    /// Posts `body` to the daemon's webhook (`url`: `http://…/hooks/whatsapp`), signed with
    /// `secret` (`None`: the fake's app secret; `Some("")`: no signature header). The window of
    /// every sender in it opens, as Meta's would. Returns the HTTP status.
    pub async fn post_signed(&self, url: &str, body: &[u8], secret: Option<&str>) -> u16 {
        if let Ok(value) = serde_json::from_slice::<Value>(body) {
            let now = crate::clock::now_ms();
            let mut inner = self.lock();
            for entry in value["entry"].as_array().into_iter().flatten() {
                for change in entry["changes"].as_array().into_iter().flatten() {
                    for message in change["value"]["messages"].as_array().into_iter().flatten() {
                        if let Some(from) = message["from"].as_str() {
                            inner.last_inbound.insert(from.to_string(), now);
                        }
                    }
                }
            }
        }
        let mut request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_vec());
        let secret = secret.unwrap_or(&self.shared.app_secret);
        if !secret.is_empty() {
            request = request.header("x-hub-signature-256", sign(secret.as_bytes(), body));
        }
        match request.send().await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        }
    }

    /// Delivers one message to the daemon as Meta would: signed, retried until a 200 (at most
    /// 50 times, as Meta retries for days). Returns the last status.
    pub async fn deliver(&self, url: &str, from: &str, message: Value) -> u16 {
        let body = self.delivery(from, "Olivia", message);
        let mut status = 0;
        for _ in 0..50 {
            status = self.post_signed(url, &body, None).await;
            if status == 200 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        status
    }
}

fn authorized(shared: &Shared, headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        == Some(format!("Bearer {}", shared.token).as_str())
}

fn graph_error(status: u16, code: i64, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (
        status,
        axum::Json(json!({"error": {"message": message, "type": "OAuthException", "code": code, "fbtrace_id": "fake"}})),
    )
        .into_response()
}

async fn get_object(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&shared, &headers) {
        return graph_error(401, 190, "Invalid OAuth access token.");
    }
    if id == shared.phone_number_id {
        return axum::Json(json!({"id": id, "display_phone_number": "+1 555-000-1111", "verified_name": "Fake Business"})).into_response();
    }
    let address = shared
        .address
        .lock()
        .expect("fake lock")
        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
    match shared.inner.lock().expect("fake lock").media.get(&id) {
        Some((bytes, mime, _)) => axum::Json(
            json!({"id": id, "url": format!("http://{address}/files/{id}"),
            "mime_type": mime, "file_size": bytes.len(), "messaging_product": "whatsapp"}),
        )
        .into_response(),
        None => graph_error(400, 100, "Unsupported get request."),
    }
}

async fn file(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&shared, &headers) {
        return graph_error(401, 190, "Invalid OAuth access token.");
    }
    match shared.inner.lock().expect("fake lock").media.get(&id) {
        Some((bytes, mime, _)) => ([("content-type", mime.clone())], bytes.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&shared, &headers) {
        return graph_error(401, 190, "Invalid OAuth access token.");
    }
    if id != shared.phone_number_id {
        return graph_error(
            400,
            100,
            "Unsupported post request: unknown phone number id.",
        );
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return graph_error(400, 100, "The body is not JSON.");
    };
    let mut inner = shared.inner.lock().expect("fake lock");
    if body["status"] == "read" {
        inner
            .reads
            .push(body["message_id"].as_str().unwrap_or("").to_string());
        return axum::Json(json!({"success": true})).into_response();
    }
    if let Some((status, code)) = inner.errors.pop_front() {
        inner.refused.push(code);
        return graph_error(status, code, "Fake refusal queued by the test.");
    }
    let to = body["to"].as_str().unwrap_or("").to_string();
    let kind = body["type"].as_str().unwrap_or("");
    if kind == "text"
        && body["text"]["body"]
            .as_str()
            .is_some_and(|text| text.chars().count() > 4096)
    {
        return graph_error(
            400,
            100,
            "Param text['body'] must be at most 4096 characters long.",
        );
    }
    if kind == "interactive" {
        let buttons = body["interactive"]["action"]["buttons"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if buttons.len() > 3
            || buttons.iter().any(|b| {
                b["reply"]["title"]
                    .as_str()
                    .is_none_or(|t| t.chars().count() > 20)
            })
        {
            return graph_error(400, 131009, "Parameter value is not valid: buttons.");
        }
    }
    let open = inner
        .last_inbound
        .get(&to)
        .is_some_and(|at| crate::clock::now_ms() - at < DAY_MS);
    if kind != "template" && !open {
        inner.refused.push(131047);
        return graph_error(
            400,
            131047,
            "Re-engagement message: more than 24 hours have passed since the customer last replied.",
        );
    }
    inner.next_id += 1;
    let message_id = format!("wamid.out{}", inner.next_id);
    inner.sent.push(body);
    axum::Json(
        json!({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": message_id}]}),
    )
    .into_response()
}

async fn upload(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    if !authorized(&shared, &headers) {
        return graph_error(401, 190, "Invalid OAuth access token.");
    }
    let mut file = None;
    while let Ok(Some(field)) = form.next_field().await {
        if field.name() == Some("file") {
            let name = field.file_name().unwrap_or("file").to_string();
            let mime = field
                .content_type()
                .unwrap_or("application/octet-stream")
                .to_string();
            if let Ok(bytes) = field.bytes().await {
                file = Some((bytes.to_vec(), mime, name));
            }
        }
    }
    let Some(file) = file else {
        return graph_error(400, 100, "The upload has no `file` part.");
    };
    let mut inner = shared.inner.lock().expect("fake lock");
    inner.next_id += 1;
    let id = format!("media-up-{}", inner.next_id);
    inner.media.insert(id.clone(), file);
    axum::Json(json!({"id": id})).into_response()
}

//! A fake signal-cli HTTP daemon on loopback, for tests, benchmarks and `clawvisor eval`.
//!
//! [`FakeSignal::start`] listens on `127.0.0.1:0` and speaks what `signal-cli daemon --http`
//! speaks (`HttpServerHandler`): `GET /api/v1/events` (Server-Sent Events: `event:receive`, one
//! `data:` line of `{"account","envelope"}` JSON, a blank line; a `:` keep-alive every
//! `keep_alive`), `POST /api/v1/rpc` (JSON-RPC 2.0, `Content-Type: application/json` or 415) and
//! `GET /api/v1/check`. A Host header that is not loopback gets 421, as signal-cli pins it.
//!
//! Delivery follows signal-cli in `--receive-mode=manual`: a pushed message is written to an open
//! event stream for its account, or else waits ("on Signal's servers") until a stream opens or a
//! `receive` call takes it; `receive` while a stream is open fails as signal-cli's does ("Already
//! receiving"). A message written to a stream is gone from the fake, as it is from Signal's
//! servers once signal-cli acknowledged it.
//!
//! JSON-RPC methods (`methods`): `send` (recipients or `groupId`, `message`, `attachments` as
//! data URIs — decoded and recorded — `voiceNote`, quotes), `sendTyping`, `sendReceipt`,
//! `sendReaction`, `getAttachment` (bytes of pushed attachments), `receive`; anything else is
//! -32601. Multi-account mode ([`FakeSignal::start_multi`]) requires `params.account` (-32602
//! otherwise, with signal-cli's texts) and filters the event stream by `?account=`.
//!
//! Faults: [`FakeSignal::drop_streams`] ends every open event stream; [`FakeSignal::refuse_for`]
//! closes the listening socket (connections are refused) for a while and then listens on the
//! same port again; [`FakeSignal::rate_limit_next_sends`] answers sends with
//! `RATE_LIMIT_FAILURE`.
//!
//! Invariants: all state is behind one `std::sync::Mutex` never held across an `.await`; every
//! change wakes `Shared::activity`.

mod methods;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

/// signal-cli's keep-alive interval on the event stream.
pub const SIGNAL_CLI_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A person on Signal, as the fake writes senders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignalPerson {
    pub number: String,
    pub uuid: String,
    pub name: String,
}

impl SignalPerson {
    /// A person with `number`, a uuid derived from it and `name`.
    pub fn new(number: &str, name: &str) -> SignalPerson {
        let digits: String = number.chars().filter(char::is_ascii_digit).collect();
        SignalPerson {
            number: number.to_string(),
            uuid: format!(
                "00000000-0000-4000-8000-{:0>12}",
                &digits[digits.len().saturating_sub(12)..]
            ),
            name: name.to_string(),
        }
    }
}

/// An attachment a `send` carried, decoded from its data URI (or the path signal-cli was given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentSignalAttachment {
    pub mime: String,
    pub file_name: Option<String>,
    pub bytes: Vec<u8>,
}

/// A `send` the fake accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentSignal {
    pub account: String,
    pub recipients: Vec<String>,
    pub group_id: Option<String>,
    pub text: String,
    pub attachments: Vec<SentSignalAttachment>,
    pub voice_note: bool,
    pub quote: Option<(i64, String)>,
    /// The timestamp the fake answered (the sent message's id).
    pub timestamp: i64,
}

/// Any JSON-RPC call, as received (after the account was resolved).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalCall {
    pub account: String,
    pub method: String,
    pub params: Value,
}

/// An open event stream.
struct StreamConnection {
    /// The account it carries, or every account.
    account: Option<String>,
    sender: mpsc::UnboundedSender<Bytes>,
}

#[derive(Default)]
struct State {
    accounts: Vec<String>,
    multi_account: bool,
    /// Messages not yet taken from "Signal's servers", per account.
    waiting: HashMap<String, VecDeque<Value>>,
    streams: Vec<StreamConnection>,
    stream_connects: u32,
    next_timestamp: i64,
    sent: Vec<SentSignal>,
    calls: Vec<SignalCall>,
    attachments: HashMap<String, Vec<u8>>,
    refuse_until: Option<Instant>,
    rate_limited_sends: u32,
    keep_alive: Option<Duration>,
}

struct Shared {
    state: Mutex<State>,
    activity: Notify,
    /// Wakes the accept loop when it must close its socket.
    refuse: Notify,
    /// Closes every open connection (a refusal models a daemon that is gone).
    cut_connections: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug in the fake; keep serving the tests' state.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The fake daemon. Dropping it stops the server and closes every connection.
pub struct FakeSignal {
    shared: Arc<Shared>,
    address: SocketAddr,
    shutdown: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl FakeSignal {
    /// A daemon started with `-a <account>`.
    ///
    /// # Panics
    /// When the machine has no usable loopback interface.
    pub async fn start(account: &str) -> FakeSignal {
        FakeSignal::launch(vec![account.to_string()], false).await
    }

    /// A daemon started without `-a`, serving every account in `accounts`.
    pub async fn start_multi(accounts: &[&str]) -> FakeSignal {
        FakeSignal::launch(accounts.iter().map(|a| a.to_string()).collect(), true).await
    }

    async fn launch(accounts: Vec<String>, multi_account: bool) -> FakeSignal {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap_or_else(|error| panic!("fake signal-cli: cannot listen on loopback: {error}"));
        let address = listener
            .local_addr()
            .unwrap_or_else(|error| panic!("fake signal-cli: no local address: {error}"));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                accounts,
                multi_account,
                next_timestamp: 1_700_000_000_000,
                keep_alive: Some(SIGNAL_CLI_KEEP_ALIVE),
                ..State::default()
            }),
            activity: Notify::new(),
            refuse: Notify::new(),
            cut_connections: Notify::new(),
        });
        let (shutdown, shutdown_watch) = watch::channel(false);
        let server = tokio::spawn(accept_loop(
            listener,
            address,
            Arc::clone(&shared),
            shutdown_watch,
        ));
        FakeSignal {
            shared,
            address,
            shutdown,
            server: Some(server),
        }
    }

    /// `http://127.0.0.1:<port>`: what `[signal] rpc_url` names.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The first (or only) account.
    pub fn account(&self) -> String {
        self.shared
            .lock()
            .accounts
            .first()
            .cloned()
            .unwrap_or_default()
    }

    /// Sets the keep-alive interval (`None`: none at all, a silent stream).
    pub fn set_keep_alive(&self, every: Option<Duration>) {
        self.shared.lock().keep_alive = every;
    }

    /// A direct text from `from` to the first account; returns its timestamp.
    pub fn push_text(&self, from: &SignalPerson, text: &str) -> i64 {
        let account = self.account();
        self.push_message(&account, from, json!({ "message": text }))
    }

    /// A group text from `from`; `mentions` (numbers) are written as Signal writes them: U+FFFC
    /// placeholders in front of the text, named in `mentions`.
    pub fn push_group_text(
        &self,
        from: &SignalPerson,
        group_id: &str,
        text: &str,
        mentions: &[&str],
    ) -> i64 {
        let mut body = String::new();
        let mut named = Vec::new();
        for number in mentions {
            let start = body.encode_utf16().count();
            body.push('\u{FFFC}');
            body.push(' ');
            let person = SignalPerson::new(number, "");
            named.push(json!({"name": number, "number": number, "uuid": person.uuid, "start": start, "length": 1}));
        }
        body.push_str(text);
        let mut data = json!({
            "message": body,
            "groupInfo": {"groupId": group_id, "groupName": "Group", "revision": 1, "type": "DELIVER"}
        });
        if !named.is_empty() {
            data["mentions"] = Value::Array(named);
        }
        let account = self.account();
        self.push_message(&account, from, data)
    }

    /// A voice note (`audio/aac`, no file name) whose bytes `getAttachment` serves; returns
    /// (timestamp, attachment id).
    pub fn push_voice_note(&self, from: &SignalPerson, audio: &[u8]) -> (i64, String) {
        let id = format!("voice-{}.aac", self.shared.lock().next_timestamp);
        self.shared
            .lock()
            .attachments
            .insert(id.clone(), audio.to_vec());
        let data = json!({"attachments": [{
            "contentType": "audio/aac", "filename": null, "id": id, "size": audio.len(),
            "width": null, "height": null, "caption": null, "uploadTimestamp": 1
        }]});
        let account = self.account();
        (self.push_message(&account, from, data), id)
    }

    /// A data message with `data_message`'s fields (timestamp added) from `from` to `account`.
    pub fn push_message(&self, account: &str, from: &SignalPerson, data_message: Value) -> i64 {
        let timestamp = {
            let mut state = self.shared.lock();
            state.next_timestamp += 1;
            state.next_timestamp
        };
        let mut data = json!({"timestamp": timestamp, "expiresInSeconds": 0, "viewOnce": false});
        if let (Value::Object(target), Value::Object(fields)) = (&mut data, data_message) {
            target.extend(fields);
        }
        let envelope = json!({
            "source": from.number, "sourceNumber": from.number, "sourceUuid": from.uuid,
            "sourceName": from.name, "sourceDevice": 1, "timestamp": timestamp,
            "serverReceivedTimestamp": timestamp + 5, "serverDeliveredTimestamp": timestamp + 9,
            "dataMessage": data
        });
        self.push_envelope(account, envelope);
        timestamp
    }

    /// Any envelope (typing, receipts, …) for `account`.
    pub fn push_envelope(&self, account: &str, envelope: Value) {
        let object = json!({"account": account, "envelope": envelope});
        let mut state = self.shared.lock();
        deliver(&mut state, account, object);
        drop(state);
        self.shared.activity.notify_waiters();
    }

    /// Writes `bytes` as they are into every open event stream (malformed-input tests).
    pub fn push_raw_stream_bytes(&self, bytes: &[u8]) {
        let state = self.shared.lock();
        for stream in &state.streams {
            let _ = stream.sender.send(Bytes::copy_from_slice(bytes));
        }
    }

    /// Ends every open event stream (the client sees the stream close).
    pub fn drop_streams(&self) {
        self.shared.lock().streams.clear();
        self.shared.activity.notify_waiters();
    }

    /// Ends every stream and refuses connections for `duration`, then listens again.
    pub fn refuse_for(&self, duration: Duration) {
        {
            let mut state = self.shared.lock();
            state.streams.clear();
            state.refuse_until = Some(Instant::now() + duration);
        }
        self.shared.refuse.notify_one();
        self.shared.cut_connections.notify_waiters();
        self.shared.activity.notify_waiters();
    }

    /// The next `count` sends fail with `RATE_LIMIT_FAILURE` (retry after 3 s).
    pub fn rate_limit_next_sends(&self, count: u32) {
        self.shared.lock().rate_limited_sends = count;
    }

    /// Event streams open now.
    pub fn open_streams(&self) -> usize {
        let mut state = self.shared.lock();
        state.streams.retain(|stream| !stream.sender.is_closed());
        state.streams.len()
    }

    /// Event streams opened since the start.
    pub fn stream_connects(&self) -> u32 {
        self.shared.lock().stream_connects
    }

    /// Messages waiting for `account` (not yet taken by a stream or `receive`).
    pub fn waiting(&self, account: &str) -> usize {
        self.shared
            .lock()
            .waiting
            .get(account)
            .map_or(0, VecDeque::len)
    }

    /// Every accepted `send`, in order.
    pub fn sent(&self) -> Vec<SentSignal> {
        self.shared.lock().sent.clone()
    }

    /// Every JSON-RPC call, in order.
    pub fn calls(&self) -> Vec<SignalCall> {
        self.shared.lock().calls.clone()
    }

    /// Makes `bytes` available to `getAttachment` as `id`.
    pub fn register_attachment(&self, id: &str, bytes: &[u8]) {
        self.shared
            .lock()
            .attachments
            .insert(id.to_string(), bytes.to_vec());
    }
}

impl Drop for FakeSignal {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

/// Writes `object` to an open stream for `account`, or keeps it waiting.
fn deliver(state: &mut State, account: &str, object: Value) {
    state.streams.retain(|stream| !stream.sender.is_closed());
    let line = Bytes::from(format!("event:receive\ndata:{object}\n\n"));
    let open = state.streams.iter().find(|stream| {
        stream
            .account
            .as_deref()
            .is_none_or(|wanted| wanted == account)
    });
    match open {
        Some(stream) if stream.sender.send(line).is_ok() => {}
        _ => state
            .waiting
            .entry(account.to_string())
            .or_default()
            .push_back(object),
    }
}

/// Listens until shutdown; while refusing, the socket is closed (connections are refused).
async fn accept_loop(
    mut listener: TcpListener,
    address: SocketAddr,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            () = shared.refuse.notified() => {
                drop(listener);
                let until = shared.lock().refuse_until.unwrap_or_else(Instant::now);
                tokio::time::sleep_until(until.into()).await;
                listener = match rebind(address).await {
                    Some(listener) => listener,
                    None => break,
                };
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(stream, Arc::clone(&shared), shutdown.clone()));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

/// Listens on the same port again (the port was just released by us).
async fn rebind(address: SocketAddr) -> Option<TcpListener> {
    for _ in 0..200 {
        if let Ok(listener) = TcpListener::bind(address).await {
            return Some(listener);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

async fn serve_connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let cut = Arc::clone(&shared);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let shared = Arc::clone(&shared);
        async move { Ok::<Response, Infallible>(handle(shared, request.map(Body::new)).await) }
    });
    let connection =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = connection => {}
        () = cut.cut_connections.notified() => {}
        _ = shutdown.changed() => {}
    }
}

fn status(code: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = code;
    response
}

fn loopback_host(request: &Request<Body>) -> bool {
    let host = request
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
    matches!(name, "127.0.0.1" | "localhost" | "[::1]")
}

async fn handle(shared: Arc<Shared>, request: Request<Body>) -> Response {
    if !loopback_host(&request) {
        return status(StatusCode::MISDIRECTED_REQUEST);
    }
    let path = request.uri().path().to_string();
    let method = request.method().clone();
    match (path.as_str(), method.as_str()) {
        ("/api/v1/check", "GET") => status(StatusCode::OK),
        ("/api/v1/events", "GET") => open_stream(&shared, request.uri().query()),
        ("/api/v1/rpc", "POST") => methods::answer(shared, request).await,
        ("/api/v1/check" | "/api/v1/events" | "/api/v1/rpc", _) => {
            status(StatusCode::METHOD_NOT_ALLOWED)
        }
        _ => status(StatusCode::NOT_FOUND),
    }
}

/// Opens an event stream: what waited for its account(s) is written first.
fn open_stream(shared: &Arc<Shared>, query: Option<&str>) -> Response {
    let wanted = query.and_then(|query| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == "account")
            .map(|(_, value)| value.into_owned())
            .filter(|value| !value.is_empty())
    });
    let (sender, receiver) = mpsc::unbounded_channel::<Bytes>();
    let keep_alive = {
        let mut state = shared.lock();
        if let Some(account) = &wanted
            && state.multi_account
            && !state.accounts.contains(account)
        {
            return status(StatusCode::BAD_REQUEST);
        }
        let account = if state.multi_account { wanted } else { None };
        let accounts: Vec<String> = state.accounts.clone();
        for each in accounts {
            if account.as_deref().is_some_and(|wanted| wanted != each) {
                continue;
            }
            for object in state.waiting.remove(&each).unwrap_or_default() {
                let _ = sender.send(Bytes::from(format!("event:receive\ndata:{object}\n\n")));
            }
        }
        state.streams.push(StreamConnection { account, sender });
        state.stream_connects += 1;
        state.keep_alive
    };
    shared.activity.notify_waiters();
    let body = futures::stream::unfold(receiver, move |mut receiver| async move {
        let next = match keep_alive {
            Some(every) => match tokio::time::timeout(every, receiver.recv()).await {
                Ok(next) => next,
                Err(_) => Some(Bytes::from_static(b":\n")),
            },
            None => receiver.recv().await,
        };
        next.map(|bytes| (Ok::<Bytes, Infallible>(bytes), receiver))
    });
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/event-stream"),
    );
    response
}

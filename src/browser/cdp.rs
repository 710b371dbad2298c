//! The Chrome DevTools Protocol over Chromium's debugging pipe (`--remote-debugging-pipe`):
//! JSON messages separated by a NUL byte, Chromium reading on its descriptor 3 and writing on 4.
//!
//! A pipe rather than a DevTools port: a port on loopback gives whoever connects to it the whole
//! browser (its cookies, script in every page), and any local process could; the pipe's two ends
//! are held by the daemon and Chromium only.
//!
//! [`Cdp`] sends commands (`call`, one reply per id, bounded by a timeout) and hands out the
//! events Chromium sends (`subscribe`). Invariant: when the pipe closes (Chromium exited or
//! crashed), every waiting call and every later one fails at once with [`CdpError::Closed`]; no
//! call waits longer than its timeout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Largest message read from Chromium (a full-page screenshot or a PDF, base64-encoded).
pub const MAX_MESSAGE_BYTES: usize = 96 * 1024 * 1024;

/// Why a DevTools call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CdpError {
    #[error("Chromium is no longer running (its DevTools pipe closed)")]
    Closed,
    #[error("Chromium did not answer {method} within {seconds} s")]
    Timeout { method: String, seconds: u64 },
    #[error("Chromium refused {method}: {message}")]
    Protocol { method: String, message: String },
}

/// One event from Chromium (`Page.loadEventFired`, `Browser.downloadProgress`).
#[derive(Debug, Clone)]
pub struct CdpEvent {
    pub method: String,
    pub params: Value,
    /// The page session it belongs to; `None` for the browser's own events.
    pub session: Option<String>,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, CdpError>>>>>;

/// Events of one method handed to one receiver in full (never dropped like a lagging
/// broadcast subscriber's): `Fetch.requestPaused`, where a lost event would stall the page.
type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<CdpEvent>>>>;

/// A connection to one Chromium. Cheap to clone.
#[derive(Clone)]
pub struct Cdp {
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    pending: Pending,
    next_id: Arc<AtomicU64>,
    events: broadcast::Sender<CdpEvent>,
    routes: Routes,
    closed: CancellationToken,
}

impl Cdp {
    /// Starts the reader and writer tasks over the two pipe ends.
    pub fn start(to_browser: pipe::Sender, from_browser: pipe::Receiver) -> Cdp {
        let (outgoing, queue) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let (events, _) = broadcast::channel(1024);
        let closed = CancellationToken::new();
        let routes: Routes = Arc::default();
        tokio::spawn(write_loop(to_browser, queue, closed.clone()));
        tokio::spawn(read_loop(
            from_browser,
            pending.clone(),
            (events.clone(), routes.clone()),
            closed.clone(),
        ));
        Cdp {
            outgoing,
            pending,
            next_id: Arc::new(AtomicU64::new(1)),
            events,
            routes,
            closed,
        }
    }

    /// Every later event named `method` goes to the returned receiver only (not to
    /// `subscribe`rs), none lost; the receiver ends when the pipe closes.
    pub fn route(&self, method: &str) -> mpsc::UnboundedReceiver<CdpEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        lock_routes(&self.routes).insert(method.to_string(), sender);
        receiver
    }

    /// Whether the pipe has closed (Chromium is gone).
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves when the pipe closes.
    pub async fn closed(&self) {
        self.closed.cancelled().await
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<CdpEvent> {
        self.events.subscribe()
    }

    /// Sends `method` (to the page `session`, or the browser) and waits for its result.
    pub async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, CdpError> {
        if self.is_closed() {
            return Err(CdpError::Closed);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = Value::String(session.to_string());
        }
        let (answer, answered) = oneshot::channel();
        lock(&self.pending).insert(id, answer);
        if self
            .outgoing
            .send(message.to_string().into_bytes())
            .is_err()
        {
            lock(&self.pending).remove(&id);
            return Err(CdpError::Closed);
        }
        let outcome = tokio::select! {
            result = tokio::time::timeout(timeout, answered) => match result {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(CdpError::Closed),
                Err(_) => Err(CdpError::Timeout { method: method.to_string(), seconds: timeout.as_secs().max(1) }),
            },
            () = self.closed.cancelled() => Err(CdpError::Closed),
        };
        lock(&self.pending).remove(&id);
        outcome.map_err(|error| match error {
            CdpError::Protocol { message, .. } => CdpError::Protocol {
                method: method.to_string(),
                message,
            },
            other => other,
        })
    }
}

/// Locks `pending`; a poisoned lock only means a task panicked holding it, the map is intact.
fn lock(
    pending: &Pending,
) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Value, CdpError>>>> {
    pending.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Locks `routes`; poisoning leaves the map intact, as for `pending`.
fn lock_routes(
    routes: &Routes,
) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<CdpEvent>>> {
    routes.lock().unwrap_or_else(|poison| poison.into_inner())
}

async fn write_loop(
    mut to_browser: pipe::Sender,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    closed: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            message = queue.recv() => message,
            () = closed.cancelled() => None,
        };
        let Some(mut message) = message else {
            return;
        };
        message.push(0);
        if to_browser.write_all(&message).await.is_err() {
            closed.cancel();
            return;
        }
    }
}

async fn read_loop(
    from_browser: pipe::Receiver,
    pending: Pending,
    (events, routes): (broadcast::Sender<CdpEvent>, Routes),
    closed: CancellationToken,
) {
    let mut reader = BufReader::with_capacity(256 * 1024, from_browser);
    let mut buffer = Vec::new();
    loop {
        buffer.clear();
        let read = (&mut reader)
            .take(MAX_MESSAGE_BYTES as u64)
            .read_until(0, &mut buffer)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) if buffer.last() != Some(&0) => {
                tracing::warn!(
                    "a DevTools message from Chromium was larger than {MAX_MESSAGE_BYTES} bytes or cut off; closing the browser"
                );
                break;
            }
            Ok(_) => {}
        }
        buffer.pop();
        let Ok(message) = serde_json::from_slice::<Value>(&buffer) else {
            continue;
        };
        dispatch(message, &pending, &events, &routes);
    }
    closed.cancel();
    lock_routes(&routes).clear();
    for (_, answer) in lock(&pending).drain() {
        let _ = answer.send(Err(CdpError::Closed));
    }
}

/// Hands a reply to its caller, or an event to the subscribers.
fn dispatch(
    message: Value,
    pending: &Pending,
    events: &broadcast::Sender<CdpEvent>,
    routes: &Routes,
) {
    if let Some(id) = message.get("id").and_then(Value::as_u64) {
        let Some(answer) = lock(pending).remove(&id) else {
            return;
        };
        let result = match message.get("error") {
            Some(error) => Err(CdpError::Protocol {
                method: String::new(),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error")
                    .to_string(),
            }),
            None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = answer.send(result);
        return;
    }
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        let event = CdpEvent {
            method: method.to_string(),
            params: message.get("params").cloned().unwrap_or(Value::Null),
            session: message
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        if let Some(route) = lock_routes(routes).get(method) {
            let _ = route.send(event);
            return;
        }
        let _ = events.send(event);
    }
}

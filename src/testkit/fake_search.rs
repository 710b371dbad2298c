//! A search backend on `127.0.0.1:0` speaking both SearXNG's JSON API (`GET /search?q=…&format=json`)
//! and the Brave Search API (`GET /res/v1/web/search?q=…&count=…` with `X-Subscription-Token`),
//! in their real answer shapes, so that the real `web_search` tool can be tested end to end.
//!
//! Every query answers the results set with [`FakeSearch::set_results`] (else three made-up
//! results naming the query). Faults for the next request: an HTTP status (429 with
//! `Retry-After`, 403, 500), a body that is not JSON, or a stall longer than the tool's timeout.
//! SearXNG answers 403 unless `format=json` is asked for, as a default SearXNG install does; Brave
//! answers 401 without the right token. Every request is recorded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::tools::web_search::SearchResult;

/// The Brave token the fake accepts.
pub const BRAVE_TOKEN: &str = "fake-brave-subscription-token";

/// What the next request gets instead of results.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchFault {
    Status {
        status: u16,
        retry_after_secs: Option<u64>,
    },
    NotJson,
    Stall(Duration),
}

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// `searxng` or `brave`.
    pub api: &'static str,
    pub query: String,
    pub count: Option<String>,
    pub format: Option<String>,
    pub token: Option<String>,
}

#[derive(Default)]
struct FakeState {
    results: Option<Vec<SearchResult>>,
    faults: Vec<SearchFault>,
    requests: Vec<SearchRequest>,
}

type Shared = Arc<Mutex<FakeState>>;

fn lock(shared: &Shared) -> MutexGuard<'_, FakeState> {
    shared.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// A running fake; stops when dropped or [`FakeSearch::stop`]ped.
pub struct FakeSearch {
    address: SocketAddr,
    shared: Shared,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl FakeSearch {
    pub async fn start() -> std::io::Result<FakeSearch> {
        let shared: Shared = Arc::default();
        let app = Router::new()
            .route("/search", get(searxng))
            .route("/res/v1/web/search", get(brave))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (shutdown, signal) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serving = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = signal.await;
            });
            if let Err(error) = serving.await {
                tracing::warn!(%error, "fake search server stopped with an error");
            }
        });
        Ok(FakeSearch {
            address,
            shared,
            shutdown: Some(shutdown),
            server: Some(server),
        })
    }

    /// `http://127.0.0.1:<port>`: the SearXNG `url`, or the Brave `url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The results every query answers from now on.
    pub fn set_results(&self, results: Vec<SearchResult>) {
        lock(&self.shared).results = Some(results);
    }

    /// The next request gets `fault` (queued faults are used in order).
    pub fn fail_next(&self, fault: SearchFault) {
        lock(&self.shared).faults.push(fault);
    }

    pub fn requests(&self) -> Vec<SearchRequest> {
        lock(&self.shared).requests.clone()
    }

    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for FakeSearch {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

type Params = Query<std::collections::BTreeMap<String, String>>;

/// Records the request and takes its fault, if any; the results it would answer otherwise.
fn take(shared: &Shared, request: SearchRequest) -> (Option<SearchFault>, Vec<SearchResult>) {
    let mut state = lock(shared);
    let query = request.query.clone();
    state.requests.push(request);
    let fault = (!state.faults.is_empty()).then(|| state.faults.remove(0));
    let results = state.results.clone().unwrap_or_else(|| {
        (1..=3)
            .map(|n| SearchResult {
                title: format!("Result {n} about {query}"),
                url: format!("https://example.org/{n}"),
                snippet: format!("Snippet {n}: <b>{query}</b> explained."),
            })
            .collect()
    });
    (fault, results)
}

/// The fault's answer, after its stall.
async fn faulted(fault: SearchFault) -> Response {
    match fault {
        SearchFault::Status {
            status,
            retry_after_secs,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = (status, "{\"error\":\"fault\"}").into_response();
            if let Some(secs) = retry_after_secs
                && let Ok(value) = secs.to_string().parse()
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        SearchFault::NotJson => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/html")],
            "<html><body>502 Bad Gateway (nginx)</body></html>",
        )
            .into_response(),
        SearchFault::Stall(duration) => {
            tokio::time::sleep(duration).await;
            (StatusCode::OK, "{}").into_response()
        }
    }
}

async fn searxng(State(shared): State<Shared>, Query(params): Params) -> Response {
    let request = SearchRequest {
        api: "searxng",
        query: params.get("q").cloned().unwrap_or_default(),
        count: None,
        format: params.get("format").cloned(),
        token: None,
    };
    let json_asked = request.format.as_deref() == Some("json");
    let (fault, results) = take(&shared, request.clone());
    if let Some(fault) = fault {
        return faulted(fault).await;
    }
    if !json_asked {
        return (StatusCode::FORBIDDEN, "Forbidden").into_response();
    }
    let results: Vec<_> = results
        .iter()
        .map(|result| {
            json!({
                "url": result.url,
                "title": result.title,
                "content": result.snippet,
                "engine": "duckduckgo",
                "engines": ["duckduckgo"],
                "score": 1.0,
                "category": "general",
            })
        })
        .collect();
    axum::Json(json!({
        "query": request.query,
        "number_of_results": results.len(),
        "results": results,
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }))
    .into_response()
}

async fn brave(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Query(params): Params,
) -> Response {
    let token = headers
        .get("x-subscription-token")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let request = SearchRequest {
        api: "brave",
        query: params.get("q").cloned().unwrap_or_default(),
        count: params.get("count").cloned(),
        format: None,
        token: token.clone(),
    };
    let (fault, results) = take(&shared, request.clone());
    if let Some(fault) = fault {
        return faulted(fault).await;
    }
    if token.as_deref() != Some(BRAVE_TOKEN) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "status": 401}})),
        )
            .into_response();
    }
    let count: usize = request
        .count
        .as_deref()
        .and_then(|count| count.parse().ok())
        .unwrap_or(20);
    let results: Vec<_> = results
        .iter()
        .take(count)
        .map(|result| {
            json!({
                "type": "search_result",
                "title": result.title,
                "url": result.url,
                "description": result.snippet,
                "is_source_local": false,
                "language": "en",
            })
        })
        .collect();
    axum::Json(json!({
        "type": "search",
        "query": {"original": request.query, "more_results_available": true},
        "web": {"type": "search", "results": results, "family_friendly": true},
    }))
    .into_response()
}

//! Studio: the web console, its JSON API, and the health endpoints, served by axum.
//!
//! [`router`] lists every route. Handlers read through the [`Store`] (read-only connections) and
//! act through actors by message; none holds another actor's state.
//!
//! Architecture Invariant: only `studio` speaks JSON to browsers.

pub mod access;
pub mod approvals;
pub mod gateway;
pub mod handoffs;
pub mod memory;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::actors::events::{EventsMsg, TreeSnapshot};
use crate::events::EventBus;
use crate::registry::{Registry, names};
use crate::store::Store;

/// What every handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct StudioState {
    pub registry: Registry,
    pub store: Store,
    pub events: EventBus,
    /// Actor ids that must have started (or failed visibly) before `/readyz` says ready:
    /// every configured bot and MCP link.
    pub expect_ready: Arc<Vec<String>>,
    /// Host names and the access token the API guard checks.
    pub access: Arc<access::Access>,
}

pub fn router(state: StudioState) -> Router {
    let api = Router::new()
        .route("/v1/chat/completions", post(gateway::chat_completions))
        .route("/api/v1/approvals", get(approvals::list_approvals))
        .route("/api/v1/approvals/{id}/decision", post(approvals::decide))
        .route("/api/v1/grants", get(approvals::list_grants))
        .route("/api/v1/grants/{id}/revoke", post(approvals::revoke_grant))
        .route(
            "/api/v1/policy/rules",
            get(approvals::list_rules).post(approvals::add_rule),
        )
        .route(
            "/api/v1/policy/rules/{id}/disable",
            post(approvals::disable_rule),
        )
        .route("/api/v1/handoffs", get(handoffs::list))
        .route("/api/v1/handoffs/{id}", get(handoffs::detail))
        .route("/api/v1/handoffs/{id}/cancel", post(handoffs::cancel))
        .route("/api/v1/memory", get(memory::review))
        .route("/api/v1/memory/stats", get(memory::stats))
        .route("/api/v1/memory/search", get(memory::search))
        .route("/api/v1/memory/{id}/{operation}", post(memory::govern))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::guard,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(api)
        .with_state(state)
}

async fn snapshot(state: &StudioState) -> Option<TreeSnapshot> {
    let events = state.registry.lookup::<EventsMsg>(names::EVENTS)?;
    ractor::call_t!(events, EventsMsg::Snapshot, 1_000).ok()
}

/// 200 once the tree is up and the database writer is alive.
async fn healthz(State(state): State<StudioState>) -> Response {
    if !state.store.writer_alive() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "database writer is not running\n",
        )
            .into_response();
    }
    match snapshot(&state).await {
        Some(snapshot) if snapshot.boot_complete => (StatusCode::OK, "ok\n").into_response(),
        Some(_) => (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "events actor not reachable\n",
        )
            .into_response(),
    }
}

/// 200 once every configured bot and MCP link has started or failed visibly.
async fn readyz(State(state): State<StudioState>) -> Response {
    let Some(snapshot) = snapshot(&state).await else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "events actor not reachable\n",
        )
            .into_response();
    };
    if !snapshot.boot_complete || !state.store.writer_alive() {
        return (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response();
    }
    let waiting: Vec<&str> = state
        .expect_ready
        .iter()
        .filter(|id| {
            !snapshot
                .actors
                .iter()
                .any(|actor| &actor.id == *id && actor.status != "starting")
        })
        .map(String::as_str)
        .collect();
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("waiting for: {}\n", waiting.join(", ")),
        )
            .into_response()
    }
}

/// How long an in-flight request may take to finish when Studio stops.
pub const GRACEFUL_STOP: Duration = Duration::from_secs(3);

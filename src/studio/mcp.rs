//! MCP server links: `GET /api/v1/mcp` (each server's state, latency, restarts, last error,
//! trust and the tools it publishes), asked of the MCP supervisor.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::{ApiError, StudioState};

/// `GET /api/v1/mcp`
pub async fn servers(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let servers = super::overview::mcp_health(&state).await;
    Ok(Json(json!({
        "servers": servers.iter().map(|server| json!({
            "server": server.server, "transport": server.transport, "trust": server.trust,
            "state": server.state, "last_error": server.last_error, "restarts": server.restarts,
            "last_latency_ms": server.last_latency_ms, "tools": server.tools,
        })).collect::<Vec<_>>(),
    })))
}

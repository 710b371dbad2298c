//! The audit log: `/api/v1/audit`, `/api/v1/audit/verify` (spending is `costs.rs`).

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, StudioState};
use crate::audit::{self, Verification};

#[derive(Deserialize)]
pub struct EntriesQuery {
    before: Option<i64>,
    limit: Option<u32>,
}

/// `GET /api/v1/audit?before=ID&limit=100`: newest first.
pub async fn entries(
    State(state): State<StudioState>,
    Query(query): Query<EntriesQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = query.limit.unwrap_or(100).clamp(1, 1_000);
    let before = query.before;
    let rows = state
        .store
        .read(move |conn| audit::entries(conn, before, limit))
        .await?;
    let next_before = (rows.len() == limit as usize)
        .then(|| rows.last().map(|row| row.id))
        .flatten();
    Ok(Json(json!({
        "entries": rows.iter().map(|row| json!({
            "id": row.id, "at_ms": row.at_ms, "actor": row.actor, "action": row.action,
            "subject": row.subject,
            "details": serde_json::from_str::<Value>(&row.details).unwrap_or_else(|_| Value::String(row.details.clone())),
            "hash": row.hash,
        })).collect::<Vec<_>>(),
        "next_before": next_before,
    })))
}

/// `GET /api/v1/audit/verify`: walks the whole hash chain.
pub async fn verify(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let verification = state.store.read(|conn| audit::verify(conn, None)).await?;
    Ok(Json(match verification {
        Verification::Valid { rows } => json!({"ok": true, "entries": rows, "problem": null}),
        Verification::Broken { row, reason } => json!({
            "ok": false, "entries": null,
            "problem": format!("entry {row}: {reason}. The log was changed outside the daemon; keep a copy of the database and compare it with `clawvisor audit export`."),
        }),
    }))
}

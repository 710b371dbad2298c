//! Handoff contracts: `/api/v1/handoffs` (list), `/api/v1/handoffs/{id}` (detail with its
//! timeline), `/api/v1/handoffs/{id}/cancel`. Reads from the store; cancel through the
//! HandoffSupervisor.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::ApiError;
use super::StudioState;
use super::openapi::{array, boolean, integer, nullable, object, string};
use crate::protocol::handoff::{HandoffError, Handoffs};
use crate::store::handoff::{self as queries, ContractRow};

fn contract_json(row: &ContractRow) -> Value {
    json!({
        "id": row.id, "owner": row.owner, "owner_chat": row.owner_chat, "delegate": row.delegate,
        "subtask": row.subtask, "expected": row.expected, "validator": row.validator,
        "deadline_ms": row.deadline_ms, "status": row.status.as_str(), "attempts": row.attempts,
        "result": row.result, "reason": row.reason, "created_ms": row.created_ms,
        "updated_ms": row.updated_ms, "delivered_ms": row.delivered_ms,
    })
}

/// A contract as [`contract_json`] shows it.
fn contract_schema() -> Value {
    object([
        ("id", string()),
        ("owner", string()),
        ("owner_chat", string()),
        ("delegate", string()),
        ("subtask", string()),
        ("expected", string()),
        ("validator", nullable(string())),
        ("deadline_ms", integer()),
        ("status", string()),
        ("attempts", integer()),
        ("result", nullable(string())),
        ("reason", nullable(string())),
        ("created_ms", integer()),
        ("updated_ms", integer()),
        ("delivered_ms", nullable(integer())),
    ])
}

/// `GET /api/v1/handoffs`: the newest contracts.
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let rows = state.store.read(|conn| queries::list(conn, 200)).await?;
    Ok(Json(
        json!({"handoffs": rows.iter().map(contract_json).collect::<Vec<_>>()}),
    ))
}

/// What `GET /api/v1/handoffs` answers.
pub fn list_schema() -> Value {
    object([("handoffs", array(contract_schema()))])
}

/// `GET /api/v1/handoffs/{id}`: one contract and its timeline.
pub async fn detail(
    State(state): State<StudioState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let lookup = id.clone();
    let (row, timeline) = state
        .store
        .read(move |conn| {
            Ok((
                queries::get(conn, &lookup)?,
                queries::timeline_of(conn, &lookup)?,
            ))
        })
        .await?;
    let row = row.ok_or_else(|| ApiError::not_found(format!("no contract {id}")))?;
    Ok(Json(json!({
        "contract": contract_json(&row),
        "timeline": timeline.iter().map(|(at_ms, kind, detail)| json!({"at_ms": at_ms, "kind": kind, "detail": detail})).collect::<Vec<_>>(),
    })))
}

/// What `GET /api/v1/handoffs/{id}` answers.
pub fn detail_schema() -> Value {
    let moment = object([
        ("at_ms", integer()),
        ("kind", string()),
        ("detail", string()),
    ]);
    object([("contract", contract_schema()), ("timeline", array(moment))])
}

/// `POST /api/v1/handoffs/{id}/cancel`
pub async fn cancel(
    State(state): State<StudioState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Handoffs::new(&state.registry)
        .cancel(&id, "operator (studio)")
        .await
        .map_err(|error| match error {
            HandoffError::Unavailable(_) => ApiError::unavailable("delegation"),
            HandoffError::Refused(reason) => ApiError::not_found(reason),
        })?;
    Ok(Json(json!({"id": id, "cancelled": true})))
}

/// What `POST /api/v1/handoffs/{id}/cancel` answers.
pub fn cancel_schema() -> Value {
    object([("id", string()), ("cancelled", boolean())])
}

//! Runs and their steps, and the policy decisions recorded in them: `/api/v1/runs`,
//! `/api/v1/policy/decisions`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, StudioState};
use crate::store::runs::{self as queries, RunRow, StepRow};
use crate::store::studio as studio_queries;

const STATUSES: &[&str] = &[
    "running",
    "waiting_approval",
    "succeeded",
    "failed",
    "cancelled",
    "interrupted",
    "budget_stopped",
];

fn run_json(row: &RunRow, skills: &[String]) -> Value {
    json!({
        "id": row.id, "agent": row.agent, "chat": row.chat, "status": row.status.as_str(),
        "trigger": row.trigger, "started_ms": row.started_ms, "finished_ms": row.finished_ms,
        "duration_ms": row.finished_ms.map(|end| end - row.started_ms), "model": row.model,
        "input_tokens": row.input_tokens, "output_tokens": row.output_tokens,
        "cost_usd": row.cost_usd, "unpriced": row.unpriced, "turns": row.turns, "outcome": row.outcome,
        "session_id": row.session_id, "skills": skills,
    })
}

fn step_json(step: &StepRow) -> Value {
    json!({
        "seq": step.seq, "kind": step.kind, "name": step.name,
        "detail": serde_json::from_str::<Value>(&step.detail).unwrap_or_else(|_| Value::String(step.detail.clone())),
        "tokens_in": step.tokens_in, "tokens_out": step.tokens_out, "cost_usd": step.cost_usd,
        "duration_ms": step.duration_ms, "created_ms": step.created_ms,
    })
}

#[derive(Deserialize)]
pub struct ListQuery {
    agent: Option<String>,
    status: Option<String>,
    before: Option<i64>,
    limit: Option<u32>,
}

/// `GET /api/v1/runs?agent=&status=&before=ID&limit=50`: newest first, paged by id.
pub async fn list(
    State(state): State<StudioState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let status = super::status_filter(query.status, STATUSES)?;
    let agent = query.agent.filter(|agent| !agent.is_empty());
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let before = query.before;
    let (rows, used) = state
        .store
        .read(move |conn| {
            let rows = queries::list(conn, agent.as_deref(), status.as_deref(), before, limit)?;
            let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
            Ok((rows, queries::skills_used(conn, &ids)?))
        })
        .await?;
    let mut skills: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (run_id, skill) in used {
        skills.entry(run_id).or_default().push(skill);
    }
    let next_before = (rows.len() == limit as usize)
        .then(|| rows.last().map(|row| row.id))
        .flatten();
    Ok(Json(json!({
        "runs": rows.iter().map(|row| run_json(row, skills.get(&row.id).map_or(&[], Vec::as_slice))).collect::<Vec<_>>(),
        "next_before": next_before,
    })))
}

/// `GET /api/v1/runs/{id}`: the run with every step.
pub async fn detail(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let (row, steps, used) = state
        .store
        .read(move |conn| {
            let Some(row) = queries::get(conn, id)? else {
                return Ok(None);
            };
            Ok(Some((
                row,
                queries::steps(conn, id)?,
                queries::skills_used(conn, &[id])?,
            )))
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no run {id}")))?;
    let skills: Vec<String> = used.into_iter().map(|(_, skill)| skill).collect();
    let mut body = run_json(&row, &skills);
    body["steps"] = steps.iter().map(step_json).collect();
    Ok(Json(body))
}

#[derive(Deserialize)]
pub struct DecisionsQuery {
    limit: Option<u32>,
}

/// `GET /api/v1/policy/decisions?limit=50`: the gate's newest decisions, across runs.
pub async fn decisions(
    State(state): State<StudioState>,
    Query(query): Query<DecisionsQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let rows = state
        .store
        .read(move |conn| studio_queries::decisions(conn, limit))
        .await?;
    let decisions: Vec<Value> = rows
        .iter()
        .map(|row| {
            let detail: Value = serde_json::from_str(&row.detail).unwrap_or(Value::Null);
            let envelope = &detail["envelope"];
            json!({
                "run_id": row.run_id, "agent": row.agent, "at_ms": row.at_ms, "tool": row.tool,
                "action": detail["action"], "decision": envelope["decision"],
                "risk": envelope["risk"], "reason": envelope["reason"], "source": envelope["source"],
            })
        })
        .collect();
    Ok(Json(json!({"decisions": decisions})))
}

//! The audit log and spending: `/api/v1/audit`, `/api/v1/audit/verify`, `/api/v1/costs`.

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, StudioState};
use crate::audit::{self, Verification};
use crate::store::studio::{self as queries, CostGroup, CostLine};

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

#[derive(Deserialize)]
pub struct CostsQuery {
    days: Option<u32>,
}

fn line_json(line: &CostLine, key: &str) -> Value {
    json!({
        key: line.key, "cost_usd": line.cost_usd,
        "input_tokens": line.input_tokens, "output_tokens": line.output_tokens,
    })
}

/// `GET /api/v1/costs?days=30`: spending by day, by agent and by model.
pub async fn costs(
    State(state): State<StudioState>,
    Query(query): Query<CostsQuery>,
) -> Result<Json<Value>, ApiError> {
    let days = query.days.unwrap_or(30).clamp(1, 366);
    let now = crate::clock::now_ms();
    let since = crate::store::runs::day_of(now - i64::from(days - 1) * 86_400_000);
    let today = crate::store::runs::day_of(now);
    let (by_day, by_agent, by_model) = state
        .store
        .read(move |conn| {
            Ok((
                queries::costs(conn, &since, CostGroup::Day)?,
                queries::costs(conn, &since, CostGroup::Agent)?,
                queries::costs(conn, &since, CostGroup::Model)?,
            ))
        })
        .await?;
    let today_usd: f64 = by_day
        .iter()
        .filter(|line| line.key == today)
        .map(|line| line.cost_usd)
        .sum();
    let total_usd: f64 = by_day.iter().map(|line| line.cost_usd).sum();
    Ok(Json(json!({
        "days": days,
        "today_usd": today_usd,
        "total_usd": total_usd,
        "by_day": by_day.iter().map(|line| line_json(line, "day")).collect::<Vec<_>>(),
        "by_agent": by_agent.iter().map(|line| line_json(line, "agent")).collect::<Vec<_>>(),
        "by_model": by_model.iter().map(|line| {
            let mut value = line_json(line, "model");
            if let Some((provider, model)) = line.key.split_once('/') {
                value["provider"] = json!(provider);
                value["model"] = json!(model);
            }
            value
        }).collect::<Vec<_>>(),
    })))
}

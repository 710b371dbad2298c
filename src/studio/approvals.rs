//! The approvals inbox, scoped grants and policy rules: `/api/v1/approvals`, `/api/v1/grants`,
//! `/api/v1/policy/rules`.
//!
//! Reads go to the store; every change goes to the approval desk through its handle, which stores it
//! with its audit row before answering. The operator decides as `operator (studio)`.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, StudioState};
use crate::protocol::approvals::{
    Approvals, ApprovalsError, DecideOutcome, Decider, Decision, NewRule, RuleEffect,
};
use crate::store::approvals::{self as queries, ApprovalRow, ApprovalStatus, GrantRow, RuleRow};

/// Who the Studio operator is in decisions and the audit log.
const OPERATOR: &str = "studio";

fn desk(state: &StudioState) -> Approvals {
    Approvals::new(&state.registry)
}

fn unavailable(_: ApprovalsError) -> ApiError {
    ApiError::unavailable("the approval desk")
}

fn approval_json(row: &ApprovalRow) -> Value {
    json!({
        "id": row.id, "agent": row.agent, "chat": row.chat, "run_id": row.run_id, "tool": row.tool,
        "action": row.action, "action_hash": row.action_hash, "target": row.target, "risk": row.risk.as_str(),
        "reason": row.reason, "requested_ms": row.requested_ms, "expires_ms": row.expires_ms,
        "status": row.status.as_str(), "decided_ms": row.decided_ms, "decided_by": row.decided_by,
        "consumed_ms": row.consumed_ms,
    })
}

fn grant_json(row: &GrantRow) -> Value {
    json!({
        "id": row.id, "agent": row.agent, "chat": row.chat, "tool": row.tool, "target": row.target,
        "created_ms": row.created_ms, "expires_ms": row.expires_ms, "created_by": row.created_by,
        "approval_id": row.approval_id, "revoked_ms": row.revoked_ms,
    })
}

fn rule_json(row: &RuleRow) -> Value {
    json!({
        "id": row.id, "effect": row.effect, "tool": row.tool, "agent": row.agent,
        "channel": row.channel, "pattern": row.pattern, "description": row.description,
        "created_ms": row.created_ms, "created_by": row.created_by,
    })
}

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    limit: Option<u32>,
}

/// `GET /api/v1/approvals?status=pending&limit=100`
pub async fn list_approvals(
    State(state): State<StudioState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let names: Vec<&str> = ApprovalStatus::ALL
        .iter()
        .map(|status| status.as_str())
        .collect();
    let status =
        super::status_filter(query.status, &names)?.and_then(|text| ApprovalStatus::parse(&text));
    let limit = query.limit.unwrap_or(100).clamp(1, 1_000);
    let rows = state
        .store
        .read(move |conn| queries::list(conn, status, limit))
        .await?;
    Ok(Json(
        json!({"approvals": rows.iter().map(approval_json).collect::<Vec<_>>()}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// `approve` or `deny`.
    decision: String,
    /// With `approve`: also let the same tool on the same target run without asking for this
    /// many minutes.
    grant_minutes: Option<u32>,
}

/// `POST /api/v1/approvals/{id}/decision` with `{"decision": "approve", "grant_minutes": 30}`.
pub async fn decide(
    State(state): State<StudioState>,
    Path(id): Path<String>,
    body: Result<Json<DecisionBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
    let decision = match (body.decision.as_str(), body.grant_minutes) {
        ("approve", None | Some(0)) => Decision::Approve,
        ("approve", Some(minutes)) if minutes <= 24 * 60 => {
            Decision::ApproveFor(Duration::from_secs(u64::from(minutes) * 60))
        }
        ("approve", Some(_)) => {
            return Err(ApiError::bad_request(
                "`grant_minutes` must be at most 1440 (one day)",
            ));
        }
        ("deny", None) => Decision::Deny,
        ("deny", Some(_)) => {
            return Err(ApiError::bad_request(
                "`grant_minutes` only goes with `approve`",
            ));
        }
        (other, _) => {
            return Err(ApiError::bad_request(format!(
                "`decision` must be `approve` or `deny`, not `{other}`"
            )));
        }
    };
    let decider = Decider::Operator {
        name: OPERATOR.into(),
    };
    let outcome = desk(&state)
        .decide(&id, decision, decider)
        .await
        .map_err(unavailable)?;
    let message = outcome.message();
    match outcome {
        DecideOutcome::Approved { id } | DecideOutcome::Denied { id } => {
            Ok(Json(json!({"id": id, "message": message})))
        }
        DecideOutcome::NotPending { status: None, .. } => Err(ApiError::not_found(format!(
            "no pending approval `{id}`: {message}"
        ))),
        DecideOutcome::NotPending { .. } => Err(ApiError(StatusCode::CONFLICT, message)),
        DecideOutcome::NotAllowed { .. } => Err(ApiError(StatusCode::FORBIDDEN, message)),
    }
}

#[derive(Deserialize)]
pub struct GrantsQuery {
    /// Include revoked and expired grants.
    all: Option<bool>,
}

/// `GET /api/v1/grants` (live ones; `?all=true` for every one).
pub async fn list_grants(
    State(state): State<StudioState>,
    Query(query): Query<GrantsQuery>,
) -> Result<Json<Value>, ApiError> {
    let all = query.all.unwrap_or(false);
    let rows = state
        .store
        .read(move |conn| queries::grants(conn, all, crate::clock::now_ms()))
        .await?;
    Ok(Json(
        json!({"grants": rows.iter().map(grant_json).collect::<Vec<_>>()}),
    ))
}

/// `POST /api/v1/grants/{id}/revoke`
pub async fn revoke_grant(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let revoked = desk(&state)
        .revoke_grant(id, &format!("operator ({OPERATOR})"))
        .await
        .map_err(unavailable)?;
    if !revoked {
        return Err(ApiError::not_found(format!("no live grant {id}")));
    }
    Ok(Json(json!({"id": id, "revoked": true})))
}

/// `GET /api/v1/policy/rules` (active ones).
pub async fn list_rules(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let rows = state.store.read(queries::rules).await?;
    Ok(Json(
        json!({"rules": rows.iter().map(rule_json).collect::<Vec<_>>()}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleBody {
    effect: String,
    tool: Option<String>,
    agent: Option<String>,
    channel: Option<String>,
    pattern: Option<String>,
    description: Option<String>,
}

const CHANNELS: &[&str] = &["tg", "local", "sched", "handoff"];

fn non_empty(value: Option<String>) -> Option<String> {
    value
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
}

/// `POST /api/v1/policy/rules` with `{"effect": "deny", "tool": "shell", "pattern": "rm "}`.
pub async fn add_rule(
    State(state): State<StudioState>,
    body: Result<Json<RuleBody>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(|rejection| ApiError::bad_request(rejection.body_text()))?;
    let effect = RuleEffect::parse(&body.effect).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`effect` must be `deny` or `require_confirmation`, not `{}` (rules only tighten)",
            body.effect
        ))
    })?;
    let channel = non_empty(body.channel);
    if let Some(channel) = &channel
        && !CHANNELS.contains(&channel.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "`channel` must be one of {}, not `{channel}`",
            CHANNELS.join(", ")
        )));
    }
    let rule = NewRule {
        effect,
        tool: non_empty(body.tool),
        agent: non_empty(body.agent),
        channel,
        pattern: non_empty(body.pattern),
        description: non_empty(body.description).unwrap_or_default(),
    };
    if rule.tool.is_none()
        && rule.agent.is_none()
        && rule.channel.is_none()
        && rule.pattern.is_none()
    {
        return Err(ApiError::bad_request(
            "a rule needs at least one of `tool`, `agent`, `channel`, `pattern` (a rule on everything would stop every tool)",
        ));
    }
    let id = desk(&state)
        .add_rule(rule, &format!("operator ({OPERATOR})"))
        .await
        .map_err(unavailable)?;
    Ok((StatusCode::CREATED, Json(json!({"id": id}))))
}

/// `POST /api/v1/policy/rules/{id}/disable`
pub async fn disable_rule(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let disabled = desk(&state)
        .disable_rule(id, &format!("operator ({OPERATOR})"))
        .await
        .map_err(unavailable)?;
    if !disabled {
        return Err(ApiError::not_found(format!("no active rule {id}")));
    }
    Ok(Json(json!({"id": id, "disabled": true})))
}

//! The approvals inbox, scoped grants and policy rules: `/api/v1/approvals`, `/api/v1/grants`,
//! `/api/v1/policy/rules`.
//!
//! Reads go to the store; every change goes to the approval desk through its handle, which stores it
//! with its audit row before answering. The operator decides as `operator (studio)`.
//!
//! An approval is shown in words first (`summary`: "ada wants to delete files in its workspace";
//! `outcome`: "approved and done"), the exact action, and the technical detail (tool, risk,
//! reason) for whoever opens it; the grant offered is named in the one wording every channel uses
//! (`grant.label`, `grant.scope`). A blocked (L3) action put to the operator (`blocked: true`) is
//! allowed once with `{"decision": "allow_once", "confirmation": "<the action, typed out>"}`.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, integer, nullable, object, one_of, string};
use super::{ApiError, StudioState};
use crate::policy::RiskLevel;
use crate::protocol::approvals::{
    Approvals, ApprovalsError, DecideOutcome, Decider, Decision, GRANT_MINUTES, NewRule,
    RuleEffect, grant_label, grant_scope, plain_outcome, plain_summary,
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

/// An approval as Studio shows it: words first (`summary`, `outcome`), the exact action, the
/// detail; `grant` is the one grant a pending, unblocked request offers.
pub fn approval_json(row: &ApprovalRow) -> Value {
    let blocked = row.risk == RiskLevel::L3;
    let grant = (row.status == ApprovalStatus::Pending && !blocked).then(|| {
        json!({"minutes": GRANT_MINUTES, "label": grant_label(GRANT_MINUTES), "scope": grant_scope(GRANT_MINUTES)})
    });
    json!({
        "id": row.id, "agent": row.agent, "chat": row.chat,
        "chat_label": super::agents::chat_label(&row.chat), "run_id": row.run_id, "tool": row.tool,
        "summary": plain_summary(&row.agent, &row.tool, &row.action),
        "action": row.action, "action_hash": row.action_hash, "target": row.target, "risk": row.risk.as_str(),
        "blocked": blocked, "reason": row.reason, "requested_ms": row.requested_ms, "expires_ms": row.expires_ms,
        "status": row.status.as_str(), "outcome": plain_outcome(row.status), "decided_ms": row.decided_ms,
        "decided_by": row.decided_by, "consumed_ms": row.consumed_ms, "grant": grant,
    })
}

/// An approval as [`approval_json`] shows it.
pub fn approval_schema() -> Value {
    let grant = object([
        ("minutes", integer()),
        (
            "label",
            described("the grant in one line, as every channel words it", string()),
        ),
        (
            "scope",
            described("exactly what the grant covers", string()),
        ),
    ]);
    object([
        ("id", string()),
        ("agent", string()),
        ("chat", string()),
        ("chat_label", string()),
        ("run_id", integer()),
        ("tool", string()),
        (
            "summary",
            described("what the agent wants to do, in a sentence", string()),
        ),
        ("action", described("the exact action", string())),
        ("action_hash", string()),
        ("target", string()),
        ("risk", string()),
        (
            "blocked",
            described(
                "an L3 action: only `allow_once` with the action typed out",
                boolean(),
            ),
        ),
        ("reason", string()),
        ("requested_ms", integer()),
        ("expires_ms", integer()),
        ("status", string()),
        ("outcome", described("the status in plain words", string())),
        ("decided_ms", nullable(integer())),
        ("decided_by", nullable(string())),
        ("consumed_ms", nullable(integer())),
        (
            "grant",
            described(
                "the grant a pending request offers (null: none)",
                nullable(grant),
            ),
        ),
        (
            "screenshot",
            described(
                "the page a browser approval is about: the URL of its PNG (null: none)",
                nullable(string()),
            ),
        ),
    ])
}

/// A grant as Studio shows it: `status` is `live`, `lapsed` (something wrote in the workspace
/// after it was given: `lapsed_reason` says what), `expired` or `revoked`.
fn grant_json(row: &GrantRow, now_ms: i64) -> Value {
    let status = if row.revoked_ms.is_some() {
        "revoked"
    } else if row.lapsed_ms.is_some() || row.workspace_generation.is_none() {
        "lapsed"
    } else if row.expires_ms <= now_ms {
        "expired"
    } else {
        "live"
    };
    json!({
        "id": row.id, "agent": row.agent, "chat": row.chat, "tool": row.tool, "target": row.target,
        "created_ms": row.created_ms, "expires_ms": row.expires_ms, "created_by": row.created_by,
        "approval_id": row.approval_id, "revoked_ms": row.revoked_ms, "status": status,
        "lapsed_ms": row.lapsed_ms, "lapsed_reason": row.lapsed_reason,
        "workspace_generation": row.workspace_generation,
    })
}

fn grant_schema() -> Value {
    object([
        ("id", integer()),
        ("agent", string()),
        ("chat", string()),
        ("tool", string()),
        ("target", string()),
        ("created_ms", integer()),
        ("expires_ms", integer()),
        ("created_by", string()),
        ("approval_id", nullable(string())),
        ("revoked_ms", nullable(integer())),
        (
            "status",
            described(
                "live, lapsed (something wrote in the workspace after it was given), expired or revoked",
                string(),
            ),
        ),
        (
            "lapsed_ms",
            described(
                "when a write in the workspace made it lapse",
                nullable(integer()),
            ),
        ),
        (
            "lapsed_reason",
            described("why it lapsed, in words", nullable(string())),
        ),
        (
            "workspace_generation",
            described(
                "the agent's workspace generation it was given in (it applies only while that is current)",
                nullable(integer()),
            ),
        ),
    ])
}

fn rule_json(row: &RuleRow) -> Value {
    json!({
        "id": row.id, "effect": row.effect, "tool": row.tool, "agent": row.agent,
        "channel": row.channel, "pattern": row.pattern, "description": row.description,
        "created_ms": row.created_ms, "created_by": row.created_by,
    })
}

fn rule_schema() -> Value {
    object([
        ("id", integer()),
        ("effect", one_of(&["deny", "require_confirmation"])),
        ("tool", nullable(string())),
        ("agent", nullable(string())),
        ("channel", nullable(string())),
        ("pattern", nullable(string())),
        ("description", string()),
        ("created_ms", integer()),
        ("created_by", string()),
    ])
}

/// Which approvals `GET /api/v1/approvals` lists.
#[derive(Deserialize, JsonSchema)]
pub struct ListQuery {
    /// Only those in this state (`pending`, `approved`, `denied`, ...; empty: all).
    status: Option<String>,
    /// How many (default 100, at most 1,000).
    limit: Option<u32>,
    /// Only this agent's requests.
    agent: Option<String>,
    /// Only this conversation's requests (`studio:operator`, `tg:42`): Chat's inline cards.
    chat: Option<String>,
}

/// `GET /api/v1/approvals?status=pending&agent=&chat=&limit=100`
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
    let agent = query.agent.filter(|agent| !agent.is_empty());
    let chat = query.chat.filter(|chat| !chat.is_empty());
    // Filtered here: the table is small (pending ones are few), and the limit applies after.
    let filtered = agent.is_some() || chat.is_some();
    let rows = state
        .store
        .read(move |conn| queries::list(conn, status, if filtered { 1_000 } else { limit }))
        .await?;
    let shown: Vec<Value> = rows
        .iter()
        .filter(|row| agent.as_ref().is_none_or(|agent| &row.agent == agent))
        .filter(|row| chat.as_ref().is_none_or(|chat| &row.chat == chat))
        .take(limit as usize)
        .map(|row| {
            let mut shown = approval_json(row);
            let kept = queries::screenshot_path(state.store.path(), &row.id)
                .is_some_and(|path| path.is_file());
            shown["screenshot"] = match kept {
                true => json!(format!("/api/v1/approvals/{}/screenshot", row.id)),
                false => Value::Null,
            };
            shown
        })
        .collect();
    Ok(Json(json!({"approvals": shown})))
}

/// `GET /api/v1/approvals/{id}/screenshot`: the screenshot kept with a browser approval (the
/// page the action is on). The path is the approval's id only, never a path from the model.
pub async fn screenshot(
    State(state): State<StudioState>,
    Path(id): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    use axum::response::IntoResponse;
    let not_found = || {
        ApiError::not_found(format!(
            "approval `{id}` has no screenshot (only browser approvals have one, kept for {} days)",
            queries::SCREENSHOT_DAYS
        ))
    };
    let path = queries::screenshot_path(state.store.path(), &id).ok_or_else(not_found)?;
    let png = tokio::fs::read(&path).await.map_err(|_| not_found())?;
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, "image/png"),
            (axum::http::header::CACHE_CONTROL, "private, max-age=3600"),
        ],
        png,
    )
        .into_response())
}

/// What `GET /api/v1/approvals` answers.
pub fn list_schema() -> Value {
    object([("approvals", array(approval_schema()))])
}

/// The operator's decision.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// `approve`, `deny`, or `allow_once` (a blocked action, with `confirmation`).
    decision: String,
    /// With `approve`: also let exactly this action (same tool, same arguments) run again in this
    /// chat without asking for this many minutes.
    grant_minutes: Option<u32>,
    /// With `allow_once`: the action, typed out exactly as shown.
    confirmation: Option<String>,
}

/// `POST /api/v1/approvals/{id}/decision` with `{"decision": "approve", "grant_minutes": 30}`,
/// `{"decision": "deny"}` or `{"decision": "allow_once", "confirmation": "shell: rm -rf old"}`.
pub async fn decide(
    State(state): State<StudioState>,
    Path(id): Path<String>,
    body: Result<Json<DecisionBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = super::json_body(body)?;
    if body.confirmation.is_some() && body.decision != "allow_once" {
        return Err(ApiError::bad_request(
            "`confirmation` only goes with `allow_once`",
        ));
    }
    let decision = match (body.decision.as_str(), body.grant_minutes) {
        ("allow_once", None) => match body.confirmation {
            Some(confirmation) if !confirmation.trim().is_empty() => {
                Decision::AllowBlockedOnce { confirmation }
            }
            _ => {
                return Err(ApiError::bad_request(
                    "Type the action to allow it once (`confirmation` is required with `allow_once`), exactly as shown.",
                ));
            }
        },
        ("allow_once", Some(_)) => {
            return Err(ApiError::bad_request(
                "`grant_minutes` does not go with `allow_once`: a blocked action is allowed once, never for a while",
            ));
        }
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
                "`decision` must be `approve`, `deny` or `allow_once`, not `{other}`"
            )));
        }
    };
    if let Decision::AllowBlockedOnce { confirmation } = &decision {
        check_confirmation(&state, &id, confirmation).await?;
    }
    let decider = Decider::Operator {
        name: OPERATOR.into(),
    };
    let outcome = desk(&state)
        .decide(&id, decision, decider)
        .await
        .map_err(unavailable)?;
    let message = outcome.message();
    match outcome {
        DecideOutcome::Approved { id } => Ok(Json(
            json!({"id": id, "status": "approved", "message": message}),
        )),
        DecideOutcome::Denied { id } => Ok(Json(
            json!({"id": id, "status": "denied", "message": message}),
        )),
        DecideOutcome::NotPending { status: None, .. } => Err(ApiError::not_found(format!(
            "no pending approval `{id}`: {message}"
        ))),
        DecideOutcome::NotPending { .. } => Err(ApiError(StatusCode::CONFLICT, message)),
        DecideOutcome::NotAllowed { .. } => Err(ApiError(StatusCode::FORBIDDEN, message)),
    }
}

/// What `POST /api/v1/approvals/{id}/decision` answers (409 when it was decided already, 403
/// when the operator may not allow a blocked action).
pub fn decide_schema() -> Value {
    object([
        ("id", string()),
        ("status", one_of(&["approved", "denied"])),
        ("message", string()),
    ])
}

/// A 400 naming `confirmation` when it is not the action exactly as shown (the desk checks it
/// again when it records the decision).
async fn check_confirmation(
    state: &StudioState,
    id: &str,
    confirmation: &str,
) -> Result<(), ApiError> {
    let key = id.trim().to_ascii_lowercase();
    let row = state
        .store
        .read(move |conn| queries::get(conn, &key))
        .await?;
    match row {
        Some(row)
            if crate::protocol::approvals::typed_action(&row.action) != confirmation.trim() =>
        {
            Err(ApiError::bad_request(
                "The typed action does not match (`confirmation`): type it exactly as shown \
                 (without the `runs with` line) to allow it once.",
            ))
        }
        _ => Ok(()),
    }
}

/// Which grants `GET /api/v1/grants` lists.
#[derive(Deserialize, JsonSchema)]
pub struct GrantsQuery {
    /// Include revoked and expired grants.
    all: Option<bool>,
}

/// `GET /api/v1/grants` (live and lapsed ones; `?all=true` for every one).
pub async fn list_grants(
    State(state): State<StudioState>,
    Query(query): Query<GrantsQuery>,
) -> Result<Json<Value>, ApiError> {
    let all = query.all.unwrap_or(false);
    let now = crate::clock::now_ms();
    let rows = state
        .store
        .read(move |conn| queries::grants(conn, all, now))
        .await?;
    Ok(Json(
        json!({"grants": rows.iter().map(|row| grant_json(row, now)).collect::<Vec<_>>()}),
    ))
}

/// What `GET /api/v1/grants` answers.
pub fn grants_schema() -> Value {
    object([("grants", array(grant_schema()))])
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

/// What `POST /api/v1/grants/{id}/revoke` answers.
pub fn revoke_grant_schema() -> Value {
    object([("id", integer()), ("revoked", boolean())])
}

/// `GET /api/v1/policy/rules` (active ones).
pub async fn list_rules(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let rows = state.store.read(queries::rules).await?;
    Ok(Json(
        json!({"rules": rows.iter().map(rule_json).collect::<Vec<_>>()}),
    ))
}

/// What `GET /api/v1/policy/rules` answers.
pub fn rules_schema() -> Value {
    object([("rules", array(rule_schema()))])
}

/// A rule that tightens the policy: at least one of `tool`, `agent`, `channel`, `pattern`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleBody {
    /// `deny` or `require_confirmation`.
    effect: String,
    /// Only this tool.
    tool: Option<String>,
    /// Only this agent.
    agent: Option<String>,
    /// Only this channel: `tg`, `local`, `sched` or `handoff`.
    channel: Option<String>,
    /// Only actions containing this text.
    pattern: Option<String>,
    /// Why, for whoever reads the rule later.
    description: Option<String>,
}

const CHANNELS: &[&str] = &["tg", "local", "sched", "handoff", "trigger"];

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
    let body = super::json_body(body)?;
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

/// What `POST /api/v1/policy/rules` answers (201).
pub fn add_rule_schema() -> Value {
    object([("id", integer())])
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

/// What `POST /api/v1/policy/rules/{id}/disable` answers.
pub fn disable_rule_schema() -> Value {
    object([("id", integer()), ("disabled", boolean())])
}

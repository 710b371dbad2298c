//! Runs and their steps, and the policy decisions recorded in them: `/api/v1/runs`,
//! `/api/v1/policy/decisions`.
//!
//! The recorded steps keep what the dispatcher knew (a decision's envelope nested under
//! `detail.envelope`); Studio gets them explained: every decision step carries `decision` — the
//! plain sentence, effect, risk, verdict, reason and who decided (the policy's source in words,
//! or the person who answered its approval) — and every tool result its whole `output` (from the
//! transcript, redacted when it was stored and again here). A run whose calls were refused or
//! not approved says so (`refused`), whatever its status.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::{Path, Query, State};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{
    any, array, boolean, described, extend, integer, nullable, number, object, one_of, string,
};
use super::{ApiError, StudioState};
use crate::protocol::approvals::{plain_outcome, plain_summary, who_decided};
use crate::store::approvals::{self as approval_queries, ApprovalRow};
use crate::store::runs::{self as queries, RunRow, StepRow};
use crate::store::sessions::{self, EventKindRow};
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

fn run_json(row: &RunRow, skills: &[String], refused: i64) -> Value {
    json!({
        "refused": refused,
        "id": row.id, "agent": row.agent, "chat": row.chat, "status": row.status.as_str(),
        "trigger": row.trigger, "started_ms": row.started_ms, "finished_ms": row.finished_ms,
        "duration_ms": row.finished_ms.map(|end| end - row.started_ms), "model": row.model,
        "input_tokens": row.input_tokens, "output_tokens": row.output_tokens,
        "cost_usd": row.cost_usd, "unpriced": row.unpriced, "turns": row.turns, "outcome": row.outcome,
        "session_id": row.session_id, "skills": skills,
    })
}

/// A run as [`run_json`] shows it.
fn run_schema() -> Value {
    object([
        (
            "refused",
            described(
                "tool calls refused by the policy or denied by a person",
                integer(),
            ),
        ),
        ("id", integer()),
        ("agent", string()),
        ("chat", string()),
        ("status", one_of(STATUSES)),
        ("trigger", string()),
        ("started_ms", integer()),
        ("finished_ms", nullable(integer())),
        ("duration_ms", nullable(integer())),
        ("model", nullable(string())),
        ("input_tokens", integer()),
        ("output_tokens", integer()),
        ("cost_usd", number()),
        (
            "unpriced",
            described("a model call had no price (counted as 0)", boolean()),
        ),
        ("turns", integer()),
        ("outcome", nullable(string())),
        ("session_id", integer()),
        ("skills", array(string())),
    ])
}

/// A step as [`step_json`] shows it: a decision explained, a tool result with its output.
fn step_schema() -> Value {
    let approval = object([("id", string()), ("status", string())]);
    let decision = object([
        ("tool", string()),
        ("action", string()),
        (
            "summary",
            described("what the call would do, in a sentence", string()),
        ),
        ("effect", any()),
        ("risk", any()),
        (
            "verdict",
            described("`allow`, `deny` or `require_approval`", string()),
        ),
        ("reason", any()),
        ("source", string()),
        ("next_step", any()),
        ("decided_by", string()),
        ("outcome", string()),
        ("blocked", boolean()),
        ("approval", nullable(approval)),
    ]);
    object([
        ("seq", integer()),
        ("kind", string()),
        ("name", nullable(string())),
        ("tokens_in", nullable(integer())),
        ("tokens_out", nullable(integer())),
        ("cost_usd", nullable(number())),
        ("duration_ms", nullable(integer())),
        ("created_ms", integer()),
        (
            "detail",
            described("the step as recorded (redacted)", any()),
        ),
        (
            "decision?",
            described("a `decision` step explained", decision),
        ),
        (
            "output?",
            described("a `tool_result` step's whole output (redacted)", string()),
        ),
    ])
}

/// What a run's steps are explained with: the approvals asked for its calls and the whole output
/// of its tool results, by call id.
#[derive(Default)]
struct StepContext {
    approvals: HashMap<String, ApprovalRow>,
    outputs: HashMap<String, String>,
}

fn step_json(agent: &str, step: &StepRow, context: &StepContext) -> Value {
    let detail = serde_json::from_str::<Value>(&crate::secrets::redact(&step.detail))
        .unwrap_or_else(|_| Value::String(step.detail.clone()));
    let mut body = json!({
        "seq": step.seq, "kind": step.kind, "name": step.name,
        "tokens_in": step.tokens_in, "tokens_out": step.tokens_out, "cost_usd": step.cost_usd,
        "duration_ms": step.duration_ms, "created_ms": step.created_ms,
    });
    let call_id = detail["call_id"].as_str().unwrap_or_default();
    match step.kind.as_str() {
        "decision" => {
            let tool = step.name.as_deref().unwrap_or_default();
            body["decision"] = decision_json(agent, tool, &detail, context.approvals.get(call_id));
        }
        "tool_result" => {
            if let Some(output) = context.outputs.get(call_id) {
                body["output"] = Value::String(crate::secrets::redact(output).into_owned());
            }
        }
        _ => {}
    }
    body["detail"] = detail;
    body
}

/// A decision step explained: what the call would do (the plain sentence, its effect and risk),
/// the gate's verdict and reason, and who decided — the policy (its source in words) or, when it
/// asked, the person who answered and how it ended.
fn decision_json(agent: &str, tool: &str, detail: &Value, approval: Option<&ApprovalRow>) -> Value {
    let envelope = &detail["envelope"];
    let action = detail["action"].as_str().unwrap_or_default();
    let verdict = envelope["decision"].as_str().unwrap_or_default();
    let source = envelope["source"].as_str().unwrap_or_default();
    let (decided_by, outcome) = match approval {
        Some(row) => (
            row.decided_by
                .clone()
                .unwrap_or_else(|| "nobody yet: waiting for an approver".to_string()),
            plain_outcome(row.status).to_string(),
        ),
        None => (
            who_decided(source),
            match verdict {
                "allow" => "allowed: it ran",
                "deny" => "refused: it did not run",
                _ => "asked a person",
            }
            .to_string(),
        ),
    };
    json!({
        "tool": tool, "action": action, "summary": plain_summary(agent, tool, action),
        "effect": detail["effect"], "risk": envelope["risk"], "verdict": verdict,
        "reason": envelope["reason"], "source": source, "next_step": envelope["next_step"],
        "decided_by": decided_by, "outcome": outcome,
        "blocked": detail["blocked_put_to_operator"].as_bool().unwrap_or(false),
        "approval": approval.map(|row| json!({"id": row.id, "status": row.status.as_str()})),
    })
}

/// Which runs `GET /api/v1/runs` lists.
#[derive(Deserialize, JsonSchema)]
pub struct ListQuery {
    /// Only this agent's.
    agent: Option<String>,
    /// Only runs in this state (`running`, `waiting_approval`, `succeeded`, `failed`,
    /// `cancelled`, `interrupted`, `budget_stopped`).
    status: Option<String>,
    /// Only runs older than this id (the previous page's `next_before`).
    before: Option<i64>,
    /// How many (default 50, at most 500).
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
    let (rows, used, refused) = state
        .store
        .read(move |conn| {
            let rows = queries::list(conn, agent.as_deref(), status.as_deref(), before, limit)?;
            let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
            Ok((
                rows,
                queries::skills_used(conn, &ids)?,
                queries::refused_calls(conn, &ids)?,
            ))
        })
        .await?;
    let mut skills: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for (run_id, skill) in used {
        skills.entry(run_id).or_default().push(skill);
    }
    let refused: HashMap<i64, i64> = refused.into_iter().collect();
    let next_before = (rows.len() == limit as usize)
        .then(|| rows.last().map(|row| row.id))
        .flatten();
    Ok(Json(json!({
        "runs": rows.iter().map(|row| run_json(
            row,
            skills.get(&row.id).map_or(&[], Vec::as_slice),
            refused.get(&row.id).copied().unwrap_or(0),
        )).collect::<Vec<_>>(),
        "next_before": next_before,
    })))
}

/// What `GET /api/v1/runs` answers.
pub fn list_schema() -> Value {
    object([
        ("runs", array(run_schema())),
        (
            "next_before",
            described(
                "where the next page starts (null: this is the last)",
                nullable(integer()),
            ),
        ),
    ])
}

/// `GET /api/v1/runs/{id}`: the run with every step.
pub async fn detail(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let (row, steps, used, context) = state
        .store
        .read(move |conn| {
            let Some(row) = queries::get(conn, id)? else {
                return Ok(None);
            };
            let steps = queries::steps(conn, id)?;
            let context = step_context(conn, id, &steps)?;
            Ok(Some((
                row,
                steps,
                queries::skills_used(conn, &[id])?,
                context,
            )))
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no run {id}")))?;
    let skills: Vec<String> = used.into_iter().map(|(_, skill)| skill).collect();
    let explained: Vec<Value> = steps
        .iter()
        .map(|step| step_json(&row.agent, step, &context))
        .collect();
    let refused = explained
        .iter()
        .filter(|step| {
            let decision = &step["decision"];
            decision["verdict"] == "deny"
                || (decision["verdict"] == "require_approval"
                    && decision["approval"]["status"]
                        .as_str()
                        .is_some_and(|status| status.starts_with("denied")))
        })
        .count() as i64;
    let mut body = run_json(&row, &skills, refused);
    body["steps"] = Value::Array(explained);
    Ok(Json(body))
}

/// What `GET /api/v1/runs/{id}` answers.
pub fn detail_schema() -> Value {
    extend(run_schema(), [("steps", array(step_schema()))])
}

/// The approvals asked for a run's calls and the whole output of its tool results.
fn step_context(
    conn: &rusqlite::Connection,
    run_id: i64,
    steps: &[StepRow],
) -> crate::store::Result<StepContext> {
    let mut context = StepContext::default();
    for step in steps.iter().filter(|step| step.kind == "decision") {
        let detail: Value = serde_json::from_str(&step.detail).unwrap_or(Value::Null);
        if detail["envelope"]["decision"] != "require_approval" {
            continue;
        }
        let call_id = detail["call_id"].as_str().unwrap_or_default().to_string();
        if let Some(row) = approval_queries::for_call(conn, run_id, &call_id)? {
            context.approvals.insert(call_id, row);
        }
    }
    for event in sessions::run_events(conn, run_id)? {
        if event.kind != EventKindRow::ToolResult {
            continue;
        }
        let data: Value = event
            .data
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null);
        if let Some(call_id) = data["call_id"].as_str() {
            context.outputs.insert(call_id.to_string(), event.content);
        }
    }
    Ok(context)
}

/// How many decisions `GET /api/v1/policy/decisions` lists.
#[derive(Deserialize, JsonSchema)]
pub struct DecisionsQuery {
    /// How many (default 50, at most 500).
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

/// What `GET /api/v1/policy/decisions` answers.
pub fn decisions_schema() -> Value {
    let decision = object([
        ("run_id", integer()),
        ("agent", string()),
        ("at_ms", integer()),
        ("tool", nullable(string())),
        ("action", any()),
        ("decision", any()),
        ("risk", any()),
        ("reason", any()),
        ("source", any()),
    ]);
    object([("decisions", array(decision))])
}

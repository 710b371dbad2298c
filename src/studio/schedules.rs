//! Schedules: `/api/v1/schedules` (list, create, preview, detail with history, pause, resume,
//! cancel). Every change goes to the scheduler (through its handle) as the operator and, once
//! the scheduler stored it, is audited as the operator's (`job.created`, `job.paused`,
//! `job.resumed`, `job.cancelled`); the preview is the same schedule math the scheduler runs,
//! without creating anything.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, StudioState, json_body};
use crate::domain::ChatKey;
use crate::jobs::status::StatusChange;
use crate::jobs::{JobScope, JobView, NewJob};
use crate::protocol::scheduler::{Scheduler, SchedulerError};
use crate::schedule::ScheduleSpec;
use crate::schedule::format::{format_local, zone_of};
use crate::store::schedules::JobRunRow;

const PREVIEW: usize = 5;
/// Who the audit log names for a change made through the API.
const OPERATOR: &str = "operator (studio)";

fn scheduler(state: &StudioState) -> Scheduler {
    Scheduler::new(&state.registry)
}

/// A job as JSON; `next_run_local` and `upcoming_local` are its times in the job's own zone
/// ("2027-01-15 09:00:00 CET (Fri)"), the way its reminders word them.
pub fn job_json(job: &JobView) -> Value {
    let zone = zone_of(&job.timezone);
    let local = |ms: &i64| format_local(*ms, zone);
    json!({
        "next_run_local": job.next_run_ms.as_ref().map(local),
        "upcoming_local": job.upcoming.iter().map(local).collect::<Vec<_>>(),
        "id": job.id, "agent": job.agent, "name": job.name, "prompt": job.prompt,
        "target": job.target, "kind": job.kind, "expression": job.expression,
        "timezone": job.timezone, "schedule": job.schedule, "missed_policy": job.missed_policy,
        "status": job.status.as_str(), "next_run_ms": job.next_run_ms, "upcoming": job.upcoming,
        "last_run_ms": job.last_run_ms, "last_outcome": job.last_outcome,
        "consecutive_failures": job.consecutive_failures, "failing": job.failing,
        "running": job.running, "queued": job.queued, "created_by": job.created_by,
    })
}

fn history_json(row: &JobRunRow) -> Value {
    json!({
        "id": row.id, "fire_ms": row.fire_ms, "attempt": row.attempt, "trigger": row.trigger,
        "status": row.status.as_str(), "due_ms": row.due_ms, "started_ms": row.started_ms,
        "finished_ms": row.finished_ms, "run_id": row.run_id, "missed_count": row.missed_count,
        "detail": row.detail,
    })
}

/// Audits an operator's change to a job after the scheduler stored it.
async fn audit(state: &StudioState, action: &'static str, job: &JobView) -> Result<(), ApiError> {
    let subject = format!("job:{}", job.id);
    let details = json!({
        "agent": job.agent, "name": job.name, "schedule": job.schedule,
        "status": job.status.as_str(),
    });
    let audited_subject = subject.clone();
    state
        .store
        .write(move |conn| {
            crate::audit::append(conn, OPERATOR, action, &audited_subject, &details).map(|_| ())
        })
        .await?;
    crate::audit::announce(&state.events, action, &subject);
    Ok(())
}

/// A scheduler answer: a refusal is the operator's mistake (unknown job, bad expression).
fn answered<T>(result: Result<T, SchedulerError>) -> Result<T, ApiError> {
    match result {
        Ok(value) => Ok(value),
        Err(error @ SchedulerError::NotFound { .. }) => Err(ApiError::not_found(error.to_string())),
        Err(SchedulerError::Refused(message)) => Err(ApiError::bad_request(message)),
        Err(SchedulerError::Unavailable(_)) => Err(ApiError::unavailable("the scheduler")),
    }
}

/// `GET /api/v1/schedules`: every job, finished ones included.
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let scheduler = scheduler(&state);
    let jobs = answered(scheduler.list(JobScope::Operator, true).await)?;
    Ok(Json(
        json!({"jobs": jobs.iter().map(job_json).collect::<Vec<_>>()}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewBody {
    kind: String,
    expression: String,
    #[serde(default)]
    timezone: String,
}

/// `POST /api/v1/schedules/preview`: what a schedule means and when it would fire next (in the
/// daemon's zone when none is given).
pub async fn preview(
    State(state): State<StudioState>,
    body: Result<Json<PreviewBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = json_body(body)?;
    let timezone = if body.timezone.trim().is_empty() {
        state.timezones.get().daemon.zone.name()
    } else {
        body.timezone.trim()
    };
    let now = chrono::Utc::now();
    let spec = ScheduleSpec::parse(body.kind.trim(), body.expression.trim(), timezone, now)
        .map_err(|error| ApiError::bad_request(error.to_string()))?;
    let next: Vec<i64> = spec
        .preview(now, PREVIEW)
        .iter()
        .map(|at| at.timestamp_millis())
        .collect();
    let zone = crate::schedule::parse_timezone(timezone).unwrap_or(chrono_tz::Tz::UTC);
    Ok(Json(json!({
        "schedule": spec.describe_in(zone),
        "next": next,
        "next_local": next.iter().map(|ms| format_local(*ms, zone)).collect::<Vec<_>>(),
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    agent: String,
    #[serde(default)]
    name: String,
    prompt: String,
    kind: String,
    expression: String,
    #[serde(default)]
    timezone: String,
    #[serde(default)]
    missed_policy: String,
    /// Where answers go (`tg:<chat id>`, `studio:<id>`); absent: silent.
    target: Option<String>,
}

/// `POST /api/v1/schedules`: creates a job for an agent (201 with the job).
pub async fn create(
    State(state): State<StudioState>,
    body: Result<Json<CreateBody>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = json_body(body)?;
    if !state
        .agents
        .get()
        .iter()
        .any(|agent| agent.name == body.agent)
    {
        return Err(ApiError::bad_request(format!(
            "no agent is named `{}`",
            body.agent
        )));
    }
    let target = match body.target.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(ChatKey::parse(text).ok_or_else(|| {
            ApiError::bad_request(format!(
                "`target` `{text}` is not a chat (like `tg:12345`, `tg:-100123/7` for a forum topic, or `studio:operator`)"
            ))
        })?),
    };
    // Without a zone the job lives in the agent's (its file's, else the daemon's).
    let timezone = if body.timezone.trim().is_empty() {
        state
            .timezones
            .get()
            .agent_zone(&body.agent)
            .name()
            .to_string()
    } else {
        body.timezone
    };
    let job = NewJob {
        agent: body.agent,
        name: body.name,
        prompt: body.prompt,
        target,
        kind: body.kind,
        expression: body.expression,
        timezone,
        missed_policy: body.missed_policy,
        created_by: "operator".into(),
        created_in: None,
    };
    let scheduler = scheduler(&state);
    let view = answered(scheduler.create(job).await)?;
    audit(&state, "job.created", &view).await?;
    Ok((StatusCode::CREATED, Json(job_json(&view))))
}

/// `GET /api/v1/schedules/{id}`: the job and its newest 50 history entries.
pub async fn detail(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let scheduler = scheduler(&state);
    let (view, history) = answered(scheduler.get(JobScope::Operator, id, 50).await)?;
    let mut body = job_json(&view);
    body["history"] = history.iter().map(history_json).collect();
    Ok(Json(body))
}

async fn set_paused(state: &StudioState, id: i64, paused: bool) -> Result<Json<Value>, ApiError> {
    let scheduler = scheduler(state);
    let view = answered(scheduler.set_paused(JobScope::Operator, id, paused).await)?;
    let change = if paused {
        StatusChange::Pause
    } else {
        StatusChange::Resume
    };
    let action = change.audit_action();
    audit(state, action, &view).await?;
    Ok(Json(job_json(&view)))
}

/// `POST /api/v1/schedules/{id}/pause`
pub async fn pause(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    set_paused(&state, id, true).await
}

/// `POST /api/v1/schedules/{id}/resume`
pub async fn resume(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    set_paused(&state, id, false).await
}

/// `DELETE /api/v1/schedules/{id}`: cancels the job (its history stays).
pub async fn cancel(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let scheduler = scheduler(&state);
    let view = answered(scheduler.cancel(JobScope::Operator, id).await)?;
    audit(&state, StatusChange::Cancel.audit_action(), &view).await?;
    Ok(Json(job_json(&view)))
}

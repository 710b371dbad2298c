//! Schedules: `/api/v1/schedules` (list with each job's last runs, create, preview, the form's
//! choices, detail with history, edit, pause, resume, run now, cancel). Every change goes to the
//! scheduler (through its handle) as the operator and, once the scheduler stored it, is audited
//! as the operator's (`job.created`, `job.updated`, `job.paused`, `job.resumed`, `job.run_now`,
//! `job.cancelled`); the preview is the same schedule math the scheduler runs, without creating
//! anything.
//!
//! Where answers go ("deliver to"): the agent's Telegram people and conversations by name — its
//! owner, the people its file names, paired people, then the chats it has sessions in (groups
//! and forum topics named from their stored updates) — the owner's private chat first and the
//! default. An agent without a bot is offered none: its jobs keep their answers in their
//! history. The form's defaults are the agent's zone (its file's, else the daemon's, never the
//! browser's) and the missed-run policy `run_once`.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, StudioState, json_body};
use crate::domain::ChatKey;
use crate::jobs::status::StatusChange;
use crate::jobs::{JobChange, JobScope, JobView, NewJob};
use crate::protocol::scheduler::{Scheduler, SchedulerError};
use crate::schedule::ScheduleSpec;
use crate::schedule::format::{format_local, zone_of};
use crate::store::people::{self as people_queries, PersonStatus};
use crate::store::schedules::{self as queries, DeliveryChat, JobRunRow};

pub mod schema;

const PREVIEW: usize = 5;
/// How many of each job's newest runs the list shows.
const LAST_RUNS: u32 = 3;
/// How many of an agent's conversations are offered as targets.
const CONVERSATIONS: u32 = 30;
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

/// A history row as JSON (`run_id` links to the agent's run, `#/runs/<id>` in the console).
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
    audit_with(state, action, job, json!({})).await
}

/// [`audit`] with `extra` fields in the details (which fields changed, which fire ran).
async fn audit_with(
    state: &StudioState,
    action: &'static str,
    job: &JobView,
    extra: Value,
) -> Result<(), ApiError> {
    let subject = format!("job:{}", job.id);
    let mut details = json!({
        "agent": job.agent, "name": job.name, "schedule": job.schedule,
        "status": job.status.as_str(), "target": job.target,
    });
    if let (Some(details), Value::Object(extra)) = (details.as_object_mut(), extra) {
        details.extend(extra);
    }
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
        Err(SchedulerError::Busy(message)) => Err(ApiError::conflict(message)),
        Err(SchedulerError::Unavailable(_)) => Err(ApiError::unavailable("the scheduler")),
    }
}

/// `GET /api/v1/schedules`: every job, finished ones included, each with where its answers go
/// in words (`target_label`) and its newest runs (`last_runs`).
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let scheduler = scheduler(&state);
    let jobs = answered(scheduler.list(JobScope::Operator, true).await)?;
    let ids: Vec<i64> = jobs.iter().map(|job| job.id).collect();
    let runs = state
        .store
        .read(move |conn| queries::latest_runs(conn, &ids, LAST_RUNS))
        .await?;
    let mut runs_of: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
    for run in &runs {
        runs_of
            .entry(run.job_id)
            .or_default()
            .push(history_json(run));
    }
    // Each target in use is named once (its chat alone is looked up, not every chat offered).
    let used: BTreeSet<(&str, &str)> = jobs
        .iter()
        .filter_map(|job| Some((job.agent.as_str(), job.target.as_deref()?)))
        .collect();
    let mut labels: BTreeMap<(String, String), String> = BTreeMap::new();
    for (agent, chat) in used {
        let label = label_of(&state, agent, chat).await?;
        labels.insert((agent.to_string(), chat.to_string()), label);
    }
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|job| {
            let mut body = job_json(job);
            body["target_label"] = json!(job.target.as_deref().map(|chat| {
                labels
                    .get(&(job.agent.clone(), chat.to_string()))
                    .cloned()
                    .unwrap_or_else(|| chat_label(chat))
            }));
            body["last_runs"] = json!(runs_of.remove(&job.id).unwrap_or_default());
            body
        })
        .collect();
    Ok(Json(json!({"jobs": jobs})))
}

/// A schedule to explain.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewBody {
    /// `cron`, `every` or `at`.
    kind: String,
    /// `0 9 * * 1-5`, `15m`, `2027-01-15 09:00`, ...
    expression: String,
    /// An IANA zone (empty: the daemon's).
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

/// A new job.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    /// The agent that runs it.
    agent: String,
    #[serde(default)]
    name: String,
    /// What the agent is asked each time.
    prompt: String,
    /// `cron`, `every` or `at`.
    kind: String,
    expression: String,
    /// An IANA zone (empty: the agent's).
    #[serde(default)]
    timezone: String,
    /// `run_once` (the default), `skip`, or `catch_up` (with `max_runs=N`, `window=6h`).
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
    known_agent(&state, &body.agent)?;
    let target = parse_target(&state, &body.agent, body.target.as_deref())?;
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

/// `GET /api/v1/schedules/{id}`: the job, where its answers go in words, and its newest 50
/// history entries.
pub async fn detail(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<Json<Value>, ApiError> {
    let scheduler = scheduler(&state);
    let (view, history) = answered(scheduler.get(JobScope::Operator, id, 50).await)?;
    let mut body = job_json(&view);
    body["target_label"] = json!(match view.target.as_deref() {
        Some(chat) => Some(label_of(&state, &view.agent, chat).await?),
        None => None,
    });
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

/// Whose choices `GET /api/v1/schedules/choices` lists.
#[derive(Deserialize, JsonSchema)]
pub struct ChoicesQuery {
    /// The agent (required).
    #[schemars(with = "String")]
    agent: Option<String>,
}

/// `GET /api/v1/schedules/choices?agent=ada`: what a new job of the agent can be — where its
/// answers can go (`targets`, by name; `default_target` the owner's private chat), its zone
/// (the agent file's, else the daemon's) and the missed-run policy `run_once`.
pub async fn choices(
    State(state): State<StudioState>,
    Query(query): Query<ChoicesQuery>,
) -> Result<Json<Value>, ApiError> {
    let agent = query.agent.unwrap_or_default();
    let agent = agent.trim();
    if agent.is_empty() {
        return Err(ApiError::bad_request(
            "`agent` is missing: name the agent whose choices you want (?agent=...)",
        ));
    }
    known_agent(&state, agent)?;
    let targets = targets(&state, agent).await?;
    let default_target = targets
        .iter()
        .find(|target| target.default_candidate)
        .map(|target| target.chat.clone());
    let zones = state.timezones.get();
    Ok(Json(json!({
        "agent": agent,
        "bot": has_bot(&state, agent),
        "timezone": zones.agent_zone(agent).name(),
        "daemon_timezone": zones.daemon.zone.name(),
        "missed_policy": "run_once",
        "default_target": default_target,
        "targets": targets.iter().map(|target| json!({
            "chat": target.chat, "label": target.label, "reason": target.reason,
        })).collect::<Vec<_>>(),
    })))
}

/// A job's changes: only the fields given.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateBody {
    name: Option<String>,
    prompt: Option<String>,
    kind: Option<String>,
    expression: Option<String>,
    timezone: Option<String>,
    missed_policy: Option<String>,
    /// A chat key; empty: nobody (answers stay in the job's history); absent: unchanged.
    target: Option<String>,
}

/// `PATCH /api/v1/schedules/{id}`: changes what the job asks, when, and where its answers go
/// (only the fields given). Audited as `job.updated`, naming the fields.
pub async fn update(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
    body: Result<Json<UpdateBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = json_body(body)?;
    let scheduler = scheduler(&state);
    let (current, _) = answered(scheduler.get(JobScope::Operator, id, 1).await)?;
    let target = match body.target.as_deref() {
        None => None,
        Some(text) => Some(parse_target(&state, &current.agent, Some(text))?),
    };
    let change = JobChange {
        name: body.name,
        prompt: body.prompt,
        kind: body.kind,
        expression: body.expression,
        timezone: body.timezone,
        missed_policy: body.missed_policy,
        target,
    };
    let fields: Vec<&str> = [
        ("name", change.name.is_some()),
        ("prompt", change.prompt.is_some()),
        ("kind", change.kind.is_some()),
        ("expression", change.expression.is_some()),
        ("timezone", change.timezone.is_some()),
        ("missed_policy", change.missed_policy.is_some()),
        ("target", change.target.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, given)| given.then_some(field))
    .collect();
    if fields.is_empty() {
        return Err(ApiError::bad_request(
            "nothing to change: give at least one of name, prompt, kind, expression, timezone, missed_policy, target",
        ));
    }
    let view = answered(scheduler.update(JobScope::Operator, id, change).await)?;
    audit_with(&state, "job.updated", &view, json!({"changed": fields})).await?;
    Ok(Json(job_json(&view)))
}

/// `POST /api/v1/schedules/{id}/run`: fires the job now, once, besides its schedule (202 with
/// the job and the fire's history row; 409 while it runs). Audited as `job.run_now`.
pub async fn run_now(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let scheduler = scheduler(&state);
    let (view, fire) = answered(scheduler.run_now(JobScope::Operator, id).await)?;
    audit_with(&state, "job.run_now", &view, json!({"job_run": fire.id})).await?;
    let mut body = job_json(&view);
    body["fire"] = history_json(&fire);
    Ok((StatusCode::ACCEPTED, Json(body)))
}

// ---------------------------------------------------------------------------------------------
// Where answers go.

/// A place a job's answers can go, as the operator picks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The chat key stored as the job's target.
    pub chat: String,
    /// In words: "Olivia — private chat (owner)", "Family — group", "“Shopping” topic in Home".
    pub label: String,
    /// Why it is offered: `owner`, `approver`, `allowed` (named in the file), `paired`,
    /// `conversation`.
    pub reason: &'static str,
    /// A person's private chat the form may preselect (the first one offered is the default).
    pub default_candidate: bool,
}

fn known_agent(state: &StudioState, agent: &str) -> Result<(), ApiError> {
    if state.agents.get().iter().any(|entry| entry.name == agent) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "`agent`: no agent is named `{agent}`"
        )))
    }
}

fn has_bot(state: &StudioState, agent: &str) -> bool {
    state
        .agents
        .get()
        .iter()
        .any(|entry| entry.name == agent && entry.telegram)
}

/// A person an agent's answers can go to (their private chat), with why they are offered.
struct Person {
    user_id: i64,
    name: Option<String>,
    /// `owner`, `approver`, `allowed` (named in the file) or `paired`.
    reason: &'static str,
}

impl Person {
    fn chat(&self) -> String {
        ChatKey::telegram(self.user_id).to_string()
    }

    /// "Olivia — private chat (owner)".
    fn label(&self) -> String {
        let who = self
            .name
            .clone()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or_else(|| format!("Telegram user {}", self.user_id));
        let role = match self.reason {
            "owner" => " (owner)",
            "approver" => " (approver)",
            "paired" => " (paired)",
            _ => "",
        };
        format!("{who} — private chat{role}")
    }
}

/// The people who talk to `agent`, in the order they are offered: its owner, the approvers and
/// allowed users its file names, paired people (each once).
fn people_of(
    conn: &rusqlite::Connection,
    agent: &str,
    approvers: &[i64],
    allowed: &[i64],
) -> crate::store::Result<Vec<Person>> {
    let stored: Vec<_> = people_queries::people(conn)?
        .into_iter()
        .filter(|person| person.agent == agent && person.status.may_talk())
        .collect();
    let mut people: Vec<Person> = Vec::new();
    let mut add = |person: Person| {
        if !people.iter().any(|known| known.user_id == person.user_id) {
            people.push(person);
        }
    };
    for owner in stored.iter().filter(|p| p.status == PersonStatus::Owner) {
        add(Person {
            user_id: owner.user_id,
            name: Some(owner.name.clone()),
            reason: "owner",
        });
    }
    for user_id in approvers.iter().chain(allowed) {
        add(Person {
            user_id: *user_id,
            name: people_queries::known_name(conn, agent, *user_id)?,
            reason: if approvers.contains(user_id) {
                "approver"
            } else {
                "allowed"
            },
        });
    }
    for paired in stored.iter().filter(|p| p.status == PersonStatus::Paired) {
        add(Person {
            user_id: paired.user_id,
            name: Some(paired.name.clone()),
            reason: "paired",
        });
    }
    Ok(people)
}

/// The file's approvers and allowed users of `agent`.
fn file_people(state: &StudioState, agent: &str) -> (Vec<i64>, Vec<i64>) {
    state
        .people
        .get()
        .iter()
        .find(|file| file.agent == agent)
        .map(|file| (file.approvers.clone(), file.allow_users.clone()))
        .unwrap_or_default()
}

/// Where `agent`'s answers can go, by name: its owner, the people its file names, paired people,
/// then its other Telegram conversations (newest first). None for an agent without a bot.
pub async fn targets(state: &StudioState, agent: &str) -> Result<Vec<Target>, ApiError> {
    if !has_bot(state, agent) {
        return Ok(Vec::new());
    }
    let (approvers, allowed) = file_people(state, agent);
    let owned = agent.to_string();
    let (people, chats) = state
        .store
        .read(move |conn| {
            Ok((
                people_of(conn, &owned, &approvers, &allowed)?,
                queries::delivery_chats(conn, &owned, CONVERSATIONS)?,
            ))
        })
        .await?;
    let mut offered: Vec<Target> = people
        .iter()
        .map(|person| Target {
            chat: person.chat(),
            label: person.label(),
            reason: person.reason,
            default_candidate: true,
        })
        .collect();
    for chat in chats {
        if offered.iter().any(|target| target.chat == chat.chat) {
            continue;
        }
        offered.push(Target {
            label: conversation_label(&chat),
            default_candidate: chat.chat_type.as_deref() == Some("private"),
            chat: chat.chat,
            reason: "conversation",
        });
    }
    Ok(offered)
}

/// A conversation in words, from what its stored updates say of it.
fn conversation_label(chat: &DeliveryChat) -> String {
    let key = ChatKey::parse(&chat.chat);
    let title = chat.title.clone().unwrap_or_else(|| chat_label(&chat.chat));
    let topic = key.as_ref().and_then(ChatKey::telegram_thread_id);
    match (topic, &chat.topic, chat.chat_type.as_deref()) {
        (Some(_), Some(name), _) => format!("“{name}” topic in {title}"),
        (Some(thread), None, _) => format!("topic {thread} in {title}"),
        (None, _, Some("private")) => format!("{title} — private chat"),
        (None, _, Some("channel")) => format!("{title} — channel"),
        (None, _, Some(_)) => format!("{title} — group"),
        (None, _, None) => title,
    }
}

/// A chat key in words when nothing more is known of it.
fn chat_label(chat: &str) -> String {
    match ChatKey::parse(chat) {
        Some(key) => match (key.telegram_chat_id(), key.telegram_thread_id()) {
            (Some(id), Some(thread)) => format!("Telegram chat {id}, topic {thread}"),
            (Some(id), None) => format!("Telegram chat {id}"),
            _ if chat.starts_with("studio:") => "Studio chat".to_string(),
            _ => chat.to_string(),
        },
        None => chat.to_string(),
    }
}

/// Where `agent`'s job answering in `chat` delivers, in words (as [`targets`] words it, looking
/// up only this chat).
async fn label_of(state: &StudioState, agent: &str, chat: &str) -> Result<String, ApiError> {
    let (approvers, allowed) = file_people(state, agent);
    let (owned, key) = (agent.to_string(), chat.to_string());
    let label = state
        .store
        .read(move |conn| {
            if let Some(person) = people_of(conn, &owned, &approvers, &allowed)?
                .into_iter()
                .find(|person| person.chat() == key)
            {
                return Ok(Some(person.label()));
            }
            Ok(queries::delivery_chat(conn, &owned, &key, 0)?
                .map(|found| conversation_label(&found)))
        })
        .await?;
    Ok(label.unwrap_or_else(|| chat_label(chat)))
}

/// Reads a `target` given for `agent`'s job: empty is nobody; a Telegram chat needs the agent to
/// have a bot (nothing else could deliver there).
fn parse_target(
    state: &StudioState,
    agent: &str,
    target: Option<&str>,
) -> Result<Option<ChatKey>, ApiError> {
    let text = match target.map(str::trim) {
        None | Some("") => return Ok(None),
        Some(text) => text,
    };
    let chat = ChatKey::parse(text).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`target` `{text}` is not a chat (like `tg:12345`, `tg:-100123/7` for a forum topic, or `studio:operator`)"
        ))
    })?;
    if chat.telegram_chat_id().is_some() && !has_bot(state, agent) {
        return Err(ApiError::bad_request(format!(
            "`target`: {agent} has no Telegram bot, so nothing can reach `{text}`; leave it empty (answers stay in the schedule's history) or give {agent} a bot first"
        )));
    }
    Ok(Some(chat))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(
        key: &str,
        chat_type: Option<&str>,
        title: Option<&str>,
        topic: Option<&str>,
    ) -> String {
        conversation_label(&DeliveryChat {
            chat: key.to_string(),
            chat_type: chat_type.map(str::to_string),
            title: title.map(str::to_string),
            topic: topic.map(str::to_string),
            updated_ms: 0,
        })
    }

    #[test]
    fn conversations_and_people_are_named_for_people() {
        assert_eq!(
            chat(
                "tg:-100777/7",
                Some("supergroup"),
                Some("Home"),
                Some("Shopping")
            ),
            "“Shopping” topic in Home"
        );
        assert_eq!(
            chat("tg:-100777/9", Some("supergroup"), Some("Home"), None),
            "topic 9 in Home"
        );
        assert_eq!(
            chat("tg:-5", Some("group"), Some("Family"), None),
            "Family — group"
        );
        assert_eq!(
            chat("tg:42", Some("private"), Some("Olivia"), None),
            "Olivia — private chat"
        );
        assert_eq!(chat("tg:42", None, None, None), "Telegram chat 42");
        assert_eq!(chat_label("studio:operator"), "Studio chat");
        let owner = Person {
            user_id: 42,
            name: Some("Olivia".into()),
            reason: "owner",
        };
        assert_eq!(
            (owner.chat().as_str(), owner.label().as_str()),
            ("tg:42", "Olivia — private chat (owner)")
        );
        let unnamed = Person {
            user_id: 7,
            name: None,
            reason: "allowed",
        };
        assert_eq!(unnamed.label(), "Telegram user 7 — private chat");
    }
}

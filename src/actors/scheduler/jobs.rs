//! Managing jobs: create, list, get, update, pause, resume, cancel — validated here, stored,
//! re-armed on the timer, and announced (`schedule_outcome`) so open pages refresh.

use super::*;
use crate::jobs::check::{check_job_limit, check_schedule, check_target, check_text};
use crate::jobs::status::StatusChange;

// ---------------------------------------------------------------------------------------------
// Managing jobs.

pub(super) async fn create(
    myself: &ActorRef<SchedulerEvent>,
    state: &mut SchedulerState,
    new_job: NewJob,
) -> Result<JobView, SchedulerError> {
    let now = state.now();
    if !state
        .args
        .agents
        .iter()
        .any(|spec| spec.name == new_job.agent)
    {
        return Err(format!("no agent is named `{}`", new_job.agent).into());
    }
    let max = u64::from(state.args.config.max_jobs_per_agent);
    let (mut row, checked) = new_job.into_row(&state.args.config, now)?;
    let agent = row.agent.clone();
    let live = state
        .args
        .store
        .read(move |conn| queries::live_count(conn, &agent))
        .await
        .map_err(|error| error.to_string())?;
    check_job_limit(&row.agent, live, max)?;
    let stored = row.clone();
    arm_by(myself, state, checked.next_run_ms);
    row.id = state
        .args
        .store
        .write(move |conn| queries::insert_job(conn, &stored, now))
        .await
        .map_err(|error| error.to_string())?;
    let job = Job {
        zone: zone_of(&row.timezone),
        row,
        spec: checked.spec,
        policy: checked.policy,
        queue: Vec::new(),
        running: None,
    };
    let view = job.view(now);
    let id = job.row.id;
    state.jobs.insert(id, job);
    reschedule(state, id);
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} created: {}", view.schedule),
        EventData::JobChanged {
            job_id: id,
            agent: view.agent.clone(),
            outcome: "created".to_string(),
        },
    );
    Ok(view)
}

/// The job `id` as `scope` may see it (from memory, or the database for finished jobs).
pub(super) async fn find(
    state: &SchedulerState,
    scope: &JobScope,
    id: i64,
) -> Result<JobRow, SchedulerError> {
    let row = match state.jobs.get(&id) {
        Some(job) => Some(job.row.clone()),
        None => state
            .args
            .store
            .read(move |conn| queries::job(conn, id))
            .await
            .map_err(|error| error.to_string())?,
    };
    match row {
        Some(row) if scope.allows(&row) => Ok(row),
        _ => Err(SchedulerError::NotFound { id }),
    }
}

pub(super) fn view_of_row(row: JobRow, now: i64) -> Result<JobView, String> {
    Job::from_row(row).map(|job| job.view(now))
}

pub(super) async fn list(
    state: &SchedulerState,
    scope: &JobScope,
    include_finished: bool,
) -> Result<Vec<JobView>, SchedulerError> {
    let agent = match scope {
        JobScope::Agent(agent) => Some(agent.clone()),
        JobScope::Operator => None,
    };
    let rows = state
        .args
        .store
        .read(move |conn| queries::list_jobs(conn, agent.as_deref(), include_finished, 500))
        .await
        .map_err(|error| error.to_string())?;
    let now = state.now();
    Ok(rows
        .into_iter()
        .filter_map(|row| match state.jobs.get(&row.id) {
            Some(job) => Some(job.view(now)),
            None => view_of_row(row, now).ok(),
        })
        .collect())
}

pub(super) async fn get(
    state: &SchedulerState,
    scope: &JobScope,
    id: i64,
    history: u32,
) -> Result<(JobView, Vec<JobRunRow>), SchedulerError> {
    let row = find(state, scope, id).await?;
    let now = state.now();
    let view = match state.jobs.get(&id) {
        Some(job) => job.view(now),
        None => view_of_row(row, now)?,
    };
    let limit = history.clamp(1, 100);
    let runs = state
        .args
        .store
        .read(move |conn| queries::history(conn, id, limit))
        .await
        .map_err(|error| error.to_string())?;
    Ok((view, runs))
}

/// Ends the queued fires of a job as skipped (pause, cancel, a changed schedule).
pub(super) async fn save(state: &SchedulerState, row: &JobRow) -> Result<(), String> {
    let (row, now) = (row.clone(), state.now());
    state
        .args
        .store
        .write(move |conn| queries::save_job(conn, &row, now))
        .await
        .map_err(|error| error.to_string())
}

pub(super) fn live_job<'a>(
    state: &'a mut SchedulerState,
    row: &JobRow,
) -> Result<&'a mut Job, String> {
    match row.status {
        JobStatus::Done | JobStatus::Cancelled => Err(format!(
            "task #{} is {} and cannot be changed; schedule a new one",
            row.id, row.status
        )),
        _ => state
            .jobs
            .get_mut(&row.id)
            .ok_or_else(|| format!("task #{} is not loaded (its schedule is broken)", row.id)),
    }
}

pub(super) async fn update(
    myself: &ActorRef<SchedulerEvent>,
    state: &mut SchedulerState,
    scope: &JobScope,
    id: i64,
    mut change: JobChange,
) -> Result<JobView, SchedulerError> {
    // An empty zone means "unchanged" (a model filling every field), not UTC.
    change.timezone = change.timezone.filter(|zone| !zone.trim().is_empty());
    let row = find(state, scope, id).await?;
    let now = state.now();
    let config = state.args.config.clone();
    let job = live_job(state, &row)?;
    let mut next = job.row.clone();
    if let Some(name) = &change.name {
        next.name = check_text("name", name, MAX_NAME_CHARS)?;
    }
    if let Some(prompt) = &change.prompt {
        next.prompt = check_text("prompt", prompt, MAX_PROMPT_CHARS)?;
    }
    if let Some(target) = &change.target {
        check_target(target)?;
        next.target_chat = target.as_ref().map(ChatKey::to_string);
    }
    let schedule_changed = change.kind.is_some()
        || change.expression.is_some()
        || change.timezone.is_some()
        || change.missed_policy.is_some();
    let mut checked = None;
    if schedule_changed {
        let kind = change.kind.clone().unwrap_or_else(|| next.kind.clone());
        let expression = change
            .expression
            .clone()
            .unwrap_or_else(|| next.expression.clone());
        let timezone = change
            .timezone
            .clone()
            .unwrap_or_else(|| next.timezone.clone());
        let policy = change
            .missed_policy
            .clone()
            .unwrap_or_else(|| next.missed_policy.clone());
        let result = check_schedule(&config, &kind, &expression, &timezone, &policy, now)?;
        let only_policy =
            change.kind.is_none() && change.expression.is_none() && change.timezone.is_none();
        next.kind = result.spec.kind().as_str().to_string();
        next.expression = expression.trim().to_string();
        next.timezone = result.timezone.clone();
        next.missed_policy = result.policy.to_string();
        if !only_policy {
            next.anchor_ms = result.anchor_ms;
            if next.status == JobStatus::Active {
                next.next_run_ms = Some(result.next_run_ms);
            }
        }
        checked = Some((result, only_policy));
    }
    if let Some(next_run_ms) = next.next_run_ms {
        arm_by(myself, state, next_run_ms);
    }
    save(state, &next).await?;
    let Some(job) = state.jobs.get_mut(&id) else {
        return Err(format!("task #{id} disappeared").into());
    };
    if let Some((result, only_policy)) = checked {
        job.policy = result.policy;
        if !only_policy {
            job.spec = result.spec;
            job.zone = zone_of(&result.timezone);
        }
    }
    job.row = next;
    let view = job.view(now);
    reschedule(state, id);
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} updated: {}", view.schedule),
        EventData::JobChanged {
            job_id: id,
            agent: view.agent.clone(),
            outcome: "updated".to_string(),
        },
    );
    Ok(view)
}

pub(super) async fn set_paused(
    myself: &ActorRef<SchedulerEvent>,
    state: &mut SchedulerState,
    scope: &JobScope,
    id: i64,
    paused: bool,
) -> Result<JobView, SchedulerError> {
    let change = if paused {
        StatusChange::Pause
    } else {
        StatusChange::Resume
    };
    change_status(myself, state, scope, id, change).await
}

pub(super) async fn cancel(
    myself: &ActorRef<SchedulerEvent>,
    state: &mut SchedulerState,
    scope: &JobScope,
    id: i64,
) -> Result<JobView, SchedulerError> {
    change_status(myself, state, scope, id, StatusChange::Cancel).await
}

/// Pauses, resumes or cancels a job by the rules `StatusChange::decide` states (the same ones
/// `clawvisor jobs` follows with the daemon stopped), then brings the timer and the job in
/// memory along: its queued fires dropped, its next time armed, a cancelled job's run in
/// progress stopped.
async fn change_status(
    myself: &ActorRef<SchedulerEvent>,
    state: &mut SchedulerState,
    scope: &JobScope,
    id: i64,
    change: StatusChange,
) -> Result<JobView, SchedulerError> {
    let row = find(state, scope, id).await?;
    let now = state.now();
    let job = live_job(state, &row)?;
    let transition = change.decide(&job.row, Some(&job.spec), now)?;
    if !transition.changed {
        return Ok(job.view(now));
    }
    let running = job.running.is_some();
    let queued: Vec<i64> = if transition.skips_queued() {
        job.queue
            .drain(..)
            .map(|queued| queued.job_run_id)
            .collect()
    } else {
        Vec::new()
    };
    if let Some(next_run_ms) = transition.row.next_run_ms {
        arm_by(myself, state, next_run_ms);
    }
    let next = transition.row.clone();
    state
        .args
        .store
        .write(move |conn| transition.write(conn, &queued, now))
        .await
        .map_err(|error| error.to_string())?;
    let view = {
        let Some(job) = state.jobs.get_mut(&id) else {
            return Err(format!("task #{id} disappeared").into());
        };
        job.row = next;
        job.view(now)
    };
    if change == StatusChange::Cancel {
        if running {
            // The run in progress is stopped; its answer is recorded but not delivered.
            if let Some(agent) = state
                .args
                .registry
                .lookup(&crate::protocol::agent::name(&view.agent))
            {
                let _ = agent.cast(AgentMsg::Command(
                    ChatKey::schedule(id),
                    SessionCommand::Stop,
                ));
            }
        } else {
            state.jobs.remove(&id);
        }
    } else {
        reschedule(state, id);
    }
    let outcome = change.outcome();
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} {outcome}"),
        EventData::JobChanged {
            job_id: id,
            agent: view.agent.clone(),
            outcome: outcome.to_string(),
        },
    );
    Ok(view)
}

pub(super) fn stats(state: &SchedulerState) -> SchedulerStats {
    SchedulerStats {
        jobs: state.jobs.len(),
        heap_entries: state.heap.len(),
        timers_armed: usize::from(
            state
                .timer
                .as_ref()
                .is_some_and(|(_, timer)| !timer.is_finished()),
        ),
        timer_at_ms: state.timer.as_ref().map(|(at, _)| *at),
        ticks: state.ticks,
        dispatched: state.dispatched,
        running: state
            .jobs
            .values()
            .filter(|job| job.running.is_some())
            .count(),
        queued: state.jobs.values().map(|job| job.queue.len()).sum(),
        next_wake_ms: state.jobs.values().filter_map(Job::wake_ms).min(),
    }
}

/// Jobs whose stored schedule no longer reads (say, a timezone a newer tz database renamed):
/// paused, marked failing and reported — never dropped silently.
pub(super) async fn pause_broken(
    state: &SchedulerState,
    broken: Vec<(JobRow, String)>,
) -> Result<(), ActorProcessingErr> {
    let now = state.now();
    for (row, error) in &broken {
        tracing::error!(job = row.id, %error, "a stored task's schedule does not read; it is paused");
        state.args.events.publish_data(
            EventKind::ScheduleOutcome,
            &format!("job:{}", row.id),
            &format!(
                "task #{} paused: its schedule does not read ({error})",
                row.id
            ),
            EventData::JobChanged {
                job_id: row.id,
                agent: row.agent.clone(),
                outcome: "broken".to_string(),
            },
        );
    }
    state
        .args
        .store
        .write(move |conn| {
            for (row, _) in &broken {
                let mut row = row.clone();
                row.status = JobStatus::Paused;
                row.next_run_ms = None;
                row.failing = true;
                queries::save_job(conn, &row, now)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

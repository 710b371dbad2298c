//! Run now: the operator fires a job once, besides its schedule. The fire is recorded like a
//! timer's — a `job_runs` row (trigger `manual`, queued, its key unique) committed before its
//! message is sent — and then goes the way of every fire (`dispatch`): marked running, sent to
//! the agent, answered into the job's target chat, retried when it fails.
//!
//! Invariants: a job never runs twice at once, so run now is refused while the job runs or has a
//! fire waiting to start; a paused job runs nothing, and a finished one is not changed.

use super::*;

/// Fires job `id` now (see the module header); the job and the fire's history row.
pub(super) async fn run_now(
    state: &mut SchedulerState,
    scope: &JobScope,
    id: i64,
) -> Result<(JobView, JobRunRow), SchedulerError> {
    let row = find(state, scope, id).await?;
    let now = state.now();
    let job = live_job(state, &row)?;
    let name = job.row.name.clone();
    if job.row.status == JobStatus::Paused {
        return Err(format!("task #{id} \"{name}\" is paused; resume it to run it").into());
    }
    if job.running.is_some() {
        return Err(SchedulerError::Busy(format!(
            "task #{id} \"{name}\" is running now; wait for this run to finish, then run it again"
        )));
    }
    if !job.queue.is_empty() {
        return Err(SchedulerError::Busy(format!(
            "task #{id} \"{name}\" has a run waiting to start (a retry or a late run); wait for it to finish"
        )));
    }
    let inserted = state
        .args
        .store
        .write(move |conn| {
            queries::insert_run(
                conn,
                &NewJobRun {
                    job_id: id,
                    fire_ms: now,
                    attempt: 1,
                    trigger: "manual",
                    status: JobRunStatus::Queued,
                    due_ms: now,
                    missed_count: None,
                    detail: None,
                },
                now,
            )
        })
        .await
        .map_err(|error| error.to_string())?;
    let Some(job_run_id) = inserted else {
        return Err(SchedulerError::Busy(format!(
            "a run of task #{id} was recorded at this very moment; wait for it to finish"
        )));
    };
    if let Some(job) = state.jobs.get_mut(&id) {
        job.enqueue(Queued {
            job_run_id,
            fire_ms: now,
            attempt: 1,
            due_ms: now,
        });
    }
    // From here the fire is durable: were the dispatch to fail, the next tick sends it.
    dispatch(state, &[id], now)
        .await
        .map_err(|error| error.to_string())?;
    reschedule(state, id);
    let view = match state.jobs.get(&id) {
        Some(job) => job.view(now),
        None => return Err(format!("task #{id} disappeared").into()),
    };
    let fire = state
        .args
        .store
        .read(move |conn| queries::job_run(conn, job_run_id))
        .await
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("the run of task #{id} just recorded was not found"))?;
    Ok((view, fire))
}

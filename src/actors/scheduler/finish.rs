//! Answers: a scheduled run's final answer ends its fire (and writes the reply's outbox row in the
//! same transaction); failures are retried, then the job is marked failing and its chat told.

use super::*;

// ---------------------------------------------------------------------------------------------
// Answers.

pub(super) enum Ending {
    Succeeded(String),
    Failed(String),
    /// The job was cancelled while the run went on.
    Cancelled,
}

pub(super) async fn on_deliver(
    state: &mut SchedulerState,
    outbound: Outbound,
) -> Result<(), ActorProcessingErr> {
    let OutEvent::Final { text, .. } = &outbound.event else {
        return Ok(());
    };
    if outbound.chat.kind() != ChatKind::Schedule {
        return Ok(());
    }
    let Ok(id) = outbound.chat.id().parse::<i64>() else {
        return Ok(());
    };
    let Some(running) = state.jobs.get(&id).and_then(|job| job.running.clone()) else {
        tracing::debug!(
            job = id,
            "an answer for a task with no run in progress (already recorded)"
        );
        return Ok(());
    };
    if let Some(correlation_id) = &outbound.correlation
        && *correlation_id != correlation(running.job_run_id)
    {
        tracing::debug!(job = id, %correlation_id, "an answer for an earlier run of the task; ignored");
        return Ok(());
    }
    let status = match outbound.run_id {
        Some(run_id) => state
            .args
            .store
            .read(move |conn| runs::get(conn, run_id))
            .await?
            .map(|run| run.status),
        None => None,
    };
    let now = state.now();
    let cancelled = state
        .jobs
        .get(&id)
        .is_some_and(|job| job.row.status == JobStatus::Cancelled);
    let ending = match status {
        _ if cancelled => Ending::Cancelled,
        None | Some(RunStatus::Succeeded) => Ending::Succeeded(text.clone()),
        Some(status) => Ending::Failed(format!("{}: {}", status.as_str(), shorten(text, 300))),
    };
    finish(
        state,
        id,
        running.job_run_id,
        running.attempt,
        ending,
        outbound.run_id,
        now,
    )
    .await?;
    reschedule(state, id);
    Ok(())
}

/// Ends a fire: records it, updates the job (failures, retry, failing), delivers the answer.
pub(super) async fn finish(
    state: &mut SchedulerState,
    id: i64,
    job_run_id: i64,
    attempt: i64,
    ending: Ending,
    run_id: Option<i64>,
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let Some(job) = state.jobs.get(&id) else {
        return Ok(());
    };
    let retries = &state.args.config.retry_backoff;
    let mut row = job.row.clone();
    let target = row.target_chat.as_deref().and_then(ChatKey::parse);
    let (status, detail, retry_at, answer, became_failing) = match &ending {
        Ending::Succeeded(text) => {
            row.consecutive_failures = 0;
            row.failing = false;
            row.last_outcome = Some("succeeded".into());
            (
                JobRunStatus::Succeeded,
                shorten(text, 500),
                None,
                Some(text.clone()),
                false,
            )
        }
        Ending::Failed(reason) => {
            row.consecutive_failures += 1;
            row.last_outcome = Some("failed".into());
            let retry = usize::try_from(attempt)
                .ok()
                .and_then(|attempt| retries.get(attempt.saturating_sub(1)))
                .filter(|_| job.accepts_work() && attempt > 0)
                .map(|wait| now + i64::try_from(wait.0.as_millis()).unwrap_or(i64::MAX / 4));
            // Out of retries: failing (a paused or cancelled job is not retried, nor flagged).
            let out_of_retries = retry.is_none() && job.accepts_work();
            let became_failing = out_of_retries && !row.failing;
            if out_of_retries {
                row.failing = true;
            }
            (
                JobRunStatus::Failed,
                shorten(reason, 500),
                retry,
                None,
                became_failing,
            )
        }
        Ending::Cancelled => {
            row.last_outcome = Some("cancelled".into());
            (
                JobRunStatus::Skipped,
                "the task was cancelled during its run".to_string(),
                None,
                None,
                false,
            )
        }
    };
    let failing_notice = became_failing.then(|| {
        let next = row
            .next_run_ms
            .map(|next| format!("its next run is at {}", format_local(next, job.zone)))
            .unwrap_or_else(|| "it has no further runs".to_string());
        format!(
            "Scheduled task #{id} \"{}\" failed {} time(s) in a row and is marked failing ({}); {next}. \
             Last error: {}",
            row.name,
            row.consecutive_failures,
            if retries.is_empty() { "retries are off".to_string() } else { format!("after {} retries", retries.len()) },
            shorten(&detail, 200)
        )
    });
    let deliver_text = match (&answer, &failing_notice) {
        (Some(answer), _) => Some(answer.clone()),
        (None, Some(notice)) => Some(notice.clone()),
        _ => None,
    };
    let outbox_target = target
        .as_ref()
        .filter(|chat| chat.kind() == ChatKind::Telegram && deliver_text.is_some())
        .map(|chat| chat.as_str().to_string());
    let (agent, fire_ms) = (
        row.agent.clone(),
        job.running.as_ref().map_or(0, |r| r.fire_ms),
    );
    let fire_ms = if fire_ms == 0 {
        state
            .args
            .store
            .read(move |conn| queries::job_run(conn, job_run_id))
            .await?
            .map_or(now, |run| run.fire_ms)
    } else {
        fire_ms
    };
    let stored_row = row.clone();
    let stored_text = deliver_text.clone();
    let written = state
        .args
        .store
        .write(move |conn| {
            if !queries::finish_run(conn, job_run_id, status, run_id, Some(&detail), now)? {
                return Ok(None);
            }
            let retry_id = match retry_at {
                Some(due_ms) => queries::insert_run(
                    conn,
                    &NewJobRun {
                        job_id: stored_row.id,
                        fire_ms,
                        attempt: attempt + 1,
                        trigger: "retry",
                        status: JobRunStatus::Queued,
                        due_ms,
                        missed_count: None,
                        detail: None,
                    },
                    now,
                )?,
                None => None,
            };
            queries::save_job(conn, &stored_row, now)?;
            let outbox_id = match (&outbox_target, &stored_text) {
                (Some(chat), Some(text)) => Some(crate::store::outbox::enqueue_reply(
                    conn,
                    &agent,
                    chat,
                    None,
                    text,
                    &[],
                    now,
                )?),
                _ => None,
            };
            Ok(Some((retry_id, outbox_id)))
        })
        .await?;
    let Some(job) = state.jobs.get_mut(&id) else {
        return Ok(());
    };
    if job
        .running
        .as_ref()
        .is_some_and(|running| running.job_run_id == job_run_id)
    {
        job.running = None;
    }
    let Some((retry_id, outbox_id)) = written else {
        return Ok(());
    };
    job.row = row;
    if let (Some(retry_id), Some(due_ms)) = (retry_id, retry_at) {
        job.enqueue(Queued {
            job_run_id: retry_id,
            fire_ms,
            attempt: attempt + 1,
            due_ms,
        });
    }
    let outcome = if became_failing {
        "failing"
    } else {
        status.as_str()
    };
    state.args.events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{id}"),
        &format!("task #{id} run {job_run_id} {outcome}"),
        EventData::JobRunFinished {
            job_id: id,
            job_run_id,
            agent: job.row.agent.clone(),
            outcome: outcome.to_string(),
            run_id,
            retry_at_ms: retry_at,
        },
    );
    if job.row.status == JobStatus::Cancelled && job.running.is_none() {
        state.jobs.remove(&id);
        return Ok(());
    }
    if let (Some(target), Some(text)) = (target, deliver_text) {
        deliver(
            &state.args.registry,
            &job.row.agent,
            &target,
            run_id,
            text,
            outbox_id,
        );
    }
    Ok(())
}

/// Shows `text` in a job's target chat: Telegram through the outbox (the bot marks it
/// delivered), local chats as a notice. A silent job's notices go to Studio's events only.
pub(super) async fn tell(state: &SchedulerState, agent: &str, target: Option<&str>, text: String) {
    let Some(target) = target.and_then(ChatKey::parse) else {
        return;
    };
    let outbox_id = if target.kind() == ChatKind::Telegram {
        let (agent, chat, body) = (agent.to_string(), target.to_string(), text.clone());
        let now = state.now();
        match state
            .args
            .store
            .write(move |conn| {
                crate::store::outbox::enqueue_reply(conn, &agent, &chat, None, &body, &[], now)
            })
            .await
        {
            Ok(id) => Some(id),
            Err(error) => {
                tracing::warn!(%error, "could not queue a scheduler notice");
                return;
            }
        }
    } else {
        None
    };
    deliver(&state.args.registry, agent, &target, None, text, outbox_id);
}

pub(super) fn deliver(
    registry: &Registry,
    agent: &str,
    target: &ChatKey,
    run_id: Option<i64>,
    text: String,
    outbox_id: Option<i64>,
) {
    let event = match target.kind() {
        ChatKind::Telegram => OutEvent::Final { text, outbox_id },
        _ => OutEvent::Notice { text },
    };
    crate::channels::deliver(
        registry,
        Outbound {
            agent: agent.to_string(),
            chat: target.clone(),
            run_id,
            correlation: None,
            event,
        },
    );
}

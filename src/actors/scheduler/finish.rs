//! Answers: a scheduled run's final answer ends its fire (and writes the reply's outbox row in the
//! same transaction); failures are retried, then the job is marked failing and its chat told.

use rusqlite::Connection;

use super::*;
use crate::config::Dur;

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
    let settled = settle(job, &mut row, &ending, attempt, retries, now);
    let notice = settled
        .became_failing
        .then(|| failing_notice(id, &row, job.zone, retries.len(), &settled.detail));
    let deliver_text = settled.answer.or(notice);
    let running_fire_ms = job.running.as_ref().map_or(0, |r| r.fire_ms);
    let fire = EndedFire {
        id,
        job_run_id,
        attempt,
        fire_ms: fire_time(state, job_run_id, running_fire_ms, now).await?,
        run_id,
        retry_at: settled.retry_at,
        outcome: if settled.became_failing {
            "failing"
        } else {
            settled.status.as_str()
        },
    };
    let write = FinishWrite {
        fire,
        status: settled.status,
        detail: settled.detail,
        agent: row.agent.clone(),
        row: row.clone(),
        outbox: target
            .as_ref()
            .filter(|chat| chat.kind().has_outbox())
            .map(|chat| chat.as_str().to_string())
            .zip(deliver_text.clone()),
        now,
    };
    let written = state
        .args
        .store
        .write(move |conn| write.apply(conn))
        .await?;
    end_in_job(state, fire, row, written, target.zip(deliver_text));
    Ok(())
}

/// Takes an ended fire into its job; when recorded here, its row, retry, event and answer.
fn end_in_job(
    state: &mut SchedulerState,
    fire: EndedFire,
    row: JobRow,
    written: Option<(Option<i64>, Option<i64>)>,
    delivery: Option<(ChatKey, String)>,
) {
    let Some(job) = state.jobs.get_mut(&fire.id) else {
        return;
    };
    if job
        .running
        .as_ref()
        .is_some_and(|running| running.job_run_id == fire.job_run_id)
    {
        job.running = None;
    }
    let Some((retry_id, outbox_id)) = written else {
        return;
    };
    job.row = row;
    if let (Some(retry_id), Some(due_ms)) = (retry_id, fire.retry_at) {
        job.enqueue(Queued {
            job_run_id: retry_id,
            fire_ms: fire.fire_ms,
            attempt: fire.attempt + 1,
            due_ms,
        });
    }
    fire.publish(&state.args.events, &job.row.agent);
    if job.row.status == JobStatus::Cancelled && job.running.is_none() {
        state.jobs.remove(&fire.id);
        return;
    }
    if let Some((target, text)) = delivery {
        deliver(
            &state.args.registry,
            &job.row.agent,
            &target,
            fire.run_id,
            text,
            outbox_id,
        );
    }
}

/// A fire that ended: which it was and how it ended.
#[derive(Debug, Clone, Copy)]
struct EndedFire {
    /// The job.
    id: i64,
    job_run_id: i64,
    attempt: i64,
    fire_ms: i64,
    /// The agent's run, when it had one.
    run_id: Option<i64>,
    /// When the retry is due, when the fire gets one.
    retry_at: Option<i64>,
    /// The row's status, or `failing` when the job just became failing.
    outcome: &'static str,
}

impl EndedFire {
    /// Publishes how the fire of `agent`'s job ended.
    fn publish(&self, events: &EventBus, agent: &str) {
        let EndedFire {
            id,
            job_run_id,
            outcome,
            run_id,
            retry_at,
            ..
        } = *self;
        events.publish_data(
            EventKind::ScheduleOutcome,
            &format!("job:{id}"),
            &format!("task #{id} run {job_run_id} {outcome}"),
            EventData::JobRunFinished {
                job_id: id,
                job_run_id,
                agent: agent.to_string(),
                outcome: outcome.to_string(),
                run_id,
                retry_at_ms: retry_at,
            },
        );
    }
}

/// How a fire ended, as it is recorded.
struct Settled {
    /// The status of the fire's row.
    status: JobRunStatus,
    /// What happened, in words (shortened).
    detail: String,
    /// When the retry is due, when the fire gets one.
    retry_at: Option<i64>,
    /// The run's answer, to deliver to the target chat.
    answer: Option<String>,
    /// Whether this ending made the job failing.
    became_failing: bool,
}

/// Updates the job's `row` for how the fire ended, and says what the fire's row records.
fn settle(
    job: &Job,
    row: &mut JobRow,
    ending: &Ending,
    attempt: i64,
    retries: &[Dur],
    now: i64,
) -> Settled {
    match ending {
        Ending::Succeeded(text) => {
            row.consecutive_failures = 0;
            row.failing = false;
            row.last_outcome = Some("succeeded".into());
            Settled {
                status: JobRunStatus::Succeeded,
                detail: shorten(text, 500),
                retry_at: None,
                answer: Some(text.clone()),
                became_failing: false,
            }
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
            Settled {
                status: JobRunStatus::Failed,
                detail: shorten(reason, 500),
                retry_at: retry,
                answer: None,
                became_failing,
            }
        }
        Ending::Cancelled => {
            row.last_outcome = Some("cancelled".into());
            Settled {
                status: JobRunStatus::Skipped,
                detail: "the task was cancelled during its run".to_string(),
                retry_at: None,
                answer: None,
                became_failing: false,
            }
        }
    }
}

/// What the target chat is told when a job becomes failing.
fn failing_notice(id: i64, row: &JobRow, zone: Tz, retries: usize, detail: &str) -> String {
    let next = row
        .next_run_ms
        .map(|next| format!("its next run is at {}", format_local(next, zone)))
        .unwrap_or_else(|| "it has no further runs".to_string());
    format!(
        "Scheduled task #{id} \"{}\" failed {} time(s) in a row and is marked failing ({}); {next}. \
         Last error: {}",
        row.name,
        row.consecutive_failures,
        if retries == 0 {
            "retries are off".to_string()
        } else {
            format!("after {retries} retries")
        },
        shorten(detail, 200)
    )
}

/// The fire time of job run `job_run_id`: the running fire's, else the stored row's, else now.
async fn fire_time(
    state: &SchedulerState,
    job_run_id: i64,
    running_fire_ms: i64,
    now: i64,
) -> Result<i64, ActorProcessingErr> {
    if running_fire_ms != 0 {
        return Ok(running_fire_ms);
    }
    Ok(state
        .args
        .store
        .read(move |conn| queries::job_run(conn, job_run_id))
        .await?
        .map_or(now, |run| run.fire_ms))
}

/// What ending a fire writes, in one transaction.
struct FinishWrite {
    fire: EndedFire,
    status: JobRunStatus,
    detail: String,
    agent: String,
    /// The job, updated.
    row: JobRow,
    /// The Telegram chat the answer (or notice) is queued for in the outbox, with its text.
    outbox: Option<(String, String)>,
    now: i64,
}

impl FinishWrite {
    /// Ends the fire's row, queues its retry and reply, saves the job; `None`: it had ended.
    fn apply(&self, conn: &Connection) -> crate::store::Result<Option<(Option<i64>, Option<i64>)>> {
        let (fire, now) = (&self.fire, self.now);
        if !queries::finish_run(
            conn,
            fire.job_run_id,
            self.status,
            fire.run_id,
            Some(&self.detail),
            now,
        )? {
            return Ok(None);
        }
        let retry_id = match fire.retry_at {
            Some(due_ms) => queries::insert_run(
                conn,
                &NewJobRun {
                    job_id: self.row.id,
                    fire_ms: fire.fire_ms,
                    attempt: fire.attempt + 1,
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
        queries::save_job(conn, &self.row, now)?;
        let outbox_id = match &self.outbox {
            Some((chat, text)) => Some(crate::store::outbox::enqueue_reply(
                conn,
                &self.agent,
                chat,
                None,
                text,
                &[],
                now,
            )?),
            None => None,
        };
        Ok(Some((retry_id, outbox_id)))
    }
}

/// Shows `text` in a job's target chat: Telegram through the outbox (the bot marks it
/// delivered), local chats as a notice. A silent job's notices go to Studio's events only.
pub(super) async fn tell(state: &SchedulerState, agent: &str, target: Option<&str>, text: String) {
    let Some(target) = target.and_then(ChatKey::parse) else {
        return;
    };
    let outbox_id = if target.kind().has_outbox() {
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
        kind if kind.has_outbox() => OutEvent::Final { text, outbox_id },
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

//! Firing: due jobs become recorded fires, fires become messages to agents, and after a restart
//! running fires are reconciled with the database.

use rusqlite::Connection;

use super::*;

// ---------------------------------------------------------------------------------------------
// Firing.

/// Fire times that did not run, recorded as one `job_runs` row.
#[derive(Debug, Clone)]
pub(super) struct Record {
    /// `missed` or `skipped`.
    status: JobRunStatus,
    /// The first fire time it stands for.
    fire_ms: i64,
    /// How many fire times it stands for.
    count: i64,
    /// What happened, in words.
    detail: String,
}
/// Fire times to queue, with their trigger (`scheduled`, `caught_up`).
pub(super) type Fires = Vec<(i64, &'static str)>;

/// What one regular fire writes.
pub(super) struct FirePlan {
    job_id: i64,
    row: JobRow,
    record: Option<Record>,
    runs: Vec<(i64, &'static str)>,
    notice: Option<String>,
    late: bool,
    skipped_busy: bool,
}

/// Records the regular fires that are due: the runs to queue and the fire times not run.
pub(super) async fn fire_regular(
    state: &mut SchedulerState,
    due: &[i64],
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let grace = i64::try_from(state.args.config.late_grace.0.as_millis()).unwrap_or(120_000);
    let plans: Vec<FirePlan> = due
        .iter()
        .filter_map(|id| plan_fire(state, *id, now, grace))
        .collect();
    if plans.is_empty() {
        return Ok(());
    }
    let inserted = record_fires(state, &plans, now).await?;
    for (plan, ids) in plans.into_iter().zip(inserted) {
        take_fire(state, plan, ids, now).await;
    }
    Ok(())
}

/// Plans job `id`'s regular fire when it is due: next fire time, runs, record and notice.
fn plan_fire(state: &SchedulerState, id: i64, now: i64, grace: i64) -> Option<FirePlan> {
    let job = state.jobs.get(&id)?;
    let due_ms = job.row.next_run_ms.filter(|due_ms| *due_ms <= now)?;
    if job.row.status != JobStatus::Active {
        return None;
    }
    let late = now - due_ms > grace || due_ms < state.started_ms;
    // On time, the latest due fire time runs (several can be due after a short stall);
    // late, the job's own policy decides.
    let policy = if late {
        job.policy
    } else {
        MissedPolicy::RunOnce
    };
    let outcome = policy.resolve(
        &job.spec,
        crate::clock::to_datetime(due_ms),
        crate::clock::to_datetime(now),
    );
    let busy = job.running.is_some() && !late;
    let mut row = job.row.clone();
    row.next_run_ms = outcome.next_run_at.map(|time| time.timestamp_millis());
    if row.next_run_ms.is_none() {
        row.status = JobStatus::Done;
    }
    let trigger = if late { "caught_up" } else { "scheduled" };
    let mut runs: Vec<(i64, &'static str)> = outcome
        .run_now
        .iter()
        .map(|time| (time.timestamp_millis(), trigger))
        .collect();
    let mut record = missed_record(job, &outcome, policy, due_ms, late);
    let skipped_busy = busy && !runs.is_empty();
    if skipped_busy {
        skip_busy_fire(job, &mut runs, &mut record);
    }
    let notice = late.then(|| late_notice(job, &outcome, policy)).flatten();
    Some(FirePlan {
        job_id: id,
        row,
        record,
        runs,
        notice,
        late,
        skipped_busy,
    })
}

/// The record of the fire times that passed without a run (skipped or missed), if any.
fn missed_record(
    job: &Job,
    outcome: &MissedOutcome,
    policy: MissedPolicy,
    due_ms: i64,
    late: bool,
) -> Option<Record> {
    let missed = outcome.missed.value();
    if missed == 0 {
        return None;
    }
    let status = if late && policy == MissedPolicy::Skip {
        JobRunStatus::Skipped
    } else {
        JobRunStatus::Missed
    };
    let first = outcome
        .missed_samples
        .first()
        .map(|time| time.timestamp_millis())
        .unwrap_or(due_ms);
    Some(Record {
        status,
        fire_ms: first,
        count: i64::try_from(missed).unwrap_or(i64::MAX),
        detail: describe_missed(outcome, job.zone, late),
    })
}

/// Takes the first run off a job still running: skipped, unless the fire already has a record.
fn skip_busy_fire(job: &Job, runs: &mut Vec<(i64, &'static str)>, record: &mut Option<Record>) {
    // A job never runs twice at once: this on-time fire is recorded as skipped.
    let (fire_ms, _) = runs.remove(0);
    if record.is_none() {
        *record = Some(Record {
            status: JobRunStatus::Skipped,
            fire_ms,
            count: 1,
            detail: format!(
                "the run of {} was still going at {}",
                format_local(
                    job.running.as_ref().map_or(fire_ms, |r| r.fire_ms),
                    job.zone
                ),
                format_local(fire_ms, job.zone)
            ),
        });
    }
}

/// Writes the planned fires in one transaction; per plan, the ids of its queued runs.
async fn record_fires(
    state: &SchedulerState,
    plans: &[FirePlan],
    now: i64,
) -> Result<Vec<Vec<Option<i64>>>, ActorProcessingErr> {
    let writes: Vec<(JobRow, Option<Record>, Fires)> = plans
        .iter()
        .map(|plan| (plan.row.clone(), plan.record.clone(), plan.runs.clone()))
        .collect();
    let inserted = state
        .args
        .store
        .write(move |conn| {
            let mut all = Vec::with_capacity(writes.len());
            for (row, record, runs) in &writes {
                all.push(write_fire(conn, row, record.as_ref(), runs, now)?);
            }
            Ok(all)
        })
        .await?;
    Ok(inserted)
}

/// Writes one job's fire: its record, its queued runs (`None`: recorded before) and its row.
fn write_fire(
    conn: &Connection,
    row: &JobRow,
    record: Option<&Record>,
    runs: &[(i64, &'static str)],
    now: i64,
) -> crate::store::Result<Vec<Option<i64>>> {
    if let Some(Record {
        status,
        fire_ms,
        count,
        detail,
    }) = record
    {
        queries::insert_run(
            conn,
            &NewJobRun {
                job_id: row.id,
                fire_ms: *fire_ms,
                attempt: 0,
                trigger: "record",
                status: *status,
                due_ms: *fire_ms,
                missed_count: Some(*count),
                detail: Some(detail),
            },
            now,
        )?;
    }
    let mut ids = Vec::with_capacity(runs.len());
    for (fire_ms, trigger) in runs {
        ids.push(queries::insert_run(
            conn,
            &NewJobRun {
                job_id: row.id,
                fire_ms: *fire_ms,
                attempt: 1,
                trigger,
                status: JobRunStatus::Queued,
                due_ms: now,
                missed_count: None,
                detail: None,
            },
            now,
        )?);
    }
    let mut row = row.clone();
    if record.is_some() && runs.is_empty() {
        row.last_outcome = record.map(|record| record.status.to_string());
    }
    queries::save_job(conn, &row, now)?;
    Ok(ids)
}

/// Takes a written fire into its job: outcome, next fire time, queued runs, events, notice.
async fn take_fire(state: &mut SchedulerState, plan: FirePlan, ids: Vec<Option<i64>>, now: i64) {
    let Some(job) = state.jobs.get_mut(&plan.job_id) else {
        return;
    };
    if let Some(record) = &plan.record {
        if plan.runs.is_empty() {
            job.row.last_outcome = Some(record.status.to_string());
        }
        publish_not_run(&state.args.events, &plan, record, &job.row.agent);
    }
    job.row.next_run_ms = plan.row.next_run_ms;
    job.row.status = plan.row.status;
    for ((fire_ms, _), id) in plan.runs.iter().zip(ids) {
        // `None`: this fire was recorded before (the clock went back); it is not run again.
        if let Some(job_run_id) = id {
            job.enqueue(Queued {
                job_run_id,
                fire_ms: *fire_ms,
                attempt: 1,
                due_ms: now,
            });
        }
    }
    if plan.late && !plan.runs.is_empty() {
        state.args.events.publish_data(
            EventKind::ScheduleOutcome,
            &format!("job:{}", plan.job_id),
            &format!("task #{} caught up {} run(s)", plan.job_id, plan.runs.len()),
            EventData::FiresCaughtUp {
                job_id: plan.job_id,
                agent: job.row.agent.clone(),
                count: plan.runs.len(),
            },
        );
    }
    if let Some(text) = plan.notice
        && (plan.record.is_some() || !plan.runs.is_empty())
    {
        let (agent, target) = (job.row.agent.clone(), job.row.target_chat.clone());
        tell(state, &agent, target.as_deref(), text).await;
    }
}

/// Publishes the fire times of a plan that did not run (missed, or skipped).
fn publish_not_run(events: &EventBus, plan: &FirePlan, record: &Record, agent: &str) {
    let Record {
        status,
        count,
        detail,
        ..
    } = record;
    events.publish_data(
        EventKind::ScheduleOutcome,
        &format!("job:{}", plan.job_id),
        &format!("task #{} {status}: {detail}", plan.job_id),
        EventData::FiresNotRun {
            job_id: plan.job_id,
            agent: agent.to_string(),
            outcome: status.to_string(),
            count: *count,
            busy: plan.skipped_busy,
        },
    );
}

/// What to do with a due job's first queued fire.
enum NextFire {
    /// Start it; the job's row carries its new last run time.
    Start(Queued, Box<JobRow>),
    /// Fail it: its agent is not defined.
    UnknownAgent(Queued),
}

/// Sends the first queued fire of each due job that has nothing running.
pub(super) async fn dispatch(
    state: &mut SchedulerState,
    due: &[i64],
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let mut starts: Vec<(i64, Queued, JobRow)> = Vec::new();
    let mut unknown_agent: Vec<(i64, Queued)> = Vec::new();
    for id in due {
        match take_next_fire(state, *id, now) {
            Some(NextFire::Start(queued, row)) => starts.push((*id, queued, *row)),
            Some(NextFire::UnknownAgent(queued)) => unknown_agent.push((*id, queued)),
            None => {}
        }
    }
    for (id, queued) in unknown_agent {
        fail_unknown_agent(state, id, queued, now).await?;
    }
    if starts.is_empty() {
        return Ok(());
    }
    let started = start_runs(state, &starts, now).await?;
    let run_timeout =
        i64::try_from(state.args.config.run_timeout.0.as_millis()).unwrap_or(1_800_000);
    for ((id, queued, row), ok) in starts.into_iter().zip(started) {
        if ok {
            send_started(state, id, queued, row, run_timeout, now);
        }
    }
    Ok(())
}

/// Takes job `id`'s due first queued fire when nothing runs (a booting agent's waits a bit).
fn take_next_fire(state: &mut SchedulerState, id: i64, now: i64) -> Option<NextFire> {
    let job = state.jobs.get_mut(&id)?;
    if job.running.is_some() || !job.accepts_work() {
        return None;
    }
    let first = job
        .queue
        .first()
        .filter(|queued| queued.due_ms <= now)
        .cloned()?;
    if !state
        .args
        .agents
        .iter()
        .any(|spec| spec.name == job.row.agent)
    {
        job.queue.remove(0);
        return Some(NextFire::UnknownAgent(first));
    }
    if state
        .args
        .registry
        .lookup(&crate::protocol::agent::name(&job.row.agent))
        .is_none()
    {
        // Booting or restarting: try again shortly (not a failed attempt).
        job.queue[0].due_ms = now + AGENT_RETRY;
        let queued = job.queue.remove(0);
        job.enqueue(queued);
        return None;
    }
    job.queue.remove(0);
    let mut row = job.row.clone();
    row.last_run_ms = Some(now);
    Some(NextFire::Start(first, Box::new(row)))
}

/// Ends a fire whose agent is not defined as failed, saying what to do about it.
async fn fail_unknown_agent(
    state: &mut SchedulerState,
    id: i64,
    queued: Queued,
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let agent = state
        .jobs
        .get(&id)
        .map(|job| job.row.agent.clone())
        .unwrap_or_default();
    let reason = format!(
        "agent `{agent}` is not defined (no file in the agents directory names it); \
         pause or cancel this task"
    );
    finish(
        state,
        id,
        queued.job_run_id,
        queued.attempt,
        Ending::Failed(reason),
        None,
        now,
    )
    .await
}

/// Marks the fires running and saves their jobs in one transaction; which were still queued.
async fn start_runs(
    state: &SchedulerState,
    starts: &[(i64, Queued, JobRow)],
    now: i64,
) -> Result<Vec<bool>, ActorProcessingErr> {
    let writes: Vec<(i64, JobRow)> = starts
        .iter()
        .map(|(_, queued, row)| (queued.job_run_id, row.clone()))
        .collect();
    let started = state
        .args
        .store
        .write(move |conn| {
            let mut started = Vec::with_capacity(writes.len());
            for (job_run_id, row) in &writes {
                let ok = queries::start_run(conn, *job_run_id, now)?;
                if ok {
                    queries::save_job(conn, row, now)?;
                }
                started.push(ok);
            }
            Ok(started)
        })
        .await?;
    Ok(started)
}

/// Sends a started fire to its agent, marks it running in its job and publishes that it fired.
fn send_started(
    state: &mut SchedulerState,
    id: i64,
    queued: Queued,
    row: JobRow,
    run_timeout: i64,
    now: i64,
) {
    let Some(job) = state.jobs.get_mut(&id) else {
        return;
    };
    job.row.last_run_ms = row.last_run_ms;
    let sent = send_run(&state.args, job, queued.job_run_id, queued.fire_ms, now);
    job.running = Some(Running {
        job_run_id: queued.job_run_id,
        fire_ms: queued.fire_ms,
        attempt: queued.attempt,
        check_at_ms: now + if sent { run_timeout } else { AGENT_RETRY },
    });
    state.dispatched += 1;
    state.args.events.publish_data(
        EventKind::ScheduleFired,
        &format!("job:{id}"),
        &format!(
            "task #{id} \"{}\" fired (due {}, attempt {})",
            job.row.name,
            format_local(queued.fire_ms, job.zone),
            queued.attempt
        ),
        EventData::ScheduleFired {
            job_id: id,
            job_run_id: queued.job_run_id,
            agent: job.row.agent.clone(),
            fire_ms: queued.fire_ms,
            started_ms: now,
            attempt: queued.attempt,
        },
    );
}

/// The start of a fire's message: how its arrival in the session is recognised.
pub fn prompt_marker(job_run_id: i64) -> String {
    format!("[Scheduled run {job_run_id} of task #")
}

/// The correlation id of a fire's run.
pub fn correlation(job_run_id: i64) -> String {
    format!("job-run:{job_run_id}")
}

pub(super) fn prompt_text(job: &Job, job_run_id: i64, fire_ms: i64, now: i64) -> String {
    let late = if now - fire_ms > 60_000 {
        format!(", running late at {}", format_local(now, job.zone))
    } else {
        String::new()
    };
    format!(
        "{}{} \"{}\", due {}{late}]\n{}",
        prompt_marker(job_run_id),
        job.row.id,
        job.row.name,
        format_local(fire_ms, job.zone),
        job.row.prompt
    )
}

/// Sends the fire's message to its agent; `false` when the agent is not reachable.
pub(super) fn send_run(
    args: &SchedulerArgs,
    job: &Job,
    job_run_id: i64,
    fire_ms: i64,
    now: i64,
) -> bool {
    let Some(agent) = args
        .registry
        .lookup(&crate::protocol::agent::name(&job.row.agent))
    else {
        return false;
    };
    let inbound = Inbound {
        agent: job.row.agent.clone(),
        chat: ChatKey::schedule(job.row.id),
        sender: Sender::new("scheduler", "Scheduler"),
        text: prompt_text(job, job_run_id, fire_ms, now),
        attachments: Vec::new(),
        source: InboundSource::Schedule {
            job_id: job.row.id,
            job_run_id,
        },
        received_ms: now,
        context: None,
        correlation: Some(correlation(job_run_id)),
    };
    agent.cast(AgentMsg::Inbound(inbound)).is_ok()
}

/// Looks in the database where a running fire whose check time came got to.
pub(super) async fn reconcile(
    state: &mut SchedulerState,
    id: i64,
    now: i64,
) -> Result<(), ActorProcessingErr> {
    let Some(job) = state.jobs.get(&id) else {
        return Ok(());
    };
    let Some(running) = job
        .running
        .clone()
        .filter(|running| running.check_at_ms <= now)
    else {
        return Ok(());
    };
    let (agent, chat) = (job.row.agent.clone(), ChatKey::schedule(id).to_string());
    let marker = prompt_marker(running.job_run_id);
    let found = state
        .args
        .store
        .read(move |conn| {
            let Some(run_id) = queries::delivered_prompt(conn, &agent, &chat, &marker)? else {
                return Ok(None);
            };
            let run = match run_id {
                Some(run_id) => runs::get(conn, run_id)?,
                None => None,
            };
            Ok(Some((run_id, run)))
        })
        .await?;
    let run_timeout =
        i64::try_from(state.args.config.run_timeout.0.as_millis()).unwrap_or(1_800_000);
    match found {
        None => {
            // The message never reached the session (a crash between recording the fire and
            // sending it, or the agent was down): the same fire is sent again.
            let Some(job) = state.jobs.get_mut(&id) else {
                return Ok(());
            };
            let sent = send_run(&state.args, job, running.job_run_id, running.fire_ms, now);
            if sent {
                tracing::info!(
                    job = id,
                    job_run = running.job_run_id,
                    "a scheduled run's message was sent again (it had not reached the agent)"
                );
            }
            if let Some(running) = job.running.as_mut() {
                running.check_at_ms = now + if sent { run_timeout } else { AGENT_RETRY };
            }
        }
        Some((Some(run_id), Some(run))) if !run.status.is_open() => {
            // The run ended but its answer never reached this actor.
            let text = run.outcome.clone().unwrap_or_default();
            let ending = if run.status == RunStatus::Succeeded {
                Ending::Succeeded(text)
            } else {
                Ending::Failed(format!("{}: {}", run.status.as_str(), shorten(&text, 300)))
            };
            finish(
                state,
                id,
                running.job_run_id,
                running.attempt,
                ending,
                Some(run_id),
                now,
            )
            .await?;
        }
        Some(_) => {
            // In the session (pending or running): the session resumes it and answers.
            if let Some(running) = state.jobs.get_mut(&id).and_then(|job| job.running.as_mut()) {
                running.check_at_ms = now + run_timeout;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Text.

pub(super) fn describe_missed(outcome: &MissedOutcome, zone: Tz, late: bool) -> String {
    let samples: Vec<String> = outcome
        .missed_samples
        .iter()
        .map(|time| format_local(time.timestamp_millis(), zone))
        .collect();
    let when = if late {
        "while the scheduler was not running"
    } else {
        "while the scheduler was busy"
    };
    format!(
        "{} fire time(s) passed {when}: {}",
        outcome.missed,
        samples.join(", ")
    )
}

/// What the target chat is told when a job was due while the daemon was down.
pub(super) fn late_notice(
    job: &Job,
    outcome: &MissedOutcome,
    policy: MissedPolicy,
) -> Option<String> {
    let runs = outcome.run_now.len();
    let missed = outcome.missed.value();
    if runs == 0 && missed == 0 {
        return None;
    }
    let head = format!("Scheduled task #{} \"{}\"", job.row.id, job.row.name);
    let samples = |times: &[DateTime<Utc>]| -> String {
        times
            .iter()
            .map(|time| format_local(time.timestamp_millis(), job.zone))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ran = match (policy, runs) {
        (_, 0) => String::new(),
        (MissedPolicy::CatchUp { .. }, _) => {
            format!(
                " Catching up {runs} run(s) now: {}.",
                samples(&outcome.run_now)
            )
        }
        _ => format!(
            " Running the one due at {} now, late.",
            samples(&outcome.run_now)
        ),
    };
    let missed_text = match (missed, policy) {
        (0, _) => String::new(),
        (_, MissedPolicy::Skip) => format!(
            " {} run(s) were skipped, as its missed-run policy says: {}.",
            outcome.missed,
            samples(&outcome.missed_samples)
        ),
        _ => format!(
            " {} run(s) were missed: {}.",
            outcome.missed,
            samples(&outcome.missed_samples)
        ),
    };
    Some(format!(
        "{head} was due while I was offline.{ran}{missed_text}"
    ))
}

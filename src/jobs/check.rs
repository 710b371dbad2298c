//! Checking a job: shared by the scheduler and `clawvisor jobs add` on a stopped daemon, so that a
//! job is the same whoever stores it.
//!
//! [`NewJob::into_row`] checks every field: the schedule ([`check_schedule`]: kind, expression in
//! the job's zone, missed-run policy, a first fire after now, fires at least `[scheduler]
//! min_interval` apart), the texts and the target chat. Every job stores its zone (the schedule
//! tools give the run's, `agent::zone`, so a time without an offset means the person's local
//! time). The per-agent job limit ([`check_job_limit`]) is the caller's to check.

use std::time::Duration;

use super::{MAX_NAME_CHARS, MAX_PROMPT_CHARS, NewJob};
use crate::config::SchedulerConfig;
use crate::domain::{ChatKey, ChatKind};
use crate::schedule::format::{format_local, shorten};
use crate::schedule::{MissedPolicy, ScheduleKind, ScheduleSpec, parse_timezone};
use crate::store::schedules::{JobRow, JobStatus};

/// A checked schedule: the spec, its policy, the anchor and first fire time to store.
pub struct CheckedSchedule {
    pub spec: ScheduleSpec,
    pub policy: MissedPolicy,
    pub timezone: String,
    pub anchor_ms: i64,
    pub next_run_ms: i64,
}

/// Reads and checks a schedule: its kind, expression, zone (empty: UTC) and missed-run policy,
/// that it fires after `now`, and that its fires are at least `[scheduler] min_interval` apart.
pub fn check_schedule(
    config: &SchedulerConfig,
    kind: &str,
    expression: &str,
    timezone: &str,
    missed_policy: &str,
    now: i64,
) -> Result<CheckedSchedule, String> {
    let timezone = if timezone.trim().is_empty() {
        "UTC"
    } else {
        timezone.trim()
    };
    let zone = parse_timezone(timezone).map_err(|error| error.to_string())?;
    let spec = ScheduleSpec::parse(kind, expression, timezone, crate::clock::to_datetime(now))
        .map_err(|error| error.to_string())?;
    let policy = if missed_policy.trim().is_empty() {
        MissedPolicy::default()
    } else {
        MissedPolicy::parse(missed_policy).map_err(|error| error.to_string())?
    };
    let start = crate::clock::to_datetime(now);
    let upcoming = spec.preview(start, 3);
    let Some(first) = upcoming.first() else {
        return Err(match spec.kind() {
            ScheduleKind::At => format!(
                "the time `{}` is in the past (it is now {}); give a future time",
                expression.trim(),
                format_local(now, zone)
            ),
            _ => format!("`{}` never fires after now", expression.trim()),
        });
    };
    let min_gap = i64::try_from(config.min_interval.0.as_millis()).unwrap_or(60_000);
    let gap = upcoming
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).num_milliseconds())
        .min();
    if let Some(gap) = gap
        && gap < min_gap
    {
        return Err(format!(
            "`{}` fires every {} but the shortest interval allowed is {} ([scheduler] min_interval)",
            expression.trim(),
            humantime::format_duration(Duration::from_millis(u64::try_from(gap).unwrap_or(0))),
            humantime::format_duration(config.min_interval.0)
        ));
    }
    let anchor_ms = match &spec {
        ScheduleSpec::Every { anchor, .. } => anchor.timestamp_millis(),
        _ => now,
    };
    Ok(CheckedSchedule {
        next_run_ms: first.timestamp_millis(),
        spec,
        policy,
        timezone: zone.name().to_string(),
        anchor_ms,
    })
}

/// A required text field, trimmed, at most `max` characters.
pub fn check_text(field: &str, text: &str, max: usize) -> Result<String, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("`{field}` is empty"));
    }
    if trimmed.chars().count() > max {
        return Err(format!(
            "`{field}` is longer than {max} characters; shorten it"
        ));
    }
    Ok(trimmed.to_string())
}

/// Answers go to a Telegram or local chat, never to a scheduled or handoff conversation.
pub fn check_target(target: &Option<ChatKey>) -> Result<(), String> {
    match target {
        Some(chat) if matches!(chat.kind(), ChatKind::Schedule | ChatKind::Handoff) => Err(
            format!("answers can go to a Telegram or local chat, not `{chat}`"),
        ),
        _ => Ok(()),
    }
}

/// Refuses a job beyond `[scheduler] max_jobs_per_agent` (`live`: the agent's active and paused
/// jobs).
pub fn check_job_limit(agent: &str, live: u64, max: u64) -> Result<(), String> {
    if live >= max {
        return Err(format!(
            "{agent} already has {live} tasks (the limit is {max}, [scheduler] max_jobs_per_agent); cancel one first"
        ));
    }
    Ok(())
}

impl NewJob {
    /// The row this job is stored as (id 0), every field checked. Whether the agent exists and
    /// is under its job limit ([`check_job_limit`]) is the caller's to check: that needs the
    /// configured agents and the database.
    pub fn into_row(
        self,
        config: &SchedulerConfig,
        now: i64,
    ) -> Result<(JobRow, CheckedSchedule), String> {
        let prompt = check_text("prompt", &self.prompt, MAX_PROMPT_CHARS)?;
        let name = if self.name.trim().is_empty() {
            shorten(
                &prompt
                    .split_whitespace()
                    .take(6)
                    .collect::<Vec<_>>()
                    .join(" "),
                MAX_NAME_CHARS,
            )
        } else {
            check_text("name", &self.name, MAX_NAME_CHARS)?
        };
        check_target(&self.target)?;
        let checked = check_schedule(
            config,
            &self.kind,
            &self.expression,
            &self.timezone,
            &self.missed_policy,
            now,
        )?;
        let row = JobRow {
            id: 0,
            agent: self.agent,
            name,
            prompt,
            target_chat: self.target.map(|chat| chat.to_string()),
            kind: checked.spec.kind().as_str().to_string(),
            expression: self.expression.trim().to_string(),
            timezone: checked.timezone.clone(),
            anchor_ms: checked.anchor_ms,
            missed_policy: checked.policy.to_string(),
            status: JobStatus::Active,
            next_run_ms: Some(checked.next_run_ms),
            last_run_ms: None,
            last_outcome: None,
            consecutive_failures: 0,
            failing: false,
            created_by: self.created_by,
            created_in: self.created_in.map(|chat| chat.to_string()),
            created_ms: now,
            updated_ms: now,
        };
        Ok((row, checked))
    }
}

//! Pausing, resuming and cancelling: shared by the scheduler and `clawvisor jobs pause | resume |
//! rm` on a stopped daemon, so that a job changes the same way whoever changes it.
//!
//! [`StatusChange::decide`] says what a change does to a job; [`StatusTransition::write`] writes
//! it in the caller's transaction: a paused or cancelled job's queued fires end as skipped, and a
//! one-shot resumed after its time is recorded as missed, never silently dropped.

use crate::schedule::ScheduleSpec;
use crate::store::schedules::{self as queries, JobRow, JobRunStatus, JobStatus, NewJobRun};

/// What the detail of the missed run says when a one-shot's time passed while it was paused.
pub const MISSED_WHILE_PAUSED: &str = "its time passed while it was paused; recorded as missed";

/// A change to a live job's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusChange {
    Pause,
    Resume,
    Cancel,
}

/// What a [`StatusChange`] does to one job, decided by [`StatusChange::decide`] and written by
/// [`StatusTransition::write`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusTransition {
    pub change: StatusChange,
    /// The job as it stands after the change.
    pub row: JobRow,
    /// False when the job already stood so (pausing a paused job, resuming an active one):
    /// nothing is written and nothing is announced.
    pub changed: bool,
    /// A one-shot whose time passed while it was paused: the fire time its missed run is
    /// recorded at (the job is done, its last outcome `missed`).
    pub missed_fire_ms: Option<i64>,
}

impl StatusChange {
    /// The word the change is reported and announced with.
    pub fn outcome(self) -> &'static str {
        match self {
            StatusChange::Pause => "paused",
            StatusChange::Resume => "resumed",
            StatusChange::Cancel => "cancelled",
        }
    }

    /// The audit action an operator's change is recorded as (the CLI's and Studio's).
    pub fn audit_action(self) -> &'static str {
        match self {
            StatusChange::Pause => "job.paused",
            StatusChange::Resume => "job.resumed",
            StatusChange::Cancel => "job.cancelled",
        }
    }

    /// Decides the change for a live job (`row`, whose schedule reads as `spec`) at `now`: a
    /// paused or cancelled job has no next time; a resumed one's next time is recomputed from
    /// its schedule, and a one-shot whose time passed while it was paused is done and recorded
    /// as missed, never silently dropped. Whether the job is live is the caller's to check.
    /// Only resuming needs the schedule: a job whose schedule no longer reads (`None`) can still
    /// be paused or cancelled.
    pub fn decide(
        self,
        row: &JobRow,
        spec: Option<&ScheduleSpec>,
        now: i64,
    ) -> Result<StatusTransition, String> {
        let mut next = row.clone();
        let mut missed_fire_ms = None;
        let changed = match self {
            StatusChange::Pause if row.status == JobStatus::Paused => false,
            StatusChange::Resume if row.status == JobStatus::Active => false,
            StatusChange::Pause => {
                next.status = JobStatus::Paused;
                next.next_run_ms = None;
                true
            }
            StatusChange::Cancel => {
                next.status = JobStatus::Cancelled;
                next.next_run_ms = None;
                true
            }
            StatusChange::Resume => {
                let Some(spec) = spec else {
                    return Err(format!(
                        "task #{}'s schedule does not read; cancel it and add a new one",
                        row.id
                    ));
                };
                next.status = JobStatus::Active;
                next.next_run_ms = spec
                    .next_after(crate::clock::to_datetime(now))
                    .map(|time| time.timestamp_millis());
                if next.next_run_ms.is_none() {
                    next.status = JobStatus::Done;
                    next.last_outcome = Some("missed".into());
                    missed_fire_ms = Some(match spec {
                        ScheduleSpec::At(at) => at.timestamp_millis(),
                        _ => row.anchor_ms,
                    });
                }
                true
            }
        };
        Ok(StatusTransition {
            change: self,
            row: next,
            changed,
            missed_fire_ms,
        })
    }
}

impl StatusTransition {
    /// Whether the job's queued fires end as skipped: a paused or cancelled job runs none.
    pub fn skips_queued(&self) -> bool {
        self.changed && self.change != StatusChange::Resume
    }

    /// Writes the change in the caller's transaction: the queued fires `queued_run_ids` (the
    /// job's runs with status `queued`) end as skipped when [`Self::skips_queued`], the missed
    /// run is recorded, and the row is saved. Nothing is written when nothing changed.
    pub fn write(
        &self,
        conn: &rusqlite::Connection,
        queued_run_ids: &[i64],
        now: i64,
    ) -> crate::store::Result<()> {
        if !self.changed {
            return Ok(());
        }
        if self.skips_queued() {
            let reason = format!("the task was {}", self.change.outcome());
            for job_run_id in queued_run_ids {
                queries::finish_run(
                    conn,
                    *job_run_id,
                    JobRunStatus::Skipped,
                    None,
                    Some(&reason),
                    now,
                )?;
            }
        }
        if let Some(fire_ms) = self.missed_fire_ms {
            queries::insert_run(
                conn,
                &NewJobRun {
                    job_id: self.row.id,
                    fire_ms,
                    attempt: 0,
                    trigger: "record",
                    status: JobRunStatus::Missed,
                    due_ms: fire_ms,
                    missed_count: Some(1),
                    detail: Some(MISSED_WHILE_PAUSED),
                },
                now,
            )?;
        }
        queries::save_job(conn, &self.row, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SchedulerConfig;
    use crate::jobs::NewJob;

    /// A stored one-shot job due at `at_ms`, checked at `now` as the scheduler would.
    fn one_shot(at_ms: i64, now: i64) -> (JobRow, ScheduleSpec) {
        let at = crate::clock::to_datetime(at_ms).to_rfc3339();
        let new_job = NewJob {
            agent: "ada".into(),
            name: String::new(),
            prompt: "Ping".into(),
            target: None,
            kind: "at".into(),
            expression: at,
            timezone: "UTC".into(),
            missed_policy: String::new(),
            created_by: "operator".into(),
            created_in: None,
        };
        let (mut row, checked) = new_job
            .into_row(&SchedulerConfig::default(), now)
            .expect("a future one-shot is a valid job");
        row.id = 7;
        (row, checked.spec)
    }

    #[test]
    fn pausing_twice_changes_nothing_and_resuming_after_the_time_records_it_as_missed() {
        let now = 1_800_000_000_000;
        let at_ms = now + 3_600_000;
        let (row, spec) = one_shot(at_ms, now);
        let paused = StatusChange::Pause.decide(&row, None, now).unwrap();
        assert!(paused.changed && paused.skips_queued());
        assert_eq!(
            (paused.row.status, paused.row.next_run_ms),
            (JobStatus::Paused, None)
        );
        let again = StatusChange::Pause.decide(&paused.row, None, now).unwrap();
        assert!(!again.changed && !again.skips_queued());

        // Resuming needs the schedule; a job whose schedule does not read can only be paused
        // or cancelled.
        let refused = StatusChange::Resume.decide(&paused.row, None, now);
        assert!(refused.unwrap_err().contains("cancel it"));

        let early = StatusChange::Resume
            .decide(&paused.row, Some(&spec), now)
            .unwrap();
        assert_eq!(
            (
                early.row.status,
                early.row.next_run_ms,
                early.missed_fire_ms
            ),
            (JobStatus::Active, Some(at_ms), None)
        );
        let late = StatusChange::Resume
            .decide(&paused.row, Some(&spec), at_ms + 1)
            .unwrap();
        assert_eq!(
            (late.row.status, late.row.next_run_ms, late.missed_fire_ms),
            (JobStatus::Done, None, Some(at_ms))
        );
        assert_eq!(late.row.last_outcome.as_deref(), Some("missed"));
        assert!(!late.skips_queued());

        let cancelled = StatusChange::Cancel.decide(&paused.row, None, now).unwrap();
        assert!(cancelled.changed && cancelled.skips_queued());
        assert_eq!(cancelled.row.status, JobStatus::Cancelled);
    }
}

//! Schedule math for the Scheduler: when does a job fire next, and what happens to the fire
//! times missed while the daemon was down. Pure functions of their inputs — no actors, no
//! database, no clock: the caller passes `now`.
//!
//! - [`CronExpr`] reads Unix crontab (5 fields, or 6 with leading seconds, `@weekly` & co.) in an
//!   IANA timezone and translates it for the cron crate, whose dialect differs (see
//!   `cron_expr.rs` for the day-of-week numbering, the day-of-month/day-of-week OR rule and the
//!   daylight-saving rules).
//! - [`ScheduleSpec`] is one of `cron`, `every` (a fixed interval from an anchor) or `at` (once),
//!   with `next_after`, `preview` and `describe`.
//! - [`Recurrence`] is a one-line `every <duration>` or crontab recurrence (scheduled backups).
//! - [`MissedPolicy`] (`skip`, `run_once`, `catch_up`) turns an overdue job into a
//!   [`MissedOutcome`]: which past fire times run now, how many were missed, the next fire time.
//!
//! Invariant: `next_after(t)` is `None` or strictly later than `t`, and is always recomputed
//! from the schedule itself, never by adding an interval to the previous run — so clock jumps,
//! DST changes and late runs cannot make a schedule drift.
//! Invariant: `schedule` knows nothing about jobs, agents, SQLite or tokio.

mod cron_expr;
mod error;
pub mod format;
mod missed;
mod recurrence;
mod spec;
mod timezone;

pub use cron_expr::{ClockChangeRule, CronExpr};
pub use error::{CronField, ScheduleError};
pub use missed::{
    DEFAULT_CATCH_UP_MAX_RUNS, DEFAULT_CATCH_UP_WINDOW, MAX_CATCH_UP_RUNS, MISSED_COUNT_LIMIT,
    MISSED_SAMPLES_PER_END, MissedCount, MissedOutcome, MissedPolicy,
};
pub use recurrence::Recurrence;
pub use spec::{MAX_INTERVAL, MAX_PREVIEW, ScheduleKind, ScheduleSpec};
pub use timezone::{parse_timezone, suggest_timezone};

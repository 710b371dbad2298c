//! Missed runs: what to do with fire times that passed while the daemon was down.
//!
//! [`MissedPolicy::resolve`] is a pure function of the schedule, the job's stored `next_run_at`
//! (the first fire time that was due) and `now`. Every due fire time is accounted for: it is
//! either in [`MissedOutcome::run_now`] or counted in [`MissedOutcome::missed`] — the design's
//! "never silently skipped". Policies:
//! - `skip`: nothing runs; every due time is missed.
//! - `run_once` (the default): the latest due time runs; the others are missed.
//! - `catch_up`: the newest `max_runs` due times that lie within `window` before now run, oldest
//!   first; older or surplus ones are missed. The newest are chosen over the oldest because a
//!   late report about yesterday is worth more than one about last month, and so that
//!   `catch_up` with `max_runs = 1` behaves like `run_once` within its window. A one-shot `at`
//!   job follows the same rule: it runs if it fell due within the window.
//!
//! Invariant: the work is bounded whatever the outage. A job firing every second that was down
//! for a month is not expanded into millions of entries: at most [`MISSED_COUNT_LIMIT`] fire
//! times are walked to count (beyond that the count is a lower bound, [`MissedCount::AtLeast`];
//! `every` jobs are counted exactly by arithmetic), the newest ones are found by searching
//! backwards from now, and only [`MISSED_SAMPLES_PER_END`] samples from each end are kept.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::schedule::error::{ScheduleError, echo};
use crate::schedule::spec::{ScheduleSpec, every_count_between, every_latest_at_or_before};

/// `catch_up` without options runs at most this many missed fire times …
pub const DEFAULT_CATCH_UP_MAX_RUNS: u32 = 3;
/// … of those due within this window before now.
pub const DEFAULT_CATCH_UP_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// The most fire times one catch-up may run; larger `max_runs` values are refused when parsed
/// and clamped when a policy is built by hand.
pub const MAX_CATCH_UP_RUNS: u32 = 100;
/// The most missed fire times walked one by one to count them.
pub const MISSED_COUNT_LIMIT: u64 = 100_000;
/// The most fire times one backward probe walks before the span is bisected instead.
const TAIL_SCAN_LIMIT: usize = 1024;
/// How many of the oldest and how many of the newest missed fire times are kept as samples.
pub const MISSED_SAMPLES_PER_END: usize = 5;

/// What a job does about fire times that passed while the daemon was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissedPolicy {
    Skip,
    #[default]
    RunOnce,
    CatchUp {
        max_runs: u32,
        window: Duration,
    },
}

/// How many due fire times were missed: exact, or a lower bound once counting was capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissedCount {
    Exact(u64),
    AtLeast(u64),
}

impl MissedCount {
    /// The number (exact or lower bound).
    pub fn value(self) -> u64 {
        match self {
            MissedCount::Exact(count) | MissedCount::AtLeast(count) => count,
        }
    }

    fn minus(self, ran: usize) -> MissedCount {
        let ran = u64::try_from(ran).unwrap_or(u64::MAX);
        match self {
            MissedCount::Exact(count) => MissedCount::Exact(count.saturating_sub(ran)),
            MissedCount::AtLeast(count) => MissedCount::AtLeast(count.saturating_sub(ran)),
        }
    }
}

impl fmt::Display for MissedCount {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissedCount::Exact(count) => write!(formatter, "{count}"),
            MissedCount::AtLeast(count) => write!(formatter, "at least {count}"),
        }
    }
}

/// The decision for one overdue job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedOutcome {
    /// Past fire times to run now, oldest first (recorded as "caught up").
    pub run_now: Vec<DateTime<Utc>>,
    /// How many due fire times will not run (recorded as "missed" or "skipped").
    pub missed: MissedCount,
    /// Up to [`MISSED_SAMPLES_PER_END`] of the oldest and of the newest missed fire times,
    /// oldest first, so a record can say "missed 09:00 … 17:00" without listing them all.
    pub missed_samples: Vec<DateTime<Utc>>,
    /// The next fire time strictly after now; `None` when the schedule is over.
    pub next_run_at: Option<DateTime<Utc>>,
}

impl MissedPolicy {
    /// `catch_up` with checked options: 1 to [`MAX_CATCH_UP_RUNS`] runs, a window of at least 1 s.
    pub fn catch_up(max_runs: u32, window: Duration) -> Result<MissedPolicy, ScheduleError> {
        let policy = MissedPolicy::CatchUp { max_runs, window };
        check_catch_up(max_runs, window).map_err(|problem| ScheduleError::MissedPolicy {
            text: policy.to_string(),
            problem,
        })?;
        Ok(policy)
    }

    /// Reads `skip`, `run_once` or `catch_up`, the latter optionally followed by
    /// `max_runs=N` and/or `window=DURATION` (`catch_up max_runs=5 window=6h`). Case and `-`
    /// versus `_` do not matter.
    pub fn parse(text: &str) -> Result<MissedPolicy, ScheduleError> {
        let error = |problem: String| ScheduleError::MissedPolicy {
            text: echo(text),
            problem,
        };
        let normalised = text.trim().to_ascii_lowercase().replace('-', "_");
        let mut words = normalised.split_whitespace();
        let name = words.next().unwrap_or_default();
        let options: Vec<&str> = words.collect();
        let policy = match name {
            "skip" => MissedPolicy::Skip,
            "run_once" => MissedPolicy::RunOnce,
            "catch_up" => {
                let mut max_runs = DEFAULT_CATCH_UP_MAX_RUNS;
                let mut window = DEFAULT_CATCH_UP_WINDOW;
                for option in &options {
                    match option.split_once('=') {
                        Some(("max_runs", value)) => {
                            max_runs = value.parse().map_err(|_| {
                                error(format!("max_runs `{}` is not a whole number", echo(value)))
                            })?;
                        }
                        Some(("window", value)) => {
                            window = humantime::parse_duration(value).map_err(|parse_error| {
                                error(format!(
                                    "window `{}`: {parse_error}; write a duration such as `6h`",
                                    echo(value)
                                ))
                            })?;
                        }
                        _ => {
                            return Err(error(format!(
                                "unknown option `{}`: use `max_runs=N` and `window=DURATION`",
                                echo(option)
                            )));
                        }
                    }
                }
                check_catch_up(max_runs, window).map_err(error)?;
                return Ok(MissedPolicy::CatchUp { max_runs, window });
            }
            _ => {
                return Err(error(
                    "use `skip`, `run_once` or `catch_up` (optionally `catch_up max_runs=3 \
                     window=24h`)"
                        .to_string(),
                ));
            }
        };
        if let Some(option) = options.first() {
            return Err(error(format!(
                "`{}` takes no options, found `{}`",
                policy,
                echo(option)
            )));
        }
        Ok(policy)
    }

    /// Decides what to do about a job whose stored next fire time `due` passed before `now`.
    /// `due` counts as the first due fire time even if the schedule was edited since; when
    /// `due` is still in the future nothing is missed and it stays the next fire time.
    pub fn resolve(
        &self,
        spec: &ScheduleSpec,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> MissedOutcome {
        if due > now {
            return MissedOutcome {
                run_now: Vec::new(),
                missed: MissedCount::Exact(0),
                missed_samples: Vec::new(),
                next_run_at: Some(due),
            };
        }
        let run_capacity = match *self {
            MissedPolicy::Skip => 0,
            MissedPolicy::RunOnce => 1,
            MissedPolicy::CatchUp { max_runs, .. } => max_runs.clamp(1, MAX_CATCH_UP_RUNS) as usize,
        };
        let due_times = DueTimes::collect(spec, due, now, run_capacity + MISSED_SAMPLES_PER_END);

        let run_now: Vec<DateTime<Utc>> = match *self {
            MissedPolicy::Skip => Vec::new(),
            MissedPolicy::RunOnce => due_times.newest.last().copied().into_iter().collect(),
            MissedPolicy::CatchUp { window, .. } => {
                let window_start = TimeDelta::from_std(window)
                    .ok()
                    .and_then(|window| now.checked_sub_signed(window));
                let in_window: Vec<DateTime<Utc>> = due_times
                    .newest
                    .iter()
                    .copied()
                    .filter(|fire_time| window_start.is_none_or(|start| *fire_time >= start))
                    .collect();
                in_window[in_window.len().saturating_sub(run_capacity)..].to_vec()
            }
        };

        let not_run = |fire_time: &DateTime<Utc>| !run_now.contains(fire_time);
        let newest_missed: Vec<DateTime<Utc>> =
            due_times.newest.iter().copied().filter(not_run).collect();
        let mut missed_samples: Vec<DateTime<Utc>> = due_times
            .oldest
            .iter()
            .copied()
            .filter(not_run)
            .take(MISSED_SAMPLES_PER_END)
            .chain(
                newest_missed[newest_missed.len().saturating_sub(MISSED_SAMPLES_PER_END)..]
                    .iter()
                    .copied(),
            )
            .collect();
        missed_samples.sort();
        missed_samples.dedup();

        MissedOutcome {
            missed: due_times.total.minus(run_now.len()),
            run_now,
            missed_samples,
            next_run_at: spec.next_after(now),
        }
    }
}

fn check_catch_up(max_runs: u32, window: Duration) -> Result<(), String> {
    if !(1..=MAX_CATCH_UP_RUNS).contains(&max_runs) {
        return Err(format!(
            "max_runs must be between 1 and {MAX_CATCH_UP_RUNS}, found {max_runs}"
        ));
    }
    if window < Duration::from_secs(1) {
        return Err("window must be at least 1 second".to_string());
    }
    Ok(())
}

impl fmt::Display for MissedPolicy {
    /// The text [`MissedPolicy::parse`] reads back.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MissedPolicy::Skip => formatter.write_str("skip"),
            MissedPolicy::RunOnce => formatter.write_str("run_once"),
            MissedPolicy::CatchUp { max_runs, window } => write!(
                formatter,
                "catch_up max_runs={max_runs} window={}",
                humantime::format_duration(*window)
                    .to_string()
                    .replace(' ', "")
            ),
        }
    }
}

/// The due fire times `{due} ∪ (due, now]`, summarised: a count, the oldest few, the newest few.
struct DueTimes {
    total: MissedCount,
    /// Up to [`MISSED_SAMPLES_PER_END`], oldest first.
    oldest: Vec<DateTime<Utc>>,
    /// Up to the number asked for, oldest first, ending with the latest due time.
    newest: Vec<DateTime<Utc>>,
}

impl DueTimes {
    fn collect(
        spec: &ScheduleSpec,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
        newest_wanted: usize,
    ) -> DueTimes {
        let mut oldest = vec![due];
        let mut cursor = due;
        while oldest.len() < MISSED_SAMPLES_PER_END {
            match spec.next_after(cursor) {
                Some(next) if next <= now => {
                    oldest.push(next);
                    cursor = next;
                }
                _ => break,
            }
        }
        match spec {
            ScheduleSpec::Every { interval, anchor } => DueTimes {
                total: MissedCount::Exact(
                    every_count_between(*interval, *anchor, due, now).saturating_add(1),
                ),
                oldest,
                newest: every_newest(*interval, *anchor, due, now, newest_wanted),
            },
            ScheduleSpec::Cron(_) | ScheduleSpec::At(_) => {
                walk_forward(spec, due, now, newest_wanted, oldest)
            }
        }
    }
}

/// Counts by walking from `due` (at most [`MISSED_COUNT_LIMIT`] steps) while keeping the newest
/// in a ring; if the walk is cut short, the newest are found backwards from `now` instead.
fn walk_forward(
    spec: &ScheduleSpec,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
    newest_wanted: usize,
    oldest: Vec<DateTime<Utc>>,
) -> DueTimes {
    let mut newest = VecDeque::with_capacity(newest_wanted + 1);
    newest.push_back(due);
    let mut count: u64 = 1;
    let mut cursor = due;
    loop {
        let Some(next) = spec.next_after(cursor).filter(|next| *next <= now) else {
            newest.drain(..newest.len().saturating_sub(newest_wanted));
            return DueTimes {
                total: MissedCount::Exact(count),
                oldest,
                newest: newest.into(),
            };
        };
        if count >= MISSED_COUNT_LIMIT {
            let mut newest = newest_before(spec, due, now, newest_wanted);
            if newest.len() < newest_wanted && newest.first() != Some(&due) {
                newest.insert(0, due);
            }
            return DueTimes {
                total: MissedCount::AtLeast(count),
                oldest,
                newest,
            };
        }
        count += 1;
        newest.push_back(next);
        if newest.len() > newest_wanted {
            newest.pop_front();
        }
        cursor = next;
    }
}

/// The newest `wanted` of `{due} ∪ every fire times in (due, now]`, oldest first.
fn every_newest(
    interval: Duration,
    anchor: DateTime<Utc>,
    due: DateTime<Utc>,
    now: DateTime<Utc>,
    wanted: usize,
) -> Vec<DateTime<Utc>> {
    let mut newest = Vec::with_capacity(wanted);
    let step = TimeDelta::from_std(interval).ok();
    let mut cursor = every_latest_at_or_before(interval, anchor, now);
    while let (Some(fire_time), Some(step)) = (cursor, step) {
        if fire_time <= due || newest.len() >= wanted {
            break;
        }
        newest.push(fire_time);
        cursor = fire_time
            .checked_sub_signed(step)
            .filter(|previous| *previous >= anchor);
    }
    if newest.len() < wanted {
        newest.push(due);
    }
    newest.reverse();
    newest
}

/// How one backward probe went.
enum TailScan {
    /// The fire times in the probed span (at most `wanted` of the newest), and how many there were.
    Found(Vec<DateTime<Utc>>, usize),
    /// The span held more than the scan limit.
    TooMany,
}

/// The newest `wanted` fire times in `(after, until]`, oldest first, without walking from
/// `after`: probe spans ending at `until` that double until they hold `wanted`. Fire times are
/// whole, distinct seconds, so growing a span by one second adds at most one fire time; when a
/// doubled span holds too many to walk, bisecting between it and the last short span finds one
/// holding between `wanted` and the scan limit.
fn newest_before(
    spec: &ScheduleSpec,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
    wanted: usize,
) -> Vec<DateTime<Utc>> {
    if wanted == 0 || until <= after {
        return Vec::new();
    }
    let scan_limit = TAIL_SCAN_LIMIT.max(wanted + 1);
    let whole_span = (until - after).num_seconds().saturating_add(1);
    let mut short_span: i64 = 0;
    let mut span = i64::try_from(wanted).unwrap_or(i64::MAX).min(whole_span);
    loop {
        match scan_tail(spec, after, until, span, wanted, scan_limit) {
            TailScan::Found(newest, seen) if seen >= wanted || span >= whole_span => {
                return newest;
            }
            TailScan::Found(..) => {
                short_span = span;
                span = span.saturating_mul(2).min(whole_span);
            }
            TailScan::TooMany => break,
        }
    }
    let mut long_span = span;
    while long_span - short_span > 1 {
        let middle = short_span + (long_span - short_span) / 2;
        match scan_tail(spec, after, until, middle, wanted, scan_limit) {
            TailScan::Found(newest, seen) if seen >= wanted => return newest,
            TailScan::Found(..) => short_span = middle,
            TailScan::TooMany => long_span = middle,
        }
    }
    // Unreachable while fire times are whole distinct seconds; fall back to the short span.
    match scan_tail(spec, after, until, short_span, wanted, scan_limit) {
        TailScan::Found(newest, _) => newest,
        TailScan::TooMany => Vec::new(),
    }
}

/// Walks the fire times in `(max(until - span, after), until]`, keeping the newest `wanted`.
fn scan_tail(
    spec: &ScheduleSpec,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
    span_seconds: i64,
    wanted: usize,
    scan_limit: usize,
) -> TailScan {
    let start = TimeDelta::try_seconds(span_seconds)
        .and_then(|span| until.checked_sub_signed(span))
        .map_or(after, |start| start.max(after));
    let mut newest = VecDeque::with_capacity(wanted + 1);
    let mut seen = 0;
    let mut cursor = start;
    while let Some(next) = spec.next_after(cursor).filter(|next| *next <= until) {
        seen += 1;
        if seen > scan_limit {
            return TailScan::TooMany;
        }
        newest.push_back(next);
        if newest.len() > wanted {
            newest.pop_front();
        }
        cursor = next;
    }
    TailScan::Found(newest.into(), seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn policies_parse_and_print_back() {
        assert_eq!(MissedPolicy::parse("skip"), Ok(MissedPolicy::Skip));
        assert_eq!(MissedPolicy::parse(" Run-Once "), Ok(MissedPolicy::RunOnce));
        assert_eq!(MissedPolicy::default(), MissedPolicy::RunOnce);
        assert_eq!(
            MissedPolicy::parse("catch_up"),
            Ok(MissedPolicy::CatchUp {
                max_runs: DEFAULT_CATCH_UP_MAX_RUNS,
                window: DEFAULT_CATCH_UP_WINDOW
            })
        );
        let custom = MissedPolicy::parse("catch_up window=6h max_runs=5").unwrap();
        assert_eq!(
            custom,
            MissedPolicy::CatchUp {
                max_runs: 5,
                window: Duration::from_secs(6 * 3600)
            }
        );
        for policy in [MissedPolicy::Skip, MissedPolicy::RunOnce, custom] {
            assert_eq!(MissedPolicy::parse(&policy.to_string()), Ok(policy));
        }
        let odd_window = MissedPolicy::catch_up(2, Duration::from_secs(90_061)).unwrap();
        assert_eq!(MissedPolicy::parse(&odd_window.to_string()), Ok(odd_window));
    }

    #[test]
    fn bad_policies_are_refused_with_the_reason() {
        let cases = [
            ("", "use `skip`, `run_once` or `catch_up`"),
            ("later", "use `skip`, `run_once` or `catch_up`"),
            ("skip max_runs=3", "`skip` takes no options"),
            ("catch_up max_runs=0", "max_runs must be between 1 and 100"),
            (
                "catch_up max_runs=1000",
                "max_runs must be between 1 and 100",
            ),
            ("catch_up max_runs=x", "max_runs `x` is not a whole number"),
            ("catch_up window=soon", "window `soon`"),
            ("catch_up window=0s", "window must be at least 1 second"),
            ("catch_up burst=2", "unknown option `burst=2`"),
        ];
        for (text, fragment) in cases {
            let error = MissedPolicy::parse(text).expect_err(text).to_string();
            assert!(error.contains(fragment), "{text:?}: {error}");
            assert!(error.starts_with("missed-run policy"), "{text:?}: {error}");
        }
    }

    #[test]
    fn backward_search_finds_the_newest_without_walking_everything() {
        // Every second: the newest 3 before 12:00:00 are the last three seconds.
        let spec =
            ScheduleSpec::parse("cron", "* * * * * *", "UTC", utc("2026-01-01T00:00:00Z")).unwrap();
        let newest = newest_before(
            &spec,
            utc("2025-06-01T00:00:00Z"),
            utc("2026-01-01T12:00:00Z"),
            3,
        );
        assert_eq!(
            newest,
            vec![
                utc("2026-01-01T11:59:58Z"),
                utc("2026-01-01T11:59:59Z"),
                utc("2026-01-01T12:00:00Z")
            ]
        );
    }

    #[test]
    fn backward_search_handles_a_dense_burst_after_a_long_quiet() {
        // Every second during January only; looking back from November crosses ten quiet months
        // and then a burst far larger than the scan limit: the bisection must land in it.
        let spec =
            ScheduleSpec::parse("cron", "* * * * 1 *", "UTC", utc("2026-01-01T00:00:00Z")).unwrap();
        let newest = newest_before(
            &spec,
            utc("2025-12-31T00:00:00Z"),
            utc("2026-11-01T00:00:00Z"),
            2,
        );
        assert_eq!(
            newest,
            vec![utc("2026-01-31T23:59:58Z"), utc("2026-01-31T23:59:59Z")]
        );
    }
}

//! `ScheduleSpec`: the three kinds of job schedule — `cron`, `every`, `at` — behind one
//! "when next?" question.
//!
//! - `cron`: a [`CronExpr`] in a timezone.
//! - `every`: fires at `anchor + k·interval` for k = 0, 1, 2, …; the interval is a whole number of
//!   seconds, at least 1 s and at most [`MAX_INTERVAL`]. Computed arithmetically from the anchor,
//!   never by adding to the previous fire time, so a late run does not shift the later ones.
//!   The anchor must be persisted with the job: re-parsing with a different `now` moves it.
//! - `at`: fires once. RFC 3339 (`2026-12-01T09:00:00+01:00`) or a local date-time
//!   (`2026-12-01 09:00`) read in the job's timezone; a local time skipped by a clock change
//!   means the first instant after the gap, a repeated one its first occurrence (the same rule
//!   as fixed-time cron jobs).
//!
//! Invariant: `next_after(t)` is either `None` (the schedule is over) or strictly later than `t`.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::{GapInfo, Tz};

use crate::schedule::cron_expr::CronExpr;
use crate::schedule::error::{ScheduleError, echo};
use crate::schedule::timezone::parse_timezone;

/// The longest `every` interval: ten years. Longer intervals are better written as `at`.
pub const MAX_INTERVAL: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);

/// The most fire times [`ScheduleSpec::preview`] returns, whatever is asked.
pub const MAX_PREVIEW: usize = 1000;

const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// The local date-time formats accepted for `at`, besides RFC 3339.
const LOCAL_FORMATS: [&str; 4] = [
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%dT%H:%M:%S",
];

/// The kind of a schedule, as stored and as written in tools (`cron`, `every`, `at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleKind {
    Cron,
    Every,
    At,
}

impl ScheduleKind {
    pub fn parse(text: &str) -> Result<ScheduleKind, ScheduleError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "cron" => Ok(ScheduleKind::Cron),
            "every" => Ok(ScheduleKind::Every),
            "at" => Ok(ScheduleKind::At),
            _ => Err(ScheduleError::UnknownKind(echo(text))),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleKind::Cron => "cron",
            ScheduleKind::Every => "every",
            ScheduleKind::At => "at",
        }
    }
}

impl fmt::Display for ScheduleKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// When a job fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleSpec {
    Cron(CronExpr),
    /// Fires at `anchor + k·interval`, k ≥ 0. Build it with [`ScheduleSpec::every`] to have the
    /// interval checked; an interval under one second never fires.
    Every {
        interval: Duration,
        anchor: DateTime<Utc>,
    },
    /// Fires once.
    At(DateTime<Utc>),
}

impl ScheduleSpec {
    /// Reads a schedule of `kind` (`cron`, `every`, `at`). `timezone` (IANA) is validated for
    /// every kind and used by `cron` and local `at` times; `now` becomes the anchor of `every`
    /// (truncated to whole seconds), so pass the job's stored anchor when reloading a job.
    pub fn parse(
        kind: &str,
        expression: &str,
        timezone: &str,
        now: DateTime<Utc>,
    ) -> Result<ScheduleSpec, ScheduleError> {
        let kind = ScheduleKind::parse(kind)?;
        let zone = parse_timezone(timezone)?;
        match kind {
            ScheduleKind::Cron => CronExpr::parse(expression, timezone).map(ScheduleSpec::Cron),
            ScheduleKind::Every => {
                let interval = parse_interval(expression)?;
                check_interval(interval).map_err(|problem| ScheduleError::Interval {
                    text: echo(expression),
                    problem,
                })?;
                Ok(ScheduleSpec::Every {
                    interval,
                    anchor: truncate_to_second(now),
                })
            }
            ScheduleKind::At => parse_at(expression, zone).map(ScheduleSpec::At),
        }
    }

    /// An `every` schedule with its interval checked: whole seconds, 1 s to [`MAX_INTERVAL`].
    pub fn every(interval: Duration, anchor: DateTime<Utc>) -> Result<ScheduleSpec, ScheduleError> {
        check_interval(interval).map_err(|problem| ScheduleError::Interval {
            text: humantime::format_duration(interval).to_string(),
            problem,
        })?;
        Ok(ScheduleSpec::Every { interval, anchor })
    }

    pub fn kind(&self) -> ScheduleKind {
        match self {
            ScheduleSpec::Cron(_) => ScheduleKind::Cron,
            ScheduleSpec::Every { .. } => ScheduleKind::Every,
            ScheduleSpec::At(_) => ScheduleKind::At,
        }
    }

    /// The first fire time strictly after `after`; `None` when the schedule is over.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            ScheduleSpec::Cron(expression) => expression.next_after(after),
            ScheduleSpec::Every { interval, anchor } => every_next_after(*interval, *anchor, after),
            ScheduleSpec::At(at) => (*at > after).then_some(*at),
        }
    }

    /// The next `count` fire times after `after` (at most [`MAX_PREVIEW`]; fewer when the
    /// schedule ends), earliest first.
    pub fn preview(&self, after: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let mut fire_times = Vec::with_capacity(count.min(MAX_PREVIEW));
        let mut cursor = after;
        while fire_times.len() < count.min(MAX_PREVIEW) {
            let Some(next) = self.next_after(cursor) else {
                break;
            };
            fire_times.push(next);
            cursor = next;
        }
        fire_times
    }

    /// A sentence for humans: "at 09:00 on Monday-Friday (Europe/Berlin)", "every 1h 30m
    /// starting 2026-01-01 00:00:00 UTC", "once at 2026-12-01 08:00:00 UTC".
    pub fn describe(&self) -> String {
        self.describe_in(Tz::UTC)
    }

    /// [`describe`](Self::describe) with the times of `every` and `at` in the job's `zone`:
    /// "once at 2027-01-15 09:00:00 CET (Europe/Berlin)". (A cron expression names its own.)
    pub fn describe_in(&self, zone: Tz) -> String {
        let local = |moment: &DateTime<Utc>| {
            if zone == Tz::UTC {
                moment.format("%Y-%m-%d %H:%M:%S UTC").to_string()
            } else {
                let local = moment.with_timezone(&zone);
                format!("{} ({})", local.format("%Y-%m-%d %H:%M:%S %Z"), zone.name())
            }
        };
        match self {
            ScheduleSpec::Cron(expression) => expression.describe(),
            ScheduleSpec::Every { interval, anchor } => format!(
                "every {} starting {}",
                humantime::format_duration(*interval),
                local(anchor)
            ),
            ScheduleSpec::At(at) => format!("once at {}", local(at)),
        }
    }
}

/// The problem with an `every` interval, if any.
fn check_interval(interval: Duration) -> Result<(), String> {
    if interval < Duration::from_secs(1) {
        return Err("the interval must be at least 1 second".to_string());
    }
    if interval.subsec_nanos() != 0 {
        return Err("the interval must be a whole number of seconds".to_string());
    }
    if interval > MAX_INTERVAL {
        return Err("the interval is longer than the 10-year maximum: use an `at` job".to_string());
    }
    Ok(())
}

/// `every 15m`, `every 1h30m`, or the duration alone (`15m`).
fn parse_interval(text: &str) -> Result<Duration, ScheduleError> {
    let trimmed = text.trim();
    let duration_text = match trimmed.get(..5) {
        Some(prefix) if prefix.eq_ignore_ascii_case("every") => trimmed[5..].trim_start(),
        _ => trimmed,
    };
    if duration_text.is_empty() {
        return Err(ScheduleError::Interval {
            text: echo(text),
            problem: "write a duration such as `every 15m`, `every 1h30m` or `every 1d`"
                .to_string(),
        });
    }
    humantime::parse_duration(duration_text).map_err(|error| ScheduleError::Interval {
        text: echo(text),
        problem: format!(
            "{error}; write a duration such as `every 15m`, `every 1h30m` or `every 1d`"
        ),
    })
}

fn parse_at(text: &str, timezone: Tz) -> Result<DateTime<Utc>, ScheduleError> {
    let trimmed = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(trimmed) {
        return Ok(at.with_timezone(&Utc));
    }
    let local = LOCAL_FORMATS
        .iter()
        .find_map(|format| NaiveDateTime::parse_from_str(trimmed, format).ok())
        .ok_or_else(|| ScheduleError::DateTime {
            text: echo(text),
            problem: "write RFC 3339 (`2026-12-01T09:00:00+01:00`) or a local date-time \
                      (`2026-12-01 09:00`) read in the job's timezone"
                .to_string(),
        })?;
    let instant = match timezone.from_local_datetime(&local) {
        LocalResult::Single(instant) => Some(instant),
        LocalResult::Ambiguous(first_pass, _) => Some(first_pass),
        LocalResult::None => GapInfo::new(&local, &timezone).and_then(|gap| gap.end),
    };
    instant
        .map(|instant| instant.with_timezone(&Utc))
        .ok_or_else(|| ScheduleError::DateTime {
            text: echo(text),
            problem: format!(
                "this local time does not exist in {} and no later time does either",
                timezone.name()
            ),
        })
}

fn truncate_to_second(moment: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(moment.timestamp(), 0).unwrap_or(moment)
}

fn nanos_since_epoch(moment: DateTime<Utc>) -> i128 {
    i128::from(moment.timestamp()) * NANOS_PER_SECOND + i128::from(moment.timestamp_subsec_nanos())
}

fn from_nanos_since_epoch(nanos: i128) -> Option<DateTime<Utc>> {
    let seconds = i64::try_from(nanos.div_euclid(NANOS_PER_SECOND)).ok()?;
    let subsec = u32::try_from(nanos.rem_euclid(NANOS_PER_SECOND)).ok()?;
    DateTime::from_timestamp(seconds, subsec)
}

/// `anchor + k·interval` for the smallest k ≥ 0 that lands strictly after `after`.
pub(crate) fn every_next_after(
    interval: Duration,
    anchor: DateTime<Utc>,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let interval = i128::try_from(interval.as_nanos()).ok()?;
    if interval < NANOS_PER_SECOND {
        return None;
    }
    if after < anchor {
        return Some(anchor);
    }
    let anchor = nanos_since_epoch(anchor);
    let steps = (nanos_since_epoch(after) - anchor) / interval + 1;
    from_nanos_since_epoch(anchor + steps * interval)
}

/// How many `every` fire times lie in `(after, until]`, exactly.
pub(crate) fn every_count_between(
    interval: Duration,
    anchor: DateTime<Utc>,
    after: DateTime<Utc>,
    until: DateTime<Utc>,
) -> u64 {
    let Some(first) = every_next_after(interval, anchor, after) else {
        return 0;
    };
    let Ok(interval) = i128::try_from(interval.as_nanos()) else {
        return 0;
    };
    if first > until {
        return 0;
    }
    let span = nanos_since_epoch(until) - nanos_since_epoch(first);
    u64::try_from(span / interval + 1).unwrap_or(u64::MAX)
}

/// The latest `every` fire time at or before `until`, if it is not before the anchor.
pub(crate) fn every_latest_at_or_before(
    interval: Duration,
    anchor: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let interval = i128::try_from(interval.as_nanos()).ok()?;
    if interval < NANOS_PER_SECOND || until < anchor {
        return None;
    }
    let anchor = nanos_since_epoch(anchor);
    let steps = (nanos_since_epoch(until) - anchor) / interval;
    from_nanos_since_epoch(anchor + steps * interval)
}

#[cfg(test)]
mod tests {
    use chrono::SecondsFormat;

    use super::*;

    fn format_instant(moment: DateTime<Utc>) -> String {
        moment.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn every_counts_from_the_anchor_not_from_the_last_run() {
        let spec = ScheduleSpec::parse(
            "every",
            "every 1h30m",
            "UTC",
            utc("2026-01-01T00:00:00.700Z"),
        )
        .unwrap();
        let ScheduleSpec::Every { interval, anchor } = &spec else {
            panic!("an every spec");
        };
        assert_eq!(*interval, Duration::from_secs(5400));
        assert_eq!(format_instant(*anchor), "2026-01-01T00:00:00Z");
        // A run that happened late (at 01:40) does not move the next one off 03:00.
        let next = spec.next_after(utc("2026-01-01T01:40:00Z")).unwrap();
        assert_eq!(format_instant(next), "2026-01-01T03:00:00Z");
        // Exactly on a fire time: strictly after.
        let next = spec.next_after(utc("2026-01-01T03:00:00Z")).unwrap();
        assert_eq!(format_instant(next), "2026-01-01T04:30:00Z");
        // Before the anchor, the anchor itself.
        let next = spec.next_after(utc("2025-12-31T00:00:00Z")).unwrap();
        assert_eq!(format_instant(next), "2026-01-01T00:00:00Z");
    }

    #[test]
    fn every_arithmetic_counts_and_finds_the_latest() {
        let interval = Duration::from_secs(60);
        let anchor = utc("2026-01-01T00:00:00Z");
        let after = utc("2026-01-01T00:00:00Z");
        let until = utc("2026-01-01T01:00:00Z");
        assert_eq!(every_count_between(interval, anchor, after, until), 60);
        assert_eq!(every_count_between(interval, anchor, until, after), 0);
        let latest = every_latest_at_or_before(interval, anchor, utc("2026-01-01T00:59:59Z"));
        assert_eq!(format_instant(latest.unwrap()), "2026-01-01T00:59:00Z");
        assert_eq!(
            every_latest_at_or_before(interval, anchor, utc("2025-01-01T00:00:00Z")),
            None
        );
    }

    #[test]
    fn an_every_spec_built_by_hand_with_a_zero_interval_never_fires() {
        let spec = ScheduleSpec::Every {
            interval: Duration::ZERO,
            anchor: utc("2026-01-01T00:00:00Z"),
        };
        assert_eq!(spec.next_after(utc("2026-01-01T00:00:00Z")), None);
        assert!(spec.preview(utc("2026-01-01T00:00:00Z"), 5).is_empty());
    }

    #[test]
    fn at_reads_rfc3339_and_local_times() {
        let now = utc("2026-01-01T00:00:00Z");
        let cases = [
            ("2026-12-01T09:00:00+01:00", "UTC", "2026-12-01T08:00:00Z"),
            (
                "2026-12-01T09:00:00Z",
                "Europe/Berlin",
                "2026-12-01T09:00:00Z",
            ),
            ("2026-12-01 09:00", "Europe/Berlin", "2026-12-01T08:00:00Z"),
            (
                "2026-07-01 09:00:30",
                "Europe/Berlin",
                "2026-07-01T07:00:30Z",
            ),
            ("2026-12-01T09:00", "Asia/Kolkata", "2026-12-01T03:30:00Z"),
            // Skipped by spring forward: the first instant after the gap (03:00 CEST).
            ("2026-03-29 02:30", "Europe/Berlin", "2026-03-29T01:00:00Z"),
            // Repeated by fall back: the first occurrence (02:30 CEST).
            ("2026-10-25 02:30", "Europe/Berlin", "2026-10-25T00:30:00Z"),
        ];
        for (text, timezone, expected) in cases {
            let spec = ScheduleSpec::parse("at", text, timezone, now).unwrap();
            let ScheduleSpec::At(at) = spec else {
                panic!("an at spec");
            };
            assert_eq!(format_instant(at), expected, "{text} in {timezone}");
        }
    }

    #[test]
    fn at_fires_once() {
        let spec = ScheduleSpec::At(utc("2026-12-01T08:00:00Z"));
        let preview = spec.preview(utc("2026-01-01T00:00:00Z"), 3);
        assert_eq!(preview, vec![utc("2026-12-01T08:00:00Z")]);
        assert_eq!(spec.next_after(utc("2026-12-01T08:00:00Z")), None);
    }

    #[test]
    fn preview_is_capped() {
        let spec = ScheduleSpec::parse("every", "1s", "UTC", utc("2026-01-01T00:00:00Z")).unwrap();
        assert_eq!(
            spec.preview(utc("2026-01-01T00:00:00Z"), 1_000_000).len(),
            MAX_PREVIEW
        );
    }

    #[test]
    fn kinds_describe_themselves() {
        let now = utc("2026-01-01T00:00:00Z");
        let every = ScheduleSpec::parse("every", "every 1h30m", "UTC", now).unwrap();
        assert_eq!(
            every.describe(),
            "every 1h 30m starting 2026-01-01 00:00:00 UTC"
        );
        assert_eq!(every.kind(), ScheduleKind::Every);
        let at = ScheduleSpec::parse("AT", "2026-12-01 09:00", "Europe/Berlin", now).unwrap();
        assert_eq!(at.describe(), "once at 2026-12-01 08:00:00 UTC");
        assert_eq!(at.kind().to_string(), "at");
    }
}

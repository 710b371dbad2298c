//! Schedule math at its public boundary: tables of crontab expressions against fire times worked
//! out by hand (and cross-checked with GNU `date` and the system tzdata), daylight-saving
//! transitions in Berlin and New York, a table of refused inputs, the missed-run policies, and a
//! deterministic garbage loop that must never panic.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use clawvisor::schedule::{
    CronExpr, MISSED_COUNT_LIMIT, MISSED_SAMPLES_PER_END, MissedCount, MissedOutcome, MissedPolicy,
    ScheduleError, ScheduleSpec,
};

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|error| panic!("bad test instant {text}: {error}"))
        .with_timezone(&Utc)
}

fn show(moment: DateTime<Utc>) -> String {
    moment.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn cron(expression: &str, timezone: &str) -> ScheduleSpec {
    ScheduleSpec::Cron(
        CronExpr::parse(expression, timezone)
            .unwrap_or_else(|error| panic!("`{expression}` in {timezone}: {error}")),
    )
}

/// The fire times of `expression` in `timezone` strictly after `after`, as many as expected.
fn check(expression: &str, timezone: &str, after: &str, expected: &[&str]) {
    let actual: Vec<String> = cron(expression, timezone)
        .preview(utc(after), expected.len())
        .into_iter()
        .map(show)
        .collect();
    assert_eq!(
        actual, expected,
        "`{expression}` in {timezone} after {after}"
    );
}

/// Every fire time in `[from, until)`.
fn fire_times_between(spec: &ScheduleSpec, from: &str, until: &str) -> Vec<DateTime<Utc>> {
    let until = utc(until);
    let mut fire_times = Vec::new();
    let mut cursor = utc(from) - TimeDelta::nanoseconds(1);
    while let Some(next) = spec.next_after(cursor).filter(|next| *next < until) {
        fire_times.push(next);
        cursor = next;
    }
    fire_times
}

/// (expression, timezone, after, the next fire times)
type Case<'a> = (&'a str, &'a str, &'a str, &'a [&'a str]);

/// 2026-01-01 is a Thursday; 2026-02-01 a Sunday.
#[rustfmt::skip]
const NEXT_FIRE_TIMES: &[Case] = &[
    // Steps, lists, ranges.
    ("*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", &["2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z"]),
    ("0-59/20 8 * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T08:00:00Z", "2026-01-01T08:20:00Z", "2026-01-01T08:40:00Z", "2026-01-02T08:00:00Z"]),
    ("1-5/2 0 * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T00:01:00Z", "2026-01-01T00:03:00Z", "2026-01-01T00:05:00Z", "2026-01-02T00:01:00Z"]),
    ("5,35 9-10 * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T09:05:00Z", "2026-01-01T09:35:00Z", "2026-01-01T10:05:00Z", "2026-01-01T10:35:00Z", "2026-01-02T09:05:00Z"]),
    ("0 */6 * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T06:00:00Z", "2026-01-01T12:00:00Z", "2026-01-01T18:00:00Z", "2026-01-02T00:00:00Z"]),
    ("0 0 1 */3 *", "UTC", "2026-01-01T00:00:00Z", &["2026-04-01T00:00:00Z", "2026-07-01T00:00:00Z", "2026-10-01T00:00:00Z", "2027-01-01T00:00:00Z"]),
    ("15 10 * * *", "UTC", "2026-01-01T10:15:00Z", &["2026-01-02T10:15:00Z"]),
    // Day-of-week: 0 and 7 are Sunday, 1-5 is Monday-Friday, names in any case.
    ("0 9 * * 0", "UTC", "2026-01-01T00:00:00Z", &["2026-01-04T09:00:00Z", "2026-01-11T09:00:00Z", "2026-01-18T09:00:00Z"]),
    ("0 9 * * 7", "UTC", "2026-01-01T00:00:00Z", &["2026-01-04T09:00:00Z", "2026-01-11T09:00:00Z", "2026-01-18T09:00:00Z"]),
    ("0 9 * * sun", "UTC", "2026-01-01T00:00:00Z", &["2026-01-04T09:00:00Z", "2026-01-11T09:00:00Z"]),
    ("0 9 * * 1-5", "UTC", "2026-01-02T10:00:00Z", &["2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z", "2026-01-07T09:00:00Z", "2026-01-08T09:00:00Z", "2026-01-09T09:00:00Z", "2026-01-12T09:00:00Z"]),
    ("0 9 * * Mon-FRI", "UTC", "2026-01-02T10:00:00Z", &["2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"]),
    ("0 9 * * 6,0", "UTC", "2026-01-01T00:00:00Z", &["2026-01-03T09:00:00Z", "2026-01-04T09:00:00Z", "2026-01-10T09:00:00Z"]),
    ("0 9 * * 5-7", "UTC", "2026-01-01T00:00:00Z", &["2026-01-02T09:00:00Z", "2026-01-03T09:00:00Z", "2026-01-04T09:00:00Z", "2026-01-09T09:00:00Z"]),
    // Month names.
    ("0 12 * JAN,jul *", "UTC", "2026-01-31T13:00:00Z", &["2026-07-01T12:00:00Z", "2026-07-02T12:00:00Z"]),
    ("0 0 1 feb-apr *", "UTC", "2026-01-01T00:00:00Z", &["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "2027-02-01T00:00:00Z"]),
    // Day-of-month OR day-of-week when both are restricted: the 1st, and every Monday.
    ("0 9 1 * MON", "UTC", "2026-01-26T10:00:00Z", &["2026-02-01T09:00:00Z", "2026-02-02T09:00:00Z", "2026-02-09T09:00:00Z", "2026-02-16T09:00:00Z", "2026-02-23T09:00:00Z", "2026-03-01T09:00:00Z", "2026-03-02T09:00:00Z"]),
    ("0 9 13 * 1", "UTC", "2026-01-31T00:00:00Z", &["2026-02-02T09:00:00Z", "2026-02-09T09:00:00Z", "2026-02-13T09:00:00Z", "2026-02-16T09:00:00Z", "2026-02-23T09:00:00Z", "2026-03-02T09:00:00Z"]),
    // A `*`-prefixed day field keeps AND (Vixie): odd days that are Mondays.
    ("0 9 */2 * 1", "UTC", "2026-01-01T00:00:00Z", &["2026-01-05T09:00:00Z", "2026-01-19T09:00:00Z", "2026-02-09T09:00:00Z"]),
    // Month-end and leap day.
    ("0 0 31 * *", "UTC", "2026-01-31T00:00:00Z", &["2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"]),
    ("0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", &["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"]),
    ("0 0 30 * *", "UTC", "2026-01-30T00:00:00Z", &["2026-03-30T00:00:00Z", "2026-04-30T00:00:00Z"]),
    // Shorthands (Unix meanings).
    ("@weekly", "UTC", "2026-01-01T00:00:00Z", &["2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z", "2026-01-18T00:00:00Z"]),
    ("@yearly", "UTC", "2026-01-01T00:00:00Z", &["2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"]),
    ("@annually", "UTC", "2026-06-01T00:00:00Z", &["2027-01-01T00:00:00Z"]),
    ("@monthly", "UTC", "2026-01-15T00:00:00Z", &["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"]),
    ("@daily", "UTC", "2026-01-01T00:00:00Z", &["2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"]),
    ("@midnight", "UTC", "2026-01-01T12:00:00Z", &["2026-01-02T00:00:00Z"]),
    ("@hourly", "UTC", "2026-01-01T00:30:00Z", &["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]),
    ("@WEEKLY", "UTC", "2026-01-04T00:00:00Z", &["2026-01-11T00:00:00Z"]),
    // Six fields: seconds first.
    ("*/20 * * * * *", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"]),
    ("30 0 9 * * 1-5", "UTC", "2026-01-01T00:00:00Z", &["2026-01-01T09:00:30Z", "2026-01-02T09:00:30Z", "2026-01-05T09:00:30Z"]),
    ("0 0 12 * * 0", "UTC", "2026-01-01T00:00:00Z", &["2026-01-04T12:00:00Z"]),
    // Sub-second `after`: still strictly after, on whole seconds.
    ("* * * * * *", "UTC", "2026-01-01T00:00:00.500Z", &["2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"]),
    // Europe/Berlin: CET (+1) in winter, CEST (+2) in summer.
    ("0 9 * * 1-5", "Europe/Berlin", "2026-01-02T10:00:00Z", &["2026-01-05T08:00:00Z", "2026-01-06T08:00:00Z", "2026-01-07T08:00:00Z"]),
    ("0 9 * * 1-5", "Europe/Berlin", "2026-07-01T00:00:00Z", &["2026-07-01T07:00:00Z", "2026-07-02T07:00:00Z", "2026-07-03T07:00:00Z", "2026-07-06T07:00:00Z"]),
    ("0 0 1 * *", "Europe/Berlin", "2026-01-01T00:00:00Z", &["2026-01-31T23:00:00Z", "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z"]),
    ("@weekly", "Europe/Berlin", "2026-01-01T00:00:00Z", &["2026-01-03T23:00:00Z", "2026-01-10T23:00:00Z"]),
    // America/New_York: EST (-5) in winter, EDT (-4) in summer.
    ("0 9 * * *", "America/New_York", "2026-01-01T00:00:00Z", &["2026-01-01T14:00:00Z", "2026-01-02T14:00:00Z"]),
    ("0 9 * * *", "America/New_York", "2026-07-01T00:00:00Z", &["2026-07-01T13:00:00Z", "2026-07-02T13:00:00Z"]),
    ("0 22 * * 0", "America/New_York", "2026-01-01T00:00:00Z", &["2026-01-05T03:00:00Z", "2026-01-12T03:00:00Z"]),
    // Asia/Kolkata: +05:30 all year, so whole local hours land on :30 UTC.
    ("0 9 * * *", "Asia/Kolkata", "2026-01-01T00:00:00Z", &["2026-01-01T03:30:00Z", "2026-01-02T03:30:00Z"]),
    ("30 23 * * *", "Asia/Kolkata", "2026-01-01T00:00:00Z", &["2026-01-01T18:00:00Z", "2026-01-02T18:00:00Z"]),
    ("0 0 * * 0", "Asia/Kolkata", "2026-01-01T00:00:00Z", &["2026-01-03T18:30:00Z", "2026-01-10T18:30:00Z", "2026-01-17T18:30:00Z"]),
    ("*/45 * * * *", "Asia/Kolkata", "2026-01-01T00:00:00Z", &["2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T01:15:00Z", "2026-01-01T01:30:00Z"]),
];

#[test]
fn five_field_expressions_fire_when_crontab_says() {
    for (expression, timezone, after, expected) in NEXT_FIRE_TIMES {
        check(expression, timezone, after, expected);
    }
}

// ---- Daylight saving ------------------------------------------------------------------------
// Europe/Berlin 2026: spring forward 29 March 02:00 CET -> 03:00 CEST (01:00Z);
//                     fall back 25 October 03:00 CEST -> 02:00 CET (01:00Z).
// America/New_York 2026: spring forward 8 March 02:00 EST -> 03:00 EDT (07:00Z);
//                        fall back 1 November 02:00 EDT -> 01:00 EST (06:00Z).

#[test]
fn a_fixed_time_skipped_by_spring_forward_runs_once_right_after_the_gap() {
    // Berlin 02:30 does not exist on 29 March: it runs at 03:00 CEST, once.
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-27T12:00:00Z",
        &[
            "2026-03-28T01:30:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-30T00:30:00Z",
        ],
    );
    check(
        "30 2 * * *",
        "America/New_York",
        "2026-03-06T12:00:00Z",
        &[
            "2026-03-07T07:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:30:00Z",
        ],
    );
    // Several skipped times collapse onto the end of the gap and run once there; 03:00 itself is
    // the same instant and does not run again.
    check(
        "0,30 2,3 * * *",
        "Europe/Berlin",
        "2026-03-29T00:00:00Z",
        &[
            "2026-03-29T01:00:00Z",
            "2026-03-29T01:30:00Z",
            "2026-03-30T00:00:00Z",
        ],
    );
}

#[test]
fn a_fixed_time_repeated_by_fall_back_runs_once() {
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-23T12:00:00Z",
        &[
            "2026-10-24T00:30:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-26T01:30:00Z",
        ],
    );
    check(
        "30 1 * * *",
        "America/New_York",
        "2026-10-30T12:00:00Z",
        &[
            "2026-10-31T05:30:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-02T06:30:00Z",
        ],
    );
    // Asked from inside the fold: from the first pass the job is still ahead; from the second
    // pass it already ran.
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-25T00:10:00Z",
        &["2026-10-25T00:30:00Z"],
    );
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-25T00:30:00Z",
        &["2026-10-26T01:30:00Z"],
    );
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-25T01:10:00Z",
        &["2026-10-26T01:30:00Z"],
    );
    check(
        "0,30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        &[
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-26T01:00:00Z",
        ],
    );
}

/// An hourly job runs once every real hour: no hour twice, no hour without a run.
fn assert_hourly_through(timezone: &str, day_start: &str, day_end: &str, runs: usize) {
    let spec = cron("0 * * * *", timezone);
    let fire_times = fire_times_between(&spec, day_start, day_end);
    assert_eq!(
        fire_times.len(),
        runs,
        "{timezone} {day_start}: {fire_times:?}"
    );
    assert_eq!(fire_times[0], utc(day_start));
    for pair in fire_times.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            TimeDelta::hours(1),
            "{timezone}: {pair:?}"
        );
    }
}

#[test]
fn an_hourly_job_runs_every_real_hour_across_transitions() {
    // Local days: 23 hours long in spring, 25 in autumn.
    assert_hourly_through(
        "Europe/Berlin",
        "2026-03-28T23:00:00Z",
        "2026-03-29T22:00:00Z",
        23,
    );
    assert_hourly_through(
        "Europe/Berlin",
        "2026-10-24T22:00:00Z",
        "2026-10-25T23:00:00Z",
        25,
    );
    assert_hourly_through(
        "America/New_York",
        "2026-03-08T05:00:00Z",
        "2026-03-09T04:00:00Z",
        23,
    );
    assert_hourly_through(
        "America/New_York",
        "2026-11-01T04:00:00Z",
        "2026-11-02T05:00:00Z",
        25,
    );
    // Around the Berlin fold explicitly: 02:00 CEST, 02:00 CET, 03:00 CET.
    check(
        "0 * * * *",
        "Europe/Berlin",
        "2026-10-24T23:30:00Z",
        &[
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z",
        ],
    );
    // And from the middle of the first pass: the second pass's 02:00 is next.
    check(
        "0 * * * *",
        "Europe/Berlin",
        "2026-10-25T00:30:00Z",
        &["2026-10-25T01:00:00Z"],
    );
}

#[test]
fn a_daily_nine_oclock_job_stays_at_nine_local_across_both_clock_changes() {
    // Berlin 2026: CET → CEST on 29 March, CEST → CET on 25 October. "Every day at 9", written
    // either way, fires at 09:00 on the wall clock every day, so in UTC it moves from 08:00 to
    // 07:00 and back.
    for expression in ["0 9 * * *", "0 9 */1 * *"] {
        let spec = cron(expression, "Europe/Berlin");
        let spring = fire_times_between(&spec, "2026-03-26T00:00:00Z", "2026-04-02T00:00:00Z");
        let autumn = fire_times_between(&spec, "2026-10-22T00:00:00Z", "2026-10-29T00:00:00Z");
        let berlin = chrono_tz::Tz::Europe__Berlin;
        for fire in spring.iter().chain(&autumn) {
            let local = fire.with_timezone(&berlin);
            assert_eq!(
                local.format("%H:%M").to_string(),
                "09:00",
                "`{expression}` {fire}"
            );
        }
        assert_eq!(
            spring.iter().map(|fire| show(*fire)).collect::<Vec<_>>(),
            [
                "2026-03-26T08:00:00Z",
                "2026-03-27T08:00:00Z",
                "2026-03-28T08:00:00Z",
                "2026-03-29T07:00:00Z",
                "2026-03-30T07:00:00Z",
                "2026-03-31T07:00:00Z",
                "2026-04-01T07:00:00Z",
            ],
            "`{expression}` across spring forward"
        );
        assert_eq!(
            autumn.iter().map(|fire| show(*fire)).collect::<Vec<_>>(),
            [
                "2026-10-22T07:00:00Z",
                "2026-10-23T07:00:00Z",
                "2026-10-24T07:00:00Z",
                "2026-10-25T08:00:00Z",
                "2026-10-26T08:00:00Z",
                "2026-10-27T08:00:00Z",
                "2026-10-28T08:00:00Z",
            ],
            "`{expression}` across fall back"
        );
    }
    // Midnight through the scheduler's entry point, with the zone name as a person types it.
    let daily = ScheduleSpec::parse(
        "cron",
        "@daily",
        "europe/berlin",
        utc("2026-03-28T12:00:00Z"),
    )
    .expect("@daily in Berlin");
    assert_eq!(
        daily
            .preview(utc("2026-03-28T12:00:00Z"), 2)
            .into_iter()
            .map(show)
            .collect::<Vec<_>>(),
        ["2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z"]
    );
}

#[test]
fn repeating_jobs_keep_real_time_spacing_across_transitions() {
    for (expression, spacing) in [
        ("*/15 * * * *", 15),
        ("30 * * * *", 60),
        ("*/20 * * * *", 20),
    ] {
        for (timezone, from, until) in [
            (
                "Europe/Berlin",
                "2026-03-28T22:00:00Z",
                "2026-03-29T04:00:00Z",
            ),
            (
                "Europe/Berlin",
                "2026-10-24T22:00:00Z",
                "2026-10-25T04:00:00Z",
            ),
            (
                "America/New_York",
                "2026-03-08T04:00:00Z",
                "2026-03-08T10:00:00Z",
            ),
            (
                "America/New_York",
                "2026-11-01T03:00:00Z",
                "2026-11-01T09:00:00Z",
            ),
        ] {
            let fire_times = fire_times_between(&cron(expression, timezone), from, until);
            assert_eq!(
                fire_times.len() as i64,
                6 * 60 / spacing,
                "`{expression}` {timezone} {from}"
            );
            for pair in fire_times.windows(2) {
                assert_eq!(
                    pair[1] - pair[0],
                    TimeDelta::minutes(spacing),
                    "`{expression}` {timezone}: {pair:?}"
                );
            }
        }
    }
}

#[test]
fn a_whole_year_of_fire_times_is_strictly_increasing_in_every_timezone() {
    for timezone in [
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Asia/Kolkata",
        "Australia/Lord_Howe",
    ] {
        for expression in ["30 2 * * *", "0 * * * *", "*/7 1-3 * * *", "0,30 1,2 * * 0"] {
            let spec = cron(expression, timezone);
            let fire_times =
                fire_times_between(&spec, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z");
            assert!(!fire_times.is_empty(), "`{expression}` in {timezone}");
            for pair in fire_times.windows(2) {
                assert!(
                    pair[1] - pair[0] >= TimeDelta::seconds(1),
                    "`{expression}` in {timezone}: {pair:?}"
                );
            }
        }
    }
}

// ---- Refused inputs -------------------------------------------------------------------------

/// (expression, timezone, a fragment the error must contain)
#[rustfmt::skip]
const INVALID: &[(&str, &str, &str)] = &[
    ("", "UTC", "cron expression is empty"),
    ("   ", "UTC", "cron expression is empty"),
    ("* * * *", "UTC", "has 4 field(s)"),
    ("0 0 0 * * * 2026", "UTC", "has 7 field(s)"),
    ("0 9 * * 8", "UTC", "day-of-week: `8` is out of range 0-7"),
    ("60 * * * *", "UTC", "minute: `60` is out of range 0-59"),
    ("0 24 * * *", "UTC", "hour: `24` is out of range 0-23"),
    ("0 0 0 * *", "UTC", "day-of-month: `0` is out of range 1-31"),
    ("0 0 32 * *", "UTC", "day-of-month: `32` is out of range 1-31"),
    ("0 0 1 13 *", "UTC", "month: `13` is out of range 1-12"),
    ("0 0 1 0 *", "UTC", "month: `0` is out of range 1-12"),
    ("61 * * * * *", "UTC", "second: `61` is out of range 0-59"),
    ("*/0 * * * *", "UTC", "minute: step in `*/0` must be at least 1"),
    ("*/x * * * *", "UTC", "minute: step in `*/x` must be a whole number"),
    ("*/ * * * *", "UTC", "minute: step in `*/` must be a whole number"),
    ("5-1 * * * *", "UTC", "minute: range `5-1` runs backwards"),
    ("0 9 * * FRI-MON", "UTC", "day-of-week: range `FRI-MON` runs backwards"),
    ("0 9 * * FUN", "UTC", "day-of-week: `FUN` is not a day"),
    ("0 9 * SMARCH *", "UTC", "month: `SMARCH` is not a month"),
    ("0 9 MON * *", "UTC", "day-of-month: `MON` is not a number in 1-31"),
    ("a * * * *", "UTC", "minute: `a` is not a number in 0-59"),
    ("1,,2 * * * *", "UTC", "minute: `1,,2` has an empty list item"),
    ("1- * * * *", "UTC", "minute: `1-` is missing a number"),
    ("-1 * * * *", "UTC", "minute: `-1` is missing a number"),
    ("99999999999 * * * *", "UTC", "minute: `99999999999` is out of range 0-59"),
    ("0 0 30 2 *", "UTC", "never fires: day-of-month 30 never occurs in February"),
    ("0 0 31 4,6,9,11 *", "UTC", "never occurs in April,June,September,November"),
    ("@fortnightly", "UTC", "unknown shorthand `@fortnightly`"),
    ("@reboot", "UTC", "`@reboot` is not supported"),
    ("0 9 * * *", "Europe/Berln", "unknown timezone `Europe/Berln`"),
    ("0 9 * * *", "", "unknown timezone ``"),
    ("0 9 * * *", "+02:00", "unknown timezone `+02:00`"),
];

#[test]
fn invalid_expressions_are_refused_with_the_reason() {
    for (expression, timezone, fragment) in INVALID {
        match CronExpr::parse(expression, timezone) {
            Ok(parsed) => panic!("`{expression}` in `{timezone}` was accepted: {parsed:?}"),
            Err(error) => {
                let text = error.to_string();
                assert!(
                    text.contains(fragment),
                    "`{expression}` in `{timezone}`: expected `{fragment}` in: {text}"
                );
            }
        }
    }
}

#[test]
fn field_errors_carry_the_field() {
    let error = CronExpr::parse("0 9 * * 8", "UTC").unwrap_err();
    assert!(matches!(
        error,
        ScheduleError::Field {
            field: clawvisor::schedule::CronField::DayOfWeek,
            ..
        }
    ));
}

// ---- ScheduleSpec -------------------------------------------------------------------------

#[test]
fn every_and_at_parse_from_text() {
    let now = utc("2026-01-01T10:00:00Z");
    let every = ScheduleSpec::parse("every", "every 15m", "UTC", now).unwrap();
    assert_eq!(
        every
            .preview(now, 3)
            .into_iter()
            .map(show)
            .collect::<Vec<_>>(),
        [
            "2026-01-01T10:15:00Z",
            "2026-01-01T10:30:00Z",
            "2026-01-01T10:45:00Z"
        ]
    );
    let every = ScheduleSpec::parse("every", "EVERY 1h30m", "Europe/Berlin", now).unwrap();
    assert_eq!(show(every.next_after(now).unwrap()), "2026-01-01T11:30:00Z");
    // An interval ignores clock changes: real time, not wall time.
    let daily = ScheduleSpec::parse("every", "24h", "UTC", utc("2026-03-28T12:00:00Z")).unwrap();
    assert_eq!(
        show(daily.next_after(utc("2026-03-28T12:00:00Z")).unwrap()),
        "2026-03-29T12:00:00Z"
    );
    let at = ScheduleSpec::parse("at", "2026-12-01 09:00", "America/New_York", now).unwrap();
    assert_eq!(
        at.preview(now, 5).into_iter().map(show).collect::<Vec<_>>(),
        ["2026-12-01T14:00:00Z"]
    );
    let cron = ScheduleSpec::parse("cron", "0 9 * * 1-5", "Europe/Berlin", now).unwrap();
    assert_eq!(cron.describe(), "at 09:00 on Monday-Friday (Europe/Berlin)");
}

#[test]
fn invalid_specs_are_refused_with_the_reason() {
    let now = utc("2026-01-01T10:00:00Z");
    let cases = [
        (
            "weekly",
            "0 9 * * *",
            "UTC",
            "unknown schedule kind `weekly`",
        ),
        ("every", "every 0s", "UTC", "at least 1 second"),
        ("every", "every 500ms", "UTC", "at least 1 second"),
        ("every", "every 1500ms", "UTC", "whole number of seconds"),
        (
            "every",
            "every",
            "UTC",
            "write a duration such as `every 15m`",
        ),
        ("every", "every soon", "UTC", "interval `every soon`"),
        ("every", "every -5m", "UTC", "interval `every -5m`"),
        ("every", "every 11y", "UTC", "10-year maximum"),
        (
            "every",
            "every 15m",
            "Mars/Olympus",
            "unknown timezone `Mars/Olympus`",
        ),
        (
            "at",
            "tomorrow",
            "UTC",
            "date-time `tomorrow`: write RFC 3339",
        ),
        (
            "at",
            "2026-02-30 09:00",
            "UTC",
            "date-time `2026-02-30 09:00`",
        ),
        (
            "cron",
            "0 9 * * 8",
            "UTC",
            "day-of-week: `8` is out of range 0-7",
        ),
    ];
    for (kind, expression, timezone, fragment) in cases {
        let error = ScheduleSpec::parse(kind, expression, timezone, now)
            .expect_err(expression)
            .to_string();
        assert!(error.contains(fragment), "{kind} `{expression}`: {error}");
    }
}

// ---- Missed runs --------------------------------------------------------------------------

fn hourly_utc() -> ScheduleSpec {
    cron("0 * * * *", "UTC")
}

fn shown(fire_times: &[DateTime<Utc>]) -> Vec<String> {
    fire_times.iter().copied().map(show).collect()
}

#[test]
fn skip_runs_nothing_and_reports_every_missed_time() {
    // Down from 02:30 to 07:10: 03:00 … 07:00 were due.
    let outcome = MissedPolicy::Skip.resolve(
        &hourly_utc(),
        utc("2026-01-01T03:00:00Z"),
        utc("2026-01-01T07:10:00Z"),
    );
    assert!(outcome.run_now.is_empty());
    assert_eq!(outcome.missed, MissedCount::Exact(5));
    assert_eq!(
        shown(&outcome.missed_samples),
        [
            "2026-01-01T03:00:00Z",
            "2026-01-01T04:00:00Z",
            "2026-01-01T05:00:00Z",
            "2026-01-01T06:00:00Z",
            "2026-01-01T07:00:00Z"
        ]
    );
    assert_eq!(outcome.next_run_at, Some(utc("2026-01-01T08:00:00Z")));
}

#[test]
fn run_once_runs_the_latest_and_reports_the_rest() {
    let outcome = MissedPolicy::RunOnce.resolve(
        &hourly_utc(),
        utc("2026-01-01T03:00:00Z"),
        utc("2026-01-01T07:10:00Z"),
    );
    assert_eq!(shown(&outcome.run_now), ["2026-01-01T07:00:00Z"]);
    assert_eq!(outcome.missed, MissedCount::Exact(4));
    assert_eq!(outcome.missed_samples.len(), 4);
    assert!(
        !outcome
            .missed_samples
            .contains(&utc("2026-01-01T07:00:00Z"))
    );
    assert_eq!(outcome.next_run_at, Some(utc("2026-01-01T08:00:00Z")));
    // Exactly one due time: it runs, nothing is missed.
    let outcome = MissedPolicy::RunOnce.resolve(
        &hourly_utc(),
        utc("2026-01-01T03:00:00Z"),
        utc("2026-01-01T03:00:00Z"),
    );
    assert_eq!(shown(&outcome.run_now), ["2026-01-01T03:00:00Z"]);
    assert_eq!(outcome.missed, MissedCount::Exact(0));
}

#[test]
fn catch_up_runs_the_newest_within_the_window_oldest_first() {
    let policy = MissedPolicy::catch_up(3, Duration::from_secs(4 * 3600)).unwrap();
    // Down from 00:30 to 10:10: 01:00 … 10:00 (10 times) were due; the window starts at 06:10.
    let outcome = policy.resolve(
        &hourly_utc(),
        utc("2026-01-01T01:00:00Z"),
        utc("2026-01-01T10:10:00Z"),
    );
    assert_eq!(
        shown(&outcome.run_now),
        [
            "2026-01-01T08:00:00Z",
            "2026-01-01T09:00:00Z",
            "2026-01-01T10:00:00Z"
        ]
    );
    assert_eq!(outcome.missed, MissedCount::Exact(7));
    assert_eq!(
        shown(&outcome.missed_samples),
        [
            "2026-01-01T01:00:00Z",
            "2026-01-01T02:00:00Z",
            "2026-01-01T03:00:00Z",
            "2026-01-01T04:00:00Z",
            "2026-01-01T05:00:00Z",
            "2026-01-01T06:00:00Z",
            "2026-01-01T07:00:00Z"
        ]
    );
    assert_eq!(outcome.next_run_at, Some(utc("2026-01-01T11:00:00Z")));

    // A narrow window holds fewer than max_runs.
    let policy = MissedPolicy::catch_up(3, Duration::from_secs(90 * 60)).unwrap();
    let outcome = policy.resolve(
        &hourly_utc(),
        utc("2026-01-01T01:00:00Z"),
        utc("2026-01-01T10:10:00Z"),
    );
    assert_eq!(
        shown(&outcome.run_now),
        ["2026-01-01T09:00:00Z", "2026-01-01T10:00:00Z"]
    );
    assert_eq!(outcome.missed, MissedCount::Exact(8));

    // Everything older than the window: nothing runs, all is reported.
    let policy = MissedPolicy::catch_up(3, Duration::from_secs(5 * 60)).unwrap();
    let outcome = policy.resolve(
        &hourly_utc(),
        utc("2026-01-01T01:00:00Z"),
        utc("2026-01-01T10:10:00Z"),
    );
    assert!(outcome.run_now.is_empty());
    assert_eq!(outcome.missed, MissedCount::Exact(10));
}

#[test]
fn a_job_every_second_missed_for_a_month_is_counted_not_expanded() {
    let due = utc("2026-01-01T00:00:00Z");
    let now = utc("2026-01-31T00:00:00.250Z");
    let seconds_in_30_days: u64 = 30 * 24 * 3600;
    let policy = MissedPolicy::catch_up(2, Duration::from_secs(3600)).unwrap();

    // As cron: the walk stops at the limit and the count is a lower bound.
    let outcome = policy.resolve(&cron("* * * * * *", "UTC"), due, now);
    assert_eq!(
        shown(&outcome.run_now),
        ["2026-01-30T23:59:59Z", "2026-01-31T00:00:00Z"]
    );
    assert_eq!(outcome.missed, MissedCount::AtLeast(MISSED_COUNT_LIMIT - 2));
    assert_capped_samples(&outcome, due, "2026-01-30T23:59:58Z");
    assert_eq!(outcome.next_run_at, Some(utc("2026-01-31T00:00:01Z")));

    // As an interval: counted exactly by arithmetic.
    let every = ScheduleSpec::every(Duration::from_secs(1), due).unwrap();
    let outcome = policy.resolve(&every, due, now);
    assert_eq!(
        shown(&outcome.run_now),
        ["2026-01-30T23:59:59Z", "2026-01-31T00:00:00Z"]
    );
    assert_eq!(
        outcome.missed,
        MissedCount::Exact(seconds_in_30_days + 1 - 2)
    );
    assert_capped_samples(&outcome, due, "2026-01-30T23:59:58Z");
    assert_eq!(outcome.next_run_at, Some(utc("2026-01-31T00:00:01Z")));

    // Skip reports the same without running anything.
    let outcome = MissedPolicy::Skip.resolve(&every, due, now);
    assert!(outcome.run_now.is_empty());
    assert_eq!(outcome.missed, MissedCount::Exact(seconds_in_30_days + 1));
    assert_eq!(outcome.missed_samples.len(), 2 * MISSED_SAMPLES_PER_END);
    assert_eq!(
        outcome.missed_samples.last(),
        Some(&utc("2026-01-31T00:00:00Z"))
    );
}

fn assert_capped_samples(outcome: &MissedOutcome, oldest: DateTime<Utc>, newest_missed: &str) {
    assert_eq!(
        outcome.missed_samples.len(),
        2 * MISSED_SAMPLES_PER_END,
        "{outcome:?}"
    );
    assert_eq!(outcome.missed_samples.first(), Some(&oldest));
    assert_eq!(outcome.missed_samples.last(), Some(&utc(newest_missed)));
    assert!(
        outcome
            .missed_samples
            .windows(2)
            .all(|pair| pair[0] < pair[1])
    );
}

#[test]
fn a_one_shot_in_the_past_runs_once_or_is_reported() {
    let at = utc("2026-01-01T09:00:00Z");
    let spec = ScheduleSpec::At(at);
    let now = utc("2026-01-01T12:00:00Z");

    let outcome = MissedPolicy::RunOnce.resolve(&spec, at, now);
    assert_eq!(outcome.run_now, vec![at]);
    assert_eq!(outcome.missed, MissedCount::Exact(0));
    assert_eq!(outcome.next_run_at, None);

    let outcome = MissedPolicy::catch_up(3, Duration::from_secs(24 * 3600))
        .unwrap()
        .resolve(&spec, at, now);
    assert_eq!(outcome.run_now, vec![at]);
    assert_eq!(outcome.next_run_at, None);

    // Outside a catch-up window the one-shot is stale and reported instead.
    let outcome = MissedPolicy::catch_up(3, Duration::from_secs(3600))
        .unwrap()
        .resolve(&spec, at, now);
    assert!(outcome.run_now.is_empty());
    assert_eq!(outcome.missed, MissedCount::Exact(1));
    assert_eq!(outcome.missed_samples, vec![at]);

    let outcome = MissedPolicy::Skip.resolve(&spec, at, now);
    assert!(outcome.run_now.is_empty());
    assert_eq!(outcome.missed, MissedCount::Exact(1));
    assert_eq!(outcome.missed_samples, vec![at]);
    assert_eq!(outcome.next_run_at, None);
}

#[test]
fn a_job_not_yet_due_misses_nothing() {
    let due = utc("2026-01-01T12:00:00Z");
    let outcome = MissedPolicy::Skip.resolve(&hourly_utc(), due, utc("2026-01-01T11:59:59Z"));
    assert!(outcome.run_now.is_empty());
    assert_eq!(outcome.missed, MissedCount::Exact(0));
    assert_eq!(outcome.next_run_at, Some(due));
}

#[test]
fn missed_runs_across_a_clock_change_are_counted_in_real_hours() {
    // Berlin, down through the autumn fold from 01:30 CEST to 03:30 CET: 02:00 CEST, 02:00 CET
    // and 03:00 CET were due for an hourly job.
    let outcome = MissedPolicy::Skip.resolve(
        &cron("0 * * * *", "Europe/Berlin"),
        utc("2026-10-25T00:00:00Z"),
        utc("2026-10-25T02:30:00Z"),
    );
    assert_eq!(outcome.missed, MissedCount::Exact(3));
    assert_eq!(
        shown(&outcome.missed_samples),
        [
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z"
        ]
    );
}

// ---- Garbage never panics -----------------------------------------------------------------

/// xorshift64*: deterministic, no dependency.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "*",
    "?",
    "/",
    "-",
    ",",
    " ",
    " ",
    " ",
    "0",
    "1",
    "5",
    "7",
    "8",
    "12",
    "23",
    "24",
    "29",
    "30",
    "31",
    "59",
    "60",
    "99999999999999999999",
    "MON",
    "sun",
    "FRI",
    "jan",
    "DEC",
    "@",
    "@weekly",
    "@reboot",
    "L",
    "W",
    "#",
    "\t",
    "é",
    "\u{0}",
    "every",
    "h",
    "m",
    "s",
    "ms",
    "y",
    "T",
    ":",
    "2026-03-29",
    "02:30",
    "Z",
    "+01:00",
];

/// A near-valid cron expression: fields built from plausible items, with the odd wrong item
/// and the odd wrong field count.
fn garbage_cron(prng: &mut Prng) -> String {
    let field_count = [4, 5, 5, 5, 6, 6, 7][prng.below(7)];
    let fields: Vec<String> = (0..field_count)
        .map(|position| {
            let items: Vec<String> = (0..1 + prng.below(3))
                .map(|_| garbage_item(prng, position + usize::from(field_count < 6)))
                .collect();
            items.join(",")
        })
        .collect();
    fields.join(" ")
}

/// A soup of pieces and random characters.
fn garbage_soup(prng: &mut Prng) -> String {
    let mut text = String::new();
    for _ in 0..prng.below(14) {
        if prng.below(10) == 0 {
            text.push(char::from_u32(prng.below(0x2FF) as u32).unwrap_or('x'));
        } else {
            text.push_str(PIECES[prng.below(PIECES.len())]);
        }
    }
    text
}

/// One list item for the field at `position` (0 = seconds … 5 = day-of-week); one in twenty is
/// drawn from values that are wrong for most fields.
fn garbage_item(prng: &mut Prng, position: usize) -> String {
    const PLAUSIBLE: [&[&str]; 6] = [
        &["*", "0", "15", "30", "59"],
        &["*", "0", "5", "15", "30", "45", "59"],
        &["*", "0", "1", "2", "3", "9", "23"],
        &["*", "1", "13", "28", "29", "30", "31"],
        &["*", "1", "2", "6", "12", "JAN", "feb", "Dec"],
        &["*", "0", "1", "5", "6", "7", "MON", "fri", "sun"],
    ];
    const WRONG: &[&str] = &[
        "", "?", "60", "99", "-", "L", "x", "32", "8", "13", "é", "*/*",
    ];
    let atoms = PLAUSIBLE[position.min(5)];
    let atom = |prng: &mut Prng| {
        if prng.below(20) == 0 {
            WRONG[prng.below(WRONG.len())]
        } else {
            atoms[prng.below(atoms.len())]
        }
    };
    let mut item = atom(prng).to_string();
    if prng.below(6) == 0 {
        item.push('-');
        item.push_str(atom(prng));
    }
    if prng.below(5) == 0 {
        item.push('/');
        item.push_str(["0", "1", "2", "3", "7", "15", "100", "x"][prng.below(8)]);
    }
    item
}

#[test]
fn garbage_never_panics_and_accepted_schedules_only_move_forward() {
    let mut prng = Prng(0x9E37_79B9_7F4A_7C15);
    let timezones = [
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Asia/Kolkata",
        "Pacific/Apia",
        "bogus",
    ];
    let probes = [
        DateTime::<Utc>::MIN_UTC,
        utc("1969-12-31T23:59:59Z"),
        utc("2026-03-29T00:59:59Z"),
        utc("2026-10-25T00:30:00Z"),
        utc("2026-11-01T05:30:00Z"),
        utc("2100-12-31T23:59:59Z"),
        DateTime::<Utc>::MAX_UTC,
    ];
    let mut accepted = 0;
    for round in 0..20_000 {
        let timezone = timezones[round % timezones.len()];
        let (kind, text) = if round % 2 == 0 {
            ("cron", garbage_cron(&mut prng))
        } else {
            (["cron", "every", "at"][round % 3], garbage_soup(&mut prng))
        };
        let now = probes[prng.below(probes.len())];
        let _ = MissedPolicy::parse(&text);
        let Ok(spec) = ScheduleSpec::parse(kind, &text, timezone, now) else {
            continue;
        };
        accepted += 1;
        let _ = spec.describe();
        for probe in probes {
            if let Some(next) = spec.next_after(probe) {
                assert!(
                    next > probe,
                    "{kind} `{text}` in {timezone}: {next} after {probe}"
                );
            }
        }
        // Ten minutes across the Berlin spring gap: short enough for every-second schedules.
        let outcome = MissedPolicy::RunOnce.resolve(
            &spec,
            utc("2026-03-29T00:55:00Z"),
            utc("2026-03-29T01:05:00Z"),
        );
        assert!(outcome.run_now.len() <= 1);
    }
    // The pieces are cron-ish enough that some inputs parse; a loop that accepts nothing tests
    // only the error paths.
    assert!(accepted > 500, "only {accepted} garbage inputs parsed");
}

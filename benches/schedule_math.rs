//! The cost of schedule math: `next_after` for a handful of expressions (ns per call, the number
//! the Scheduler pays each time a job fires), parsing, and resolving a month-long outage of a
//! job that fires every second. Prints median and p99 of single calls next to criterion's figures
//! (single-call samples include ~20-30 ns of `Instant` overhead).

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use clawvisor::schedule::{CronExpr, MissedPolicy, ScheduleSpec};
use criterion::{Criterion, criterion_group, criterion_main};

/// (label, expression, timezone)
const EXPRESSIONS: &[(&str, &str, &str)] = &[
    ("every_15_minutes_utc", "*/15 * * * *", "UTC"),
    ("weekdays_0900_berlin", "0 9 * * 1-5", "Europe/Berlin"),
    (
        "first_or_monday_new_york",
        "0 9 1 * MON",
        "America/New_York",
    ),
    ("daily_0230_berlin_dst", "30 2 * * *", "Europe/Berlin"),
    ("leap_day_utc", "0 0 29 2 *", "UTC"),
    ("every_second_kolkata", "* * * * * *", "Asia/Kolkata"),
];

/// Starting instants spread over 2026 (deterministic), including both Berlin clock changes.
fn starting_instants() -> Vec<DateTime<Utc>> {
    let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("a valid constant")
        .with_timezone(&Utc);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut instants: Vec<DateTime<Utc>> = (0..1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            start + TimeDelta::seconds((state % (365 * 24 * 3600)) as i64)
        })
        .collect();
    for inside_a_fold in [
        "2026-10-25T00:10:00Z",
        "2026-10-25T01:10:00Z",
        "2026-03-29T00:45:00Z",
    ] {
        instants.push(
            DateTime::parse_from_rfc3339(inside_a_fold)
                .expect("a valid constant")
                .with_timezone(&Utc),
        );
    }
    instants
}

fn next_after(c: &mut Criterion) {
    let instants = starting_instants();
    let mut group = c.benchmark_group("next_after");
    for (label, expression, timezone) in EXPRESSIONS {
        let parsed = CronExpr::parse(expression, timezone).expect("bench expressions are valid");
        let mut index = 0;
        group.bench_function(*label, |b| {
            b.iter(|| {
                index = (index + 1) % instants.len();
                black_box(parsed.next_after(black_box(instants[index])))
            })
        });
        let mut samples = Vec::with_capacity(instants.len() * 20);
        for _ in 0..20 {
            for instant in &instants {
                let start = Instant::now();
                black_box(parsed.next_after(black_box(*instant)));
                samples.push(start.elapsed());
            }
        }
        support::report(
            &format!("next_after {label} `{expression}` {timezone}"),
            &mut samples,
        );
    }
    group.finish();
}

fn parse(c: &mut Criterion) {
    c.bench_function("parse_weekdays_berlin", |b| {
        b.iter(|| CronExpr::parse(black_box("0 9 * * 1-5"), black_box("Europe/Berlin")))
    });
    let mut samples = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let start = Instant::now();
        let _ = black_box(CronExpr::parse(
            black_box("*/5 9-17 1,15 jan-jun mon-fri"),
            "America/New_York",
        ));
        samples.push(start.elapsed());
    }
    support::report(
        "parse `*/5 9-17 1,15 jan-jun mon-fri` America/New_York",
        &mut samples,
    );
}

/// The worst case the missed-run policy is built for: every second, down for 30 days.
fn missed_month_every_second(c: &mut Criterion) {
    let due = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .expect("a valid constant")
        .with_timezone(&Utc);
    let now = due + TimeDelta::days(30);
    let policy = MissedPolicy::catch_up(3, Duration::from_secs(3600)).expect("valid policy");
    let cron = ScheduleSpec::Cron(CronExpr::parse("* * * * * *", "UTC").expect("valid"));
    let every = ScheduleSpec::every(Duration::from_secs(1), due).expect("valid");
    let mut group = c.benchmark_group("missed_30_days_every_second");
    group.sample_size(10);
    group.bench_function("cron_capped_count", |b| {
        b.iter(|| policy.resolve(black_box(&cron), due, now))
    });
    group.bench_function("every_exact_count", |b| {
        b.iter(|| policy.resolve(black_box(&every), due, now))
    });
    group.finish();
    for (label, spec) in [("cron", &cron), ("every", &every)] {
        let mut samples = Vec::with_capacity(20);
        for _ in 0..20 {
            let start = Instant::now();
            black_box(policy.resolve(spec, due, now));
            samples.push(start.elapsed());
        }
        support::report(
            &format!("missed 30 days every second ({label})"),
            &mut samples,
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = next_after, parse, missed_month_every_second
}
criterion_main!(benches);

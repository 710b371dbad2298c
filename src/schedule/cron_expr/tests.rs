//! Unit tests of cron parsing, translation and next-fire computation.

use super::describe::ordinal;
use super::*;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn next(expression: &str, timezone: &str, after: &str) -> String {
    CronExpr::parse(expression, timezone)
        .unwrap()
        .next_after(utc(after))
        .unwrap()
        .to_rfc3339()
}

#[test]
fn day_of_week_numbers_follow_unix_not_the_crate() {
    // 2026-01-01 is a Thursday.
    let after = "2026-01-01T00:00:00Z";
    assert_eq!(next("0 9 * * 0", "UTC", after), "2026-01-04T09:00:00+00:00");
    assert_eq!(next("0 9 * * 7", "UTC", after), "2026-01-04T09:00:00+00:00");
    assert_eq!(next("0 9 * * 1", "UTC", after), "2026-01-05T09:00:00+00:00");
    assert_eq!(next("0 9 * * 6", "UTC", after), "2026-01-03T09:00:00+00:00");
}

#[test]
fn fields_expand_to_the_expected_sets() {
    let expression = CronExpr::parse("*/20 9-17/4 1,15 jan-mar mon-fri", "UTC").unwrap();
    let fields = expression.fields;
    assert_eq!(fields.minutes.values().collect::<Vec<_>>(), [0, 20, 40]);
    assert_eq!(fields.hours.values().collect::<Vec<_>>(), [9, 13, 17]);
    assert_eq!(fields.days_of_month.values().collect::<Vec<_>>(), [1, 15]);
    assert_eq!(fields.months.values().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        fields.days_of_week.values().collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert!(matches!(expression.day_rule, DayRule::Either { .. }));
    assert_eq!(expression.clock_change_rule(), ClockChangeRule::Repeating);
}

#[test]
fn day_of_week_seven_and_ranges_ending_in_seven_mean_sunday() {
    let expression = CronExpr::parse("0 0 * * 5-7", "UTC").unwrap();
    assert_eq!(
        expression.fields.days_of_week.values().collect::<Vec<_>>(),
        [0, 5, 6]
    );
    let every_day = CronExpr::parse("0 0 * * 0-7", "UTC").unwrap();
    assert_eq!(every_day.fields.days_of_week.len(), 7);
}

#[test]
fn translation_uses_day_names_for_the_crate() {
    let fields = CronExpr::parse("0 9 * * 1-5", "UTC").unwrap().fields;
    let schedule = crate_schedule(&fields, DaySelection::Both).unwrap();
    assert!(
        schedule.source().ends_with("MON,TUE,WED,THU,FRI"),
        "{}",
        schedule.source()
    );
}

#[test]
fn clock_change_rule_follows_vixie_star_flags() {
    let rule = |expression: &str| {
        CronExpr::parse(expression, "UTC")
            .unwrap()
            .clock_change_rule()
    };
    assert_eq!(rule("30 2 * * *"), ClockChangeRule::FixedTime);
    assert_eq!(rule("0,30 1-3 * * *"), ClockChangeRule::FixedTime);
    assert_eq!(rule("@daily"), ClockChangeRule::FixedTime);
    assert_eq!(rule("0 * * * *"), ClockChangeRule::Repeating);
    assert_eq!(rule("@hourly"), ClockChangeRule::Repeating);
    assert_eq!(rule("*/15 9 * * *"), ClockChangeRule::Repeating);
    assert_eq!(rule("* 30 2 * * *"), ClockChangeRule::Repeating);
}

#[test]
fn fold_bounds_are_found_in_berlin() {
    let timezone = Tz::Europe__Berlin;
    let local = chrono::NaiveDate::from_ymd_opt(2026, 10, 25)
        .unwrap()
        .and_hms_opt(2, 17, 3)
        .unwrap();
    let LocalResult::Ambiguous(first, second) = timezone.from_local_datetime(&local) else {
        panic!("02:17 on 2026-10-25 is repeated in Berlin");
    };
    let fold = Fold::containing(&timezone, local, &first, &second);
    assert_eq!(fold.local_start.to_string(), "2026-10-25 02:00:00");
    assert_eq!(fold.local_end.to_string(), "2026-10-25 03:00:00");
}

#[test]
fn descriptions_read_naturally() {
    let describe = |expression: &str, timezone: &str| {
        CronExpr::parse(expression, timezone).unwrap().describe()
    };
    assert_eq!(
        describe("0 9 * * 1-5", "Europe/Berlin"),
        "at 09:00 on Monday-Friday (Europe/Berlin)"
    );
    assert_eq!(describe("*/15 * * * *", "UTC"), "every 15 minutes (UTC)");
    assert_eq!(
        describe("0 * * * *", "UTC"),
        "at minute 0 of every hour (UTC)"
    );
    assert_eq!(describe("* * * * *", "UTC"), "every minute (UTC)");
    assert_eq!(describe("*/10 * * * * *", "UTC"), "every 10 seconds (UTC)");
    assert_eq!(describe("@weekly", "UTC"), "at 00:00 on Sunday (UTC)");
    assert_eq!(
        describe("0 9 1 * MON", "UTC"),
        "at 09:00 on day 1 of the month or on Monday (UTC)"
    );
    assert_eq!(
        describe("30 8,17 * jan,jul *", "Asia/Kolkata"),
        "at 08:30 and 17:30 in January, July (Asia/Kolkata)"
    );
    assert_eq!(
        describe("0 */2 * * *", "UTC"),
        "at minute 0 of every 2nd hour (UTC)"
    );
    assert_eq!(
        describe("*/5 */3 * * *", "UTC"),
        "every 5 minutes of every 3rd hour (UTC)"
    );
    assert_eq!(
        describe("30 0 9 * * 1-5", "UTC"),
        "at 09:00:30 on Monday-Friday (UTC)"
    );
    assert_eq!(
        describe("0 0 29 2 *", "UTC"),
        "at 00:00 on day 29 of the month in February (UTC)"
    );
    assert_eq!(
        describe("0 9 */2 * 1", "UTC"),
        "at 09:00 on every 2nd day of the month when it falls on Monday (UTC)"
    );
    assert_eq!(ordinal(21), "21st");
    assert_eq!(ordinal(12), "12th");
    assert_eq!(
        describe("0 9-17 * * *", "UTC"),
        "at minute 0 during hour 9-17 (UTC)"
    );
}

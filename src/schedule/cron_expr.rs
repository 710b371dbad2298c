//! `CronExpr`: a Unix crontab expression with a timezone, and its next fire time.
//!
//! Users write crontab(5) as they know it — `min hour dom month dow`, optionally with a leading
//! seconds field, or a shorthand such as `@weekly`. The cron crate speaks a different dialect
//! (seconds first, 6 or 7 fields, day-of-week `1` = Sunday, no 5-field lines), so every field is
//! expanded here into an explicit set of values and re-emitted as a list the crate cannot
//! misread (days of the week as names `SUN,MON,...`). The crate then only answers "which local
//! date-time matching these sets comes next", always in UTC so it never sees a clock change.
//!
//! Semantics taken from Vixie cron (the crontab most users learned):
//! - Day-of-week `0` and `7` are both Sunday; `1-5` is Monday–Friday.
//! - When both day-of-month and day-of-week are restricted (neither starts with `*`), a day
//!   matches if EITHER matches: `0 9 1 * MON` runs on the 1st and on every Monday. The crate
//!   would require both, so such an expression holds two crate schedules and takes the earlier.
//! - Clock changes. Local times are mapped to instants here, not in the crate (which silently
//!   skips times in a spring-forward gap and, through its iterator, fires twice in a fall-back
//!   fold). As in Vixie cron, jobs whose second, minute and hour fields are all fixed values
//!   ([`ClockChangeRule::FixedTime`], e.g. `30 2 * * *`) run once per local day: a time inside a
//!   gap runs at the first instant after the gap (03:00 on the Berlin spring-forward day, once
//!   even if several skipped times collapse onto it), and a repeated time runs only in its first
//!   pass. Jobs with `*` in one of those fields ([`ClockChangeRule::Repeating`], e.g. `0 * * * *`,
//!   `*/15 * * * *`) follow real time: skipped times do not run and repeated times run in both
//!   passes, so an hourly job runs once every real hour (23 runs on the spring-forward day, 25 on
//!   the fall-back day) — never twice in an hour, never an hour without a run.
//!
//! Invariant: [`CronExpr::next_after`] is computed from the expression and the timezone rules
//! alone, never by adding an interval to a previous fire time, so wall-clock jumps and DST
//! changes cannot make the schedule drift. It is strictly increasing: the result is always later
//! than the argument. Fire times are whole seconds and at least one second apart.
//!
//! The crate knows the years 1970–2100; after 2100 (in the job's local time) there is no next
//! fire time (`None`).

use std::str::FromStr;

use chrono::{DateTime, Datelike, LocalResult, NaiveDateTime, TimeDelta, TimeZone, Timelike, Utc};
use chrono_tz::{GapInfo, Tz};

use crate::schedule::error::{CronField, ScheduleError, echo};
use crate::schedule::timezone::parse_timezone;

mod describe;

use describe::{compress, month_name};

/// The last year the cron crate iterates over.
const LAST_SUPPORTED_YEAR: i32 = 2100;

/// How many clock changes one `next_after` call may step over before giving up; real timezones
/// have at most a handful per year, so this bound is only a guard against a pathological table.
const MAX_CLOCK_CHANGES_PER_LOOKUP: usize = 64;

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const MONTH_FULL_NAMES: [&str; 12] = [
    "JANUARY",
    "FEBRUARY",
    "MARCH",
    "APRIL",
    "MAY",
    "JUNE",
    "JULY",
    "AUGUST",
    "SEPTEMBER",
    "OCTOBER",
    "NOVEMBER",
    "DECEMBER",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];
const DAY_FULL_NAMES: [&str; 7] = [
    "SUNDAY",
    "MONDAY",
    "TUESDAY",
    "WEDNESDAY",
    "THURSDAY",
    "FRIDAY",
    "SATURDAY",
];

/// What happens to local times that a clock change skips or repeats (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockChangeRule {
    /// Second, minute and hour are fixed values: each matching local time runs exactly once —
    /// a skipped time at the end of the gap, a repeated time in its first pass only.
    FixedTime,
    /// The second, minute or hour field starts with `*`: the job follows real time — skipped
    /// times do not run, repeated times run in both passes.
    Repeating,
}

/// A cron expression as the user wrote it, with its timezone, ready to answer "when next?".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    source: String,
    timezone: Tz,
    fields: ExpandedFields,
    day_rule: DayRule,
    clock_change_rule: ClockChangeRule,
}

/// How days are selected: the crate's AND, or Vixie's OR as two crate schedules. The crate's
/// schedules are boxed (about 250 bytes each) to keep `CronExpr` and `ScheduleSpec` small.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DayRule {
    /// One of the two day fields starts with `*`: a day must match both (which, for a `*`
    /// field, is the other field alone).
    Both(Box<cron::Schedule>),
    /// Both day fields are restricted: a day matches if either does.
    Either {
        by_day_of_month: Box<cron::Schedule>,
        by_day_of_week: Box<cron::Schedule>,
    },
}

/// Every field expanded to the set of values it allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ExpandedFields {
    seconds: ValueSet,
    minutes: ValueSet,
    hours: ValueSet,
    days_of_month: ValueSet,
    months: ValueSet,
    /// 0 = Sunday … 6 = Saturday (a `7` in the input is stored as 0).
    days_of_week: ValueSet,
    day_of_month_is_star: bool,
    day_of_week_is_star: bool,
}

/// A set of numbers 0..=63 as a bit mask; every cron field fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct ValueSet(u64);

impl ValueSet {
    fn range(first: u32, last: u32) -> ValueSet {
        let mut set = ValueSet::default();
        for value in first..=last {
            set.insert(value);
        }
        set
    }

    /// Values past 63 cannot occur (every field ends at 59 or less) and are ignored.
    fn insert(&mut self, value: u32) {
        if value < 64 {
            self.0 |= 1 << value;
        }
    }

    fn contains(self, value: u32) -> bool {
        value < 64 && self.0 & (1 << value) != 0
    }

    fn len(self) -> u32 {
        self.0.count_ones()
    }

    fn values(self) -> impl Iterator<Item = u32> {
        (0..64).filter(move |value| self.contains(*value))
    }

    fn single(self) -> Option<u32> {
        if self.len() == 1 {
            self.values().next()
        } else {
            None
        }
    }
}

/// Bounds and names of one field.
struct FieldShape {
    field: CronField,
    min: u32,
    /// The largest value accepted in the input (7 for day-of-week, which means Sunday).
    max: u32,
}

impl FieldShape {
    fn of(field: CronField) -> FieldShape {
        let (min, max) = match field {
            CronField::Second | CronField::Minute => (0, 59),
            CronField::Hour => (0, 23),
            CronField::DayOfMonth => (1, 31),
            CronField::Month => (1, 12),
            CronField::DayOfWeek => (0, 7),
        };
        FieldShape { field, min, max }
    }

    /// All values the field can hold after normalisation (day-of-week 7 folded into 0).
    fn full(&self) -> ValueSet {
        match self.field {
            CronField::DayOfWeek => ValueSet::range(0, 6),
            _ => ValueSet::range(self.min, self.max),
        }
    }
}

/// One parsed field: its values and whether it was written starting with `*` (Vixie's flag).
struct ParsedField {
    values: ValueSet,
    is_star: bool,
}

impl CronExpr {
    /// Parses a crontab expression (5 fields, 6 with leading seconds, or a shorthand) in an IANA
    /// timezone. The error names the field and the offending part.
    pub fn parse(expression: &str, timezone: &str) -> Result<CronExpr, ScheduleError> {
        let timezone = parse_timezone(timezone)?;
        let source = expression.trim();
        if source.is_empty() {
            return Err(ScheduleError::EmptyExpression);
        }
        let expanded = if source.starts_with('@') {
            expand_shorthand(source)?
        } else {
            source
        };
        let texts: Vec<&str> = expanded.split_whitespace().collect();
        let (seconds_text, rest) = match texts.len() {
            5 => ("0", &texts[..]),
            6 => (texts[0], &texts[1..]),
            found => {
                return Err(ScheduleError::FieldCount {
                    expression: echo(source),
                    found,
                });
            }
        };
        let seconds = parse_field(CronField::Second, seconds_text)?;
        let minutes = parse_field(CronField::Minute, rest[0])?;
        let hours = parse_field(CronField::Hour, rest[1])?;
        let days_of_month = parse_field(CronField::DayOfMonth, rest[2])?;
        let months = parse_field(CronField::Month, rest[3])?;
        let days_of_week = parse_field(CronField::DayOfWeek, rest[4])?;

        let fields = ExpandedFields {
            seconds: seconds.values,
            minutes: minutes.values,
            hours: hours.values,
            days_of_month: days_of_month.values,
            months: months.values,
            days_of_week: days_of_week.values,
            day_of_month_is_star: days_of_month.is_star,
            day_of_week_is_star: days_of_week.is_star,
        };
        let day_rule = if fields.days_are_either() {
            DayRule::Either {
                by_day_of_month: Box::new(crate_schedule(&fields, DaySelection::DayOfMonthOnly)?),
                by_day_of_week: Box::new(crate_schedule(&fields, DaySelection::DayOfWeekOnly)?),
            }
        } else {
            check_day_of_month_occurs(source, &fields)?;
            DayRule::Both(Box::new(crate_schedule(&fields, DaySelection::Both)?))
        };
        let clock_change_rule = if seconds.is_star || minutes.is_star || hours.is_star {
            ClockChangeRule::Repeating
        } else {
            ClockChangeRule::FixedTime
        };
        Ok(CronExpr {
            source: source.to_string(),
            timezone,
            fields,
            day_rule,
            clock_change_rule,
        })
    }

    /// The expression as the user wrote it (trimmed).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The timezone the expression's local times are read in.
    pub fn timezone(&self) -> Tz {
        self.timezone
    }

    /// How this expression treats local times skipped or repeated by a clock change.
    pub fn clock_change_rule(&self) -> ClockChangeRule {
        self.clock_change_rule
    }

    /// The first fire time strictly after `after`, or `None` when there is none in a local
    /// year up to 2100.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Local time is within a day of UTC: early in UTC 2101 it can still be 2100 where the
        // job runs (`next_local_match` stops after that), and later nothing can match.
        if after.year() > LAST_SUPPORTED_YEAR + 1 {
            return None;
        }
        // The crate knows nothing before 1970, so an earlier start gives the same answer; it also
        // keeps local-time arithmetic away from chrono's limits, where `naive_local` would panic.
        let earliest_lookup = DateTime::<Utc>::UNIX_EPOCH - TimeDelta::days(2);
        let after = after.max(earliest_lookup);
        let timezone = self.timezone;
        let local_now = after.with_timezone(&timezone).naive_local();
        let mut candidate = self.next_local_match(local_now)?;

        // `after` inside a fall-back fold: local time is not monotonic there, so the matches of
        // this fold are settled first; afterwards local order is instant order again.
        if let LocalResult::Ambiguous(first_pass, second_pass) =
            timezone.from_local_datetime(&local_now)
        {
            let in_first_pass = first_pass.with_timezone(&Utc) == after;
            let fold = Fold::containing(&timezone, local_now, &first_pass, &second_pass);
            if candidate < fold.local_end {
                if let Some((candidate_first, candidate_second)) = ambiguous(&timezone, candidate) {
                    match (in_first_pass, self.clock_change_rule) {
                        (true, _) => return Some(candidate_first),
                        (false, ClockChangeRule::Repeating) => return Some(candidate_second),
                        // A fixed-time job already ran in the first pass.
                        (false, ClockChangeRule::FixedTime) => {
                            candidate =
                                self.next_local_match(fold.local_end - TimeDelta::seconds(1))?;
                        }
                    }
                }
            } else if in_first_pass && self.clock_change_rule == ClockChangeRule::Repeating {
                // No more first-pass matches: the second pass of the fold comes next.
                let second_pass_match =
                    self.next_local_match(fold.local_start - TimeDelta::seconds(1))?;
                if second_pass_match < fold.local_end
                    && let Some((_, second)) = ambiguous(&timezone, second_pass_match)
                    && second > after
                {
                    return Some(second);
                }
            }
        }

        for _ in 0..MAX_CLOCK_CHANGES_PER_LOOKUP {
            let instant = match timezone.from_local_datetime(&candidate) {
                LocalResult::Single(instant) => instant.with_timezone(&Utc),
                // A later fold: its first pass comes first.
                LocalResult::Ambiguous(first_pass, _) => first_pass.with_timezone(&Utc),
                LocalResult::None => {
                    let gap_end = GapInfo::new(&candidate, &timezone)?.end?;
                    match self.clock_change_rule {
                        ClockChangeRule::FixedTime => gap_end.with_timezone(&Utc),
                        ClockChangeRule::Repeating => {
                            candidate = self
                                .next_local_match(gap_end.naive_local() - TimeDelta::seconds(1))?;
                            continue;
                        }
                    }
                }
            };
            // Guards the "strictly after" invariant should a fold have been measured wrongly.
            if instant > after {
                return Some(instant);
            }
            candidate = self.next_local_match(candidate)?;
        }
        None
    }

    /// The next local date-time (whole seconds) strictly after `after` that matches the fields,
    /// ignoring clock changes: the crate is run in UTC, where every local time exists once.
    fn next_local_match(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        // The crate iterates years from 1970; earlier starting points would wrap its year math.
        let earliest = DateTime::<Utc>::UNIX_EPOCH.naive_utc() - TimeDelta::seconds(1);
        let after = after.max(earliest);
        if after.year() > LAST_SUPPORTED_YEAR {
            return None;
        }
        let after = after.and_utc();
        let next_of = |schedule: &cron::Schedule| {
            schedule
                .after(&after)
                .next()
                .map(|instant| instant.naive_utc())
        };
        match &self.day_rule {
            DayRule::Both(schedule) => next_of(schedule),
            DayRule::Either {
                by_day_of_month,
                by_day_of_week,
            } => match (next_of(by_day_of_month), next_of(by_day_of_week)) {
                (Some(first), Some(second)) => Some(first.min(second)),
                (only, None) | (None, only) => only,
            },
        }
    }
}

impl ExpandedFields {
    fn days_are_either(&self) -> bool {
        !self.day_of_month_is_star && !self.day_of_week_is_star
    }
}

/// The local start and end of a fall-back fold (the stretch of local time that occurs twice).
struct Fold {
    local_start: NaiveDateTime,
    local_end: NaiveDateTime,
}

impl Fold {
    /// The fold containing `local`, whose two instants are `first_pass` and `second_pass`.
    fn containing(
        timezone: &Tz,
        local: NaiveDateTime,
        first_pass: &DateTime<Tz>,
        second_pass: &DateTime<Tz>,
    ) -> Fold {
        // The fold is as long as the offset change: the same local time, one change apart.
        let length = second_pass.with_timezone(&Utc) - first_pass.with_timezone(&Utc);
        let is_repeated = |moment: NaiveDateTime| {
            matches!(
                timezone.from_local_datetime(&moment),
                LocalResult::Ambiguous(..)
            )
        };
        // Transitions happen on whole seconds: bisect between a second known to lie before the
        // fold (one fold length earlier) and one inside it.
        let mut before = truncate_to_second(local - length);
        let mut inside = truncate_to_second(local);
        while inside - before > TimeDelta::seconds(1) && !is_repeated(before) {
            let middle = before + TimeDelta::seconds((inside - before).num_seconds() / 2);
            if is_repeated(middle) {
                inside = middle;
            } else {
                before = middle;
            }
        }
        Fold {
            local_start: inside,
            local_end: inside + length,
        }
    }
}

fn truncate_to_second(moment: NaiveDateTime) -> NaiveDateTime {
    moment.with_nanosecond(0).unwrap_or(moment)
}

/// Both instants of a local time inside a fold, in UTC.
fn ambiguous(timezone: &Tz, local: NaiveDateTime) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    match timezone.from_local_datetime(&local) {
        LocalResult::Ambiguous(first_pass, second_pass) => Some((
            first_pass.with_timezone(&Utc),
            second_pass.with_timezone(&Utc),
        )),
        LocalResult::Single(_) | LocalResult::None => None,
    }
}

/// The 5-field line a shorthand stands for (Vixie meanings: `@weekly` is Sunday 00:00).
fn expand_shorthand(source: &str) -> Result<&'static str, ScheduleError> {
    match source.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => Ok("0 0 1 1 *"),
        "@monthly" => Ok("0 0 1 * *"),
        "@weekly" => Ok("0 0 * * 0"),
        "@daily" | "@midnight" => Ok("0 0 * * *"),
        "@hourly" => Ok("0 * * * *"),
        "@reboot" => Err(ScheduleError::RebootUnsupported),
        _ => Err(ScheduleError::UnknownShorthand(echo(source))),
    }
}

fn parse_field(field: CronField, text: &str) -> Result<ParsedField, ScheduleError> {
    let shape = FieldShape::of(field);
    let is_day_field = matches!(field, CronField::DayOfMonth | CronField::DayOfWeek);
    // Quartz-style `?` ("no specific value") in a day field reads as `*`.
    if is_day_field && text == "?" {
        return Ok(ParsedField {
            values: shape.full(),
            is_star: true,
        });
    }
    let mut values = ValueSet::default();
    for item in text.split(',') {
        parse_item(&shape, text, item, &mut values)?;
    }
    Ok(ParsedField {
        values,
        is_star: text.starts_with('*'),
    })
}

/// One list item: `*`, `N`, `A-B`, each optionally followed by `/STEP` (`N/STEP` means `N-max/STEP`).
fn parse_item(
    shape: &FieldShape,
    field_text: &str,
    item: &str,
    values: &mut ValueSet,
) -> Result<(), ScheduleError> {
    if item.is_empty() {
        return Err(ScheduleError::field(
            shape.field,
            format!("`{}` has an empty list item", echo(field_text)),
        ));
    }
    let (range_text, step) = match item.split_once('/') {
        Some((range_text, step_text)) => (range_text, Some(parse_step(shape, item, step_text)?)),
        None => (item, None),
    };
    let (first, last) = if range_text == "*" {
        (shape.min, shape.max)
    } else if let Some((first_text, last_text)) = range_text.split_once('-') {
        let first = parse_value(shape, item, first_text)?;
        let last = parse_value(shape, item, last_text)?;
        if first > last {
            return Err(ScheduleError::field(
                shape.field,
                format!(
                    "range `{}` runs backwards: write the smaller value first, or a list such as \
                     `5-6,0-1` for a range that wraps around",
                    echo(item)
                ),
            ));
        }
        (first, last)
    } else {
        let value = parse_value(shape, item, range_text)?;
        match step {
            Some(_) => (value, shape.max),
            None => (value, value),
        }
    };
    let mut value = first;
    while value <= last {
        let normalised = if shape.field == CronField::DayOfWeek && value == 7 {
            0
        } else {
            value
        };
        values.insert(normalised);
        value = match value.checked_add(step.unwrap_or(1)) {
            Some(next) => next,
            None => break,
        };
    }
    Ok(())
}

fn parse_step(shape: &FieldShape, item: &str, step_text: &str) -> Result<u32, ScheduleError> {
    if step_text.is_empty() || !step_text.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(ScheduleError::field(
            shape.field,
            format!(
                "step in `{}` must be a whole number such as `*/15`",
                echo(item)
            ),
        ));
    }
    match step_text.parse::<u32>() {
        Ok(0) => Err(ScheduleError::field(
            shape.field,
            format!("step in `{}` must be at least 1", echo(item)),
        )),
        Ok(step) => Ok(step),
        Err(_) => Err(ScheduleError::field(
            shape.field,
            format!(
                "step in `{}` is too large (at most {})",
                echo(item),
                shape.max
            ),
        )),
    }
}

fn parse_value(shape: &FieldShape, item: &str, token: &str) -> Result<u32, ScheduleError> {
    if token.is_empty() {
        return Err(ScheduleError::field(
            shape.field,
            format!("`{}` is missing a number", echo(item)),
        ));
    }
    if token.bytes().all(|byte| byte.is_ascii_digit()) {
        return match token.parse::<u32>() {
            Ok(value) if (shape.min..=shape.max).contains(&value) => Ok(value),
            _ => Err(ScheduleError::field(
                shape.field,
                format!(
                    "`{}` is out of range {}-{}",
                    echo(token),
                    shape.min,
                    shape.max
                ),
            )),
        };
    }
    let upper = token.to_ascii_uppercase();
    let position_in = |names: &[&str]| names.iter().position(|name| *name == upper);
    match shape.field {
        CronField::Month => position_in(&MONTH_NAMES)
            .or_else(|| position_in(&MONTH_FULL_NAMES))
            .map(|index| index as u32 + 1)
            .ok_or_else(|| {
                ScheduleError::field(
                    shape.field,
                    format!("`{}` is not a month: use 1-12 or JAN-DEC", echo(token)),
                )
            }),
        CronField::DayOfWeek => position_in(&DAY_NAMES)
            .or_else(|| position_in(&DAY_FULL_NAMES))
            .map(|index| index as u32)
            .ok_or_else(|| {
                ScheduleError::field(
                    shape.field,
                    format!(
                        "`{}` is not a day: use 0-7 (0 and 7 are Sunday) or SUN-SAT",
                        echo(token)
                    ),
                )
            }),
        _ => Err(ScheduleError::field(
            shape.field,
            format!(
                "`{}` is not a number in {}-{}",
                echo(token),
                shape.min,
                shape.max
            ),
        )),
    }
}

/// Refuses expressions whose day-of-month can never occur in the chosen months (`0 0 30 2 *`),
/// which Vixie cron accepts and then never runs — a silent loss we would rather report.
fn check_day_of_month_occurs(source: &str, fields: &ExpandedFields) -> Result<(), ScheduleError> {
    // The longest each month gets in any year (February: 29 in leap years).
    const LONGEST_MONTH: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let occurs = fields.months.values().any(|month| {
        fields.days_of_month.values().any(|day| {
            LONGEST_MONTH
                .get(month.wrapping_sub(1) as usize)
                .is_some_and(|longest| day <= *longest)
        })
    });
    if occurs {
        return Ok(());
    }
    Err(ScheduleError::NeverFires {
        expression: echo(source),
        reason: format!(
            "day-of-month {} never occurs in {}",
            compress(fields.days_of_month, |day| day.to_string()),
            compress(fields.months, |month| { month_name(month).to_string() })
        ),
    })
}

/// Which day fields one crate schedule carries.
#[derive(Clone, Copy)]
enum DaySelection {
    Both,
    DayOfMonthOnly,
    DayOfWeekOnly,
}

/// Emits the expanded fields in the crate's dialect and parses them.
fn crate_schedule(
    fields: &ExpandedFields,
    days: DaySelection,
) -> Result<cron::Schedule, ScheduleError> {
    let number = |value: u32| value.to_string();
    let day_name = |value: u32| name_at(&DAY_NAMES, value).to_string();
    let day_of_month = match days {
        DaySelection::Both | DaySelection::DayOfMonthOnly => {
            crate_field(CronField::DayOfMonth, fields.days_of_month, number)
        }
        DaySelection::DayOfWeekOnly => "*".to_string(),
    };
    let day_of_week = match days {
        DaySelection::Both | DaySelection::DayOfWeekOnly => {
            crate_field(CronField::DayOfWeek, fields.days_of_week, day_name)
        }
        DaySelection::DayOfMonthOnly => "*".to_string(),
    };
    let translated = format!(
        "{} {} {} {} {} {}",
        crate_field(CronField::Second, fields.seconds, number),
        crate_field(CronField::Minute, fields.minutes, number),
        crate_field(CronField::Hour, fields.hours, number),
        day_of_month,
        crate_field(CronField::Month, fields.months, number),
        day_of_week,
    );
    cron::Schedule::from_str(&translated).map_err(|error| ScheduleError::Translation {
        reason: error.to_string(),
        translated,
    })
}

/// `*` for a full set (so the crate sees "unrestricted"), else an explicit list.
fn crate_field(field: CronField, values: ValueSet, name: impl Fn(u32) -> String) -> String {
    if values == FieldShape::of(field).full() {
        return "*".to_string();
    }
    values.values().map(name).collect::<Vec<_>>().join(",")
}
/// `names[index]`, or `?` for an index the parser cannot produce.
fn name_at(names: &'static [&'static str], index: u32) -> &'static str {
    names.get(index as usize).copied().unwrap_or("?")
}

#[cfg(test)]
mod tests;

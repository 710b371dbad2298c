//! `CronExpr::describe`: a sentence for humans ("at 09:00 on Monday-Friday (Europe/Berlin)"),
//! built from the expanded fields, with runs of values compressed into ranges and steps.

use std::fmt::Write as _;

use super::{CronExpr, ExpandedFields, FieldShape, ValueSet, name_at};
use crate::schedule::error::CronField;

const MONTH_DISPLAY_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAY_DISPLAY_NAMES: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

impl CronExpr {
    /// A sentence for humans, e.g. "at 09:00 on Monday-Friday (Europe/Berlin)".
    pub fn describe(&self) -> String {
        let fields = &self.fields;
        let mut text = describe_time_of_day(fields);
        let days = describe_days(fields);
        if !days.is_empty() {
            text.push(' ');
            text.push_str(&days);
        }
        if fields.months != FieldShape::of(CronField::Month).full() {
            let _ = write!(
                text,
                " in {}",
                describe_values(fields.months, |month| { month_name(month).to_string() })
            );
        }
        let _ = write!(text, " ({})", self.timezone.name());
        text
    }
}

/// The time-of-day part of a description.
fn describe_time_of_day(fields: &ExpandedFields) -> String {
    let second_full = FieldShape::of(CronField::Second).full();
    let minute_full = FieldShape::of(CronField::Minute).full();
    let hour_full = FieldShape::of(CronField::Hour).full();
    let only_second_zero = fields.seconds.single() == Some(0);

    // A few fixed times read best as a clock list: "at 09:00 and 17:30".
    if let Some(second) = fields.seconds.single()
        && fields.minutes != minute_full
        && fields.hours != hour_full
        && fields.minutes.len() * fields.hours.len() <= 6
    {
        let times: Vec<String> = fields
            .hours
            .values()
            .flat_map(|hour| {
                fields.minutes.values().map(move |minute| match second {
                    0 => format!("{hour:02}:{minute:02}"),
                    _ => format!("{hour:02}:{minute:02}:{second:02}"),
                })
            })
            .collect();
        return format!("at {}", join_with_and(&times));
    }

    let mut parts = Vec::new();
    if fields.seconds == second_full {
        parts.push("every second".to_string());
    } else if let Some(step) = even_step(fields.seconds, 0, 59) {
        parts.push(format!("every {step} seconds"));
    } else if !only_second_zero {
        parts.push(format!("at second {}", compress(fields.seconds, plain)));
    }
    let seconds_described = !parts.is_empty();
    if fields.minutes == minute_full {
        if !seconds_described {
            parts.push("every minute".to_string());
        }
    } else if let Some(step) = even_step(fields.minutes, 0, 59).filter(|_| !seconds_described) {
        parts.push(format!("every {step} minutes"));
    } else {
        parts.push(format!("at minute {}", compress(fields.minutes, plain)));
    }
    if fields.hours != hour_full {
        if let Some(step) = even_step(fields.hours, 0, 23) {
            parts.push(format!("of every {} hour", ordinal(step)));
        } else {
            parts.push(format!("during hour {}", compress(fields.hours, plain)));
        }
    } else if fields.minutes != minute_full && even_step(fields.minutes, 0, 59).is_none() {
        parts.push("of every hour".to_string());
    }
    parts.join(" ")
}

/// The day part of a description; empty when every day matches.
fn describe_days(fields: &ExpandedFields) -> String {
    let day_of_month_full = fields.days_of_month == FieldShape::of(CronField::DayOfMonth).full();
    let day_of_week_full = fields.days_of_week == FieldShape::of(CronField::DayOfWeek).full();
    let days_of_month = || match even_step(fields.days_of_month, 1, 31) {
        Some(step) => format!("on every {} day of the month", ordinal(step)),
        None => format!(
            "on day {} of the month",
            compress(fields.days_of_month, plain)
        ),
    };
    let weekday_names = || {
        describe_values(fields.days_of_week, |day| {
            name_at(&DAY_DISPLAY_NAMES, day).to_string()
        })
    };
    if fields.days_are_either() {
        return format!("{} or on {}", days_of_month(), weekday_names());
    }
    match (day_of_month_full, day_of_week_full) {
        (true, true) => String::new(),
        (false, true) => days_of_month(),
        (true, false) => format!("on {}", weekday_names()),
        (false, false) => format!("{} when it falls on {}", days_of_month(), weekday_names()),
    }
}

/// The display name of month 1..=12.
pub(super) fn month_name(month: u32) -> &'static str {
    name_at(&MONTH_DISPLAY_NAMES, month.wrapping_sub(1))
}

fn plain(value: u32) -> String {
    value.to_string()
}

/// `Monday-Friday`, `January, July`: runs joined by `-`, the rest listed.
fn describe_values(values: ValueSet, name: impl Fn(u32) -> String) -> String {
    compress(values, name).replace(',', ", ")
}

/// `1-5,7,9-11`: consecutive values as ranges.
pub(super) fn compress(values: ValueSet, name: impl Fn(u32) -> String) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for value in values.values() {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == value => *last = value,
            _ => runs.push((value, value)),
        }
    }
    runs.iter()
        .map(|&(first, last)| match last - first {
            0 => name(first),
            1 => format!("{},{}", name(first), name(last)),
            _ => format!("{}-{}", name(first), name(last)),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `Some(n)` when the set is exactly `min-max/n` with n > 1 (e.g. minutes 0,15,30,45 → 15).
fn even_step(values: ValueSet, min: u32, max: u32) -> Option<u32> {
    let mut iter = values.values();
    let first = iter.next()?;
    let second = iter.next()?;
    let step = second - first;
    if first != min || step < 2 {
        return None;
    }
    let expected: ValueSet = {
        let mut set = ValueSet::default();
        let mut value = min;
        while value <= max {
            set.insert(value);
            value += step;
        }
        set
    };
    (expected == values).then_some(step)
}

/// `2nd`, `3rd`, `12th`, `21st`.
pub(super) fn ordinal(number: u32) -> String {
    let suffix = match (number % 10, number % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{number}{suffix}")
}

fn join_with_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [only] => only.clone(),
        [rest @ .., last] => format!("{} and {}", rest.join(", "), last),
    }
}

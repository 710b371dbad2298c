//! `ScheduleError`: every way a schedule, a timezone or a missed-run policy can be refused.
//!
//! Each message names the part that is wrong (the cron field, the interval, the date-time) and
//! says what would be accepted, so an agent or a Studio user can fix the input from the text alone.
//! Echoed input is shortened, because garbage expressions can be arbitrarily long.

use std::fmt;

/// The longest piece of user input repeated inside an error message.
const MAX_ECHOED_CHARS: usize = 64;

/// One field of a cron expression, named as crontab(5) names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CronField {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl CronField {
    /// The name used in error messages and descriptions.
    pub fn name(self) -> &'static str {
        match self {
            CronField::Second => "second",
            CronField::Minute => "minute",
            CronField::Hour => "hour",
            CronField::DayOfMonth => "day-of-month",
            CronField::Month => "month",
            CronField::DayOfWeek => "day-of-week",
        }
    }
}

impl fmt::Display for CronField {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "cron expression is empty: write 5 fields `minute hour day-of-month month day-of-week`, \
         e.g. `0 9 * * 1-5`"
    )]
    EmptyExpression,

    #[error(
        "cron expression `{expression}` has {found} field(s): write 5 \
         (`minute hour day-of-month month day-of-week`) or 6 with leading seconds"
    )]
    FieldCount { expression: String, found: usize },

    /// One field is wrong; `problem` quotes the offending part.
    #[error("{field}: {problem}")]
    Field { field: CronField, problem: String },

    #[error(
        "unknown shorthand `{0}`: use @yearly, @annually, @monthly, @weekly, @daily, @midnight \
         or @hourly"
    )]
    UnknownShorthand(String),

    #[error(
        "`@reboot` is not supported: jobs run by time; use `every` for a repeating job or `at` \
         for a single run"
    )]
    RebootUnsupported,

    #[error("cron expression `{expression}` never fires: {reason}")]
    NeverFires { expression: String, reason: String },

    /// An unknown zone name, with the closest known name when one is close enough.
    #[error("unknown timezone `{name}`: {}", timezone_advice(.suggestion.as_deref()))]
    UnknownTimezone {
        name: String,
        /// "did you mean Europe/Berlin?", or a sentence about an abbreviation or an offset.
        suggestion: Option<String>,
    },

    #[error("unknown schedule kind `{0}`: use `cron`, `every` or `at`")]
    UnknownKind(String),

    #[error("interval `{text}`: {problem}")]
    Interval { text: String, problem: String },

    #[error("date-time `{text}`: {problem}")]
    DateTime { text: String, problem: String },

    #[error("missed-run policy `{text}`: {problem}")]
    MissedPolicy { text: String, problem: String },

    /// Our translation produced text the cron crate refused: a bug here, not in the input.
    #[error(
        "internal error: the cron crate refused the translated expression `{translated}`: {reason}"
    )]
    Translation { translated: String, reason: String },
}

impl ScheduleError {
    pub(crate) fn field(field: CronField, problem: impl Into<String>) -> ScheduleError {
        ScheduleError::Field {
            field,
            problem: problem.into(),
        }
    }
}

/// What to do about an unknown timezone name: the suggestion first, then the general rule.
fn timezone_advice(suggestion: Option<&str>) -> String {
    const RULE: &str = "use an IANA name such as `Europe/Berlin`, `America/New_York` or `UTC`";
    match suggestion {
        Some(suggestion) => format!("{suggestion} (In general: {RULE}.)"),
        None => RULE.to_string(),
    }
}

/// User input as repeated in an error message: trimmed, and cut at [`MAX_ECHOED_CHARS`].
pub(crate) fn echo(text: &str) -> String {
    let trimmed = text.trim();
    if trimmed.chars().count() <= MAX_ECHOED_CHARS {
        return trimmed.to_string();
    }
    let mut shortened: String = trimmed.chars().take(MAX_ECHOED_CHARS).collect();
    shortened.push('…');
    shortened
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_input_is_shortened_in_messages() {
        let long = "x".repeat(500);
        let echoed = echo(&long);
        assert_eq!(echoed.chars().count(), MAX_ECHOED_CHARS + 1);
        assert!(echoed.ends_with('…'));
        assert_eq!(echo("  0 9 * * *  "), "0 9 * * *");
    }

    #[test]
    fn field_errors_name_the_field() {
        let error = ScheduleError::field(CronField::DayOfWeek, "`8` is out of range 0-7");
        assert_eq!(error.to_string(), "day-of-week: `8` is out of range 0-7");
    }
}

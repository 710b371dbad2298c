//! A recurrence written in one line: `every <duration>` (anchored at midnight of 2000-01-01 in the
//! zone, so the next run is a pure function of the time and the text) or a crontab line. Backups
//! use it (`[backup] schedule`); the config checks it when it is read.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::{CronExpr, ScheduleSpec};

/// `every 6h` or `30 3 * * *`, read in a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recurrence {
    Every(ScheduleSpec),
    Cron(CronExpr),
}

impl Recurrence {
    /// `every 6h`, `every 30m`, or a five-field crontab line read in `zone`.
    pub fn parse(text: &str, zone: Tz) -> Result<Recurrence, String> {
        let text = text.trim();
        if let Some(interval) = text.strip_prefix("every ") {
            let interval: Duration =
                humantime::parse_duration(interval.trim()).map_err(|error| {
                    format!("`{text}`: {error} (write e.g. `every 6h` or `every 30m`)")
                })?;
            let anchor = zone
                .with_ymd_and_hms(2000, 1, 1, 0, 0, 0)
                .earliest()
                .map(|local| local.with_timezone(&Utc))
                .unwrap_or(
                    DateTime::from_timestamp(946_684_800, 0).unwrap_or(DateTime::UNIX_EPOCH),
                );
            return ScheduleSpec::every(interval, anchor)
                .map(Recurrence::Every)
                .map_err(|error| format!("`{text}`: {error}"));
        }
        CronExpr::parse(text, zone.name())
            .map(Recurrence::Cron)
            .map_err(|error| {
                format!("`{text}`: {error} (write `every <duration>` or a crontab line)")
            })
    }

    /// The first run strictly after `after`.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Recurrence::Every(spec) => spec.next_after(after),
            Recurrence::Cron(expression) => expression.next_after(after),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_and_crontab_lines_parse_and_nonsense_is_named() {
        let every = Recurrence::parse("every 6h", chrono_tz::UTC).unwrap();
        let noon = Utc.with_ymd_and_hms(2026, 11, 26, 12, 0, 0).unwrap();
        assert_eq!(
            every.next_after(noon),
            Some(Utc.with_ymd_and_hms(2026, 11, 26, 18, 0, 0).unwrap())
        );
        let nightly = Recurrence::parse("30 3 * * *", chrono_tz::Europe::Berlin).unwrap();
        assert_eq!(
            nightly.next_after(noon),
            Some(Utc.with_ymd_and_hms(2026, 11, 27, 2, 30, 0).unwrap())
        );
        let error = Recurrence::parse("every fortnight", chrono_tz::UTC).unwrap_err();
        assert!(error.contains("every fortnight"), "{error}");
        assert!(Recurrence::parse("sometimes", chrono_tz::UTC).is_err());
    }
}

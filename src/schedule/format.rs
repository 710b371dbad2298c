//! How schedules and fire times read to people: local times with their zone, shortened texts.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::parse_timezone;

/// The zone named `name`, or UTC when it is not a known zone (stored jobs were validated).
pub fn zone_of(name: &str) -> Tz {
    parse_timezone(name).unwrap_or(Tz::UTC)
}

/// `2026-01-05 09:00 CET (Mon)` in the job's timezone.
pub fn format_local(ms: i64, zone: Tz) -> String {
    let time: DateTime<Utc> = crate::clock::to_datetime(ms);
    time.with_timezone(&zone)
        .format("%Y-%m-%d %H:%M:%S %Z (%a)")
        .to_string()
}

pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut short: String = text.chars().take(max).collect();
    short.push('…');
    short
}

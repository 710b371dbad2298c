//! Wall-clock helpers. Timestamps are stored as integer milliseconds since the Unix epoch (UTC).

use chrono::{DateTime, TimeZone, Utc};

pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

pub fn to_datetime(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// RFC 3339 text for humans and JSON.
pub fn format_ms(ms: i64) -> String {
    to_datetime(ms).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

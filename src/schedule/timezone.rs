//! Timezone names: IANA names (`Europe/Berlin`, `UTC`) read through chrono-tz.
//!
//! Names are matched exactly first and then without regard to ASCII case, so `europe/berlin`
//! becomes `Europe/Berlin`; the canonical spelling is what [`chrono_tz::Tz::name`] returns.

use chrono_tz::{TZ_VARIANTS, Tz};

use crate::schedule::error::{ScheduleError, echo};

/// Reads an IANA timezone name; an unknown or empty name is refused with an example of a good one.
pub fn parse_timezone(name: &str) -> Result<Tz, ScheduleError> {
    let trimmed = name.trim();
    if let Ok(timezone) = trimmed.parse::<Tz>() {
        return Ok(timezone);
    }
    TZ_VARIANTS
        .iter()
        .find(|timezone| timezone.name().eq_ignore_ascii_case(trimmed))
        .copied()
        .ok_or_else(|| ScheduleError::UnknownTimezone(echo(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_case_insensitive_names_are_accepted() {
        assert_eq!(parse_timezone("Europe/Berlin"), Ok(Tz::Europe__Berlin));
        assert_eq!(parse_timezone(" europe/berlin "), Ok(Tz::Europe__Berlin));
        assert_eq!(parse_timezone("UTC"), Ok(Tz::UTC));
        assert_eq!(parse_timezone("utc"), Ok(Tz::UTC));
    }

    #[test]
    fn unknown_and_empty_names_are_refused() {
        for name in ["", "Europe/Berln", "CEST+2", "../etc/passwd"] {
            let error = parse_timezone(name).expect_err(name).to_string();
            assert!(error.contains("unknown timezone"), "{name}: {error}");
            assert!(error.contains("Europe/Berlin"), "{name}: {error}");
        }
    }
}

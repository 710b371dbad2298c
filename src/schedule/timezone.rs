//! Timezone names: IANA names (`Europe/Berlin`, `UTC`) read through chrono-tz.
//!
//! Names are matched exactly first and then without regard to ASCII case, so `europe/berlin`
//! becomes `Europe/Berlin`; the canonical spelling is what [`chrono_tz::Tz::name`] returns.
//! A name that matches nothing is refused with a close match when there is one, because people
//! type what they say: a city ("Berlin"), an abbreviation ("CEST"), an offset ("UTC+2") or a
//! typo ("Europe/Berln"). The close match is the known name (or its city part) at the smallest
//! edit distance (`strsim`), preferring the geographic regions over legacy aliases.

use chrono_tz::{TZ_VARIANTS, Tz};

use crate::schedule::error::{ScheduleError, echo};

/// Input longer than this gets no suggestion (no zone name is half as long).
const MAX_SUGGESTED_INPUT_CHARS: usize = 64;

/// The regions of the tz database's geographic names; other names (`US/Eastern`, `EST5EDT`)
/// are legacy aliases, suggested only when nothing geographic is as close.
const GEOGRAPHIC_REGIONS: [&str; 9] = [
    "Africa",
    "America",
    "Antarctica",
    "Asia",
    "Atlantic",
    "Australia",
    "Europe",
    "Indian",
    "Pacific",
];

/// Abbreviations people write for a zone, each with a zone that uses it. Abbreviations that are
/// themselves zone names (`CET`, `EST`, `MST`, `HST`, `EET`, `WET`) are accepted before this.
const ABBREVIATIONS: [(&str, &str); 22] = [
    ("PST", "America/Los_Angeles"),
    ("PDT", "America/Los_Angeles"),
    ("MDT", "America/Denver"),
    ("CST", "America/Chicago"),
    ("CDT", "America/Chicago"),
    ("EDT", "America/New_York"),
    ("AKST", "America/Anchorage"),
    ("CEST", "Europe/Berlin"),
    ("BST", "Europe/London"),
    ("IST", "Asia/Kolkata"),
    ("WEST", "Europe/Lisbon"),
    ("EEST", "Europe/Athens"),
    ("MSK", "Europe/Moscow"),
    ("JST", "Asia/Tokyo"),
    ("KST", "Asia/Seoul"),
    ("HKT", "Asia/Hong_Kong"),
    ("SGT", "Asia/Singapore"),
    ("AEST", "Australia/Sydney"),
    ("AEDT", "Australia/Sydney"),
    ("AWST", "Australia/Perth"),
    ("NZST", "Pacific/Auckland"),
    ("NZDT", "Pacific/Auckland"),
];

/// Reads an IANA timezone name; an unknown or empty name is refused with a close match when
/// there is one ("did you mean Europe/Berlin?") and an example of a good name.
pub fn parse_timezone(name: &str) -> Result<Tz, ScheduleError> {
    let trimmed = name.trim();
    if let Ok(timezone) = trimmed.parse::<Tz>() {
        return Ok(timezone);
    }
    TZ_VARIANTS
        .iter()
        .find(|timezone| timezone.name().eq_ignore_ascii_case(trimmed))
        .copied()
        .ok_or_else(|| ScheduleError::UnknownTimezone {
            name: echo(name),
            suggestion: suggest_timezone(trimmed),
        })
}

/// A sentence proposing a known zone for `name` ("did you mean Europe/Berlin?"), when one is
/// close enough to be a likely meaning.
pub fn suggest_timezone(name: &str) -> Option<String> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed.chars().count() > MAX_SUGGESTED_INPUT_CHARS {
        return None;
    }
    if let Some((_, zone)) = ABBREVIATIONS
        .iter()
        .find(|(abbreviation, _)| abbreviation.eq_ignore_ascii_case(trimmed))
    {
        return Some(format!(
            "`{}` is an abbreviation, not a zone: did you mean {zone} (or another place in that zone)?",
            trimmed.to_ascii_uppercase()
        ));
    }
    if let Some(hours) = fixed_offset_hours(trimmed) {
        // POSIX names count west as positive: UTC+2 is `Etc/GMT-2`.
        let etc = match hours {
            0 => "Etc/UTC".to_string(),
            hours if hours > 0 => format!("Etc/GMT-{hours}"),
            hours => format!("Etc/GMT+{}", -hours),
        };
        if etc.parse::<Tz>().is_ok() {
            return Some(format!(
                "a fixed offset ignores daylight saving: did you mean your city's zone (like Europe/Berlin), \
                 or {etc} for a fixed offset of {hours:+} hours (POSIX signs are inverted)?"
            ));
        }
        return None;
    }
    closest_name(trimmed).map(|close| format!("did you mean {close}?"))
}

/// `UTC+2`, `GMT-05:00`, `+02:00`, `+2`: the whole hours of a fixed offset.
fn fixed_offset_hours(text: &str) -> Option<i32> {
    let upper = text.to_ascii_uppercase();
    let rest = upper
        .strip_prefix("UTC")
        .or_else(|| upper.strip_prefix("GMT"))
        .unwrap_or(&upper)
        .trim();
    let (sign, digits) = match rest.as_bytes().first()? {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    let hours_text = digits
        .strip_suffix(":00")
        .or_else(|| digits.strip_suffix("00").filter(|hours| hours.len() == 2))
        .unwrap_or(digits);
    if hours_text.is_empty()
        || hours_text.len() > 2
        || !hours_text.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let hours: i32 = hours_text.parse().ok()?;
    (hours <= 14).then_some(sign * hours)
}

/// The known name nearest to `text` by edit distance, compared with whole names and (for input
/// without a `/`) with their city part, spaces read as `_` ("new york" → America/New_York).
fn closest_name(text: &str) -> Option<&'static str> {
    let wanted = text.to_lowercase().replace(' ', "_");
    let whole_name_only = wanted.contains('/');
    let allowed = (wanted.chars().count() / 4).max(1);
    let mut best: Option<(usize, usize, usize, &'static str)> = None;
    for zone in TZ_VARIANTS.iter() {
        let name = zone.name();
        let lower = name.to_lowercase();
        let mut distance = strsim::levenshtein(&wanted, &lower);
        if !whole_name_only && let Some((_, city)) = lower.rsplit_once('/') {
            distance = distance.min(strsim::levenshtein(&wanted, city));
        }
        let legacy = usize::from(
            !GEOGRAPHIC_REGIONS
                .iter()
                .any(|region| name.split('/').next() == Some(*region)),
        );
        let key = (distance, legacy, name.len(), name);
        if best.is_none_or(|current| key < current) {
            best = Some(key);
        }
    }
    best.filter(|(distance, ..)| *distance <= allowed)
        .map(|(.., name)| name)
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

    #[test]
    fn typos_cities_abbreviations_and_offsets_get_a_close_match() {
        let cases = [
            ("Europe/Berln", "did you mean Europe/Berlin?"),
            ("europe/berlni", "did you mean Europe/Berlin?"),
            ("Berlin", "did you mean Europe/Berlin?"),
            ("berln", "did you mean Europe/Berlin?"),
            ("New York", "did you mean America/New_York?"),
            ("Amerika/New_York", "did you mean America/New_York?"),
            ("Tokio", "did you mean Asia/Tokyo?"),
            ("CEST", "did you mean Europe/Berlin"),
            ("pst", "did you mean America/Los_Angeles"),
            ("UTC+2", "Etc/GMT-2"),
            ("GMT-05:00", "Etc/GMT+5"),
            ("+01:00", "Etc/GMT-1"),
        ];
        for (name, expected) in cases {
            let error = parse_timezone(name).expect_err(name).to_string();
            assert!(error.contains(expected), "{name}: {error}");
            assert!(
                error.starts_with(&format!("unknown timezone `{name}`")),
                "{error}"
            );
        }
    }

    #[test]
    fn nothing_close_means_no_guess() {
        for name in [
            "Mars/Olympus",
            "xyzzy-plugh",
            "../etc/passwd",
            &"Europe/".repeat(40),
        ] {
            assert_eq!(suggest_timezone(name), None, "{name}");
        }
        assert_eq!(fixed_offset_hours("UTC+15"), None);
        assert_eq!(fixed_offset_hours("UTC+0200"), Some(2));
        assert_eq!(fixed_offset_hours("-3"), Some(-3));
    }
}

//! The daemon's time zone: `timezone` in the config (file, `CLAWVISOR_TIMEZONE`), else the
//! system's zone — the `TZ` variable, else the zone `/etc/localtime` links to (or
//! `/etc/timezone` names) — else UTC. People and agents can have their own zone; this is the
//! one used when neither has.
//!
//! A zone named in a file or variable of ours and not known is a config error naming the key
//! and the close match. A system zone that cannot be read is a warning: the operator did not
//! choose it for clawvisor, and UTC is a safe answer.

use std::collections::BTreeMap;
use std::path::Path;

use chrono_tz::Tz;

use super::ConfigError;
use crate::schedule::parse_timezone;

/// The daemon's zone and where it came from (shown by `/timezone`, Studio and the boot log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonTimezone {
    pub zone: Tz,
    /// "timezone in /etc/clawvisor/clawvisor.toml", "the system's TZ variable", ...
    pub origin: String,
}

impl Default for DaemonTimezone {
    fn default() -> Self {
        DaemonTimezone {
            zone: Tz::UTC,
            origin: "the default (no system zone found)".to_string(),
        }
    }
}

/// Reads a configured zone name (`key` in `origin`), refusing an unknown one with its reason.
pub(super) fn check_timezone(origin: &str, key: &str, name: &str) -> Result<Tz, ConfigError> {
    parse_timezone(name).map_err(|error| ConfigError::key(origin, key, error.to_string()))
}

/// The daemon's zone: `configured` when not empty (from `origin`), else the system's.
pub(super) fn daemon_timezone(
    configured: &str,
    origin: &str,
    env: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Result<DaemonTimezone, ConfigError> {
    if !configured.trim().is_empty() {
        return Ok(DaemonTimezone {
            zone: check_timezone(origin, "timezone", configured)?,
            origin: format!("timezone in {origin}"),
        });
    }
    Ok(system_timezone(env, Path::new("/etc"), warnings))
}

/// The system's zone: `TZ` (an IANA name, `:Europe/Berlin`, or a path into a zoneinfo
/// directory), else `<etc>/localtime`'s link target, else `<etc>/timezone`, else UTC.
pub fn system_timezone(
    env: &BTreeMap<String, String>,
    etc: &Path,
    warnings: &mut Vec<String>,
) -> DaemonTimezone {
    if let Some(value) = env
        .get("TZ")
        .map(|value| value.trim())
        .filter(|v| !v.is_empty())
    {
        match zone_in_text(value) {
            Some(zone) => {
                return DaemonTimezone {
                    zone,
                    origin: "the system's zone from the TZ variable".to_string(),
                };
            }
            None => warnings.push(format!(
                "the TZ variable `{}` is not an IANA zone name; set `timezone` in the config \
                 (like timezone = \"Europe/Berlin\") to choose the daemon's zone",
                crate::schedule::format::shorten(value, 64)
            )),
        }
    }
    let localtime = etc.join("localtime");
    if let Ok(target) = std::fs::read_link(&localtime)
        && let Some(zone) = zone_in_text(&target.to_string_lossy())
    {
        return DaemonTimezone {
            zone,
            origin: format!("the system's zone from {}", localtime.display()),
        };
    }
    let named = etc.join("timezone");
    if let Ok(text) = std::fs::read_to_string(&named)
        && let Some(zone) = text.lines().next().and_then(zone_in_text)
    {
        return DaemonTimezone {
            zone,
            origin: format!("the system's zone from {}", named.display()),
        };
    }
    DaemonTimezone::default()
}

/// `Europe/Berlin`, `:Europe/Berlin` or `/usr/share/zoneinfo/Europe/Berlin` → Europe/Berlin.
fn zone_in_text(text: &str) -> Option<Tz> {
    let text = text.trim().trim_start_matches(':');
    let name = match text.rfind("zoneinfo/") {
        Some(index) => &text[index + "zoneinfo/".len()..],
        None => text,
    };
    let name = name.strip_prefix("posix/").unwrap_or(name);
    parse_timezone(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn the_system_zone_comes_from_tz_then_localtime_then_timezone_then_utc() {
        let etc = tempfile::tempdir().unwrap();
        let mut warnings = Vec::new();
        let empty = env(&[]);
        assert_eq!(
            system_timezone(&empty, etc.path(), &mut warnings),
            DaemonTimezone::default()
        );
        std::fs::write(etc.path().join("timezone"), "America/New_York\n").unwrap();
        let zone = system_timezone(&empty, etc.path(), &mut warnings);
        assert_eq!(zone.zone, Tz::America__New_York);
        std::os::unix::fs::symlink(
            "/usr/share/zoneinfo/Europe/Berlin",
            etc.path().join("localtime"),
        )
        .unwrap();
        let zone = system_timezone(&empty, etc.path(), &mut warnings);
        assert_eq!(zone.zone, Tz::Europe__Berlin);
        assert!(zone.origin.contains("localtime"), "{}", zone.origin);
        for tz in [
            "Asia/Tokyo",
            ":Asia/Tokyo",
            "/usr/share/zoneinfo/Asia/Tokyo",
        ] {
            let zone = system_timezone(&env(&[("TZ", tz)]), etc.path(), &mut warnings);
            assert_eq!(zone.zone, Tz::Asia__Tokyo, "{tz}");
            assert!(zone.origin.contains("TZ"), "{}", zone.origin);
        }
        assert!(warnings.is_empty(), "{warnings:?}");
        // A POSIX rule is not a name: warned about, and the next source is used.
        let zone = system_timezone(&env(&[("TZ", "CET-1CEST")]), etc.path(), &mut warnings);
        assert_eq!(zone.zone, Tz::Europe__Berlin);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("CET-1CEST"), "{warnings:?}");
    }

    #[test]
    fn a_configured_zone_wins_and_a_bad_one_names_the_key_and_a_close_match() {
        let mut warnings = Vec::new();
        let tz = env(&[("TZ", "Asia/Tokyo")]);
        let zone = daemon_timezone("europe/berlin", "c.toml", &tz, &mut warnings).unwrap();
        assert_eq!(zone.zone, Tz::Europe__Berlin);
        assert_eq!(zone.origin, "timezone in c.toml");
        let error = daemon_timezone("Europe/Berln", "c.toml", &tz, &mut warnings)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("c.toml: timezone: unknown timezone"),
            "{error}"
        );
        assert!(error.contains("did you mean Europe/Berlin?"), "{error}");
    }
}

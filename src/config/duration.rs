//! Durations in config files: human strings such as `30s`, `5m`, `1h30m`, `250ms`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl Dur {
    /// The longest duration a config accepts: a century. The daemon adds durations to the clock
    /// (deadlines, staggered starts, retry times) and multiplies them; anything longer would
    /// overflow that arithmetic, and means "never" anyway. (`100y`: humantime's years have
    /// 365.25 days.)
    pub const MAX: Duration = Duration::from_secs(100 * 31_557_600);

    pub const fn secs(secs: u64) -> Dur {
        Dur(Duration::from_secs(secs))
    }

    pub fn parse(text: &str) -> Result<Dur, String> {
        let trimmed = text.trim();
        if trimmed == "0" {
            return Ok(Dur(Duration::ZERO));
        }
        let duration = humantime::parse_duration(trimmed).map_err(|_| {
            format!("invalid duration `{text}` (expected a duration such as `30s`, `5m`, `1h30m` or `250ms`)")
        })?;
        if duration > Dur::MAX {
            return Err(format!(
                "duration `{text}` is longer than the 100-year maximum"
            ));
        }
        Ok(Dur(duration))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_zero() {
            return f.write_str("0s");
        }
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"30s\", \"5m\" or \"1h\"")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Dur, E> {
                Dur::parse(text).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_human_durations_and_refuses_the_rest() {
        assert_eq!(Dur::parse("30s").unwrap(), Dur::secs(30));
        assert_eq!(Dur::parse("1h30m").unwrap(), Dur::secs(5400));
        assert_eq!(
            Dur::parse("250ms").unwrap(),
            Dur(Duration::from_millis(250))
        );
        assert_eq!(Dur::parse("0").unwrap(), Dur::secs(0));
        assert!(Dur::parse("soon").unwrap_err().contains("`soon`"));
        assert!(Dur::parse("-5s").is_err());
        assert_eq!(
            Dur::parse("100y").unwrap(),
            Dur(Duration::from_secs(3_155_760_000))
        );
        assert!(
            Dur::parse("500000000y")
                .unwrap_err()
                .contains("100-year maximum")
        );
        assert!(Dur::parse("18446744073709551615s").is_err());
        assert_eq!(Dur::secs(90).to_string(), "1m 30s");
        assert_eq!(
            Dur::parse(&Dur::secs(90).to_string()).unwrap(),
            Dur::secs(90)
        );
    }
}

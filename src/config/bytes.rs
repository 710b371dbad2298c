//! Sizes in config files: `64MiB`, `8 MiB`, `512KiB`, `1GiB`, `500MB` or a plain number of bytes.
//! Binary (`KiB`, `MiB`, `GiB`) and decimal (`kB`, `MB`, `GB`) units; `k`, `m`, `g` alone are
//! binary, as `mount -o size=` reads them.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number of bytes read from a human string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Bytes(pub u64);

impl Bytes {
    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Bytes {
        Bytes(n * 1024 * 1024)
    }

    /// Reads `64MiB`, `8 MiB`, `500MB`, `4096`; the error names what is accepted.
    pub fn parse(text: &str) -> Result<Bytes, String> {
        let trimmed = text.trim();
        let split = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (digits, unit) = trimmed.split_at(split);
        let invalid = || {
            format!(
                "invalid size `{text}` (expected a size such as `64MiB`, `8 MiB`, `500MB` or a number of bytes)"
            )
        };
        let number: u64 = digits.parse().map_err(|_| invalid())?;
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            _ => return Err(invalid()),
        };
        number
            .checked_mul(multiplier)
            .map(Bytes)
            .ok_or_else(|| format!("size `{text}` is too large"))
    }
}

impl fmt::Display for Bytes {
    /// The largest binary unit that divides the size exactly (`64MiB`), else plain bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}", self.0)
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"64MiB\" or a number of bytes")
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Bytes, E> {
                Bytes::parse(value).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Bytes, E> {
                u64::try_from(value)
                    .map(Bytes)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Bytes, E> {
                Ok(Bytes(value))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(Bytes::parse("64MiB"), Ok(Bytes::mib(64)));
        assert_eq!(Bytes::parse("8 MiB"), Ok(Bytes::mib(8)));
        assert_eq!(Bytes::parse("6m"), Ok(Bytes::mib(6)));
        assert_eq!(Bytes::parse("500MB"), Ok(Bytes(500_000_000)));
        assert_eq!(Bytes::parse("4096"), Ok(Bytes(4096)));
        assert!(Bytes::parse("lots").unwrap_err().contains("64MiB"));
        assert!(Bytes::parse("99999999999GiB").is_err());
        assert_eq!(Bytes::mib(64).to_string(), "64MiB");
        assert_eq!(Bytes(1500).to_string(), "1500");
    }
}

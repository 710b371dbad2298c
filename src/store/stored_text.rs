//! Closed sets of values stored as text (a row's status, an approval's risk level).
//!
//! The database keeps plain words (`'pending'`, `'in_progress'`, `'L2'`) so that SQL filters,
//! partial indexes and a human with `sqlite3` read them directly; the code uses enums so that a
//! misspelled status is a compile error rather than a row no query ever finds again. Each enum
//! converts to and from exactly the stored text: no migration is needed, and a stored text this
//! binary does not know is a `FromSqlError` naming it (the query fails with a clear error), never
//! a panic and never a silent default.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::policy::RiskLevel;

/// Declares an enum whose variants are stored as the given texts, with `as_str`, `parse`,
/// `Display`, `serde::Serialize` (as the text) and rusqlite's `FromSql` / `ToSql`.
macro_rules! stored_text_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$variant_meta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The exact text stored in the database (and shown in Studio and the CLI).
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The value stored as `text`; `None` for any other text.
            pub fn parse(text: &str) -> Option<$name> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::Borrowed(
                    rusqlite::types::ValueRef::Text(self.as_str().as_bytes()),
                ))
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                let text = value.as_str()?;
                $name::parse(text).ok_or_else(|| {
                    $crate::store::stored_text::unknown_text(stringify!($name), text)
                })
            }
        }
    };
}

pub(crate) use stored_text_enum;

/// The error for a stored text that is not one of an enum's values: names the type and the text
/// (shortened, so a corrupted cell stays readable in a log line).
pub(crate) fn unknown_text(type_name: &str, text: &str) -> FromSqlError {
    let shown: String = text.chars().take(64).collect();
    FromSqlError::Other(
        format!(
            "unknown {type_name} `{shown}` in the database (written by a newer clawvisor, or edited by hand)"
        )
        .into(),
    )
}

/// A risk level is stored as its name (`"L0"` … `"L3"`). The impls live here, not in `policy`,
/// which knows nothing about storage.
impl ToSql for RiskLevel {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(
            self.as_str().as_bytes(),
        )))
    }
}

impl FromSql for RiskLevel {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let text = value.as_str()?;
        text.parse::<RiskLevel>()
            .map_err(|_| unknown_text("RiskLevel", text))
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    stored_text_enum! {
        /// A two-valued status for the tests below.
        pub enum SampleStatus {
            Open => "open",
            InProgress => "in_progress",
        }
    }

    #[test]
    fn every_value_round_trips_through_its_exact_text() {
        let conn = Connection::open_in_memory().unwrap();
        for status in SampleStatus::ALL {
            let text: String = conn
                .query_row("SELECT ?1", [status], |row| row.get(0))
                .unwrap();
            assert_eq!(text, status.as_str());
            let back: SampleStatus = conn
                .query_row("SELECT ?1", [&text], |row| row.get(0))
                .unwrap();
            assert_eq!(back, *status);
        }
        assert_eq!(SampleStatus::InProgress.as_str(), "in_progress");
    }

    #[test]
    fn an_unknown_stored_text_is_an_error_naming_it() {
        let conn = Connection::open_in_memory().unwrap();
        let error = conn
            .query_row("SELECT 'in progress'", [], |row| {
                row.get::<_, SampleStatus>(0)
            })
            .unwrap_err();
        let message = error.to_string();
        assert!(message.contains("SampleStatus"), "{message}");
        assert!(message.contains("`in progress`"), "{message}");
    }

    #[test]
    fn a_risk_level_is_stored_as_its_name() {
        let conn = Connection::open_in_memory().unwrap();
        for level in RiskLevel::ALL {
            let text: String = conn
                .query_row("SELECT ?1", [level], |row| row.get(0))
                .unwrap();
            assert_eq!(text, level.as_str());
            let back: RiskLevel = conn
                .query_row("SELECT ?1", [&text], |row| row.get(0))
                .unwrap();
            assert_eq!(back, level);
        }
        let error = conn
            .query_row("SELECT 'L9'", [], |row| row.get::<_, RiskLevel>(0))
            .unwrap_err();
        assert!(error.to_string().contains("`L9`"), "{error}");
    }
}

//! Queries for `user_timezones`: the zone each person chose (daemon-wide, keyed by their
//! Telegram user id), and who spoke last in a conversation (whose zone a run uses).

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;

/// A person's chosen zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserTimezoneRow {
    pub user_id: i64,
    /// An IANA name, validated before it was stored.
    pub timezone: String,
    pub changed_ms: i64,
    /// `telegram:<user id>` or `operator`.
    pub changed_by: String,
}

/// The zone `user_id` chose, if any.
pub fn user_timezone(conn: &Connection, user_id: i64) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT timezone FROM user_timezones WHERE user_id = ?1")?
        .query_row([user_id], |row| row.get(0))
        .optional()?)
}

/// Stores `timezone` as `user_id`'s zone (replacing an earlier choice).
pub fn set_user_timezone(
    conn: &Connection,
    user_id: i64,
    timezone: &str,
    changed_by: &str,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO user_timezones (user_id, timezone, changed_ms, changed_by) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET timezone = excluded.timezone,
             changed_ms = excluded.changed_ms, changed_by = excluded.changed_by",
    )?
    .execute(params![user_id, timezone, now_ms, changed_by])?;
    Ok(())
}

/// Forgets `user_id`'s zone; true when there was one.
pub fn clear_user_timezone(conn: &Connection, user_id: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM user_timezones WHERE user_id = ?1")?
        .execute([user_id])?
        > 0)
}

/// Every stored choice, by user id.
pub fn user_timezones(conn: &Connection) -> Result<Vec<UserTimezoneRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT user_id, timezone, changed_ms, changed_by FROM user_timezones ORDER BY user_id",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(UserTimezoneRow {
            user_id: row.get(0)?,
            timezone: row.get(1)?,
            changed_ms: row.get(2)?,
            changed_by: row.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// The zone chosen by the Telegram user who wrote the newest message of session `session_id`
/// that came from a channel update (`None`: no such message, or that person chose none).
pub fn latest_speaker_timezone(conn: &Connection, session_id: i64) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT (SELECT timezone FROM user_timezones WHERE user_id = u.user_id)
               FROM session_events e JOIN inbound_updates u ON u.id = e.inbound_id
              WHERE e.session_id = ?1 AND e.kind = 'user' AND e.inbound_id IS NOT NULL
              ORDER BY e.id DESC LIMIT 1",
        )?
        .query_row([session_id], |row| row.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// Names the people stored for any agent go by (`telegram_users`), newest name per user.
pub fn known_names(conn: &Connection) -> Result<Vec<(i64, String)>> {
    let mut statement = conn.prepare_cached(
        "SELECT user_id, name FROM telegram_users t
          WHERE changed_ms = (SELECT MAX(changed_ms) FROM telegram_users WHERE user_id = t.user_id)
          GROUP BY user_id ORDER BY user_id",
    )?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

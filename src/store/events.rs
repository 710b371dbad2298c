//! Queries for `runtime_events` and `daemon_boots`.

use rusqlite::{Connection, params};

use super::Result;
use super::stored_text::stored_text_enum;
use crate::events::RuntimeEvent;

/// A stored event, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub id: i64,
    pub at_ms: i64,
    pub kind: String,
    pub subject: String,
    pub detail: String,
    pub data: Option<String>,
}

/// An event on its way to the table: the bus event and its `data` as the JSON text Studio reads
/// (`studio::event_json::stored_data`), `None` when it has no data.
#[derive(Debug, Clone)]
pub struct EventToStore {
    pub event: std::sync::Arc<RuntimeEvent>,
    pub data: Option<String>,
}

/// Appends events and trims the table to the newest `keep` rows.
pub fn append(conn: &Connection, events: &[EventToStore], keep: u64) -> Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO runtime_events (seq, at_ms, kind, subject, detail, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for EventToStore { event, data } in events {
        insert.execute(params![
            event.seq as i64,
            event.at_ms,
            event.kind.as_str(),
            event.subject,
            event.detail,
            data
        ])?;
    }
    conn.execute(
        "DELETE FROM runtime_events WHERE id <= (SELECT MAX(id) FROM runtime_events) - ?1",
        params![keep as i64],
    )?;
    Ok(())
}

/// The newest events, newest first, optionally only those of one kind.
pub fn recent(conn: &Connection, kind: Option<&str>, limit: u32) -> Result<Vec<StoredEvent>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, at_ms, kind, subject, detail, data FROM runtime_events
         WHERE (?1 IS NULL OR kind = ?1) ORDER BY id DESC LIMIT ?2",
    )?;
    let rows = statement.query_map(params![kind, limit], event_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The newest event of `kind` about `subject` (a Signal account's stream state).
pub fn last_for_subject(
    conn: &Connection,
    subject: &str,
    kind: &str,
) -> Result<Option<StoredEvent>> {
    use rusqlite::OptionalExtension;
    Ok(conn
        .prepare_cached(
            "SELECT id, at_ms, kind, subject, detail, data FROM runtime_events
             WHERE subject = ?1 AND kind = ?2 ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![subject, kind], event_from_row)
        .optional()?)
}

stored_text_enum! {
    /// What a boot runs, recorded so that operator commands know whether there is an API to call
    /// and a scheduler to keep in step with.
    pub enum BootKind {
        /// `clawvisor serve`: Studio (the API operator commands call), bots and the scheduler.
        Serve => "serve",
        /// `clawvisor chat` (or another terminal runtime): the agents only, without Studio, bots
        /// or the scheduler (`StartOptions::local_only`).
        Local => "local",
    }
}

/// A boot without a recorded stop: a process that runs now, or that ended without a clean stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnstoppedBoot {
    pub pid: u32,
    pub kind: BootKind,
}

/// Records a process start; returns its id. Boots that never recorded a stop were unclean.
pub fn record_boot(
    conn: &Connection,
    started_ms: i64,
    version: &str,
    pid: u32,
    kind: BootKind,
) -> Result<i64> {
    conn.execute(
        "INSERT INTO daemon_boots (started_ms, version, pid, kind) VALUES (?1, ?2, ?3, ?4)",
        params![started_ms, version, pid, kind],
    )?;
    Ok(conn.last_insert_rowid())
}

pub fn record_stop(conn: &Connection, boot_id: i64, stopped_ms: i64) -> Result<()> {
    conn.execute(
        "UPDATE daemon_boots SET stopped_ms = ?2 WHERE id = ?1",
        params![boot_id, stopped_ms],
    )?;
    Ok(())
}

/// The boots without a recorded stop, newest first: processes that run now, or that ended
/// without a clean stop. A kind this binary does not know (written by a newer one) reads as
/// `serve`, the kind nothing may be written behind.
pub fn unstopped_boots(conn: &Connection) -> Result<Vec<UnstoppedBoot>> {
    let mut statement = conn.prepare_cached(
        "SELECT pid, kind FROM daemon_boots WHERE stopped_ms IS NULL ORDER BY id DESC LIMIT 20",
    )?;
    let rows = statement.query_map([], |row| {
        let kind: String = row.get(1)?;
        Ok(UnstoppedBoot {
            pid: row.get(0)?,
            kind: BootKind::parse(&kind).unwrap_or(BootKind::Serve),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// The number of earlier boots that ended without a clean stop.
pub fn unclean_stops(conn: &Connection, before_boot: i64) -> Result<u64> {
    let count: i64 = conn.query_row(
        "SELECT COUNT(*) FROM daemon_boots WHERE stopped_ms IS NULL AND id < ?1",
        params![before_boot],
        |row| row.get(0),
    )?;
    Ok(count as u64)
}

/// A `runtime_events` row selected as `id, at_ms, kind, subject, detail, data`.
fn event_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEvent> {
    Ok(StoredEvent {
        id: row.get(0)?,
        at_ms: row.get(1)?,
        kind: row.get(2)?,
        subject: row.get(3)?,
        detail: row.get(4)?,
        data: row.get(5)?,
    })
}

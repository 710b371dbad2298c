//! The `backups` table: one row per scheduled backup (time, file, size, ok or the error), and
//! the mark on rows whose archive retention deleted.

use rusqlite::{Connection, params};
use schemars::JsonSchema;
use serde::Serialize;

use crate::store::Result;

/// One recorded backup (Studio's Backups card shows it as serialized here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct BackupRow {
    pub id: i64,
    pub started_ms: i64,
    pub finished_ms: i64,
    pub file: String,
    pub size_bytes: i64,
    pub entries: i64,
    pub status: String,
    pub error: Option<String>,
    pub pruned: bool,
}

/// What one scheduled run did, to be recorded.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub started_ms: i64,
    pub finished_ms: i64,
    pub file: String,
    pub size_bytes: u64,
    pub entries: usize,
    pub error: Option<String>,
    /// Archives retention deleted in this run.
    pub pruned: Vec<String>,
}

pub fn insert(conn: &Connection, outcome: &Outcome) -> Result<i64> {
    conn.execute(
        "INSERT INTO backups (started_ms, finished_ms, file, size_bytes, entries, status, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            outcome.started_ms,
            outcome.finished_ms,
            outcome.file,
            i64::try_from(outcome.size_bytes).unwrap_or(i64::MAX),
            i64::try_from(outcome.entries).unwrap_or(i64::MAX),
            if outcome.error.is_none() {
                "ok"
            } else {
                "error"
            },
            outcome.error,
        ],
    )?;
    let id = conn.last_insert_rowid();
    for file in &outcome.pruned {
        conn.execute(
            "UPDATE backups SET pruned = 1 WHERE file = ?1",
            params![file],
        )?;
    }
    Ok(id)
}

/// The newest `limit` rows, newest first.
pub fn recent(conn: &Connection, limit: u32) -> Result<Vec<BackupRow>> {
    let mut statement = conn.prepare(
        "SELECT id, started_ms, finished_ms, file, size_bytes, entries, status, error, pruned
         FROM backups ORDER BY id DESC LIMIT ?1",
    )?;
    let rows = statement.query_map(params![limit], |row| {
        Ok(BackupRow {
            id: row.get(0)?,
            started_ms: row.get(1)?,
            finished_ms: row.get(2)?,
            file: row.get(3)?,
            size_bytes: row.get(4)?,
            entries: row.get(5)?,
            status: row.get(6)?,
            error: row.get(7)?,
            pruned: row.get::<_, i64>(8)? != 0,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

//! Queries for `outbox`: final answers waiting to be delivered to Telegram.
//!
//! A reply is queued in the same transaction as its run's end; the per-chat sender marks it
//! delivered (or counts a failed attempt) only after Telegram accepted it, and the bot's sweep
//! re-sends what is still pending after a restart.

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;

#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    pub id: i64,
    pub agent: String,
    pub chat: String,
    pub run_id: Option<i64>,
    pub text: String,
    pub inbound_ids: Vec<i64>,
    pub created_ms: i64,
    pub attempts: i64,
}

/// Queues a reply for delivery; returns the outbox id.
pub fn enqueue_reply(
    conn: &Connection,
    agent: &str,
    chat: &str,
    run_id: Option<i64>,
    text: &str,
    inbound_ids: &[i64],
    now_ms: i64,
) -> Result<i64> {
    let ids = serde_json::to_string(inbound_ids).unwrap_or_else(|_| "[]".into());
    conn.prepare_cached(
        "INSERT INTO outbox (agent, chat, run_id, text, inbound_ids, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![agent, chat, run_id, text, ids, now_ms])?;
    Ok(conn.last_insert_rowid())
}

fn outbox_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    let ids: String = row.get(5)?;
    Ok(OutboxRow {
        id: row.get(0)?,
        agent: row.get(1)?,
        chat: row.get(2)?,
        run_id: row.get(3)?,
        text: row.get(4)?,
        inbound_ids: serde_json::from_str(&ids).unwrap_or_default(),
        created_ms: row.get(6)?,
        attempts: row.get(7)?,
    })
}

pub fn outbox_get(conn: &Connection, id: i64) -> Result<Option<OutboxRow>> {
    Ok(conn
        .prepare_cached(
            "SELECT id, agent, chat, run_id, text, inbound_ids, created_ms, attempts FROM outbox WHERE id = ?1 AND delivered_ms IS NULL",
        )?
        .query_row(params![id], outbox_from_row)
        .optional()?)
}

/// Undelivered replies of an agent, oldest first.
pub fn outbox_pending(conn: &Connection, agent: &str) -> Result<Vec<OutboxRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, agent, chat, run_id, text, inbound_ids, created_ms, attempts FROM outbox
         WHERE agent = ?1 AND delivered_ms IS NULL ORDER BY id",
    )?;
    let rows = statement.query_map(params![agent], outbox_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

pub fn outbox_delivered(conn: &Connection, id: i64, now_ms: i64) -> Result<()> {
    conn.prepare_cached("UPDATE outbox SET delivered_ms = ?2 WHERE id = ?1")?
        .execute(params![id, now_ms])?;
    Ok(())
}

pub fn outbox_failed(conn: &Connection, id: i64, error: &str) -> Result<()> {
    conn.prepare_cached(
        "UPDATE outbox SET attempts = attempts + 1, last_error = ?2 WHERE id = ?1",
    )?
    .execute(params![id, error])?;
    Ok(())
}

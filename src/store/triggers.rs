//! Queries for `trigger_deliveries`: the webhook deliveries of `[[triggers]]` (issue #32).
//!
//! A delivery is inserted once per (trigger, delivery id) — a redelivery hits the unique key and
//! inserts nothing ([`insert`] answers `None`) — then moves received → running → succeeded or
//! failed, each step guarded by the status it leaves, so that a step taken twice (a restart, a
//! late answer) changes nothing the second time. These functions know nothing about HTTP or
//! actors.

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;

stored_text_enum! {
    /// Where one delivery stands.
    pub enum DeliveryStatus {
        /// Stored and answered 202; its run has not been started.
        Received => "received",
        /// Handed to the agent; its answer has not come back.
        Running => "running",
        /// The run answered; the answer went to `deliver_to`.
        Succeeded => "succeeded",
        /// The run failed, or the agent could not be reached.
        Failed => "failed",
    }
}

/// One stored delivery.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct DeliveryRow {
    pub id: i64,
    pub trigger: String,
    pub delivery_id: String,
    pub agent: String,
    /// `webhook` or `test`.
    pub origin: String,
    #[serde(skip)]
    pub body: String,
    /// `received`, `running`, `succeeded` or `failed`.
    #[schemars(with = "String")]
    pub status: DeliveryStatus,
    /// The chat the answer went to (`None`: not yet, or nowhere).
    pub deliver_to: Option<String>,
    pub answer: Option<String>,
    /// Why it failed, or where the answer went, in words.
    pub detail: Option<String>,
    pub run_id: Option<i64>,
    pub received_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
}

/// A delivery to store.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    pub trigger: &'a str,
    pub delivery_id: &'a str,
    pub agent: &'a str,
    pub origin: &'a str,
    pub body: &'a str,
}

const COLUMNS: &str = "id, trigger, delivery_id, agent, origin, body, status, deliver_to, answer, \
                       detail, run_id, received_ms, started_ms, finished_ms";

fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<DeliveryRow> {
    Ok(DeliveryRow {
        id: row.get(0)?,
        trigger: row.get(1)?,
        delivery_id: row.get(2)?,
        agent: row.get(3)?,
        origin: row.get(4)?,
        body: row.get(5)?,
        status: row.get(6)?,
        deliver_to: row.get(7)?,
        answer: row.get(8)?,
        detail: row.get(9)?,
        run_id: row.get(10)?,
        received_ms: row.get(11)?,
        started_ms: row.get(12)?,
        finished_ms: row.get(13)?,
    })
}

/// Stores a delivery as received; `None` when this trigger already has this delivery id.
pub fn insert(conn: &Connection, delivery: &NewDelivery<'_>, now_ms: i64) -> Result<Option<i64>> {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO trigger_deliveries (trigger, delivery_id, agent, origin, body, status, received_ms) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'received', ?6) ON CONFLICT (trigger, delivery_id) DO NOTHING",
        )?
        .execute(params![
            delivery.trigger,
            delivery.delivery_id,
            delivery.agent,
            delivery.origin,
            delivery.body,
            now_ms
        ])?;
    Ok((inserted == 1).then(|| conn.last_insert_rowid()))
}

/// The delivery `id`.
pub fn get(conn: &Connection, id: i64) -> Result<Option<DeliveryRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM trigger_deliveries WHERE id = ?1"
        ))?
        .query_row(params![id], from_row)
        .optional()?)
}

/// Every delivery not finished (received or running), oldest first.
pub fn open(conn: &Connection) -> Result<Vec<DeliveryRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM trigger_deliveries WHERE status IN ('received', 'running') ORDER BY id"
    ))?;
    let rows = statement.query_map([], from_row)?;
    Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
}

/// The newest `limit` deliveries of `trigger`, newest first.
pub fn latest(conn: &Connection, trigger: &str, limit: u32) -> Result<Vec<DeliveryRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM trigger_deliveries WHERE trigger = ?1 ORDER BY id DESC LIMIT ?2"
    ))?;
    let rows = statement.query_map(params![trigger, limit], from_row)?;
    Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
}

/// Marks a received delivery running, with the chat its answer is meant for (`deliver_to`: where
/// its run's approval requests are shown too); `false` when it was not received (started already).
pub fn start(conn: &Connection, id: i64, now_ms: i64, deliver_to: Option<&str>) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE trigger_deliveries SET status = 'running', started_ms = ?2, deliver_to = ?3 \
             WHERE id = ?1 AND status = 'received'",
        )?
        .execute(params![id, now_ms, deliver_to])?
        == 1)
}

/// The chat the running delivery of `trigger` is meant for, if it has one.
pub fn running_destination(conn: &Connection, trigger: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT deliver_to FROM trigger_deliveries \
             WHERE trigger = ?1 AND status = 'running' ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![trigger], |row| row.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

/// How a delivery ended.
#[derive(Debug, Clone)]
pub struct Ending<'a> {
    pub status: DeliveryStatus,
    pub deliver_to: Option<&'a str>,
    pub answer: Option<&'a str>,
    pub detail: &'a str,
    pub run_id: Option<i64>,
}

/// Ends an open delivery; `false` when it had ended already (the second answer changes nothing).
pub fn finish(conn: &Connection, id: i64, ending: &Ending<'_>, now_ms: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE trigger_deliveries SET status = ?2, deliver_to = ?3, answer = ?4, detail = ?5, \
             run_id = ?6, finished_ms = ?7 WHERE id = ?1 AND status IN ('received', 'running')",
        )?
        .execute(params![
            id,
            ending.status,
            ending.deliver_to,
            ending.answer,
            ending.detail,
            ending.run_id,
            now_ms
        ])?
        == 1)
}

/// Deliveries by trigger and status (for `/metrics`).
pub fn counts(conn: &Connection) -> Result<Vec<(String, DeliveryStatus, i64)>> {
    let mut statement = conn.prepare_cached(
        "SELECT trigger, status, COUNT(*) FROM trigger_deliveries GROUP BY trigger, status ORDER BY trigger, status",
    )?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
}

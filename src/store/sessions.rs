//! Queries for `sessions` and `session_events` (the transcripts).

use rusqlite::{Connection, OptionalExtension, params};

use super::stored_text::stored_text_enum;
use super::{Result, StoreError};

stored_text_enum! {
    /// A session is active (one per agent and chat) until `/new` archives it.
    pub enum SessionStatus {
        Active => "active",
        Archived => "archived",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: i64,
    pub agent: String,
    pub chat: String,
    pub status: SessionStatus,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub recap: Option<String>,
    pub recap_upto: i64,
}

/// What an event of a transcript is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKindRow {
    User,
    Assistant,
    ToolResult,
    Notice,
}

impl EventKindRow {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKindRow::User => "user",
            EventKindRow::Assistant => "assistant",
            EventKindRow::ToolResult => "tool_result",
            EventKindRow::Notice => "notice",
        }
    }

    pub fn parse(text: &str) -> Option<EventKindRow> {
        match text {
            "user" => Some(EventKindRow::User),
            "assistant" => Some(EventKindRow::Assistant),
            "tool_result" => Some(EventKindRow::ToolResult),
            "notice" => Some(EventKindRow::Notice),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub id: i64,
    pub session_id: i64,
    pub kind: EventKindRow,
    pub sender: Option<String>,
    pub content: String,
    pub data: Option<String>,
    pub run_id: Option<i64>,
    pub inbound_id: Option<i64>,
    pub created_ms: i64,
}

/// A new event to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent<'a> {
    pub kind: EventKindRow,
    pub sender: Option<&'a str>,
    pub content: &'a str,
    pub data: Option<&'a str>,
    pub run_id: Option<i64>,
    pub inbound_id: Option<i64>,
}

fn session_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok(SessionRow {
        id: row.get(0)?,
        agent: row.get(1)?,
        chat: row.get(2)?,
        status: row.get(3)?,
        created_ms: row.get(4)?,
        updated_ms: row.get(5)?,
        recap: row.get(6)?,
        recap_upto: row.get(7)?,
    })
}

const SESSION_COLUMNS: &str = "id, agent, chat, status, created_ms, updated_ms, recap, recap_upto";

/// The active session of (agent, chat), created when there is none.
pub fn active_or_create(
    conn: &Connection,
    agent: &str,
    chat: &str,
    now_ms: i64,
) -> Result<SessionRow> {
    if let Some(existing) = active(conn, agent, chat)? {
        return Ok(existing);
    }
    conn.execute(
        "INSERT INTO sessions (agent, chat, status, created_ms, updated_ms) VALUES (?1, ?2, 'active', ?3, ?3)",
        params![agent, chat, now_ms],
    )?;
    active(conn, agent, chat)?
        .ok_or_else(|| StoreError::NotFound(format!("session {agent}/{chat}")))
}

pub fn active(conn: &Connection, agent: &str, chat: &str) -> Result<Option<SessionRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE agent = ?1 AND chat = ?2 AND status = 'active'"
        ))?
        .query_row(params![agent, chat], session_from_row)
        .optional()?)
}

pub fn get(conn: &Connection, id: i64) -> Result<Option<SessionRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"
        ))?
        .query_row(params![id], session_from_row)
        .optional()?)
}

/// Archives the active session (`/new`); the next message opens a fresh one.
pub fn archive(conn: &Connection, session_id: i64, now_ms: i64) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET status = 'archived', updated_ms = ?2 WHERE id = ?1",
        params![session_id, now_ms],
    )?;
    Ok(())
}

/// Stores a recap covering every event up to `upto`.
pub fn set_recap(
    conn: &Connection,
    session_id: i64,
    recap: &str,
    upto: i64,
    now_ms: i64,
) -> Result<()> {
    conn.execute(
        "UPDATE sessions SET recap = ?2, recap_upto = ?3, updated_ms = ?4 WHERE id = ?1",
        params![session_id, recap, upto, now_ms],
    )?;
    Ok(())
}

/// The flushes recorded for `session_id` covering events from `from_event` on (those of a
/// compaction that did not finish): `(upto, facts as JSON)`, oldest first.
pub fn flushes_from(
    conn: &Connection,
    session_id: i64,
    from_event: i64,
) -> Result<Vec<(i64, String)>> {
    let mut statement = conn.prepare_cached(
        "SELECT upto, facts FROM compaction_flushes WHERE session_id = ?1 AND upto >= ?2 \
         ORDER BY upto",
    )?;
    let rows = statement.query_map(params![session_id, from_event], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Records a flush's facts (JSON) once; a second record for the same range keeps the first.
pub fn record_flush(
    conn: &Connection,
    session_id: i64,
    upto: i64,
    facts: &str,
    now_ms: i64,
) -> Result<()> {
    conn.execute(
        "INSERT OR IGNORE INTO compaction_flushes (session_id, upto, facts, created_ms) \
         VALUES (?1, ?2, ?3, ?4)",
        params![session_id, upto, facts, now_ms],
    )?;
    Ok(())
}

/// Appends an event; returns its id. A user event whose `inbound_id` is already stored is not
/// appended again (a replayed update after a crash): `Ok(None)`.
pub fn append(
    conn: &Connection,
    session_id: i64,
    event: &NewEvent<'_>,
    now_ms: i64,
) -> Result<Option<i64>> {
    let inserted = conn.prepare_cached(
        "INSERT OR IGNORE INTO session_events (session_id, kind, sender, content, data, run_id, inbound_id, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        session_id,
        event.kind.as_str(),
        event.sender,
        event.content,
        event.data,
        event.run_id,
        event.inbound_id,
        now_ms
    ])?;
    conn.prepare_cached("UPDATE sessions SET updated_ms = ?2 WHERE id = ?1")?
        .execute(params![session_id, now_ms])?;
    Ok((inserted == 1).then(|| conn.last_insert_rowid()))
}

fn event_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EventRow> {
    let kind: String = row.get(2)?;
    Ok(EventRow {
        id: row.get(0)?,
        session_id: row.get(1)?,
        kind: EventKindRow::parse(&kind).unwrap_or(EventKindRow::Notice),
        sender: row.get(3)?,
        content: row.get(4)?,
        data: row.get(5)?,
        run_id: row.get(6)?,
        inbound_id: row.get(7)?,
        created_ms: row.get(8)?,
    })
}

const EVENT_COLUMNS: &str =
    "id, session_id, kind, sender, content, data, run_id, inbound_id, created_ms";

/// Events after `after_id` (exclusive), oldest first, at most `limit`.
pub fn events_after(
    conn: &Connection,
    session_id: i64,
    after_id: i64,
    limit: u32,
) -> Result<Vec<EventRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events WHERE session_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
    ))?;
    let rows = statement.query_map(params![session_id, after_id, limit], event_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The newest `limit` events, oldest first (a transcript view).
pub fn recent_events(conn: &Connection, session_id: i64, limit: u32) -> Result<Vec<EventRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM (SELECT * FROM session_events WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id"
    ))?;
    let rows = statement.query_map(params![session_id, limit], event_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// User messages no run has taken yet, oldest first.
pub fn pending_user_events(conn: &Connection, session_id: i64) -> Result<Vec<EventRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events WHERE session_id = ?1 AND kind = 'user' AND run_id IS NULL ORDER BY id"
    ))?;
    let rows = statement.query_map(params![session_id], event_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Marks the given user events as taken by `run_id`.
pub fn claim_events(conn: &Connection, event_ids: &[i64], run_id: i64) -> Result<()> {
    let mut statement = conn
        .prepare_cached("UPDATE session_events SET run_id = ?2 WHERE id = ?1 AND run_id IS NULL")?;
    for id in event_ids {
        statement.execute(params![id, run_id])?;
    }
    Ok(())
}

/// Every event of one run (its input messages and what it produced), oldest first.
pub fn run_events(conn: &Connection, run_id: i64) -> Result<Vec<EventRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {EVENT_COLUMNS} FROM session_events WHERE run_id = ?1 ORDER BY id"
    ))?;
    let rows = statement.query_map(params![run_id], event_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Sessions with unfinished work: pending user messages or open runs. Used at boot to restart them.
pub fn with_pending_work(conn: &Connection) -> Result<Vec<(String, String)>> {
    let mut statement = conn.prepare(
        "SELECT DISTINCT s.agent, s.chat FROM sessions s
         WHERE s.status = 'active' AND (
             EXISTS (SELECT 1 FROM session_events e WHERE e.session_id = s.id AND e.kind = 'user' AND e.run_id IS NULL)
          OR EXISTS (SELECT 1 FROM runs r WHERE r.session_id = s.id AND r.status IN ('running', 'waiting_approval')))",
    )?;
    let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Sessions of an agent, newest first (Studio).
pub fn list(conn: &Connection, agent: Option<&str>, limit: u32) -> Result<Vec<SessionRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE (?1 IS NULL OR agent = ?1) ORDER BY updated_ms DESC LIMIT ?2"
    ))?;
    let rows = statement.query_map(params![agent, limit], session_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

//! Queries for `outbox`: final answers waiting to be delivered to a person's channel (Telegram,
//! and the seam's channels: WhatsApp, Signal). A row's `chat` key names its channel (`tg:`,
//! `wa:`, `sg:`); each channel reads only its own rows ([`outbox_pending`] is Telegram's,
//! [`outbox_pending_channel`] a seam channel's). A seam channel may hold a row it cannot send now
//! (outside WhatsApp's 24-hour window without a template): `held_ms` and `held_reason` say so,
//! and [`release_held`] lets it go when the person writes again.
//!
//! A reply is queued in the same transaction as its run's end; the per-chat sender marks it
//! delivered (or counts a failed attempt) only after Telegram accepted it, and the bot's sweep
//! re-sends what is still pending after a restart.
//!
//! A row may carry a file (`send_file`): the daemon's own copy in the spool directory
//! ([`spool_dir`]), its kind and the name Telegram shows; its `text` is then the caption. A row
//! may also ask for a spoken reply (`speak`): the sender synthesizes the text when it delivers it.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;

stored_text_enum! {
    /// How a file row is sent: as a photo (compressed, shown inline), a document (the file as
    /// it is) or a voice message (OGG/Opus).
    pub enum OutboxFileKind {
        Photo => "photo",
        Document => "document",
        Voice => "voice",
    }
}

/// The file a row carries.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxFile {
    /// The spool copy (absolute).
    pub path: PathBuf,
    pub kind: OutboxFileKind,
    /// The name shown for a document (the workspace file's name).
    pub name: String,
}

/// Where files waiting in the outbox are kept: `outbox-files/` beside the database, inside the
/// data directory (which `shell` commands can never reach).
pub fn spool_dir(database: &Path) -> PathBuf {
    database
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("outbox-files")
}

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
    /// The file to send (the text is then its caption).
    pub file: Option<OutboxFile>,
    /// The text is to be spoken (a voice message), with the text as the fallback.
    pub speak: bool,
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

/// Queues a file for delivery to `chat`, its caption in `text`; returns the outbox id.
pub fn enqueue_file(
    conn: &Connection,
    agent: &str,
    chat: &str,
    caption: &str,
    file: &OutboxFile,
    now_ms: i64,
) -> Result<i64> {
    conn.prepare_cached(
        "INSERT INTO outbox (agent, chat, run_id, text, inbound_ids, created_ms, file_path, file_kind, file_name)
         VALUES (?1, ?2, NULL, ?3, '[]', ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        agent,
        chat,
        caption,
        now_ms,
        file.path.to_string_lossy(),
        file.kind,
        file.name
    ])?;
    Ok(conn.last_insert_rowid())
}

/// Marks a queued reply as one to be spoken (in the transaction that queued it).
pub fn mark_spoken(conn: &Connection, id: i64) -> Result<()> {
    conn.prepare_cached("UPDATE outbox SET speak = 1 WHERE id = ?1")?
        .execute(params![id])?;
    Ok(())
}

/// Records that a reply's voice message was accepted by Telegram: a retry of its text part
/// does not speak it again.
pub fn mark_voice_sent(conn: &Connection, id: i64) -> Result<()> {
    conn.prepare_cached("UPDATE outbox SET speak = 0 WHERE id = ?1")?
        .execute(params![id])?;
    Ok(())
}

/// The spool copies that undelivered rows still need (every other file in the spool is a
/// leftover of a crash and may go).
pub fn pending_files(conn: &Connection) -> Result<Vec<PathBuf>> {
    let mut statement = conn.prepare_cached(
        "SELECT file_path FROM outbox WHERE delivered_ms IS NULL AND file_path IS NOT NULL",
    )?;
    let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
    Ok(rows
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .map(PathBuf::from)
        .collect())
}

const OUTBOX_COLUMNS: &str = "id, agent, chat, run_id, text, inbound_ids, created_ms, attempts, file_path, file_kind, file_name, speak";

fn outbox_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<OutboxRow> {
    let ids: String = row.get(5)?;
    let file_path: Option<String> = row.get(8)?;
    let file_kind: Option<OutboxFileKind> = row.get(9)?;
    let file = match (file_path, file_kind) {
        (Some(path), Some(kind)) => Some(OutboxFile {
            path: PathBuf::from(path),
            kind,
            name: row.get::<_, Option<String>>(10)?.unwrap_or_default(),
        }),
        _ => None,
    };
    Ok(OutboxRow {
        id: row.get(0)?,
        agent: row.get(1)?,
        chat: row.get(2)?,
        run_id: row.get(3)?,
        text: row.get(4)?,
        inbound_ids: serde_json::from_str(&ids).unwrap_or_default(),
        created_ms: row.get(6)?,
        attempts: row.get(7)?,
        file,
        speak: row.get::<_, i64>(11)? != 0,
    })
}

pub fn outbox_get(conn: &Connection, id: i64) -> Result<Option<OutboxRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE id = ?1 AND delivered_ms IS NULL"
        ))?
        .query_row(params![id], outbox_from_row)
        .optional()?)
}

/// Undelivered Telegram replies of an agent (chats `tg:…`), oldest first.
pub fn outbox_pending(conn: &Connection, agent: &str) -> Result<Vec<OutboxRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE agent = ?1 AND delivered_ms IS NULL AND chat LIKE 'tg:%' ORDER BY id"
    ))?;
    let rows = statement.query_map(params![agent], outbox_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Undelivered, unheld replies of an agent on seam channel `channel` (`wa`, `sg`), oldest first.
pub fn outbox_pending_channel(
    conn: &Connection,
    agent: &str,
    channel: &str,
) -> Result<Vec<OutboxRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {OUTBOX_COLUMNS} FROM outbox WHERE agent = ?1 AND delivered_ms IS NULL
           AND held_ms IS NULL AND substr(chat, 1, length(?2) + 1) = ?2 || ':' ORDER BY id"
    ))?;
    let rows = statement.query_map(params![agent, channel], outbox_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Holds an undelivered row the channel cannot send now, with the reason for people.
pub fn hold(conn: &Connection, id: i64, reason: &str, now_ms: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE outbox SET held_ms = ?2, held_reason = ?3 WHERE id = ?1 AND delivered_ms IS NULL",
    )?
    .execute(params![id, now_ms, reason])?;
    Ok(())
}

/// Lets the held rows of `chat` go (its person wrote again); returns their ids.
pub fn release_held(conn: &Connection, agent: &str, chat: &str) -> Result<Vec<i64>> {
    let mut statement = conn.prepare_cached(
        "UPDATE outbox SET held_ms = NULL, held_reason = NULL
          WHERE agent = ?1 AND chat = ?2 AND held_ms IS NOT NULL AND delivered_ms IS NULL
          RETURNING id",
    )?;
    let rows = statement.query_map(params![agent, chat], |row| row.get::<_, i64>(0))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// A held row, as Studio and the CLI show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRow {
    pub id: i64,
    pub agent: String,
    pub chat: String,
    pub held_ms: i64,
    pub reason: String,
}

/// Every held row, oldest first.
pub fn held(conn: &Connection) -> Result<Vec<HeldRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, agent, chat, held_ms, held_reason FROM outbox
          WHERE held_ms IS NOT NULL AND delivered_ms IS NULL ORDER BY id",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(HeldRow {
            id: row.get(0)?,
            agent: row.get(1)?,
            chat: row.get(2)?,
            held_ms: row.get(3)?,
            reason: row.get::<_, Option<String>>(4)?.unwrap_or_default(),
        })
    })?;
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

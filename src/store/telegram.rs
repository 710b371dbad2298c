//! Queries for `bot_offsets`, `inbound_updates`, `telegram_users`, `pairing_codes` and
//! `telegram_streams` (the people themselves, claims and blocks: `store::people`).
//!
//! A batch of updates and the bot's next offset are committed in one transaction
//! ([`store_batch`]), before the poller confirms them to Telegram; updates are unique on (bot,
//! update id). A stored update keeps its forum topic (`inbound_updates.thread_id`), so a group's
//! unaddressed messages are context only for an answer in the same topic. The message a streamed
//! answer is edited into is kept in `telegram_streams`, so that a reply delivered after a crash
//! edits it instead of appearing twice.

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;

stored_text_enum! {
    /// Where a stored Telegram update stands. `Processed` and `Ignored` are final.
    pub enum UpdateStatus {
        /// Stored, not handed to a session yet.
        Pending => "pending",
        /// Handed to its session; not answered yet.
        Dispatched => "dispatched",
        /// Answered (or otherwise fully handled).
        Processed => "processed",
        /// Not for this agent (unsupported kind, unknown user, …); the note says why.
        Ignored => "ignored",
        /// A group message kept as context for the next answer in that chat.
        Context => "context",
    }
}

impl UpdateStatus {
    /// Processed or ignored: never changed again.
    pub fn is_final(self) -> bool {
        matches!(self, UpdateStatus::Processed | UpdateStatus::Ignored)
    }
}

/// An update as fetched, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewUpdate {
    pub update_id: i64,
    pub kind: String,
    pub chat_id: Option<i64>,
    /// The forum topic of a topic message (`message_thread_id`).
    pub thread_id: Option<i32>,
    pub user_id: Option<i64>,
    pub payload: String,
    pub sent_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StoredUpdate {
    pub id: i64,
    pub update_id: i64,
    pub kind: String,
    pub chat_id: Option<i64>,
    pub user_id: Option<i64>,
    pub payload: String,
    pub sent_ms: Option<i64>,
    pub received_ms: i64,
    pub status: UpdateStatus,
}

pub fn next_offset(conn: &Connection, bot_id: i64) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT next_offset FROM bot_offsets WHERE bot_id = ?1")?
        .query_row(params![bot_id], |row| row.get(0))
        .optional()?)
}

/// Stores a batch and the offset that confirms it, in the caller's transaction. Updates already
/// stored (a batch fetched twice around a crash) are ignored. Returns the newly stored rows.
pub fn store_batch(
    conn: &Connection,
    bot_id: i64,
    agent: &str,
    updates: &[NewUpdate],
    now_ms: i64,
) -> Result<Vec<StoredUpdate>> {
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO inbound_updates (bot_id, agent, update_id, kind, chat_id, user_id, payload, sent_ms, received_ms, thread_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    let mut stored = Vec::new();
    let mut max_id = None::<i64>;
    for update in updates {
        max_id = Some(max_id.map_or(update.update_id, |max: i64| max.max(update.update_id)));
        let inserted = insert.execute(params![
            bot_id,
            agent,
            update.update_id,
            update.kind,
            update.chat_id,
            update.user_id,
            update.payload,
            update.sent_ms,
            now_ms,
            update.thread_id
        ])?;
        if inserted == 1 {
            stored.push(StoredUpdate {
                id: conn.last_insert_rowid(),
                update_id: update.update_id,
                kind: update.kind.clone(),
                chat_id: update.chat_id,
                user_id: update.user_id,
                payload: update.payload.clone(),
                sent_ms: update.sent_ms,
                received_ms: now_ms,
                status: UpdateStatus::Pending,
            });
        }
    }
    if let Some(max_id) = max_id {
        conn.prepare_cached(
            "INSERT INTO bot_offsets (bot_id, next_offset, updated_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (bot_id) DO UPDATE SET next_offset = MAX(next_offset, ?2), updated_ms = ?3",
        )?
        .execute(params![bot_id, max_id + 1, now_ms])?;
    }
    Ok(stored)
}

/// Moves an update to `status`. A final status (`processed`, `ignored`) is never undone: the
/// reply can be delivered before the dispatcher records `dispatched`.
pub fn set_status(
    conn: &Connection,
    id: i64,
    status: UpdateStatus,
    note: Option<&str>,
    now_ms: i64,
) -> Result<()> {
    let processed = status.is_final().then_some(now_ms);
    conn.prepare_cached(
        "UPDATE inbound_updates SET status = ?2, note = COALESCE(?3, note), processed_ms = COALESCE(?4, processed_ms)
         WHERE id = ?1 AND status NOT IN ('processed', 'ignored')",
    )?
    .execute(params![id, status, note, processed])?;
    Ok(())
}

/// Marks answered updates processed (called with the outbox row's ids once the reply is sent).
pub fn mark_processed(conn: &Connection, ids: &[i64], now_ms: i64) -> Result<()> {
    for id in ids {
        set_status(conn, *id, UpdateStatus::Processed, None, now_ms)?;
    }
    Ok(())
}

fn stored_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredUpdate> {
    Ok(StoredUpdate {
        id: row.get(0)?,
        update_id: row.get(1)?,
        kind: row.get(2)?,
        chat_id: row.get(3)?,
        user_id: row.get(4)?,
        payload: row.get(5)?,
        sent_ms: row.get(6)?,
        received_ms: row.get(7)?,
        status: row.get(8)?,
    })
}

/// Updates that were stored but never reached their session (crash, agent restarting): pending
/// ones older than `older_than_ms`, and dispatched ones whose session has no event for them.
pub fn undelivered(
    conn: &Connection,
    agent: &str,
    older_than_ms: i64,
) -> Result<Vec<StoredUpdate>> {
    let mut statement = conn.prepare_cached(
        "SELECT u.id, u.update_id, u.kind, u.chat_id, u.user_id, u.payload, u.sent_ms, u.received_ms, u.status
         FROM inbound_updates u
         WHERE u.agent = ?1 AND u.status IN ('pending', 'dispatched') AND u.received_ms <= ?2
           AND NOT EXISTS (SELECT 1 FROM session_events e WHERE e.inbound_id = u.id)
         ORDER BY u.update_id",
    )?;
    let rows = statement.query_map(params![agent, older_than_ms], stored_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The notice that answers updates whose run crashed (`answer_crashed_runs`).
pub const CRASHED_RUN_NOTICE: &str =
    "Something went wrong on my side while answering; the error is recorded. Please try again.";

/// Gives every failed run of `agent` that answered Telegram updates but has no outbox row (a
/// run that crashed before the crash notice was queued with it, as versions before issue #30
/// did) an outbox row with [`CRASHED_RUN_NOTICE`] that answers its updates: once it is
/// delivered they are processed instead of staying `dispatched` forever. Returns how many
/// rows were queued. In the caller's transaction.
pub fn answer_crashed_runs(conn: &Connection, agent: &str, now_ms: i64) -> Result<usize> {
    let mut statement = conn.prepare_cached(
        "SELECT r.id, r.chat, u.id FROM inbound_updates u
         JOIN session_events e ON e.inbound_id = u.id
         JOIN runs r ON r.id = e.run_id
         WHERE u.agent = ?1 AND u.status = 'dispatched' AND r.status = 'failed'
           AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.run_id = r.id)
         ORDER BY r.id, u.id",
    )?;
    let rows = statement
        .query_map(params![agent], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut runs: Vec<(i64, String, Vec<i64>)> = Vec::new();
    for (run_id, chat, update) in rows {
        match runs.last_mut() {
            Some((last, _, updates)) if *last == run_id => updates.push(update),
            _ => runs.push((run_id, chat, vec![update])),
        }
    }
    for (run_id, chat, updates) in &runs {
        super::outbox::enqueue_reply(
            conn,
            agent,
            chat,
            Some(*run_id),
            CRASHED_RUN_NOTICE,
            updates,
            now_ms,
        )?;
    }
    Ok(runs.len())
}

/// Group messages kept as context for the next answer in that chat (in that forum topic when
/// `thread_id` is given, outside every topic when not), oldest first.
pub fn take_context(
    conn: &Connection,
    agent: &str,
    chat_id: i64,
    thread_id: Option<i32>,
    limit: u32,
    now_ms: i64,
) -> Result<Vec<StoredUpdate>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, update_id, kind, chat_id, user_id, payload, sent_ms, received_ms, status FROM
         (SELECT * FROM inbound_updates WHERE agent = ?1 AND chat_id = ?2 AND thread_id IS ?4 AND status = 'context'
          ORDER BY update_id DESC LIMIT ?3)
         ORDER BY update_id",
    )?;
    let rows: Vec<StoredUpdate> = statement
        .query_map(params![agent, chat_id, limit, thread_id], stored_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    conn.prepare_cached(
        "UPDATE inbound_updates SET status = 'processed', processed_ms = ?3, note = 'used as group context'
         WHERE agent = ?1 AND chat_id = ?2 AND thread_id IS ?4 AND status = 'context'",
    )?
    .execute(params![agent, chat_id, now_ms, thread_id])?;
    Ok(rows)
}

pub fn user_allowed(conn: &Connection, agent: &str, user_id: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT status IN ('allowed', 'owner') FROM telegram_users WHERE agent = ?1 AND user_id = ?2",
        )?
        .query_row(params![agent, user_id], |row| row.get::<_, bool>(0))
        .optional()?
        .unwrap_or(false))
}

/// Lets the user talk to the agent (an owner stays owner).
pub fn allow_user(
    conn: &Connection,
    agent: &str,
    user_id: i64,
    name: &str,
    by: &str,
    now_ms: i64,
) -> Result<()> {
    conn.execute(
        "INSERT INTO telegram_users (agent, user_id, name, status, changed_ms, changed_by) VALUES (?1, ?2, ?3, 'allowed', ?4, ?5)
         ON CONFLICT (agent, user_id) DO UPDATE SET status = CASE status WHEN 'owner' THEN 'owner' ELSE 'allowed' END,
             name = ?3, changed_ms = ?4, changed_by = ?5",
        params![agent, user_id, name, now_ms, by],
    )?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq)]
pub struct PairingRow {
    pub code: String,
    pub agent: String,
    pub user_id: i64,
    pub chat_id: i64,
    pub name: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub approved_ms: Option<i64>,
}

fn pairing_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<PairingRow> {
    Ok(PairingRow {
        code: row.get(0)?,
        agent: row.get(1)?,
        user_id: row.get(2)?,
        chat_id: row.get(3)?,
        name: row.get(4)?,
        created_ms: row.get(5)?,
        expires_ms: row.get(6)?,
        approved_ms: row.get(7)?,
    })
}

const PAIRING_COLUMNS: &str =
    "code, agent, user_id, chat_id, name, created_ms, expires_ms, approved_ms";

/// The user's live (unexpired, unapproved) pairing request, if any; a denied one counts until it
/// expires, so that its person is not answered again meanwhile.
pub fn live_pairing(
    conn: &Connection,
    agent: &str,
    user_id: i64,
    now_ms: i64,
) -> Result<Option<PairingRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PAIRING_COLUMNS} FROM pairing_codes WHERE agent = ?1 AND user_id = ?2 AND approved_ms IS NULL AND expires_ms > ?3"
        ))?
        .query_row(params![agent, user_id, now_ms], pairing_from_row)
        .optional()?)
}

pub fn create_pairing(conn: &Connection, row: &PairingRow) -> Result<()> {
    conn.execute(
        &format!("INSERT INTO pairing_codes ({PAIRING_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL)"),
        params![row.code, row.agent, row.user_id, row.chat_id, row.name, row.created_ms, row.expires_ms],
    )?;
    Ok(())
}

/// Approves a live pairing code (of any agent when `agent` is None) and allows its user.
/// Returns the approved request, or `None` when the code is unknown, used or expired.
pub fn approve_pairing(
    conn: &Connection,
    code: &str,
    agent: Option<&str>,
    by: &str,
    now_ms: i64,
) -> Result<Option<PairingRow>> {
    let code = normalize_code(code);
    let row = conn
        .prepare_cached(&format!(
            "SELECT {PAIRING_COLUMNS} FROM pairing_codes WHERE code = ?1 AND (?2 IS NULL OR agent = ?2)
             AND approved_ms IS NULL AND denied_ms IS NULL AND expires_ms > ?3"
        ))?
        .query_row(params![code, agent, now_ms], pairing_from_row)
        .optional()?;
    let Some(row) = row else {
        return Ok(None);
    };
    conn.execute(
        "UPDATE pairing_codes SET approved_ms = ?2, approved_by = ?3 WHERE code = ?1",
        params![row.code, now_ms, by],
    )?;
    allow_user(conn, &row.agent, row.user_id, &row.name, by, now_ms)?;
    Ok(Some(PairingRow {
        approved_ms: Some(now_ms),
        ..row
    }))
}

/// Live pairing requests (Studio).
pub fn pending_pairings(conn: &Connection, now_ms: i64) -> Result<Vec<PairingRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {PAIRING_COLUMNS} FROM pairing_codes WHERE approved_ms IS NULL AND denied_ms IS NULL AND expires_ms > ?1 ORDER BY created_ms"
    ))?;
    let rows = statement.query_map(params![now_ms], pairing_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Codes are shown as `ABCD-EFGH`; typing may add spaces, dashes or lower case.
pub fn normalize_code(code: &str) -> String {
    code.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// Remembers the message a run streams into.
pub fn record_stream(
    conn: &Connection,
    run_id: i64,
    chat_id: i64,
    message_id: i64,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO telegram_streams (run_id, chat_id, message_id, created_ms) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![run_id, chat_id, message_id, now_ms])?;
    Ok(())
}

/// The message a run streamed into, if any.
pub fn stream_message(conn: &Connection, run_id: i64, chat_id: i64) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT message_id FROM telegram_streams WHERE run_id = ?1 AND chat_id = ?2",
        )?
        .query_row(params![run_id, chat_id], |row| row.get(0))
        .optional()?)
}

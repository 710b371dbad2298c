//! Queries for `handoff_contracts` and `handoff_timeline`. Every status change writes its
//! timeline row in the same transaction.

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::sessions::{self, EventKindRow, NewEvent};
use super::stored_text::stored_text_enum;

stored_text_enum! {
    /// Where a handoff contract stands: open (created, accepted, in progress) or ended.
    pub enum ContractStatus {
        Created => "created",
        Accepted => "accepted",
        InProgress => "in_progress",
        /// The delegate returned a result (it passed the validator, if any).
        Returned => "returned",
        Cancelled => "cancelled",
        Expired => "expired",
        Failed => "failed",
    }
}

impl ContractStatus {
    /// Still running: created, accepted or in progress.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ContractStatus::Created | ContractStatus::Accepted | ContractStatus::InProgress
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContractRow {
    pub id: String,
    pub owner: String,
    pub owner_chat: String,
    pub owner_run_id: Option<i64>,
    pub delegate: String,
    pub subtask: String,
    pub expected: String,
    pub validator: Option<String>,
    pub tools: Option<Vec<String>>,
    pub deadline_ms: i64,
    pub status: ContractStatus,
    pub attempts: i64,
    pub result: Option<String>,
    pub reason: Option<String>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub delivered_ms: Option<i64>,
}

impl ContractRow {
    /// Still running: created, accepted or in progress.
    pub fn is_open(&self) -> bool {
        self.status.is_open()
    }

    /// What the owner is told: the result when returned, the reason otherwise.
    pub fn outcome_text(&self) -> String {
        let text = if self.status == ContractStatus::Returned {
            &self.result
        } else {
            &self.reason
        };
        text.clone().unwrap_or_default()
    }
}

const COLUMNS: &str = "id, owner, owner_chat, owner_run_id, delegate, subtask, expected, validator, tools, \
    deadline_ms, status, attempts, result, reason, created_ms, updated_ms, delivered_ms";

fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ContractRow> {
    let tools: Option<String> = row.get(8)?;
    Ok(ContractRow {
        id: row.get(0)?,
        owner: row.get(1)?,
        owner_chat: row.get(2)?,
        owner_run_id: row.get(3)?,
        delegate: row.get(4)?,
        subtask: row.get(5)?,
        expected: row.get(6)?,
        validator: row.get(7)?,
        tools: tools.and_then(|text| serde_json::from_str(&text).ok()),
        deadline_ms: row.get(9)?,
        status: row.get(10)?,
        attempts: row.get(11)?,
        result: row.get(12)?,
        reason: row.get(13)?,
        created_ms: row.get(14)?,
        updated_ms: row.get(15)?,
        delivered_ms: row.get(16)?,
    })
}

pub fn insert(conn: &Connection, row: &ContractRow) -> Result<()> {
    let tools = row
        .tools
        .as_ref()
        .map(|tools| serde_json::to_string(tools).unwrap_or_else(|_| "[]".into()));
    conn.execute(
        "INSERT INTO handoff_contracts (id, owner, owner_chat, owner_run_id, delegate, subtask, expected, validator,
             tools, deadline_ms, status, attempts, created_ms, updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 0, ?12, ?12)",
        params![
            row.id,
            row.owner,
            row.owner_chat,
            row.owner_run_id,
            row.delegate,
            row.subtask,
            row.expected,
            row.validator,
            tools,
            row.deadline_ms,
            row.status,
            row.created_ms
        ],
    )?;
    timeline(
        conn,
        &row.id,
        row.status.as_str(),
        &row.subtask,
        row.created_ms,
    )
}

pub fn get(conn: &Connection, id: &str) -> Result<Option<ContractRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM handoff_contracts WHERE id = ?1"
        ))?
        .query_row([id], from_row)
        .optional()?)
}

/// Open contracts, and returned ones whose result never reached the owner.
pub fn unfinished(conn: &Connection) -> Result<Vec<ContractRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM handoff_contracts
         WHERE status IN ('created', 'accepted', 'in_progress') OR delivered_ms IS NULL ORDER BY created_ms"
    ))?;
    let rows = statement.query_map([], from_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn list(conn: &Connection, limit: u32) -> Result<Vec<ContractRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM handoff_contracts ORDER BY created_ms DESC LIMIT ?1"
    ))?;
    let rows = statement.query_map([limit.clamp(1, 1_000)], from_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

pub fn timeline(conn: &Connection, id: &str, kind: &str, detail: &str, now_ms: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO handoff_timeline (contract_id, at_ms, kind, detail) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![id, now_ms, kind, detail])?;
    Ok(())
}

/// `(at_ms, kind, detail)` of a contract, oldest first.
pub fn timeline_of(conn: &Connection, id: &str) -> Result<Vec<(i64, String, String)>> {
    let mut statement = conn.prepare_cached(
        "SELECT at_ms, kind, detail FROM handoff_timeline WHERE contract_id = ?1 ORDER BY id",
    )?;
    let rows = statement.query_map([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Moves an open contract to `status` (with its timeline row); false when it was not open.
pub fn transition(
    conn: &Connection,
    id: &str,
    status: ContractStatus,
    detail: &str,
    now_ms: i64,
) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE handoff_contracts SET status = ?2, updated_ms = ?3
         WHERE id = ?1 AND status IN ('created', 'accepted', 'in_progress')",
        params![id, status, now_ms],
    )? == 1;
    if changed {
        timeline(conn, id, status.as_str(), detail, now_ms)?;
    }
    Ok(changed)
}

/// Ends an open contract: `returned` with its result, or `failed` / `expired` / `cancelled` with
/// the reason. False when it had already ended.
pub fn finish(
    conn: &Connection,
    id: &str,
    status: ContractStatus,
    result: Option<&str>,
    reason: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE handoff_contracts SET status = ?2, result = ?3, reason = ?4, updated_ms = ?5
         WHERE id = ?1 AND status IN ('created', 'accepted', 'in_progress')",
        params![id, status, result, reason, now_ms],
    )? == 1;
    if changed {
        timeline(
            conn,
            id,
            status.as_str(),
            reason.or(result).unwrap_or(""),
            now_ms,
        )?;
    }
    Ok(changed)
}

pub fn count_attempt(conn: &Connection, id: &str, now_ms: i64) -> Result<i64> {
    conn.execute(
        "UPDATE handoff_contracts SET attempts = attempts + 1, updated_ms = ?2 WHERE id = ?1",
        params![id, now_ms],
    )?;
    Ok(conn.query_row(
        "SELECT attempts FROM handoff_contracts WHERE id = ?1",
        [id],
        |row| row.get(0),
    )?)
}

/// Marks the outcome delivered; false when it already was (exactly once).
pub fn mark_delivered(conn: &Connection, id: &str, how: &str, now_ms: i64) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE handoff_contracts SET delivered_ms = ?2 WHERE id = ?1 AND delivered_ms IS NULL",
        params![id, now_ms],
    )? == 1;
    if changed {
        timeline(conn, id, "delivered", how, now_ms)?;
    }
    Ok(changed)
}

/// Delivers the outcome into the owner's conversation as a pending message, and marks it
/// delivered, in one transaction: after a crash it is there exactly once.
pub fn deliver_into_session(
    conn: &Connection,
    contract: &ContractRow,
    text: &str,
    now_ms: i64,
) -> Result<bool> {
    if !mark_delivered(conn, &contract.id, "into the owner's conversation", now_ms)? {
        return Ok(false);
    }
    let session = sessions::active_or_create(conn, &contract.owner, &contract.owner_chat, now_ms)?;
    sessions::append(
        conn,
        session.id,
        &NewEvent {
            kind: EventKindRow::User,
            sender: Some(&format!("handoff:{}", contract.id)),
            content: text,
            data: None,
            run_id: None,
            inbound_id: None,
        },
        now_ms,
    )?;
    Ok(true)
}

/// The delegate's latest final answer in its conversation, if its last run ended with one.
pub fn last_answer(conn: &Connection, delegate: &str, chat: &str) -> Result<Option<String>> {
    let Some(session) = sessions::active(conn, delegate, chat)? else {
        return Ok(None);
    };
    let events = sessions::recent_events(conn, session.id, 20)?;
    let last_user = events
        .iter()
        .rposition(|event| event.kind == EventKindRow::User);
    Ok(events
        .iter()
        .enumerate()
        .rev()
        .find(|(index, event)| {
            event.kind == EventKindRow::Assistant
                && last_user.is_none_or(|user| *index > user)
                && event.data.is_none()
                && !event.content.trim().is_empty()
        })
        .map(|(_, event)| event.content.clone()))
}

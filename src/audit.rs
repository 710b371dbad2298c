//! The tamper-evident audit log: an append-only table whose rows are hash-chained.
//!
//! Each row stores `hash = SHA-256(prev_hash ‖ canonical(row))`, where the canonical form is the
//! row's fields joined with unit separators. Rows are appended with [`append`] inside the same
//! transaction as the action they record (an approval decision, a tool execution, a grant, a policy
//! change), so the log never claims something that did not happen, nor misses something that did.
//! Triggers refuse UPDATE and DELETE; editing the file by other means breaks the chain, and
//! [`verify`] names the first row whose hash does not follow. Once committed, the writer
//! [`announce`]s the row on the event bus so live views refresh.

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::store::Result;

/// The hash before the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: i64,
    pub at_ms: i64,
    pub actor: String,
    pub action: String,
    pub subject: String,
    pub details: String,
    pub prev_hash: String,
    pub hash: String,
}

fn canonical(
    id: i64,
    at_ms: i64,
    actor: &str,
    action: &str,
    subject: &str,
    details: &str,
) -> String {
    // \u{1f} (unit separator) cannot be confused with content in these fields.
    format!("{id}\u{1f}{at_ms}\u{1f}{actor}\u{1f}{action}\u{1f}{subject}\u{1f}{details}")
}

fn chain_hash(prev: &str, canonical: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev.as_bytes());
    hasher.update(canonical.as_bytes());
    hex::encode(hasher.finalize())
}

/// Tells live viewers (Studio's Audit page) that a row `action` about `subject` was appended.
/// Every caller of [`append`] calls this once its transaction committed — never inside it, so a
/// rolled-back row is never announced (`tests/studio_api.rs` checks that each file appending also
/// announces).
pub fn announce(events: &crate::events::EventBus, action: &str, subject: &str) {
    events.publish_data(
        crate::events::EventKind::AuditAppended,
        subject,
        action,
        serde_json::json!({"action": action, "subject": subject}),
    );
}

/// Appends a row in the caller's transaction. `details` is a JSON value.
pub fn append(
    conn: &Connection,
    actor: &str,
    action: &str,
    subject: &str,
    details: &serde_json::Value,
) -> Result<i64> {
    let last: Option<(i64, String)> = conn
        .prepare_cached("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (id, prev) = match last {
        Some((id, hash)) => (id + 1, hash),
        None => (1, GENESIS.to_string()),
    };
    let at_ms = crate::clock::now_ms();
    let details = details.to_string();
    let hash = chain_hash(
        &prev,
        &canonical(id, at_ms, actor, action, subject, &details),
    );
    conn.prepare_cached(
        "INSERT INTO audit_log (id, at_ms, actor, action, subject, details, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![id, at_ms, actor, action, subject, details, prev, hash])?;
    Ok(id)
}

/// The outcome of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every row checked follows its predecessor.
    Valid { rows: u64 },
    /// The first row that does not follow, and why.
    Broken { row: i64, reason: String },
}

/// Checks the whole chain (or, with `tail`, only the newest `tail` rows against their stored
/// predecessor hashes — what boot does).
pub fn verify(conn: &Connection, tail: Option<u64>) -> Result<Verification> {
    let (start_id, mut expected_prev, mut expected_id): (i64, String, Option<i64>) = match tail {
        Some(count) => {
            let first: Option<(i64, String)> = conn
                .query_row(
                    "SELECT id, prev_hash FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?1",
                    params![count.saturating_sub(1) as i64],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            match first {
                Some((id, prev)) => (id, prev, Some(id)),
                None => (0, GENESIS.to_string(), Some(1)),
            }
        }
        None => (0, GENESIS.to_string(), Some(1)),
    };
    let mut statement = conn.prepare(
        "SELECT id, at_ms, actor, action, subject, details, prev_hash, hash FROM audit_log WHERE id >= ?1 ORDER BY id",
    )?;
    let mut rows = statement.query(params![start_id])?;
    let mut count = 0u64;
    while let Some(row) = rows.next()? {
        let entry = AuditEntry {
            id: row.get(0)?,
            at_ms: row.get(1)?,
            actor: row.get(2)?,
            action: row.get(3)?,
            subject: row.get(4)?,
            details: row.get(5)?,
            prev_hash: row.get(6)?,
            hash: row.get(7)?,
        };
        if let Some(expected) = expected_id
            && entry.id != expected
        {
            let reason = if entry.id > expected {
                format!("rows {expected} to {} are missing (deleted)", entry.id - 1)
            } else {
                "rows are out of order".to_string()
            };
            return Ok(Verification::Broken {
                row: entry.id,
                reason,
            });
        }
        if entry.prev_hash != expected_prev {
            return Ok(Verification::Broken {
                row: entry.id,
                reason: "its previous-hash does not match the row before it (a row was removed, reordered or inserted)".into(),
            });
        }
        let computed = chain_hash(
            &entry.prev_hash,
            &canonical(
                entry.id,
                entry.at_ms,
                &entry.actor,
                &entry.action,
                &entry.subject,
                &entry.details,
            ),
        );
        if computed != entry.hash {
            return Ok(Verification::Broken {
                row: entry.id,
                reason: "its content does not match its hash (the row was edited)".into(),
            });
        }
        expected_prev = entry.hash;
        expected_id = Some(entry.id + 1);
        count += 1;
    }
    Ok(Verification::Valid { rows: count })
}

/// Rows newest first, for Studio and export.
pub fn entries(conn: &Connection, before_id: Option<i64>, limit: u32) -> Result<Vec<AuditEntry>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, at_ms, actor, action, subject, details, prev_hash, hash FROM audit_log
         WHERE (?1 IS NULL OR id < ?1) ORDER BY id DESC LIMIT ?2",
    )?;
    let rows = statement.query_map(params![before_id, limit], |row| {
        Ok(AuditEntry {
            id: row.get(0)?,
            at_ms: row.get(1)?,
            actor: row.get(2)?,
            action: row.get(3)?,
            subject: row.get(4)?,
            details: row.get(5)?,
            prev_hash: row.get(6)?,
            hash: row.get(7)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Writes every row, oldest first, as JSON Lines.
pub fn export_jsonl(conn: &Connection, out: &mut dyn std::io::Write) -> Result<u64> {
    let mut statement =
        conn.prepare("SELECT id, at_ms, actor, action, subject, details, prev_hash, hash FROM audit_log ORDER BY id")?;
    let mut rows = statement.query([])?;
    let mut count = 0;
    while let Some(row) = rows.next()? {
        let details: String = row.get(5)?;
        let line = serde_json::json!({
            "id": row.get::<_, i64>(0)?,
            "at": crate::clock::format_ms(row.get(1)?),
            "actor": row.get::<_, String>(2)?,
            "action": row.get::<_, String>(3)?,
            "subject": row.get::<_, String>(4)?,
            "details": serde_json::from_str::<serde_json::Value>(&details).unwrap_or(serde_json::Value::String(details)),
            "prev_hash": row.get::<_, String>(6)?,
            "hash": row.get::<_, String>(7)?,
        });
        writeln!(out, "{line}").map_err(|error| {
            crate::store::StoreError::Invalid(format!("cannot write the export: {error}"))
        })?;
        count += 1;
    }
    Ok(count)
}

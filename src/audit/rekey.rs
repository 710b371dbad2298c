//! Re-keying: the operator's explicit answer to anchors that no longer match the database
//! (`clawvisor audit rekey --confirm`), and how a verification reads a re-key row.
//!
//! [`rekey`] checks the whole chain first and keeps what it found, then, in one transaction:
//! replaces the keying marker (its append-only triggers are dropped around it, and every
//! append-only trigger of the audit tables is in place afterwards, as the migrations made them),
//! and appends one row, action [`REKEY_ACTION`], as the first row under a new key. That row names
//! what was found, who re-keyed, where the old key and head were moved, and the SHA-256 digest of
//! every row before it (content, previous hash and hash). The new key is written before the
//! commit, the new head after it.
//!
//! Invariants: a re-key is never implicit — nothing else writes a key over an existing log; the
//! old key and head are moved aside (`audit.key.replaced-<ms>`), never deleted; the rows before a
//! re-key row can no longer be checked one by one (their key may be lost), so the digest in that
//! row, which the new key's MAC covers, pins them as they were found: editing one afterwards
//! breaks the chain at the re-key row.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use sha2::{Digest, Sha256};

use super::anchors::{AuditKey, data_dir, last_row, write_atomically, write_head};
use super::{GENESIS, HEAD_FILE, KEY_FILE, canonical};

/// The action of the row a re-key appends.
pub const REKEY_ACTION: &str = "audit.rekey";

/// A verified re-key row: the first row under the current key.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Rekeyed {
    /// The re-key row's id (= the first keyed row).
    pub(super) row: i64,
    pub(super) at_ms: i64,
    /// The hash of the row before it, as the re-key row's MAC covers it.
    pub(super) prev_hash: String,
    /// The digest of every row before it, as recorded in the row.
    pub(super) prefix_sha256: String,
    /// Who re-keyed, as recorded.
    pub(super) by: String,
    /// The first line of what the check found before the re-key.
    pub(super) found: String,
}

/// The digest of the rows before a re-key row.
pub(super) struct Prefix {
    /// SHA-256 over every row (content, previous hash, hash), in order.
    pub(super) sha256: String,
    /// The hash of the last of them ([`GENESIS`] when there are none).
    pub(super) last_hash: String,
    /// How many rows there are.
    pub(super) rows: u64,
}

/// The [`Prefix`] of every row before `before_id`.
pub(super) fn prefix_digest(conn: &Connection, before_id: i64) -> crate::store::Result<Prefix> {
    let mut statement = conn.prepare(
        "SELECT id, at_ms, actor, action, subject, details, prev_hash, hash FROM audit_log WHERE id < ?1 ORDER BY id",
    )?;
    let mut rows = statement.query(params![before_id])?;
    let mut hasher = Sha256::new();
    let mut last_hash = GENESIS.to_string();
    let mut count = 0;
    while let Some(row) = rows.next()? {
        let text = canonical(
            row.get(0)?,
            row.get(1)?,
            &row.get::<_, String>(2)?,
            &row.get::<_, String>(3)?,
            &row.get::<_, String>(4)?,
            &row.get::<_, String>(5)?,
        );
        let (prev_hash, hash): (String, String) = (row.get(6)?, row.get(7)?);
        hasher.update(text.as_bytes());
        hasher.update(format!("\u{1e}{prev_hash}\u{1e}{hash}\u{1d}").as_bytes());
        last_hash = hash;
        count += 1;
    }
    Ok(Prefix {
        sha256: hex::encode(hasher.finalize()),
        last_hash,
        rows: count,
    })
}

/// The re-key row at `first_keyed_id`, when that row is one and its MAC verifies with `key`
/// (`None`: the chain was keyed when it was new, or from the end of an old unkeyed log).
pub(super) fn read_rekeyed(
    conn: &Connection,
    key: &AuditKey,
    first_keyed_id: i64,
) -> crate::store::Result<Option<Rekeyed>> {
    type Row = (i64, String, String, String, String, String, String);
    let row: Option<Row> = conn
        .query_row(
            "SELECT at_ms, actor, action, subject, details, prev_hash, hash FROM audit_log WHERE id = ?1",
            params![first_keyed_id],
            |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                ))
            },
        )
        .optional()?;
    let Some((at_ms, actor, action, subject, details, prev_hash, hash)) = row else {
        return Ok(None);
    };
    let text = canonical(first_keyed_id, at_ms, &actor, &action, &subject, &details);
    if action != REKEY_ACTION || key.chain(&prev_hash, &text) != hash {
        return Ok(None);
    }
    let details: serde_json::Value = serde_json::from_str(&details).unwrap_or_default();
    let field = |name: &str| details[name].as_str().unwrap_or_default().to_string();
    Ok(Some(Rekeyed {
        row: first_keyed_id,
        at_ms,
        prev_hash,
        prefix_sha256: field("prefix_sha256"),
        by: field("by"),
        // What was found, without the advice that came with it.
        found: details["found"][0]
            .as_str()
            .unwrap_or_default()
            .split(super::anchors::REMEDY)
            .next()
            .unwrap_or_default()
            .trim_end_matches([' ', '.'])
            .to_string(),
    }))
}

/// What a re-key did.
#[derive(Debug, Clone, PartialEq)]
pub struct RekeyOutcome {
    /// The re-key row's id.
    pub row: i64,
    /// What the check found before the re-key (the lines `audit verify` prints).
    pub found: Vec<String>,
    /// Where the old key and head were moved (absent ones are not listed).
    pub moved: Vec<PathBuf>,
}

/// Re-keys the log of the database `conn` is open on (see the module header); `by` names the
/// operator. The daemon must not be running on it (its writer would keep the old key).
pub fn rekey(conn: &mut Connection, by: &str) -> Result<RekeyOutcome, String> {
    let dir = data_dir(conn).ok_or("an in-memory database has no audit key to replace")?;
    let found = super::verify_report(conn, None)
        .map_err(|error| format!("cannot check the audit log first: {error}"))?
        .lines();
    let key = AuditKey::generate();
    let stamp = crate::clock::now_ms();
    let transaction = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|error| format!("cannot begin the re-key: {error}"))?;
    let moved = move_anchors_aside(&dir, stamp)?;
    let written =
        write_rekey(&transaction, &dir, &key, stamp, by, &found, &moved).and_then(|row| {
            transaction
                .commit()
                .map(|()| row)
                .map_err(|error| format!("cannot commit the re-key: {error}"))
        });
    let (row, hash) = match written {
        Ok(row) => row,
        Err(problem) => {
            // Nothing was committed: the old anchors go back where they were.
            let _ = std::fs::remove_file(dir.join(KEY_FILE));
            put_back(&moved);
            return Err(problem);
        }
    };
    write_head(&dir, &key, row, &hash, row).map_err(|error| {
        format!(
            "the re-key row {row} is committed but {} could not be written ({error}); run `clawvisor audit rekey --confirm` again",
            dir.join(HEAD_FILE).display()
        )
    })?;
    Ok(RekeyOutcome {
        row,
        found,
        moved: moved.into_iter().map(|(_, to)| to).collect(),
    })
}

/// Moves `audit.key` and `audit.head` (those present) to `<name>.replaced-<stamp>`; returns
/// (from, to) for each.
fn move_anchors_aside(dir: &Path, stamp: i64) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    let mut moved = Vec::new();
    for name in [KEY_FILE, HEAD_FILE] {
        let from = dir.join(name);
        if !from.exists() {
            continue;
        }
        let to = dir.join(format!("{name}.replaced-{stamp}"));
        if let Err(error) = std::fs::rename(&from, &to) {
            put_back(&moved);
            return Err(format!("cannot move {} aside: {error}", from.display()));
        }
        moved.push((from, to));
    }
    Ok(moved)
}

/// Undoes [`move_anchors_aside`].
fn put_back(moved: &[(PathBuf, PathBuf)]) {
    for (from, to) in moved {
        if let Err(error) = std::fs::rename(to, from) {
            tracing::error!("audit rekey: cannot put {} back: {error}", from.display());
        }
    }
}

/// In `transaction`: replaces the marker, appends the re-key row under `key` and writes the key
/// file. Returns the row's id and hash.
fn write_rekey(
    transaction: &Connection,
    dir: &Path,
    key: &AuditKey,
    stamp: i64,
    by: &str,
    found: &[String],
    moved: &[(PathBuf, PathBuf)],
) -> Result<(i64, String), String> {
    let sql = |error: rusqlite::Error| format!("cannot re-key the database: {error}");
    let store = |error: crate::store::StoreError| format!("cannot re-key the database: {error}");
    let (last_id, last_hash) = last_row(transaction).map_err(store)?;
    let prefix_sha256 = prefix_digest(transaction, last_id + 1)
        .map_err(store)?
        .sha256;
    let row = last_id + 1;
    replace_marker(transaction, key, row, stamp).map_err(sql)?;
    let moved_to: Vec<String> = moved
        .iter()
        .map(|(_, to)| to.display().to_string())
        .collect();
    let details = serde_json::json!({
        "found": found,
        "by": by,
        "rows_before": last_id,
        "prefix_sha256": prefix_sha256,
        "previous_anchors_moved_to": moved_to,
    })
    .to_string();
    let text = canonical(row, stamp, "operator", REKEY_ACTION, KEY_FILE, &details);
    let hash = key.chain(&last_hash, &text);
    transaction
        .execute(
            "INSERT INTO audit_log (id, at_ms, actor, action, subject, details, prev_hash, hash) VALUES (?1, ?2, 'operator', ?3, ?4, ?5, ?6, ?7)",
            params![row, stamp, REKEY_ACTION, KEY_FILE, details, last_hash, hash],
        )
        .map_err(sql)?;
    write_atomically(dir, KEY_FILE, key.bytes())
        .map_err(|error| format!("cannot write {}: {error}", dir.join(KEY_FILE).display()))?;
    Ok((row, hash))
}

/// The append-only triggers of the audit tables, as migrations 0004 and 0010 create them: a
/// re-key puts back any that were dropped.
const APPEND_ONLY_TRIGGERS: [(&str, &str); 4] = [
    (
        "audit_log_no_update",
        "CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log\nBEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;",
    ),
    (
        "audit_log_no_delete",
        "CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log\nBEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;",
    ),
    (
        "audit_keying_no_update",
        "CREATE TRIGGER audit_keying_no_update BEFORE UPDATE ON audit_keying\nBEGIN SELECT RAISE(ABORT, 'audit_keying is append-only'); END;",
    ),
    (
        "audit_keying_no_delete",
        "CREATE TRIGGER audit_keying_no_delete BEFORE DELETE ON audit_keying\nBEGIN SELECT RAISE(ABORT, 'audit_keying is append-only'); END;",
    ),
];

/// Replaces the keying marker with one for `key` from `first_keyed_id` on: the marker's
/// append-only triggers are dropped around it, and every append-only trigger of the audit
/// tables is in place afterwards.
fn replace_marker(
    transaction: &Connection,
    key: &AuditKey,
    first_keyed_id: i64,
    created_ms: i64,
) -> rusqlite::Result<()> {
    transaction.execute_batch(
        "DROP TRIGGER IF EXISTS audit_keying_no_update; DROP TRIGGER IF EXISTS audit_keying_no_delete;",
    )?;
    transaction.execute("DELETE FROM audit_keying", [])?;
    transaction.execute(
        "INSERT INTO audit_keying (id, first_keyed_id, created_ms, mac) VALUES (1, ?1, ?2, ?3)",
        params![
            first_keyed_id,
            created_ms,
            key.marker_mac(first_keyed_id, created_ms)
        ],
    )?;
    for (name, sql) in APPEND_ONLY_TRIGGERS {
        let present: bool = transaction.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?1)",
            params![name],
            |row| row.get(0),
        )?;
        if !present {
            transaction.execute_batch(sql)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_triggers_put_back_are_the_ones_the_migrations_create() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(
            &dir.path().join("clawvisor.db"),
            crate::store::StoreOptions::default(),
        )
        .unwrap();
        let stored: Vec<(String, String)> = store
            .read_blocking(|conn| {
                let mut statement = conn.prepare(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('audit_log', 'audit_keying') ORDER BY name",
                )?;
                let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .unwrap();
        let mut expected: Vec<(String, String)> = APPEND_ONLY_TRIGGERS
            .iter()
            .map(|(name, sql)| (name.to_string(), sql.trim_end_matches(';').to_string()))
            .collect();
        expected.sort();
        assert_eq!(stored, expected);
        store.stop_writer();
    }
}

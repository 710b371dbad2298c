//! The tamper-evident audit log: an append-only table whose rows are chained with a keyed MAC,
//! anchored outside the database.
//!
//! Each row stores `hash = HMAC-SHA256(key, prev_hash ‖ canonical(row))`, where the canonical form
//! is the row's fields joined with unit separators and the key is 32 random bytes in
//! `<data_dir>/audit.key` (mode 0600, created by the database writer the first time it opens a
//! database that has no keyed rows). Rows are appended with [`append`] inside the same transaction
//! as the action they record (an approval decision, a tool execution, a grant, a policy change), so
//! the log never claims something that did not happen, nor misses something that did. Triggers
//! refuse UPDATE and DELETE; editing the file by other means breaks the chain, and [`verify`] names
//! the first row that does not follow. Once committed, the writer [`announce`]s the row on the
//! event bus (`audit_appended`) so live views refresh: a dedicated kind rather than the kinds that
//! usually accompany an audited action, so that Studio's Audit page neither misses a new audited
//! action nor re-verifies the chain on every run step.
//!
//! Two anchors outside the table make cutting or rewriting the chain detectable:
//! - the key: without it nobody can compute a valid row, so rewriting the chain (editing rows and
//!   recomputing every hash after them) fails the MAC of the first rewritten row;
//! - the head, `<data_dir>/audit.head`: the row count and the last row's hash, MACed, replaced
//!   atomically (write, fsync, rename, fsync the directory) by the writer thread after each commit
//!   that appended rows ([`after_commit`]). A table shorter than the head (a deleted tail) is
//!   detected; a head *behind* the table is accepted when the row at its count has its hash (a
//!   crash between the commit and the head update). The writer refuses to advance a head the
//!   table no longer extends, so a cut tail is not laundered by the next append.
//!
//! Migration path: databases from before keying hold SHA-256-chained rows. Keying records the
//! first keyed row in `audit_keying` (migration 0010) with a MAC binding it to the key, and writes
//! the head at once. Rows before it keep verifying with SHA-256. What such an old prefix
//! guarantees: only what it guaranteed before (edits that do not recompute the chain) for its
//! state *before* the upgrade; from the upgrade on it is pinned — the head written at keying holds
//! its last hash, and the first keyed row's MAC covers that hash as its `prev_hash`, so rewriting
//! any old row afterwards is detected like rewriting a keyed one.
//!
//! The anchors fail closed. Every boot checks the chain's tail and its anchors ([`boot_check`]):
//! a key or head that is missing, moved or replaced, a cut tail, a log with rows but no keying
//! marker, or any broken row refuses the boot (exit 78, with what to do). Only a log with no rows
//! at all is keyed without asking; anything else is keyed again only by the operator's explicit
//! `clawvisor audit rekey --confirm` ([`rekey`]), which records itself in the chain. The whole
//! chain is `clawvisor audit verify` ([`verify_report`], on a read-only connection: it never
//! writes); [`export_jsonl`] exports it; [`query`] reads it filtered (by actor, action, agent,
//! subject and time) for Studio.
//!
//! Limits: the key and the head protect against whoever can change the database but not the
//! files beside it (a tool with SQL access, a restored or edited copy). Whoever can replace
//! `audit.key`, `audit.head` and the database together can forge everything; keep a copy of the
//! head (`clawvisor audit verify` prints it) elsewhere if that matters.

mod anchors;
pub mod query;
mod rekey;

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::store::{Result, StoreError};

pub use anchors::writer_problem;
use anchors::{
    AuditKey, Marker, data_dir, hash_at, last_row, load_key, missing_key, read_head, read_marker,
};
pub(crate) use anchors::{after_commit, after_rollback, install_writer_seal, prepare_writer_seal};
pub use rekey::{REKEY_ACTION, RekeyOutcome, rekey};

/// The hash before the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// The key's file name in the data directory.
pub const KEY_FILE: &str = "audit.key";
/// The head's file name in the data directory.
pub const HEAD_FILE: &str = "audit.head";

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

/// The unkeyed link of rows written before keying.
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
        crate::events::EventData::AuditAppended {
            action: action.to_string(),
            subject: subject.to_string(),
        },
    );
}

/// Appends a row in the caller's transaction. `details` is a JSON value; registered secrets in
/// any field are redacted before the row is written.
pub fn append(
    conn: &Connection,
    actor: &str,
    action: &str,
    subject: &str,
    details: &serde_json::Value,
) -> Result<i64> {
    let (last_id, prev) = last_row(conn)?;
    let id = last_id + 1;
    let at_ms = crate::clock::now_ms();
    let mut details = details.clone();
    crate::secrets::redact_json(&mut details);
    let details = details.to_string();
    let (actor, action, subject) = (
        crate::secrets::redact(actor).into_owned(),
        crate::secrets::redact(action).into_owned(),
        crate::secrets::redact(subject).into_owned(),
    );
    let canonical = canonical(id, at_ms, &actor, &action, &subject, &details);
    let hash = match anchors::sealing_key(conn) {
        Ok(Some(key)) => key.chain(&prev, &canonical),
        Ok(None) => chain_hash(&prev, &canonical),
        Err(problem) => return Err(StoreError::Invalid(format!("audit log: {problem}"))),
    };
    conn.prepare_cached(
        "INSERT INTO audit_log (id, at_ms, actor, action, subject, details, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![id, at_ms, actor, action, subject, details, prev, hash])?;
    anchors::note_appended();
    Ok(id)
}

/// The outcome of a verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every row checked follows its predecessor, and the anchors agree.
    Valid { rows: u64 },
    /// The first row that does not follow (or that an anchor contradicts), and why.
    Broken { row: i64, reason: String },
}

/// A verification with what it checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditReport {
    pub verification: Verification,
    /// The anchors that were checked, in words.
    pub anchors: Vec<String>,
    /// What weakens the guarantee without being a break (no head, not keyed yet), with the fix.
    pub warnings: Vec<String>,
}

impl AuditReport {
    /// The lines `clawvisor audit verify` prints.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![match &self.verification {
            Verification::Valid { rows } => format!("audit chain valid: {rows} entries"),
            Verification::Broken { row, reason } => {
                format!("audit chain BROKEN at row {row}: {reason}")
            }
        }];
        lines.extend(
            self.anchors
                .iter()
                .map(|anchor| format!("  checked: {anchor}")),
        );
        lines.extend(
            self.warnings
                .iter()
                .map(|warning| format!("warning: {warning}")),
        );
        lines
    }
}

/// Checks the whole chain (or, with `tail`, only the newest `tail` rows against their stored
/// predecessor hashes — what boot does) and its anchors.
pub fn verify(conn: &Connection, tail: Option<u64>) -> Result<Verification> {
    Ok(verify_report(conn, tail)?.verification)
}

/// Like [`verify`], with the anchors checked and the warnings.
pub fn verify_report(conn: &Connection, tail: Option<u64>) -> Result<AuditReport> {
    let mut findings = Findings::default();
    let dir = data_dir(conn);
    let marker = read_marker(conn)?;
    let key = match dir.as_deref().map(load_key).transpose() {
        Ok(key) => key.flatten(),
        Err(problem) => {
            let row = marker.map_or(1, |m| m.first_keyed_id);
            return Ok(findings.broken(Break {
                row,
                reason: problem,
            }));
        }
    };
    let key_path = dir
        .as_deref()
        .map(|dir| dir.join(KEY_FILE))
        .unwrap_or_default();
    let table_rows = last_row(conn)?.0;
    let keying = check_keying(
        &mut findings,
        marker.as_ref(),
        key.as_ref(),
        &key_path,
        table_rows,
    );
    let keyed_from = match keying {
        Ok(keyed_from) => keyed_from,
        Err(broken) => return Ok(findings.broken(broken)),
    };
    let rekeyed = match (&key, keyed_from) {
        (Some(key), Some(first)) => rekey::read_rekeyed(conn, key, first)?,
        _ => None,
    };
    let mut pinned_rows = 0;
    if let Some(rekeyed) = &rekeyed {
        match check_rekeyed(conn, &mut findings, rekeyed, tail.is_none())? {
            Ok(rows) => pinned_rows = rows,
            Err(broken) => return Ok(findings.broken(broken)),
        }
    }
    let floor = rekeyed.map(|rekeyed| (rekeyed.row, rekeyed.prev_hash));
    let (verification, last_id) = walk_chain(conn, tail, key.as_ref(), keyed_from, floor)?;
    let verification = match verification {
        Verification::Valid { rows } => Verification::Valid {
            rows: rows + pinned_rows,
        },
        broken => return Ok(findings.report(broken)),
    };
    let (Some(key), Some(keyed_from), Some(dir)) = (&key, keyed_from, &dir) else {
        return Ok(findings.report(verification));
    };
    let anchors = KeyedAnchors {
        key,
        keyed_from,
        key_path: &key_path,
        head_path: dir.join(HEAD_FILE),
    };
    Ok(
        match check_head(conn, &mut findings, &anchors, dir, last_id)? {
            Some(broken) => findings.broken(broken),
            None => findings.report(verification),
        },
    )
}

/// What a verification found besides its outcome: the anchors checked and the warnings.
#[derive(Default)]
struct Findings {
    anchors: Vec<String>,
    warnings: Vec<String>,
}

impl Findings {
    /// The report of `verification` with these findings.
    fn report(self, verification: Verification) -> AuditReport {
        AuditReport {
            verification,
            anchors: self.anchors,
            warnings: self.warnings,
        }
    }

    /// The report of a chain broken at `broken.row`.
    fn broken(self, broken: Break) -> AuditReport {
        self.report(Verification::Broken {
            row: broken.row,
            reason: broken.reason,
        })
    }
}

/// The first row that does not follow (or that an anchor contradicts), and why.
struct Break {
    row: i64,
    reason: String,
}

/// Checks the rows before a re-key row: with `whole`, their digest against the one recorded in
/// it (returns how many they are); without, only says they are pinned (boot checks the tail).
fn check_rekeyed(
    conn: &Connection,
    findings: &mut Findings,
    rekeyed: &rekey::Rekeyed,
    whole: bool,
) -> Result<std::result::Result<u64, Break>> {
    let said = format!(
        "re-keyed at row {} by {} on {} (found then: {})",
        rekeyed.row,
        rekeyed.by,
        crate::clock::format_ms(rekeyed.at_ms),
        rekeyed.found
    );
    if !whole {
        findings.anchors.push(format!(
            "{said}; the rows before it are pinned by its digest (checked by `clawvisor audit verify`)"
        ));
        return Ok(Ok(0));
    }
    let prefix = rekey::prefix_digest(conn, rekeyed.row)?;
    if prefix.sha256 != rekeyed.prefix_sha256 || prefix.last_hash != rekeyed.prev_hash {
        return Ok(Err(Break {
            row: rekeyed.row,
            reason: format!(
                "the rows before the re-key at row {} were changed after it (their digest no longer matches the one that row recorded)",
                rekeyed.row
            ),
        }));
    }
    findings.anchors.push(format!(
        "{said}; the {} rows before it match the digest it recorded",
        prefix.rows
    ));
    Ok(Ok(prefix.rows))
}

/// Checks the keying marker against the key; returns the first keyed row (`None`: not keyed
/// yet, which is a warning for an empty log), or where the marker and the key disagree. A log
/// of `table_rows` rows without marker or key lost its anchors: that is a break, not a warning.
fn check_keying(
    findings: &mut Findings,
    marker: Option<&Marker>,
    key: Option<&AuditKey>,
    key_path: &Path,
    table_rows: i64,
) -> std::result::Result<Option<i64>, Break> {
    match (marker, key) {
        (Some(marker), Some(key)) => {
            if key.marker_mac(marker.first_keyed_id, marker.created_ms) != marker.mac {
                let reason = format!(
                    "the keying marker does not verify with {} (the marker was edited, or the key replaced)",
                    key_path.display()
                );
                return Err(Break {
                    row: marker.first_keyed_id,
                    reason,
                });
            }
            findings.anchors.push(format!(
                "keying marker: rows from {} on are HMAC-SHA256-keyed; the marker verifies with {}",
                marker.first_keyed_id,
                key_path.display()
            ));
            Ok(Some(marker.first_keyed_id))
        }
        (Some(marker), None) => Err(Break {
            row: marker.first_keyed_id,
            reason: missing_key(key_path, marker.first_keyed_id),
        }),
        (None, Some(_)) => {
            let reason = format!(
                "{} exists but the database has no keying marker: the marker was deleted, or this database is not the one the key belongs to",
                key_path.display()
            );
            Err(Break { row: 1, reason })
        }
        (None, None) if table_rows > 0 => Err(Break {
            row: 1,
            reason: anchors::unanchored(key_path.parent().unwrap_or(Path::new(".")), table_rows),
        }),
        (None, None) => {
            findings.warnings.push(
                "the chain is not keyed yet (plain SHA-256: it could be rewritten undetected); start the daemon once to key it".into(),
            );
            Ok(None)
        }
    }
}

/// The anchors of a keyed chain, for checking its head.
struct KeyedAnchors<'a> {
    key: &'a AuditKey,
    keyed_from: i64,
    key_path: &'a Path,
    head_path: PathBuf,
}

/// Checks the head kept in `dir` against the table, whose last row is `last_id`: a head that
/// verifies joins the anchors, a missing one is a warning; returns where it contradicts the table.
fn check_head(
    conn: &Connection,
    findings: &mut Findings,
    anchors: &KeyedAnchors,
    dir: &Path,
    last_id: i64,
) -> Result<Option<Break>> {
    let head_path = anchors.head_path.display();
    let head = match read_head(dir) {
        Ok(Some(head)) => head,
        Ok(None) => {
            // The first row a deleted tail would have started with.
            return Ok(Some(Break {
                row: last_id + 1,
                reason: anchors::missing_head(&anchors.head_path),
            }));
        }
        Err(problem) => {
            return Ok(Some(Break {
                row: last_id,
                reason: problem,
            }));
        }
    };
    if anchors
        .key
        .head_mac(head.rows, &head.last_hash, head.keyed_from)
        != head.mac
        || head.keyed_from != anchors.keyed_from
    {
        let reason = format!(
            "{head_path} does not verify with {} (the head was edited or replaced)",
            anchors.key_path.display()
        );
        let row = head.rows.min(last_id + 1);
        return Ok(Some(Break { row, reason }));
    }
    if last_id < head.rows {
        let reason = format!(
            "rows {} to {} are missing (deleted): the table ends at row {last_id} but the head kept outside the database ({head_path}) records {} rows",
            last_id + 1,
            head.rows,
            head.rows
        );
        let row = last_id + 1;
        return Ok(Some(Break { row, reason }));
    }
    if hash_at(conn, head.rows)?.as_deref() != Some(head.last_hash.as_str()) {
        let reason = format!(
            "it does not match the head kept outside the database ({head_path}): the chain was rewritten",
        );
        let row = head.rows;
        return Ok(Some(Break { row, reason }));
    }
    findings.anchors.push(if head.rows == last_id {
        format!(
            "head {head_path}: {} rows, last hash {} — matches the table",
            head.rows, head.last_hash
        )
    } else {
        format!(
            "head {head_path}: {} rows, last hash {} — a prefix of the table's {last_id} rows (the head is written after each commit; it lags after a crash)",
            head.rows, head.last_hash
        )
    });
    Ok(None)
}

/// Where a walk starts: the first row's id (0: from the beginning) and the previous hash it must
/// carry — the newest `tail` rows, but never a row before `floor` (a re-key row's id and previous
/// hash: the rows before it are pinned by its digest, not walked one by one).
fn walk_start(
    conn: &Connection,
    tail: Option<u64>,
    floor: Option<(i64, String)>,
) -> Result<(i64, String)> {
    let start = match tail {
        Some(count) => conn
            .query_row(
                "SELECT id, prev_hash FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?1",
                params![count.saturating_sub(1) as i64],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?
            .unwrap_or((0, GENESIS.to_string())),
        None => (0, GENESIS.to_string()),
    };
    Ok(match floor {
        Some((row, prev)) if start.0 < row => (row, prev),
        _ => start,
    })
}

/// Walks the rows (all, or the newest `tail`; never those before `floor`, a re-key row's id and
/// previous hash): ids without gaps, each `prev_hash` equal to the row before's hash, each hash
/// recomputed (HMAC from `keyed_from` on, SHA-256 before). Returns the outcome and the last
/// row's id.
fn walk_chain(
    conn: &Connection,
    tail: Option<u64>,
    key: Option<&AuditKey>,
    keyed_from: Option<i64>,
    floor: Option<(i64, String)>,
) -> Result<(Verification, i64)> {
    let (start_id, mut expected_prev) = walk_start(conn, tail, floor)?;
    let mut expected_id = start_id.max(1);
    let mut statement = conn.prepare(
        "SELECT id, at_ms, actor, action, subject, details, prev_hash, hash FROM audit_log WHERE id >= ?1 ORDER BY id",
    )?;
    let mut rows = statement.query(params![start_id])?;
    let mut count = 0u64;
    let mut last_id = 0;
    let broken = |row: i64, reason: &str| Verification::Broken {
        row,
        reason: reason.to_string(),
    };
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
        if entry.id != expected_id {
            let reason = if entry.id > expected_id {
                format!(
                    "rows {expected_id} to {} are missing (deleted)",
                    entry.id - 1
                )
            } else {
                "rows are out of order".to_string()
            };
            return Ok((broken(entry.id, &reason), last_id));
        }
        if entry.prev_hash != expected_prev {
            return Ok((
                broken(
                    entry.id,
                    "its previous-hash does not match the row before it (a row was removed, reordered or inserted)",
                ),
                last_id,
            ));
        }
        let canonical = canonical(
            entry.id,
            entry.at_ms,
            &entry.actor,
            &entry.action,
            &entry.subject,
            &entry.details,
        );
        let keyed = keyed_from.is_some_and(|first| entry.id >= first);
        let computed = match (keyed, key) {
            (true, Some(key)) => key.chain(&entry.prev_hash, &canonical),
            (true, None) => {
                return Ok((
                    broken(entry.id, "the row is keyed but no key was loaded"),
                    last_id,
                ));
            }
            (false, _) => chain_hash(&entry.prev_hash, &canonical),
        };
        if computed != entry.hash {
            let reason = if keyed {
                "its content does not match its MAC (the row was edited, or the chain rewritten without the key)"
            } else {
                "its content does not match its hash (the row was edited)"
            };
            return Ok((broken(entry.id, reason), last_id));
        }
        expected_prev = entry.hash;
        expected_id = entry.id + 1;
        last_id = entry.id;
        count += 1;
    }
    Ok((Verification::Valid { rows: count }, last_id))
}

/// What the daemon checks at boot, failing closed: a keying problem of the writer (a key or head
/// missing, moved or replaced, a cut tail, a log without anchors) or a broken tail refuses the
/// boot with what happened and what to do; warnings (an empty log not keyed yet) are returned,
/// to be published.
pub async fn boot_check(store: &crate::store::Store) -> Result<Option<String>, String> {
    if let Ok(Some(problem)) = store.write(|_| Ok(writer_problem())).await {
        return Err(format!(
            "the audit log's anchors do not match its database, so nothing could be audited: {problem}"
        ));
    }
    let report = store
        .read(|conn| verify_report(conn, Some(1_000)))
        .await
        .map_err(|error| format!("the audit log could not be checked: {error}"))?;
    if let Verification::Broken { row, reason } = &report.verification {
        let remedy = if reason.contains(anchors::REMEDY) {
            String::new()
        } else {
            format!(" {}", anchors::REMEDY)
        };
        return Err(format!(
            "the audit log is broken at row {row}: {reason}.{remedy} (`clawvisor audit verify` prints the whole report)"
        ));
    }
    let texts: Vec<String> = report
        .warnings
        .iter()
        .map(|warning| {
            tracing::warn!("audit log: {warning}");
            format!("audit log: {warning}")
        })
        .collect();
    Ok((!texts.is_empty()).then(|| texts.join("; ")))
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

//! The audit chain's anchors outside the table: the key (`<data_dir>/audit.key`), the keying
//! marker that says from which row on the chain is keyed, and the head (`<data_dir>/audit.head`).
//!
//! The database writer thread holds the [`Seal`]: it loads the key (or creates key, marker and
//! head for a log that has no rows yet), signs every row appended on it, and advances the head
//! after each commit that appended rows — once per commit, and only when the table still extends
//! the head it last saw, so that a cut tail is not laundered by the next append.
//!
//! Invariant: the anchors fail closed. A key or head that is missing, moved or replaced, a head
//! the table no longer extends, or a log with rows but no marker leaves the seal unavailable:
//! nothing is appended, the daemon refuses to boot, and only the operator's explicit
//! `clawvisor audit rekey --confirm` ([`super::rekey`]) writes a new key and head.

use std::cell::{Cell, RefCell};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use rusqlite::{Connection, OptionalExtension, params};
use sha2::Sha256;

use super::{GENESIS, HEAD_FILE, KEY_FILE};
use crate::store::{Result, StoreError};

/// The 32-byte key of the chain. Its `Debug` shows nothing.
#[derive(Clone)]
pub(super) struct AuditKey([u8; 32]);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(***)")
    }
}

impl AuditKey {
    /// A new random key.
    pub(super) fn generate() -> AuditKey {
        AuditKey(rand::random())
    }

    /// The key's bytes, for writing its file.
    pub(super) fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    fn mac(&self, parts: &[&str]) -> String {
        // HMAC accepts keys of any length; 32 bytes cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .expect("HMAC-SHA256 accepts a key of any length");
        for part in parts {
            mac.update(part.as_bytes());
        }
        hex::encode(mac.finalize().into_bytes())
    }

    pub(super) fn chain(&self, prev: &str, canonical: &str) -> String {
        self.mac(&[prev, canonical])
    }

    pub(super) fn marker_mac(&self, first_keyed_id: i64, created_ms: i64) -> String {
        self.mac(&[&format!(
            "clawvisor-audit-keying\u{1f}{first_keyed_id}\u{1f}{created_ms}"
        )])
    }

    pub(super) fn head_mac(&self, rows: i64, last_hash: &str, keyed_from: i64) -> String {
        self.mac(&[&format!(
            "clawvisor-audit-head\u{1f}{rows}\u{1f}{last_hash}\u{1f}{keyed_from}"
        )])
    }
}

/// The data directory of the database `conn` is open on (`None` for an in-memory database).
pub(super) fn data_dir(conn: &Connection) -> Option<PathBuf> {
    let path = conn.path().filter(|path| !path.is_empty())?;
    Path::new(path).parent().map(Path::to_path_buf)
}

pub(super) fn load_key(dir: &Path) -> Result<Option<AuditKey>, String> {
    let path = dir.join(KEY_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice())
            .map(|key| Some(AuditKey(key)))
            .map_err(|_| {
                format!(
                    "{} is {} bytes long, not 32: it was damaged or replaced",
                    path.display(),
                    bytes.len()
                )
            }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}

/// Writes `bytes` to `dir/name` atomically: a temporary file (mode 0600), fsync, rename, fsync of
/// the directory.
pub(super) fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = dir.join(format!("{name}.tmp-{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// The keying marker stored in the database.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Marker {
    pub(super) first_keyed_id: i64,
    pub(super) created_ms: i64,
    pub(super) mac: String,
}

pub(super) fn read_marker(conn: &Connection) -> Result<Option<Marker>> {
    Ok(conn
        .prepare_cached("SELECT first_keyed_id, created_ms, mac FROM audit_keying WHERE id = 1")?
        .query_row([], |row| {
            Ok(Marker {
                first_keyed_id: row.get(0)?,
                created_ms: row.get(1)?,
                mac: row.get(2)?,
            })
        })
        .optional()?)
}

/// The newest row's id and hash (0 and [`GENESIS`] for an empty log).
pub(super) fn last_row(conn: &Connection) -> Result<(i64, String)> {
    Ok(conn
        .prepare_cached("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?
        .unwrap_or((0, GENESIS.to_string())))
}

/// The hash of row `id` (`GENESIS` for row 0), if it exists.
pub(super) fn hash_at(conn: &Connection, id: i64) -> Result<Option<String>> {
    if id == 0 {
        return Ok(Some(GENESIS.to_string()));
    }
    Ok(conn
        .prepare_cached("SELECT hash FROM audit_log WHERE id = ?1")?
        .query_row(params![id], |row| row.get(0))
        .optional()?)
}

/// The head kept outside the database: how many rows the log had and the last one's hash.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Head {
    pub(super) rows: i64,
    pub(super) last_hash: String,
    pub(super) keyed_from: i64,
    pub(super) mac: String,
}

pub(super) fn read_head(dir: &Path) -> Result<Option<Head>, String> {
    let path = dir.join(HEAD_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|error| format!("{} is not a valid head ({error})", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}

/// Writes the head (`rows`, the last row's hash, the first keyed row), MACed with `key`.
pub(super) fn write_head(
    dir: &Path,
    key: &AuditKey,
    rows: i64,
    last_hash: &str,
    keyed_from: i64,
) -> std::io::Result<()> {
    let head = Head {
        rows,
        last_hash: last_hash.to_string(),
        keyed_from,
        mac: key.head_mac(rows, last_hash, keyed_from),
    };
    let text = serde_json::to_string(&head).map_err(std::io::Error::other)?;
    write_atomically(dir, HEAD_FILE, text.as_bytes())
}

// ---------------------------------------------------------------------------------------------
// The writer thread's seal

/// How the writer thread appends: with the key, without (an in-memory database), or not at all.
enum Seal {
    Unkeyed,
    Keyed {
        dir: PathBuf,
        key: AuditKey,
        keyed_from: i64,
        /// The head this writer last saw or wrote (rows, hash); the table must still extend it.
        head: Option<(i64, String)>,
    },
    Unavailable(String),
}

thread_local! {
    /// Set on the database writer thread by [`install_writer_seal`].
    static WRITER_SEAL: RefCell<Option<Seal>> = const { RefCell::new(None) };
    /// Whether rows were appended since the last commit on this thread.
    static APPENDED: Cell<bool> = const { Cell::new(false) };
}

/// Run when the database writer starts, before it takes its first job: loads the key, or
/// creates it (with the marker and the first head) when the database has no keyed rows yet. A
/// problem is kept: every append then fails with it, and the daemon refuses to boot
/// ([`super::boot_check`]).
pub(crate) fn prepare_writer_seal(conn: &Connection) -> WriterSeal {
    WriterSeal(match open_seal(conn, true) {
        Ok(seal) => seal,
        Err(problem) => {
            tracing::error!("audit log: {problem}");
            Seal::Unavailable(problem)
        }
    })
}

/// The writer's seal, prepared on the opening thread and installed on the writer thread.
pub(crate) struct WriterSeal(Seal);

/// Installs the prepared seal on the current (writer) thread.
pub(crate) fn install_writer_seal(seal: WriterSeal) {
    WRITER_SEAL.with(|slot| *slot.borrow_mut() = Some(seal.0));
}

/// Run by the writer thread after each successful commit: when rows were appended, the head is
/// advanced (once per commit, not per row). A head that cannot be advanced (the table no longer
/// extends it, or the file cannot be written) fails closed: the seal becomes unavailable, so no
/// further row is appended until the operator has looked.
pub(crate) fn after_commit(conn: &Connection) {
    if !APPENDED.replace(false) {
        return;
    }
    WRITER_SEAL.with(|slot| {
        let mut slot = slot.borrow_mut();
        let Some(Seal::Keyed {
            dir,
            key,
            keyed_from,
            head,
        }) = slot.as_mut()
        else {
            return;
        };
        if let Err(error) = advance_head(conn, dir, key, *keyed_from, head) {
            let problem =
                format!("the head outside the database could not be advanced: {error}. {REMEDY}");
            tracing::error!("audit log: {problem}; nothing more is appended");
            *slot = Some(Seal::Unavailable(problem));
        }
    });
}

/// Forgets appends of a transaction that was rolled back.
pub(crate) fn after_rollback() {
    APPENDED.set(false);
}

fn advance_head(
    conn: &Connection,
    dir: &Path,
    key: &AuditKey,
    keyed_from: i64,
    head: &mut Option<(i64, String)>,
) -> Result<(), String> {
    let (rows, last_hash) = last_row(conn).map_err(|error| error.to_string())?;
    if let Some((head_rows, head_hash)) = head.as_ref() {
        let at_head = hash_at(conn, *head_rows).map_err(|error| error.to_string())?;
        if at_head.as_deref() != Some(head_hash.as_str()) {
            return Err(format!(
                "the table no longer holds row {head_rows} as recorded in the head (rows were deleted or rewritten); run `clawvisor audit verify`"
            ));
        }
    }
    write_head(dir, key, rows, &last_hash, keyed_from)
        .map_err(|error| format!("cannot write {}: {error}", dir.join(HEAD_FILE).display()))?;
    *head = Some((rows, last_hash));
    Ok(())
}

/// The writer thread's keying problem, if any (for the boot check; `None` off the writer thread).
pub fn writer_problem() -> Option<String> {
    WRITER_SEAL.with(|slot| match slot.borrow().as_ref() {
        Some(Seal::Unavailable(problem)) => Some(problem.clone()),
        _ => None,
    })
}

/// Decides how to append on this database. With `create`, a database without keyed rows gets a
/// key, a marker and a head (or adopts a key left by a crash between creating it and marking).
fn open_seal(conn: &Connection, create: bool) -> Result<Seal, String> {
    let Some(dir) = data_dir(conn) else {
        return Ok(Seal::Unkeyed);
    };
    let key_path = dir.join(KEY_FILE);
    let marker = read_marker(conn).map_err(|error| error.to_string())?;
    let key = load_key(&dir)?;
    match (marker, key) {
        (Some(marker), Some(key)) => {
            if key.marker_mac(marker.first_keyed_id, marker.created_ms) != marker.mac {
                return Err(format!(
                    "the keying marker does not verify with {}: the marker was edited or the key replaced. {REMEDY}",
                    key_path.display()
                ));
            }
            // Fail closed: a head that is missing, does not verify or is no longer extended by
            // the table means the anchors were tampered with; nothing is appended over it.
            let head = checked_head(conn, &dir, &key, marker.first_keyed_id)?;
            Ok(Seal::Keyed {
                dir,
                key,
                keyed_from: marker.first_keyed_id,
                head: Some(head),
            })
        }
        (Some(marker), None) => Err(missing_key(&key_path, marker.first_keyed_id)),
        (None, Some(key))
            if dir.join(HEAD_FILE).exists() && !keying_interrupted(conn, &dir, &key) =>
        {
            Err(format!(
                "{} and {} exist but the database has no keying marker: the marker was deleted, or the database is not the one the key belongs to. {REMEDY}",
                key_path.display(),
                dir.join(HEAD_FILE).display()
            ))
        }
        (None, key) => {
            let (rows, _) = last_row(conn).map_err(|error| error.to_string())?;
            if rows > 0 {
                // Only a brand-new log may be keyed without an operator's decision: a log
                // with rows and no marker lost its anchors (or predates keying).
                return Err(unanchored(&dir, rows));
            }
            if create {
                create_keying(conn, &dir, key)
            } else {
                Ok(Seal::Unkeyed)
            }
        }
    }
}

/// What an operator does about anchors that do not match the database: the end of every
/// fail-closed message.
pub(super) const REMEDY: &str = "Restore clawvisor.db, audit.key and audit.head together from your latest backup (`clawvisor restore`); or, if you know why they changed, run `clawvisor audit rekey --confirm` (it records what it found in the log and writes a new key and head)";

/// Why a log with `rows` rows and neither keying marker nor head cannot be written to.
pub(super) fn unanchored(dir: &Path, rows: i64) -> String {
    format!(
        "the audit log holds {rows} rows but has no keying marker and no {} (its key, head and marker were removed, or the database comes from a version before keying). {REMEDY}",
        dir.join(HEAD_FILE).display()
    )
}

/// The head in `dir`, checked against the key and the table: it must exist, verify, and be a
/// prefix of the table (rows and last hash); returns its rows and last hash.
fn checked_head(
    conn: &Connection,
    dir: &Path,
    key: &AuditKey,
    keyed_from: i64,
) -> Result<(i64, String), String> {
    let head_path = dir.join(HEAD_FILE);
    let head = match read_head(dir)? {
        Some(head) => head,
        None => return Err(missing_head(&head_path)),
    };
    if key.head_mac(head.rows, &head.last_hash, head.keyed_from) != head.mac
        || head.keyed_from != keyed_from
    {
        return Err(format!(
            "{} does not verify with {} (the head was edited or replaced). {REMEDY}",
            head_path.display(),
            dir.join(KEY_FILE).display()
        ));
    }
    let at_head = hash_at(conn, head.rows).map_err(|error| error.to_string())?;
    if at_head.as_deref() != Some(head.last_hash.as_str()) {
        return Err(format!(
            "the table no longer holds row {} as recorded in {} (rows were deleted or rewritten). {REMEDY}",
            head.rows,
            head_path.display()
        ));
    }
    Ok((head.rows, head.last_hash))
}

/// Why a keyed log without its head cannot be trusted.
pub(super) fn missing_head(head_path: &Path) -> String {
    format!(
        "{} is missing, so a deleted tail of the log could not be detected (it is never removed by clawvisor: the data directory was tampered with, or the file moved). {REMEDY}",
        head_path.display()
    )
}

pub(super) fn missing_key(key_path: &Path, first_keyed_id: i64) -> String {
    format!(
        "rows from {first_keyed_id} on are keyed but {} is missing, so they cannot be checked and no row can be appended. {REMEDY}",
        key_path.display()
    )
}

/// Whether the key and head beside a database without marker are what a crash while keying an
/// empty log leaves ([`create_keying`] writes the key, then the head of 0 rows, then commits the
/// marker): the log is empty and the head says 0 rows and verifies with the key.
fn keying_interrupted(conn: &Connection, dir: &Path, key: &AuditKey) -> bool {
    let empty = last_row(conn).is_ok_and(|(rows, _)| rows == 0);
    let head = read_head(dir).ok().flatten();
    empty
        && head.is_some_and(|head| {
            head.rows == 0
                && head.keyed_from == 1
                && key.head_mac(head.rows, &head.last_hash, head.keyed_from) == head.mac
        })
}

/// Creates the key (unless one was left by a crash before marking), the head of the empty log,
/// then the marker — in that order, so that a crash never leaves a marker without its head.
fn create_keying(conn: &Connection, dir: &Path, key: Option<AuditKey>) -> Result<Seal, String> {
    let key = match key {
        Some(key) => {
            tracing::warn!(
                "audit log: adopting {} left without a marker (a crash while keying)",
                dir.join(KEY_FILE).display()
            );
            key
        }
        None => {
            let key = AuditKey(rand::random());
            write_atomically(dir, KEY_FILE, &key.0).map_err(|error| {
                format!("cannot create {}: {error}", dir.join(KEY_FILE).display())
            })?;
            key
        }
    };
    // Only an empty log is keyed here (checked again under the lock below).
    write_head(dir, &key, 0, GENESIS, 1)
        .map_err(|error| format!("cannot write {}: {error}", dir.join(HEAD_FILE).display()))?;
    let created_ms = crate::clock::now_ms();
    let mark = || -> Result<(i64, i64, String)> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = (|| {
            if let Some(marker) = read_marker(conn)? {
                // Another process keyed the database meanwhile.
                return Ok((marker.first_keyed_id, -1, String::new()));
            }
            let (rows, last_hash) = last_row(conn)?;
            if rows > 0 {
                // Rows appeared since the check: keying them is the operator's decision.
                return Err(StoreError::Invalid(unanchored(dir, rows)));
            }
            let first = rows + 1;
            conn.execute(
                "INSERT INTO audit_keying (id, first_keyed_id, created_ms, mac) VALUES (1, ?1, ?2, ?3)",
                params![first, created_ms, key.marker_mac(first, created_ms)],
            )?;
            Ok((first, rows, last_hash))
        })();
        match &result {
            Ok(_) => conn.execute_batch("COMMIT")?,
            Err(_) => {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
        result
    };
    let (keyed_from, rows, last_hash) = mark()
        .map_err(|error: StoreError| format!("cannot record the audit keying marker: {error}"))?;
    if rows < 0 {
        return open_seal(conn, false);
    }
    tracing::info!(
        keyed_from,
        "audit log: keyed with {}",
        dir.join(KEY_FILE).display()
    );
    Ok(Seal::Keyed {
        dir: dir.to_path_buf(),
        key,
        keyed_from,
        head: Some((rows, last_hash)),
    })
}

/// The key rows appended on this connection are signed with: the writer thread's seal, or — on
/// another thread (a test's own connection) — what the files say, creating nothing. `None`: the
/// database is not keyed (in memory, or never opened by a writer since the upgrade).
pub(super) fn sealing_key(conn: &Connection) -> Result<Option<AuditKey>, String> {
    let installed = WRITER_SEAL.with(|slot| match slot.borrow().as_ref() {
        Some(Seal::Keyed { key, .. }) => Some(Ok(Some(key.clone()))),
        Some(Seal::Unkeyed) => Some(Ok(None)),
        Some(Seal::Unavailable(problem)) => Some(Err(problem.clone())),
        None => None,
    });
    match installed {
        Some(result) => result,
        None => match open_seal(conn, false)? {
            Seal::Keyed { key, .. } => Ok(Some(key)),
            Seal::Unkeyed => Ok(None),
            Seal::Unavailable(problem) => Err(problem),
        },
    }
}

/// Records that this thread appended rows in the current transaction.
pub(super) fn note_appended() {
    APPENDED.set(true);
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::audit::append;
    use crate::store::{Store, StoreOptions};

    fn append_rows(store: &Store, rows: usize) -> Result<()> {
        store.write_blocking(move |conn| {
            for row in 0..rows {
                append(
                    conn,
                    "operator",
                    "test",
                    &format!("s{row}"),
                    &serde_json::json!({}),
                )?;
            }
            Ok(())
        })
    }

    #[test]
    fn the_first_writer_creates_a_private_key_a_marker_and_a_head() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default()).unwrap();
        let key_path = dir.path().join(KEY_FILE);
        assert_eq!(std::fs::read(&key_path).unwrap().len(), 32);
        assert_eq!(
            std::fs::metadata(&key_path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let head = read_head(dir.path()).unwrap().unwrap();
        assert_eq!(
            (head.rows, head.last_hash.as_str(), head.keyed_from),
            (0, GENESIS, 1)
        );
        // Three rows in one commit: the head follows the commit, with the last row's hash.
        append_rows(&store, 3).unwrap();
        let head = read_head(dir.path()).unwrap().unwrap();
        let last = store.read_blocking(last_row).unwrap();
        assert_eq!((head.rows, head.last_hash), last);
        assert_eq!(last.0, 3);
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|name| name.contains(".tmp-")),
            "{names:?}"
        );
        store.stop_writer();
    }

    #[test]
    fn a_crash_while_keying_an_empty_log_is_resumed_but_a_lost_head_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clawvisor.db");
        let problem = |store: &Store| store.write_blocking(|_| Ok(writer_problem())).unwrap();
        Store::open(&path, StoreOptions::default())
            .unwrap()
            .stop_writer();
        let key = std::fs::read(dir.path().join(KEY_FILE)).unwrap();
        // Key and head written, the marker not yet committed: the same key is adopted.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TRIGGER audit_keying_no_delete; DELETE FROM audit_keying; CREATE TRIGGER audit_keying_no_delete BEFORE DELETE ON audit_keying BEGIN SELECT RAISE(ABORT, 'audit_keying is append-only'); END;",
        )
        .unwrap();
        drop(conn);
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        assert_eq!(problem(&store), None);
        append_rows(&store, 1).unwrap();
        store.stop_writer();
        assert_eq!(std::fs::read(dir.path().join(KEY_FILE)).unwrap(), key);
        // A keyed log whose head is gone is never a crash state: refused, nothing written.
        std::fs::remove_file(dir.path().join(HEAD_FILE)).unwrap();
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        let refused = problem(&store).unwrap();
        assert!(refused.contains("audit.head is missing"), "{refused}");
        assert!(append_rows(&store, 1).is_err());
        store.stop_writer();
        assert!(!dir.path().join(HEAD_FILE).exists());
    }

    #[test]
    fn without_its_key_a_keyed_log_refuses_appends_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clawvisor.db");
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        append_rows(&store, 1).unwrap();
        store.stop_writer();
        std::fs::remove_file(dir.path().join(KEY_FILE)).unwrap();
        let store = Store::open(&path, StoreOptions::default()).unwrap();
        let problem = store
            .write_blocking(|_| Ok(writer_problem()))
            .unwrap()
            .unwrap();
        assert!(problem.contains("audit.key is missing"), "{problem}");
        let error = append_rows(&store, 1).unwrap_err().to_string();
        assert!(error.contains("from your latest backup"), "{error}");
        // No new key was made in its place.
        assert!(!dir.path().join(KEY_FILE).exists());
        store.stop_writer();
    }
}

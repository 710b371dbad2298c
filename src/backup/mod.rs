//! Backups of a data directory: one gzip-compressed tar archive holding a consistent snapshot of
//! the database, the files beside it that are state, and a manifest with every entry's SHA-256.
//!
//! Why an archive of our own rather than `sqlite3 .backup`: the database alone misses the agents'
//! workspaces, the installed skills, the memory index's dump, the outbox's file spool and the
//! audit chain's anchors (`audit.key`, `audit.head`), without which the restored chain cannot be
//! verified.
//!
//! What an archive holds (and nothing else, so that a restore can refuse any other path):
//! - `clawvisor.db`: a snapshot taken with SQLite's online backup API in one step on its own
//!   read-only connection, i.e. inside one read transaction, which WAL lets run beside the
//!   daemon's writer; the snapshot is every transaction committed before it started (the copy's
//!   journal mode is DELETE, so it is one file);
//! - `audit.head` (read *before* the snapshot, so it never names rows the snapshot lacks: a head
//!   that lags the table is what `audit verify` accepts after a crash) and `audit.key` (the
//!   chain's MAC key: without it the restored chain cannot be verified, so an archive is as
//!   sensitive as the data directory and is written with mode 0600);
//! - `workspaces/`, `skills/` (installed skills), `memory/` (the vector index's dump — a cache:
//!   the daemon checks it against SQLite at load and rebuilds it when it does not match) and
//!   `outbox-files/` (files queued for Telegram);
//! - `manifest.json`, the last entry: format and versions, the source, and each entry's path,
//!   size and SHA-256.
//!
//! - `secrets.toml` (the secrets store: keys and tokens entered in Studio) **only when asked**
//!   (`clawvisor backup --include-secrets`, [`BackupOptions::include_secrets`]); a restore puts it
//!   back with mode 0600.
//!
//! Not in an archive: `studio.token` (a credential, made again at boot), `bundled-skills/`
//! (written from the binary at boot), the `backups` directory, the secrets store unless asked
//! (scheduled backups never include it), and keys set in the daemon's environment. A workspace an
//! agent file places outside the data directory is not archived either. Symbolic links and
//! special files are skipped and named in the report.
//!
//! Invariants: an archive appears under its final name only complete (written to `<file>.partial`,
//! fsynced, renamed); a restore verifies the whole archive (every checksum, no missing or extra
//! entry, no path leaving the target, versions this binary can open) before it writes anything,
//! extracts beside the target and renames into place, and never runs into a data directory a
//! daemon has open.

mod archive;
pub mod record;
mod restore;
pub mod schedule;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use archive::{
    BackupOptions, BackupReport, create_backup, create_backup_with, sweep_leftovers,
};
pub use restore::{
    RestoreOptions, RestoreReport, VerifiedArchive, restore, restore_with, verify_archive,
};

/// The name every archive's manifest has in the archive.
pub const MANIFEST_ENTRY: &str = "manifest.json";
/// The database snapshot's entry.
pub const DATABASE_ENTRY: &str = "clawvisor.db";
/// What `manifest.json` says it is.
pub const FORMAT_NAME: &str = "clawvisor-backup";
/// The archive format this binary writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Single files of the data directory that are state.
pub const STATE_FILES: [&str; 2] = [crate::audit::KEY_FILE, crate::audit::HEAD_FILE];
/// The secrets store's entry, archived only when asked ([`BackupOptions::include_secrets`]).
pub const SECRETS_ENTRY: &str = crate::config::secrets_file::FILE_NAME;
/// Directories of the data directory that are state, archived with everything under them.
pub const STATE_DIRECTORIES: [&str; 4] = ["workspaces", "skills", "memory", "outbox-files"];
/// The largest manifest a restore reads into memory.
const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;
/// The most entries a restore accepts.
const MAX_ENTRIES: usize = 1_000_000;

/// The manifest: the archive's last entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    pub format_version: u32,
    /// The version of the clawvisor that wrote it.
    pub clawvisor_version: String,
    /// The database snapshot's schema version (`PRAGMA user_version`, the last migration).
    pub schema_version: u32,
    /// When the snapshot was taken, in milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Which data directory it came from, on which host.
    pub source: ManifestSource,
    /// Every other entry, in archive order.
    pub entries: Vec<ManifestEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestSource {
    pub data_dir: String,
    pub host: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    pub path: String,
    pub size: u64,
    /// Lowercase hex SHA-256 of the entry's bytes.
    pub sha256: String,
}

/// Why a backup or a restore did not happen. Each names what to do.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("no database at {0}: nothing to back up (is --data-dir right?)")]
    NoDatabase(PathBuf),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("database snapshot failed: {0}")]
    Snapshot(String),
    #[error("{path} changed size while it was archived; run the backup again")]
    FileChanged { path: String },
    #[error("the archive is not usable, nothing was written: {0}")]
    Refused(String),
    #[error(
        "a daemon (pid {pid}) has the data directory {data_dir} open: stop it before restoring"
    )]
    DaemonRunning { pid: u32, data_dir: PathBuf },
    #[error(
        "the data directory {0} is not empty: restore into a new directory, or pass --force to \
         replace it (the old one is kept beside it)"
    )]
    NotEmpty(PathBuf),
    #[error("the restored database failed its integrity check: {0}")]
    Integrity(String),
    #[error(
        "cannot tell whether a daemon has {database} open ({reason}): stop any daemon using it, \
         then move that database out of the data directory (or restore into a new directory)"
    )]
    DaemonUnknown { database: PathBuf, reason: String },
    #[error(
        "the restored audit chain does not verify, so the data directory was left as it was:\n\
         {0}\nrestore another archive, or pass --accept-broken-audit to put this one in place anyway"
    )]
    AuditBroken(String),
    #[error(
        "cannot move the restored data into {data_dir}: {source}; {previous}; the restored copy \
         is kept at {staged} (rename it to {data_dir} once the cause is fixed)"
    )]
    PlaceFailed {
        data_dir: PathBuf,
        staged: PathBuf,
        source: std::io::Error,
        previous: String,
    },
}

impl BackupError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        BackupError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// The host's name for the manifest (empty when the system does not say).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_default()
}

/// Fsyncs a directory so that a rename inside it is durable.
fn sync_directory(dir: &std::path::Path) -> Result<(), BackupError> {
    std::fs::File::open(dir)
        .and_then(|file| file.sync_all())
        .map_err(|error| BackupError::io("sync the directory", dir, error))
}

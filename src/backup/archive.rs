//! Writing an archive: the database snapshot, the state files, then the manifest, into
//! `<file>.partial`, fsynced and renamed to `<file>`.
//!
//! Each state file is first copied into an unnamed file in the scratch directory and archived
//! from that copy with the copy's size: the daemon keeps writing while a backup runs (an agent
//! appends to a workspace file, the memory index is dumped anew), and a tar entry's size must be
//! known before its bytes. A file removed between the listing and the copy is skipped and named
//! in the report.
//!
//! The scratch directory and the `.partial` file are held under an advisory lock (`flock`) while
//! a backup runs, so that [`sweep_leftovers`] can tell what a killed backup left behind (a
//! plaintext copy of the database among it) from what a running one is writing.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Seek as _, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use sha2::{Digest, Sha256};

use super::{
    BackupError, DATABASE_ENTRY, FORMAT_NAME, FORMAT_VERSION, MANIFEST_ENTRY, Manifest,
    ManifestEntry, ManifestSource, SECRETS_ENTRY, STATE_DIRECTORIES, STATE_FILES, host_name,
    sync_directory,
};

/// How long the snapshot keeps retrying while SQLite says the database is busy.
const SNAPSHOT_PATIENCE: Duration = Duration::from_secs(30);
/// The prefix of a backup's scratch directory (beside the archive).
pub(super) const SCRATCH_PREFIX: &str = ".clawvisor-backup-";
/// The suffix of an archive being written.
pub(super) const PARTIAL_SUFFIX: &str = ".partial";
/// How old an unlocked leftover must be before [`sweep_leftovers`] removes it: a backup takes its
/// locks right after it creates the files, so only a leftover this old and unlocked is stale.
const LEFTOVER_AGE: Duration = Duration::from_secs(60);

/// What a backup wrote.
#[derive(Debug, Clone)]
pub struct BackupReport {
    pub path: PathBuf,
    pub entries: Vec<ManifestEntry>,
    /// The archive's size on disk (compressed).
    pub archive_bytes: u64,
    pub schema_version: u32,
    pub created_ms: i64,
    pub duration: Duration,
    /// Paths left out, each with the reason (symbolic links, special files, vanished files).
    pub skipped: Vec<String>,
}

impl BackupReport {
    /// The sum of the entries' sizes before compression.
    pub fn content_bytes(&self) -> u64 {
        self.entries.iter().map(|entry| entry.size).sum()
    }
}

/// What a backup takes besides the state it always takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackupOptions {
    /// Archive the secrets store (`secrets.toml`) too; off unless the operator asks.
    pub include_secrets: bool,
}

/// Backs up `data_dir` into `destination` (replacing a file there only once the new archive is
/// complete), without the secrets store. Safe while a daemon runs on `data_dir`: it only reads.
pub fn create_backup(data_dir: &Path, destination: &Path) -> Result<BackupReport, BackupError> {
    create_backup_with(data_dir, destination, BackupOptions::default())
}

/// Like [`create_backup`], with the secrets store when `options` asks for it.
pub fn create_backup_with(
    data_dir: &Path,
    destination: &Path,
    options: BackupOptions,
) -> Result<BackupReport, BackupError> {
    let started = Instant::now();
    let database = crate::store::Store::path_in(data_dir);
    if !database.is_file() {
        return Err(BackupError::NoDatabase(database));
    }
    let parent = match destination.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let scratch = tempfile::Builder::new()
        .prefix(SCRATCH_PREFIX)
        .tempdir_in(&parent)
        .map_err(|error| BackupError::io("create a scratch directory in", &parent, error))?;
    // Held until the scratch directory is removed: a sweep never takes a running backup's files.
    let _scratch_lock = lock(scratch.path())?;
    // The head first: it may then lag the snapshot (accepted), never lead it.
    let anchors = single_files(data_dir, options)?;
    let snapshot_path = scratch.path().join(DATABASE_ENTRY);
    let created_ms = crate::clock::now_ms();
    let schema_version = snapshot(&database, &snapshot_path)?;

    let mut partial_name = destination.as_os_str().to_owned();
    partial_name.push(PARTIAL_SUFFIX);
    let partial = PathBuf::from(partial_name);
    let partial_file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)
        .map_err(|error| BackupError::io("create", &partial, error))?;
    // The lock lives on this handle until the rename below; the writer gets a duplicate of it.
    let locked = partial_file
        .lock()
        .and_then(|()| partial_file.try_clone())
        .map_err(|error| BackupError::io("lock", &partial, error));
    let output = match locked {
        Ok(output) => output,
        Err(error) => {
            let _ = fs::remove_file(&partial);
            return Err(error);
        }
    };
    let written = write_archive(
        data_dir,
        Output {
            file: output,
            partial: &partial,
            scratch: scratch.path(),
        },
        destination,
        &snapshot_path,
        anchors,
        Manifest {
            format: FORMAT_NAME.to_string(),
            format_version: FORMAT_VERSION,
            clawvisor_version: env!("CARGO_PKG_VERSION").to_string(),
            schema_version,
            created_ms,
            source: ManifestSource {
                data_dir: fs::canonicalize(data_dir)
                    .unwrap_or_else(|_| data_dir.to_path_buf())
                    .display()
                    .to_string(),
                host: host_name(),
            },
            entries: Vec::new(),
        },
    );
    let (entries, skipped) = match written {
        Ok(result) => result,
        Err(error) => {
            let _ = fs::remove_file(&partial);
            return Err(error);
        }
    };
    if let Err(error) = fs::rename(&partial, destination) {
        let _ = fs::remove_file(&partial);
        return Err(BackupError::io("rename the archive to", destination, error));
    }
    drop(partial_file);
    sync_directory(&parent)?;
    let archive_bytes = fs::metadata(destination)
        .map(|metadata| metadata.len())
        .unwrap_or(0);
    Ok(BackupReport {
        path: destination.to_path_buf(),
        entries,
        archive_bytes,
        schema_version,
        created_ms,
        duration: started.elapsed(),
        skipped,
    })
}

/// A single file's archive name and its bytes (`None`: absent).
type SingleFile = (&'static str, Option<Vec<u8>>);

/// The single files of the data directory an archive takes, each with its bytes (or `None` when
/// it is absent): the audit anchors, and the secrets store when asked.
fn single_files(data_dir: &Path, options: BackupOptions) -> Result<Vec<SingleFile>, BackupError> {
    let mut names: Vec<&'static str> = STATE_FILES.to_vec();
    if options.include_secrets {
        names.push(SECRETS_ENTRY);
    }
    names
        .into_iter()
        .map(|name| Ok((name, read_optional(&data_dir.join(name))?)))
        .collect()
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, BackupError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(BackupError::io("read", path, error)),
    }
}

/// Copies the database with the online backup API in one step (one read transaction: a
/// consistent snapshot however much the daemon writes meanwhile) and returns its schema version.
fn snapshot(database: &Path, target: &Path) -> Result<u32, BackupError> {
    let failed = |error: rusqlite::Error| BackupError::Snapshot(error.to_string());
    let source = Connection::open_with_flags(
        database,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(failed)?;
    source
        .busy_timeout(Duration::from_secs(5))
        .map_err(failed)?;
    let mut copy = Connection::open(target).map_err(failed)?;
    let deadline = Instant::now() + SNAPSHOT_PATIENCE;
    {
        let backup = Backup::new(&source, &mut copy).map_err(failed)?;
        loop {
            match backup.step(-1).map_err(failed)? {
                StepResult::Done => break,
                StepResult::Busy | StepResult::Locked if Instant::now() >= deadline => {
                    return Err(BackupError::Snapshot(
                        "the database stayed locked for 30 s; try again".to_string(),
                    ));
                }
                StepResult::Busy | StepResult::Locked => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                // `More` (not returned for a step of every page) and any later variant: go on.
                _ => {}
            }
        }
    }
    // One file, no WAL beside it: the archive's database must stand alone.
    let mode: String = copy
        .query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))
        .map_err(failed)?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(BackupError::Snapshot(format!(
            "the snapshot kept journal mode {mode}"
        )));
    }
    let version = crate::store::schema_version(&copy)
        .map_err(|error| BackupError::Snapshot(error.to_string()))?;
    copy.close()
        .map_err(|(_, error)| BackupError::Snapshot(error.to_string()))?;
    Ok(version)
}

type Written = (Vec<ManifestEntry>, Vec<String>);

/// Where an archive is written: the open `.partial` file, its path, and the scratch directory
/// that holds each state file's copy while it is archived.
struct Output<'a> {
    file: File,
    partial: &'a Path,
    scratch: &'a Path,
}

fn write_archive(
    data_dir: &Path,
    output: Output<'_>,
    destination: &Path,
    snapshot: &Path,
    anchors: Vec<(&str, Option<Vec<u8>>)>,
    mut manifest: Manifest,
) -> Result<Written, BackupError> {
    let partial = output.partial;
    let mut writer = Writer {
        builder: tar::Builder::new(GzEncoder::new(
            BufWriter::new(output.file),
            Compression::default(),
        )),
        partial,
        scratch: output.scratch,
        entries: Vec::new(),
        mtime: u64::try_from(manifest.created_ms / 1000).unwrap_or(0),
    };
    let mut skipped = Vec::new();
    let snapshot_file =
        File::open(snapshot).map_err(|error| BackupError::io("read", snapshot, error))?;
    let snapshot_size = snapshot_file
        .metadata()
        .map_err(|error| BackupError::io("read", snapshot, error))?
        .len();
    writer.append_hashed(DATABASE_ENTRY, snapshot_file, snapshot_size, 0o600)?;
    for (name, bytes) in anchors {
        if let Some(bytes) = bytes {
            writer.append_bytes(name, &bytes, 0o600)?;
        }
    }
    let ignored = [partial.to_path_buf(), destination.to_path_buf()];
    for directory in STATE_DIRECTORIES {
        let mut files = Vec::new();
        collect(
            &data_dir.join(directory),
            directory,
            &ignored,
            &mut files,
            &mut skipped,
        );
        for (name, path, mode) in files {
            if !writer.append_copy(&name, &path, mode)? {
                skipped.push(format!("{name} (removed while the backup ran)"));
            }
        }
    }
    manifest.entries = writer.entries.clone();
    let json = serde_json::to_vec_pretty(&manifest)
        .map_err(|error| BackupError::Snapshot(format!("cannot write the manifest: {error}")))?;
    writer.append_raw(MANIFEST_ENTRY, &json, 0o600)?;
    let io = |error| BackupError::io("write", partial, error);
    let encoder = writer.builder.into_inner().map_err(io)?;
    let mut buffered = encoder.finish().map_err(io)?;
    buffered.flush().map_err(io)?;
    let file = buffered
        .into_inner()
        .map_err(|error| BackupError::io("write", partial, error.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok((manifest.entries, skipped))
}

/// Lists the regular files under `dir` (sorted, archive names relative to the data directory);
/// anything else is skipped with a reason.
fn collect(
    dir: &Path,
    name: &str,
    ignored: &[PathBuf],
    files: &mut Vec<(String, PathBuf, u32)>,
    skipped: &mut Vec<String>,
) {
    let Ok(listing) = fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<_> = listing.filter_map(Result::ok).collect();
    children.sort_by_key(|child| child.file_name());
    for child in children {
        let path = child.path();
        let Some(child_name) = child.file_name().to_str().map(str::to_string) else {
            skipped.push(format!("{} (name is not UTF-8)", path.display()));
            continue;
        };
        let entry_name = format!("{name}/{child_name}");
        if ignored.contains(&path) {
            continue;
        }
        let Ok(metadata) = fs::symlink_metadata(&path) else {
            continue;
        };
        let kind = metadata.file_type();
        if kind.is_dir() {
            collect(&path, &entry_name, ignored, files, skipped);
        } else if kind.is_file() {
            files.push((entry_name, path, metadata.mode() & 0o777));
        } else if kind.is_symlink() {
            skipped.push(format!("{entry_name} (symbolic link)"));
        } else {
            skipped.push(format!("{entry_name} (not a regular file)"));
        }
    }
}

struct Writer<'a> {
    builder: tar::Builder<GzEncoder<BufWriter<File>>>,
    partial: &'a Path,
    scratch: &'a Path,
    entries: Vec<ManifestEntry>,
    mtime: u64,
}

impl Writer<'_> {
    fn header(&self, size: u64, mode: u32) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(size);
        header.set_mode(mode);
        header.set_mtime(self.mtime);
        header
    }

    /// Appends a state file the daemon may be writing: copies it into an unnamed scratch file
    /// first and archives the copy, whose size cannot change. Returns `false` when the file was
    /// removed before it could be opened (the caller notes it as skipped).
    fn append_copy(&mut self, name: &str, path: &Path, mode: u32) -> Result<bool, BackupError> {
        let mut source = match File::open(path) {
            Ok(source) => source,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(error) => return Err(BackupError::io("read", path, error)),
        };
        let mut copy = tempfile::tempfile_in(self.scratch)
            .map_err(|error| BackupError::io("create a copy in", self.scratch, error))?;
        let size = std::io::copy(&mut source, &mut copy)
            .map_err(|error| BackupError::io("copy", path, error))?;
        copy.seek(SeekFrom::Start(0))
            .map_err(|error| BackupError::io("read the copy of", path, error))?;
        self.append_hashed(name, copy, size, mode)?;
        Ok(true)
    }

    /// Appends `size` bytes of a file nobody else writes (the snapshot, a scratch copy), hashing
    /// what is read; a file that is not `size` long fails the backup (the archive would not match
    /// its header).
    fn append_hashed(
        &mut self,
        name: &str,
        file: File,
        size: u64,
        mode: u32,
    ) -> Result<(), BackupError> {
        let mut reader = Hashing {
            inner: file.take(size),
            hasher: Sha256::new(),
            count: 0,
        };
        let mut header = self.header(size, mode);
        self.builder
            .append_data(&mut header, name, &mut reader)
            .map_err(|error| BackupError::io("write", self.partial, error))?;
        let mut rest = [0u8; 1];
        let grew = reader.inner.into_inner().read(&mut rest).unwrap_or(0) > 0;
        if reader.count != size || grew {
            return Err(BackupError::FileChanged {
                path: name.to_string(),
            });
        }
        self.entries.push(ManifestEntry {
            path: name.to_string(),
            size,
            sha256: hex::encode(reader.hasher.finalize()),
        });
        Ok(())
    }

    fn append_bytes(&mut self, name: &str, bytes: &[u8], mode: u32) -> Result<(), BackupError> {
        self.append_raw(name, bytes, mode)?;
        self.entries.push(ManifestEntry {
            path: name.to_string(),
            size: bytes.len() as u64,
            sha256: hex::encode(Sha256::digest(bytes)),
        });
        Ok(())
    }

    fn append_raw(&mut self, name: &str, bytes: &[u8], mode: u32) -> Result<(), BackupError> {
        let mut header = self.header(bytes.len() as u64, mode);
        self.builder
            .append_data(&mut header, name, bytes)
            .map_err(|error| BackupError::io("write", self.partial, error))
    }
}

/// A reader that hashes and counts what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.hasher.update(&buffer[..read]);
        self.count += read as u64;
        Ok(read)
    }
}

/// Opens `path` (a file or a directory) and takes an exclusive advisory lock on it, held until
/// the returned handle is dropped.
fn lock(path: &Path) -> Result<File, BackupError> {
    let file = File::open(path).map_err(|error| BackupError::io("open", path, error))?;
    file.lock()
        .map_err(|error| BackupError::io("lock", path, error))?;
    Ok(file)
}

/// Removes what killed backups left in `dir`: `.clawvisor-backup-*` scratch directories (which
/// may hold a plaintext copy of the database) and `*.partial` archives, each only when no running
/// backup holds its lock and it was last changed over a minute ago. Returns what it removed;
/// a leftover that cannot be removed is logged and left for the next sweep.
pub fn sweep_leftovers(dir: &Path) -> Vec<PathBuf> {
    let Ok(listing) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in listing.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Ok(metadata) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let scratch = name.starts_with(SCRATCH_PREFIX) && metadata.is_dir();
        let partial = name.ends_with(PARTIAL_SUFFIX) && metadata.is_file();
        let old = metadata
            .modified()
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age >= LEFTOVER_AGE);
        if !(scratch || partial) || !old {
            continue;
        }
        let path = entry.path();
        // A running backup holds the lock; taking it proves the leftover is stale, and holding it
        // while removing keeps a new backup from reusing the name meanwhile.
        let Ok(handle) = File::open(&path) else {
            continue;
        };
        if handle.try_lock().is_err() {
            continue;
        }
        let result = if scratch {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        match result {
            Ok(()) => removed.push(path),
            Err(error) => tracing::warn!(
                path = %path.display(),
                %error,
                "cannot remove what an interrupted backup left behind"
            ),
        }
    }
    removed.sort();
    removed
}

//! Writing an archive: the database snapshot, the state files, then the manifest, into
//! `<file>.partial`, fsynced and renamed to `<file>`.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
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
    ManifestEntry, ManifestSource, STATE_DIRECTORIES, STATE_FILES, host_name, sync_directory,
};

/// How long the snapshot keeps retrying while SQLite says the database is busy.
const SNAPSHOT_PATIENCE: Duration = Duration::from_secs(30);

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

/// Backs up `data_dir` into `destination` (replacing a file there only once the new archive is
/// complete). Safe while a daemon runs on `data_dir`: it only reads.
pub fn create_backup(data_dir: &Path, destination: &Path) -> Result<BackupReport, BackupError> {
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
        .prefix(".clawvisor-backup-")
        .tempdir_in(&parent)
        .map_err(|error| BackupError::io("create a scratch directory in", &parent, error))?;
    // The head first: it may then lag the snapshot (accepted), never lead it.
    let anchors: Vec<(&str, Option<Vec<u8>>)> = STATE_FILES
        .iter()
        .map(|name| Ok((*name, read_optional(&data_dir.join(name))?)))
        .collect::<Result<_, BackupError>>()?;
    let snapshot_path = scratch.path().join(DATABASE_ENTRY);
    let created_ms = crate::clock::now_ms();
    let schema_version = snapshot(&database, &snapshot_path)?;

    let mut partial_name = destination.as_os_str().to_owned();
    partial_name.push(".partial");
    let partial = PathBuf::from(partial_name);
    let written = write_archive(
        data_dir,
        &partial,
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
    fs::rename(&partial, destination)
        .map_err(|error| BackupError::io("rename the archive to", destination, error))?;
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

fn write_archive(
    data_dir: &Path,
    partial: &Path,
    destination: &Path,
    snapshot: &Path,
    anchors: Vec<(&str, Option<Vec<u8>>)>,
    mut manifest: Manifest,
) -> Result<Written, BackupError> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(partial)
        .map_err(|error| BackupError::io("create", partial, error))?;
    let mut writer = Writer {
        builder: tar::Builder::new(GzEncoder::new(BufWriter::new(file), Compression::default())),
        partial,
        entries: Vec::new(),
        mtime: u64::try_from(manifest.created_ms / 1000).unwrap_or(0),
    };
    let mut skipped = Vec::new();
    writer.append_file(DATABASE_ENTRY, snapshot, 0o600)?;
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
            match writer.append_file(&name, &path, mode) {
                Err(BackupError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    skipped.push(format!("{name} (removed while the backup ran)"));
                }
                other => other?,
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

    /// Appends a file, hashing what is read; a file that shrinks or grows meanwhile fails the
    /// backup (the archive would not match its header).
    fn append_file(&mut self, name: &str, path: &Path, mode: u32) -> Result<(), BackupError> {
        let file = File::open(path).map_err(|error| BackupError::io("read", path, error))?;
        let size = file
            .metadata()
            .map_err(|error| BackupError::io("read", path, error))?
            .len();
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

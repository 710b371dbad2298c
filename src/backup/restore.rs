//! Reading an archive back: [`verify_archive`] checks a whole archive without writing anything;
//! [`restore`] verifies, extracts beside the target (checking every byte again), checks the
//! database, and renames the result into place.
//!
//! Verifying checks the gzip stream (its CRC), that every entry is a regular file at a path under
//! the format's roots with no `..` or absolute part, that no entry is duplicated, missing or extra,
//! every size and SHA-256 against the manifest, a format version equal to this binary's and a
//! schema version not newer.
//!
//! Restoring refuses a data directory with an open boot (`daemon_boots`, `serve` or `chat`) whose
//! live process holds the database, or whose database it cannot read to tell
//! (`store::running_daemon`), and a non-empty one without `--force` (which moves it aside, never
//! deletes it). It extracts into a scratch directory beside the target (hashing again), runs
//! `PRAGMA integrity_check`, the schema check and `audit verify` there, and only then renames it
//! into place; a chain that does not verify refuses unless `--accept-broken-audit`. Restored files
//! keep their mode masked to 0755 (scripts stay executable), the secrets store gets 0600; run as root, the tree gets the
//! previous data directory's owner (otherwise a warning says to chown it).
//!
//! A restore never leaves the operator without a data directory: it refuses before anything is
//! moved when the archive, the database or (unless accepted) the audit chain fails, and when the
//! final rename fails the old directory is named back and the extracted copy kept, its path in
//! the error.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;
use rusqlite::{Connection, OpenFlags};
use sha2::{Digest, Sha256};

use super::{
    BackupError, DATABASE_ENTRY, FORMAT_NAME, FORMAT_VERSION, MANIFEST_ENTRY, MAX_ENTRIES,
    MAX_MANIFEST_BYTES, Manifest, SECRETS_ENTRY, STATE_DIRECTORIES, STATE_FILES, sync_directory,
};

/// An archive that passed every check.
#[derive(Debug, Clone)]
pub struct VerifiedArchive {
    pub manifest: Manifest,
}

/// What a restore did.
#[derive(Debug, Clone)]
pub struct RestoreReport {
    pub manifest: Manifest,
    pub data_dir: PathBuf,
    /// `PRAGMA integrity_check`'s answer (`["ok"]`).
    pub integrity: Vec<String>,
    /// The audit chain's verification, as `clawvisor audit verify` prints it.
    pub audit: Vec<String>,
    pub audit_valid: bool,
    /// Where the replaced data directory was moved (`--force` on a non-empty one).
    pub replaced: Option<PathBuf>,
    /// What the operator should know (ownership that could not be kept).
    pub warnings: Vec<String>,
}

/// How a restore may treat an existing data directory and a broken audit chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    /// Replace a non-empty data directory (moved aside, never deleted).
    pub force: bool,
    /// Put the data directory in place even though its audit chain does not verify.
    pub accept_broken_audit: bool,
}

/// The mode bits a restored file keeps from its archive entry: the owner's and the read and
/// execute bits of others (scripts in skills and workspaces stay executable), never write for
/// group or others, nor setuid, setgid or sticky.
const FILE_MODE_MASK: u32 = 0o755;

fn refused(reason: impl Into<String>) -> BackupError {
    BackupError::Refused(reason.into())
}

/// Checks a whole archive read from `reader`, writing nothing: gzip framing and checksum, every
/// tar entry a regular file at a path the format allows (no `..`, no absolute path, no link),
/// no duplicate, the manifest last and parsable, every entry's size and SHA-256 equal to the
/// manifest's, no entry missing or extra, and versions this binary can open.
pub fn verify_archive(reader: impl Read) -> Result<VerifiedArchive, BackupError> {
    let mut found = BTreeMap::new();
    let manifest = walk(reader, |name, _mode, entry| {
        let mut hasher = Sha256::new();
        let size = std::io::copy(entry, &mut HashSink(&mut hasher)).map_err(|error| {
            refused(format!(
                "the archive is truncated or corrupt (entry {name}: {error})"
            ))
        })?;
        found.insert(name.to_string(), (size, hex::encode(hasher.finalize())));
        Ok(())
    })?;
    check_manifest(&manifest, &found)?;
    Ok(VerifiedArchive { manifest })
}

/// Walks the archive, giving every entry but the manifest to `visit`, and returns the manifest.
fn walk(
    reader: impl Read,
    mut visit: impl FnMut(&str, u32, &mut dyn Read) -> Result<(), BackupError>,
) -> Result<Manifest, BackupError> {
    let mut decoder = GzDecoder::new(reader);
    let mut manifest = None;
    let mut seen = std::collections::BTreeSet::new();
    {
        let mut archive = tar::Archive::new(&mut decoder);
        let entries = archive
            .entries()
            .map_err(|error| refused(format!("not a backup archive: {error}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|error| {
                refused(format!(
                    "the archive is truncated or corrupt ({error}); use another copy"
                ))
            })?;
            if manifest.is_some() {
                return Err(refused("an entry follows the manifest"));
            }
            let name = entry_name(&entry)?;
            if !seen.insert(name.clone()) || seen.len() > MAX_ENTRIES {
                return Err(refused(format!("entry {name} appears twice")));
            }
            if name == MANIFEST_ENTRY {
                let mut bytes = Vec::new();
                (&mut entry)
                    .take(MAX_MANIFEST_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|error| {
                        refused(format!("the manifest is truncated or corrupt: {error}"))
                    })?;
                if bytes.len() as u64 > MAX_MANIFEST_BYTES {
                    return Err(refused("the manifest is larger than 16 MB"));
                }
                manifest = Some(serde_json::from_slice::<Manifest>(&bytes).map_err(|error| {
                    refused(format!("the manifest is not a backup manifest: {error}"))
                })?);
            } else {
                let mode = entry.header().mode().unwrap_or(0o600);
                visit(&name, mode, &mut entry)?;
            }
        }
    }
    // Everything after the tar's end, up to the gzip trailer, must read cleanly: a cut or
    // altered compressed stream fails its CRC or length here.
    std::io::copy(&mut decoder, &mut std::io::sink())
        .map_err(|error| refused(format!("the archive is truncated or corrupt ({error})")))?;
    manifest.ok_or_else(|| refused("the archive has no manifest.json (truncated, or not a backup)"))
}

/// The entry's path, refused unless it is a regular file at a path the format allows.
fn entry_name(entry: &tar::Entry<'_, impl Read>) -> Result<String, BackupError> {
    let raw = entry.path_bytes();
    let name = std::str::from_utf8(&raw)
        .map_err(|_| refused("an entry's path is not UTF-8"))?
        .to_string();
    if entry.header().entry_type() != tar::EntryType::Regular {
        return Err(refused(format!(
            "entry {name} is not a regular file (links and devices are never restored)"
        )));
    }
    if !safe_path(&name) {
        return Err(refused(format!(
            "entry {name} is outside what a backup holds (absolute, `..`, or unknown)"
        )));
    }
    Ok(name)
}

/// Only plain relative paths under the format's own roots.
fn safe_path(name: &str) -> bool {
    let path = Path::new(name);
    let plain = !name.is_empty()
        && !name.contains('\\')
        && !name.ends_with('/')
        && path
            .components()
            .all(|component| matches!(component, Component::Normal(_)));
    if !plain || path.components().count() != name.split('/').count() {
        return false;
    }
    let root = name.split('/').next().unwrap_or_default();
    let single = name == MANIFEST_ENTRY
        || name == DATABASE_ENTRY
        || name == SECRETS_ENTRY
        || STATE_FILES.contains(&name);
    single || (STATE_DIRECTORIES.contains(&root) && name.contains('/'))
}

fn check_manifest(
    manifest: &Manifest,
    found: &BTreeMap<String, (u64, String)>,
) -> Result<(), BackupError> {
    if manifest.format != FORMAT_NAME {
        return Err(refused(format!(
            "the manifest's format is {:?}, not {FORMAT_NAME:?}",
            manifest.format
        )));
    }
    if manifest.format_version != FORMAT_VERSION {
        return Err(refused(format!(
            "archive format version {} is not the one this clawvisor reads ({FORMAT_VERSION}); \
             restore it with clawvisor {}",
            manifest.format_version, manifest.clawvisor_version
        )));
    }
    let binary = crate::store::latest_version();
    if manifest.schema_version > binary {
        return Err(refused(format!(
            "the archive's database has schema version {}, newer than this clawvisor knows \
             ({binary}); restore it with clawvisor {} or newer",
            manifest.schema_version, manifest.clawvisor_version
        )));
    }
    let mut listed = BTreeMap::new();
    for entry in &manifest.entries {
        if listed
            .insert(entry.path.clone(), (entry.size, entry.sha256.clone()))
            .is_some()
        {
            return Err(refused(format!("the manifest lists {} twice", entry.path)));
        }
    }
    if !listed.contains_key(DATABASE_ENTRY) {
        return Err(refused("the manifest lists no database"));
    }
    if let Some(extra) = found.keys().find(|path| !listed.contains_key(*path)) {
        return Err(refused(format!(
            "entry {extra} is not in the manifest (the archive was altered)"
        )));
    }
    for (path, (size, sha256)) in &listed {
        match found.get(path) {
            None => {
                return Err(refused(format!(
                    "entry {path} is missing from the archive (truncated?)"
                )));
            }
            Some((found_size, found_sha)) if found_size != size || found_sha != sha256 => {
                return Err(refused(format!(
                    "entry {path} does not match its checksum (the archive was altered or damaged)"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

struct HashSink<'a>(&'a mut Sha256);

impl Write for HashSink<'_> {
    fn write(&mut self, buffer: &[u8]) -> std::io::Result<usize> {
        self.0.update(buffer);
        Ok(buffer.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Restores `archive` into `data_dir` with `--force` as given and a broken audit chain refused;
/// see [`restore_with`].
pub fn restore(archive: &Path, data_dir: &Path, force: bool) -> Result<RestoreReport, BackupError> {
    restore_with(
        archive,
        data_dir,
        RestoreOptions {
            force,
            accept_broken_audit: false,
        },
    )
}

/// Restores `archive` into `data_dir`. Refuses when a daemon has `data_dir` open or that cannot be
/// told, when it is not empty (unless `force`: it is then moved aside, never deleted), when the
/// archive fails any check, and when the restored audit chain does not verify (unless
/// `accept_broken_audit`); in every refusal nothing is left behind and `data_dir` is untouched.
pub fn restore_with(
    archive: &Path,
    data_dir: &Path,
    options: RestoreOptions,
) -> Result<RestoreReport, BackupError> {
    let database = crate::store::Store::path_in(data_dir);
    match crate::store::running_daemon(&database) {
        Ok(None) => {}
        Ok(Some(pid)) => {
            return Err(BackupError::DaemonRunning {
                pid,
                data_dir: data_dir.to_path_buf(),
            });
        }
        // `running_daemon` answers `Ok(None)` when there is no database, so this database exists
        // and could not be read: no proof that no daemon holds it.
        Err(error) => {
            return Err(BackupError::DaemonUnknown {
                database,
                reason: error.to_string(),
            });
        }
    }
    let open = || fs::File::open(archive).map_err(|error| BackupError::io("open", archive, error));
    let verified = verify_archive(std::io::BufReader::new(open()?))?;
    let non_empty = fs::read_dir(data_dir)
        .map(|mut listing| listing.next().is_some())
        .unwrap_or(false);
    if non_empty && !options.force {
        return Err(BackupError::NotEmpty(data_dir.to_path_buf()));
    }
    if data_dir.exists() && !data_dir.is_dir() {
        return Err(BackupError::io(
            "restore into",
            data_dir,
            std::io::Error::other("it is not a directory"),
        ));
    }
    let parent = match data_dir.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent).map_err(|error| BackupError::io("create", &parent, error))?;
    let staging = tempfile::Builder::new()
        .prefix(".clawvisor-restore-")
        .tempdir_in(&parent)
        .map_err(|error| BackupError::io("create a scratch directory in", &parent, error))?;
    extract(
        std::io::BufReader::new(open()?),
        staging.path(),
        &verified.manifest,
    )?;
    let (integrity, audit, audit_valid) = check_database(staging.path(), &verified.manifest)?;
    if !audit_valid && !options.accept_broken_audit {
        return Err(BackupError::AuditBroken(audit.join("\n")));
    }
    let warnings = match fs::metadata(data_dir) {
        Ok(previous) => keep_owner(staging.path(), previous.uid(), previous.gid())?,
        Err(_) => Vec::new(),
    };
    let staged = staging.keep();
    let replaced = place(&staged, data_dir, non_empty)?;
    sync_directory(&parent)?;
    Ok(RestoreReport {
        manifest: verified.manifest,
        data_dir: data_dir.to_path_buf(),
        integrity,
        audit,
        audit_valid,
        replaced,
        warnings,
    })
}

/// Gives the staged tree the previous data directory's owner, so that a restore run under sudo
/// does not leave the daemon's user a root-owned directory. Only root can; anyone else whose
/// directory belonged to another user gets a warning naming the command to run.
fn keep_owner(staged: &Path, uid: u32, gid: u32) -> Result<Vec<String>, BackupError> {
    let ours = fs::metadata(staged).map_err(|error| BackupError::io("read", staged, error))?;
    if ours.uid() == uid && ours.gid() == gid {
        return Ok(Vec::new());
    }
    if ours.uid() != 0 {
        return Ok(vec![format!(
            "the previous data directory belonged to uid {uid} (gid {gid}) and this restore ran \
             as uid {}: the restored files are owned by uid {}; run `chown -R {uid}:{gid}` on the \
             data directory if the daemon runs as that user",
            ours.uid(),
            ours.uid()
        )]);
    }
    fn walk(path: &Path, uid: u32, gid: u32) -> Result<(), BackupError> {
        // The staged tree holds only what the restore made: directories and regular files.
        std::os::unix::fs::lchown(path, Some(uid), Some(gid))
            .map_err(|error| BackupError::io("change the owner of", path, error))?;
        if fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir()) {
            let listing =
                fs::read_dir(path).map_err(|error| BackupError::io("read", path, error))?;
            for child in listing {
                let child = child.map_err(|error| BackupError::io("read", path, error))?;
                walk(&child.path(), uid, gid)?;
            }
        }
        Ok(())
    }
    walk(staged, uid, gid)?;
    Ok(Vec::new())
}

/// Writes every entry under `target`, hashing again: the file may have changed since it was
/// verified.
fn extract(reader: impl Read, target: &Path, manifest: &Manifest) -> Result<(), BackupError> {
    let expected: BTreeMap<&str, (u64, &str)> = manifest
        .entries
        .iter()
        .map(|entry| (entry.path.as_str(), (entry.size, entry.sha256.as_str())))
        .collect();
    let mut written = 0usize;
    let read_manifest = walk(reader, |name, mode, entry| {
        let Some((size, sha256)) = expected.get(name) else {
            return Err(refused(format!("entry {name} is not in the manifest")));
        };
        let path = target.join(name);
        if let Some(dir) = path.parent() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|error| BackupError::io("create", dir, error))?;
        }
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|error| BackupError::io("create", &path, error))?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let mut count = 0u64;
        loop {
            let read = entry
                .read(&mut buffer)
                .map_err(|error| refused(format!("cannot read entry {name}: {error}")))?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            file.write_all(&buffer[..read])
                .map_err(|error| BackupError::io("write", &path, error))?;
            count += read as u64;
        }
        if count != *size || hex::encode(hasher.finalize()) != *sha256 {
            return Err(refused(format!(
                "entry {name} changed since it was verified"
            )));
        }
        // Set after writing, so that the umask does not narrow it. The secrets store is 0600
        // whatever its entry says.
        let mode = if name == SECRETS_ENTRY {
            0o600
        } else {
            mode & FILE_MODE_MASK
        };
        file.set_permissions(fs::Permissions::from_mode(mode))
            .and_then(|()| file.sync_all())
            .map_err(|error| BackupError::io("write", &path, error))?;
        written += 1;
        Ok(())
    })?;
    if read_manifest != *manifest || written != expected.len() {
        return Err(refused("the archive changed while it was restored"));
    }
    Ok(())
}

/// `PRAGMA integrity_check`, the schema version against the manifest's, and the audit chain.
fn check_database(
    staged: &Path,
    manifest: &Manifest,
) -> Result<(Vec<String>, Vec<String>, bool), BackupError> {
    let failed = |error: rusqlite::Error| BackupError::Integrity(error.to_string());
    let conn = Connection::open_with_flags(
        staged.join(DATABASE_ENTRY),
        OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .map_err(failed)?;
    let integrity = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut statement| {
            statement
                .query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(failed)?;
    if integrity != ["ok"] {
        return Err(BackupError::Integrity(integrity.join("; ")));
    }
    let version = crate::store::schema_version(&conn)
        .map_err(|error| BackupError::Integrity(error.to_string()))?;
    if version != manifest.schema_version {
        return Err(refused(format!(
            "the database's schema version {version} is not the manifest's {}",
            manifest.schema_version
        )));
    }
    let report = crate::audit::verify_report(&conn, None)
        .map_err(|error| BackupError::Integrity(format!("cannot read the audit log: {error}")))?;
    let valid = matches!(
        report.verification,
        crate::audit::Verification::Valid { .. }
    );
    Ok((integrity, report.lines(), valid))
}

/// Moves `staged` to `data_dir`; an existing non-empty one is moved aside first. When the final
/// rename fails, the old directory is named back and `staged` is kept (the error says where).
fn place(staged: &Path, data_dir: &Path, non_empty: bool) -> Result<Option<PathBuf>, BackupError> {
    let discard = |error: BackupError| {
        let _ = fs::remove_dir_all(staged);
        error
    };
    let mut aside = None;
    if non_empty {
        let mut name = data_dir.as_os_str().to_owned();
        name.push(format!(".replaced-{}", crate::clock::now_ms()));
        let name = PathBuf::from(name);
        fs::rename(data_dir, &name)
            .map_err(|error| discard(BackupError::io("move aside", data_dir, error)))?;
        aside = Some(name);
    } else if data_dir.exists() {
        fs::remove_dir(data_dir)
            .map_err(|error| discard(BackupError::io("replace", data_dir, error)))?;
    }
    let Err(error) = fs::rename(staged, data_dir) else {
        return Ok(aside);
    };
    let previous = match &aside {
        Some(aside) => match fs::rename(aside, data_dir) {
            Ok(()) => "the previous data directory is back in place".to_string(),
            Err(back) => format!(
                "the previous data directory is still at {} ({back}): move it back",
                aside.display()
            ),
        },
        None => match fs::DirBuilder::new().mode(0o700).create(data_dir) {
            Ok(()) => "the empty data directory was made again".to_string(),
            Err(_) => "the data directory did not exist before".to_string(),
        },
    };
    Err(BackupError::PlaceFailed {
        data_dir: data_dir.to_path_buf(),
        staged: staged.to_path_buf(),
        source: error,
        previous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_final_rename_names_the_old_directory_back_and_keeps_the_staged_copy() {
        let root = tempfile::tempdir().unwrap();
        let data_dir = root.path().join("data");
        fs::create_dir(&data_dir).unwrap();
        fs::write(data_dir.join("clawvisor.db"), b"the operator's database").unwrap();
        // A staged copy that is gone by the time of the rename: the rename fails for real.
        let staged = root.path().join(".clawvisor-restore-gone");
        let error = place(&staged, &data_dir, true).unwrap_err();
        assert_eq!(
            fs::read(data_dir.join("clawvisor.db")).unwrap(),
            b"the operator's database"
        );
        let left: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("data")], "{left:?}");
        let text = error.to_string();
        assert!(text.contains(&staged.display().to_string()), "{text}");
        assert!(text.contains("back in place"), "{text}");
    }

    #[test]
    fn a_successful_place_keeps_the_staged_tree_and_the_old_directory_aside() {
        let root = tempfile::tempdir().unwrap();
        let data_dir = root.path().join("data");
        fs::create_dir(&data_dir).unwrap();
        fs::write(data_dir.join("old"), b"old").unwrap();
        let staged = root.path().join("staged");
        fs::create_dir(&staged).unwrap();
        fs::write(staged.join("new"), b"new").unwrap();
        let aside = place(&staged, &data_dir, true).unwrap().unwrap();
        assert_eq!(fs::read(data_dir.join("new")).unwrap(), b"new");
        assert_eq!(fs::read(aside.join("old")).unwrap(), b"old");
        assert!(!staged.exists());
    }
}

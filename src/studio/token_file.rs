//! The local access token: `<data_dir>/studio.token`, how command-line tools on the server call
//! Studio's API without a browser session.
//!
//! The daemon creates the file at boot when it is missing ([`load_or_create`]): 32 random bytes
//! as hex, mode 0600, written to a temporary file and linked into place, so that no reader ever
//! sees a half-written or group-readable token. The token is re-used across restarts, so scripts
//! and cron jobs that read the file keep working; to rotate it, delete the file and restart the
//! daemon. A file with the wrong owner, group/world permissions, a symlink or garbage in it is
//! replaced at boot by a new token (the old one may have been read by someone else) with a
//! warning in the log.
//!
//! Clients read it with [`local_token`], which refuses a file other users could read: a token
//! that may have leaked is not used silently. Whoever can read the file can also read the
//! database in the same directory, so the file grants nothing the data directory did not already.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::secrets::Secret;

/// The token file's name inside the data directory.
pub const TOKEN_FILE: &str = "studio.token";

/// Why the token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error(
        "there is no Studio token at {path}: start the daemon (`clawvisor serve`) once with this data directory; it creates the file"
    )]
    Missing { path: PathBuf },
    #[error(
        "{path} can be read or changed by other users (mode {mode:03o}), so the token may have leaked: delete the file and restart the daemon for a new one (it is created with mode 600)"
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error(
        "{path} belongs to user id {owner}, not to you (user id {you}): run this command as the user the daemon runs as"
    )]
    ForeignOwner { path: PathBuf, owner: u32, you: u32 },
    #[error(
        "{path} is not a regular file holding a token: delete it and restart the daemon for a new one"
    )]
    Malformed { path: PathBuf },
    #[error("cannot use the Studio token file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where the token file of `data_dir` is.
pub fn token_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TOKEN_FILE)
}

/// Reads the token file of `data_dir` for a client on the server (a CLI command, a script
/// helper). Refuses a file that is not owned by the caller, that the group or others may read, or
/// that is a symlink.
pub fn local_token(data_dir: &Path) -> Result<Secret, TokenFileError> {
    let path = token_path(data_dir);
    let metadata = match std::fs::symlink_metadata(&path) {
        Ok(metadata) => metadata,
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(TokenFileError::Missing { path });
        }
        Err(source) => return Err(TokenFileError::Io { path, source }),
    };
    check_metadata(&path, &metadata)?;
    let text = std::fs::read_to_string(&path).map_err(|source| TokenFileError::Io {
        path: path.clone(),
        source,
    })?;
    parse_token(&text).ok_or(TokenFileError::Malformed { path })
}

/// The daemon's side: the token in the file, or a new one written there when the file is missing
/// or unusable (see the module docs).
pub fn load_or_create(data_dir: &Path) -> Result<Secret, TokenFileError> {
    match local_token(data_dir) {
        Ok(token) => return Ok(token),
        Err(TokenFileError::Missing { .. }) => {}
        Err(TokenFileError::Io { path, source }) => {
            return Err(TokenFileError::Io { path, source });
        }
        Err(unusable) => {
            tracing::warn!(
                reason = %unusable,
                "replacing the Studio token file with a new token; clients using the old one must read it again"
            );
        }
    }
    write_new(data_dir)
}

fn check_metadata(path: &Path, metadata: &std::fs::Metadata) -> Result<(), TokenFileError> {
    if !metadata.file_type().is_file() {
        return Err(TokenFileError::Malformed {
            path: path.to_path_buf(),
        });
    }
    let you = nix::unistd::geteuid().as_raw();
    if metadata.uid() != you {
        return Err(TokenFileError::ForeignOwner {
            path: path.to_path_buf(),
            owner: metadata.uid(),
            you,
        });
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenFileError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// A token is 64 hex digits on the first line.
fn parse_token(text: &str) -> Option<Secret> {
    let token = text.lines().next().unwrap_or("").trim();
    (token.len() == 64 && token.bytes().all(|byte| byte.is_ascii_hexdigit()))
        .then(|| Secret::new(token))
}

/// Writes a new token to a private temporary file, then moves it into place in one step (a
/// rename replaces a bad file or symlink itself, never the symlink's target).
fn write_new(data_dir: &Path) -> Result<Secret, TokenFileError> {
    let path = token_path(data_dir);
    let io = |source| TokenFileError::Io {
        path: path.clone(),
        source,
    };
    let token = crate::store::studio::new_secret();
    let temporary = data_dir.join(format!(
        ".{TOKEN_FILE}.{}.{}.tmp",
        std::process::id(),
        hex::encode(rand::random::<[u8; 4]>())
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(format!("{token}\n").as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temporary, &path)?;
        // The rename is durable once the directory is synced.
        std::fs::File::open(data_dir)?.sync_all()
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(io(error));
    }
    tracing::info!(path = %path.display(), "created the Studio access token file");
    Ok(Secret::new(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> crate::testkit::harness::ScratchDir {
        crate::testkit::harness::ScratchDir::new("clawvisor-token-file").unwrap()
    }

    #[test]
    fn the_daemon_creates_a_private_token_once_and_reuses_it() {
        let dir = scratch();
        let created = load_or_create(dir.path()).unwrap();
        let metadata = std::fs::metadata(token_path(dir.path())).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
        assert_eq!(created.expose().len(), 64);
        let again = load_or_create(dir.path()).unwrap();
        assert_eq!(again.expose(), created.expose(), "re-used across restarts");
        assert_eq!(local_token(dir.path()).unwrap().expose(), created.expose());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(TOKEN_FILE)]);
    }

    #[test]
    fn a_readable_file_is_refused_by_clients_and_replaced_by_the_daemon() {
        let dir = scratch();
        let first = load_or_create(dir.path()).unwrap();
        let path = token_path(dir.path());
        for mode in [0o644, 0o640, 0o604] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let error = local_token(dir.path()).unwrap_err();
            assert!(
                matches!(error, TokenFileError::Exposed { mode: got, .. } if got == mode),
                "{error}"
            );
            let message = error.to_string();
            assert!(
                message.contains("other users") && message.contains("restart the daemon"),
                "{message}"
            );
            assert!(!message.contains(first.expose()), "{message}");
        }
        let replaced = load_or_create(dir.path()).unwrap();
        assert_ne!(
            replaced.expose(),
            first.expose(),
            "a token that may have leaked is rotated"
        );
        let metadata = std::fs::metadata(&path).unwrap();
        assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
        assert_eq!(local_token(dir.path()).unwrap().expose(), replaced.expose());
    }

    #[test]
    fn a_missing_garbled_or_linked_file_is_named_and_explained() {
        let dir = scratch();
        let error = local_token(dir.path()).unwrap_err();
        assert!(matches!(error, TokenFileError::Missing { .. }), "{error}");
        assert!(error.to_string().contains("clawvisor serve"));

        let path = token_path(dir.path());
        std::fs::write(&path, "not a token\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = local_token(dir.path()).unwrap_err();
        assert!(matches!(error, TokenFileError::Malformed { .. }), "{error}");

        std::fs::remove_file(&path).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, format!("{}\n", "a".repeat(64))).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let error = local_token(dir.path()).unwrap_err();
        assert!(matches!(error, TokenFileError::Malformed { .. }), "{error}");
        // The daemon replaces the link itself, not what it points to.
        let token = load_or_create(dir.path()).unwrap();
        assert_ne!(token.expose(), "a".repeat(64));
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_file()
        );
        assert_eq!(
            std::fs::read_to_string(&elsewhere).unwrap(),
            format!("{}\n", "a".repeat(64))
        );
    }
}

//! The agent's workspace: the one directory the file tools may touch and the shell runs in.
//!
//! Confinement happens in two steps, and both are needed:
//!
//! 1. [`Workspace::resolve`] checks a path the model gave us and explains any refusal: NUL bytes,
//!    empty paths, Windows paths, over-long paths, absolute paths outside the root, `..` escapes,
//!    `/proc`, and symlinks (at any component, dangling or not) that lead outside. It returns the
//!    real path: the canonical root, then real directories only, then the not-yet-existing rest.
//! 2. The `open_*` functions open that real path again, one component at a time, each relative to
//!    the directory opened before it and with `O_NOFOLLOW`. A symlink swapped in after step 1
//!    (a time-of-check/time-of-use race, e.g. by a concurrent `shell` call) is therefore never
//!    followed: the open fails and the call is refused. Missing parent directories are created
//!    the same way (`mkdirat` relative to an already-opened directory).
//!
//! Invariant: every file a tool reads, writes or lists is reached through a descriptor obtained by
//! the `open_*` functions, never by a plain path open after `resolve`.
//!
//! What this does not cover: the root itself and its ancestors are the operator's, and are trusted.
//! Hard links to files outside cannot be created by the file tools, but `shell` (which is not
//! confined, and is `Destructive`) could create one.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat, mkdirat};

use crate::tool::ToolError;

/// Longest path (in bytes) the tools accept; Linux's `PATH_MAX` is 4096.
const MAX_PATH_BYTES: usize = 4096;
/// Longest single file name (in bytes); the limit of ext4, xfs, btrfs and tmpfs.
const MAX_NAME_BYTES: usize = 255;

/// Why a path is resolved: writes may name a file that does not exist yet, and never the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Read,
    Write,
}

/// What to do when a parent directory of the target does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingParents {
    /// Create it (inside the workspace, never through a symlink).
    Create,
    /// Report the path as not found.
    Fail,
}

/// Why a path was refused, or the file-system error met while opening it. Every message names the
/// path as the model gave it and what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum ConfinementError {
    #[error("the path is empty; give a path relative to the workspace, like `notes/todo.md`")]
    Empty,
    #[error("`{path}` contains a NUL byte, which no file name can hold")]
    NulByte { path: String },
    #[error(
        "`{path}` looks like a Windows path; use `/` as the separator and a path relative to the workspace"
    )]
    WindowsPath { path: String },
    #[error("`{path}` is too long: {reason}")]
    TooLong { path: String, reason: String },
    #[error(
        "`{path}` is outside the workspace; absolute paths must lie under {root} (or use a relative path)"
    )]
    OutsideAbsolute { path: String, root: String },
    #[error("`{path}` climbs out of the workspace with `..`; use a path inside the workspace")]
    ParentEscape { path: String },
    #[error("`{path}` goes through /proc, which the tools never access")]
    ThroughProc { path: String },
    #[error("`{path}`: `{link}` is a symlink to {target}, which is outside the workspace")]
    SymlinkOutside {
        path: String,
        link: String,
        target: String,
    },
    #[error("`{path}`: `{link}` is a dangling symlink (to {target}); the tools do not follow it")]
    DanglingSymlink {
        path: String,
        link: String,
        target: String,
    },
    #[error(
        "`{path}`: `{component}` was replaced by a symlink while the call ran; refusing to follow it"
    )]
    ChangedDuringCall { path: String, component: String },
    #[error("`{path}` is the workspace itself; name a file inside it")]
    IsRoot { path: String },
    #[error("`{path}`: {source}")]
    Filesystem {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("the workspace {root} cannot be used: {reason}")]
    InvalidRoot { root: String, reason: String },
}

impl ConfinementError {
    /// The file-system error behind this one, if it is one (not found, permission denied, ...).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            ConfinementError::Filesystem { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

impl From<ConfinementError> for ToolError {
    fn from(error: ConfinementError) -> ToolError {
        match error {
            // Plain file-system failures (not found, permission denied) are not refusals.
            ConfinementError::Filesystem { .. } | ConfinementError::InvalidRoot { .. } => {
                ToolError::Failed(error.to_string())
            }
            _ => ToolError::Refused(error.to_string()),
        }
    }
}

/// A workspace root, created and canonicalized once.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The canonical root: absolute, no symlinks.
    root: PathBuf,
    /// The root as configured (may differ from `root` when it goes through a symlink); absolute
    /// paths the model gives may use either spelling.
    configured_root: PathBuf,
}

impl Workspace {
    /// Creates the directory if needed and resolves its real location.
    pub fn new(root: impl AsRef<Path>) -> Result<Workspace, ConfinementError> {
        let configured_root = root.as_ref().to_path_buf();
        let invalid = |reason: String| ConfinementError::InvalidRoot {
            root: configured_root.display().to_string(),
            reason,
        };
        if configured_root.as_os_str().is_empty() {
            return Err(invalid("the path is empty".to_string()));
        }
        std::fs::create_dir_all(&configured_root)
            .map_err(|error| invalid(format!("cannot create it: {error}")))?;
        let root = std::fs::canonicalize(&configured_root)
            .map_err(|error| invalid(format!("cannot resolve it: {error}")))?;
        if root.parent().is_none() {
            return Err(invalid(
                "it is the file-system root, which would confine nothing".to_string(),
            ));
        }
        if is_under_proc(&root) {
            return Err(invalid("it lies under /proc".to_string()));
        }
        let configured_root = if configured_root.is_absolute() {
            normalize_absolute(&configured_root)
        } else {
            root.clone()
        };
        Ok(Workspace {
            root,
            configured_root,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks `user_path` and returns the real path it names inside the workspace (see the module
    /// doc). The path need not exist; a `Write` may create it. Only symlinks leading inside the
    /// workspace are followed.
    pub fn resolve(&self, user_path: &str, purpose: Purpose) -> Result<PathBuf, ConfinementError> {
        let relative = self.check_lexically(user_path)?;
        let components: Vec<&OsStr> = relative.iter().collect();
        let mut current = self.root.clone();
        for (index, component) in components.iter().enumerate() {
            let candidate = current.join(component);
            let metadata = match std::fs::symlink_metadata(&candidate) {
                Ok(metadata) => metadata,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    // Nothing below a missing component exists either: the rest is to be created.
                    current.extend(&components[index..]);
                    break;
                }
                Err(source) => {
                    return Err(ConfinementError::Filesystem {
                        path: shown(user_path),
                        source,
                    });
                }
            };
            if !metadata.file_type().is_symlink() {
                current = candidate;
                continue;
            }
            current = self.follow_symlink(user_path, &candidate)?;
        }
        if is_under_proc(&current) {
            return Err(ConfinementError::ThroughProc {
                path: shown(user_path),
            });
        }
        if !current.starts_with(&self.root) {
            // Every step above keeps `current` under the root; this is the last line of defence.
            return Err(ConfinementError::OutsideAbsolute {
                path: shown(user_path),
                root: self.root.display().to_string(),
            });
        }
        if purpose == Purpose::Write && current == self.root {
            return Err(ConfinementError::IsRoot {
                path: shown(user_path),
            });
        }
        Ok(current)
    }

    /// The checks that need no file system: returns the path relative to the root, normalized
    /// (no `.`, no `..`, no leading `/`).
    pub fn check_lexically(&self, user_path: &str) -> Result<PathBuf, ConfinementError> {
        lexical_relative(user_path, &[&self.root, &self.configured_root])
    }

    /// `resolved` shown relative to the root (`.` for the root itself), for messages.
    pub fn display(&self, resolved: &Path) -> String {
        match resolved.strip_prefix(&self.root) {
            Ok(relative) if relative.as_os_str().is_empty() => ".".to_string(),
            Ok(relative) => relative.display().to_string(),
            Err(_) => resolved.display().to_string(),
        }
    }

    /// Opens the directory `resolved` (a path returned by `resolve`) without following any symlink.
    pub fn open_dir(&self, resolved: &Path) -> Result<OwnedFd, ConfinementError> {
        let components = self.components_of(resolved)?;
        self.walk_directories(resolved, &components, MissingParents::Fail)
    }

    /// Opens the directory that holds `resolved` and returns it with the file's name, so that the
    /// caller can `openat`/`renameat` relative to it (with `O_NOFOLLOW`).
    pub fn open_parent(
        &self,
        resolved: &Path,
        missing_parents: MissingParents,
    ) -> Result<(OwnedFd, OsString), ConfinementError> {
        let components = self.components_of(resolved)?;
        let Some((name, parents)) = components.split_last() else {
            return Err(ConfinementError::IsRoot {
                path: self.display(resolved),
            });
        };
        let directory = self.walk_directories(resolved, parents, missing_parents)?;
        Ok((directory, name.to_os_string()))
    }

    /// Opens `resolved` for reading without following a symlink at any component. Non-blocking, so
    /// that a FIFO cannot hang the call; callers check that they got a regular file.
    pub fn open_read(&self, resolved: &Path) -> Result<File, ConfinementError> {
        let (directory, name) = self.open_parent(resolved, MissingParents::Fail)?;
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        match openat(&directory, name.as_os_str(), flags, Mode::empty()) {
            Ok(descriptor) => Ok(File::from(descriptor)),
            Err(errno) => Err(self.open_error(resolved, &directory, &name, errno)),
        }
    }

    /// Turns an `openat` failure on `name` (inside `directory`) into a clear error: a symlink met
    /// with `O_NOFOLLOW` means the path changed after `resolve` checked it.
    pub fn open_error(
        &self,
        resolved: &Path,
        directory: &OwnedFd,
        name: &OsStr,
        errno: Errno,
    ) -> ConfinementError {
        if matches!(errno, Errno::ELOOP | Errno::ENOTDIR)
            && is_symlink_at(directory, name).unwrap_or(false)
        {
            return ConfinementError::ChangedDuringCall {
                path: self.display(resolved),
                component: name.to_string_lossy().into_owned(),
            };
        }
        ConfinementError::Filesystem {
            path: self.display(resolved),
            source: io::Error::from(errno),
        }
    }

    fn components_of<'p>(&self, resolved: &'p Path) -> Result<Vec<&'p OsStr>, ConfinementError> {
        let relative =
            resolved
                .strip_prefix(&self.root)
                .map_err(|_| ConfinementError::OutsideAbsolute {
                    path: resolved.display().to_string(),
                    root: self.root.display().to_string(),
                })?;
        let mut components = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(name) => components.push(name),
                // `resolve` returns normalized paths; anything else did not come from it.
                _ => {
                    return Err(ConfinementError::ParentEscape {
                        path: resolved.display().to_string(),
                    });
                }
            }
        }
        Ok(components)
    }

    /// Opens the root, then each of `components` relative to the previous one with
    /// `O_DIRECTORY | O_NOFOLLOW`, creating missing ones when asked.
    fn walk_directories(
        &self,
        resolved: &Path,
        components: &[&OsStr],
        missing_parents: MissingParents,
    ) -> Result<OwnedFd, ConfinementError> {
        let directory_flags =
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut directory =
            nix::fcntl::open(&self.root, directory_flags, Mode::empty()).map_err(|errno| {
                ConfinementError::InvalidRoot {
                    root: self.root.display().to_string(),
                    reason: format!("cannot open it: {}", io::Error::from(errno)),
                }
            })?;
        for component in components {
            let opened = match openat(&directory, *component, directory_flags, Mode::empty()) {
                Err(Errno::ENOENT) if missing_parents == MissingParents::Create => {
                    match mkdirat(&directory, *component, Mode::from_bits_truncate(0o755)) {
                        // Another call may have created it in between; that is fine.
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(errno) => {
                            return Err(ConfinementError::Filesystem {
                                path: self.display(resolved),
                                source: io::Error::from(errno),
                            });
                        }
                    }
                    openat(&directory, *component, directory_flags, Mode::empty())
                }
                other => other,
            };
            directory =
                opened.map_err(|errno| self.open_error(resolved, &directory, component, errno))?;
        }
        Ok(directory)
    }

    /// Resolves the symlink `link` (whose parent is already real and inside the root) and refuses
    /// it unless it leads to an existing place inside the workspace.
    fn follow_symlink(&self, user_path: &str, link: &Path) -> Result<PathBuf, ConfinementError> {
        let link_shown = self.display(link);
        match std::fs::canonicalize(link) {
            Ok(real) => {
                if is_under_proc(&real) {
                    return Err(ConfinementError::ThroughProc {
                        path: shown(user_path),
                    });
                }
                if !real.starts_with(&self.root) {
                    return Err(ConfinementError::SymlinkOutside {
                        path: shown(user_path),
                        link: link_shown,
                        target: real.display().to_string(),
                    });
                }
                Ok(real)
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                // Dangling: say where it points, and whether that is outside (writing through it
                // would create a file there).
                let target = std::fs::read_link(link).unwrap_or_default();
                let parent = link.parent().unwrap_or(&self.root);
                let lexical_target = normalize_absolute(&parent.join(&target));
                if lexical_target.starts_with(&self.root) {
                    Err(ConfinementError::DanglingSymlink {
                        path: shown(user_path),
                        link: link_shown,
                        target: target.display().to_string(),
                    })
                } else {
                    Err(ConfinementError::SymlinkOutside {
                        path: shown(user_path),
                        link: link_shown,
                        target: lexical_target.display().to_string(),
                    })
                }
            }
            Err(source) => Err(ConfinementError::Filesystem {
                path: shown(user_path),
                source,
            }),
        }
    }
}

/// The lexical checks of [`Workspace::check_lexically`] for a workspace that may not exist yet
/// (risk assessment must not create directories). `root` is taken as configured, and also in its
/// canonical form when it exists.
pub fn check_path_lexically(root: &Path, user_path: &str) -> Result<PathBuf, ConfinementError> {
    let configured = if root.is_absolute() {
        normalize_absolute(root)
    } else {
        root.to_path_buf()
    };
    let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| configured.clone());
    lexical_relative(user_path, &[&canonical, &configured])
}

/// Normalizes `user_path` to a path relative to the workspace, whose root may be spelt any of the
/// ways in `roots` when the path is absolute.
fn lexical_relative(user_path: &str, roots: &[&Path]) -> Result<PathBuf, ConfinementError> {
    check_text(user_path)?;
    let path = Path::new(user_path);
    if path.is_absolute() {
        let normalized = normalize_absolute(path);
        if is_under_proc(&normalized) {
            return Err(ConfinementError::ThroughProc {
                path: shown(user_path),
            });
        }
        return roots
            .iter()
            .find_map(|root| normalized.strip_prefix(root).ok())
            .map(Path::to_path_buf)
            .ok_or_else(|| ConfinementError::OutsideAbsolute {
                path: shown(user_path),
                root: roots
                    .first()
                    .map(|root| root.display().to_string())
                    .unwrap_or_default(),
            });
    }
    let mut relative = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => relative.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !relative.pop() {
                    return Err(ConfinementError::ParentEscape {
                        path: shown(user_path),
                    });
                }
            }
            // A relative path has neither a root nor a prefix on Unix.
            Component::RootDir | Component::Prefix(_) => {
                return Err(ConfinementError::WindowsPath {
                    path: shown(user_path),
                });
            }
        }
    }
    Ok(relative)
}

/// The checks on the text alone.
fn check_text(user_path: &str) -> Result<(), ConfinementError> {
    if user_path.trim().is_empty() {
        return Err(ConfinementError::Empty);
    }
    if user_path.contains('\0') {
        return Err(ConfinementError::NulByte {
            path: shown(user_path),
        });
    }
    if looks_like_windows_path(user_path) {
        return Err(ConfinementError::WindowsPath {
            path: shown(user_path),
        });
    }
    if user_path.len() > MAX_PATH_BYTES {
        return Err(ConfinementError::TooLong {
            path: shown(user_path),
            reason: format!("{} bytes, the limit is {MAX_PATH_BYTES}", user_path.len()),
        });
    }
    if let Some(name) = user_path
        .split('/')
        .find(|name| name.len() > MAX_NAME_BYTES)
    {
        return Err(ConfinementError::TooLong {
            path: shown(user_path),
            reason: format!(
                "one name is {} bytes, the limit is {MAX_NAME_BYTES}",
                name.len()
            ),
        });
    }
    Ok(())
}

/// `C:\x`, `C:/x`, `\\server\share`, or any backslash: on Unix a backslash is a legal file-name
/// character, but a model writing one almost always means a Windows separator.
fn looks_like_windows_path(user_path: &str) -> bool {
    let bytes = user_path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    drive || user_path.contains('\\')
}

fn is_under_proc(path: &Path) -> bool {
    path.starts_with("/proc")
}

/// Removes `.` and resolves `..` lexically in an absolute path (`..` at the root stays there).
fn normalize_absolute(path: &Path) -> PathBuf {
    let mut normalized = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(name) => normalized.push(name),
            Component::ParentDir => {
                normalized.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    normalized
}

fn is_symlink_at(directory: &OwnedFd, name: &OsStr) -> Result<bool, Errno> {
    let status: FileStat = fstatat(directory, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
    Ok(SFlag::from_bits_truncate(status.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK)
}

/// A user path for messages: control characters escaped, cut to a readable length.
fn shown(user_path: &str) -> String {
    const SHOWN_CHARS: usize = 200;
    let mut text = String::new();
    for (count, character) in user_path.chars().enumerate() {
        if count == SHOWN_CHARS {
            text.push('…');
            break;
        }
        if character.is_control() {
            text.extend(character.escape_default());
        } else {
            text.push(character);
        }
    }
    text
}

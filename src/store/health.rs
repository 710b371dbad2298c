//! The store's one health, told truthfully: whether writes commit, and if not, why and where.
//!
//! The writer thread is the only one that sets it: a failed `BEGIN`/`COMMIT` makes it
//! [`State::Degraded`] (the cause read from SQLite's error and the file system), free space below
//! `[store] hold_free` makes it [`State::Holding`] (the writer refuses whole batches itself,
//! before SQLite fails, so every writer holds at once), and a probe commit that succeeds (the
//! writer probes on a short timer while not healthy, so recovery needs no traffic) makes it
//! [`State::Healthy`] again. Everyone else reads it: `/readyz`, Studio's Overview, `/metrics`,
//! `doctor`, and the Store actor, which turns each change into a runtime event.
//!
//! Invariant: one log line per change of state or cause (warn on entering, info on leaving),
//! never one per failed batch; the counters say how many batches failed.
//!
//! Free space is read with `statvfs` on the data directory, at most every [`SPACE_EVERY`].

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::ErrorCode;
use tokio::sync::watch;

/// How long a free-space reading is reused before `statvfs` is asked again.
pub const SPACE_EVERY: Duration = Duration::from_millis(250);

/// Whether writes commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Writes commit.
    Healthy,
    /// SQLite failed to begin or commit a write; callers get its error.
    Degraded,
    /// Free space is below the hold watermark; the writer refuses writes before SQLite fails.
    Holding,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Healthy => "healthy",
            State::Degraded => "degraded",
            State::Holding => "holding",
        }
    }
}

/// Why writes do not commit, in the words an operator acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    DiskFull,
    ReadOnly,
    Io,
    /// Permission denied on `path`: its owner's uid and mode, and the daemon's uid.
    PermissionDenied {
        owner: u32,
        mode: u32,
        daemon_uid: u32,
    },
    Corrupt,
    TooManyFiles,
    Other,
}

impl Cause {
    /// A short word for metrics and JSON (`disk_full`, `read_only`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            Cause::DiskFull => "disk_full",
            Cause::ReadOnly => "read_only",
            Cause::Io => "io_error",
            Cause::PermissionDenied { .. } => "permission_denied",
            Cause::Corrupt => "corrupt",
            Cause::TooManyFiles => "too_many_open_files",
            Cause::Other => "other",
        }
    }
}

/// A cause, the file or directory it concerns, and SQLite's (or the OS's) own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trouble {
    pub cause: Cause,
    pub path: PathBuf,
    pub detail: String,
}

impl Trouble {
    /// One sentence: what happened, where, and what to do ("database: disk full at
    /// /var/lib/clawvisor — free space to resume").
    pub fn sentence(&self) -> String {
        let path = self.path.display();
        match &self.cause {
            Cause::DiskFull => format!("database: disk full at {path} — free space to resume"),
            Cause::ReadOnly => format!(
                "database: read-only file system at {path} — make it writable (remount read-write) to resume"
            ),
            Cause::Io => format!(
                "database: I/O error writing {path} — check the disk (the kernel log says more); writes resume by themselves when it answers"
            ),
            Cause::PermissionDenied {
                owner,
                mode,
                daemon_uid,
            } => format!(
                "database: permission denied at {path} (owner uid {owner}, mode {mode:o}; the daemon runs as uid {daemon_uid}) — give the daemon's user write access"
            ),
            Cause::Corrupt => format!(
                "database: {path} is corrupt — restore a backup with the daemon stopped (`clawvisor restore`)"
            ),
            Cause::TooManyFiles => format!(
                "database: too many open files to use {path} — raise the daemon's file limit (LimitNOFILE)"
            ),
            Cause::Other => format!("database: cannot write {path}: {}", self.detail),
        }
    }

    /// Whether a person must act (a restart cannot fix it): boot exits 78 on these.
    pub fn needs_a_person(&self) -> bool {
        !matches!(self.cause, Cause::Other)
    }
}

/// Free space in the data directory, and the watermarks it is held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Space {
    /// Bytes available to the daemon; `None` when `statvfs` failed.
    pub free: Option<u64>,
    /// Warn below this.
    pub min_free: u64,
    /// Hold writes below this (0: never).
    pub hold_free: u64,
}

impl Space {
    /// Free space is known and below the warning watermark.
    pub fn low(&self) -> bool {
        self.free.is_some_and(|free| free < self.min_free)
    }

    /// Free space is known and below the hold watermark.
    pub fn below_hold(&self) -> bool {
        self.free.is_some_and(|free| free < self.hold_free)
    }
}

/// What every reader of the store's health sees.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub state: State,
    /// Set unless healthy.
    pub trouble: Option<Trouble>,
    /// When the current state began (ms since the epoch).
    pub since_ms: i64,
    pub directory: PathBuf,
    pub space: Space,
    /// Write batches that failed or were refused since the daemon started.
    pub failed_writes: u64,
    /// The last WAL checkpoint's failure, as a sentence; `None` when it ran.
    pub checkpoint_problem: Option<String>,
}

impl Report {
    /// The sentence `/readyz`, the log and the banner show; `None` when healthy.
    pub fn sentence(&self) -> Option<String> {
        let trouble = self.trouble.as_ref()?;
        let mut sentence = trouble.sentence();
        if self.state == State::Holding
            && let Some(free) = self.space.free
        {
            sentence.push_str(&format!(
                " ({} free; writes hold below {})",
                human(free),
                human(self.space.hold_free)
            ));
        }
        Some(sentence)
    }

    /// A warning that does not stop writes (free space below `min_free`, a checkpoint that
    /// cannot run); `None` when there is nothing to warn about.
    pub fn warning(&self) -> Option<String> {
        let mut warnings = Vec::new();
        if self.state == State::Healthy && self.space.low() {
            warnings.push(format!(
                "database: only {} free at {} (warns below {}, holds writes below {}) — free space soon",
                human(self.space.free.unwrap_or(0)),
                self.directory.display(),
                human(self.space.min_free),
                human(self.space.hold_free)
            ));
        }
        warnings.extend(self.checkpoint_problem.clone());
        (!warnings.is_empty()).then(|| warnings.join("; "))
    }
}

/// Bytes in the largest unit that keeps one decimal (`7.5 MiB`).
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The health cell the writer sets and everyone reads; changes are published on a watch.
pub struct Health {
    current: Mutex<Report>,
    changes: watch::Sender<Report>,
    failed_writes: AtomicU64,
    space_read: Mutex<Option<(Instant, Option<u64>)>>,
    /// The low-space warning was logged (and its end not yet).
    warned_low: AtomicBool,
}

impl Health {
    pub fn new(directory: PathBuf, min_free: u64, hold_free: u64) -> Health {
        let report = Report {
            state: State::Healthy,
            trouble: None,
            since_ms: crate::clock::now_ms(),
            directory,
            space: Space {
                free: None,
                min_free,
                hold_free,
            },
            failed_writes: 0,
            checkpoint_problem: None,
        };
        let (changes, _) = watch::channel(report.clone());
        Health {
            current: Mutex::new(report),
            changes,
            failed_writes: AtomicU64::new(0),
            space_read: Mutex::new(None),
            warned_low: AtomicBool::new(false),
        }
    }

    /// The health now (free space as last read).
    pub fn report(&self) -> Report {
        let mut report = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        report.failed_writes = self.failed_writes.load(Ordering::Relaxed);
        report
    }

    /// Each change of state, cause or warning, as it happens.
    pub fn subscribe(&self) -> watch::Receiver<Report> {
        self.changes.subscribe()
    }

    /// Free space, read again when the last reading is older than [`SPACE_EVERY`]. Logs once
    /// when it crosses the warning watermark either way.
    pub fn space(&self) -> Space {
        let mut read = self.space_read.lock().unwrap_or_else(|p| p.into_inner());
        let free = match *read {
            Some((at, free)) if at.elapsed() < SPACE_EVERY => free,
            _ => {
                let free = free_bytes(&self.directory());
                *read = Some((Instant::now(), free));
                free
            }
        };
        drop(read);
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.space.free = free;
        let space = current.space;
        // Below the hold watermark the writer's own line speaks; this one is for "low".
        let warn = space.low() && !space.below_hold() && current.state == State::Healthy;
        let warned = self.warned_low.load(Ordering::Relaxed);
        if warn && !warned {
            self.warned_low.store(true, Ordering::Relaxed);
            let report = current.clone();
            drop(current);
            if let Some(warning) = report.warning() {
                tracing::warn!("{warning}");
            }
            self.changes.send_replace(report);
        } else if !space.low() && warned {
            self.warned_low.store(false, Ordering::Relaxed);
            let report = current.clone();
            drop(current);
            tracing::info!(
                free = %human(space.free.unwrap_or(0)),
                "database: free space is above the warning watermark again"
            );
            self.changes.send_replace(report);
        }
        space
    }

    /// The state alone (cheap: the writer asks before each wait).
    pub fn state(&self) -> State {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).state
    }

    /// The data directory whose free space is watched.
    pub fn directory(&self) -> PathBuf {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .directory
            .clone()
    }

    /// A write failed or was refused (`counted`: a caller's batch, not the writer's own probe):
    /// the state set, logged only when the state began or its cause changed.
    pub fn failed(&self, state: State, trouble: Trouble, counted: bool) {
        if counted {
            self.failed_writes.fetch_add(1, Ordering::Relaxed);
        }
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let same_cause = current
            .trouble
            .as_ref()
            .is_some_and(|known| known.cause == trouble.cause && known.path == trouble.path);
        if current.state != State::Healthy && same_cause {
            if current.state != state {
                // Holding and degraded for the same cause: the same trouble, told once.
                current.state = state;
                self.changes.send_replace(current.clone());
            }
            return;
        }
        let entering = current.state == State::Healthy;
        current.state = state;
        current.trouble = Some(trouble);
        current.since_ms = crate::clock::now_ms();
        let mut report = current.clone();
        drop(current);
        report.failed_writes = self.failed_writes.load(Ordering::Relaxed);
        let sentence = report.sentence().unwrap_or_default();
        let detail = report
            .trouble
            .as_ref()
            .map(|trouble| trouble.detail.clone())
            .unwrap_or_default();
        if entering {
            tracing::warn!(
                state = state.as_str(),
                %detail,
                "{sentence}; writes wait until a probe commit succeeds"
            );
        } else {
            tracing::warn!(state = state.as_str(), %detail, "{sentence} (the cause changed)");
        }
        self.changes.send_replace(report);
    }

    /// A commit succeeded: healthy again (logged once when that is a change).
    pub fn committed(&self) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.state == State::Healthy {
            return;
        }
        let since = current.since_ms;
        let was = current.trouble.take();
        current.state = State::Healthy;
        current.since_ms = crate::clock::now_ms();
        let mut report = current.clone();
        drop(current);
        report.failed_writes = self.failed_writes.load(Ordering::Relaxed);
        let seconds = (report.since_ms - since).max(0) as f64 / 1000.0;
        let cause = was.map(|trouble| trouble.cause.as_str()).unwrap_or("other");
        tracing::info!(
            was = cause,
            failed_writes = report.failed_writes,
            "database: writes commit again after {seconds:.1} s; the daemon resumes"
        );
        self.changes.send_replace(report);
    }

    /// The last WAL checkpoint's outcome: a problem is logged once, its end once.
    pub fn checkpoint(&self, problem: Option<String>) {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if current.checkpoint_problem == problem {
            return;
        }
        match &problem {
            Some(problem) => tracing::warn!("{problem}"),
            None => tracing::info!("database: the WAL checkpoint runs again"),
        }
        current.checkpoint_problem = problem;
        let report = current.clone();
        drop(current);
        self.changes.send_replace(report);
    }
}

/// Bytes available to an unprivileged writer in `directory`'s file system.
pub fn free_bytes(directory: &Path) -> Option<u64> {
    let stats = nix::sys::statvfs::statvfs(directory).ok()?;
    Some((stats.blocks_available() as u64).saturating_mul(stats.fragment_size() as u64))
}

/// Reads why a write (or opening) failed: SQLite's code, then the file system itself (a
/// read-only mount, no space, no permission), since SQLite reports several of these as a plain
/// I/O error. `file` is the database file.
pub fn diagnose(error: &rusqlite::Error, file: &Path) -> Trouble {
    let directory = file
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let detail = error.to_string();
    let code = match error {
        rusqlite::Error::SqliteFailure(failure, _) => Some(failure.code),
        _ => None,
    };
    let trouble = |cause: Cause, path: &Path| Trouble {
        cause,
        path: path.to_path_buf(),
        detail: detail.clone(),
    };
    if matches!(
        code,
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    ) {
        return trouble(Cause::Corrupt, file);
    }
    // The kernel's own answer to a write here (an ext4 turned read-only after an error says
    // EROFS, yet its mount flags still say read-write).
    match write_check(&directory) {
        Some(nix::libc::EROFS) => return trouble(Cause::ReadOnly, &directory),
        Some(nix::libc::ENOSPC | nix::libc::EDQUOT) => return trouble(Cause::DiskFull, &directory),
        Some(nix::libc::EMFILE | nix::libc::ENFILE) => return trouble(Cause::TooManyFiles, file),
        _ => {}
    }
    if read_only_mount(&directory) {
        return trouble(Cause::ReadOnly, &directory);
    }
    if code == Some(ErrorCode::DiskFull) || free_bytes(&directory) == Some(0) {
        return trouble(Cause::DiskFull, &directory);
    }
    if let Some((path, cause)) = permission_denied(file, &directory) {
        return trouble(cause, &path);
    }
    if code == Some(ErrorCode::CannotOpen) && out_of_descriptors() {
        return trouble(Cause::TooManyFiles, file);
    }
    match code {
        Some(ErrorCode::ReadOnly) => trouble(Cause::ReadOnly, &directory),
        Some(ErrorCode::SystemIoFailure) => trouble(Cause::Io, file),
        _ => trouble(Cause::Other, file),
    }
}

/// What the file system says about writing the database `file` now, without writing (for
/// `doctor`): a read-only mount, no space left, no permission. `None` when nothing is wrong.
pub fn check_file_system(file: &Path) -> Option<Trouble> {
    let directory = file
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let trouble = |cause: Cause, path: PathBuf, detail: &str| Trouble {
        cause,
        path,
        detail: detail.to_string(),
    };
    if read_only_mount(&directory) {
        return Some(trouble(Cause::ReadOnly, directory, "mounted read-only"));
    }
    if free_bytes(&directory) == Some(0) {
        return Some(trouble(Cause::DiskFull, directory, "no space left"));
    }
    permission_denied(file, &directory)
        .map(|(path, cause)| trouble(cause, path, "permission denied"))
}

/// Creates and removes an empty file in `directory`: the OS error number when that fails.
/// (Only after a write failed, to say why.)
fn write_check(directory: &Path) -> Option<i32> {
    let check = directory.join(".clawvisor-write-check");
    match std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&check)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&check);
            None
        }
        Err(error) => error.raw_os_error(),
    }
}

fn read_only_mount(directory: &Path) -> bool {
    nix::sys::statvfs::statvfs(directory).is_ok_and(|stats| {
        stats
            .flags()
            .contains(nix::sys::statvfs::FsFlags::ST_RDONLY)
    })
}

/// The first of the directory, the file and its WAL companions the daemon cannot write, with its
/// owner and mode. (Root passes every permission check, so this never names a path for root.)
fn permission_denied(file: &Path, directory: &Path) -> Option<(PathBuf, Cause)> {
    use nix::unistd::{AccessFlags, access};
    let mut candidates = vec![directory.to_path_buf(), file.to_path_buf()];
    for suffix in ["-wal", "-shm"] {
        let mut name = file.as_os_str().to_owned();
        name.push(suffix);
        candidates.push(PathBuf::from(name));
    }
    let daemon_uid = nix::unistd::geteuid().as_raw();
    candidates.into_iter().find_map(|path| {
        let metadata = std::fs::metadata(&path).ok()?;
        let denied = access(&path, AccessFlags::W_OK) == Err(nix::errno::Errno::EACCES);
        denied.then(|| {
            let cause = Cause::PermissionDenied {
                owner: metadata.uid(),
                mode: metadata.mode() & 0o7777,
                daemon_uid,
            };
            (path, cause)
        })
    })
}

/// Whether the process is at its file-descriptor limit (opening `/dev/null` says EMFILE).
fn out_of_descriptors() -> bool {
    matches!(
        std::fs::File::open("/dev/null"),
        Err(error) if error.raw_os_error() == Some(nix::libc::EMFILE)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trouble_reads_as_what_happened_where_and_what_to_do() {
        let trouble = Trouble {
            cause: Cause::DiskFull,
            path: PathBuf::from("/var/lib/clawvisor"),
            detail: "database or disk is full".into(),
        };
        assert_eq!(
            trouble.sentence(),
            "database: disk full at /var/lib/clawvisor — free space to resume"
        );
        let denied = Trouble {
            cause: Cause::PermissionDenied {
                owner: 0,
                mode: 0o755,
                daemon_uid: 1000,
            },
            ..trouble
        };
        assert!(denied.sentence().contains("owner uid 0, mode 755"));
    }

    #[test]
    fn one_change_is_one_report_and_recovery_is_another() {
        let health = Health::new(PathBuf::from("/tmp"), 64 << 20, 8 << 20);
        let mut changes = health.subscribe();
        let full = Trouble {
            cause: Cause::DiskFull,
            path: PathBuf::from("/tmp"),
            detail: String::new(),
        };
        health.failed(State::Degraded, full.clone(), true);
        health.failed(State::Degraded, full.clone(), true);
        health.failed(State::Holding, full, false);
        assert!(changes.has_changed().unwrap());
        let report = changes.borrow_and_update().clone();
        assert_eq!(report.state, State::Holding);
        assert_eq!(health.report().failed_writes, 2);
        assert!(report.sentence().unwrap().contains("disk full at /tmp"));
        health.committed();
        assert_eq!(changes.borrow_and_update().state, State::Healthy);
        health.committed();
        assert!(!changes.has_changed().unwrap());
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(8 << 20), "8.0 MiB");
    }
}

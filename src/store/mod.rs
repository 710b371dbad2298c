//! SQLite storage: one writer, a few readers, typed queries per area.
//!
//! [`Store`] is a cloneable handle. Writes are closures sent to one dedicated writer thread that
//! owns the only read-write connection; it groups whatever jobs are queued into one
//! `BEGIN IMMEDIATE` transaction (each job inside its own savepoint, so a failing job rolls back
//! alone) and answers every job only after `COMMIT` returned. Reads run on a small pool of
//! read-only connections on tokio's blocking pool (WAL lets them run beside the writer).
//!
//! Files: the writer thread (`writer.rs`), migrations (`migrate.rs`), and one query module per
//! area: `events` (runtime events, boots), `sessions`, `runs` (runs, steps, costs, agent
//! settings), `outbox` (replies awaiting delivery), `telegram`, `people` (owner, paired and
//! blocked people, claim codes), `approvals`, `schedules`, `memory`, `handoff`, `mcp`, `studio`
//! and `timezones` (each person's chosen zone, daemon-wide). A row's status (and an approval's
//! risk level) is an enum stored as its exact word (`stored_text.rs`). [`running_boot`] (and
//! [`running_daemon`], its process id) is the one answer to "does a daemon run on this
//! database?" for `jobs`, `mcp`, `reload` and `restore`.
//!
//! Architecture Invariant: `store` knows nothing about Telegram, HTTP or actors. The query
//! modules take a `&Connection` and plain domain values; callers compose them inside one
//! `write` closure when several rows must change together.
//!
//! Architecture Invariant: a write's result is delivered after its transaction is durable
//! (`synchronous = FULL` by default), never before. Callers may confirm things to the outside
//! world (a Telegram offset, an approval callback) as soon as `write` returns `Ok`. The one
//! exception is [`Store::write_recoverable`], for rows the daemon rebuilds from durable ones: it
//! is durable with the next durable commit, and nothing outside may be told of it before.

pub mod health;
mod migrate;
pub(crate) mod stored_text;
mod writer;

pub mod approvals;
pub mod channels;
pub mod events;
pub mod handoff;
pub mod mcp;
pub mod memory;
pub mod outbox;
pub mod people;
pub mod runs;
pub mod schedules;
pub mod sessions;
pub mod studio;
pub mod telegram;
pub mod timezones;
pub mod triggers;
pub mod workspace;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

pub use migrate::{MigrationReport, latest_version, migrate, schema_version};

pub use writer::Checkpointed;
use writer::{Job, WriteJob, WriterContext};

/// Errors from the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error(
        "the database at {path} has schema version {db_version}, newer than this binary knows ({binary_version}); \
         run a newer clawvisor or restore a backup — refusing to touch it"
    )]
    NewerSchema {
        path: String,
        db_version: u32,
        binary_version: u32,
    },
    #[error("migration {version} ({name}) failed: {source}")]
    Migration {
        version: u32,
        name: String,
        source: rusqlite::Error,
    },
    #[error("migration file {0} is misnamed: expected NNNN_description.sql")]
    MigrationName(String),
    #[error("cannot use data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    #[error("the database writer is not running (the daemon is starting or stopping)")]
    WriterGone,
    /// Free space is below `[store] hold_free`: the writer refused the write before SQLite
    /// could fail it (the sentence says where and what to do).
    #[error("{0}")]
    Holding(String),
    /// The database could not be opened or migrated, for a reason read from the file system.
    #[error("cannot open the database {file}: {reason} ({detail})")]
    Unusable {
        file: String,
        /// What is wrong and what to do, naming the path.
        reason: String,
        /// SQLite's own words.
        detail: String,
        /// A person must fix it (read-only, permissions, no space, corrupt, file limit).
        needs_a_person: bool,
    },
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
}

impl StoreError {
    /// True when SQLite reported the database busy/locked (another process holds it).
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(error, _))
                if matches!(error.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        )
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// How hard SQLite syncs a commit to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronous {
    /// fsync on every commit: a committed write survives a power cut.
    Full,
    /// fsync at checkpoints only: survives a process crash, may lose the last commits on power loss.
    Normal,
}

#[derive(Debug, Clone)]
pub struct StoreOptions {
    pub busy_timeout: Duration,
    pub synchronous: Synchronous,
    pub max_readers: usize,
    /// Free space in the data directory below which the store warns.
    pub min_free: u64,
    /// Free space below which the writer refuses writes itself (0: never).
    pub hold_free: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(5),
            synchronous: Synchronous::Full,
            max_readers: 4,
            min_free: 64 << 20,
            hold_free: 8 << 20,
        }
    }
}

struct Inner {
    path: PathBuf,
    health: Arc<health::Health>,
    options: StoreOptions,
    writer: RwLock<Option<writer::WriterHandle>>,
    readers: Mutex<Vec<Connection>>,
    /// Async reads in flight, at most `max_readers`: a burst of reads waits here instead of
    /// taking a blocking thread (and opening a connection) each.
    read_turns: Arc<tokio::sync::Semaphore>,
}

/// The handle to the database. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) the database file, applies pending migrations and starts the
    /// writer. Refuses a database whose schema is newer than this binary.
    pub fn open(path: &Path, options: StoreOptions) -> Result<Store> {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::DataDir {
                path: parent.display().to_string(),
                source,
            })?;
        }
        let directory = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let health = Arc::new(health::Health::new(
            directory,
            options.min_free,
            options.hold_free,
        ));
        let store = Store {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                health,
                writer: RwLock::new(None),
                readers: Mutex::new(Vec::new()),
                read_turns: Arc::new(tokio::sync::Semaphore::new(options.max_readers.max(1))),
                options,
            }),
        };
        store.start_writer()?;
        Ok(store)
    }

    /// The database file in a data directory ([`crate::config::DATABASE_FILE`]).
    pub fn path_in(data_dir: &Path) -> PathBuf {
        data_dir.join(crate::config::DATABASE_FILE)
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether writes commit, and if not why and where, with free space against the watermarks
    /// (read again if the last reading is older than a quarter second).
    pub fn health(&self) -> health::Report {
        self.inner.health.space();
        self.inner.health.report()
    }

    /// Whether writes commit now (the state alone: no file-system call). What a sender asks
    /// before it sends something whose delivery it must record.
    pub fn writes_commit(&self) -> bool {
        self.inner.health.state() == health::State::Healthy
    }

    /// Each change of the store's health as it happens (the Store actor turns them into events).
    pub fn subscribe_health(&self) -> tokio::sync::watch::Receiver<health::Report> {
        self.inner.health.subscribe()
    }

    /// Opens the read-write connection, migrates, and starts the writer thread (if not running).
    pub fn start_writer(&self) -> Result<()> {
        let mut slot = self.inner.writer.write().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|handle| handle.is_alive()) {
            return Ok(());
        }
        let path = &self.inner.path;
        let mut conn = open_writer_connection(path, &self.inner.options)
            .map_err(|error| unusable(error, path))?;
        migrate::migrate(&mut conn, path).map_err(|error| unusable(error, path))?;
        let context = WriterContext {
            health: self.inner.health.clone(),
            file: path.clone(),
        };
        *slot = Some(writer::WriterHandle::spawn(conn, context));
        Ok(())
    }

    /// Stops the writer after it has committed every job already queued.
    pub fn stop_writer(&self) {
        let handle = self
            .inner
            .writer
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(handle) = handle {
            handle.shutdown();
        }
        self.inner
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    pub fn writer_alive(&self) -> bool {
        self.inner
            .writer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|handle| handle.is_alive())
    }

    /// Runs the job `make` builds until it commits, for records that must not be dropped while
    /// the store holds or cannot commit (a run's end with its answer): a failure of the store
    /// itself (holding, a failed commit, busy) is retried, 100 ms doubling to 1 s, while the
    /// caller waits; a failure of the job's own (a missing row) is returned. `what` names the
    /// record in the one warning logged.
    pub async fn write_until_committed<T, F>(&self, what: &str, make: impl Fn() -> F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.until_committed(what, || self.write(make())).await
    }

    /// [`Store::write_until_committed`] for a record [`Store::write_recoverable`] may write
    /// without its own fsync (a run's model call): a run waits for the store instead of failing
    /// because another process held the database for a moment.
    pub async fn write_recoverable_until_committed<T, F>(
        &self,
        what: &str,
        make: impl Fn() -> F,
    ) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        self.until_committed(what, || self.write_recoverable(make()))
            .await
    }

    /// Repeats `attempt` while the store itself fails (see [`Store::write_until_committed`]).
    async fn until_committed<T, Fut>(&self, what: &str, attempt: impl Fn() -> Fut) -> Result<T>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut wait = Duration::from_millis(100);
        let mut warned = false;
        loop {
            let error = match attempt().await {
                Ok(value) => {
                    if warned {
                        tracing::info!("{what}: recorded now");
                    }
                    return Ok(value);
                }
                Err(error) => error,
            };
            let the_store_failed =
                matches!(error, StoreError::Holding(_)) || error.is_busy() || !self.writes_commit();
            if !the_store_failed {
                return Err(error);
            }
            if !warned {
                tracing::warn!(%error, "{what}: the database cannot record it now; it waits and is retried until it lands");
                warned = true;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
        }
    }

    /// Runs `job` in the writer's transaction. The result arrives after the commit.
    pub async fn write<T, F>(&self, job: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(Box::new(WriteJob::new(job, reply)))?;
        answer.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Runs `job` like [`Store::write`], but its commit is not synced to disk on its own: it
    /// becomes durable with the next durable commit (every write's but this one's) or
    /// checkpoint. For rows the daemon rebuilds from durable ones when a power cut loses them —
    /// an update's dispatch status, a user message copied into its transcript, a run's claim,
    /// the record of a model call, runtime events — never for anything that is confirmed to the
    /// outside world or precedes an effect there (an offset, a reply, a tool call, the audit
    /// log). Saves one fsync (milliseconds, tens of them on a busy disk) on a reply's path.
    pub async fn write_recoverable<T, F>(&self, job: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(Box::new(WriteJob::new(job, reply).recoverable()))?;
        answer.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Same as [`Store::write`] for callers outside async code (CLI, tests of the writer).
    pub fn write_blocking<T, F>(&self, job: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(Box::new(WriteJob::new(job, reply)))?;
        answer.blocking_recv().map_err(|_| StoreError::WriterGone)?
    }

    fn submit(&self, job: Box<dyn Job>) -> Result<()> {
        let slot = self.inner.writer.read().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            Some(handle) => handle.submit(job),
            None => Err(StoreError::WriterGone),
        }
    }

    /// Runs `query` on a read-only connection from the pool, on tokio's blocking pool.
    pub async fn read<T, F>(&self, query: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let store = self.clone();
        // Never closed (nothing calls `close`), so acquiring only waits; the turn is held until
        // the blocking read is over, even when the caller stops waiting for it.
        let turn = self.inner.read_turns.clone().acquire_owned().await.ok();
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            store.read_blocking(query)
        })
        .await
        .map_err(|error| {
            StoreError::Invalid(format!("a database read did not complete: {error}"))
        })?
    }

    /// Runs `query` on a read-only connection in the current thread.
    pub fn read_blocking<T, F>(&self, query: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        let conn = self.take_reader()?;
        let result = query(&conn);
        let mut pool = self.inner.readers.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < self.inner.options.max_readers {
            pool.push(conn);
        }
        result
    }

    fn take_reader(&self) -> Result<Connection> {
        if let Some(conn) = self
            .inner
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
        {
            return Ok(conn);
        }
        let conn = Connection::open_with_flags(
            &self.inner.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI,
        )?;
        conn.busy_timeout(self.inner.options.busy_timeout)?;
        Ok(conn)
    }

    /// Closes the idle read connections (each holds its own page cache, parsed schema and
    /// statements; the next read opens one again in about a millisecond). Called with the periodic
    /// checkpoint, so an idle daemon holds no reader memory.
    pub fn close_idle_readers(&self) -> usize {
        let idle =
            std::mem::take(&mut *self.inner.readers.lock().unwrap_or_else(|p| p.into_inner()));
        idle.len()
    }

    /// `PRAGMA integrity_check`: `Ok(vec!["ok"])` when the file is sound.
    pub async fn integrity_check(&self) -> Result<Vec<String>> {
        self.read(|conn| {
            let mut statement = conn.prepare("PRAGMA integrity_check")?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Folds the WAL back into the database file, on the writer thread outside any transaction
    /// (a periodic background job of the Store actor). A checkpoint that cannot run is reported
    /// in the store's health and logged once.
    pub async fn checkpoint(&self) -> Result<Checkpointed> {
        let (reply, answer) = oneshot::channel();
        {
            let slot = self.inner.writer.read().unwrap_or_else(|p| p.into_inner());
            match slot.as_ref() {
                Some(handle) => handle.checkpoint(reply)?,
                None => return Err(StoreError::WriterGone),
            }
        }
        answer.await.map_err(|_| StoreError::WriterGone)?
    }
}

/// An error opening or migrating the database, with the reason read from the file system
/// (read-only mount, permissions with owner and mode, no space, corrupt file, file limit).
fn unusable(error: StoreError, file: &Path) -> StoreError {
    let sqlite = match &error {
        StoreError::Sqlite(sqlite) | StoreError::Migration { source: sqlite, .. } => sqlite,
        _ => return error,
    };
    let trouble = health::diagnose(sqlite, file);
    if !trouble.needs_a_person() {
        return error;
    }
    StoreError::Unusable {
        file: file.display().to_string(),
        reason: format!(
            "{}, then start clawvisor again",
            trouble
                .sentence()
                .trim_start_matches("database: ")
                .trim_end_matches(" to resume")
        ),
        detail: error.to_string(),
        needs_a_person: true,
    }
}

fn open_writer_connection(path: &Path, options: &StoreOptions) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(options.busy_timeout)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let synchronous = match options.synchronous {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

/// Opens a database only to read its schema version (doctor, migrate --status).
pub fn peek_version(path: &Path) -> Result<u32> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    schema_version(&conn)
}

/// Runs `query` on a read-only connection, without migrating the database or starting a writer
/// (operator commands asking whether a daemon runs on it).
pub fn peek<T>(path: &Path, query: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    query(&conn)
}

/// The pid of a process that runs on the database at `path`, if one does, whatever its kind
/// (a daemon or `clawvisor chat`): what `restore` refuses to write behind. See [`running_boot`].
pub fn running_daemon(path: &Path) -> Result<Option<u32>> {
    Ok(running_boot(path)?.map(|boot| boot.pid))
}

/// The process that runs on the database at `path`, if one does: a boot without a recorded stop
/// (`daemon_boots`) whose process is alive, is not the caller, and has the database open (or,
/// where its open files cannot be seen, is named `clawvisor*`; where not even that can be seen, it
/// is taken as running, since writing behind a running daemon's back is the worse mistake). A
/// crashed daemon's row whose pid now belongs to another program does not count. A running
/// `serve` is preferred to a running `chat` ([`events::BootKind`]): only a `serve` has an API to
/// call and a scheduler to keep in step with, so operator commands (`jobs`, `mcp`, `reload`) go
/// through the API of a `serve` and work on the files beside a `chat`.
pub fn running_boot(path: &Path) -> Result<Option<events::UnstoppedBoot>> {
    if !path.is_file() {
        return Ok(None);
    }
    let boots = peek(path, events::unstopped_boots)?;
    let database = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let live: Vec<events::UnstoppedBoot> = boots
        .into_iter()
        .filter(|boot| is_daemon_of(boot.pid, &database))
        .collect();
    Ok(live
        .iter()
        .find(|boot| boot.kind == events::BootKind::Serve)
        .or(live.first())
        .copied())
}

fn is_daemon_of(pid: u32, database: &Path) -> bool {
    if pid == std::process::id() {
        return false;
    }
    let Some(raw) = i32::try_from(pid).ok().filter(|raw| *raw > 1) else {
        return false;
    };
    let alive = match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        // It exists but belongs to someone else: still a process.
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    };
    if !alive {
        return false;
    }
    if let Ok(descriptors) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        return descriptors
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| std::fs::read_link(entry.path()).ok())
            .any(|target| target == database);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(name) => name.trim().starts_with("clawvisor"),
        Err(_) => true,
    }
}

impl From<&crate::config::Config> for StoreOptions {
    fn from(config: &crate::config::Config) -> Self {
        StoreOptions {
            busy_timeout: config.store.busy_timeout.0,
            synchronous: match config.store.synchronous {
                crate::config::SyncMode::Full => Synchronous::Full,
                crate::config::SyncMode::Normal => Synchronous::Normal,
            },
            max_readers: 4,
            min_free: config.store.min_free.0,
            hold_free: config.store.hold_free.0,
        }
    }
}

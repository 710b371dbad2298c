//! The writer thread: the only place where the read-write connection is used.
//!
//! Jobs queue on a std channel. The thread takes whatever is queued (up to `MAX_BATCH`), runs the
//! jobs in one `BEGIN IMMEDIATE` transaction, each inside a savepoint, commits, and only then
//! answers each job. A job that returns an error or panics is rolled back to its savepoint and
//! answered with its error; the others commit. If the commit itself fails (disk full, I/O error)
//! every job of the batch is answered with that error and nothing of the batch is kept.
//!
//! The store's health (`health.rs`) is set here: a failed `BEGIN` or `COMMIT` degrades it (the
//! cause diagnosed once, logged once per change), free space below the hold watermark refuses the
//! whole batch before SQLite is asked (`StoreError::Holding`), and while not healthy the thread
//! wakes every `PROBE_EVERY` to commit one probe row, so it recovers without traffic. WAL
//! checkpoints run on this thread outside any transaction (`Command::Checkpoint`).
//!
//! A batch made only of recoverable jobs (`Store::write_recoverable`) commits with
//! `synchronous = NORMAL`: no sync of its own; the WAL's next sync — the next durable batch's, or
//! a checkpoint's — makes it durable with everything before it. A power cut can so lose only a
//! tail of recoverable commits after the last durable one: a state the daemon was in earlier, and
//! recovers from as after a crash there.
//!
//! The audit log's seal lives on this thread: its key is loaded (or created) before the first job,
//! and after each commit that appended audit rows the head outside the database is advanced
//! (`crate::audit`).

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::oneshot;

use super::health::{Cause, Health, State, Trouble, diagnose, human};
use super::{Result, StoreError};

const MAX_BATCH: usize = 128;

/// What the writer does with a job once it ran: deliver the result after the commit.
pub(super) trait Delivery: Send {
    fn deliver(self: Box<Self>, commit: Result<()>);
}

pub(super) trait Job: Send {
    /// Runs the job; `true` when it succeeded (its savepoint is released, not rolled back).
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Delivery>);
    /// Whether the job's commit must be synced to disk before it is answered (`Store::write`);
    /// false for `Store::write_recoverable`.
    fn durable(&self) -> bool {
        true
    }
    /// The job never ran (the transaction could not begin).
    fn fail(self: Box<Self>, error: StoreError);
}

pub(super) struct WriteJob<F, T> {
    job: F,
    reply: oneshot::Sender<Result<T>>,
    durable: bool,
}

impl<F, T> WriteJob<F, T> {
    pub(super) fn new(job: F, reply: oneshot::Sender<Result<T>>) -> Self {
        Self {
            job,
            reply,
            durable: true,
        }
    }

    /// A job whose commit needs no sync of its own (see `Store::write_recoverable`).
    pub(super) fn recoverable(mut self) -> Self {
        self.durable = false;
        self
    }
}

struct Pending<T> {
    result: Result<T>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T: Send + 'static> Delivery for Pending<T> {
    fn deliver(self: Box<Self>, commit: Result<()>) {
        let answer = match commit {
            Ok(()) => self.result,
            Err(error) => Err(error),
        };
        // The caller may have given up waiting; that is not the writer's problem.
        let _ = self.reply.send(answer);
    }
}

impl<F, T> Job for WriteJob<F, T>
where
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) -> (bool, Box<dyn Delivery>) {
        let this = *self;
        let result = (this.job)(conn);
        let ok = result.is_ok();
        (
            ok,
            Box::new(Pending {
                result,
                reply: this.reply,
            }),
        )
    }

    fn fail(self: Box<Self>, error: StoreError) {
        let _ = self.reply.send(Err(error));
    }

    fn durable(&self) -> bool {
        self.durable
    }
}

/// What the writer thread is asked to do.
pub(super) enum Command {
    /// A write job, batched with whatever else is queued.
    Write(Box<dyn Job>),
    /// Fold the WAL back into the database file, outside any transaction.
    Checkpoint(oneshot::Sender<Result<Checkpointed>>),
}

/// What a WAL checkpoint did (`PRAGMA wal_checkpoint(PASSIVE)`'s row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpointed {
    /// Readers or writers kept it from finishing.
    pub busy: bool,
    /// Frames in the WAL.
    pub wal_frames: i64,
    /// Frames folded back into the database.
    pub checkpointed_frames: i64,
}

/// How often the writer probes with a one-row commit while writes fail.
pub(super) const PROBE_EVERY: Duration = Duration::from_millis(500);

pub(super) struct WriterHandle {
    sender: mpsc::Sender<Command>,
    thread: JoinHandle<()>,
}

/// What the writer thread needs besides its connection: the health it sets and the file it
/// writes (named in every trouble).
pub(super) struct WriterContext {
    pub(super) health: Arc<Health>,
    pub(super) file: PathBuf,
}

impl WriterHandle {
    pub(super) fn spawn(conn: Connection, context: WriterContext) -> WriterHandle {
        let (sender, receiver) = mpsc::channel::<Command>();
        // Before `Store::open` returns: whoever reads next finds the key, marker and head in place.
        let seal = crate::audit::prepare_writer_seal(&conn);
        let thread = std::thread::Builder::new()
            .name("clawvisor-db-writer".into())
            .spawn(move || {
                crate::audit::install_writer_seal(seal);
                run(conn, receiver, context)
            })
            .expect("spawning a thread only fails when the OS is out of resources at boot");
        WriterHandle { sender, thread }
    }

    pub(super) fn is_alive(&self) -> bool {
        !self.thread.is_finished()
    }

    pub(super) fn submit(&self, job: Box<dyn Job>) -> Result<()> {
        self.sender
            .send(Command::Write(job))
            .map_err(|_| StoreError::WriterGone)
    }

    pub(super) fn checkpoint(&self, reply: oneshot::Sender<Result<Checkpointed>>) -> Result<()> {
        self.sender
            .send(Command::Checkpoint(reply))
            .map_err(|_| StoreError::WriterGone)
    }

    /// Closes the queue and waits until every queued job is committed and answered.
    pub(super) fn shutdown(self) {
        drop(self.sender);
        let _ = self.thread.join();
    }
}

fn run(conn: Connection, receiver: mpsc::Receiver<Command>, context: WriterContext) {
    // `synchronous = FULL` (2) or more: a batch of recoverable jobs only is committed without
    // the sync; the next durable commit's sync (or a checkpoint) covers it. The configured level
    // is put back after such a batch.
    let configured = conn
        .query_row("PRAGMA synchronous", [], |row| row.get::<_, i64>(0))
        .unwrap_or(2);
    let syncs_each_commit = configured >= 2;
    loop {
        let command = if context.health.state() == State::Healthy {
            match receiver.recv() {
                Ok(command) => command,
                Err(_) => break,
            }
        } else {
            match receiver.recv_timeout(PROBE_EVERY) {
                Ok(command) => command,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    probe(&conn, &context);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        };
        let first = match command {
            Command::Write(job) => job,
            Command::Checkpoint(reply) => {
                let _ = reply.send(checkpoint(&conn, &context));
                continue;
            }
        };
        let mut batch = vec![first];
        let mut checkpoints = Vec::new();
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(Command::Write(job)) => batch.push(job),
                Ok(Command::Checkpoint(reply)) => checkpoints.push(reply),
                Err(_) => break,
            }
        }
        let unsynced = syncs_each_commit && !batch.iter().any(|job| job.durable());
        if unsynced {
            let _ = conn.execute_batch("PRAGMA synchronous = NORMAL");
        }
        run_batch(&conn, batch, &context);
        if unsynced
            && conn
                .execute_batch(&format!("PRAGMA synchronous = {configured}"))
                .is_err()
        {
            tracing::error!("database: could not put back synchronous = {configured}");
        }
        for reply in checkpoints {
            let _ = reply.send(checkpoint(&conn, &context));
        }
    }
    // Leave the WAL small for the next start; failure here is harmless.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

/// Free space below the hold watermark: the trouble to refuse a batch with, before SQLite fails.
fn holding(context: &WriterContext) -> Option<Trouble> {
    let space = context.health.space();
    space.below_hold().then(|| Trouble {
        cause: Cause::DiskFull,
        path: context.health.directory(),
        detail: format!(
            "{} free, below the hold watermark of {}",
            human(space.free.unwrap_or(0)),
            human(space.hold_free)
        ),
    })
}

/// A failure that is the store's (not another process holding the lock a while).
fn store_trouble(error: &rusqlite::Error, context: &WriterContext) -> Option<Trouble> {
    let busy = matches!(
        error,
        rusqlite::Error::SqliteFailure(failure, _)
            if matches!(failure.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    );
    (!busy).then(|| diagnose(error, &context.file))
}

fn run_batch(conn: &Connection, batch: Vec<Box<dyn Job>>, context: &WriterContext) {
    if let Some(trouble) = holding(context) {
        let sentence = trouble.sentence();
        context.health.failed(State::Holding, trouble, true);
        for job in batch {
            job.fail(StoreError::Holding(sentence.clone()));
        }
        return;
    }
    if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
        // One line per change of the store's health (`health.rs`), not one per batch.
        tracing::debug!(error = %error, "database: cannot begin a write transaction");
        match store_trouble(&error, context) {
            Some(trouble) => context.health.failed(State::Degraded, trouble, true),
            None => tracing::warn!(error = %error, "database: cannot begin a write transaction"),
        }
        for job in batch {
            job.fail(StoreError::Sqlite(clone_error(&error)));
        }
        return;
    }
    let mut deliveries = Vec::with_capacity(batch.len());
    for job in batch {
        if let Err(error) = conn.execute_batch("SAVEPOINT job") {
            job.fail(StoreError::Sqlite(error));
            continue;
        }
        match std::panic::catch_unwind(AssertUnwindSafe(|| job.run(conn))) {
            Ok((true, delivery)) => {
                let _ = conn.execute_batch("RELEASE job");
                deliveries.push(delivery);
            }
            Ok((false, delivery)) => {
                let _ = conn.execute_batch("ROLLBACK TO job; RELEASE job");
                // A failed job's own error is what its caller sees, whatever the commit does.
                delivery.deliver(Ok(()));
            }
            Err(_) => {
                // The panic dropped the job and its reply port; the caller sees `WriterGone`.
                tracing::error!("database: a write job panicked; it was rolled back");
                let _ = conn.execute_batch("ROLLBACK TO job; RELEASE job");
            }
        }
    }
    match conn.execute_batch("COMMIT") {
        Ok(()) => {
            // Before the answers: once a write that appended audit rows returns, the head
            // outside the database covers them (a crash in between leaves it one commit behind).
            crate::audit::after_commit(conn);
            // A batch whose jobs changed nothing commits even on a read-only disk: only the
            // probe's row (which always writes) says that writes commit again.
            if context.health.state() != State::Healthy {
                probe(conn, context);
            }
            for delivery in deliveries {
                delivery.deliver(Ok(()));
            }
        }
        Err(error) => {
            // One line per change of the store's health (`health.rs`), not one per batch.
            tracing::debug!(error = %error, "database: commit failed; the batch was rolled back");
            let _ = conn.execute_batch("ROLLBACK");
            crate::audit::after_rollback();
            match store_trouble(&error, context) {
                Some(trouble) => context.health.failed(State::Degraded, trouble, true),
                None => {
                    tracing::warn!(error = %error, "database: commit failed; the batch was rolled back")
                }
            }
            for delivery in deliveries {
                delivery.deliver(Err(StoreError::Sqlite(clone_error(&error))));
            }
        }
    }
}

/// While writes fail: one small commit; the first that lands makes the store healthy again.
fn probe(conn: &Connection, context: &WriterContext) {
    if let Some(trouble) = holding(context) {
        context.health.failed(State::Holding, trouble, false);
        return;
    }
    let written = conn
        .execute_batch("BEGIN IMMEDIATE")
        .and_then(|()| {
            conn.execute(
                "INSERT OR REPLACE INTO store_probe (id, at_ms) VALUES (1, ?1)",
                [crate::clock::now_ms()],
            )
        })
        .and_then(|_| conn.execute_batch("COMMIT"));
    match written {
        Ok(()) => context.health.committed(),
        Err(error) => {
            let _ = conn.execute_batch("ROLLBACK");
            if let Some(trouble) = store_trouble(&error, context) {
                context.health.failed(State::Degraded, trouble, false);
            }
        }
    }
}

/// `PRAGMA wal_checkpoint(PASSIVE)` outside any transaction; a failure is reported in the
/// store's health (one line when it starts failing, one when it runs again).
fn checkpoint(conn: &Connection, context: &WriterContext) -> Result<Checkpointed> {
    let result = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok(Checkpointed {
            busy: row.get::<_, i64>(0)? != 0,
            wal_frames: row.get(1)?,
            checkpointed_frames: row.get(2)?,
        })
    });
    // Between batches the writer needs none of its page cache or cached statements: handing them
    // back keeps an idle daemon's heap to what it holds (the next batch reads its pages from the
    // OS's page cache again, microseconds each).
    conn.flush_prepared_statement_cache();
    let _ = conn.release_memory();
    match result {
        Ok(done) => {
            context.health.checkpoint(None);
            Ok(done)
        }
        Err(error) => {
            let trouble = diagnose(&error, &context.file);
            context.health.checkpoint(Some(format!(
                "database: the WAL checkpoint cannot run ({}); the WAL file grows until it can",
                trouble.sentence().trim_start_matches("database: ")
            )));
            Err(StoreError::Sqlite(error))
        }
    }
}

/// rusqlite errors are not `Clone`; keep the code and message for every recipient.
fn clone_error(error: &rusqlite::Error) -> rusqlite::Error {
    match error {
        rusqlite::Error::SqliteFailure(code, message) => {
            rusqlite::Error::SqliteFailure(*code, message.clone())
        }
        other => rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        ),
    }
}

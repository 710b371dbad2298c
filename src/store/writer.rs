//! The writer thread: the only place where the read-write connection is used.
//!
//! Jobs queue on a std channel. The thread takes whatever is queued (up to `MAX_BATCH`), runs the
//! jobs in one `BEGIN IMMEDIATE` transaction, each inside a savepoint, commits, and only then
//! answers each job. A job that returns an error or panics is rolled back to its savepoint and
//! answered with its error; the others commit. If the commit itself fails (disk full, I/O error)
//! every job of the batch is answered with that error and nothing of the batch is kept.
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
use std::sync::mpsc;
use std::thread::JoinHandle;

use rusqlite::Connection;
use tokio::sync::oneshot;

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

pub(super) struct WriterHandle {
    sender: mpsc::Sender<Box<dyn Job>>,
    thread: JoinHandle<()>,
}

impl WriterHandle {
    pub(super) fn spawn(conn: Connection) -> WriterHandle {
        let (sender, receiver) = mpsc::channel::<Box<dyn Job>>();
        // Before `Store::open` returns: whoever reads next finds the key, marker and head in place.
        let seal = crate::audit::prepare_writer_seal(&conn);
        let thread = std::thread::Builder::new()
            .name("clawvisor-db-writer".into())
            .spawn(move || {
                crate::audit::install_writer_seal(seal);
                run(conn, receiver)
            })
            .expect("spawning a thread only fails when the OS is out of resources at boot");
        WriterHandle { sender, thread }
    }

    pub(super) fn is_alive(&self) -> bool {
        !self.thread.is_finished()
    }

    pub(super) fn submit(&self, job: Box<dyn Job>) -> Result<()> {
        self.sender.send(job).map_err(|_| StoreError::WriterGone)
    }

    /// Closes the queue and waits until every queued job is committed and answered.
    pub(super) fn shutdown(self) {
        drop(self.sender);
        let _ = self.thread.join();
    }
}

fn run(conn: Connection, receiver: mpsc::Receiver<Box<dyn Job>>) {
    // `synchronous = FULL` (2) or more: a batch of recoverable jobs only is committed without
    // the sync; the next durable commit's sync (or a checkpoint) covers it.
    let syncs_each_commit = conn
        .query_row("PRAGMA synchronous", [], |row| row.get::<_, i64>(0))
        .is_ok_and(|level| level >= 2);
    while let Ok(first) = receiver.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let unsynced = syncs_each_commit && !batch.iter().any(|job| job.durable());
        if unsynced {
            let _ = conn.execute_batch("PRAGMA synchronous = NORMAL");
        }
        run_batch(&conn, batch);
        if unsynced && conn.execute_batch("PRAGMA synchronous = FULL").is_err() {
            tracing::error!("database: could not restore synchronous = FULL");
        }
    }
    // Leave the WAL small for the next start; failure here is harmless.
    let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
}

fn run_batch(conn: &Connection, batch: Vec<Box<dyn Job>>) {
    if let Err(error) = conn.execute_batch("BEGIN IMMEDIATE") {
        let text = error.to_string();
        tracing::error!(error = %text, "database: cannot begin a write transaction");
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
            for delivery in deliveries {
                delivery.deliver(Ok(()));
            }
        }
        Err(error) => {
            tracing::error!(error = %error, "database: commit failed; the batch was rolled back");
            let _ = conn.execute_batch("ROLLBACK");
            crate::audit::after_rollback();
            for delivery in deliveries {
                delivery.deliver(Err(StoreError::Sqlite(clone_error(&error))));
            }
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

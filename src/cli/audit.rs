//! `clawvisor audit verify | rekey | export`: the tamper-evident audit log, checked, re-keyed by
//! the operator, or written out.
//!
//! Invariants: `verify` and `export` open the database read-only and never start the writer, so
//! they write nothing (no key, no head, no migration, no repair); `rekey` is the only command
//! that replaces the anchors, only with `--confirm`, and only while no daemon runs on the data
//! directory (its writer would keep signing with the old key).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::config::LoadedConfig;

use super::AuditCommand;

/// How long a read waits for a running daemon's write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) async fn run(loaded: &LoadedConfig, command: AuditCommand) -> ExitCode {
    let path = loaded.config.db_path();
    if !path.exists() {
        eprintln!(
            "no database at {} yet (start the daemon once)",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    match command {
        AuditCommand::Verify => blocking(move || verify(&path)).await,
        AuditCommand::Rekey { confirm, by } => rekey(path, confirm, by).await,
        AuditCommand::Export { out } => blocking(move || export(&path, out)).await,
    }
}

/// Runs `job` off the runtime (SQLite and the files block).
async fn blocking(job: impl FnOnce() -> ExitCode + Send + 'static) -> ExitCode {
    tokio::task::spawn_blocking(job)
        .await
        .unwrap_or(ExitCode::FAILURE)
}

/// A read-only connection: nothing it does can change the database.
fn open_read_only(path: &std::path::Path) -> Result<Connection, ExitCode> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|error| {
        eprintln!("cannot open {} to read it: {error}", path.display());
        ExitCode::FAILURE
    })?;
    // Only fails on an out-of-range value.
    let _ = conn.busy_timeout(BUSY_TIMEOUT);
    Ok(conn)
}

/// Prints the whole chain's report; fails when it is broken.
fn verify(path: &std::path::Path) -> ExitCode {
    let conn = match open_read_only(path) {
        Ok(conn) => conn,
        Err(code) => return code,
    };
    match crate::audit::verify_report(&conn, None) {
        Ok(report) => {
            report.lines().iter().for_each(|line| println!("{line}"));
            match report.verification {
                crate::audit::Verification::Valid { .. } => ExitCode::SUCCESS,
                crate::audit::Verification::Broken { reason, .. } => {
                    if !reason.contains("audit rekey --confirm") {
                        println!(
                            "Restore clawvisor.db, audit.key and audit.head together from your latest backup; or, if you know why they changed, run `clawvisor audit rekey --confirm`."
                        );
                    }
                    ExitCode::FAILURE
                }
            }
        }
        Err(error) => {
            eprintln!("cannot read the audit log: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Re-keys the log (see `audit::rekey`) once the operator confirmed and no daemon runs.
async fn rekey(path: PathBuf, confirm: bool, by: Option<String>) -> ExitCode {
    if !confirm {
        println!(
            "Nothing was changed. Re-keying accepts the audit log as it is now: it writes a new audit.key and audit.head and records what it found, and who re-keyed, as a row of the log. Restoring from a backup is the better fix when the files were lost by accident. What `clawvisor audit verify` finds now:"
        );
        // Broken or not, the answer is the same: nothing was done.
        let _ = blocking(move || verify(&path)).await;
        println!("To re-key anyway, run `clawvisor audit rekey --confirm`.");
        return ExitCode::from(2);
    }
    // Any daemon on this data directory (`serve` or `chat`) keeps signing with the old key.
    let running = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || crate::store::running_boot(&path)).await
    };
    match running {
        Ok(Ok(None)) => {}
        Ok(Ok(Some(boot))) => {
            eprintln!(
                "A daemon (pid {}) runs on this data directory: stop it first, then re-key (it would keep signing with the old key). Nothing was changed.",
                boot.pid
            );
            return ExitCode::FAILURE;
        }
        Ok(Err(error)) => {
            eprintln!("cannot tell whether a daemon runs on this data directory: {error}");
            return ExitCode::FAILURE;
        }
        Err(_) => return ExitCode::FAILURE,
    }
    let by = by.unwrap_or_else(account);
    blocking(move || {
        let mut conn = match Connection::open(&path) {
            Ok(conn) => conn,
            Err(error) => {
                eprintln!("cannot open {}: {error}", path.display());
                return ExitCode::FAILURE;
            }
        };
        let _ = conn.busy_timeout(BUSY_TIMEOUT);
        match crate::audit::rekey(&mut conn, &by) {
            Ok(outcome) => {
                println!(
                    "Re-keyed: row {} records what was found and that {by} re-keyed; a new audit.key and audit.head are in place.",
                    outcome.row
                );
                for moved in &outcome.moved {
                    println!("  the old file was moved to {}", moved.display());
                }
                println!("What was found before re-keying:");
                outcome
                    .found
                    .iter()
                    .for_each(|line| println!("  {line}"));
                drop(conn);
                verify(&path)
            }
            Err(problem) => {
                eprintln!("The audit log was not re-keyed: {problem}");
                ExitCode::FAILURE
            }
        }
    })
    .await
}

/// The account running the command, as the re-key row names it.
fn account() -> String {
    let uid = nix::unistd::getuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(user)) => format!("{} (uid {uid}) on the command line", user.name),
        _ => format!("uid {uid} on the command line"),
    }
}

/// Writes every entry as JSON Lines to `out` (or stdout).
fn export(path: &std::path::Path, out: Option<PathBuf>) -> ExitCode {
    let conn = match open_read_only(path) {
        Ok(conn) => conn,
        Err(code) => return code,
    };
    let mut sink: Box<dyn std::io::Write> = match &out {
        Some(path) => match std::fs::File::create(path) {
            Ok(file) => Box::new(file),
            Err(error) => {
                eprintln!("export failed: cannot create {}: {error}", path.display());
                return ExitCode::FAILURE;
            }
        },
        None => Box::new(std::io::stdout()),
    };
    match crate::audit::export_jsonl(&conn, &mut sink) {
        Ok(count) => {
            eprintln!("exported {count} entries");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("export failed: {error}");
            ExitCode::FAILURE
        }
    }
}

//! `clawvisor serve`: runs the daemon until SIGINT/SIGTERM; SIGHUP reloads the files. Its exit
//! code is the daemon's (`daemon`: 0, 78 or 1).
//!
//! Background job: the release of the binary's unused pages and the heap's free pages
//! (`resident`), 20 s after start and then every 6 h (owner: `serve`; no table; the task is
//! aborted when the daemon stops and runs again after the next start; it gives up, with one log
//! line, where the release is not possible; idempotent: only read-only, never-written mappings of
//! the executable are unmapped, and they fault back unchanged).

use std::process::ExitCode;

use crate::config::{LoadedConfig, Overrides};
use crate::daemon;

pub(super) async fn run(loaded: LoadedConfig, overrides: Overrides) -> ExitCode {
    let releasing = tokio::spawn(release_binary_pages());
    let outcome = daemon::serve(loaded, overrides, daemon::shutdown_signal()).await;
    releasing.abort();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("clawvisor: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

/// Keeps the idle daemon's resident set to the code it runs (`resident`).
async fn release_binary_pages() {
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + crate::resident::RELEASE_AFTER_START,
        crate::resident::RELEASE_EVERY,
    );
    loop {
        ticks.tick().await;
        let trimmed = crate::resident::trim_heap();
        tracing::debug!(trimmed, "gave the heap's free pages back");
        match crate::resident::release_binary_pages() {
            Ok(released) => tracing::debug!(
                mappings = released.mappings,
                resident_kib = released.resident_kib,
                "released the binary's unused pages"
            ),
            Err(error) => {
                tracing::info!(%error, "cannot release the binary's unused pages; memory use stays higher");
                return;
            }
        }
    }
}

//! `clawvisor serve`: runs the daemon until SIGINT/SIGTERM; SIGHUP reloads the files. Its exit
//! code is the daemon's (`daemon`: 0, 78 or 1).
//!
//! Once Studio listens it tells the operator, in up to three lines, what a first run wrote
//! (`init.rs`: a `serve` with no config at all writes the starter files first), where Studio is
//! and how to get in, and what to do next. To a terminal the lines are printed plainly, with a
//! one-time login link; without one (a service manager, whose stdout is the journal) they are
//! logged at info, without the link — a link in the journal would outlive the boot and be
//! readable by whoever reads the logs (`clawvisor studio-link` prints one on demand).
//!
//! Background job: the release of the binary's unused pages and the heap's free pages
//! (`resident`), 20 s after start and then every 6 h (owner: `serve`; no table; the task is
//! aborted when the daemon stops and runs again after the next start; it gives up, with one log
//! line, where the release is not possible; idempotent: only read-only, never-written mappings of
//! the executable are unmapped, and they fault back unchanged).

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use crate::config::{LoadedConfig, Overrides};
use crate::daemon::{self, Daemon, DaemonError};

use super::init::{Written, next_step};

/// How long `serve` waits for Studio to listen before it says where Studio is.
const STUDIO_LISTENS_WITHIN: Duration = Duration::from_secs(10);

pub(super) async fn run(
    loaded: LoadedConfig,
    overrides: Overrides,
    first_run: Option<Written>,
) -> ExitCode {
    let releasing = tokio::spawn(release_binary_pages());
    let outcome = serve(loaded, overrides, first_run).await;
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

async fn serve(
    loaded: LoadedConfig,
    overrides: Overrides,
    first_run: Option<Written>,
) -> Result<(), DaemonError> {
    // Registered before the daemon starts: a SIGTERM during boot stops it cleanly.
    let shutdown = daemon::shutdown_signal();
    let serving = daemon::start_serving(loaded, overrides).await?;
    tell_the_operator(&serving.daemon, first_run.as_ref()).await;
    serving.wait(shutdown).await
}

/// The first-run line, where Studio is and how to get in, and what to do next (see the header).
async fn tell_the_operator(daemon: &Daemon, first_run: Option<&Written>) {
    let loaded = &daemon.config;
    let terminal = std::io::stdout().is_terminal();
    let mut lines = Vec::new();
    if let Some(written) = first_run {
        lines.push(format!(
            "First run: wrote {}",
            written.describe(&loaded.config.data_dir)
        ));
    }
    match daemon.studio_addr(STUDIO_LISTENS_WITHIN).await {
        Some(addr) => {
            let base = crate::studio::access::base_url(&loaded.config.studio.public_url, addr);
            lines.push(if terminal {
                studio_login_line(daemon, &base).await
            } else {
                format!(
                    "Studio is at {base}: run `clawvisor studio-link` on the server to get a \
                     login link."
                )
            });
        }
        None if loaded.config.studio_addr().port() != 0 => lines.push(
            "Studio is not listening yet; `clawvisor studio-link` prints a login link later."
                .to_string(),
        ),
        None => {}
    }
    lines.push(format!("Next: {}", next_step(loaded)));
    if terminal {
        // One write, so that no log line lands between them.
        let text = format!("\n{}\n\n", lines.join("\n"));
        if let Err(error) = std::io::stdout().lock().write_all(text.as_bytes()) {
            tracing::warn!(%error, "could not print the Studio lines");
        }
    } else {
        for line in &lines {
            tracing::info!("{line}");
        }
    }
}

/// "Studio is at ...: log in with <link>", with a fresh one-time link.
async fn studio_login_line(daemon: &Daemon, base: &str) -> String {
    match crate::studio::access::login_link(&daemon.store, base, "boot").await {
        Ok(link) => format!(
            "Studio is at {base}: log in with {link} (works once, for 15 minutes; \
             `clawvisor studio-link` prints another)."
        ),
        Err(error) => {
            tracing::warn!(%error, "could not create a Studio login link");
            format!(
                "Studio is at {base}: run `clawvisor studio-link` to get a login link (one could \
                 not be made now: {error})."
            )
        }
    }
}

/// Keeps the idle daemon's resident set to the code it runs (`resident`).
pub(super) async fn release_binary_pages() {
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

//! `clawvisor serve`: runs the daemon until SIGINT/SIGTERM.

use std::process::ExitCode;

use crate::config::LoadedConfig;
use crate::daemon;

pub(super) async fn run(loaded: LoadedConfig) -> ExitCode {
    match daemon::run(loaded, daemon::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("clawvisor: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

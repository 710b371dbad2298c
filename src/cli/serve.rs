//! `clawvisor serve`: runs the daemon until SIGINT/SIGTERM; SIGHUP reloads the files.

use std::process::ExitCode;

use crate::config::{LoadedConfig, Overrides};
use crate::daemon;

pub(super) async fn run(loaded: LoadedConfig, overrides: Overrides) -> ExitCode {
    match daemon::serve(loaded, overrides, daemon::shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("clawvisor: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

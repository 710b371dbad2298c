//! `clawvisor reload`: asks the running daemon to re-read its config and agent files (the same as
//! SIGHUP and Studio's button), through Studio's API with the local access token
//! (`<data_dir>/studio.token`), and prints the report. Exits 0 when the files were applied, 78
//! (configuration error) when they were refused (nothing changed), 1 when they were applied only
//! in part or no report came (then the outcome is unknown: the reload may still be applying).

use std::process::ExitCode;
use std::time::Duration;

use super::daemon_link::{self, Daemon};
use crate::config::LoadedConfig;
use crate::daemon::EXIT_CONFIG;

/// A reload restarts actors one by one; the daemon answers when all are done, or says after
/// `protocol::reload::TIMEOUT` that the outcome is unknown. The CLI waits longer than that.
const RELOAD_TIMEOUT: Duration =
    Duration::from_secs(crate::protocol::reload::TIMEOUT.as_secs() + 30);

pub(super) async fn run(loaded: &LoadedConfig) -> ExitCode {
    let api = match daemon_link::find(loaded).await {
        Ok(Daemon::Running(api)) => api,
        Ok(Daemon::Stopped) => {
            eprintln!(
                "no daemon runs on this data directory: the files are read when `clawvisor serve` starts"
            );
            return ExitCode::FAILURE;
        }
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    let body = match api
        .post_with_timeout("/api/v1/reload", serde_json::json!({}), RELOAD_TIMEOUT)
        .await
    {
        Ok(body) => body,
        Err(error) => {
            eprintln!(
                "no reload report from the daemon: {error}\nIf the request reached it, the reload may still be applying: its report will be in the daemon's log (`journalctl -u clawvisor`) and Studio's events."
            );
            return ExitCode::FAILURE;
        }
    };
    println!("{}", body["summary"].as_str().unwrap_or("reloaded"));
    if body["ok"].as_bool() == Some(true) {
        ExitCode::SUCCESS
    } else if body["partial"].as_bool() == Some(true) {
        // Applied in part: not a configuration error; the summary names what failed.
        ExitCode::FAILURE
    } else {
        ExitCode::from(EXIT_CONFIG)
    }
}

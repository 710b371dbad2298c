//! `clawvisor migrate [--status]`: applies pending schema migrations, or prints the versions.

use std::process::ExitCode;

use crate::config::LoadedConfig;
use crate::daemon;
use crate::store::{self, Store};

pub(super) async fn run(loaded: &LoadedConfig, status_only: bool) -> ExitCode {
    let path = loaded.config.db_path();
    let latest = store::latest_version();
    if status_only {
        let current = if path.exists() {
            store::peek_version(&path).ok()
        } else {
            None
        };
        match current {
            Some(version) => println!(
                "database {}: schema {version}; binary knows {latest}",
                path.display()
            ),
            None => println!(
                "database {}: not created yet; binary knows {latest}",
                path.display()
            ),
        }
        return ExitCode::SUCCESS;
    }
    let before = if path.exists() {
        store::peek_version(&path).unwrap_or(0)
    } else {
        0
    };
    let options = crate::store::StoreOptions::from(&loaded.config);
    let opened = tokio::task::spawn_blocking(move || {
        let store = Store::open(&path, options)?;
        store.stop_writer();
        Ok::<_, store::StoreError>(())
    })
    .await;
    match opened {
        Ok(Ok(())) => {
            println!(
                "migrated {} from schema {before} to {latest}",
                loaded.config.db_path().display()
            );
            ExitCode::SUCCESS
        }
        Ok(Err(error)) => {
            eprintln!("migrate: {error}");
            ExitCode::from(daemon::DaemonError::Store(error).exit_code())
        }
        Err(_) => ExitCode::FAILURE,
    }
}

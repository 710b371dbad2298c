//! `clawvisor backup <file>` and `clawvisor restore <file>`: the data directory as one archive,
//! and back (see `backup` for the format and its invariants).
//!
//! `backup` only reads, so it runs beside a daemon, and leaves the secrets store out unless
//! `--include-secrets`; `restore` refuses a data directory a daemon
//! has open (or one it cannot tell), a non-empty one without `--force`, and an archive whose
//! audit chain does not verify without `--accept-broken-audit`.

use std::path::Path;
use std::process::ExitCode;

use crate::backup::{BackupError, BackupOptions, RestoreOptions, create_backup_with, restore_with};
use crate::config::LoadedConfig;

/// `clawvisor backup <file> [--include-secrets]`: the secrets store goes in only when asked.
pub(super) async fn backup(loaded: &LoadedConfig, file: &Path, include_secrets: bool) -> ExitCode {
    let data_dir = loaded.config.data_dir.clone();
    let destination = file.to_path_buf();
    let options = BackupOptions { include_secrets };
    let stored = crate::config::secrets_file::path(&data_dir).is_file();
    let result =
        tokio::task::spawn_blocking(move || create_backup_with(&data_dir, &destination, options))
            .await;
    match result {
        Ok(Ok(report)) => {
            println!(
                "wrote {} ({} entries, {} bytes of data, {} bytes compressed) in {:.2} s",
                report.path.display(),
                report.entries.len() + 1,
                report.content_bytes(),
                report.archive_bytes,
                report.duration.as_secs_f64()
            );
            println!("database schema version {}", report.schema_version);
            for entry in &report.entries {
                println!("  {:>12}  {}", entry.size, entry.path);
            }
            for skipped in &report.skipped {
                println!("  skipped: {skipped}");
            }
            if include_secrets && stored {
                println!(
                    "the archive holds the keys and tokens kept by Studio ({}): keep it as safe as they are",
                    crate::backup::SECRETS_ENTRY
                );
            } else if stored {
                println!(
                    "not archived: the keys and tokens kept by Studio ({}); add --include-secrets to take them",
                    crate::backup::SECRETS_ENTRY
                );
            }
            ExitCode::SUCCESS
        }
        Ok(Err(error)) => failed("backup", &error),
        Err(_) => ExitCode::FAILURE,
    }
}

pub(super) async fn restore_command(
    loaded: &LoadedConfig,
    file: &Path,
    options: RestoreOptions,
) -> ExitCode {
    let data_dir = loaded.config.data_dir.clone();
    let archive = file.to_path_buf();
    let result =
        tokio::task::spawn_blocking(move || restore_with(&archive, &data_dir, options)).await;
    match result {
        Ok(Ok(report)) => {
            let manifest = &report.manifest;
            println!(
                "restored {} entries into {} (archive of {} on {}, made by clawvisor {}, schema \
                 version {})",
                manifest.entries.len(),
                report.data_dir.display(),
                manifest.source.data_dir,
                manifest.source.host,
                manifest.clawvisor_version,
                manifest.schema_version
            );
            println!("integrity_check: {}", report.integrity.join("; "));
            for line in &report.audit {
                println!("{line}");
            }
            if let Some(replaced) = &report.replaced {
                println!(
                    "the previous data directory was moved to {}",
                    replaced.display()
                );
            }
            for warning in &report.warnings {
                eprintln!("warning: {warning}");
            }
            if !report.audit_valid {
                // Only reached with --accept-broken-audit: the operator chose to keep it.
                eprintln!(
                    "warning: the restored audit chain does not verify (see above); it was put in \
                     place because --accept-broken-audit was given"
                );
            }
            ExitCode::SUCCESS
        }
        Ok(Err(error)) => failed("restore", &error),
        Err(_) => ExitCode::FAILURE,
    }
}

fn failed(what: &str, error: &BackupError) -> ExitCode {
    eprintln!("{what} failed: {error}");
    ExitCode::FAILURE
}

//! Scheduled backups: when (`every <duration>` or a crontab line, in the daemon's zone), where
//! archives go (`dir`, relative to the data directory), how many are kept (`keep`), and one
//! scheduled run: first remove what killed backups left there (`.clawvisor-backup-*` scratch
//! directories, `*.partial`; only when no running backup holds their `flock` and they are over a
//! minute old), then archive `clawvisor-<UTC stamp>.tar.gz`, prune beyond `keep`, and record the
//! run in `backups`. Pruning touches only names in exactly that stamp format: archives made by
//! hand into the same directory are never pruned.
//!
//! An interval is anchored at midnight of 2000-01-01 in the daemon's zone, so the next run is a
//! pure function of the time and the config: the actor that runs backups and Studio, which shows
//! the next run, compute the same instant without talking to each other.

use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;

use super::BackupError;
use crate::schedule::Recurrence;

/// Scheduled archives are named `clawvisor-<UTC stamp>.tar.gz`, so names sort by time.
const ARCHIVE_PREFIX: &str = "clawvisor-";
const ARCHIVE_SUFFIX: &str = ".tar.gz";
/// The stamp in a scheduled archive's name (UTC, milliseconds).
const STAMP_FORMAT: &str = "%Y%m%dT%H%M%S%.3fZ";

/// Everything a scheduled backup needs, built once from the config.
#[derive(Debug, Clone)]
pub struct BackupPlan {
    /// The configured text (empty: no scheduled backups).
    pub schedule_text: String,
    pub schedule: Option<Recurrence>,
    pub data_dir: PathBuf,
    pub dir: PathBuf,
    pub keep: u32,
    pub zone: Tz,
}

impl BackupPlan {
    pub fn from_config(loaded: &crate::config::LoadedConfig) -> BackupPlan {
        let config = &loaded.config;
        let zone = loaded.timezone.zone;
        BackupPlan {
            schedule_text: config.backup.schedule.trim().to_string(),
            // Validated at load time; an unparsable one (impossible) means no schedule.
            schedule: (!config.backup.schedule.trim().is_empty())
                .then(|| Recurrence::parse(&config.backup.schedule, zone).ok())
                .flatten(),
            data_dir: config.data_dir.clone(),
            dir: config.backup.directory(&config.data_dir),
            keep: config.backup.keep.max(1),
            zone,
        }
    }

    pub fn next_run(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedule.as_ref()?.next_after(now)
    }

    /// Removes what interrupted backups left in the archive directory, backs up into it, then
    /// prunes scheduled archives beyond `keep`.
    pub fn run_once(
        &self,
        now_ms: i64,
    ) -> Result<(super::BackupReport, Vec<PathBuf>), BackupError> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|error| BackupError::io("create", &self.dir, error))?;
        for leftover in super::sweep_leftovers(&self.dir) {
            tracing::info!(
                path = %leftover.display(),
                "removed what an interrupted backup left behind"
            );
        }
        let report = super::create_backup(&self.data_dir, &self.dir.join(archive_name(now_ms)))?;
        let pruned = prune(&self.dir, self.keep)?;
        Ok((report, pruned))
    }
}

/// `clawvisor-20261126T134500Z.tar.gz` (with milliseconds when two would collide).
pub fn archive_name(at_ms: i64) -> String {
    let at = Utc
        .timestamp_millis_opt(at_ms)
        .single()
        .unwrap_or_else(Utc::now);
    format!(
        "{ARCHIVE_PREFIX}{}{ARCHIVE_SUFFIX}",
        at.format(STAMP_FORMAT)
    )
}

/// Whether `name` is one the scheduler wrote: exactly `archive_name` of some instant. Archives
/// the operator made by hand into the same directory (`clawvisor-before-upgrade.tar.gz`) are
/// neither listed nor pruned.
pub fn is_scheduled_archive_name(name: &str) -> bool {
    name.strip_prefix(ARCHIVE_PREFIX)
        .and_then(|rest| rest.strip_suffix(ARCHIVE_SUFFIX))
        .and_then(|stamp| chrono::NaiveDateTime::parse_from_str(stamp, STAMP_FORMAT).ok())
        .is_some_and(|at| archive_name(at.and_utc().timestamp_millis()) == name)
}

/// The scheduled archives in `dir`, oldest first, with their sizes.
pub fn list_archives(dir: &Path) -> Vec<(String, u64)> {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut archives: Vec<(String, u64)> = listing
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let metadata = entry.metadata().ok()?;
            (is_scheduled_archive_name(&name) && metadata.is_file())
                .then_some((name, metadata.len()))
        })
        .collect();
    archives.sort();
    archives
}

/// Deletes the oldest scheduled archives beyond `keep` (never a file whose name the scheduler
/// did not make); returns what it deleted.
pub fn prune(dir: &Path, keep: u32) -> Result<Vec<PathBuf>, BackupError> {
    let archives = list_archives(dir);
    let excess = archives.len().saturating_sub(keep.max(1) as usize);
    let mut deleted = Vec::new();
    for (name, _) in archives.into_iter().take(excess) {
        let path = dir.join(name);
        std::fs::remove_file(&path).map_err(|error| BackupError::io("delete", &path, error))?;
        deleted.push(path);
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_the_newest_archives_and_ignores_other_files() {
        let dir = tempfile::tempdir().unwrap();
        for at in [1_000_000_i64, 2_000_000, 3_000_000] {
            std::fs::write(dir.path().join(archive_name(at)), b"x").unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), b"keep me").unwrap();
        // Archives the operator made by hand, older-looking than every scheduled one.
        let manual = [
            "clawvisor-before-upgrade.tar.gz",
            "clawvisor-2020.tar.gz",
            "clawvisor-20200101T000000Z.tar.gz",
            "clawvisor-20200101T000000.000Z-copy.tar.gz",
        ];
        for name in manual {
            std::fs::write(dir.path().join(name), b"mine").unwrap();
        }
        assert!(is_scheduled_archive_name(&archive_name(1_000_000)));
        let deleted = prune(dir.path(), 2).unwrap();
        assert_eq!(deleted, vec![dir.path().join(archive_name(1_000_000))]);
        let left: Vec<String> = list_archives(dir.path())
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(left, vec![archive_name(2_000_000), archive_name(3_000_000)]);
        assert!(dir.path().join("notes.txt").exists());
        for name in manual {
            assert!(dir.path().join(name).exists(), "{name} was pruned");
        }
        // Even with one kept, a hand-made archive is never taken.
        prune(dir.path(), 1).unwrap();
        for name in manual {
            assert!(dir.path().join(name).exists(), "{name} was pruned");
        }
    }
}

//! `[backup]`: scheduled backups of the data directory (`clawvisor backup` works without it).
//!
//! ```toml
//! [backup]
//! schedule = "every 6h"   # or a crontab line, "30 3 * * *", in the daemon's time zone
//! dir = "/srv/backups/clawvisor"   # relative: to the data directory
//! keep = 7                # archives kept; older ones are deleted after each backup
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ConfigError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackupConfig {
    /// `every <duration>` or a five-field crontab line; empty: no scheduled backups.
    pub schedule: String,
    /// Where archives go (default `backups` in the data directory: better another disk).
    pub dir: PathBuf,
    /// How many scheduled archives to keep (at least 1).
    pub keep: u32,
}

impl Default for BackupConfig {
    fn default() -> Self {
        Self {
            schedule: String::new(),
            dir: PathBuf::from("backups"),
            keep: 7,
        }
    }
}

impl BackupConfig {
    /// The archive directory: `dir`, relative to the data directory unless absolute.
    pub fn directory(&self, data_dir: &Path) -> PathBuf {
        data_dir.join(&self.dir)
    }

    pub(super) fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        if self.keep == 0 {
            return Err(ConfigError::key(
                origin,
                "[backup].keep",
                "must be at least 1 (the newest archive is always kept)",
            ));
        }
        if !self.schedule.trim().is_empty() {
            crate::schedule::Recurrence::parse(&self.schedule, chrono_tz::UTC)
                .map_err(|message| ConfigError::key(origin, "[backup].schedule", message))?;
        }
        Ok(())
    }
}

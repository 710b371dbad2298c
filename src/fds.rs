//! How many more files this process may open: its open file descriptors against its soft
//! `RLIMIT_NOFILE`, read from `/proc/self` (Linux).
//!
//! Used where a part would otherwise take the last descriptors and leave none for what must keep
//! working (a bot going online must leave room for Studio, `/readyz`, the database and replies).
//! Invariant: reading costs one descriptor for a moment; when even that fails for lack of
//! descriptors the answer is "none free", never a guess.

use std::io;

/// Open descriptors and the soft limit on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Headroom {
    pub open: u64,
    /// The soft limit (`u64::MAX` when unlimited).
    pub limit: u64,
}

impl Headroom {
    /// How many more descriptors may be opened.
    pub fn free(&self) -> u64 {
        self.limit.saturating_sub(self.open)
    }
}

/// This process's headroom now. `Err` of kind `NotFound` where `/proc` is not there (not Linux):
/// the caller cannot know and should go ahead.
pub fn headroom() -> io::Result<Headroom> {
    let limits = std::fs::read_to_string("/proc/self/limits")?;
    let limit = soft_nofile(&limits)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no `Max open files` line"))?;
    // The directory's own descriptor is open while it is listed.
    let open = std::fs::read_dir("/proc/self/fd")?
        .count()
        .saturating_sub(1) as u64;
    Ok(Headroom { open, limit })
}

/// The soft limit of the `Max open files` line of `/proc/<pid>/limits`.
fn soft_nofile(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    if soft == "unlimited" {
        return Some(u64::MAX);
    }
    soft.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_read_from_the_limits_table() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             127442               127442               processes \n\
                      Max open files            22                   524288               files     \n";
        assert_eq!(soft_nofile(limits), Some(22));
        assert_eq!(
            soft_nofile(
                "Max open files            unlimited            unlimited            files"
            ),
            Some(u64::MAX)
        );
        assert_eq!(soft_nofile("Max processes 1 1 processes"), None);
    }

    #[test]
    fn this_process_has_some_headroom() {
        let headroom = headroom().expect("/proc is there on Linux");
        assert!(headroom.open >= 3, "{headroom:?}");
        assert!(headroom.free() > 0, "{headroom:?}");
    }
}

//! A small tmpfs mounted over a test's directory, for storage faults: a disk that fills, a file
//! system remounted read-only. Mounting needs root (CI runs as root); where it is not permitted,
//! `Tmpfs::mount` says why and the test prints that reason and skips.
//!
//! The mount is lazily unmounted when the value drops, so a failing test leaves nothing behind.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted at `path` (unmounted on drop).
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` reads it: `6m`, `64m`) over `path`,
    /// creating the directory first. `Err` carries the reason it is not available here.
    pub fn mount(path: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(path).map_err(|error| format!("{}: {error}", path.display()))?;
        let option = format!("size={size}");
        mount_command(&["-t", "tmpfs", "-o", &option, "tmpfs"], path)?;
        Ok(Tmpfs {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remounts the file system read-only: every write after this fails with EROFS. Linux
    /// refuses it (EBUSY) while any file on it is open for writing, so it serves a daemon that
    /// boots on a read-only mount, not one already running there (`tests/store_health.rs` turns a
    /// loop-mounted ext4 read-only under a running daemon instead).
    pub fn remount_read_only(&self) -> Result<(), String> {
        mount_command(&["-o", "remount,ro"], &self.path)
    }

    /// Makes the file system writable again.
    pub fn remount_read_write(&self) -> Result<(), String> {
        mount_command(&["-o", "remount,rw"], &self.path)
    }

    /// Fills the file system to the last byte with a file named `name`; removing that file
    /// gives the space back. Returns the file's path.
    pub fn fill(&self, name: &str) -> std::io::Result<PathBuf> {
        let filler = self.path.join(name);
        let mut file = std::fs::File::create(&filler)?;
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        let small = [0u8; 512];
        while file.write_all(&small).is_ok() {}
        let _ = file.sync_all();
        Ok(filler)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

fn mount_command(args: &[&str], path: &Path) -> Result<(), String> {
    match Command::new("mount").args(args).arg(path).output() {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(format!(
            "mount: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(error) => Err(format!("mount: {error}")),
    }
}

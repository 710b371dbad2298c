//! How the `shell` tool's commands are executed and confined by the operating system.
//!
//! Approval is the first layer: the policy classifier reads a command as bash reads it and rates
//! it. This module makes the second layer true, so that a command does exactly what was rated and
//! nothing the daemon's own files would allow:
//!
//! - **Same grammar.** The command runs with `bash --noprofile --norc -c`, never `/bin/sh` (dash on
//!   Debian and Raspberry Pi OS, which reads `$'…'` and other syntax differently from the bash the
//!   classifier models). No rc or env file is read: the environment is built from nothing, so
//!   `BASH_ENV`, `ENV`, `SHELLOPTS`, `BASHOPTS` and exported functions never reach it.
//! - **A HOME outside the workspace** ([`ShellHome`]): a fresh private directory per call, removed
//!   after it, holding the XDG directories and `TMPDIR`. The agent can write its workspace, so a
//!   HOME there would let one harmless-looking `write_file` (`.gitconfig`, `.config/git/config`, a
//!   Python `.pth`, `.bashrc`) turn the next `git status` into code execution. git reads no
//!   global or system config (`GIT_CONFIG_GLOBAL=/dev/null`, `GIT_CONFIG_NOSYSTEM=1`).
//! - **Landlock** ([`landlock_rules`]): the kernel confines the shell and everything it starts to
//!   read and execute the system directories, read and write the workspace and the call's HOME,
//!   and nothing else: not the data directory (database, other agents' workspaces), not the
//!   config, not the operator's home, not any process's `/proc/<pid>/` (the daemon's `environ`
//!   holds the API keys and bot tokens). A confined process also cannot ptrace or signal the
//!   daemon.
//!
//! [`protections`] says which of these are active on this machine; `clawvisor doctor`, the boot
//! log and Studio's overview show it.
//!
//! Architecture Invariant: a protected path is never granted, even inside a granted system
//! directory (it is granted around, `landlock_rules`).

pub mod landlock_rules;
pub mod namespaces;

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

pub use landlock_rules::{Confinement, ConfinementError, LandlockSupport, landlock_support};
pub use namespaces::{Isolation, NamespaceSupport, namespace_support};

use crate::policy::{Reach, Writes};

/// PATH for the shell when the daemon itself has none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where bash is looked for after the shell's PATH.
const BASH_FALLBACKS: &[&str] = &["/bin/bash", "/usr/bin/bash"];

/// The PATH commands get: the daemon's own (the operator's), else [`DEFAULT_PATH`].
pub fn shell_path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string())
}

/// The bash executable: the first `bash` on `path` (absolute entries only), else `/bin/bash` or
/// `/usr/bin/bash`.
pub fn find_bash(path: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("bash"))
        .chain(BASH_FALLBACKS.iter().map(PathBuf::from))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

/// What the operator installs when bash is missing.
pub const BASH_MISSING: &str = "bash was not found on PATH nor at /bin/bash or /usr/bin/bash; \
     the shell tool runs commands with bash (the grammar its safety rating reads), so install bash \
     (e.g. `apt install bash`) or disable `shell` for this agent";

/// Which protections the shell tool has on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protections {
    pub landlock: LandlockSupport,
    /// User, PID, IPC and network namespaces per command.
    pub namespaces: NamespaceSupport,
    /// The bash commands run with; `None` refuses every shell call.
    pub bash: Option<PathBuf>,
    /// Commands get a fresh private HOME outside the workspace (always true; listed so that the
    /// report names every layer).
    pub home_isolated: bool,
}

/// Probes the kernel and PATH now (the namespace probe runs once per process).
pub fn protections() -> Protections {
    let bash = find_bash(&shell_path());
    Protections {
        landlock: landlock_support(),
        namespaces: namespace_support(bash.as_deref()),
        bash,
        home_isolated: true,
    }
}

/// The four profiles a command can run with, narrowest first, with the level that gets each.
pub const PROFILES: [(&str, Reach); 4] = [
    ("L0: reads only", Reach::READ_ONLY),
    ("L1: writes in the workspace", Reach::WORKSPACE),
    (
        "approved, with the network",
        Reach {
            writes: Writes::Workspace,
            network: true,
        },
    ),
    (
        "approved, writes anywhere",
        Reach {
            writes: Writes::Anywhere,
            network: true,
        },
    ),
];

/// One protection of a profile, and whether this machine enforces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protection {
    pub name: &'static str,
    pub active: bool,
    pub detail: String,
}

impl Protections {
    /// One line for the boot log and `clawvisor doctor`.
    pub fn summary(&self) -> String {
        let bash = match &self.bash {
            Some(path) => format!("bash {}", path.display()),
            None => "bash MISSING (shell calls are refused)".to_string(),
        };
        format!(
            "namespaces {}; landlock {}; capabilities dropped; {bash}; private HOME per call \
             outside the workspace",
            self.namespaces.describe(),
            self.landlock.describe()
        )
    }

    /// Every layer active at full strength.
    pub fn complete(&self) -> bool {
        self.bash.is_some()
            && self.home_isolated
            && self.landlock.is_enforced()
            && self.namespaces.is_available()
    }

    /// What a command running with `reach` is protected by here.
    pub fn of_profile(&self, reach: Reach) -> Vec<Protection> {
        let namespaces = self.namespaces.is_available();
        let landlock = self.landlock.abi().is_some();
        let tcp_rules = self.landlock.abi().is_some_and(|abi| abi >= 4);
        let writes = match reach.writes {
            Writes::Nothing => "nothing but its private HOME",
            Writes::Workspace => "the workspace and its private HOME",
            Writes::Anywhere => "anywhere but clawvisor's data and config",
        };
        let mut list = vec![
            Protection {
                name: "user namespace",
                active: namespaces,
                detail: "runs as uid 65534 in its own user namespace, without any capability \
                         on the host"
                    .to_string(),
            },
            Protection {
                name: "PID namespace",
                active: namespaces,
                detail: "every process it starts is killed with the call and with the daemon"
                    .to_string(),
            },
        ];
        if !reach.network {
            list.push(Protection {
                name: "network namespace",
                active: namespaces,
                detail: "no network at all, not even the host's loopback".to_string(),
            });
            list.push(Protection {
                name: "Landlock TCP rules",
                active: tcp_rules,
                detail: "no TCP connect or bind (Landlock ABI 4)".to_string(),
            });
        }
        list.push(Protection {
            name: "Landlock files",
            active: landlock,
            detail: format!(
                "system read-only, writes {writes}; no clawvisor data, config or /proc/<pid> ({})",
                self.landlock.describe()
            ),
        });
        list.push(Protection {
            name: "capabilities dropped",
            active: true,
            detail: "no capability, no_new_privs (set-user-ID programs gain nothing)".to_string(),
        });
        list.push(Protection {
            name: "private HOME",
            active: self.home_isolated,
            detail: "a fresh HOME and TMPDIR per call, deleted after it".to_string(),
        });
        list
    }

    /// The guarantees a command with `reach` lacks on this machine, in words for its approval
    /// prompt (empty when all hold).
    pub fn missing_for(&self, reach: Reach) -> Vec<String> {
        self.of_profile(reach)
            .into_iter()
            .filter(|protection| !protection.active)
            .map(|protection| format!("{} ({})", protection.name, protection.detail))
            .collect()
    }

    /// For Studio: `landlock` (`status`, `abi`, `detail`), `namespaces` (`available`, `detail`),
    /// `bash`, `home_isolated`, `complete`, `summary`, and `profiles` (per profile: `name`,
    /// `reach`, `protections` with `name`, `active`, `detail`).
    pub fn to_json(&self) -> Value {
        let profiles: Vec<Value> = PROFILES
            .iter()
            .map(|(name, reach)| {
                let protections: Vec<Value> = self
                    .of_profile(*reach)
                    .into_iter()
                    .map(|protection| {
                        json!({
                            "name": protection.name,
                            "active": protection.active,
                            "detail": protection.detail,
                        })
                    })
                    .collect();
                json!({ "name": name, "reach": reach.describe(), "protections": protections })
            })
            .collect();
        json!({
            "landlock": {
                "status": self.landlock.status_word(),
                "abi": self.landlock.abi(),
                "detail": self.landlock.describe(),
            },
            "namespaces": {
                "available": self.namespaces.is_available(),
                "detail": self.namespaces.describe(),
            },
            "bash": self.bash.as_ref().map(|path| path.display().to_string()),
            "home_isolated": self.home_isolated,
            "complete": self.complete(),
            "summary": self.summary(),
            "profiles": profiles,
        })
    }
}

/// The paths a shell command must never reach: the data directory (database, indexes, other
/// agents' workspaces), the database file itself (it could be a link to elsewhere), the config
/// file's directory and where the agents were read from. The agent's own workspace is granted
/// even when it lies inside one of them; only its subtree is.
pub fn protected_paths(loaded: &crate::config::LoadedConfig) -> Vec<PathBuf> {
    let mut paths = vec![loaded.config.data_dir.clone(), loaded.config.db_path()];
    if let crate::config::ConfigSource::File(file) = &loaded.source {
        paths.extend(file.parent().map(Path::to_path_buf));
        paths.push(file.clone());
    }
    paths.extend(loaded.agents_source.clone());
    paths
}

/// A fresh private HOME for one shell call (mode 0700, in the daemon's temporary directory),
/// removed when dropped. It holds the call's `TMPDIR` and XDG directories, so nothing a command
/// leaves there is read by the next call.
pub struct ShellHome {
    dir: tempfile::TempDir,
}

impl ShellHome {
    pub fn create() -> std::io::Result<ShellHome> {
        // A random name, created exclusively, private to the daemon's user from the start.
        let dir = tempfile::Builder::new()
            .prefix("clawvisor-shell-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()?;
        // The umask can only clear bits; this makes sure the mode is exactly 0700.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        for sub in [".config", ".cache", ".local/share", ".local/state", "tmp"] {
            std::fs::create_dir_all(dir.path().join(sub))?;
        }
        Ok(ShellHome { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The variables that point a command at this HOME, and keep git from reading any
    /// configuration but the repository's own.
    ///
    /// `GIT_CONFIG_GLOBAL=/dev/null` rather than an empty file in this HOME: the global config is
    /// then empty whatever a command wrote earlier in the same call, and `git config --global`
    /// fails loudly (it cannot lock `/dev/null`) instead of writing a file that silently vanishes
    /// with the call; `git -c name=value` covers one-off settings. `GIT_CONFIG_NOSYSTEM=1` keeps
    /// `/etc/gitconfig` (credential helpers, hooks paths) out as well. The workspace repository's
    /// own `.git/config` is still read: writing it is rated L2 by the classifier.
    pub fn environment(&self) -> Vec<(&'static str, OsString)> {
        let home = self.path();
        let under = |sub: &str| home.join(sub).into_os_string();
        vec![
            ("HOME", home.as_os_str().to_os_string()),
            ("XDG_CONFIG_HOME", under(".config")),
            ("XDG_CACHE_HOME", under(".cache")),
            ("XDG_DATA_HOME", under(".local/share")),
            ("XDG_STATE_HOME", under(".local/state")),
            ("TMPDIR", under("tmp")),
            ("GIT_CONFIG_NOSYSTEM", OsString::from("1")),
            ("GIT_CONFIG_GLOBAL", OsString::from("/dev/null")),
        ]
    }

    /// Removes the directory on the blocking pool (a command may have left a large tree).
    pub async fn remove(self) {
        let dir = self.dir;
        let _ = tokio::task::spawn_blocking(move || drop(dir)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_is_found_on_path_or_at_the_usual_places() {
        let found = find_bash("relative/dir:/nonexistent-dir");
        // Only the fallbacks can match here.
        if let Some(path) = &found {
            assert!(
                BASH_FALLBACKS
                    .iter()
                    .any(|fallback| Path::new(fallback) == path)
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("bash");
        std::fs::write(&fake, "#!/bin/true\n").unwrap();
        // Not executable: skipped.
        assert_ne!(
            find_bash(&dir.path().display().to_string()),
            Some(fake.clone())
        );
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_bash(&dir.path().display().to_string()), Some(fake));
    }

    #[test]
    fn the_shell_home_is_private_and_removed() {
        let home = ShellHome::create().unwrap();
        let path = home.path().to_path_buf();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let environment = home.environment();
        let tmpdir = environment
            .iter()
            .find(|(name, _)| *name == "TMPDIR")
            .map(|(_, value)| PathBuf::from(value))
            .unwrap();
        assert!(tmpdir.is_dir() && tmpdir.starts_with(&path));
        drop(home);
        assert!(!path.exists());
    }
}

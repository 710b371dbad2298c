//! The Landlock ruleset of one shell call: what a command may read, write and execute.
//!
//! Landlock only grants (a process under a ruleset reaches nothing no rule allows), so the data
//! directory and the config are protected by never being granted. The hard part is that a system
//! directory we grant may contain one of them (a config in `/etc/clawvisor/`, a data directory in
//! `/opt/clawvisor/`), and a Landlock rule on a directory covers all of it. Such a directory is
//! granted entry by entry instead, down to the protected path, which is left out
//! ([`grant_around`]). Paths are resolved first, so a link cannot smuggle a protected directory
//! into a grant.
//!
//! What a command may write follows its [`Reach`]: nothing but its private HOME (L0), the
//! workspace too, or everywhere but the protected paths (an approved command that said so).
//!
//! The ruleset is built in the daemon before the command is started (opening paths, reading
//! directories and allocating are not allowed between fork and exec); the child restricts itself
//! with the descriptor built here ([`super::namespaces`]). We do not call the `landlock` crate's
//! `restrict_self` there: it consumes the ruleset value and builds error values that may
//! allocate, which is not async-signal-safe.
//!
//! A command without the network also gets Landlock's TCP rules (ABI 4) with nothing allowed:
//! no TCP bind or connect, behind its empty network namespace. A command with the network has
//! no port rule (Landlock filters ports, not addresses, so it could not tell a download from a
//! call to Studio on loopback; what guards Studio there is that the command holds no token) —
//! except the browser (`tcp_connect_only`): no TCP bind, and connects to its proxy's port only.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, path_beneath_rules,
};
use nix::libc;

use crate::policy::{Reach, Writes};

/// The newest Landlock ABI whose rights we use: V5 completes the file system rights (device
/// ioctls), V6 adds scoping (no signals to, no abstract unix sockets of, processes outside the
/// sandbox). Older kernels enforce what they know (best effort).
const TARGET_ABI: ABI = ABI::V6;
const TARGET_ABI_NUMBER: i64 = 6;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask the kernel for its Landlock ABI version.
const CREATE_RULESET_VERSION: libc::c_uint = 1;

/// Directories a normal command reads and executes from. Absent ones are skipped.
const SYSTEM_ROOTS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/sys",
];

/// Device files a command may read and write (besides its own stdio, which are pipes).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Whether the kernel can confine the shell with Landlock, and how completely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandlockSupport {
    /// Every restriction this module uses is enforced.
    Enforced { abi: i64 },
    /// Landlock works but the kernel lacks some of the restrictions used.
    Partial {
        abi: i64,
        missing: Vec<&'static str>,
    },
    /// Commands run unconfined by the kernel; why, and what to do about it.
    Unavailable { reason: String },
}

impl LandlockSupport {
    pub fn is_enforced(&self) -> bool {
        matches!(self, LandlockSupport::Enforced { .. })
    }

    /// `enforced`, `partial` or `unavailable`.
    pub fn status_word(&self) -> &'static str {
        match self {
            LandlockSupport::Enforced { .. } => "enforced",
            LandlockSupport::Partial { .. } => "partial",
            LandlockSupport::Unavailable { .. } => "unavailable",
        }
    }

    pub fn abi(&self) -> Option<i64> {
        match self {
            LandlockSupport::Enforced { abi } | LandlockSupport::Partial { abi, .. } => Some(*abi),
            LandlockSupport::Unavailable { .. } => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            LandlockSupport::Enforced { abi } => format!("enforced (kernel ABI {abi})"),
            LandlockSupport::Partial { abi, missing } => format!(
                "partially enforced (kernel ABI {abi}, {TARGET_ABI_NUMBER} wanted; missing: {})",
                missing.join(", ")
            ),
            LandlockSupport::Unavailable { reason } => format!("not available: {reason}"),
        }
    }
}

/// Asks the kernel which Landlock ABI it offers.
pub fn landlock_support() -> LandlockSupport {
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag, the call only returns
    // the ABI version (or an error); it reads and writes no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if version < 1 {
        let error = io::Error::last_os_error();
        let reason = match error.raw_os_error() {
            Some(libc::ENOSYS) => "the kernel has no Landlock (it needs Linux 5.13 or later built \
                                  with CONFIG_SECURITY_LANDLOCK)"
                .to_string(),
            Some(libc::EOPNOTSUPP) => "Landlock is built into the kernel but not enabled at boot \
                                      (add `landlock` to the kernel's `lsm=` parameter)"
                .to_string(),
            _ => format!("probing Landlock failed: {error}"),
        };
        return LandlockSupport::Unavailable { reason };
    }
    let abi = version as i64;
    let mut missing = Vec::new();
    if abi < 2 {
        missing.push("renames and links across directories are always refused (ABI 2)");
    }
    if abi < 3 {
        missing.push("truncation control (ABI 3)");
    }
    if abi < 5 {
        missing.push("device ioctl control (ABI 5)");
    }
    if abi < 6 {
        missing.push("signal and abstract unix socket scoping (ABI 6)");
    }
    if missing.is_empty() {
        LandlockSupport::Enforced { abi }
    } else {
        LandlockSupport::Partial { abi, missing }
    }
}

/// What one call's ruleset is made of.
pub struct ConfinementRequest<'a> {
    /// The agent's workspace: writable when `reach` writes there, else read and execute.
    pub workspace: &'a Path,
    /// Granted exactly like `workspace` (a node's further roots); usually empty.
    pub extra_workspaces: &'a [PathBuf],
    /// What the command may reach: where it writes, whether it has the network.
    pub reach: Reach,
    /// Read, write and execute: the call's private HOME (and TMPDIR inside it).
    pub home: &'a Path,
    /// Never reached, even inside a granted directory (see [`super::protected_paths`]).
    pub protected: &'a [PathBuf],
    /// The PATH commands get: its absolute directories are readable and executable too.
    pub path: &'a str,
    /// With the network, TCP connects only to this port and no TCP bind (Landlock ABI 4; older
    /// kernels cannot): the browser, whose every connection must go through its proxy.
    pub tcp_connect_only: Option<u16>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfinementError {
    #[error(
        "could not build the shell's Landlock ruleset: {0}; the command was not run (the kernel \
         offers Landlock, so running it unconfined would silently drop a protection)"
    )]
    Ruleset(String),
}

/// The confinement of one call, built before the command starts.
#[derive(Debug)]
pub struct Confinement {
    /// `None` when the kernel has no Landlock: the command runs unconfined, as
    /// [`landlock_support`] reports.
    ruleset: Option<OwnedFd>,
}

impl Confinement {
    /// Builds the ruleset (opens every granted path). Blocking file system work.
    pub fn prepare(request: &ConfinementRequest<'_>) -> Result<Confinement, ConfinementError> {
        let support = landlock_support();
        let Some(abi) = support.abi() else {
            return Ok(Confinement { ruleset: None });
        };
        let grants = plan(request);
        let failed = |error: landlock::RulesetError| ConfinementError::Ruleset(error.to_string());
        let mut ruleset = Ruleset::default()
            .handle_access(AccessFs::from_all(TARGET_ABI))
            .map_err(failed)?
            .scope(Scope::from_all(TARGET_ABI))
            .map_err(failed)?;
        // Without the network, TCP binds and connects are refused by Landlock too (ABI 4), a
        // second wall behind the empty network namespace (and the only one without it).
        // A browser's TCP goes to its proxy's port only (`tcp_connect_only`).
        let restrict_tcp = !request.reach.network || request.tcp_connect_only.is_some();
        if restrict_tcp && abi >= 4 {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(TARGET_ABI))
                .map_err(failed)?;
        }
        let mut ruleset = ruleset.create().map_err(failed)?;
        if let (Some(port), true, true) =
            (request.tcp_connect_only, request.reach.network, abi >= 4)
        {
            ruleset = ruleset
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(failed)?;
        }
        for (path, access) in grants {
            ruleset = ruleset
                .add_rules(path_beneath_rules([path], access))
                .map_err(failed)?;
        }
        Ok(Confinement {
            ruleset: ruleset.into(),
        })
    }

    /// The command will run under a Landlock ruleset.
    pub fn is_active(&self) -> bool {
        self.ruleset.is_some()
    }

    /// The ruleset's descriptor, for the child to restrict itself with
    /// ([`super::namespaces::Isolation::install`]).
    pub fn into_ruleset(self) -> Option<OwnedFd> {
        self.ruleset
    }
}

/// Every path to grant, resolved, with its rights.
fn plan(request: &ConfinementRequest<'_>) -> Vec<(PathBuf, BitFlags<AccessFs>)> {
    let read_execute = AccessFs::from_read(TARGET_ABI);
    let everything = AccessFs::from_all(TARGET_ABI);
    let device = AccessFs::from_file(TARGET_ABI) & !AccessFs::Execute;
    let protected: Vec<PathBuf> = request
        .protected
        .iter()
        .map(|path| resolved(path))
        .collect();
    let mut grants = Vec::new();

    let mut readable: Vec<PathBuf> = SYSTEM_ROOTS.iter().map(PathBuf::from).collect();
    readable.extend(std::env::split_paths(request.path).filter(|dir| dir.is_absolute()));
    // Name resolution: `/etc/resolv.conf` is often a link into `/run`, which is not granted.
    readable.push(PathBuf::from("/etc/resolv.conf"));
    for path in readable {
        grant_around(&mut grants, &path, read_execute, &protected);
    }
    grant_proc_without_processes(&mut grants, AccessFs::from_read(TARGET_ABI));
    for device_path in DEVICES {
        grant_around(&mut grants, Path::new(device_path), device, &protected);
    }
    // Listing `/dev` shows names only; no device becomes readable by it.
    grant_around(
        &mut grants,
        Path::new("/dev"),
        AccessFs::ReadDir.into(),
        &protected,
    );
    let workspace_access = match request.reach.writes {
        Writes::Nothing => read_execute,
        Writes::Workspace | Writes::Anywhere => everything,
    };
    let workspaces = std::iter::once(request.workspace)
        .chain(request.extra_workspaces.iter().map(PathBuf::as_path))
        .map(|workspace| (workspace, workspace_access));
    for (granted, access) in workspaces.chain([(request.home, everything)]) {
        // The workspace may lie inside the data directory (its default place): it is granted,
        // but nothing protected inside it is.
        let root = resolved(granted);
        let inside: Vec<PathBuf> = protected
            .iter()
            .filter(|path| path.starts_with(&root) && **path != root)
            .cloned()
            .collect();
        grant_around(&mut grants, &root, access, &inside);
    }
    if request.reach.writes == Writes::Anywhere {
        grant_everywhere_but_processes(&mut grants, everything, &protected);
    }
    grants
}

/// For an approved command that writes anywhere: every top-level directory but `/proc`, `/dev`
/// and `/sys` (granted as above), around the protected paths.
fn grant_everywhere_but_processes(
    grants: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
    access: BitFlags<AccessFs>,
    protected: &[PathBuf],
) {
    let Ok(entries) = std::fs::read_dir("/") else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if [Path::new("/proc"), Path::new("/dev"), Path::new("/sys")].contains(&path.as_path()) {
            continue;
        }
        grant_around(grants, &path, access, protected);
    }
}

/// `/proc` without any process's directory: its system-wide files (`cpuinfo`, `meminfo`,
/// `loadavg`, `sys/`, ...) are readable, `/proc/<pid>/` of every process is not.
///
/// Landlock's ptrace rule already refuses `/proc/<pid>/mem`, `stack` or `syscall` of a process
/// outside the sandbox, but on the kernels we tried (6.18) `environ`, `maps` and `auxv` of a
/// process of the same user stayed readable under it, and the daemon's `environ` holds its API
/// keys and bot tokens (so do the MCP servers it starts). So no process directory is granted,
/// not even the command's own (`/proc/self` would resolve to the daemon's here, and the
/// command's does not exist yet). Pipes reached through `/proc/self/fd` (`<(…)`, `/dev/stdout`)
/// still work: Landlock does not restrict pipes.
fn grant_proc_without_processes(
    grants: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
    access: BitFlags<AccessFs>,
) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let is_pid = |name: &str| !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_digit());
    for entry in entries.flatten() {
        if is_pid(&entry.file_name().to_string_lossy()) {
            continue;
        }
        // `self`, `thread-self`, `net`, `mounts` are links into a process directory.
        let Ok(real) = entry.path().canonicalize() else {
            continue;
        };
        let in_a_process = real
            .strip_prefix("/proc")
            .ok()
            .and_then(|rest| rest.components().next())
            .is_some_and(|first| is_pid(&first.as_os_str().to_string_lossy()));
        if real.starts_with("/proc") && !in_a_process {
            grants.push((real, access));
        }
    }
}

/// `path` with links resolved; an absolute version of it when it does not exist.
fn resolved(path: &Path) -> PathBuf {
    path.canonicalize()
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// Adds `path` (resolved) to `grants` with `access`, leaving out every protected path: nothing is
/// added when `path` is inside (or is) a protected path, and a directory that contains one is
/// added entry by entry instead, down to it.
fn grant_around(
    grants: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
    path: &Path,
    access: BitFlags<AccessFs>,
    protected: &[PathBuf],
) {
    let Ok(real) = path.canonicalize() else {
        return;
    };
    if protected.iter().any(|guarded| real.starts_with(guarded)) {
        return;
    }
    if !protected.iter().any(|guarded| guarded.starts_with(&real)) {
        grants.push((real, access));
        return;
    }
    let Ok(entries) = std::fs::read_dir(&real) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(child) = entry.path().canonicalize() else {
            continue;
        };
        let holds_protected = protected.iter().any(|guarded| guarded.starts_with(&child));
        // A real child is split further; a link elsewhere is granted only when it holds nothing
        // protected (so the recursion always goes down and ends).
        if child.parent() == Some(real.as_path()) || !holds_protected {
            grant_around(grants, &child, access, protected);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_holding_a_protected_path_is_granted_around_it() {
        let root = tempfile::tempdir().unwrap();
        let root_path = root.path().canonicalize().unwrap();
        let etc = root_path.join("etc");
        let data = etc.join("clawvisor");
        std::fs::create_dir_all(data.join("deep")).unwrap();
        std::fs::create_dir_all(etc.join("ssl")).unwrap();
        std::fs::write(etc.join("hostname"), "box").unwrap();
        // A link beside it that leads into the protected directory.
        std::os::unix::fs::symlink(&data, etc.join("sneaky")).unwrap();
        std::os::unix::fs::symlink(etc.join("ssl"), etc.join("certs")).unwrap();

        let mut grants = Vec::new();
        let access = AccessFs::from_read(TARGET_ABI);
        grant_around(&mut grants, &etc, access, std::slice::from_ref(&data));
        let mut granted: Vec<PathBuf> = grants.into_iter().map(|(path, _)| path).collect();
        granted.sort();
        assert_eq!(
            granted,
            vec![etc.join("hostname"), etc.join("ssl"), etc.join("ssl")],
            "siblings granted (the link to ssl resolves to it), the protected directory and the \
             link into it are not"
        );

        // A path inside a protected one is never granted; one unrelated is granted whole.
        let mut grants = Vec::new();
        grant_around(
            &mut grants,
            &data.join("deep"),
            access,
            std::slice::from_ref(&data),
        );
        assert!(grants.is_empty());
        grant_around(
            &mut grants,
            &etc.join("ssl"),
            access,
            std::slice::from_ref(&data),
        );
        assert_eq!(grants.len(), 1);
    }

    #[test]
    fn proc_is_granted_without_any_process_directory() {
        let mut grants = Vec::new();
        grant_proc_without_processes(&mut grants, AccessFs::from_read(TARGET_ABI));
        assert!(
            grants
                .iter()
                .any(|(path, _)| path == Path::new("/proc/loadavg"))
        );
        let own = PathBuf::from(format!("/proc/{}", std::process::id()));
        for (path, _) in &grants {
            assert!(
                path.starts_with("/proc") && !path.starts_with(&own),
                "{path:?}"
            );
            let first = path
                .components()
                .nth(2)
                .unwrap()
                .as_os_str()
                .to_string_lossy();
            assert!(!first.bytes().all(|byte| byte.is_ascii_digit()), "{path:?}");
        }
    }

    #[test]
    fn the_workspace_inside_the_data_directory_is_granted_but_not_what_is_protected_in_it() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().canonicalize().unwrap().join("data");
        let workspace = data.join("workspaces/ada");
        std::fs::create_dir_all(workspace.join("notes")).unwrap();
        let home = tempfile::tempdir().unwrap();
        let secret_inside = workspace.join("keys");
        std::fs::create_dir_all(&secret_inside).unwrap();
        let protected = vec![
            data.clone(),
            data.join("clawvisor.db"),
            secret_inside.clone(),
        ];
        let grants = plan(&ConfinementRequest {
            workspace: &workspace,
            extra_workspaces: &[],
            reach: Reach::WORKSPACE,
            home: home.path(),
            protected: &protected,
            path: "/usr/bin",
            tcp_connect_only: None,
        });
        let granted = |path: &Path| grants.iter().any(|(granted, _)| granted == path);
        assert!(granted(&workspace.join("notes")), "{grants:?}");
        assert!(!granted(&workspace) && !granted(&secret_inside) && !granted(&data));
        assert!(granted(&home.path().canonicalize().unwrap()));
        assert!(grants.iter().all(|(path, _)| !path.starts_with(&data)
            || path.starts_with(&workspace) && !path.starts_with(&secret_inside)));
    }

    /// A node's further roots get exactly the workspace's rights: read (and execute) for a
    /// command that writes nothing, everything for one that writes the workspace; what lies
    /// beside them gets nothing.
    #[test]
    fn extra_workspaces_are_granted_like_the_workspace_and_nothing_beside_them() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let (work, photos, beside) = (base.join("work"), base.join("photos"), base.join("beside"));
        for dir in [&work, &photos, &beside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let home = tempfile::tempdir().unwrap();
        let extra = [photos.clone()];
        let rights = |reach: Reach| {
            let grants = plan(&ConfinementRequest {
                workspace: &work,
                extra_workspaces: &extra,
                reach,
                home: home.path(),
                protected: &[],
                path: "/usr/bin",
                tcp_connect_only: None,
            });
            let of = |path: &Path| {
                grants
                    .iter()
                    .find(|(granted, _)| granted == path)
                    .map(|(_, access)| *access)
            };
            assert!(of(&beside).is_none() && of(&base).is_none(), "{grants:?}");
            (of(&work), of(&photos))
        };
        let (work_read, photos_read) = rights(Reach::READ_ONLY);
        assert_eq!(work_read, Some(AccessFs::from_read(TARGET_ABI)));
        assert_eq!(photos_read, work_read);
        let (work_write, photos_write) = rights(Reach::WORKSPACE);
        assert_eq!(work_write, Some(AccessFs::from_all(TARGET_ABI)));
        assert_eq!(photos_write, work_write);
    }
}

//! The process side of a shell call's sandbox: namespaces, capabilities and the death signal.
//!
//! Between fork and exec, the command's first process:
//!
//! 1. asks to be killed when the daemon dies (`PR_SET_PDEATHSIG`);
//! 2. enters a new **user namespace** (mapped to one uid, 65534 inside; it holds no capability
//!    outside it), a new **PID namespace** and IPC namespace, and — unless its reach has the
//!    network — a new, empty **network namespace** (no interface is up, not even loopback: the
//!    host's `127.0.0.1`, Studio's port and other processes' loopback traffic are unreachable);
//! 3. forks twice: PID 1 of the new PID namespace is a small waiter (it reaps orphans), PID 2
//!    runs the command; the first process stays outside the namespace only to wait and pass the
//!    command's exit status on. When that process dies (the daemon was killed, or the call's
//!    process group was), the kernel kills PID 1 and with it every process of the namespace,
//!    including ones that left the process group (`setsid`) or were disowned. So no command
//!    outlives its call or the daemon;
//! 4. drops every capability (bounding set, then effective/permitted/inheritable) after
//!    `no_new_privs`, and applies the Landlock ruleset ([`super::landlock_rules`]).
//!
//! Where the kernel refuses user namespaces (a sysctl, AppArmor's userns restriction, a
//! container's seccomp profile), steps 2 and 3 are skipped and [`NamespaceSupport`] says which
//! guarantee is missing; step 4 still runs (as root, that strips root's capabilities too).
//!
//! Everything between fork and exec is async-signal-safe: system calls on data prepared before
//! the fork, no allocation, no lock.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::OnceLock;

use nix::libc;

use crate::policy::Reach;

/// The uid and gid a command has inside its user namespace ("nobody"); outside, it is the
/// daemon's, without any capability.
const INSIDE_ID: u32 = 65534;

/// Whether the kernel lets the daemon give each command its own namespaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceSupport {
    /// User, PID, IPC and network namespaces all work.
    Available,
    /// They don't; why, in words for the operator, with what to change.
    Unavailable { reason: String },
}

impl NamespaceSupport {
    pub fn is_available(&self) -> bool {
        matches!(self, NamespaceSupport::Available)
    }

    /// For the report: `available` or `not available: <why>`.
    pub fn describe(&self) -> String {
        match self {
            NamespaceSupport::Available => "available".to_string(),
            NamespaceSupport::Unavailable { reason } => format!("not available: {reason}"),
        }
    }
}

/// Probes once (by starting `true`-like bash in the namespaces) and remembers the answer.
pub fn namespace_support(bash: Option<&std::path::Path>) -> NamespaceSupport {
    static PROBED: OnceLock<NamespaceSupport> = OnceLock::new();
    PROBED.get_or_init(|| probe(bash)).clone()
}

fn probe(bash: Option<&std::path::Path>) -> NamespaceSupport {
    let Some(bash) = bash else {
        return NamespaceSupport::Unavailable {
            reason: "bash was not found, so nothing was started to try them".to_string(),
        };
    };
    let isolation = Isolation::new(Reach::READ_ONLY, true);
    let mut command = std::process::Command::new(bash);
    command
        .args(["--noprofile", "--norc", "-c", ":"])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: `enter` is async-signal-safe (see the module documentation).
    unsafe {
        command.pre_exec(move || isolation.enter(None));
    }
    match command.status() {
        Ok(status) if status.success() => NamespaceSupport::Available,
        Ok(status) => NamespaceSupport::Unavailable {
            reason: format!("a test command in them ended with {status}"),
        },
        Err(error) => NamespaceSupport::Unavailable {
            reason: unavailable_reason(&error),
        },
    }
}

fn unavailable_reason(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => format!(
            "the kernel refused a user namespace ({error}); allow them (sysctl \
             kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0; on Ubuntu \
             kernel.apparmor_restrict_unprivileged_userns=0; in Docker run with a seccomp profile \
             that allows unshare), so that commands lose the network and the daemon's privileges"
        ),
        Some(libc::ENOSPC) => {
            format!("the namespace limit is reached ({error}); raise user.max_user_namespaces")
        }
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            format!("the kernel has no user namespaces ({error}); it needs CONFIG_USER_NS")
        }
        _ => format!("entering the namespaces failed: {error}"),
    }
}

/// What a command's first process does before exec, prepared in the daemon.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// Enter user, PID and IPC namespaces (and fork into the PID namespace).
    namespaces: bool,
    /// Also enter an empty network namespace.
    cut_network: bool,
    /// `/proc/self/uid_map` and `gid_map` contents.
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// The daemon's pid, to notice that it died before the death signal was armed.
    daemon: libc::pid_t,
}

impl Isolation {
    /// The isolation for a command reaching `reach`; `namespaces` is whether the kernel allows
    /// them ([`namespace_support`]).
    pub fn new(reach: Reach, namespaces: bool) -> Isolation {
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        Isolation {
            namespaces,
            cut_network: !reach.network,
            uid_map: format!("{INSIDE_ID} {uid} 1\n").into_bytes(),
            gid_map: format!("{INSIDE_ID} {gid} 1\n").into_bytes(),
            daemon: nix::unistd::getpid().as_raw(),
        }
    }

    /// Whether the command gets its own namespaces.
    pub fn has_namespaces(&self) -> bool {
        self.namespaces
    }

    /// Makes `command`'s first process enter this isolation (and `ruleset`'s Landlock domain)
    /// just before it executes the program.
    pub fn install(self, ruleset: Option<OwnedFd>, command: &mut tokio::process::Command) {
        // SAFETY: `enter` is async-signal-safe: system calls on data prepared before the fork.
        // The ruleset descriptor is close-on-exec, so the program never holds it.
        unsafe {
            command.pre_exec(move || self.enter(ruleset.as_ref()));
        }
    }

    /// Runs in the child between fork and exec. Returns only in the process that will exec.
    fn enter(&self, ruleset: Option<&OwnedFd>) -> io::Result<()> {
        die_with_parent()?;
        if nix::unistd::getppid().as_raw() != self.daemon {
            // The daemon died before the signal was armed.
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        if self.namespaces {
            let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
            if self.cut_network {
                flags |= libc::CLONE_NEWNET;
            }
            // SAFETY: unshare with namespace flags only changes this (single-threaded) process.
            check(unsafe { libc::unshare(flags) })?;
            write_proc_file(c"/proc/self/setgroups", b"deny")?;
            write_proc_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_proc_file(c"/proc/self/gid_map", &self.gid_map)?;
            become_pid_namespace_init()?;
        }
        drop_capability_bounding_set();
        // no_new_privs lets an unprivileged process restrict itself, and keeps set-user-ID
        // programs from gaining privileges.
        prctl(libc::PR_SET_NO_NEW_PRIVS, 1)?;
        if let Some(ruleset) = ruleset {
            // SAFETY: a valid ruleset descriptor and no flags.
            let restricted = unsafe {
                libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32)
            };
            if restricted != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        clear_capabilities()
    }
}

/// `PR_SET_PDEATHSIG`: SIGKILL when the parent thread ends.
fn die_with_parent() -> io::Result<()> {
    prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong)
}

/// Forks twice: PID 1 of the new PID namespace is a small waiter, and its child (PID 2) returns
/// to exec the command, so the command is an ordinary process (PID 1 ignores signals it has no
/// handler for, which would change `kill $$`). The first process stays outside the namespace to
/// wait and pass the command's exit on; neither waiter ever returns.
fn become_pid_namespace_init() -> io::Result<()> {
    // Carries the signal that ended the command from PID 1 to the outer waiter (PID 1 cannot die
    // of a signal it sends itself).
    let mut report: [libc::c_int; 2] = [-1; 2];
    // SAFETY: pipe2 fills the two descriptors.
    check(unsafe { libc::pipe2(report.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let [report_read, report_write] = report;
    // SAFETY: this process is single-threaded (a child between fork and exec).
    let init = unsafe { libc::fork() };
    if init < 0 {
        return Err(io::Error::last_os_error());
    }
    if init > 0 {
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(report_write) };
        pass_on(init, report_read);
    }
    // PID 1: killed when the outer waiter dies, and the kernel then kills every other process of
    // the namespace.
    // SAFETY: closing our copy of the read end.
    unsafe { libc::close(report_read) };
    die_with_parent()?;
    // SAFETY: single-threaded, as above.
    let command = unsafe { libc::fork() };
    if command < 0 {
        return Err(io::Error::last_os_error());
    }
    if command == 0 {
        // SAFETY: the command does not need the report pipe.
        unsafe { libc::close(report_write) };
        return Ok(());
    }
    reap_until(command, report_write)
}

/// Closes every descriptor from 3 up but `keep` (the daemon learns that exec happened when the
/// command's close-on-exec error pipe closes, so a waiter must not hold a copy).
fn close_descriptors_except(keep: libc::c_int) {
    let close_range = |first: libc::c_int, last: libc::c_int| {
        if first > last {
            return;
        }
        // SAFETY: close_range on descriptors this process owns; the loop is the fallback.
        unsafe {
            if libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) != 0 {
                for descriptor in first..=last.min(4095) {
                    libc::close(descriptor);
                }
            }
        }
    };
    if keep >= 3 {
        close_range(3, keep - 1);
        close_range(keep + 1, libc::c_int::MAX);
    } else {
        close_range(3, libc::c_int::MAX);
    }
}

/// PID 1's loop: reaps every process re-parented to it until the command itself ends, then
/// reports a signal through `report` and exits with the command's status.
fn reap_until(command: libc::pid_t, report: libc::c_int) -> ! {
    close_descriptors_except(report);
    let status = wait_for(command, -1);
    // SAFETY: write, _exit with plain arguments.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status) as u8;
            libc::write(report, (&signal as *const u8).cast(), 1);
            libc::_exit(128 + libc::c_int::from(signal));
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// The outer waiter: waits for PID 1 and ends as the command did, dying of the same signal when
/// PID 1 reported one (or was itself killed).
fn pass_on(init: libc::pid_t, report: libc::c_int) -> ! {
    close_descriptors_except(report);
    let status = wait_for(init, init);
    let mut signal: u8 = 0;
    // SAFETY: read, signal, kill and _exit with plain arguments; PID 1 has exited, so the read
    // returns its byte or end of file at once.
    unsafe {
        let reported = libc::read(report, (&mut signal as *mut u8).cast(), 1) == 1;
        let signal = if reported {
            libc::c_int::from(signal)
        } else if libc::WIFSIGNALED(status) {
            libc::WTERMSIG(status)
        } else {
            libc::_exit(libc::WEXITSTATUS(status))
        };
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal)
    }
}

/// Waits (with `waitpid(wait_on)`) until `child` ended, reaping whatever else ends meanwhile;
/// its status.
fn wait_for(child: libc::pid_t, wait_on: libc::pid_t) -> libc::c_int {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waiting for our own children with a valid status pointer.
        let waited = unsafe { libc::waitpid(wait_on, &mut status, 0) };
        if waited == child {
            return status;
        }
        if waited < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: _exit ends the process without running anything of the daemon's.
            unsafe { libc::_exit(126) };
        }
    }
}

/// Writes `contents` to a `/proc/self` file (open, write, close: async-signal-safe).
fn write_proc_file(path: &CStr, contents: &[u8]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path and flags; the descriptor is closed below.
    let descriptor = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if descriptor < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: writing a byte slice we own to the descriptor opened above.
    let written = unsafe { libc::write(descriptor, contents.as_ptr().cast(), contents.len()) };
    let error = io::Error::last_os_error();
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(descriptor) };
    if written != contents.len() as isize {
        return Err(error);
    }
    Ok(())
}

/// Drops every capability from the bounding set, so no exec can give one back. Needs
/// `CAP_SETPCAP`, which a process in its own user namespace (or root) has; without it (an
/// unprivileged daemon without namespaces) there is nothing to drop.
fn drop_capability_bounding_set() {
    for capability in 0..64 {
        // SAFETY: plain prctl; an unknown capability number gives EINVAL, which is ignored.
        unsafe {
            libc::prctl(
                libc::PR_CAPBSET_DROP,
                capability as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
    }
}

/// Empties the effective, permitted and inheritable sets (and with them the ambient set).
fn clear_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two data structs (capabilities 0–31 and 32–63).
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset with a valid header and two data structs, as version 3 requires.
    let result = unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn prctl(option: libc::c_int, value: libc::c_ulong) -> io::Result<()> {
    let unused: libc::c_ulong = 0;
    // SAFETY: plain prctl with integer arguments (the unused ones zero).
    check(unsafe { libc::prctl(option, value, unused, unused, unused) })
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

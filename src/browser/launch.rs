//! Starting one headless Chromium for one agent, confined like the shell's approved network
//! commands (`crate::sandbox`), and talking to it over its DevTools pipe (`super::cdp`).
//!
//! What holds (when the kernel offers Landlock and user namespaces; `sandbox::protections` says
//! which do): Chromium and every process it starts
//! - read and execute the system directories only, and read and write only its profile
//!   (`<data dir>/browser/<agent>/profile`, cookies and downloads) and a private HOME that is
//!   removed when it stops: not the rest of the data directory (the database, the secrets store,
//!   other agents' workspaces and profiles), not the config, not the agent's workspace, not any
//!   process's `/proc/<pid>/` (the daemon's environment holds its keys);
//! - run in their own user, PID and IPC namespaces with no capabilities and `no_new_privs`, are
//!   killed with the daemon (`PR_SET_PDEATHSIG`) and cannot signal or ptrace it;
//! - keep the network only through the browser's egress proxy (`super::proxy`): Chromium is
//!   told to use it for everything, loopback included, and WebRTC may not send UDP outside it
//!   ([`proxy_flags`]); Landlock (ABI 4, kernel 6.7+) refuses any TCP connect to another port
//!   and any TCP bind. Landlock filters ports, not addresses, and not UDP: what keeps pages off
//!   other hosts on the proxy's port number, and off UDP, is Chromium's own proxy setting (no
//!   page API opens raw sockets; name lookups are the proxy's, since Chromium sends it names).
//!
//! Chromium's own sandbox is off (`--no-sandbox`): it needs either a set-user-ID helper or user
//! namespaces it creates itself, and inside ours (no capabilities, `no_new_privs`) it can have
//! neither. What it would add is a wall between a page's renderer and the browser process; what
//! we keep is the wall between the whole browser and everything else, which is the one that
//! protects the daemon. A page that took over a renderer gets this agent's browser profile
//! (its logins), nothing more.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::libc;
use tokio::net::unix::pipe;

use super::cdp::Cdp;
use crate::policy::{Reach, Writes};
use crate::sandbox::landlock_rules::ConfinementRequest;
use crate::sandbox::{self, Confinement, Isolation, ShellHome};

/// Where Chromium is looked for when `[browser] chromium` is not set.
pub const CHROMIUM_CANDIDATES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
];

/// What Chromium is started with, besides the profile: headless, no first-run screens, no
/// background traffic of its own.
const FLAGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--remote-debugging-pipe",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    // Chromium's own calls home (network time, search preconnects, phishing-detection and
    // domain-reliability pings): they go through the proxy like a page's. Measured with the
    // proxy's debug log: these leave one `accounts.google.com` and one `www.google.com`
    // connection at start (public addresses: allowed, as before the proxy, when online).
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,\
     DialMediaRouteProvider,Translate,AutofillServerCommunication,PreconnectToSearch,\
     SearchPrefetchServicePrefetching,InterestFeedContentSuggestions",
    "--disable-client-side-phishing-detection",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--no-pings",
    "--no-service-autorun",
    "--disable-search-engine-choice-screen",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--metrics-recording-only",
    "--mute-audio",
    "--hide-scrollbars",
    "--password-store=basic",
    "--window-size=1280,900",
    // Under our Landlock no process may read `/proc/<pid>/`, its own included: Chromium then
    // cannot find itself through `/proc/self/exe` (it is told where it is instead) nor start a
    // separate GPU process (compositing runs in the browser process; headless needs no GPU).
    "--in-process-gpu",
    "--no-zygote",
    "about:blank",
];

/// Everything through the egress proxy on 127.0.0.1:`port`: loopback too (Chromium bypasses a
/// proxy for loopback unless told `<-loopback>`), and no WebRTC UDP outside it (Chromium 148's
/// switch; WebRTC then only uses TCP relays, through the proxy).
pub fn proxy_flags(port: u16) -> [String; 3] {
    [
        format!("--proxy-server=http://127.0.0.1:{port}"),
        "--proxy-bypass-list=<-loopback>".to_string(),
        "--webrtc-ip-handling-policy=disable_non_proxied_udp".to_string(),
    ]
}

/// The program behind a launcher script: distributions install `chromium` as a shell script
/// that runs the real binary, which is what must run (and be named to its subprocesses).
const REAL_BINARIES: &[&str] = &[
    "/usr/lib/chromium/chromium",
    "/usr/lib/chromium-browser/chromium-browser",
    "/usr/lib64/chromium-browser/chromium-browser",
    "/opt/google/chrome/chrome",
];

/// `path` itself when it is a program, else (a `#!` launcher script) the installed binary.
pub fn real_binary(path: &Path) -> PathBuf {
    let is_script = std::fs::File::open(path)
        .and_then(|mut file| {
            let mut start = [0u8; 2];
            std::io::Read::read_exact(&mut file, &mut start).map(|()| start == *b"#!")
        })
        .unwrap_or(false);
    if !is_script {
        return path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    }
    REAL_BINARIES
        .iter()
        .map(PathBuf::from)
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| path.to_path_buf())
}

/// A running Chromium: its process, its pipe, its private HOME (removed when dropped).
pub struct Chromium {
    pub child: tokio::process::Child,
    pub cdp: Cdp,
    /// Confined as described in the module header (`false`: the kernel offered neither).
    pub confined: String,
    /// The last lines Chromium wrote to its standard error (why it stopped, when it did).
    pub said: StderrTail,
    _home: ShellHome,
}

/// The last [`STDERR_LINES`] lines of Chromium's standard error, secrets redacted.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>);

/// How many of Chromium's last standard-error lines are kept.
pub const STDERR_LINES: usize = 12;

impl StderrTail {
    async fn collect(self, stderr: tokio::process::ChildStderr) {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let line = crate::secrets::redact(&line)
                .chars()
                .take(300)
                .collect::<String>();
            tracing::debug!(target: "clawvisor::browser", "chromium: {line}");
            let mut kept = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
            if kept.len() == STDERR_LINES {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The last line that looks like an error, for a message ("" when none).
    pub fn last_error(&self) -> String {
        self.lines()
            .into_iter()
            .rev()
            .find(|line| line.contains("ERROR") || line.contains("FATAL") || line.contains("rror"))
            .unwrap_or_default()
    }
}

/// Why Chromium could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "Chromium was not found (looked for {0} on PATH); install it (`apt install chromium`) or \
         set `[browser] chromium` to its path"
    )]
    NotFound(String),
    #[error("could not prepare Chromium's sandbox: {0}")]
    Sandbox(String),
    #[error("could not start Chromium ({path}){confined}: {error}")]
    Spawn {
        path: String,
        confined: String,
        error: std::io::Error,
    },
}

/// The Chromium to run: `configured` when set, else the first of [`CHROMIUM_CANDIDATES`] on PATH.
pub fn find_chromium(configured: Option<&Path>) -> Result<PathBuf, LaunchError> {
    if let Some(path) = configured {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(LaunchError::NotFound(path.display().to_string()))
        };
    }
    let path = sandbox::shell_path();
    CHROMIUM_CANDIDATES
        .iter()
        .flat_map(|name| {
            std::env::split_paths(&path)
                .filter(|dir| dir.is_absolute())
                .map(move |dir| dir.join(name))
        })
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| LaunchError::NotFound(CHROMIUM_CANDIDATES.join(", ")))
}

/// Starts `chromium` with `profile` as its user data directory, confined (see the header),
/// sending everything through the egress proxy on 127.0.0.1:`proxy_port` (`super::proxy`), and
/// connects to its pipe. The profile directory is created (0700) when missing.
pub async fn launch(
    chromium: &Path,
    profile: &Path,
    protected: &[PathBuf],
    proxy_port: u16,
) -> Result<Chromium, LaunchError> {
    let (chromium, profile, protected) = (
        chromium.to_path_buf(),
        profile.to_path_buf(),
        protected.to_vec(),
    );
    let prepared =
        tokio::task::spawn_blocking(move || prepare(&chromium, &profile, &protected, proxy_port))
            .await
            .map_err(|error| LaunchError::Sandbox(error.to_string()))??;
    spawn(prepared)
}

struct Prepared {
    chromium: PathBuf,
    proxy_port: u16,
    profile: PathBuf,
    home: ShellHome,
    confinement: Confinement,
    isolation: Isolation,
}

/// The HOME, the profile directory and the Landlock ruleset (blocking file system work).
fn prepare(
    chromium: &Path,
    profile: &Path,
    protected: &[PathBuf],
    proxy_port: u16,
) -> Result<Prepared, LaunchError> {
    use std::os::unix::fs::DirBuilderExt;
    let failed = |error: std::io::Error| LaunchError::Sandbox(error.to_string());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(profile)
        .map_err(failed)?;
    let home = ShellHome::create().map_err(failed)?;
    let reach = Reach {
        writes: Writes::Workspace,
        network: true,
    };
    let path = chromium
        .parent()
        .map(|dir| dir.display().to_string())
        .unwrap_or_default();
    let search = format!("{}:{path}", sandbox::shell_path());
    // The profile stands where the shell's workspace would: the one directory it may write
    // besides its HOME. Chromium resolves its own install directory (`/usr/lib/chromium`),
    // which the system directories cover.
    let confinement = Confinement::prepare(&ConfinementRequest {
        workspace: profile,
        extra_workspaces: &[],
        reach,
        home: home.path(),
        protected,
        path: &search,
        tcp_connect_only: Some(proxy_port),
    })
    .map_err(|error| LaunchError::Sandbox(error.to_string()))?;
    let namespaces =
        sandbox::namespace_support(sandbox::find_bash(&sandbox::shell_path()).as_deref());
    Ok(Prepared {
        chromium: real_binary(chromium),
        proxy_port,
        profile: profile.to_path_buf(),
        home,
        confinement,
        isolation: Isolation::new(reach, namespaces.is_available()),
    })
}

/// A pipe whose both ends are close-on-exec: (read end, write end).
fn pipe_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut ends: [libc::c_int; 2] = [-1; 2];
    // SAFETY: pipe2 fills the two descriptors, which we then own.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

fn spawn(prepared: Prepared) -> Result<Chromium, LaunchError> {
    let Prepared {
        chromium,
        proxy_port,
        profile,
        home,
        confinement,
        isolation,
    } = prepared;
    let spawn_failed = |confined: &str, error: std::io::Error| LaunchError::Spawn {
        path: chromium.display().to_string(),
        confined: confined.to_string(),
        error,
    };
    let confined = match (confinement.is_active(), isolation.has_namespaces()) {
        (true, true) => " under Landlock in its own namespaces",
        (true, false) => " under Landlock",
        (false, true) => " in its own namespaces",
        (false, false) => "",
    }
    .to_string();
    // Commands: we write, Chromium reads on 3. Answers and events: Chromium writes on 4.
    let (commands_read, commands_write) =
        pipe_pair().map_err(|error| spawn_failed(&confined, error))?;
    let (answers_read, answers_write) =
        pipe_pair().map_err(|error| spawn_failed(&confined, error))?;
    let mut command = tokio::process::Command::new(&chromium);
    command
        .arg(format!(
            "--user-data-dir={}",
            profile.join("chromium").display()
        ))
        .arg(format!("--browser-subprocess-path={}", chromium.display()))
        .args(proxy_flags(proxy_port))
        .args(FLAGS)
        .current_dir(home.path())
        .env_clear()
        .env("PATH", sandbox::shell_path())
        .env("LANG", "C.UTF-8")
        .envs(home.environment())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let (child_reads, child_writes) = (commands_read.as_raw_fd(), answers_write.as_raw_fd());
    // The confinement first: its Landlock ruleset's descriptor may itself be 3 or 4 (numbers a
    // closed session left free), which placing the pipes there would replace — the child's
    // `landlock_restrict_self` then failed with EBADFD ("File descriptor in bad state").
    isolation.install(confinement.into_ruleset(), &mut command);
    // SAFETY: only dup/dup2/fcntl on descriptors prepared before the fork (async-signal-safe).
    // The originals are close-on-exec; the copies on 3 and 4 are not.
    unsafe {
        command.pre_exec(move || place_pipe_ends(child_reads, child_writes));
    }
    let mut child = command
        .spawn()
        .map_err(|error| spawn_failed(&confined, error))?;
    let said = StderrTail::default();
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(said.clone().collect(stderr));
    }
    drop((commands_read, answers_write));
    let to_browser = pipe::Sender::from_owned_fd(commands_write)
        .map_err(|error| spawn_failed(&confined, error))?;
    let from_browser = pipe::Receiver::from_owned_fd(answers_read)
        .map_err(|error| spawn_failed(&confined, error))?;
    Ok(Chromium {
        child,
        cdp: Cdp::start(to_browser, from_browser),
        confined: confined.trim().to_string(),
        said,
        _home: home,
    })
}

/// In the child before exec: the commands' read end on 3, the answers' write end on 4 (moved
/// out of the way first, in case either already sits on 3 or 4).
fn place_pipe_ends(reads: libc::c_int, writes: libc::c_int) -> std::io::Result<()> {
    // SAFETY: descriptor duplication in the child; see the caller.
    unsafe {
        let reads_high = libc::fcntl(reads, libc::F_DUPFD_CLOEXEC, 10);
        let writes_high = libc::fcntl(writes, libc::F_DUPFD_CLOEXEC, 10);
        if reads_high < 0 || writes_high < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(reads_high, 3) < 0 || libc::dup2(writes_high, 4) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

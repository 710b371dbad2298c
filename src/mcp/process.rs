//! Stdio MCP servers as child processes that never outlive their link.
//!
//! Three layers make sure no server process is left behind:
//! 1. The child runs in its own process group (`process_group(0)`), and [`ServerProcess`]'s
//!    `Drop` kills the whole group with SIGKILL — so a link that stops, restarts or panics takes
//!    the server and everything it spawned (`npx` → `node`) with it.
//! 2. On Linux the child asks the kernel for SIGKILL when the daemon dies (`PR_SET_PDEATHSIG`),
//!    which covers a daemon killed with SIGKILL.
//! 3. Every spawn is recorded in `mcp_processes` with a random token that is also put in the
//!    child's environment (`CLAWVISOR_MCP_TOKEN`); at boot, [`reap`] kills the groups of recorded
//!    rows whose processes still carry their token (grandchildren escape `PDEATHSIG`). A process
//!    without the token is never touched, so a recycled pid never hits a stranger.
//!
//! The child's environment is cleared: it gets PATH, HOME, LANG, USER, TMPDIR, the server's `env`
//! and `env_from` — never the daemon's own API keys and bot tokens.

use std::collections::BTreeMap;
use std::process::Stdio;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use crate::config::McpServerConfig;
use crate::protocol::mcp::McpError;
use crate::secrets::Secret;
use crate::store::mcp::ProcessRow;

/// The environment variable that marks a server process (and what it spawns) as ours.
pub const TOKEN_VAR: &str = "CLAWVISOR_MCP_TOKEN";

/// Variables of the daemon's environment a server inherits.
const INHERITED: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "USER", "TMPDIR", "TZ"];

/// A running server process. Dropping it kills its whole process group.
pub struct ServerProcess {
    pub pid: u32,
    pub token: String,
    child: Option<Child>,
}

/// The pipes of a freshly spawned server.
pub struct ServerPipes {
    pub stdout: ChildStdout,
    pub stdin: ChildStdin,
    pub stderr: Option<ChildStderr>,
}

impl ServerProcess {
    /// The row that records this process for the boot-time reaper.
    pub fn row(&self, server: &str) -> ProcessRow {
        ProcessRow {
            token: self.token.clone(),
            server: server.to_string(),
            pid: i64::from(self.pid),
            pgid: i64::from(self.pid),
            started_ms: crate::clock::now_ms(),
        }
    }

    /// Takes the child to await its exit (the group is still killed when `self` drops).
    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// Kills the whole process group now.
    pub fn kill_group(&self) {
        kill_group(self.pid);
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        kill_group(self.pid);
    }
}

fn kill_group(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    if pid <= 1 {
        return;
    }
    // ESRCH (the group is gone already) is the expected outcome after a clean exit.
    let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
}

/// Spawns a stdio server in its own process group, with a cleared environment.
pub fn spawn(
    server: &McpServerConfig,
    secrets: &BTreeMap<String, Secret>,
) -> Result<(ServerProcess, ServerPipes), McpError> {
    let token = random_token();
    let mut command = Command::new(&server.command);
    command
        .args(&server.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for var in INHERITED {
        if let Ok(value) = std::env::var(var) {
            command.env(var, value);
        }
    }
    command.envs(&server.env);
    for (child_var, daemon_var) in &server.env_from {
        match secrets.get(daemon_var) {
            Some(secret) => {
                command.env(child_var, secret.expose());
            }
            None => {
                return Err(McpError::Spawn(format!(
                    "environment variable {daemon_var} (for {child_var}) is not set"
                )));
            }
        }
    }
    command.env(TOKEN_VAR, &token);
    if let Some(cwd) = &server.cwd {
        command.current_dir(cwd);
    }
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::getpid();
        // SAFETY: the closure runs in the forked child before exec and only calls
        // async-signal-safe functions (prctl, getppid, _exit).
        unsafe {
            command.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
                // The daemon may have died between fork and prctl: then nobody would kill us.
                if nix::unistd::getppid() != parent {
                    nix::libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    let mut child = command
        .spawn()
        .map_err(|error| McpError::Spawn(format!("cannot start `{}`: {error}", server.command)))?;
    let pid = child
        .id()
        .ok_or_else(|| McpError::Spawn("the server exited at once".into()))?;
    let (stdout, stdin, stderr) = (child.stdout.take(), child.stdin.take(), child.stderr.take());
    // From here on, dropping `process` kills the group.
    let process = ServerProcess {
        pid,
        token,
        child: Some(child),
    };
    let (Some(stdout), Some(stdin)) = (stdout, stdin) else {
        return Err(McpError::Spawn("the server's pipes are missing".into()));
    };
    Ok((
        process,
        ServerPipes {
            stdout,
            stdin,
            stderr,
        },
    ))
}

fn random_token() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

/// Kills what is left of recorded process groups whose members still carry their token.
/// Returns how many processes were killed. Never fails: a problem is only logged.
pub fn reap(rows: &[ProcessRow]) -> usize {
    if rows.is_empty() {
        return 0;
    }
    let mut killed = 0;
    let processes = list_processes();
    for row in rows {
        let marker = format!("{TOKEN_VAR}={}", row.token);
        let ours: Vec<&ProcInfo> = processes
            .iter()
            .filter(|process| process.environ.contains(&marker))
            .collect();
        if ours.is_empty() {
            continue;
        }
        tracing::warn!(server = %row.server, pgid = row.pgid, processes = ours.len(),
            "reaping MCP server processes left by a previous daemon");
        let mut groups: Vec<i32> = ours.iter().map(|process| process.pgid).collect();
        groups.sort_unstable();
        groups.dedup();
        for group in groups {
            if group > 1 {
                let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
            }
        }
        for process in ours {
            let _ = nix::sys::signal::kill(Pid::from_raw(process.pid), Signal::SIGKILL);
            killed += 1;
        }
    }
    killed
}

struct ProcInfo {
    pid: i32,
    pgid: i32,
    environ: Vec<String>,
}

/// Every process of this user readable in /proc, with its group and environment.
fn list_processes() -> Vec<ProcInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut processes = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        let Some(pgid) = process_group_of(pid) else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let environ = environ
            .split(|byte| *byte == 0)
            .filter_map(|entry| std::str::from_utf8(entry).ok())
            .filter(|entry| entry.starts_with(TOKEN_VAR))
            .map(str::to_string)
            .collect();
        processes.push(ProcInfo { pid, pgid, environ });
    }
    processes
}

/// The process group of `pid` from `/proc/<pid>/stat` (None when it is gone or a zombie).
pub fn process_group_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: parse after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    let _ppid = fields.next()?;
    fields.next()?.parse().ok()
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn members_of_group(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| process_group_of(*pid) == Some(pgid))
        .collect()
}

/// Kills server processes a killed daemon (or node) left behind, then forgets every recorded
/// row (at boot, before any server is started).
pub async fn reap_recorded(store: &crate::store::Store) {
    let rows = match store.read(crate::store::mcp::all).await {
        Ok(rows) => rows,
        Err(error) => {
            tracing::warn!(%error, "cannot read the recorded MCP server processes");
            return;
        }
    };
    if rows.is_empty() {
        return;
    }
    let tokens: Vec<String> = rows.iter().map(|row| row.token.clone()).collect();
    let killed = tokio::task::spawn_blocking(move || reap(&rows))
        .await
        .unwrap_or(0);
    if killed > 0 {
        tracing::warn!(killed, "killed MCP server processes left by a previous run");
    }
    let forgotten = store
        .write(move |conn| {
            for token in &tokens {
                crate::store::mcp::delete(conn, token)?;
            }
            Ok(())
        })
        .await;
    if let Err(error) = forgotten {
        tracing::warn!(%error, "cannot forget the reaped MCP server processes");
    }
}

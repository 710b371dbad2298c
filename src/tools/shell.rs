//! `shell`: runs one command with `bash --noprofile --norc -c` in the agent's workspace, confined.
//!
//! Off unless `settings.shell_enabled`. How the command is executed and confined is in
//! [`crate::sandbox`]: always bash (the grammar the policy classifier reads; the call is refused
//! when bash is missing), an environment built from nothing (PATH, LANG, and a fresh private HOME
//! per call outside the workspace with the XDG directories and TMPDIR in it; never the daemon's
//! own environment, which holds API keys and bot tokens), and a Landlock ruleset that keeps the
//! command to the system directories, the workspace and that HOME. It runs in a process group of
//! its own with stdin closed; stdout and stderr are captured, keeping the start and the end of
//! each when they are longer than `settings.shell_max_output`.
//!
//! Invariant: no process started by a call outlives it, nor the daemon. When the shell exits, on
//! timeout, on cancellation, and when the call's future is dropped (the dispatcher gave up on it),
//! the whole process group is killed with SIGKILL. Where the kernel allows namespaces, the command
//! is PID 1 of its own PID namespace, killed (with every process in the namespace, `setsid` ones
//! included) when the group is killed or the daemon dies ([`crate::sandbox::namespaces`]).
//!
//! The profile a command runs with is the [`Reach`] the classifier gave it, the same one the
//! approval prompt stated (`describe_call`): the kernel makes the rating true.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, Reach, RiskLevel, Writes};
use crate::sandbox::{self, Confinement, Isolation, ShellHome, landlock_rules::ConfinementRequest};
use crate::secrets::redact;
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::tools::workspace::Workspace;

/// No call runs longer than this, whatever `settings.shell_timeout` says.
pub const SHELL_TIMEOUT_CEILING: Duration = Duration::from_secs(30 * 60);
/// `timeout()` (the dispatcher's bound) exceeds the ceiling by this much, so that the call's own
/// timeout fires first and reports the partial output.
const DISPATCHER_GRACE: Duration = Duration::from_secs(15);
/// After the shell exited and its group was killed, the pipes normally close at once; a process
/// that left the group may keep them open, so reading stops after this long.
const PIPE_DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);
const READ_CHUNK_BYTES: usize = 8192;

/// `shell`.
pub struct ShellTool;

const SHELL_FIELDS: &[&str] = &["command"];

/// The risk of one command.
///
/// The deterministic classifier: quote-aware split, each part classified, the highest level wins.
fn assess_shell(command: &str) -> Assessment {
    crate::policy::shell::classify_shell(command)
}

impl Tool for ShellTool {
    fn name(&self) -> &str {
        "shell"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "shell".to_string(),
            description: "Run a bash command (bash -c) in your workspace and get its exit \
                          code, stdout and stderr. No input is available, long outputs are \
                          shortened, and processes do not outlive the call (background jobs are \
                          killed when the command ends). HOME and TMPDIR are a fresh empty \
                          directory for each call, deleted after it; only your workspace and \
                          that directory are writable, system directories are read-only, \
                          other processes cannot be seen (no ps), and git reads no global \
                          configuration. The kernel holds each command to what it was rated: \
                          a command that only reads cannot write anything and has no network \
                          (not even 127.0.0.1); one that writes in your workspace has no \
                          network; a command that needs the network (curl, git clone, pip \
                          install) or writes elsewhere asks the user first and then runs with \
                          exactly that."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command line, e.g. `ls -la && wc -l notes/*.md`."
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Destructive
    }

    /// What the kernel lets this command do. A command rated L0 runs reading only and one rated
    /// L1 writing only the workspace, both without network, so the gate may treat them as a read
    /// and a write; everything else (and every command on a machine that cannot enforce its
    /// profile) stays destructive.
    fn effect_for(&self, args: &Value, _ctx: &ToolContext) -> Effect {
        let Some(command) = command_argument(args) else {
            return Effect::Destructive;
        };
        let assessment = assess_shell(command);
        if !sandbox::protections()
            .missing_for(assessment.reach)
            .is_empty()
        {
            return Effect::Destructive;
        }
        match (assessment.level, assessment.reach) {
            (RiskLevel::L0, Reach::READ_ONLY) => Effect::ReadOnly,
            (RiskLevel::L0 | RiskLevel::L1, reach)
                if !reach.network && reach.writes <= Writes::Workspace =>
            {
                Effect::Write
            }
            _ => Effect::Destructive,
        }
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        if !ctx.settings.shell_enabled {
            return Assessment::new(RiskLevel::L3, "shell is disabled for this agent");
        }
        match command_argument(args) {
            Some(command) => assess_shell(command),
            None => Assessment::new(RiskLevel::L2, "invalid arguments; the call will fail"),
        }
    }

    /// The command, then the profile it will run with (and what this machine cannot enforce
    /// of it), so that the approval prompt states what the kernel will allow.
    fn describe_call(&self, args: &Value) -> String {
        let Some(command) = command_argument(args) else {
            return "shell: (invalid arguments)".to_string();
        };
        let reach = assess_shell(command).reach;
        let mut described = format!("shell: {}\nruns with {}", redact(command), reach.describe());
        let missing = sandbox::protections().missing_for(reach);
        if !missing.is_empty() {
            described.push_str(&format!(
                "\nnot enforced on this machine: {}",
                missing.join("; ")
            ));
        }
        described
    }

    /// The program: the first word of the command.
    fn target(&self, args: &Value) -> String {
        command_argument(args)
            .and_then(|command| command.split_whitespace().next())
            .map(|program| redact(program).into_owned())
            .unwrap_or_default()
    }

    fn timeout(&self) -> Duration {
        SHELL_TIMEOUT_CEILING + DISPATCHER_GRACE
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("shell", &args, SHELL_FIELDS)?;
            let command = parsed.required_str("command")?;
            if command.trim().is_empty() {
                return Err(ToolError::InvalidArguments(
                    "shell: `command` is empty".to_string(),
                ));
            }
            if !ctx.settings.shell_enabled {
                return Err(ToolError::Refused(format!(
                    "shell is disabled for agent `{}`; the operator can enable it with \
                     `shell_enabled = true` in the agent's [tools] settings",
                    ctx.agent
                )));
            }
            // The profile the approval prompt stated: the classifier is deterministic, so this is
            // the reach the gate assessed.
            run_confined(command, assess_shell(command).reach, ctx).await
        })
    }
}

/// Runs `command` in the agent's workspace inside the sandbox profile `reach` (the shell tool
/// passes the classifier's; tests pass one directly, standing in for a misread command).
pub async fn run_confined(
    command: &str,
    reach: Reach,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let workspace =
        Workspace::new(&ctx.workspace).map_err(|error| ToolError::Failed(error.to_string()))?;
    let limits = RunLimits {
        timeout: ctx.settings.shell_timeout.min(SHELL_TIMEOUT_CEILING),
        max_output: ctx.settings.shell_max_output,
    };
    let path = sandbox::shell_path();
    let bash = sandbox::find_bash(&path)
        .ok_or_else(|| ToolError::Refused(sandbox::BASH_MISSING.to_string()))?;
    let prepared = prepare(
        workspace.root().to_path_buf(),
        ctx.settings.extra_roots.clone(),
        ctx.settings.protected_paths.clone(),
        path.clone(),
        reach,
    )
    .await?;
    let launch = Launch {
        bash: &bash,
        path: &path,
        working_directory: workspace.root(),
        home: &prepared.home,
    };
    let result = run_command(command, launch, prepared.sandbox, limits, &ctx.cancel).await;
    prepared.home.remove().await;
    result
}

fn command_argument(args: &Value) -> Option<&str> {
    Args::parse("shell", args, SHELL_FIELDS)
        .ok()
        .and_then(|parsed| parsed.optional_str("command").ok().flatten())
}

/// What a call needs before its command starts: the private HOME and its sandbox.
struct Prepared {
    home: ShellHome,
    sandbox: Sandbox,
}

/// The kernel's side of one call: the Landlock ruleset and the namespaces the command enters.
pub struct Sandbox {
    pub confinement: Confinement,
    pub isolation: Isolation,
}

impl Sandbox {
    /// Makes `command` start inside this sandbox.
    pub fn install(self, command: &mut tokio::process::Command) {
        self.isolation
            .install(self.confinement.into_ruleset(), command);
    }

    /// How the failure to start is described: `under Landlock in its own namespaces`.
    fn describe(&self) -> &'static str {
        match (
            self.confinement.is_active(),
            self.isolation.has_namespaces(),
        ) {
            (true, true) => " under Landlock in its own namespaces",
            (true, false) => " under Landlock",
            (false, true) => " in its own namespaces",
            (false, false) => "",
        }
    }
}

/// Creates the call's HOME and builds its ruleset on the blocking pool (both touch the disk).
async fn prepare(
    workspace: PathBuf,
    extra_workspaces: Vec<PathBuf>,
    protected: Vec<PathBuf>,
    path: String,
    reach: Reach,
) -> Result<Prepared, ToolError> {
    let work = move || -> Result<Prepared, ToolError> {
        let home = ShellHome::create().map_err(|error| {
            ToolError::Failed(format!(
                "could not create the command's private HOME in {}: {error}",
                std::env::temp_dir().display()
            ))
        })?;
        let confinement = Confinement::prepare(&ConfinementRequest {
            workspace: &workspace,
            extra_workspaces: &extra_workspaces,
            reach,
            home: home.path(),
            protected: &protected,
            path: &path,
            tcp_connect_only: None,
        })
        .map_err(|error| ToolError::Failed(error.to_string()))?;
        let namespaces = sandbox::namespace_support(sandbox::find_bash(&path).as_deref());
        let isolation = Isolation::new(reach, namespaces.is_available());
        Ok(Prepared {
            home,
            sandbox: Sandbox {
                confinement,
                isolation,
            },
        })
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join_error) => Err(ToolError::Failed(format!(
            "preparing the command's sandbox failed: {join_error}"
        ))),
    }
}

/// Where and how the command starts.
struct Launch<'a> {
    bash: &'a Path,
    path: &'a str,
    working_directory: &'a Path,
    home: &'a ShellHome,
}

struct RunLimits {
    timeout: Duration,
    max_output: usize,
}

/// How the wait for the shell ended.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

async fn run_command(
    command_line: &str,
    launch: Launch<'_>,
    sandbox: Sandbox,
    limits: RunLimits,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let mut command = tokio::process::Command::new(launch.bash);
    // `--noprofile --norc`: no startup file; the environment is built from nothing below, so
    // `BASH_ENV`, `ENV`, `SHELLOPTS`, `BASHOPTS` and exported functions are never inherited.
    command
        .arg("--noprofile")
        .arg("--norc")
        .arg("-c")
        .arg(command_line)
        .current_dir(launch.working_directory)
        .env_clear()
        .env("PATH", launch.path)
        .env("LANG", "C.UTF-8")
        .envs(launch.home.environment())
        // No implicit bare repositories, fsmonitor, hooks or `ext::` transport: a repository
        // planted in the workspace cannot make `git status` run code.
        .envs(crate::policy::shell::git_hardening_environment())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let confined = sandbox.describe();
    sandbox.install(&mut command);
    let mut child = command.spawn().map_err(|error| {
        ToolError::Failed(format!(
            "could not start {}{confined}: {error}",
            launch.bash.display()
        ))
    })?;
    // The child is its own group leader (`process_group(0)`), so its pid is the group id. `id()` is
    // only `None` once the child was reaped, which cannot have happened yet.
    let group = ProcessGroupKiller {
        group: child.id().map(|pid| Pid::from_raw(pid as i32)),
    };

    // Each half of a capture holds up to `max_output / 2` bytes; rendering shares `max_output`
    // between the two streams.
    let stdout_capture = Arc::new(Mutex::new(BoundedCapture::new(limits.max_output)));
    let stderr_capture = Arc::new(Mutex::new(BoundedCapture::new(limits.max_output)));
    // The readers live in a JoinSet so that dropping this future aborts them too.
    let mut readers = JoinSet::new();
    if let Some(stdout) = child.stdout.take() {
        readers.spawn(capture(stdout, Arc::clone(&stdout_capture)));
    }
    if let Some(stderr) = child.stderr.take() {
        readers.spawn(capture(stderr, Arc::clone(&stderr_capture)));
    }

    let ending = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => Ending::Exited(status),
            Err(error) => {
                group.kill();
                return Err(ToolError::Failed(format!("waiting for the shell failed: {error}")));
            }
        },
        () = tokio::time::sleep(limits.timeout) => Ending::TimedOut,
        () = cancel.cancelled() => Ending::Cancelled,
    };
    // In every case: whatever is left of the group (background jobs, or everything on timeout and
    // cancellation) is killed now. After a normal exit the shell was already reaped; its pid stays
    // reserved as the group id while any member lives, so this cannot hit an unrelated process
    // group unless the whole group is gone and the pid was reused in between.
    group.kill();
    let status = match ending {
        Ending::Exited(status) => Some(status),
        // Killed above; reaping is immediate.
        Ending::TimedOut | Ending::Cancelled => child.wait().await.ok(),
    };
    let _ = tokio::time::timeout(PIPE_DRAIN_AFTER_EXIT, async {
        while readers.join_next().await.is_some() {}
    })
    .await;
    readers.abort_all();

    if matches!(ending, Ending::Cancelled) {
        return Err(ToolError::Cancelled);
    }
    let stdout = take_capture(&stdout_capture);
    let stderr = take_capture(&stderr_capture);
    let body = render_streams(&stdout, &stderr, limits.max_output);
    match ending {
        Ending::TimedOut => Ok(ToolOutput::error(format!(
            "timed out after {}; the command and every process it started were killed\n{body}",
            humantime::format_duration(limits.timeout)
        ))),
        _ => Ok(ToolOutput::ok(format!(
            "{}\n{body}",
            describe_status(status)
        ))),
    }
}

fn describe_status(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    let Some(status) = status else {
        return "exit status unknown".to_string();
    };
    if let Some(code) = status.code() {
        return format!("exit code: {code}");
    }
    match status.signal() {
        Some(signal) => {
            let name = Signal::try_from(signal)
                .map(|signal| signal.as_str().to_string())
                .unwrap_or_else(|_| format!("signal {signal}"));
            format!("killed by {name}")
        }
        None => "exit status unknown".to_string(),
    }
}

/// Kills a process group with SIGKILL, now or when dropped.
struct ProcessGroupKiller {
    group: Option<Pid>,
}

impl ProcessGroupKiller {
    fn kill(&self) {
        if let Some(group) = self.group {
            // ESRCH (nothing left in the group) is the normal case after a clean exit.
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

impl Drop for ProcessGroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn capture(mut stream: impl AsyncRead + Unpin, into: Arc<Mutex<BoundedCapture>>) {
    let mut buffer = vec![0u8; READ_CHUNK_BYTES];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                // A poisoned lock means a reader panicked mid-push; the bytes kept are still valid.
                let mut capture = into.lock().unwrap_or_else(|poison| poison.into_inner());
                capture.push(&buffer[..read]);
            }
        }
    }
}

fn take_capture(capture: &Arc<Mutex<BoundedCapture>>) -> BoundedCapture {
    let mut guard = capture.lock().unwrap_or_else(|poison| poison.into_inner());
    std::mem::replace(&mut *guard, BoundedCapture::new(0))
}

/// The first and the last bytes of a stream, and how many there were in all. Reading continues
/// past the limit (a blocked writer would never exit) but only the two ends are kept.
#[derive(Debug)]
struct BoundedCapture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    total: u64,
}

impl BoundedCapture {
    fn new(capacity: usize) -> BoundedCapture {
        BoundedCapture {
            head: Vec::new(),
            tail: VecDeque::new(),
            half: capacity / 2,
            total: 0,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let head_room = self.half.saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(head_room.min(chunk.len()));
        self.head.extend_from_slice(to_head);
        self.tail.extend(rest);
        if self.tail.len() > self.half {
            let excess = self.tail.len() - self.half;
            self.tail.drain(..excess);
        }
    }

    fn kept(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// The stream as text in at most about `budget` bytes: its start, a note of what was left
    /// out, its end.
    fn render(&self, budget: usize) -> String {
        let omitted_in_capture = self.total - self.kept() as u64;
        if omitted_in_capture == 0 && self.kept() <= budget {
            let mut bytes = self.head.clone();
            bytes.extend(self.tail.iter());
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        let head_len = self.head.len().min(budget / 2);
        let tail_len = self.tail.len().min(budget - head_len);
        let tail_start = self.tail.len() - tail_len;
        let omitted = self.total - (head_len + tail_len) as u64;
        let tail: Vec<u8> = self.tail.iter().skip(tail_start).copied().collect();
        format!(
            "{}\n[… {omitted} bytes omitted …]\n{}",
            String::from_utf8_lossy(&self.head[..head_len]),
            String::from_utf8_lossy(&tail)
        )
    }
}

/// Both streams in at most about `max_output` bytes: stderr gets at least a quarter when both
/// are long (errors matter), and whatever stdout leaves unused.
fn render_streams(stdout: &BoundedCapture, stderr: &BoundedCapture, max_output: usize) -> String {
    if stdout.total == 0 && stderr.total == 0 {
        return "(no output)".to_string();
    }
    let stderr_budget = stderr
        .kept()
        .min((max_output / 4).max(max_output.saturating_sub(stdout.kept())));
    let stdout_budget = max_output - stderr_budget;
    let mut sections = Vec::new();
    if stdout.total > 0 {
        sections.push(format!("--- stdout ---\n{}", stdout.render(stdout_budget)));
    }
    if stderr.total > 0 {
        sections.push(format!("--- stderr ---\n{}", stderr.render(stderr_budget)));
    }
    sections.join("\n")
}

//! The real `clawvisor` binary as a child process, for crash tests: start it on a directory, wait
//! until it is up, kill it with SIGKILL (or stop it with SIGTERM), start it again on the same data.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub struct DaemonProcess {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every line read so far: the log (stderr) and what the daemon printed (stdout).
    pub log: Vec<String>,
    pub studio: Option<String>,
}

/// Writes `clawvisor.toml` and `actors/*.toml` into `dir` (like the in-process harness).
pub fn write_config(dir: &Path, config: &str, agents: &[String]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir.join("actors"))?;
    for entry in std::fs::read_dir(dir.join("actors"))? {
        std::fs::remove_file(entry?.path())?;
    }
    for (index, agent) in agents.iter().enumerate() {
        std::fs::write(dir.join("actors").join(format!("agent{index}.toml")), agent)?;
    }
    let path = dir.join("clawvisor.toml");
    std::fs::write(&path, config)?;
    Ok(path)
}

impl DaemonProcess {
    /// Starts `binary serve --config <dir>/clawvisor.toml` with `env`, and waits until it is up.
    pub fn start(
        binary: &str,
        dir: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<DaemonProcess, String> {
        Self::spawn(Self::serve_command(binary, dir, env))
    }

    /// Like [`start`](Self::start), under an address-space limit of `cap_bytes` (`prlimit --as`,
    /// which execs the daemon: the child's pid is the daemon's).
    pub fn start_capped(
        binary: &str,
        dir: &Path,
        env: &BTreeMap<String, String>,
        cap_bytes: u64,
    ) -> Result<DaemonProcess, String> {
        let serve = Self::serve_command(binary, dir, env);
        let mut command = Command::new("prlimit");
        command
            .arg(format!("--as={cap_bytes}"))
            .arg("--")
            .arg(serve.get_program())
            .args(serve.get_args());
        for (key, value) in serve.get_envs() {
            if let Some(value) = value {
                command.env(key, value);
            }
        }
        Self::spawn(command)
    }

    /// The command [`start`](Self::start) runs.
    fn serve_command(binary: &str, dir: &Path, env: &BTreeMap<String, String>) -> Command {
        let mut command = Command::new(binary);
        command
            .args([
                "--config",
                &dir.join("clawvisor.toml").display().to_string(),
            ])
            .args(["--log-format", "json", "serve"])
            .env("RUST_LOG", "info")
            // The daemon's zone is the test's choice (`env` may set another), never the machine's.
            .env("TZ", "UTC");
        for (key, value) in env {
            command.env(key, value);
        }
        command
    }

    /// Starts `command` (a `serve` the caller built: arguments, working directory,
    /// environment), reading its stdout and stderr, and waits until it is up.
    pub fn spawn(mut command: Command) -> Result<DaemonProcess, String> {
        let binary = command.get_program().to_string_lossy().into_owned();
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| format!("cannot start {binary}: {error}"))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (sender, lines) = mpsc::channel();
        let printed = sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if printed.send(line).is_err() {
                    break;
                }
            }
        });
        let mut process = DaemonProcess {
            child,
            lines,
            log: Vec::new(),
            studio: None,
        };
        let up = process.wait_for_line("clawvisor is up", Duration::from_secs(60));
        if up.is_none() {
            let _ = process.child.kill();
            return Err(format!(
                "the daemon did not come up; log:\n{}",
                process.log.join("\n")
            ));
        }
        process.studio = process
            .log
            .iter()
            .find_map(|line| line.split("listening on http://").nth(1))
            .map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
                    .collect()
            });
        Ok(process)
    }

    /// Reads log lines until one contains `needle`.
    pub fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> Option<String> {
        if let Some(line) = self.log.iter().find(|line| line.contains(needle)) {
            return Some(line.clone());
        }
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// Collects what the log has so far without waiting.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            self.log.push(line);
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the process has ended by itself (an abort, a crash), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A `kB` figure of `/proc/<pid>/status` (`VmPeak`, `VmSize`, `VmHWM`, `VmRSS`), in KiB;
    /// `None` once the process is gone or where there is no `/proc`.
    pub fn status_kib(&self, key: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status.lines().find_map(|line| {
            let value = line.strip_prefix(key)?.strip_prefix(':')?;
            value.split_whitespace().next()?.parse().ok()
        })
    }

    /// SIGKILL: no cleanup of any kind runs.
    pub fn kill(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.drain();
        std::mem::take(&mut self.log)
    }

    /// SIGTERM and wait for the exit status.
    pub fn terminate(
        mut self,
        timeout: Duration,
    ) -> Result<(std::process::ExitStatus, Vec<String>), String> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)
            .map_err(|error| error.to_string())?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().map_err(|error| error.to_string())? {
                self.drain();
                return Ok((status, std::mem::take(&mut self.log)));
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Err("the daemon did not stop in time".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

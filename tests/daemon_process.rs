//! The real binary: start with a temp data dir, wait until ready, SIGTERM, clean exit with the tree
//! stopped in order; then a second start on the same data dir.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clawvisor::testkit::wait_until_blocking;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

fn start(dir: &std::path::Path) -> Running {
    std::fs::create_dir_all(dir.join("actors")).unwrap();
    std::fs::write(
        dir.join("clawvisor.toml"),
        "data_dir = \"data\"\n[agents]\ndir = \"actors\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("actors/helper.toml"),
        "name = \"helper\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"Be brief.\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .args(["--config", dir.join("clawvisor.toml").to_str().unwrap()])
        .args([
            "--studio-bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "serve",
        ])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stderr = child.stderr.take().unwrap();
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    Running {
        child,
        lines,
        log: Vec::new(),
    }
}

impl Running {
    fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => break,
            }
        }
        panic!(
            "no line with `{needle}` within {timeout:?}; log so far:\n{}",
            self.log.join("\n")
        );
    }

    fn studio_addr(&mut self) -> String {
        let line = self.wait_for_line("studio listening on http://", Duration::from_secs(60));
        let start = line.find("http://").unwrap() + "http://".len();
        line[start..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
            .collect()
    }

    fn drain(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => self.log.push(line),
                Err(_) => break,
            }
        }
    }
}

fn http_get(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

fn wait_ready(addr: &str) {
    wait_until_blocking(
        Duration::from_secs(30),
        &format!("{addr} to become ready"),
        || http_get(addr, "/readyz") == Some(200),
    );
    assert_eq!(http_get(addr, "/healthz"), Some(200));
}

fn stop_order(log: &[String]) -> Vec<String> {
    log.iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|entry| entry["message"] == "actor stopped" && entry["supervisor"] == "root")
        .filter_map(|entry| entry["actor"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn sigterm_stops_the_tree_in_order_and_a_second_start_works() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..2 {
        let mut daemon = start(dir.path());
        let addr = daemon.studio_addr();
        wait_ready(&addr);
        kill(Pid::from_raw(daemon.child.id() as i32), Signal::SIGTERM).unwrap();
        let status = daemon.child.wait().unwrap();
        daemon.drain(Duration::from_secs(2));
        assert!(
            status.success(),
            "round {round}: exit {status:?}\n{}",
            daemon.log.join("\n")
        );
        assert_eq!(
            stop_order(&daemon.log),
            [
                "studio",
                "reloader",
                "channels",
                "handoffs",
                "agents",
                "local",
                "mcp",
                "scheduler",
                "memory",
                "approvals",
                "events",
                "store"
            ],
            "round {round}: input stops first, the store last"
        );
        assert!(
            daemon
                .log
                .iter()
                .any(|line| line.contains("stopped cleanly"))
        );
    }
    // Both boots are recorded, both with a clean stop.
    let conn = rusqlite::Connection::open(dir.path().join("data/clawvisor.db")).unwrap();
    let (boots, clean): (i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), COUNT(stopped_ms) FROM daemon_boots",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!((boots, clean), (2, 2));
}

#[test]
fn a_configuration_error_exits_78_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "[studio]\nbind = \"nowhere\"\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .args([
            "--config",
            dir.path().join("bad.toml").to_str().unwrap(),
            "serve",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bad.toml") && stderr.contains("[studio].bind"),
        "{stderr}"
    );
}

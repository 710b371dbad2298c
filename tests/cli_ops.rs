//! The operator's commands for jobs and MCP servers, on the real binary: `jobs preview` in the
//! configured zone; `jobs add|list|pause|resume|rm` on a stopped data directory (then seen and
//! fired by a daemon started on it) and through a running daemon's API; `mcp list|tools|call`
//! against the MCP test server with the daemon stopped and running; `doctor` naming each MCP
//! server's tools or its error.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use chrono::{Datelike, NaiveDateTime, Weekday};
use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until_blocking;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const SERVER: &str = env!("CARGO_BIN_EXE_clawvisor-mcp-test-server");

/// Runs the binary on `dir`'s config with `args` (global flags first).
fn clawvisor<S: AsRef<std::ffi::OsStr>>(dir: &Path, args: &[S]) -> Output {
    Command::new(BINARY)
        .args(["--config", dir.join("clawvisor.toml").to_str().unwrap()])
        .args(args)
        .env("TZ", "UTC")
        .output()
        .expect("the binary runs")
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs the command and returns its stdout, failing the test when it fails.
fn succeeds<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(dir: &Path, args: &[S]) -> String {
    let output = clawvisor(dir, args);
    let (stdout, stderr) = text(&output);
    assert!(
        output.status.success(),
        "{args:?} failed: {stdout}\n{stderr}"
    );
    stdout
}

/// Runs the command, expects it to fail, and returns stdout and stderr together.
fn fails<S: AsRef<std::ffi::OsStr> + std::fmt::Debug>(
    dir: &Path,
    args: &[S],
) -> (Option<i32>, String) {
    let output = clawvisor(dir, args);
    let (stdout, stderr) = text(&output);
    assert!(
        !output.status.success(),
        "{args:?} should fail: {stdout}\n{stderr}"
    );
    (output.status.code(), format!("{stdout}{stderr}"))
}

fn audit_rows(dir: &Path) -> Vec<(String, String, String)> {
    let conn = rusqlite::Connection::open(dir.join("data/clawvisor.db")).unwrap();
    let mut statement = conn
        .prepare("SELECT actor, action, subject FROM audit_log ORDER BY id")
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn mcp_server(name: &str, command: &str, enabled: bool) -> String {
    format!(
        "[[mcp.servers]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = \"{command}\"\ntrust = \"trusted\"\nagents = [\"*\"]\nenabled = {enabled}\n"
    )
}

#[test]
fn jobs_preview_prints_weekdays_at_nine_in_the_configured_zone() {
    let dir = ScratchDir::new("clawvisor-cli-preview").unwrap();
    let config = format!(
        "timezone = \"Europe/Berlin\"\n{}",
        config_toml("http://127.0.0.1:9/v1", "")
    );
    write_config(dir.path(), &config, &[agent_toml("ada", "")]).unwrap();

    let stdout = succeeds(dir.path(), &["jobs", "preview", "0 9 * * 1-5"]);
    assert!(
        stdout.contains("Europe/Berlin"),
        "the zone is named: {stdout}"
    );
    let times: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("  "))
        .collect();
    assert_eq!(times.len(), 5, "five fire times by default: {stdout}");
    for time in &times {
        // `2026-11-27 09:00:00 CET (Fri)`
        let parts: Vec<&str> = time.split(' ').collect();
        assert_eq!(parts.len(), 4, "{time}");
        let local = NaiveDateTime::parse_from_str(
            &format!("{} {}", parts[0], parts[1]),
            "%Y-%m-%d %H:%M:%S",
        )
        .unwrap();
        assert_eq!(parts[1], "09:00:00", "{time}");
        assert!(
            !matches!(local.weekday(), Weekday::Sat | Weekday::Sun),
            "only weekdays: {time}"
        );
        assert!(matches!(parts[2], "CET" | "CEST"), "Berlin's time: {time}");
        assert_eq!(parts[3], format!("({})", local.format("%a")), "{time}");
    }
    // No data directory was needed: preview asks no daemon and no database.
    assert!(!dir.path().join("data/clawvisor.db").exists());

    let stdout = succeeds(
        dir.path(),
        &[
            "jobs",
            "preview",
            "0 9 * * 1-5",
            "--tz",
            "America/New_York",
            "--count",
            "3",
        ],
    );
    let times: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("  "))
        .collect();
    assert_eq!(times.len(), 3, "{stdout}");
    assert!(
        times
            .iter()
            .all(|time| time.contains(" 09:00:00 E")
                && (time.contains("EST") || time.contains("EDT"))),
        "{stdout}"
    );
    let (_, said) = fails(dir.path(), &["jobs", "preview", "0 25 * * *"]);
    assert!(
        said.contains("0 25 * * *"),
        "a bad schedule is named: {said}"
    );
}

/// A scripted model that echoes, and a migrated data directory whose config has the agent `ada`.
fn migrated_with_ada(name: &str) -> (tokio::runtime::Runtime, ScriptedLlm, ScratchDir) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let llm = runtime
        .block_on(ScriptedLlm::start(Script::new().rule(Rule::echo())))
        .unwrap();
    let dir = ScratchDir::new(name).unwrap();
    write_config(
        dir.path(),
        &config_toml(&llm.base_url(), ""),
        &[agent_toml("ada", "")],
    )
    .unwrap();
    succeeds(dir.path(), &["migrate"]);
    (runtime, llm, dir)
}

#[test]
fn jobs_changed_while_stopped_are_kept_by_the_daemon_and_then_changed_through_it() {
    let (_runtime, _llm, dir) = migrated_with_ada("clawvisor-cli-jobs");
    let path = dir.path();

    // Stopped: changes go to the database, each with its audit row.
    let fire = chrono::Utc::now() + chrono::Duration::seconds(15);
    let at = fire.format("%Y-%m-%d %H:%M:%S").to_string();
    let stdout = succeeds(
        path,
        &[
            "jobs",
            "add",
            "ada",
            &at,
            "--tz",
            "UTC",
            "Say",
            "the",
            "scheduled",
            "words",
        ],
    );
    assert!(stdout.contains("Job #1 created"), "{stdout}");
    assert!(
        stdout.contains("once at"),
        "an `at` schedule was guessed: {stdout}"
    );
    let stdout = succeeds(
        path,
        &[
            "jobs",
            "add",
            "ada",
            "0 9 * * 1-5",
            "--tz",
            "Europe/Berlin",
            "Morning",
            "summary",
        ],
    );
    assert!(stdout.contains("Job #2 created"), "{stdout}");
    assert!(
        stdout.contains("09:00:00 CE") && stdout.contains("(Europe/Berlin)"),
        "next fire in the job's zone: {stdout}"
    );
    let stdout = succeeds(path, &["jobs", "pause", "2"]);
    assert!(
        stdout.contains("[paused]") && stdout.contains("next: none"),
        "{stdout}"
    );
    let stdout = succeeds(path, &["jobs", "resume", "2"]);
    assert!(stdout.contains("[active]"), "{stdout}");
    let stdout = succeeds(path, &["jobs", "rm", "2"]);
    assert!(stdout.contains("[cancelled]"), "{stdout}");
    let stdout = succeeds(path, &["jobs", "list"]);
    assert!(
        stdout.contains("#1 ada [active]") && !stdout.contains("#2"),
        "{stdout}"
    );
    let stdout = succeeds(path, &["jobs", "list", "--all"]);
    assert!(stdout.contains("#2 ada [cancelled]"), "{stdout}");
    let (_, said) = fails(path, &["jobs", "pause", "2"]);
    assert!(said.contains("job #2 is cancelled"), "{said}");
    let (_, said) = fails(path, &["jobs", "add", "bob", "@daily", "hi"]);
    assert!(said.contains("no agent is named `bob`"), "{said}");
    let audited: Vec<(String, String, String)> = audit_rows(path);
    let cli: Vec<&str> = audited
        .iter()
        .filter(|(actor, _, _)| actor == "operator (cli)")
        .map(|(_, action, _)| action.as_str())
        .collect();
    assert_eq!(
        cli,
        [
            "job.created",
            "job.created",
            "job.paused",
            "job.resumed",
            "job.cancelled"
        ]
    );

    // A daemon started on the data directory loads the job and fires it at its time.
    let daemon = DaemonProcess::start(BINARY, path, &BTreeMap::new()).unwrap();
    let db = path.join("data/clawvisor.db");
    let (fire_ms, status): (i64, String) = wait_until_blocking(
        Duration::from_secs(60),
        "the job added while stopped fires",
        || {
            let conn = rusqlite::Connection::open(&db).map_err(|e| e.to_string())?;
            conn.query_row(
                "SELECT fire_ms, status FROM job_runs WHERE job_id = 1 AND status = 'succeeded'",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .map_err(|error| error.to_string())
        },
    );
    assert_eq!(status, "succeeded");
    assert_eq!(
        fire_ms / 1000,
        fire.timestamp(),
        "it fired for its own time"
    );

    // Running: the port is chosen at boot, so the command must be told where Studio is — and
    // never writes behind the daemon's back instead.
    let (_, said) = fails(path, &["jobs", "list"]);
    assert!(said.contains("--studio-bind"), "{said}");
    let studio = daemon.studio.clone().expect("studio address");
    let through = |args: &[&str]| -> Vec<String> {
        ["--studio-bind", studio.as_str()]
            .iter()
            .chain(args)
            .map(|arg| arg.to_string())
            .collect()
    };
    let run = |args: &[&str]| succeeds(path, &through(args));
    let stdout = run(&["jobs", "list", "--all"]);
    assert!(
        stdout.contains("#1 ada [done]") && stdout.contains("last: succeeded"),
        "{stdout}"
    );
    let stdout = run(&["jobs", "add", "ada", "*/30 * * * *", "Check", "the", "mail"]);
    assert!(stdout.contains("Job #3 created"), "{stdout}");
    let stdout = run(&["jobs", "pause", "3"]);
    assert!(stdout.contains("[paused]"), "{stdout}");
    let stdout = run(&["jobs", "resume", "3"]);
    assert!(
        stdout.contains("[active]") && stdout.contains("next: 20"),
        "{stdout}"
    );
    let stdout = run(&["jobs", "rm", "3"]);
    assert!(stdout.contains("[cancelled]"), "{stdout}");
    let (_, said) = fails(path, &through(&["jobs", "pause", "99"]));
    assert!(
        said.contains("no task #99") && said.contains("404"),
        "{said}"
    );
    let studio_changes: Vec<String> = audit_rows(path)
        .into_iter()
        .filter(|(actor, _, subject)| actor == "operator (studio)" && subject == "job:3")
        .map(|(_, action, _)| action)
        .collect();
    assert_eq!(
        studio_changes,
        ["job.created", "job.paused", "job.resumed", "job.cancelled"]
    );
    daemon.terminate(Duration::from_secs(30)).unwrap();
}

/// True while a process with this id exists (zombies included).
fn process_exists(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
}

#[test]
fn mcp_commands_reach_the_test_server_with_the_daemon_stopped_and_running() {
    let dir = ScratchDir::new("clawvisor-cli-mcp").unwrap();
    let path = dir.path();
    let servers = |broken: bool| {
        let mut text = "[mcp]\nconnect_timeout = \"5s\"\n".to_string();
        text.push_str(&mcp_server("tester", SERVER, true));
        if broken {
            text.push_str(&mcp_server(
                "broken",
                "/nonexistent/clawvisor-no-such-server",
                true,
            ));
        }
        text.push_str(&mcp_server("off", SERVER, false));
        text
    };
    let agents = [agent_toml("ada", "")];
    write_config(
        path,
        &config_toml("http://127.0.0.1:9/v1", &servers(true)),
        &agents,
    )
    .unwrap();

    // Stopped (no database even): from the config, and short sessions of their own.
    let stdout = succeeds(path, &["mcp", "list"]);
    assert!(
        stdout.contains("tester  stdio  enabled  daemon stopped")
            && stdout.contains("off  stdio  disabled"),
        "{stdout}"
    );
    let stdout = succeeds(path, &["mcp", "tools", "tester"]);
    assert!(stdout.contains("tester: 6 tool(s)"), "{stdout}");
    assert!(
        stdout.contains(
            "echo\n    Echoes the text back\n    - text: string (required) — The text to send back"
        ),
        "{stdout}"
    );
    let stdout = succeeds(
        path,
        &[
            "mcp",
            "call",
            "tester",
            "echo",
            r#"{"text": "hello there"}"#,
        ],
    );
    assert_eq!(stdout.trim(), "hello there");
    let (code, said) = fails(path, &["mcp", "call", "tester", "echo", "{text: hello"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("not valid JSON"), "{said}");
    let (_, said) = fails(path, &["mcp", "call", "tester", "echo", "{}"]);
    assert!(
        said.contains("do not fit the tool") && said.contains("text"),
        "{said}"
    );
    let (_, said) = fails(path, &["mcp", "call", "tester", "nosuch", "{}"]);
    assert!(
        said.contains("has no tool `nosuch`") && said.contains("echo"),
        "{said}"
    );
    let (_, said) = fails(path, &["mcp", "call", "nowhere", "echo", "{}"]);
    assert!(said.contains("no MCP server is named `nowhere`"), "{said}");
    // The server's process ends with the command.
    let stdout = succeeds(path, &["mcp", "call", "tester", "pid", "{}"]);
    let pid: i32 = stdout.trim().parse().expect("a pid");
    wait_until_blocking(
        Duration::from_secs(10),
        "the server process is gone",
        || !process_exists(pid),
    );

    // doctor connects to each enabled server.
    let output = clawvisor(path, &["doctor"]);
    let (stdout, _) = text(&output);
    assert!(
        stdout.contains("[ ok ] mcp server tester: stdio, 6 tool(s): ") && stdout.contains("echo"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[ ok ] mcp server off: stdio: disabled"),
        "{stdout}"
    );
    let broken = stdout
        .lines()
        .find(|line| line.contains("mcp server broken"))
        .unwrap_or_default();
    assert!(
        broken.starts_with("[FAIL]")
            && broken.contains("cannot start")
            && broken.contains("check `command`"),
        "{stdout}"
    );
    assert!(!output.status.success(), "a broken server fails doctor");

    // Running: the daemon's view and calls through its link.
    write_config(
        path,
        &config_toml("http://127.0.0.1:9/v1", &servers(false)),
        &agents,
    )
    .unwrap();
    let daemon = DaemonProcess::start(BINARY, path, &BTreeMap::new()).unwrap();
    let studio = daemon.studio.clone().expect("studio address");
    let with = |args: &[&str]| -> Vec<String> {
        ["--studio-bind", studio.as_str()]
            .iter()
            .chain(args)
            .map(|arg| arg.to_string())
            .collect()
    };
    let stdout = wait_until_blocking(Duration::from_secs(30), "the link is up", || {
        let stdout = succeeds(path, &with(&["mcp", "list"]));
        if stdout.contains("tester  stdio  enabled  up  6 tool(s)") {
            Ok(stdout)
        } else {
            Err(stdout)
        }
    });
    assert!(
        stdout.contains("off  stdio  disabled  disabled"),
        "{stdout}"
    );
    let stdout = succeeds(
        path,
        &with(&[
            "mcp",
            "call",
            "tester",
            "echo",
            r#"{"text": "through the daemon"}"#,
        ]),
    );
    assert_eq!(stdout.trim(), "through the daemon");
    let stdout = succeeds(
        path,
        &with(&["mcp", "call", "tester", "add", r#"{"a": 2, "b": 3}"#]),
    );
    assert_eq!(stdout.trim(), "5");
    let (_, said) = fails(path, &with(&["mcp", "call", "tester", "nosuch", "{}"]));
    assert!(
        said.contains("has no tool `nosuch`") && said.contains("404"),
        "{said}"
    );
    let (_, said) = fails(path, &with(&["mcp", "call", "off", "echo", "{}"]));
    assert!(said.contains("disabled"), "{said}");
    let calls: Vec<String> = audit_rows(path)
        .into_iter()
        .filter(|(actor, action, _)| actor == "operator (studio)" && action == "mcp.tool_called")
        .map(|(_, _, subject)| subject)
        .collect();
    assert_eq!(calls, ["mcp:tester/echo", "mcp:tester/add"]);
    daemon.terminate(Duration::from_secs(30)).unwrap();
}

/// `clawvisor chat` runs no Studio and no scheduler, so while only it runs, `jobs` works on the
/// database (it used to take the chat for a daemon and fail with "Studio … does not answer"),
/// by the scheduler's own rules: a one-shot resumed after its time is recorded as missed.
#[test]
fn jobs_work_on_the_database_beside_a_running_chat() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    // Studio's port is chosen at boot: a chat taken for a daemon would end in "--studio-bind".
    let (_runtime, _llm, dir) = migrated_with_ada("clawvisor-cli-chat-jobs");
    let path = dir.path();

    let mut chat = Command::new(BINARY)
        .args(["--config", path.join("clawvisor.toml").to_str().unwrap()])
        .args(["chat", "ada"])
        .env("TZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the chat starts");
    let mut greeting = String::new();
    BufReader::new(chat.stdout.take().expect("piped stdout"))
        .read_line(&mut greeting)
        .unwrap();
    assert!(greeting.starts_with("Chatting with ada"), "{greeting}");
    let db = path.join("data/clawvisor.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (pid, kind): (u32, String) = conn
        .query_row(
            "SELECT pid, kind FROM daemon_boots WHERE stopped_ms IS NULL",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    assert_eq!((pid, kind.as_str()), (chat.id(), "local"));

    let fire = chrono::Utc::now() + chrono::Duration::seconds(3);
    let at = fire.format("%Y-%m-%d %H:%M:%S").to_string();
    let stdout = succeeds(path, &["jobs", "add", "ada", &at, "--tz", "UTC", "Ping"]);
    assert!(stdout.contains("Job #1 created"), "{stdout}");
    let stdout = succeeds(path, &["jobs", "pause", "1"]);
    assert!(stdout.contains("[paused]"), "{stdout}");
    wait_until_blocking(
        Duration::from_secs(30),
        "the paused one-shot's time passes",
        || chrono::Utc::now().timestamp() > fire.timestamp(),
    );
    let stdout = succeeds(path, &["jobs", "resume", "1"]);
    assert!(stdout.contains("[done]"), "{stdout}");
    let (status, detail, fire_ms): (String, String, i64) = conn
        .query_row(
            "SELECT status, detail, fire_ms FROM job_runs WHERE job_id = 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert_eq!(status, "missed");
    assert!(detail.contains("while it was paused"), "{detail}");
    assert_eq!(fire_ms / 1000, fire.timestamp());
    let stdout = succeeds(path, &["jobs", "list", "--all"]);
    assert!(stdout.contains("#1 ada [done]"), "{stdout}");

    // The chat still holds the database: a restore into its data directory is refused before the
    // archive is even read.
    let (_, said) = fails(path, &["restore", "no-such-archive.tar.zst", "--force"]);
    assert!(
        said.contains(&format!("pid {pid}")) && said.contains("stop it before restoring"),
        "{said}"
    );
    drop(chat.stdin.take());
    let exited = chat.wait().unwrap();
    assert!(exited.success(), "the chat leaves at end of input");
}

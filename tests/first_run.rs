//! A first run from the binary alone, and Studio reached from elsewhere, as the README says.
//!
//! The real binary runs in an empty temporary directory that is its working directory and its
//! `HOME`, with nothing else in its environment but `PATH` (and what a case sets): `clawvisor
//! init` writes the starter files, prints three lines and never overwrites a file; a first
//! `clawvisor serve` there writes the same files, starts, answers `/healthz` and names canonical
//! paths; a second one uses the files as they are. In a terminal (`script` gives it one) `serve`
//! prints the first-run line, the login link and the next step plainly, and the link works
//! through an SSH tunnel's other port. Behind a proxy (`[studio] public_url`, as with Tailscale
//! serve, Caddy or nginx) Studio accepts the public Host, prints its links under the public URL,
//! refuses a foreign Host or Origin, and off loopback it refuses to start without `token_env`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clawvisor::config;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::wait_until_blocking;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
/// The public name of the Tailscale and proxy cases.
const PUBLIC_HOST: &str = "clawvisor.tail1234.ts.net";

/// `clawvisor <args>` in `dir`, with `dir` as `HOME` and an otherwise empty environment.
fn clawvisor(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("TZ", "UTC")
        .env("RUST_LOG", "info");
    command
}

fn run(dir: &Path, args: &[&str]) -> Output {
    clawvisor(dir, args).output().expect("the binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// An empty directory, by its canonical path.
fn empty_dir() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("a temporary directory");
    let path = std::fs::canonicalize(temp.path()).expect("it exists");
    (temp, path)
}

/// No path a person reads goes through `..` or `.`.
fn assert_canonical(text: &str) {
    assert!(
        !text.contains("/../") && !text.contains("/./"),
        "a path is not canonical in:\n{text}"
    );
}

/// Starts `clawvisor serve` in `dir` on a free port; waits until it is up.
fn serve(dir: &Path, env: &[(&str, &str)]) -> DaemonProcess {
    let mut command = clawvisor(
        dir,
        &[
            "--studio-bind",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "serve",
        ],
    );
    for (key, value) in env {
        command.env(key, value);
    }
    DaemonProcess::spawn(command).expect("the daemon starts")
}

fn log_line(daemon: &mut DaemonProcess, needle: &str) -> String {
    daemon
        .wait_for_line(needle, Duration::from_secs(30))
        .unwrap_or_else(|| panic!("no `{needle}` in the log:\n{}", daemon.log.join("\n")))
}

#[test]
fn init_writes_the_starter_files_says_three_lines_and_never_overwrites() {
    let (_temp, dir) = empty_dir();
    let output = run(&dir, &["init"]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 3, "three lines:\n{printed}");
    assert_canonical(&printed);
    let config_file = dir.join("clawvisor.toml");
    let agent_file = dir.join("actors/assistant.toml");
    assert!(
        lines[0].starts_with("Wrote ")
            && lines[0].contains(&config_file.display().to_string())
            && lines[0].contains(&agent_file.display().to_string())
            && lines[0].contains(&dir.join("data").display().to_string()),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("`clawvisor serve`")
            && lines[1].contains("http://127.0.0.1:7070")
            && lines[1].contains("clawvisor studio-link"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains("open Studio to finish setting up"),
        "{}",
        lines[2]
    );
    // The files are the ones built into the binary, and the data directory is there.
    let written = std::fs::read_to_string(&config_file).unwrap();
    assert_eq!(written, config::starter_config());
    assert!(written.contains("data_dir = \"data\""));
    assert_eq!(
        std::fs::read_to_string(&agent_file).unwrap(),
        config::SHIPPED_AGENT
    );
    assert!(dir.join("data").is_dir());
    assert!(!dir.join("config").exists(), "no config/ folder");

    // Every command run there reads them.
    let check = run(&dir, &["config", "check"]);
    assert!(check.status.success(), "{check:?}");
    let checked = stdout(&check);
    assert!(
        checked.contains(&format!("config: {} (ok)", config_file.display()))
            && checked.contains(&format!("data_dir: {}", dir.join("data").display()))
            && checked.contains(&format!("from {}", dir.join("actors").display())),
        "{checked}"
    );

    // Again: nothing is overwritten, and the message says which file and what to do.
    std::fs::write(&config_file, format!("{written}\n# my own edit\n")).unwrap();
    let again = run(&dir, &["init"]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    let message = stderr(&again);
    assert!(
        message.contains(&format!("{} already exists", config_file.display()))
            && message.contains("nothing was written")
            && message.contains("move it aside"),
        "{message}"
    );
    assert!(
        std::fs::read_to_string(&config_file)
            .unwrap()
            .ends_with("# my own edit\n")
    );
}

#[test]
fn init_elsewhere_says_how_to_start_there_and_respects_what_is_already_there() {
    let (_temp, root) = empty_dir();
    // Into a new directory given relative to the working directory.
    let output = run(&root, &["init", "homes/../house"]);
    assert!(output.status.success(), "{output:?}");
    let printed = stdout(&output);
    assert_canonical(&printed);
    let house = root.join("house");
    assert!(
        printed.contains(&format!("`cd {} && clawvisor serve`", house.display())),
        "{printed}"
    );
    assert!(house.join("clawvisor.toml").is_file() && house.join("data").is_dir());
    assert!(
        !root.join("homes").exists(),
        "`homes/..` is read, not created"
    );

    // A data directory named on the command line goes into the file (the systemd install).
    let output = run(&root, &["--data-dir", "var/lib/cv", "init", "etc/cv"]);
    assert!(output.status.success(), "{output:?}");
    let data_dir = root.join("var/lib/cv");
    assert!(data_dir.is_dir());
    assert!(
        stdout(&output).contains(&format!("the data is kept in {}", data_dir.display())),
        "{}",
        stdout(&output)
    );
    let check = run(&root.join("etc/cv"), &["config", "check"]);
    assert!(
        stdout(&check).contains(&format!("data_dir: {}", data_dir.display())),
        "later commands find the data without the flag: {}",
        stdout(&check)
    );

    // A directory in the repository's layout keeps it: `serve` there reads config/clawvisor.toml.
    let repository = root.join("repository");
    std::fs::create_dir_all(repository.join("config")).unwrap();
    std::fs::create_dir_all(repository.join("actors")).unwrap();
    std::fs::write(
        repository.join("config/clawvisor.toml"),
        config::SHIPPED_CONFIG,
    )
    .unwrap();
    std::fs::write(
        repository.join("actors/assistant.toml"),
        config::SHIPPED_AGENT,
    )
    .unwrap();
    let refused = run(&repository, &["init"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        stderr(&refused).contains("config/clawvisor.toml already exists"),
        "{}",
        stderr(&refused)
    );
    assert!(!repository.join("clawvisor.toml").exists());
    let check = run(&repository, &["config", "check"]);
    assert!(
        stdout(&check).contains(&format!("data_dir: {}", repository.join("data").display()))
            && stdout(&check).contains(&format!(
                "config: {} (ok)",
                repository.join("config/clawvisor.toml").display()
            )),
        "the repository's layout still works, with canonical paths: {check:?}"
    );

    // Agents an operator already wrote are kept; no example is added beside them.
    let own = root.join("own");
    std::fs::create_dir_all(own.join("actors")).unwrap();
    std::fs::write(
        own.join("actors/mine.toml"),
        "name = \"mine\"\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\ninstructions = \"Be brief.\"\n",
    )
    .unwrap();
    let output = run(&own, &["init"]);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout(&output).contains(&format!(
            "kept the agents already in {}",
            own.join("actors").display()
        )),
        "{}",
        stdout(&output)
    );
    assert!(!own.join("actors/assistant.toml").exists());
    assert!(stdout(&run(&own, &["config", "check"])).contains("- mine ("));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_serve_in_an_empty_directory_writes_the_files_and_a_second_uses_them() {
    let (_temp, dir) = empty_dir();
    let mut daemon = serve(&dir, &[]);
    let first_run = log_line(&mut daemon, "First run: wrote");
    let studio_line = log_line(&mut daemon, "Studio is at http://127.0.0.1:");
    let next = log_line(&mut daemon, "Next: open Studio to finish setting up");
    for line in [&first_run, &studio_line, &next] {
        assert!(line.contains("\"level\":\"INFO\""), "at info: {line}");
    }
    assert!(
        first_run.contains(&dir.join("clawvisor.toml").display().to_string())
            && first_run.contains(&dir.join("actors/assistant.toml").display().to_string()),
        "{first_run}"
    );
    let up = log_line(&mut daemon, "clawvisor is up");
    assert!(
        up.contains(&format!(
            "\"config\":\"{}\"",
            dir.join("clawvisor.toml").display()
        )) && up.contains(&format!("\"data_dir\":\"{}\"", dir.join("data").display())),
        "{up}"
    );
    let studio = daemon.studio.clone().expect("Studio's address in the log");
    let health = reqwest::get(format!("http://{studio}/healthz"))
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let (status, log) = daemon.terminate(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{status:?}");
    assert_canonical(&log.join("\n"));
    assert!(
        !log.iter().any(|line| line.contains("/login?token=")),
        "no login link without a terminal"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("clawvisor.toml")).unwrap(),
        config::starter_config()
    );
    assert!(dir.join("actors/assistant.toml").is_file());
    assert!(dir.join("data/clawvisor.db").is_file());
    assert!(!dir.join("config").exists(), "no empty config/ folder");

    // The operator edits the file; the second start reads it and writes nothing.
    let edited =
        config::starter_config().replace("# timezone = \"\"", "timezone = \"Europe/Berlin\"");
    assert_ne!(edited, config::starter_config());
    std::fs::write(dir.join("clawvisor.toml"), &edited).unwrap();
    let mut daemon = serve(&dir, &[]);
    let up = log_line(&mut daemon, "clawvisor is up");
    assert!(
        up.contains("Europe/Berlin"),
        "the edited file is used: {up}"
    );
    log_line(&mut daemon, "Next: ");
    let (status, log) = daemon.terminate(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        !log.iter().any(|line| line.contains("First run")),
        "a second run writes nothing:\n{}",
        log.join("\n")
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("clawvisor.toml")).unwrap(),
        edited
    );
}

/// A process under `script`, which gives it a terminal; its output, line by line.
struct InTerminal {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl InTerminal {
    fn start(dir: &Path, command_line: &str) -> InTerminal {
        let mut child = Command::new("script")
            .args(["-q", "-e", "-c", command_line, "/dev/null"])
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("TZ", "UTC")
            .env("TERM", "dumb")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("script (util-linux) runs");
        let output = child.stdout.take().expect("piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                if sender
                    .send(line.trim_end_matches('\r').to_string())
                    .is_err()
                {
                    break;
                }
            }
        });
        InTerminal {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The index of the first line (from the start) containing `needle`, waiting for it.
    fn wait_for(&mut self, needle: &str) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(index) = self.seen.iter().position(|line| line.contains(needle)) {
                return index;
            }
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no `{needle}` in:\n{}", self.seen.join("\n")));
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!("no `{needle}` in:\n{}", self.seen.join("\n")),
            }
        }
    }
}

impl Drop for InTerminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The process id of the daemon running on `data_dir` (its boot row).
fn daemon_pid(data_dir: &Path) -> i32 {
    let connection = rusqlite::Connection::open(data_dir.join("clawvisor.db")).unwrap();
    connection
        .query_row(
            "SELECT pid FROM daemon_boots WHERE stopped_ms IS NULL ORDER BY id DESC LIMIT 1",
            [],
            |row| row.get(0),
        )
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_terminal_serve_prints_the_link_and_the_next_step_plainly() {
    let (_temp, dir) = empty_dir();
    let mut terminal =
        InTerminal::start(&dir, &format!("{BINARY} --studio-bind 127.0.0.1:0 serve"));
    let studio = terminal.wait_for("log in with http://127.0.0.1:");
    let first_run = studio - 1;
    let next = studio + 1;
    terminal.wait_for("Next: ");
    let lines = terminal.seen.clone();
    assert!(
        lines[first_run].starts_with("First run: wrote ")
            && lines[first_run].contains(&dir.join("clawvisor.toml").display().to_string()),
        "the first-run line, plainly:\n{}",
        lines.join("\n")
    );
    assert!(
        lines[studio].starts_with("Studio is at http://127.0.0.1:"),
        "{}",
        lines[studio]
    );
    assert!(
        lines[next].starts_with("Next: open Studio to finish setting up"),
        "{}",
        lines[next]
    );
    assert!(
        lines[first_run - 1].is_empty() && lines[next + 1..].first().is_none_or(|l| l.is_empty()),
        "set apart from the log by blank lines:\n{}",
        lines.join("\n")
    );
    assert_canonical(&lines.join("\n"));
    let link = lines[studio]
        .split_whitespace()
        .find(|word| word.contains("/login?token="))
        .expect("a login link")
        .to_string();
    // Through `ssh -N -L 17070:127.0.0.1:<port> server` the browser opens the same path on its
    // own port: the Host names loopback, so the link works there.
    let path = link.split_once("127.0.0.1:").unwrap().1;
    let port_and_path = path.split_once('/').unwrap();
    let client = no_redirects();
    let response = client
        .get(format!(
            "http://127.0.0.1:{}/{}",
            port_and_path.0, port_and_path.1
        ))
        .header("host", "localhost:17070")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 303, "the link logs in");
    assert!(response.headers().get("set-cookie").is_some());

    let pid = daemon_pid(&dir.join("data"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let child = &mut terminal.child;
    let status = wait_until_blocking(Duration::from_secs(30), "the daemon stops", || {
        child
            .try_wait()
            .map_err(|error| error.to_string())?
            .ok_or_else(|| "still running".to_string())
    });
    assert!(status.success(), "{status:?}");
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_proxy_studio_answers_its_public_name_and_refuses_others() {
    let (_temp, dir) = empty_dir();
    assert!(run(&dir, &["init"]).status.success());
    let public_url = format!("https://{PUBLIC_HOST}");
    let api_token = "a-long-random-token-for-api-clients-0123456789";
    let env = [
        ("CLAWVISOR_STUDIO_PUBLIC_URL", public_url.as_str()),
        ("CLAWVISOR_STUDIO_TOKEN", api_token),
    ];
    let mut daemon = serve(&dir, &env);
    let told = log_line(&mut daemon, "Studio is at ");
    assert!(
        told.contains(&format!(
            "Studio is at {public_url}: run `clawvisor studio-link`"
        )),
        "{told}"
    );
    let local = format!("http://{}", daemon.studio.clone().expect("bound"));

    // The login link is made under the public URL.
    let mut link_command = clawvisor(&dir, &["studio-link"]);
    for (key, value) in env {
        link_command.env(key, value);
    }
    let link = link_command.output().unwrap();
    assert!(link.status.success(), "{link:?}");
    let link = stdout(&link).trim().to_string();
    let token_path = link
        .strip_prefix(&public_url)
        .unwrap_or_else(|| panic!("the link is under {public_url}: {link}"));

    // What the proxy sends on: the public Host (Caddy and Tailscale keep it; nginx with
    // `proxy_set_header Host $host`).
    let client = no_redirects();
    let foreign = client
        .get(format!("{local}{token_path}"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 421, "a foreign Host is refused");
    let login = client
        .get(format!("{local}{token_path}"))
        .header("host", PUBLIC_HOST)
        .send()
        .await
        .unwrap();
    assert_eq!(
        login.status().as_u16(),
        303,
        "the link works through the proxy"
    );
    let cookie = login
        .headers()
        .get("set-cookie")
        .expect("a session cookie")
        .to_str()
        .unwrap()
        .to_string();
    assert!(cookie.contains("Secure"), "https public_url: {cookie}");
    let session = cookie.split(';').next().unwrap().to_string();

    let whoami = client
        .get(format!("{local}/api/v1/session"))
        .header("host", PUBLIC_HOST)
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(whoami.status().as_u16(), 200);
    let csrf = whoami.json::<serde_json::Value>().await.unwrap()["csrf"]
        .as_str()
        .unwrap()
        .to_string();
    let elsewhere = client
        .get(format!("{local}/api/v1/session"))
        .header("host", "evil.example")
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(
        elsewhere.status().as_u16(),
        421,
        "the session is not enough"
    );

    // An API client through the proxy: the token from [studio] token_env.
    let with_token = client
        .get(format!("{local}/api/v1/session"))
        .header("host", PUBLIC_HOST)
        .bearer_auth(api_token)
        .send()
        .await
        .unwrap();
    assert_eq!(with_token.status().as_u16(), 200);

    // A mutation from the console: its Origin is the public URL; another site's is refused.
    let logout = |origin: &str| {
        client
            .post(format!("{local}/api/v1/session/logout"))
            .header("host", PUBLIC_HOST)
            .header("origin", origin)
            .header("cookie", &session)
            .header("x-csrf-token", &csrf)
            .send()
    };
    assert_eq!(
        logout("https://evil.example")
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert!(logout(&public_url).await.unwrap().status().is_success());
    let (status, _) = daemon.terminate(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{status:?}");

    // Off loopback (a proxy on another machine), Studio needs token_env set.
    let refused = run(&dir, &["--studio-bind", "0.0.0.0:7070", "config", "check"]);
    assert_eq!(refused.status.code(), Some(78), "{refused:?}");
    assert!(
        stderr(&refused).contains("[studio].token_env")
            && stderr(&refused).contains("CLAWVISOR_STUDIO_TOKEN"),
        "{}",
        stderr(&refused)
    );
    let mut accepted = clawvisor(&dir, &["--studio-bind", "0.0.0.0:7070", "config", "check"]);
    accepted.env("CLAWVISOR_STUDIO_TOKEN", api_token);
    let accepted = accepted.output().unwrap();
    assert!(accepted.status.success(), "{accepted:?}");
}

//! Tool nodes (issue #34) with real processes on loopback: `clawvisor node serve` as its own
//! process with its own data directory, and the daemon's side (the real `nodes add` command, the
//! in-process daemon, or its library calls) with another. Pairing, pinned certificates both
//! ways, approval tokens (missing, replayed, expired, altered, foreign), and an agent using a
//! node's tools through the daemon's approval desk while the node is killed and comes back; the
//! shell's confinement table (`confinement_cases`, shared with `tests/confinement.rs`) and
//! classifier cases on the node's shell; `/readyz` and the daemon's audit naming the node.

mod browser;
mod confinement_cases;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use browser::Browser;
use clawvisor::config::{Dur, NodeEntry};
use clawvisor::domain::ChatKey;
use clawvisor::node::{client, keys, pairing, token};
use clawvisor::policy::{RiskLevel, classify_shell};
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir};
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::world::World;
use clawvisor::testkit::{wait_until, wait_until_blocking};
use confinement_cases::{Case, OnNode, Outcome, Profile, Setting};
use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

/// `clawvisor node serve` as a child process (killed when dropped).
struct NodeProcess {
    child: Child,
    url: String,
    dir: PathBuf,
    lines: mpsc::Receiver<String>,
    /// What it printed before it said where it listens.
    early: Vec<String>,
}

/// The node's config in `dir` (written with one root, `work`, unless written before).
fn node_config(dir: &Path) -> PathBuf {
    let path = dir.join("node.toml");
    if !path.exists() {
        write_node_config(dir, &[], "");
    }
    path
}

/// Writes the node's config into `dir`: its data directory, `[node] roots` = `work` then
/// `more_roots` (directories of `dir`, created), then `extra` (more TOML).
fn write_node_config(dir: &Path, more_roots: &[&str], extra: &str) -> PathBuf {
    let path = dir.join("node.toml");
    let roots: Vec<String> = std::iter::once("work")
        .chain(more_roots.iter().copied())
        .map(|name| {
            std::fs::create_dir_all(dir.join(name)).unwrap();
            format!("\"{}\"", dir.join(name).display())
        })
        .collect();
    std::fs::write(
        &path,
        format!(
            "data_dir = \"{}\"\n[node]\nroots = [{}]\n{extra}",
            dir.join("data").display(),
            roots.join(", ")
        ),
    )
    .unwrap();
    path
}

impl NodeProcess {
    /// Starts a node on `dir` listening on `bind` and waits for its address.
    fn start(dir: &Path, bind: &str) -> NodeProcess {
        let mut child = Command::new(BINARY)
            .arg("--config")
            .arg(node_config(dir))
            .args(["node", "serve", "--bind", bind])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the node starts");
        let (sender, lines) = mpsc::channel();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut log = Vec::new();
        let url = loop {
            let line = lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("the node did not say where it listens: {log:?}"));
            if let Some(rest) = line.split("node listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
            log.push(line);
        };
        NodeProcess {
            child,
            url,
            dir: dir.to_path_buf(),
            lines,
            early: log,
        }
    }

    /// The address it listens on (`127.0.0.1:port`), to start it again on the same port.
    fn bind(&self) -> String {
        self.url.trim_start_matches("https://").to_string()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Every line it printed so far.
    fn log(&self) -> Vec<String> {
        let mut log = self.early.clone();
        log.extend(self.lines.try_iter());
        log
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Counts rows of the node's own database.
    fn count(&self, sql: &str) -> i64 {
        let conn = rusqlite::Connection::open(self.data_dir().join("clawvisor.db")).unwrap();
        conn.query_row(sql, [], |row| row.get(0)).unwrap()
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `clawvisor node pair` on the node's directory and returns the code.
fn pair_code(dir: &Path) -> String {
    let output = Command::new(BINARY)
        .arg("--config")
        .arg(node_config(dir))
        .args(["node", "pair"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("pairing code: "))
        .expect("a code is printed")
        .trim()
        .to_string()
}

/// A started, paired node and the daemon's data directory.
async fn paired_node(root: &Path, name: &str) -> (NodeProcess, PathBuf) {
    let node = NodeProcess::start(&root.join(name), "127.0.0.1:0");
    let code = pair_code(&root.join(name));
    let daemon_data = root.join("daemon").join("data");
    client::pair(&daemon_data, name, &node.url, &code)
        .await
        .expect("pairing works");
    (node, daemon_data)
}

#[test]
fn pairing_pins_both_sides_and_foreign_certificates_are_refused() {
    let root = ScratchDir::new("clawvisor-nodes-pair").unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let node = NodeProcess::start(&root.path().join("nas"), "127.0.0.1:0");
    let daemon = root.path().join("daemon");
    std::fs::create_dir_all(daemon.join("actors")).unwrap();
    let config = daemon.join("clawvisor.toml");
    std::fs::write(
        &config,
        format!(
            "# the operator's comment stays\ndata_dir = \"{}\"\n",
            daemon.join("data").display()
        ),
    )
    .unwrap();
    let nodes_add = |name: &str, url: &str, code: &str| {
        Command::new(BINARY)
            .arg("--config")
            .arg(&config)
            .args(["nodes", "add", name, url, code, "--agent", "ada"])
            .output()
            .unwrap()
    };
    // A wrong code pairs nothing, and says what to check.
    pair_code(&root.path().join("nas"));
    let wrong = nodes_add("nas", &node.url, "AAAAA-BBBBB");
    assert!(!wrong.status.success());
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("pairing code does not match"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
    assert!(!pairing::pin_path(&daemon.join("data"), "nas").exists());
    // The right one pins both sides and writes the entry, keeping the file's comment.
    let code = pair_code(&root.path().join("nas"));
    let added = nodes_add("nas", &node.url, &code);
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.starts_with("# the operator's comment stays"));
    assert!(written.contains("[[nodes]]") && written.contains("name = \"nas\""));
    assert!(written.contains(&format!("url = \"{}\"", node.url)));
    use std::os::unix::fs::PermissionsExt;
    let pin = pairing::pin_path(&daemon.join("data"), "nas");
    assert_eq!(
        std::fs::metadata(&pin).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let daemon_pin = pairing::daemon_pin(&node.data_dir()).unwrap().unwrap();
    let daemon_keys = client::daemon_keys(&daemon.join("data")).unwrap();
    assert_eq!(daemon_pin.fingerprint, daemon_keys.identity.fingerprint());
    assert_eq!(daemon_pin.node_name, "nas");
    // The code was used up.
    assert!(pairing::pending_code(&node.data_dir(), clawvisor::clock::now_ms()).is_none());
    runtime.block_on(async {
        let (health, _) = client::health(&daemon.join("data"), "nas", &node.url)
            .await
            .expect("the paired node answers its daemon");
        assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
        // A node with another certificate at the pinned name is refused by the daemon.
        let impostor = NodeProcess::start(&root.path().join("impostor"), "127.0.0.1:0");
        let refused = client::health(&daemon.join("data"), "nas", &impostor.url).await;
        assert!(refused.is_err(), "{refused:?}");
        // The daemon's certificate is refused by a node it is not paired with (at the handshake).
        let accept_any: clawvisor::node::tls::Acceptor = std::sync::Arc::new(|_: &str| true);
        let daemon_client = client::http_client(
            &daemon_keys.identity,
            accept_any.clone(),
            Duration::from_secs(5),
        )
        .unwrap();
        let refused = daemon_client
            .get(format!("{}/health", impostor.url))
            .send()
            .await;
        assert!(refused.is_err(), "{refused:?}");
        // ... and a stranger's certificate by the paired node.
        let stranger = keys::load_or_create_identity(&root.path().join("stranger"), "x").unwrap();
        let stranger_client =
            client::http_client(&stranger, accept_any, Duration::from_secs(5)).unwrap();
        let refused = stranger_client
            .get(format!("{}/health", node.url))
            .send()
            .await;
        assert!(refused.is_err(), "{refused:?}");
    });
    // `nodes list` shows it answering, with its fingerprint.
    let listed = Command::new(BINARY)
        .arg("--config")
        .arg(&config)
        .args(["nodes", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("nas")
            && listed.contains("answers in")
            && listed.contains("lends 1 folder and 0 MCP servers"),
        "{listed}"
    );
    assert!(
        listed.contains(&daemon_keys_fingerprint_of_node(&node)),
        "{listed}"
    );
    let log = node.log().join("\n");
    assert!(
        log.contains("refused a connection at the TLS handshake"),
        "{log}"
    );
    // `nodes remove` tells the node, which then refuses its former daemon.
    let removed = Command::new(BINARY)
        .arg("--config")
        .arg(&config)
        .args(["nodes", "remove", "nas"])
        .output()
        .unwrap();
    assert!(removed.status.success());
    assert!(String::from_utf8_lossy(&removed.stdout).contains("forgot this daemon"));
    assert!(pairing::daemon_pin(&node.data_dir()).unwrap().is_none());
    assert!(
        !std::fs::read_to_string(&config)
            .unwrap()
            .contains("[[nodes]]")
    );
}

/// The node's own certificate fingerprint (what the daemon pinned).
fn daemon_keys_fingerprint_of_node(node: &NodeProcess) -> String {
    keys::load_or_create_identity(&pairing::node_dir(&node.data_dir()), "unused")
        .unwrap()
        .fingerprint()
}

/// A node's MCP session as the daemon opens it.
async fn session(daemon_data: &Path, name: &str, url: &str) -> clawvisor::mcp::client::Service {
    let entry = NodeEntry {
        name: name.to_string(),
        url: url.to_string(),
        agents: Vec::new(),
        timeout: Dur::secs(30),
        enabled: true,
    };
    let server = clawvisor::node::as_mcp_server(&entry, daemon_data);
    clawvisor::node::link_handshake(&server, daemon_data, Duration::from_secs(10))
        .await
        .expect("the daemon reaches its node")
}

/// A token for `command` as the daemon mints it, with `change` applied to the payload.
fn token_for(
    daemon_data: &Path,
    command: &str,
    change: impl FnOnce(&mut token::TokenPayload),
) -> String {
    let keys = client::daemon_keys(daemon_data).unwrap();
    let arguments = json!({ "command": command });
    let assessment = clawvisor::policy::shell::classify_shell(command);
    let mut payload = token::TokenPayload {
        node: "nas".into(),
        tool: "shell".into(),
        action_hash: token::action_hash("shell", &arguments),
        level: assessment.level.as_str().into(),
        profile: clawvisor::node::handler::profile_for("shell", &assessment),
        expires_ms: clawvisor::clock::now_ms() + 60_000,
        nonce: token::new_nonce(),
    };
    change(&mut payload);
    token::mint(&keys.token_key, &payload)
}

async fn shell(
    service: &clawvisor::mcp::client::Service,
    command: &str,
    token: Option<&str>,
) -> clawvisor::tool::ToolOutput {
    let mut arguments = json!({ "command": command });
    if let Some(token) = token {
        arguments["approval_token"] = Value::String(token.to_string());
    }
    clawvisor::mcp::client::call(service.peer(), "shell", arguments, Duration::from_secs(30))
        .await
        .expect("the node answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_above_l0_run_once_and_only_with_a_valid_token() {
    let root = ScratchDir::new("clawvisor-nodes-token").unwrap();
    let (mut node, daemon_data) = paired_node(root.path(), "nas").await;
    let service = session(&daemon_data, "nas", &node.url).await;
    // L0 runs without a token.
    let listed = shell(&service, "echo hello from the node", None).await;
    assert!(!listed.is_error, "{listed:?}");
    assert!(listed.text.contains("hello from the node"));
    // The node's shell runs in the daemon's kernel sandbox: its own PID namespace, and the
    // node's keys (its data directory) out of reach even of a command that only reads.
    let pid = shell(&service, "echo $$", None).await;
    let pid: u32 = pid.text.trim().lines().last().unwrap().parse().unwrap();
    assert!(
        pid <= 2,
        "the command is not in a PID namespace of its own: pid {pid}"
    );
    let steal = format!(
        "cat {}",
        node.data_dir().join("node").join("identity.key").display()
    );
    let refused = shell(&service, &steal, None).await;
    assert!(
        refused.text.contains("needs the daemon's approval token"),
        "{refused:?}"
    );
    let approved = token_for(&daemon_data, &steal, |_| {});
    let stolen = shell(&service, &steal, Some(&approved)).await;
    assert!(
        !stolen.text.starts_with("exit code: 0") && stolen.text.contains("Permission denied"),
        "even an approved command cannot read the node's key: {stolen:?}"
    );
    // L2 (rm) without a token is refused, in words.
    let l2 = "rm -f victim.txt && echo ran >> ledger.txt";
    let missing = shell(&service, l2, None).await;
    assert!(missing.is_error);
    assert!(
        missing.text.contains("needs the daemon's approval token"),
        "{missing:?}"
    );
    // A valid token runs it once.
    let valid = token_for(&daemon_data, l2, |_| {});
    let ran = shell(&service, l2, Some(&valid)).await;
    assert!(!ran.is_error, "{ran:?}");
    let ledger = root.path().join("nas").join("work").join("ledger.txt");
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), "ran\n");
    // Replayed, expired, for another action, tampered, or signed by another key: refused.
    let replayed = shell(&service, l2, Some(&valid)).await;
    assert!(replayed.text.contains("already used"), "{replayed:?}");
    let expired = token_for(&daemon_data, l2, |payload| {
        payload.expires_ms = clawvisor::clock::now_ms() - 1
    });
    assert!(
        shell(&service, l2, Some(&expired))
            .await
            .text
            .contains("expired")
    );
    let other = token_for(&daemon_data, "rm -f other.txt", |_| {});
    let altered = shell(&service, l2, Some(&other)).await;
    assert!(altered.text.contains("different action"), "{altered:?}");
    let lower = token_for(&daemon_data, l2, |payload| payload.level = "L1".into());
    let lower = shell(&service, l2, Some(&lower)).await;
    assert!(lower.text.contains("rates the action L2"), "{lower:?}");
    let mut tampered = token_for(&daemon_data, l2, |_| {});
    tampered.replace_range(2..3, if &tampered[2..3] == "A" { "B" } else { "A" });
    let tampered = shell(&service, l2, Some(&tampered)).await;
    assert!(tampered.text.contains("not valid"), "{tampered:?}");
    let foreign = token_for(&root.path().join("other-daemon"), l2, |_| {});
    let foreign = shell(&service, l2, Some(&foreign)).await;
    assert!(foreign.text.contains("not valid"), "{foreign:?}");
    // The nonce survives a restart of the node: the replay is still refused.
    drop(service);
    let bind = node.bind();
    node.kill();
    let node = NodeProcess::start(&root.path().join("nas"), &bind);
    let service = session(&daemon_data, "nas", &node.url).await;
    let replayed = shell(&service, l2, Some(&valid)).await;
    assert!(replayed.text.contains("already used"), "{replayed:?}");
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), "ran\n");
    // The node's own records: each accepted token once (the approved cat and rm), both
    // finished, and an audit row per action it ran.
    assert_eq!(
        node.count("SELECT COUNT(*) FROM node_actions WHERE finished_ms IS NOT NULL"),
        2
    );
    assert_eq!(node.count("SELECT COUNT(*) FROM node_actions"), 2);
    assert_eq!(
        node.count("SELECT COUNT(*) FROM audit_log WHERE action = 'node.tool.run'"),
        4,
        "echo, echo $$, the approved cat, the approved rm"
    );
}

/// A token for `command` claiming `level` and `profile`, as a daemon that rated it so mints it.
fn token_claiming(daemon_data: &Path, command: &str, level: RiskLevel, profile: String) -> String {
    let keys = client::daemon_keys(daemon_data).unwrap();
    let payload = token::TokenPayload {
        node: "nas".into(),
        tool: "shell".into(),
        action_hash: token::action_hash("shell", &json!({ "command": command })),
        level: level.as_str().into(),
        profile,
        expires_ms: clawvisor::clock::now_ms() + 60_000,
        nonce: token::new_nonce(),
    };
    token::mint(&keys.token_key, &payload)
}

/// One shared confinement case on the node: a command the classifier rates with the case's
/// profile goes with the token the daemon would mint after approving it (none for L0) and must
/// fare as on the daemon's own shell; a command the case runs narrower than its rating (a
/// misreading) goes with a token claiming the case's rating, and the node, re-classifying,
/// refuses it.
async fn run_on_node(
    service: &clawvisor::mcp::client::Service,
    daemon_data: &Path,
    case: Case,
) -> Outcome {
    case.check_the_classifier();
    let (level, profile) = match case.on_node {
        OnNode::Runs => {
            let assessment = classify_shell(&case.command);
            let profile = clawvisor::node::handler::profile_for("shell", &assessment);
            (assessment.level, profile)
        }
        OnNode::RefusesTheToken => (case.profile.level(), case.profile.reach().describe()),
    };
    let token =
        (level > RiskLevel::L0).then(|| token_claiming(daemon_data, &case.command, level, profile));
    let output = shell(service, &case.command, token.as_deref()).await;
    let refused = output.text.starts_with("the node refused");
    assert_eq!(
        refused,
        case.on_node == OnNode::RefusesTheToken,
        "`{}` ({:?}): {}",
        case.command,
        case.profile,
        output.text
    );
    if refused {
        Outcome::TokenRefused(output.text)
    } else {
        Outcome::Ran(output.text)
    }
}

/// Commands and the level the daemon's classifier gives them; the node must demand exactly that.
const CLASSIFIER_CASES: &[(&str, RiskLevel)] = &[
    ("echo rated", RiskLevel::L0),
    ("ls -la && echo listed", RiskLevel::L0),
    ("touch rated.txt", RiskLevel::L1),
    ("mkdir -p rated.d/sub", RiskLevel::L1),
    ("printenv", RiskLevel::L1),
    ("rm -f rated.txt", RiskLevel::L2),
    ("python3 -c 'print(1)'", RiskLevel::L3),
];

/// "The classifier and sandbox tests run on the node's shell as well": the shared confinement
/// table (`confinement_cases`, also run on the daemon's own shell by `tests/confinement.rs`)
/// through a real `node serve` process, and classifier cases: the node re-classifies each
/// command, refuses a token that claims less than its own rating, and runs it with one that
/// claims exactly that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_confinement_and_classifier_cases_hold_on_the_nodes_shell() {
    let root = ScratchDir::new("clawvisor-nodes-confinement").unwrap();
    let (node, daemon_data) = paired_node(root.path(), "nas").await;
    let service = session(&daemon_data, "nas", &node.url).await;
    for &(command, level) in CLASSIFIER_CASES {
        let assessment = classify_shell(command);
        assert_eq!(assessment.level, level, "the daemon rates `{command}`");
        let profile = clawvisor::node::handler::profile_for("shell", &assessment);
        if level > RiskLevel::L0 {
            let below = RiskLevel::ALL[level as usize - 1];
            let token = (below > RiskLevel::L0)
                .then(|| token_claiming(&daemon_data, command, below, profile.clone()));
            let refused = shell(&service, command, token.as_deref()).await;
            let why = if below == RiskLevel::L0 {
                "needs the daemon's approval token".to_string()
            } else {
                format!("this node rates the action {}", level.as_str())
            };
            assert!(
                refused.is_error && refused.text.contains(&why),
                "`{command}` with {}: {refused:?}",
                below.as_str()
            );
        }
        if level <= RiskLevel::L2 {
            let token = (level > RiskLevel::L0)
                .then(|| token_claiming(&daemon_data, command, level, profile.clone()));
            let ran = shell(&service, command, token.as_deref()).await;
            assert!(
                ran.text.starts_with("exit code: 0") && !ran.text.contains("CARGO"),
                "`{command}` with {}: {ran:?}",
                level.as_str()
            );
        }
    }
    if !clawvisor::sandbox::protections().namespaces.is_available() {
        return;
    }
    let setting = Setting::new(
        &root.path().join("nas").join("work"),
        &node.data_dir(),
        &root.path().join("nas"),
        node.child.id(),
    );
    for profile in [Profile::ReadOnly, Profile::Workspace, Profile::Network] {
        setting
            .run_profile(profile, |case| run_on_node(&service, &daemon_data, case))
            .await;
    }
}

/// The daemon's config for a node `nas` at `url` given to `ada`, with fast link timings.
fn nodes_section(url: &str) -> String {
    format!(
        "[mcp]\nconnect_timeout = \"2s\"\nping_every = \"300ms\"\ndegraded_retry = \"2s\"\n\n\
         [[nodes]]\nname = \"nas\"\nurl = \"{url}\"\nagents = [\"ada\"]\ntimeout = \"30s\"\n"
    )
}

fn node_call(command: &str, trigger: &str) -> Rule {
    Rule::tool_call("nas__shell", json!({ "command": command }).to_string())
        .when_last_user_contains(trigger)
        .times(1)
}

async fn wait_node_tools(harness: &Harness, present: bool) {
    let what = if present {
        "the node's tools are published"
    } else {
        "the node's tools are withdrawn"
    };
    wait_until(Duration::from_secs(20), what, || async {
        let tools = harness.agent_tools("ada").await;
        if tools.iter().any(|tool| tool == "nas__shell") == present {
            Ok(())
        } else {
            Err(format!("tools now {tools:?}"))
        }
    })
    .await
}

async fn pending_approval(harness: &Harness) -> (String, String) {
    wait_until(Duration::from_secs(15), "an approval is asked", || async {
        harness
            .store()
            .read(|conn| {
                Ok(conn
                    .query_row(
                        "SELECT id, action FROM approvals WHERE status = 'pending'",
                        [],
                        |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
                    )
                    .ok())
            })
            .await
            .unwrap()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_uses_a_node_under_the_daemons_approval_desk_and_outlives_the_node() {
    let _ = clawvisor::logging::init("info", clawvisor::config::LogFormat::Text);
    let dir = ScratchDir::new("clawvisor-nodes-agent").unwrap();
    let node_root = ScratchDir::new("clawvisor-nodes-agent-node").unwrap();
    let mut node = NodeProcess::start(&node_root.path().join("nas"), "127.0.0.1:0");
    let code = pair_code(&node_root.path().join("nas"));
    client::pair(&dir.path().join("data"), "nas", &node.url, &code)
        .await
        .unwrap();
    let l2 = "rm -f victim.txt && echo ran >> ledger.txt";
    let script = Script::new()
        .rule(Rule::text("the node answered").when_after_tool_result("nas__shell"))
        .rule(node_call("echo listed on the node", "list"))
        .rule(node_call(l2, "remove"))
        .rule(node_call("sleep 20", "slow"))
        .rule(node_call("echo back again", "again"))
        .rule(Rule::text("fallback"));
    let (llm, harness) = daemon_with_node(dir, script, &node.url).await;
    wait_node_tools(&harness, true).await;
    let chat = ChatKey::cli("nodes");
    // An L0 command runs on the node.
    let reply = harness.ask("ada", &chat, "list the files").await.unwrap();
    assert_eq!(reply.text, "the node answered");
    assert!(last_request(&llm).contains("listed on the node"));
    // An L2 command asks the daemon's desk, naming the machine; approved, it runs once there.
    harness.send("ada", &chat, "remove the victim").unwrap();
    let action = approve_pending(&harness).await;
    assert!(action.starts_with(&format!("on nas: `{l2}`")), "{action}");
    let ledger = node_root.path().join("nas").join("work").join("ledger.txt");
    wait_until(
        Duration::from_secs(15),
        "the approved action ran on the node",
        || async { std::fs::read_to_string(&ledger).ok() },
    )
    .await;
    harness.wait_settled(Duration::from_secs(15)).await;
    assert_eq!(std::fs::read_to_string(&ledger).unwrap(), "ran\n");
    assert_eq!(
        node.count("SELECT COUNT(*) FROM node_actions WHERE outcome = 'ok'"),
        1
    );
    let audited: i64 = harness
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM audit_log WHERE details LIKE '%nas__shell%'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert!(audited >= 1, "the daemon's audit names the node's tool");
    // Each executed call's audit row records which node ran it.
    let by_node: Vec<(String, Option<String>)> = harness
        .store()
        .read(|conn| {
            let mut statement = conn.prepare(
                "SELECT json_extract(details, '$.tool'), json_extract(details, '$.node') \
                 FROM audit_log WHERE action = 'tool.executed' ORDER BY id",
            )?;
            let rows = statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(
        by_node,
        vec![
            ("nas__shell".to_string(), Some("nas".to_string())),
            ("nas__shell".to_string(), Some("nas".to_string())),
        ],
        "the listing and the approved removal, each recorded with its node"
    );
    // The node dies during a command: the run gets an error at once, not after the command.
    harness.send("ada", &chat, "something slow").unwrap();
    wait_until_blocking(Duration::from_secs(15), "the slow command started", || {
        (node.count("SELECT COUNT(*) FROM audit_log WHERE action = 'node.tool.run'") == 3)
            .then_some(())
    });
    let killed_at = std::time::Instant::now();
    let bind = node.bind();
    node.kill();
    wait_until(
        Duration::from_secs(15),
        "the run ended with the node's error",
        || async {
            let request = llm
                .requests()
                .last()
                .cloned()
                .unwrap_or_default()
                .to_string();
            (request.contains("nas__shell") && request.contains("could not run it")).then_some(())
        },
    )
    .await;
    assert!(
        killed_at.elapsed() < Duration::from_secs(15),
        "the run did not wait for the lost command"
    );
    harness.wait_settled(Duration::from_secs(15)).await;
    wait_node_tools(&harness, false).await;
    // The node comes back: the link reconnects and the tools return.
    let node = NodeProcess::start(&node_root.path().join("nas"), &bind);
    wait_node_tools(&harness, true).await;
    let reply = harness.ask("ada", &chat, "again please").await.unwrap();
    assert_eq!(reply.text, "the node answered");
    drop(node);
    harness.stop().await;
}

/// `/readyz` names a node it still waits for as `node:<name>` (not as an MCP server): the paired
/// node is frozen (SIGSTOP), so the link's handshake waits; once it thaws, the link publishes
/// its tools and `/readyz` says ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_a_node_it_waits_for() {
    let dir = ScratchDir::new("clawvisor-nodes-ready").unwrap();
    let node_root = ScratchDir::new("clawvisor-nodes-ready-node").unwrap();
    let node = NodeProcess::start(&node_root.path().join("nas"), "127.0.0.1:0");
    let code = pair_code(&node_root.path().join("nas"));
    client::pair(&dir.path().join("data"), "nas", &node.url, &code)
        .await
        .unwrap();
    let node_pid = nix::unistd::Pid::from_raw(node.child.id() as i32);
    nix::sys::signal::kill(node_pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("hi")))
        .await
        .unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.config_extra =
        nodes_section(&node.url).replace("connect_timeout = \"2s\"", "connect_timeout = \"60s\"");
    let harness = Harness::start_in(dir, options).await.unwrap();
    let (base, http) = harness.studio_http().await;
    let readyz = || async {
        let response = http.get(format!("{base}/readyz")).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    wait_until(
        Duration::from_secs(20),
        "/readyz names the node",
        || async {
            let (status, body) = readyz().await;
            (status == 503 && body.contains("node:nas (connecting)")).then_some(body)
        },
    )
    .await;
    let (_, body) = readyz().await;
    assert!(!body.contains("mcp:nas"), "{body}");
    nix::sys::signal::kill(node_pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    wait_until(Duration::from_secs(30), "/readyz says ready", || async {
        match readyz().await {
            (200, _) => Ok(()),
            (status, body) => Err(format!("{status}: {body}")),
        }
    })
    .await;
    drop(node);
    harness.stop().await;
}

/// Kills the real daemon at moments right after an approval of a node action (while the token
/// is minted, sent, run) and starts it again: the node ran the action at most once, and the
/// request is finished (or asked again and approved) after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_daemon_after_an_approval_runs_the_node_action_at_most_once() {
    // Milliseconds after the button press: deliberate moments of the kill, not waits for a state.
    const KILL_POINTS_MS: &[u64] = &[0, 10, 40, 150];
    let node_root = ScratchDir::new("clawvisor-nodes-kill-node").unwrap();
    let node = NodeProcess::start(&node_root.path().join("nas"), "127.0.0.1:0");
    let ledger = node_root.path().join("nas").join("work").join("ledger.txt");
    for (round, &kill_at) in KILL_POINTS_MS.iter().enumerate() {
        let entry = format!("entry{round}");
        let command = format!("rm -f victim.txt && echo {entry} >> ledger.txt");
        let script = Script::new()
            .rule(Rule::text("Saved.").when_after_tool_result("nas__shell"))
            .rule(
                Rule::tool_call("nas__shell", json!({ "command": command }).to_string())
                    .when_last_user_contains("record"),
            );
        let dir = ScratchDir::new("clawvisor-nodes-kill").unwrap();
        let code = pair_code(&node_root.path().join("nas"));
        client::pair(&dir.path().join("data"), "nas", &node.url, &code)
            .await
            .unwrap();
        let staged = World::builder(script)
            .agent_with_bot("ada", "", "777:AAH-node-kill-test-0123456789", &[42], &[42])
            .config_extra(
                "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"5m\"",
            )
            .config_extra(&nodes_section(&node.url))
            .stage(dir.path())
            .await;
        let bot = staged.bot("ada");
        let daemon = DaemonProcess::start(BINARY, dir.path(), &staged.env).unwrap();
        staged.fake.push_message(bot, 42, 42, "record the entry");
        let asked = staged
            .fake
            .wait_for_sent(
                bot,
                |m| m.callback_data().iter().any(|d| d.starts_with("ap:")),
                Duration::from_secs(30),
            )
            .await
            .expect("the approval is asked");
        assert!(
            asked.visible_text.contains("on nas:"),
            "{}",
            asked.visible_text
        );
        let data = asked
            .callback_data()
            .into_iter()
            .find(|d| d.starts_with("ap:"))
            .unwrap()
            .to_string();
        staged
            .fake
            .push_callback(bot, 42, 42, asked.message_id, &data);
        tokio::time::sleep(Duration::from_millis(kill_at)).await;
        daemon.kill();
        let ran = |ledger: &Path| {
            std::fs::read_to_string(ledger)
                .unwrap_or_default()
                .matches(&entry)
                .count()
        };
        assert!(
            ran(&ledger) <= 1,
            "round {round}: ran twice before the restart"
        );
        let daemon = DaemonProcess::start(BINARY, dir.path(), &staged.env).unwrap();
        let pressed = std::cell::RefCell::new(std::collections::HashSet::new());
        wait_until(
            Duration::from_secs(40),
            "the request finished after the restart",
            || async {
                let sent = staged.fake.sent(bot);
                if sent.iter().any(|m| m.visible_text.contains("Saved."))
                    || sent.iter().any(|m| m.visible_text.contains("could not"))
                {
                    return Ok(());
                }
                for message in &sent {
                    for data in message.callback_data() {
                        if data.starts_with("ap:")
                            && pressed.borrow_mut().insert(message.message_id)
                        {
                            staged
                                .fake
                                .push_callback(bot, 42, 42, message.message_id, data);
                        }
                    }
                }
                Err(format!(
                    "round {round} (kill at {kill_at} ms): sent {:?}",
                    sent.iter()
                        .map(|m| m.visible_text.clone())
                        .collect::<Vec<_>>()
                ))
            },
        )
        .await;
        daemon.terminate(Duration::from_secs(30)).unwrap();
        eprintln!(
            "round {round} (kill at {kill_at} ms): ran {} time(s)",
            ran(&ledger)
        );
        assert!(
            ran(&ledger) <= 1,
            "round {round} (kill at {kill_at} ms): the node ran the action twice"
        );
    }
}

/// Studio's Nodes page in a real Chromium, as an operator uses it: a wrong code is refused in
/// words and adds nothing; the right one pairs the computer, whose card says it is connected,
/// who uses it and that it is fully confined; it goes "not reachable" live when the computer
/// stops; Remove unpairs it. Desktop and phone screenshots: `nodes*.png`, `phone-nodes*.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_page_pairs_shows_and_removes_a_computer() {
    let node_root = ScratchDir::new("clawvisor-nodes-page").unwrap();
    let mut node = NodeProcess::start(&node_root.path().join("nas"), "127.0.0.1:0");
    let world = World::builder(Script::new().rule(Rule::text("hi")))
        .agent("ada", "")
        .agent("bob", "")
        .config_extra(
            "[mcp]\nconnect_timeout = \"2s\"\nping_every = \"300ms\"\ndegraded_retry = \"2s\"",
        )
        .start()
        .await;
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;
    browser.open("nodes").await;
    browser.wait_for("#nodes-purpose").await;
    browser.screenshot("nodes-empty").await;
    // A wrong code: refused in words, nothing added.
    pair_code(&node_root.path().join("nas"));
    browser.type_into("#node-name", "nas").await;
    browser.type_into("#node-url", &node.url).await;
    browser.type_into("#node-code", "AAAAA-BBBBB").await;
    browser.click("[data-node-agent=\"ada\"]").await;
    browser.click("#node-add").await;
    let refused = browser.wait_for("[data-outcome=\"refused\"]").await;
    let text = refused.text().await.unwrap();
    assert!(text.starts_with("Nothing was added"), "{text}");
    assert!(text.contains("pairing code does not match"), "{text}");
    browser.screenshot("nodes-wrong-code").await;
    // The right code pairs it; its card shows it connected, used by ada, fully confined.
    let code = pair_code(&node_root.path().join("nas"));
    browser.type_into("#node-code", &code).await;
    browser.click("#node-add").await;
    browser.wait_for("[data-outcome=\"ok\"]").await;
    let card = browser
        .wait_for("[data-node=\"nas\"][data-state=\"up\"]")
        .await;
    let text = card.text().await.unwrap();
    assert!(
        text.contains("connected") && text.contains("Used by ada"),
        "{text}"
    );
    browser
        .wait_until(
            "the node's confinement and what it lends are shown",
            "(document.querySelector('[data-node=\"nas\"]')?.textContent ?? '').includes('confined') \
             && document.querySelector('[data-node=\"nas\"]').textContent.includes('lends 1 folder.')",
        )
        .await;
    wait_until(
        Duration::from_secs(15),
        "ada gets the node's tools",
        || async {
            world
                .harness
                .agent_tools("ada")
                .await
                .iter()
                .any(|tool| tool == "nas__shell")
                .then_some(())
        },
    )
    .await;
    browser.assert_no_sideways_scroll("nodes").await;
    browser.screenshot("nodes").await;
    browser.phone_screenshot("nodes", "nodes").await;
    // The computer stops: the card says so without a reload of the page.
    node.kill();
    browser
        .wait_for("[data-node=\"nas\"]:not([data-state=\"up\"]):not([data-state=\"connecting\"])")
        .await;
    browser.screenshot("nodes-down").await;
    browser.phone_screenshot("nodes-down", "nodes").await;
    // Remove unpairs it (audited) and takes its entry out.
    browser.js("window.confirm = () => true; return 1;").await;
    browser.click("[data-remove-node=\"nas\"]").await;
    browser
        .wait_until(
            "the card is gone",
            "!document.querySelector('[data-node=\"nas\"]')",
        )
        .await;
    let audited: i64 = world
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM audit_log WHERE action IN ('node.added', 'node.removed')",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(audited, 2);
    browser.close().await;
}

/// Approves the one pending approval through Studio and returns its prompt.
async fn approve_pending(harness: &Harness) -> String {
    let (id, action) = pending_approval(harness).await;
    let (base, http) = harness.studio_http().await;
    let decided = http
        .post(format!("{base}/api/v1/approvals/{id}/decision"))
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert!(decided.status().is_success());
    action
}

/// The daemon with one agent `ada` given the node at `url`, its model scripted by `script`.
async fn daemon_with_node(dir: ScratchDir, script: Script, url: &str) -> (ScriptedLlm, Harness) {
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.config_extra = nodes_section(url);
    let harness = Harness::start_in(dir, options).await.unwrap();
    (llm, harness)
}

/// What the model was last sent (the tool results of the run so far).
fn last_request(llm: &ScriptedLlm) -> String {
    llm.requests()
        .last()
        .cloned()
        .unwrap_or_default()
        .to_string()
}

/// Waits until the agent `ada` holds `tool`.
async fn wait_agent_tool(harness: &Harness, tool: &str) {
    wait_until(Duration::from_secs(20), "the tool is published", || async {
        let tools = harness.agent_tools("ada").await;
        if tools.iter().any(|held| held == tool) {
            Ok(())
        } else {
            Err(format!("tools now {tools:?}"))
        }
    })
    .await
}

/// `[node] roots` with two directories: through an agent, a read in the second root runs, a
/// path outside every root is refused (naming the roots), and a write in the second root asks
/// the daemon's desk with the node's real path and runs once approved; the node's shell runs in
/// the first root and its sandbox grants the second as it grants the first, not what lies
/// beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_two_roots_serves_both_and_nothing_outside() {
    let dir = ScratchDir::new("clawvisor-nodes-roots").unwrap();
    let node_root = ScratchDir::new("clawvisor-nodes-roots-node").unwrap();
    let nas = node_root.path().join("nas");
    write_node_config(&nas, &["photos"], "");
    let photos = nas.join("photos");
    std::fs::create_dir_all(photos.join("2024")).unwrap();
    std::fs::write(photos.join("2024/a.txt"), "a caption from the second root").unwrap();
    std::fs::write(nas.join("beside.txt"), "beside the roots").unwrap();
    let node = NodeProcess::start(&nas, "127.0.0.1:0");
    let code = pair_code(&nas);
    let daemon_data = dir.path().join("data");
    client::pair(&daemon_data, "nas", &node.url, &code)
        .await
        .unwrap();
    let caption = photos.join("2024/a.txt").display().to_string();
    let beside = nas.join("beside.txt").display().to_string();
    let note = photos.join("notes/new.txt");
    let script = Script::new()
        .rule(Rule::text("the node answered").when_after_tool_result("nas__read_file"))
        .rule(Rule::text("the node wrote").when_after_tool_result("nas__write_file"))
        .rule(
            Rule::tool_call("nas__read_file", json!({ "path": caption }).to_string())
                .when_last_user_contains("caption")
                .times(1),
        )
        .rule(
            Rule::tool_call("nas__read_file", json!({ "path": beside }).to_string())
                .when_last_user_contains("beside")
                .times(1),
        )
        .rule(
            Rule::tool_call(
                "nas__write_file",
                json!({ "path": note, "content": "written on the nas" }).to_string(),
            )
            .when_last_user_contains("note")
            .times(1),
        )
        .rule(Rule::text("fallback"));
    let (llm, harness) = daemon_with_node(dir, script, &node.url).await;
    wait_node_tools(&harness, true).await;
    let chat = ChatKey::cli("roots");
    // A read in the second root runs without asking; the tool tells the model both folders.
    let reply = harness.ask("ada", &chat, "read the caption").await.unwrap();
    assert_eq!(reply.text, "the node answered");
    let request = last_request(&llm);
    assert!(
        request.contains("a caption from the second root"),
        "{request}"
    );
    assert!(
        request.contains(&photos.display().to_string()),
        "the tool names the node's folders"
    );
    // A path beside the roots is refused by the daemon, naming the node's folders; the node
    // never sees it.
    let before = node.count("SELECT COUNT(*) FROM audit_log WHERE action = 'node.tool.run'");
    let reply = harness.ask("ada", &chat, "read beside").await.unwrap();
    assert_eq!(reply.text, "the node answered");
    let request = last_request(&llm);
    assert!(
        request.contains("none of the node's folders") && !request.contains("beside the roots"),
        "{request}"
    );
    // A write in the second root asks, with the node's real path, and runs once approved.
    harness.send("ada", &chat, "write the note").unwrap();
    let action = approve_pending(&harness).await;
    assert!(
        action.starts_with(&format!("on nas: write_file (create): {}", note.display())),
        "{action}"
    );
    wait_until(Duration::from_secs(15), "the note is written", || async {
        std::fs::read_to_string(&note).ok()
    })
    .await;
    harness.wait_settled(Duration::from_secs(15)).await;
    assert_eq!(
        std::fs::read_to_string(&note).unwrap(),
        "written on the nas"
    );
    assert_eq!(
        node.count("SELECT COUNT(*) FROM audit_log WHERE action = 'node.tool.run'"),
        before + 1,
        "the refused read never reached the node; the write ran once"
    );
    // The shell: it runs in the first root and its sandbox lets an approved read-only command
    // read the second (Landlock grants it like the first; `sandbox::landlock_rules`' tests show
    // the write grant of L1), and nothing beside the roots.
    let service = session(&daemon_data, "nas", &node.url).await;
    let pwd = shell(&service, "pwd", None).await;
    assert!(
        pwd.text.contains(&nas.join("work").display().to_string()),
        "{pwd:?}"
    );
    // Each command goes with the token the daemon would mint for the classifier's rating, so
    // that what stops it is the kernel, not the node's check.
    let approved = |command: String| {
        let assessment = classify_shell(&command);
        let token = (assessment.level > RiskLevel::L0).then(|| {
            token_claiming(
                &daemon_data,
                &command,
                assessment.level,
                clawvisor::node::handler::profile_for("shell", &assessment),
            )
        });
        let service = &service;
        async move {
            assert_ne!(
                assessment.reach.writes,
                clawvisor::policy::Writes::Anywhere,
                "`{command}` would not show the roots' grant"
            );
            shell(service, &command, token.as_deref()).await
        }
    };
    let read = approved(format!("cat {caption}")).await;
    assert!(
        read.text.contains("a caption from the second root"),
        "{read:?}"
    );
    if clawvisor::sandbox::protections().landlock.is_enforced() {
        let denied = approved(format!("cat {beside}")).await;
        assert!(denied.text.contains("Permission denied"), "{denied:?}");
    }
    // The node's own file tools hold the line too, even for a token that claims the most.
    let arguments = json!({ "path": beside });
    let keys = client::daemon_keys(&daemon_data).unwrap();
    let most = token::mint(
        &keys.token_key,
        &token::TokenPayload {
            node: "nas".into(),
            tool: "read_file".into(),
            action_hash: token::action_hash("read_file", &arguments),
            level: "L3".into(),
            profile: String::new(),
            expires_ms: clawvisor::clock::now_ms() + 60_000,
            nonce: token::new_nonce(),
        },
    );
    let mut sent = arguments.clone();
    sent["approval_token"] = Value::String(most);
    let refused =
        clawvisor::mcp::client::call(service.peer(), "read_file", sent, Duration::from_secs(10))
            .await
            .unwrap();
    assert!(
        refused.is_error
            && refused.text.contains("outside the workspace")
            && !refused.text.contains("beside the roots"),
        "{refused:?}"
    );
    harness.stop().await;
}

/// `[[mcp.servers]]` on the node (the repository's MCP test server as `files`, trusted, and as
/// `strict`, untrusted; and one that cannot start): their tools reach the daemon's agent as
/// `nas__files__<tool>`; a read-only one runs without approval, one the node rates L2 asks the
/// daemon's desk (the prompt names the machine) and runs once, also when only the node rates it
/// so (`strict`'s read-only echo); its token cannot be replayed and a lower one is refused; the
/// server that failed is logged in words and the node serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_own_mcp_servers_reach_the_agent_under_the_same_desk() {
    let dir = ScratchDir::new("clawvisor-nodes-upstream").unwrap();
    let node_root = ScratchDir::new("clawvisor-nodes-upstream-node").unwrap();
    let nas = node_root.path().join("nas");
    write_node_config(
        &nas,
        &[],
        &format!(
            "[mcp]\nconnect_timeout = \"10s\"\n\n[[mcp.servers]]\nname = \"files\"\ntransport = \"stdio\"\ncommand = \"{0}\"\n\
             trust = \"trusted\"\n\n[[mcp.servers]]\nname = \"strict\"\ntransport = \"stdio\"\n\
             command = \"{0}\"\n\n[[mcp.servers]]\nname = \"broken\"\ntransport = \"stdio\"\n\
             command = \"/nonexistent/clawvisor-no-such-server\"\n",
            env!("CARGO_BIN_EXE_clawvisor-mcp-test-server")
        ),
    );
    let node = NodeProcess::start(&nas, "127.0.0.1:0");
    let code = pair_code(&nas);
    let daemon_data = dir.path().join("data");
    client::pair(&daemon_data, "nas", &node.url, &code)
        .await
        .unwrap();
    let script = Script::new()
        .rule(Rule::text("echoed").when_after_tool_result("nas__files__echo"))
        .rule(Rule::text("noted").when_after_tool_result("nas__files__write_note"))
        .rule(Rule::text("strictly echoed").when_after_tool_result("nas__strict__echo"))
        .rule(
            Rule::tool_call(
                "nas__strict__echo",
                json!({"text": "strict hello"}).to_string(),
            )
            .when_last_user_contains("strict")
            .times(1),
        )
        .rule(
            Rule::tool_call(
                "nas__files__echo",
                json!({"text": "hello through the node"}).to_string(),
            )
            .when_last_user_contains("echo")
            .times(1),
        )
        .rule(
            Rule::tool_call(
                "nas__files__write_note",
                json!({"text": "a note"}).to_string(),
            )
            .when_last_user_contains("note")
            .times(1),
        )
        .rule(Rule::text("fallback"));
    let (llm, harness) = daemon_with_node(dir, script, &node.url).await;
    wait_agent_tool(&harness, "nas__files__write_note").await;
    let chat = ChatKey::cli("upstream");
    // Read-only: runs at once.
    let reply = harness.ask("ada", &chat, "echo please").await.unwrap();
    assert_eq!(reply.text, "echoed");
    assert!(last_request(&llm).contains("hello through the node"));
    // Rated L2 by the node: the daemon's desk asks, naming the machine, and it runs once.
    harness.send("ada", &chat, "write a note").unwrap();
    let action = approve_pending(&harness).await;
    assert!(
        action.starts_with("on nas: write_note (MCP server files)"),
        "{action}"
    );
    wait_until(Duration::from_secs(15), "the note was written", || async {
        last_request(&llm)
            .contains("saved a note of 6 characters")
            .then_some(())
    })
    .await;
    harness.wait_settled(Duration::from_secs(15)).await;
    assert_eq!(
        node.count(
            "SELECT COUNT(*) FROM node_actions WHERE tool = 'files__write_note' AND outcome = 'ok'"
        ),
        1
    );
    // A read-only tool of a server the node does not trust: the node rates it L2 and says so,
    // so the daemon asks too, although the tool calls itself read-only.
    harness.send("ada", &chat, "strict echo").unwrap();
    let action = approve_pending(&harness).await;
    assert!(
        action.starts_with("on nas: echo (MCP server strict)"),
        "{action}"
    );
    wait_until(Duration::from_secs(15), "the strict echo ran", || async {
        last_request(&llm).contains("strict hello").then_some(())
    })
    .await;
    harness.wait_settled(Duration::from_secs(15)).await;
    // What the node lists: its level for each forwarded tool, which the daemon rates up to.
    let service = session(&daemon_data, "nas", &node.url).await;
    let listed = clawvisor::mcp::client::list_tools(service.peer(), "nas", Duration::from_secs(10))
        .await
        .unwrap();
    let level = |tool: &str| {
        listed
            .iter()
            .find(|info| info.remote_name == tool)
            .and_then(|info| info.node_meta.clone())
            .map(|meta| meta["level"].clone())
    };
    assert_eq!(level("files__echo"), Some(json!("L0")));
    assert_eq!(level("files__add"), Some(json!("L1")));
    assert_eq!(level("files__write_note"), Some(json!("L2")));
    assert_eq!(level("strict__echo"), Some(json!("L2")));
    assert!(
        !listed
            .iter()
            .any(|info| info.remote_name.starts_with("broken__"))
    );
    // The token is for exactly that action, once.
    let arguments = json!({"text": "another note"});
    let mint = |level: &str| {
        let keys = client::daemon_keys(&daemon_data).unwrap();
        token::mint(
            &keys.token_key,
            &token::TokenPayload {
                node: "nas".into(),
                tool: "files__write_note".into(),
                action_hash: token::action_hash("files__write_note", &arguments),
                level: level.into(),
                profile: String::new(),
                expires_ms: clawvisor::clock::now_ms() + 60_000,
                nonce: token::new_nonce(),
            },
        )
    };
    let call = |token: Option<String>| {
        let mut sent = arguments.clone();
        if let Some(token) = token {
            sent["approval_token"] = Value::String(token);
        }
        let peer = service.peer().clone();
        async move {
            clawvisor::mcp::client::call(&peer, "files__write_note", sent, Duration::from_secs(10))
                .await
                .unwrap()
        }
    };
    let missing = call(None).await;
    assert!(
        missing.text.contains("needs the daemon's approval token"),
        "{missing:?}"
    );
    let lower = call(Some(mint("L1"))).await;
    assert!(lower.text.contains("rates the action L2"), "{lower:?}");
    let valid = mint("L2");
    let ran = call(Some(valid.clone())).await;
    assert!(
        !ran.is_error && ran.text.contains("saved a note"),
        "{ran:?}"
    );
    let replayed = call(Some(valid)).await;
    assert!(replayed.text.contains("already used"), "{replayed:?}");
    // The server that could not start: said in words, and the node serves on.
    let log = node.log().join("\n");
    assert!(
        log.contains("could not be started or reached") && log.contains("broken"),
        "{log}"
    );
    harness.stop().await;
}

//! Readiness that means ready: `/readyz` turns 200 only once every enabled MCP server has
//! published its tools to its agents (or failed visibly), and a run that starts before its
//! agent's servers are up waits for them, bounded by `[mcp] startup_wait`, then tells the model
//! which one is missing.
//!
//! The first test runs a third-party server, `mcp-server-time` from PyPI, installed by the test
//! into a virtual environment under the target directory (`target/py/mcp-server-time`, reused
//! once installed; the first install takes about 15 s). Without python3, pip or PyPI the test
//! fails and says which step failed: it never skips silently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clawvisor::config::McpServerConfig;
use clawvisor::domain::ChatKey;
use clawvisor::protocol::mcp::{Mcp, McpHealth, McpReload};
use clawvisor::store::runs::{self, StepRow};
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use serde_json::Value;

const TEST_SERVER: &str = env!("CARGO_BIN_EXE_clawvisor-mcp-test-server");
const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

/// `mcp-server-time`'s program in its virtual environment, installed first when missing.
fn time_server() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target's tmp directory is inside the target directory");
    let venv = target.join("py").join("mcp-server-time");
    let program = venv.join("bin").join("mcp-server-time");
    let installed = venv.join(".installed");
    if installed.exists() && program.exists() {
        return program;
    }
    let started = Instant::now();
    // A half-made environment (an interrupted install) is made again from nothing.
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::create_dir_all(venv.parent().unwrap()).unwrap();
    run_step(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "`python3 -m venv` (this test needs python3 with its venv module)",
    );
    run_step(
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "mcp-server-time",
        ]),
        "`pip install mcp-server-time` (this test needs PyPI to be reachable)",
    );
    assert!(
        program.exists(),
        "pip installed mcp-server-time but {} is missing",
        program.display()
    );
    std::fs::write(&installed, "mcp-server-time\n").unwrap();
    eprintln!(
        "installed mcp-server-time into {} in {:.1?}",
        venv.display(),
        started.elapsed()
    );
    program
}

fn run_step(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what} could not be started: {error}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The real daemon with `config` (a `config_toml` extra) and the agent `ada`, and a client that
/// carries its local access token.
async fn start_process(
    dir: &Path,
    llm: &ScriptedLlm,
    config: &str,
) -> (DaemonProcess, String, reqwest::Client) {
    write_config(
        dir,
        &config_toml(&llm.base_url(), config),
        &[agent_toml("ada", "autonomy = \"trust_first\"")],
    )
    .unwrap();
    let owned = dir.to_path_buf();
    let daemon =
        tokio::task::spawn_blocking(move || DaemonProcess::start(BINARY, &owned, &BTreeMap::new()))
            .await
            .unwrap()
            .expect("the daemon starts");
    let studio = format!(
        "http://{}",
        daemon
            .studio
            .clone()
            .expect("the daemon logs Studio's address")
    );
    let token = std::fs::read_to_string(dir.join("data").join("studio.token"))
        .expect("the daemon wrote its local access token");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", token.trim()).parse().unwrap(),
    );
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    (daemon, studio, client)
}

/// Asks `/readyz` until it answers 200; returns every other answer's body seen on the way.
async fn wait_ready(client: &reqwest::Client, studio: &str) -> Vec<String> {
    let seen = Mutex::new(Vec::new());
    let url = format!("{studio}/readyz");
    wait_until(Duration::from_secs(60), "/readyz to answer 200", || {
        let (seen, url) = (&seen, &url);
        async move {
            let response = client.get(url).send().await.map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            if status == 200 {
                return Ok(());
            }
            seen.lock().unwrap().push(body.clone());
            Err(format!("{status}: {body}"))
        }
    })
    .await;
    seen.into_inner().unwrap()
}

fn steps_in(dir: &Path, sql_filter: &str) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(dir.join("data").join("clawvisor.db")).unwrap();
    let mut statement = conn
        .prepare(&format!(
            "SELECT COALESCE(name, ''), detail FROM run_steps WHERE {sql_filter} ORDER BY id"
        ))
        .unwrap();
    statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_the_moment_readyz_turns_200_calls_a_third_party_servers_tool() {
    let program = time_server();
    let llm = ScriptedLlm::start(
        Script::new()
            .rule(Rule::text("the time came back").when_after_tool_result("time__get_current_time"))
            .rule(
                Rule::tool_call("time__get_current_time", r#"{"timezone":"UTC"}"#)
                    .when_last_user_contains("what time"),
            )
            .rule(Rule::text("fallback")),
    )
    .await
    .unwrap();
    let dir = ScratchDir::new("clawvisor-mcp-ready-time").unwrap();
    let server = format!(
        "[[mcp.servers]]\nname = \"time\"\ntransport = \"stdio\"\ncommand = \"{}\"\nargs = [\"--local-timezone=UTC\"]\ntrust = \"trusted\"\nagents = [\"*\"]\n",
        program.display()
    );
    let (daemon, studio, client) = start_process(dir.path(), &llm, &server).await;
    let waited = wait_ready(&client, &studio).await;
    // The moment it is ready: the agent holds the server's tool already ...
    let agent: Value = client
        .get(format!("{studio}/api/v1/agents/ada"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tools: Vec<&str> = agent["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {agent}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"time__get_current_time"),
        "ready, yet the agent lacks the server's tool: {tools:?}; readyz said before: {waited:?}"
    );
    // ... and a run started now calls it.
    let response: Value = client
        .post(format!("{studio}/v1/chat/completions"))
        .json(&serde_json::json!({
            "model": "ada",
            "messages": [{"role": "user", "content": "what time is it in UTC?"}]
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        response["choices"][0]["message"]["content"], "the time came back",
        "{response}"
    );
    let to_model = llm.requests().last().unwrap().to_string();
    assert!(
        to_model.contains("datetime") && !to_model.contains("There is no tool named"),
        "the model got the server's time JSON: {to_model}"
    );
    let results = steps_in(
        dir.path(),
        "kind = 'tool_result' AND name = 'time__get_current_time'",
    );
    assert_eq!(results.len(), 1, "{results:?}");
    let detail: Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(detail["is_error"], false, "{detail}");
    // Ready meant ready: the run had nothing to wait for.
    assert_eq!(
        steps_in(dir.path(), "kind = 'note' AND name = 'mcp_wait'"),
        Vec::<(String, String)>::new()
    );
    eprintln!(
        "readyz answered 503 {} times first: {:?}",
        waited.len(),
        waited.last()
    );
    drop(daemon);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_does_not_hold_readiness_and_says_why() {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("hi")))
        .await
        .unwrap();
    let dir = ScratchDir::new("clawvisor-mcp-ready-broken").unwrap();
    let missing = "/nonexistent/clawvisor-test/mcp-server";
    let server = format!(
        "[mcp]\nconnect_timeout = \"2s\"\n[[mcp.servers]]\nname = \"broken\"\ntransport = \"stdio\"\ncommand = \"{missing}\"\nagents = [\"*\"]\n"
    );
    let (mut daemon, studio, client) = start_process(dir.path(), &llm, &server).await;
    wait_ready(&client, &studio).await;
    let servers: Value = client
        .get(format!("{studio}/api/v1/mcp"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let broken = servers["servers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|server| server["server"] == "broken"))
        .unwrap_or_else(|| panic!("Studio lists the server: {servers}"));
    assert_ne!(broken["state"], "up", "{broken}");
    let error = broken["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains(missing),
        "Studio names what failed: {broken}"
    );
    let logged = tokio::task::spawn_blocking(move || {
        let line = daemon.wait_for_line("MCP server link down", Duration::from_secs(10));
        (line, daemon)
    })
    .await
    .unwrap();
    let line = logged.0.expect("the log says the link is down");
    assert!(line.contains(missing), "the log names the program: {line}");
}

/// A `[[mcp.servers]]` entry for the repository's test server over stdio.
fn test_server(name: &str, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|arg| format!("{arg:?}")).collect();
    format!(
        "[[mcp.servers]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = \"{TEST_SERVER}\"\nargs = [{}]\ntrust = \"trusted\"\nagents = [\"*\"]\n",
        args.join(", ")
    )
}

async fn start_harness(script: Script, mcp: &str) -> (ScriptedLlm, Harness) {
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", "autonomy = \"trust_first\"")];
    options.config_extra = mcp.to_string();
    let harness = Harness::start(options).await.expect("the daemon starts");
    (llm, harness)
}

async fn health_of(harness: &Harness, server: &str) -> McpHealth {
    Mcp::new(&harness.daemon().registry)
        .health()
        .await
        .unwrap()
        .into_iter()
        .find(|entry| entry.server == server)
        .unwrap_or_else(|| panic!("no server {server}"))
}

async fn run_steps(harness: &Harness, run_id: i64) -> Vec<StepRow> {
    harness
        .store()
        .read(move |conn| runs::steps(conn, run_id))
        .await
        .unwrap()
}

fn mcp_wait_note(steps: &[StepRow]) -> Value {
    let step = steps
        .iter()
        .find(|step| step.kind == "note" && step.name.as_deref() == Some("mcp_wait"))
        .unwrap_or_else(|| panic!("the run recorded its wait: {steps:?}"));
    serde_json::from_str(&step.detail).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_before_its_server_is_up_waits_for_it_and_calls_its_tool() {
    let script = Script::new()
        .rule(Rule::text("echoed").when_after_tool_result("slow__echo"))
        .rule(
            Rule::tool_call("slow__echo", r#"{"text":"worth the wait"}"#)
                .when_tools_include("slow__echo"),
        )
        .rule(Rule::text("the tool was not offered"));
    let (llm, harness) = start_harness(
        script,
        &format!(
            "[mcp]\nconnect_timeout = \"20s\"\n{}",
            test_server("slow", &["--start-delay-ms", "1500"])
        ),
    )
    .await;
    let before = health_of(&harness, "slow").await;
    assert!(
        before.is_pending(),
        "the server is still starting: {before:?}"
    );
    let started = Instant::now();
    let reply = harness
        .ask("ada", &ChatKey::cli("early"), "echo something")
        .await
        .unwrap();
    assert_eq!(reply.text, "echoed", "{reply:?}");
    assert!(
        llm.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("worth the wait"),
        "the tool's result reached the model"
    );
    let note = mcp_wait_note(&run_steps(&harness, reply.run_id.unwrap()).await);
    assert_eq!(note["unavailable"], serde_json::json!([]), "{note}");
    assert!(note["waited_ms"].as_u64().unwrap() > 0, "{note}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waits_no_longer_than_startup_wait_and_names_the_missing_server() {
    let script = Script::new()
        .rule(Rule::text("told it is missing").when_after_tool_result("slow__echo"))
        .rule(
            Rule::tool_call("slow__echo", r#"{"text":"hello"}"#)
                .when_system_contains("MCP server `slow`"),
        )
        .rule(Rule::text("the prompt did not name the server"));
    let (llm, harness) = start_harness(
        script,
        &format!(
            "[mcp]\nconnect_timeout = \"90s\"\nstartup_wait = \"300ms\"\n{}",
            test_server("slow", &["--start-delay-ms", "60000"])
        ),
    )
    .await;
    let started = Instant::now();
    let reply = harness
        .ask("ada", &ChatKey::cli("bounded"), "echo something")
        .await
        .unwrap();
    assert_eq!(reply.text, "told it is missing", "{reply:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the run went ahead after its bound: {:?}",
        started.elapsed()
    );
    let result = llm.requests().last().unwrap().to_string();
    assert!(
        result.contains("not available in this run") && !result.contains("There is no tool named"),
        "the model is told plainly which server is missing: {result}"
    );
    let note = mcp_wait_note(&run_steps(&harness, reply.run_id.unwrap()).await);
    assert_eq!(note["unavailable"][0]["server"], "slow", "{note}");
    assert!(
        note["waited_ms"].as_u64().unwrap() >= 300,
        "it waited its bound: {note}"
    );
    harness.stop().await;
}

/// The in-process daemon with the MCP test server `fast`, once `/readyz` says ready; Studio's
/// address and a client with the local token.
async fn ready_with_fast_server(script: Script) -> (ScriptedLlm, Harness, String, reqwest::Client) {
    let (llm, harness) = start_harness(
        script,
        &format!(
            "[mcp]\nconnect_timeout = \"90s\"\n{}",
            test_server("fast", &[])
        ),
    )
    .await;
    let (studio, client) = harness.studio_http().await;
    wait_ready(&client, &studio).await;
    (llm, harness, studio, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_servers_added_and_removed_by_a_reload() {
    let (_llm, harness, studio, client) =
        ready_with_fast_server(Script::new().rule(Rule::text("hi"))).await;
    let mcp = Mcp::new(&harness.daemon().registry);
    let configured: Vec<McpServerConfig> = harness.daemon().config.config.mcp.servers.clone();
    let mut late = configured[0].clone();
    late.name = "late".into();
    late.args = vec!["--start-delay-ms".into(), "60000".into()];
    let loaded = &harness.daemon().config;
    let reload = |servers: Vec<McpServerConfig>| McpReload {
        servers,
        agents: loaded.agents.clone(),
        secrets: std::sync::Arc::new(loaded.secrets.clone()),
    };
    mcp.reload(reload(vec![configured[0].clone(), late]))
        .await
        .unwrap();
    let readyz = client.get(format!("{studio}/readyz")).send().await.unwrap();
    assert_eq!(readyz.status().as_u16(), 503);
    let body = readyz.text().await.unwrap();
    assert!(body.contains("mcp:late (connecting)"), "{body}");
    assert!(!body.contains("mcp:fast"), "{body}");
    // Removed again before it ever answered: nothing waits for it any more.
    mcp.reload(reload(configured)).await.unwrap();
    let readyz = client.get(format!("{studio}/readyz")).send().await.unwrap();
    assert_eq!(readyz.status().as_u16(), 200, "{:?}", readyz.text().await);
    harness.stop().await;
}

/// The actor id `agent` is registered under now (`None` while it is not running).
fn agent_id(harness: &Harness, agent: &str) -> Option<ractor::ActorId> {
    harness
        .daemon()
        .registry
        .lookup(&clawvisor::protocol::agent::name(agent))
        .map(|actor| actor.get_id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_the_moment_its_agent_restarted_calls_the_mcp_tool() {
    let script = Script::new()
        .rule(Rule::text("echoed").when_after_tool_result("fast__echo"))
        .rule(
            Rule::tool_call("fast__echo", r#"{"text":"after the restart"}"#)
                .when_tools_include("fast__echo"),
        )
        .rule(Rule::text("the tool was not offered"));
    let (llm, harness, _, _) = ready_with_fast_server(script).await;
    assert!(health_of(&harness, "fast").await.is_published());
    // The agent crashes; its supervisor starts a new actor, which holds none of the tools the
    // old one was given. A run that starts at once must still get them.
    let before = agent_id(&harness, "ada").expect("ada runs");
    harness
        .daemon()
        .registry
        .lookup(&clawvisor::protocol::agent::name("ada"))
        .unwrap()
        .kill();
    wait_until(Duration::from_secs(30), "a new ada actor", || {
        let current = agent_id(&harness, "ada");
        async move { current.is_some_and(|id| id != before) }
    })
    .await;
    let reply = harness
        .ask("ada", &ChatKey::cli("restarted"), "echo something")
        .await
        .unwrap();
    assert_eq!(reply.text, "echoed", "{reply:?}");
    assert!(
        llm.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("after the restart"),
        "the tool's result reached the model"
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_only_a_servers_agents_keeps_its_connection() {
    let (_llm, harness, _, _) = ready_with_fast_server(Script::new().rule(Rule::text("hi"))).await;
    let registry = &harness.daemon().registry;
    let link_id = || {
        registry
            .lookup(&clawvisor::protocol::mcp::link("fast"))
            .map(|link| link.get_id())
    };
    let connected = link_id().expect("the link runs");
    assert!(
        harness
            .agent_tools("ada")
            .await
            .contains(&"fast__echo".to_string())
    );
    let mcp = Mcp::new(registry);
    let loaded = &harness.daemon().config;
    let reload_with =
        |server: McpServerConfig, agents: Vec<clawvisor::config::AgentSpec>| McpReload {
            servers: vec![server],
            agents,
            secrets: std::sync::Arc::new(loaded.secrets.clone()),
        };
    let reload = |server: McpServerConfig| reload_with(server, loaded.agents.clone());
    // The agents change (ada leaves the files): withdrawn from ada, the connection kept.
    let outcome = mcp
        .reload(reload_with(
            loaded.config.mcp.servers[0].clone(),
            Vec::new(),
        ))
        .await
        .unwrap();
    assert_eq!(outcome.retargeted, ["fast"], "{outcome:?}");
    assert!(outcome.restarted.is_empty(), "{outcome:?}");
    wait_until(
        Duration::from_secs(10),
        "the tools withdrawn from ada",
        || async {
            !harness
                .agent_tools("ada")
                .await
                .contains(&"fast__echo".to_string())
        },
    )
    .await;
    // And back: published to ada again, still the same connection.
    let outcome = mcp
        .reload(reload(loaded.config.mcp.servers[0].clone()))
        .await
        .unwrap();
    assert_eq!(outcome.retargeted, ["fast"], "{outcome:?}");
    wait_until(
        Duration::from_secs(10),
        "the tools back with ada",
        || async {
            harness
                .agent_tools("ada")
                .await
                .contains(&"fast__echo".to_string())
        },
    )
    .await;
    assert_eq!(link_id(), Some(connected), "the link was never restarted");
    assert_eq!(health_of(&harness, "fast").await.restarts, 0);
    // The entry's own `agents` narrowed to nobody: a retarget too.
    let mut nobody = loaded.config.mcp.servers[0].clone();
    nobody.agents = vec!["nobody".into()];
    let outcome = mcp.reload(reload(nobody)).await.unwrap();
    assert_eq!(outcome.retargeted, ["fast"], "{outcome:?}");
    wait_until(
        Duration::from_secs(10),
        "the tools withdrawn again",
        || async {
            !harness
                .agent_tools("ada")
                .await
                .contains(&"fast__echo".to_string())
        },
    )
    .await;
    assert_eq!(link_id(), Some(connected), "the link was never restarted");
    // An entry that changed restarts its link.
    let mut changed = loaded.config.mcp.servers[0].clone();
    changed.timeout = clawvisor::config::Dur(Duration::from_secs(7));
    let outcome = mcp.reload(reload(changed)).await.unwrap();
    assert_eq!(outcome.restarted, ["fast"], "{outcome:?}");
    harness.stop().await;
}

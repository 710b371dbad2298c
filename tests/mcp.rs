//! MCP server links end to end: the daemon (in-process, or the real binary for kill -9) against
//! the repository's own MCP test server (`clawvisor-mcp-test-server`) over stdio and streamable
//! HTTP, with a scripted model that calls `<server>__<tool>` tools.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawvisor::domain::ChatKey;
use clawvisor::events::EventKind;
use clawvisor::mcp::process::members_of_group;
use clawvisor::protocol::mcp::{McpHealth, McpSupervisorMsg};
use clawvisor::store::runs;
use clawvisor::testkit::harness::{
    Harness, HarnessOptions, ScratchDir, agent_toml, config_toml, wait_reply,
};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::{wait_until, wait_until_blocking};

const SERVER: &str = env!("CARGO_BIN_EXE_clawvisor-mcp-test-server");
const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

/// A `[[mcp.servers]]` entry for the test server over stdio.
fn stdio_server(name: &str, trust: &str, extra_args: &[&str], extra: &str) -> String {
    let args: Vec<String> = extra_args.iter().map(|arg| format!("{arg:?}")).collect();
    format!(
        "[[mcp.servers]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = \"{SERVER}\"\nargs = [{}]\ntrust = \"{trust}\"\nagents = [\"*\"]\n{extra}\n",
        args.join(", ")
    )
}

fn http_server(name: &str, url: &str, trust: &str) -> String {
    format!(
        "[[mcp.servers]]\nname = \"{name}\"\ntransport = \"http\"\nurl = \"{url}\"\ntrust = \"{trust}\"\nagents = [\"ada\"]\nheaders_env = {{ X-Test-Token = \"MCP_TEST_TOKEN\" }}\n"
    )
}

fn mcp_section(servers: &[String]) -> String {
    format!(
        "[mcp]\nconnect_timeout = \"2s\"\nping_every = \"300ms\"\ndegraded_retry = \"2s\"\n{}",
        servers.join("\n")
    )
}

/// The test server over streamable HTTP, as its own process (killed when dropped).
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start() -> HttpServer {
        let mut child = Command::new(SERVER)
            .args(["--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the HTTP test server starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .expect("the server prints its address")
            .to_string();
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start(script: Script, servers: &[String]) -> (ScriptedLlm, Harness) {
    let _ = clawvisor::logging::init("info", clawvisor::config::LogFormat::Text);
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", "autonomy = \"trust_first\"")];
    options.config_extra = mcp_section(servers);
    options.env = BTreeMap::from([(
        "MCP_TEST_TOKEN".to_string(),
        "secret-test-header-value-123".to_string(),
    )]);
    let harness = Harness::start(options).await.expect("the daemon starts");
    (llm, harness)
}

async fn health(harness: &Harness) -> Vec<McpHealth> {
    let supervisor = harness
        .daemon()
        .registry
        .lookup(&clawvisor::protocol::mcp::NAME)
        .expect("the MCP supervisor runs");
    ractor::call!(supervisor, McpSupervisorMsg::Health).unwrap()
}

/// Waits until `check` holds for the agent's tool list.
async fn wait_tools(harness: &Harness, what: &str, check: impl Fn(&[String]) -> bool) {
    wait_until(Duration::from_secs(15), what, || async {
        let tools = harness.agent_tools("ada").await;
        if check(&tools) {
            return Ok(());
        }
        Err(format!(
            "{what}: tools now {tools:?}; health {:?}",
            health(harness).await
        ))
    })
    .await
}

async fn wait_health(harness: &Harness, what: &str, check: impl Fn(&[McpHealth]) -> bool) {
    wait_until(Duration::from_secs(15), what, || async {
        let health = health(harness).await;
        if check(&health) {
            Ok(())
        } else {
            Err(format!("{what}: health now {health:?}"))
        }
    })
    .await
}

fn state_of<'a>(health: &'a [McpHealth], server: &str) -> Option<&'a McpHealth> {
    health.iter().find(|entry| entry.server == server)
}

fn call(tool: &str, arguments: &str, trigger: &str) -> Rule {
    Rule::tool_call(tool, arguments)
        .when_last_user_contains(trigger)
        .times(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_called_over_stdio_and_http_and_published_namespaced() {
    let http = HttpServer::start();
    let script = Script::new()
        .rule(Rule::text("stdio done").when_after_tool_result("local__echo"))
        .rule(Rule::text("http done").when_after_tool_result("remote__add"))
        .rule(call(
            "local__echo",
            r#"{"text":"hello over stdio"}"#,
            "stdio",
        ))
        .rule(call("remote__add", r#"{"a":2,"b":40}"#, "http"))
        .rule(Rule::text("fallback"));
    let (llm, harness) = start(
        script,
        &[
            stdio_server("local", "trusted", &[], ""),
            http_server("remote", &http.url, "trusted"),
        ],
    )
    .await;
    wait_tools(&harness, "both servers publish", |tools| {
        tools.iter().any(|tool| tool == "local__echo")
            && tools.iter().any(|tool| tool == "remote__add")
    })
    .await;
    let tools = harness.agent_tools("ada").await;
    for tool in ["echo", "add", "write_note", "sleep", "crash", "pid"] {
        assert!(tools.contains(&format!("local__{tool}")), "{tools:?}");
    }
    // The model sees the namespaced tools with their schemas.
    let chat = ChatKey::cli("mcp-basic");
    let reply = harness.ask("ada", &chat, "please use stdio").await.unwrap();
    assert_eq!(reply.text, "stdio done", "{reply:?}");
    assert!(
        reply.tools.contains(&"local__echo done".to_string()),
        "{reply:?}"
    );
    let seen = llm.requests();
    let last = seen.last().unwrap().to_string();
    assert!(
        last.contains("hello over stdio"),
        "the echo reached the model"
    );
    let reply = harness.ask("ada", &chat, "now over http").await.unwrap();
    assert_eq!(reply.text, "http done", "{reply:?}");
    assert!(
        llm.requests().last().unwrap().to_string().contains("42"),
        "2 + 40 came back over HTTP"
    );
    let health = health(&harness).await;
    for server in ["local", "remote"] {
        let entry = state_of(&health, server).unwrap();
        assert_eq!(entry.state, "up", "{entry:?}");
        assert_eq!(entry.tools.len(), 6);
        assert!(entry.last_latency_ms.is_some());
    }
    // The header's secret never shows up in what the daemon recorded.
    let events: i64 = harness
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM runtime_events WHERE detail LIKE '%secret-test-header%' OR data LIKE '%secret-test-header%'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap_or(0);
    assert_eq!(events, 0);
    harness.stop().await;
    drop(llm);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_fails_the_call_cleanly_and_comes_back() {
    let script = Script::new()
        .rule(Rule::text("after the crash").when_after_tool_result("local__sleep"))
        .rule(Rule::text("echo ok").when_after_tool_result("local__echo"))
        .rule(call("local__sleep", r#"{"ms":20000}"#, "slow"))
        .rule(call("local__echo", r#"{"text":"back again"}"#, "again"))
        .rule(Rule::text("fallback"));
    let (llm, harness) = start(script, &[stdio_server("local", "trusted", &[], "")]).await;
    wait_tools(&harness, "the server publishes", |tools| {
        tools.iter().any(|tool| tool == "local__sleep")
    })
    .await;
    let pid: i64 = harness
        .store()
        .read(|conn| Ok(conn.query_row("SELECT pid FROM mcp_processes", [], |row| row.get(0))?))
        .await
        .unwrap();
    let mut events = harness.daemon().events.subscribe();
    let chat = ChatKey::cli("mcp-kill");
    let mut outputs = harness.listen(&chat).await.unwrap();
    harness.send("ada", &chat, "something slow").unwrap();
    // Wait until the call is in flight, then kill the server.
    wait_until(Duration::from_secs(10), "the call to start", || async {
        let open: i64 = harness
            .store()
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT COUNT(*) FROM run_steps WHERE kind = 'tool_call' AND name = 'local__sleep'",
                    [],
                    |row| row.get(0),
                )?)
            })
            .await
            .unwrap();
        open > 0
    })
    .await;
    // Not a wait for a state: the test server shows no sign of a call in progress, so this only
    // gives the recorded call time to cross the pipe. Killed earlier, the call fails the same way.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let killed_at = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let reply = wait_reply(&mut outputs, Duration::from_secs(15))
        .await
        .unwrap();
    assert_eq!(reply.text, "after the crash");
    assert!(
        killed_at.elapsed() < Duration::from_secs(5),
        "the call failed at once, not after its 20 s"
    );
    assert!(
        reply.tools.contains(&"local__sleep failed".to_string()),
        "{reply:?}"
    );
    let result = llm.requests().last().unwrap().to_string();
    assert!(
        result.contains("local__sleep")
            && (result.contains("closed") || result.contains("not connected")),
        "the model is told the server went away: {result}"
    );
    // The link reported itself down (tools withdrawn), was restarted, and the tools are back.
    let mut saw_down = false;
    while let Ok(event) = events.try_recv() {
        if event.kind == EventKind::McpHealth && event.detail == "down" {
            saw_down = true;
        }
    }
    assert!(saw_down, "a down event was published");
    wait_health(&harness, "the link is back", |health| {
        state_of(health, "local").is_some_and(|entry| entry.state == "up" && entry.restarts >= 1)
    })
    .await;
    wait_tools(&harness, "the tools are back", |tools| {
        tools.iter().any(|tool| tool == "local__echo")
    })
    .await;
    let reply = harness.ask("ada", &chat, "try again").await.unwrap();
    assert_eq!(reply.text, "echo ok", "{reply:?}");
    assert!(
        llm.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("back again")
    );
    // The killed server's process group is gone; one new server runs.
    assert!(members_of_group(pid as i32).is_empty());
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_garbage_and_slow_servers_block_neither_other_links_nor_the_agent() {
    let script = Script::new()
        .rule(Rule::text("slow handled").when_after_tool_result("good__sleep"))
        .rule(Rule::text("echo handled").when_after_tool_result("good__echo"))
        .rule(call("good__sleep", r#"{"ms":30000}"#, "slow"))
        .rule(call("good__echo", r#"{"text":"still here"}"#, "echo"))
        .rule(Rule::text("plain answer"));
    let (llm, harness) = start(
        script,
        &[
            stdio_server("hung", "trusted", &["--mode", "no-init"], ""),
            stdio_server("junk", "trusted", &["--mode", "garbage"], ""),
            stdio_server("good", "trusted", &[], "timeout = \"700ms\""),
        ],
    )
    .await;
    wait_tools(&harness, "the good server publishes", |tools| {
        tools.iter().any(|tool| tool == "good__echo")
    })
    .await;
    // The faulty ones never publish anything and say why.
    wait_health(
        &harness,
        "the faulty servers are down with a reason",
        |health| {
            ["hung", "junk"].iter().all(|server| {
                state_of(health, server).is_some_and(|entry| {
                    entry.state != "up"
                        && entry.tools.is_empty()
                        && entry
                            .last_error
                            .as_deref()
                            .is_some_and(|error| error.contains("initialize"))
                })
            })
        },
    )
    .await;
    let tools = harness.agent_tools("ada").await;
    assert!(
        !tools
            .iter()
            .any(|tool| tool.starts_with("hung__") || tool.starts_with("junk__")),
        "{tools:?}"
    );
    // A tool that times out fails cleanly, quickly, and the agent goes on.
    let chat = ChatKey::cli("mcp-faults");
    let started = Instant::now();
    let reply = harness.ask("ada", &chat, "something slow").await.unwrap();
    assert_eq!(reply.text, "slow handled");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        reply.tools.contains(&"good__sleep failed".to_string()),
        "{reply:?}"
    );
    assert!(
        llm.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("did not answer within"),
        "the model is told about the timeout"
    );
    // The link survived its slow tool.
    let reply = harness.ask("ada", &chat, "echo please").await.unwrap();
    assert_eq!(reply.text, "echo handled");
    let health = health(&harness).await;
    assert_eq!(state_of(&health, "good").unwrap().state, "up");
    assert_eq!(state_of(&health, "good").unwrap().restarts, 0);
    // Meanwhile the faulty links keep being retried, never publishing.
    assert!(
        health
            .iter()
            .any(|entry| entry.server == "hung" && entry.restarts >= 1)
    );
    let reply = harness.ask("ada", &chat, "just talk").await.unwrap();
    assert_eq!(reply.text, "plain answer");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_writes_ask_for_approval_and_read_only_servers_refuse_writes() {
    let script = Script::new()
        .rule(Rule::text("refused as expected").when_after_tool_result("ro__add"))
        .rule(Rule::text("echo ran").when_after_tool_result("ro__echo"))
        .rule(call("ro__add", r#"{"a":1,"b":2}"#, "add"))
        .rule(call("ro__echo", r#"{"text":"read is fine"}"#, "read"))
        .rule(call("shady__write_note", r#"{"text":"x"}"#, "note"))
        .rule(Rule::text("fallback"));
    let (llm, harness) = start(
        script,
        &[
            stdio_server("ro", "read_only", &[], ""),
            stdio_server("shady", "untrusted", &[], ""),
        ],
    )
    .await;
    wait_tools(&harness, "both servers publish", |tools| {
        tools.iter().any(|tool| tool == "ro__add")
            && tools.iter().any(|tool| tool == "shady__write_note")
    })
    .await;
    let chat = ChatKey::cli("mcp-policy");
    // read_only: a tool not declared read-only is refused by the gate, never run.
    let reply = harness.ask("ada", &chat, "add them").await.unwrap();
    assert_eq!(reply.text, "refused as expected");
    assert!(
        !reply.tools.iter().any(|tool| tool.starts_with("ro__add")),
        "{reply:?}"
    );
    let steps = harness
        .store()
        .read({
            let run = reply.run_id.unwrap();
            move |conn| runs::steps(conn, run)
        })
        .await
        .unwrap();
    let decision = steps
        .iter()
        .find(|step| step.kind == "decision")
        .expect("the gate decided");
    assert!(
        decision.detail.to_string().contains("\"deny\""),
        "{}",
        decision.detail
    );
    assert!(
        llm.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("Not run")
    );
    // ... while its read-only tools run.
    let reply = harness.ask("ada", &chat, "read something").await.unwrap();
    assert_eq!(reply.text, "echo ran");
    // untrusted: a write asks for approval (the run waits for it).
    harness.send("ada", &chat, "write a note").unwrap();
    let tool = wait_until(
        Duration::from_secs(10),
        "an approval to be asked",
        || async {
            harness
                .store()
                .read(|conn| {
                    Ok(conn
                        .query_row(
                            "SELECT tool FROM approvals WHERE status = 'pending'",
                            [],
                            |row| row.get::<_, String>(0),
                        )
                        .ok())
                })
                .await
                .unwrap()
        },
    )
    .await;
    assert_eq!(tool, "shady__write_note");
    harness.stop().await;
}

/// Pgids of the recorded MCP server processes.
fn recorded_groups(dir: &std::path::Path) -> Vec<i32> {
    let conn = rusqlite::Connection::open(dir.join("data/clawvisor.db")).unwrap();
    let mut statement = conn.prepare("SELECT pgid FROM mcp_processes").unwrap();
    statement
        .query_map([], |row| row.get::<_, i32>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn wait_groups(dir: &std::path::Path, count: usize) -> Vec<i32> {
    wait_until_blocking(
        Duration::from_secs(20),
        "the servers' process groups",
        || {
            let groups = recorded_groups(dir);
            if groups.len() == count
                && groups
                    .iter()
                    .all(|group| members_of_group(*group).len() >= 2)
            {
                Ok(groups)
            } else {
                Err(format!("groups now {groups:?}"))
            }
        },
    )
}

fn wait_empty(groups: &[i32], what: &str) {
    wait_until_blocking(Duration::from_secs(10), what, || {
        let left: Vec<(i32, Vec<i32>)> = groups
            .iter()
            .map(|group| (*group, members_of_group(*group)))
            .filter(|(_, members)| !members.is_empty())
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{what}: processes left {left:?}"))
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_with_three_stdio_servers_leaves_no_orphans() {
    let dir = ScratchDir::new("clawvisor-mcp-orphans").unwrap();
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("hi")))
        .await
        .unwrap();
    // Each server starts a grandchild (`sleep`) in its group: it does not die with its parent.
    let servers: Vec<String> = ["one", "two", "three"]
        .iter()
        .map(|name| stdio_server(name, "trusted", &["--grandchild"], ""))
        .collect();
    write_config(
        dir.path(),
        &config_toml(&llm.base_url(), &mcp_section(&servers)),
        &[agent_toml("ada", "")],
    )
    .unwrap();
    let env = BTreeMap::new();
    let daemon = DaemonProcess::start(BINARY, dir.path(), &env).unwrap();
    let first = wait_groups(dir.path(), 3);
    daemon.kill();
    // The servers themselves die with the daemon; their grandchildren would be orphans...
    let restarted = DaemonProcess::start(BINARY, dir.path(), &env).unwrap();
    // ... until the next boot reaps them.
    wait_empty(&first, "after a restart, the killed daemon's groups");
    let second = wait_groups(dir.path(), 3);
    assert!(second.iter().all(|group| !first.contains(group)));
    let (status, _) = restarted.terminate(Duration::from_secs(20)).unwrap();
    assert!(status.success(), "{status}");
    wait_empty(&second, "after a clean stop, the daemon's groups");
    assert!(
        recorded_groups(dir.path()).is_empty(),
        "a clean stop forgets its rows"
    );
}

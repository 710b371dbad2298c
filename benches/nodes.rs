//! Issue #34, tool nodes: a node tool call's round trip on loopback (the daemon's link over
//! mutual TLS to `clawvisor node serve` as its own process, `list_dir`, p50/p99 of 500 calls)
//! against the same tool called in-process; the node's idle resident set; and how long the
//! daemon takes to have the node's tools back after the node restarts.
//!
//! The daemon is the real one in-process (`Harness`); the node is the real binary. Run:
//! `cargo test --bench nodes` (the debug test profile, as the test binaries run) or
//! `cargo bench --bench nodes` (release-like); `CLAWVISOR_NODES_BINARY=<path>` runs that binary as
//! the node. BENCHMARKS.md records the figures.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::tool::{Tool, ToolContext};
use serde_json::json;

/// The node's binary: this build's, or `CLAWVISOR_NODES_BINARY` (e.g. the release binary, for
/// the node's own figures: its idle RSS is that of the file users run).
fn node_binary() -> String {
    std::env::var("CLAWVISOR_NODES_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_clawvisor").to_string())
}
const CALLS: usize = 500;

/// Starts `node serve` on `dir` at `bind`; returns the child and its https URL.
fn start_node(dir: &Path, bind: &str) -> (Child, String) {
    std::fs::create_dir_all(dir.join("work")).unwrap();
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = \"{}\"\n[node]\nroots = [\"{}\"]\n",
            dir.join("data").display(),
            dir.join("work").display()
        ),
    )
    .unwrap();
    let mut child = Command::new(node_binary())
        .arg("--config")
        .arg(&config)
        .args(["node", "serve", "--bind", bind])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the node prints its address").unwrap();
        if let Some(rest) = line.split("node listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    (child, url)
}

fn pair_code(dir: &Path) -> String {
    let output = Command::new(node_binary())
        .arg("--config")
        .arg(dir.join("node.toml"))
        .args(["node", "pair"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("pairing code: "))
        .unwrap()
        .trim()
        .to_string()
}

async fn wait_tools(harness: &Harness, present: bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tools = harness.agent_tools("ada").await;
        if tools.iter().any(|tool| tool == "nas__list_dir") == present {
            return;
        }
        assert!(Instant::now() < deadline, "the node's tools did not change");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The same `list_dir` in-process, with a context like the node's.
async fn local_round_trip(workspace: &Path, harness: &Harness) -> Vec<Duration> {
    let ctx = ToolContext {
        agent: "bench".into(),
        chat: clawvisor::domain::ChatKey::cli("bench"),
        run_id: 0,
        workspace: workspace.to_path_buf(),
        settings: Arc::new(clawvisor::tool::ToolSettings::default()),
        registry: clawvisor::registry::Registry::new(),
        store: harness.store().clone(),
        cancel: Default::default(),
        timezone: chrono_tz::UTC,
        egress: Default::default(),
    };
    let tool = clawvisor::tools::files::ListDirTool;
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let output = tool.call(json!({"path": "."}), &ctx).await.unwrap();
        samples.push(started.elapsed());
        assert!(!output.is_error);
    }
    samples
}

async fn run() {
    let root = ScratchDir::new("clawvisor-bench-nodes").unwrap();
    let node_dir = root.path().join("nas");
    let (mut node, url) = start_node(&node_dir, "127.0.0.1:0");
    let code = pair_code(&node_dir);
    let daemon_dir = ScratchDir::new("clawvisor-bench-nodes-daemon").unwrap();
    clawvisor::node::client::pair(&daemon_dir.path().join("data"), "nas", &url, &code)
        .await
        .unwrap();
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("hi")))
        .await
        .unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.config_extra = format!(
        "[mcp]\nconnect_timeout = \"2s\"\nping_every = \"300ms\"\ndegraded_retry = \"2s\"\n\n\
         [[nodes]]\nname = \"nas\"\nurl = \"{url}\"\nagents = [\"ada\"]\n"
    );
    let harness = Harness::start_in(daemon_dir, options).await.unwrap();
    wait_tools(&harness, true).await;
    for index in 0..20 {
        std::fs::write(node_dir.join("work").join(format!("f{index}.txt")), "x").unwrap();
    }
    let link = clawvisor::protocol::mcp::Link::new(&harness.daemon().registry, "nas");
    for _ in 0..50 {
        link.call("list_dir".into(), json!({"path": "."}))
            .await
            .unwrap();
    }
    let mut remote = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let output = link
            .call("list_dir".into(), json!({"path": "."}))
            .await
            .unwrap();
        remote.push(started.elapsed());
        assert!(!output.is_error, "{output:?}");
    }
    let (remote_p50, remote_p99) =
        support::report("node list_dir round trip (loopback, mTLS)", &mut remote);
    let mut local = local_round_trip(&node_dir.join("work"), &harness).await;
    let (local_p50, local_p99) = support::report("local list_dir (in-process)", &mut local);
    println!(
        "node over local: p50 +{:?}, p99 +{:?} (target ≤ 5 ms)",
        remote_p50.saturating_sub(local_p50),
        remote_p99.saturating_sub(local_p99)
    );
    // Idle: the highest of 5 s of readings, once the node released its unused pages (20 s after
    // its start, `resident::RELEASE_AFTER_START`).
    tokio::time::sleep(Duration::from_secs(22)).await;
    // (`layout/profile.sh` ends its profile of the idle node when it reads this line)
    println!("node idle: reading its RSS for 5 s");
    let pid = node.id().to_string();
    let mut highest = 0;
    for _ in 0..10 {
        highest = highest.max(support::rss_kib_of(&pid));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "node idle RSS (one daemon connected): {:.1} MiB (target ≤ 10 MiB)",
        highest as f64 / 1024.0
    );
    let binary = std::fs::canonicalize(node_binary()).unwrap_or_default();
    println!(
        "node idle: where it is, MiB: {}",
        support::where_it_is(&pid, &binary.display().to_string())
    );
    // Reconnect: the node killed and started again on the same port; from its start until the
    // agent holds its tools again.
    let bind = url.trim_start_matches("https://").to_string();
    let mut reconnects = Vec::new();
    for _ in 0..5 {
        let _ = node.kill();
        let _ = node.wait();
        wait_tools(&harness, false).await;
        let started = Instant::now();
        let (restarted, _) = start_node(&node_dir, &bind);
        node = restarted;
        wait_tools(&harness, true).await;
        reconnects.push(started.elapsed());
    }
    support::report(
        "reconnect after a node restart (start → tools back)",
        &mut reconnects,
    );
    let _ = node.kill();
    let _ = node.wait();
    harness.stop().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

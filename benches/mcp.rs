//! Issue 8: MCP tool calls through a real `McpLink` actor to the repository's test server —
//! round trip p50/p99 over stdio and streamable HTTP, and calls/s with 8 concurrent callers.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawvisor::actors::mcp_link::{McpLink, McpLinkArgs};
use clawvisor::config::{Dur, McpServerConfig, McpTransportKind, McpTrustConfig};
use clawvisor::protocol::mcp::{Link, McpLinkMsg};
use clawvisor::registry::Registry;
use clawvisor::store::{Store, StoreOptions, Synchronous};
use criterion::{Criterion, criterion_group, criterion_main};
use ractor::Actor;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_clawvisor-mcp-test-server");
const ROUND_TRIPS: usize = 1_000;
const CONCURRENT: usize = 8;
const CALLS_PER_CALLER: usize = 250;

fn server(name: &str, transport: McpTransportKind, url: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        transport,
        command: if transport == McpTransportKind::Stdio {
            SERVER.into()
        } else {
            String::new()
        },
        args: Vec::new(),
        env: BTreeMap::new(),
        env_from: BTreeMap::new(),
        cwd: None,
        url: url.into(),
        headers: BTreeMap::new(),
        headers_env: BTreeMap::new(),
        trust: McpTrustConfig::Trusted,
        agents: Vec::new(),
        timeout: Dur::secs(30),
        enabled: true,
        node: None,
    }
}

async fn start_link(registry: &Registry, store: &Store, server: McpServerConfig) -> Link {
    let args = McpLinkArgs {
        server: server.clone(),
        secrets: Arc::new(BTreeMap::new()),
        targets: Vec::new(),
        registry: registry.clone(),
        store: store.clone(),
        connect_timeout: Duration::from_secs(10),
        ping_every: Duration::from_secs(30),
    };
    let name = clawvisor::protocol::mcp::link(&server.name);
    let (actor, _) = Actor::spawn(Some(registry.name(name.local())), McpLink, args)
        .await
        .unwrap();
    // What the supervisor does when it spawns a link: its public mailbox goes with its name.
    registry.publish(&name, actor.get_derived());
    let link = registry.lookup(&name).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tools = ractor::call!(link, McpLinkMsg::Tools).unwrap();
        if !tools.is_empty() {
            return Link::new(registry, &server.name);
        }
        assert!(Instant::now() < deadline, "the link did not connect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn echo(link: &Link, i: usize) {
    let output = link
        .call("echo".into(), json!({"text": format!("m{i}")}))
        .await
        .unwrap();
    assert!(!output.is_error);
}

async fn measure(label: &str, link: &Link) {
    for i in 0..50 {
        echo(link, i).await;
    }
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for i in 0..ROUND_TRIPS {
        let started = Instant::now();
        echo(link, i).await;
        samples.push(started.elapsed());
    }
    support::report(&format!("mcp {label} echo round trip"), &mut samples);
    let started = Instant::now();
    let callers: Vec<_> = (0..CONCURRENT)
        .map(|caller| {
            let link = link.clone();
            tokio::spawn(async move {
                for i in 0..CALLS_PER_CALLER {
                    echo(&link, caller * CALLS_PER_CALLER + i).await;
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await.unwrap();
    }
    let elapsed = started.elapsed();
    let total = CONCURRENT * CALLS_PER_CALLER;
    println!(
        "mcp {label}: {total} calls from {CONCURRENT} concurrent callers in {elapsed:?} = {:.0} calls/s",
        total as f64 / elapsed.as_secs_f64()
    );
}

fn mcp(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        &dir.path().join("bench.db"),
        StoreOptions {
            synchronous: Synchronous::Normal,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let registry = Registry::new();
    let mut http_server = Command::new(SERVER)
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(http_server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().trim_start_matches("listening on ").to_string();
    let (stdio, http) = rt.block_on(async {
        let stdio = start_link(
            &registry,
            &store,
            server("bench_stdio", McpTransportKind::Stdio, ""),
        )
        .await;
        let http = start_link(
            &registry,
            &store,
            server("bench_http", McpTransportKind::Http, &url),
        )
        .await;
        measure("stdio", &stdio).await;
        measure("http", &http).await;
        (stdio, http)
    });
    c.bench_function("mcp_stdio_echo_round_trip", |b| {
        b.to_async(&rt).iter(|| echo(&stdio, 0))
    });
    c.bench_function("mcp_http_echo_round_trip", |b| {
        b.to_async(&rt).iter(|| echo(&http, 0))
    });
    rt.block_on(async {
        for server in ["bench_stdio", "bench_http"] {
            if let Some(link) = registry.lookup(&clawvisor::protocol::mcp::link(server)) {
                link.stop(None);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let _ = http_server.kill();
    let _ = http_server.wait();
    store.stop_writer();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(200));
    targets = mcp
}
criterion_main!(benches);

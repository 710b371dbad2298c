//! Tool nodes (issue #34): the household's other machines run `clawvisor node serve`, and the
//! daemon's agents use their shell and file tools under the daemon's one approval desk.
//!
//! The wire is standard: one MCP server over streamable HTTP (rmcp) behind mutual TLS. There is
//! no CA: each side has a self-signed certificate (`keys`) and pins the other's SHA-256
//! fingerprint (`tls`), learnt at pairing (`pairing`: a one-time code both sides prove without
//! sending it). The daemon side is an MCP link like any other (`actors/mcp_link`, one supervised
//! link per `[[nodes]]` entry, `as_mcp_server`): it connects with the pinned client
//! (`link_handshake`), pings, reconnects with backoff, and its tools disappear while the node is
//! down. Its tools reach agents as [`tool::NodeTool`]s, judged by the daemon's own classifier.
//!
//! What a node lends: `shell`, `read_file`, `write_file`, `list_dir` in its `[node] roots`
//! (`handler`: a file tool works in the root its path lies in, the shell in the first, its
//! sandbox granting every root), and the tools of its own `[[mcp.servers]]` as
//! `<server>__<tool>` (`upstream`, one owned task per server). Each tool's `_meta` tells the
//! daemon the roots, or the node's level for a forwarded tool, so that the daemon judges as the
//! node will (and never lower).
//!
//! Invariants:
//! - a node accepts only its daemon's certificate (or, while a pairing code is pending, anyone —
//!   but only for `/pair`); a daemon accepts only a node's pinned certificate;
//! - a node runs an action it rates above L0 (its own tools and forwarded ones alike) only with
//!   a token signed by its daemon for exactly that action, unexpired, never used before
//!   (`token`, `handler`); a file tool never reaches outside every root; the node audits what it ran
//!   in its own SQLite, the daemon's run steps and audit record which node ran what;
//! - private keys and pins are files of mode 0600 under the data directory, never printed.
//!
//! Files: `<data dir>/node/` on a node (identity, `daemon.json`, `pair-code.json`),
//! `<data dir>/nodes/` on the daemon (identity, `token.key`, `<name>/pin.json`).

pub mod client;
pub mod handler;
pub mod keys;
pub mod pairing;
pub mod serve;
pub mod tls;
pub mod token;
pub mod tool;
pub mod upstream;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{McpServerConfig, McpTransportKind, McpTrustConfig, NodeEntry};
use crate::mcp::client::Service;
use crate::protocol::mcp::McpError;

/// The MCP link settings of a `[[nodes]]` entry (`node` set: the link connects with the pinned
/// client and publishes [`tool::NodeTool`]s).
pub fn as_mcp_server(entry: &NodeEntry, data_dir: &Path) -> McpServerConfig {
    McpServerConfig {
        name: entry.name.clone(),
        transport: McpTransportKind::Http,
        command: String::new(),
        args: Vec::new(),
        env: Default::default(),
        env_from: Default::default(),
        cwd: None,
        url: client::endpoint(&entry.url, "/mcp"),
        headers: Default::default(),
        headers_env: Default::default(),
        trust: McpTrustConfig::Trusted,
        agents: entry.agents.clone(),
        timeout: entry.timeout,
        enabled: entry.enabled,
        node: Some(data_dir.to_path_buf()),
    }
}

/// Every MCP link the daemon runs: `[[mcp.servers]]` and one per `[[nodes]]` entry.
pub fn mcp_servers(config: &crate::config::Config) -> Vec<McpServerConfig> {
    let mut servers = config.mcp.servers.clone();
    servers.extend(
        config
            .nodes
            .iter()
            .map(|entry| as_mcp_server(entry, &config.data_dir)),
    );
    servers
}

/// Connects to a node's MCP endpoint with the daemon's certificate, accepting only the node's
/// pinned one, and initializes the session.
pub async fn link_handshake(
    server: &McpServerConfig,
    data_dir: &Path,
    timeout: Duration,
) -> Result<Service, McpError> {
    let client =
        client::pinned_client(data_dir, &server.name, timeout).map_err(McpError::Connect)?;
    crate::mcp::client::handshake_with(client, &server.url, timeout).await
}

/// Where a node's tools work: `[node] roots` (the shell in the first), else
/// `<data dir>/node-workspace`.
pub fn node_roots(config: &crate::config::Config) -> Vec<std::path::PathBuf> {
    if config.node.roots.is_empty() {
        vec![config.data_dir.join("node-workspace")]
    } else {
        config.node.roots.clone()
    }
}

/// Runs `node serve` until the listener fails: opens the node's own database (nonces, audit),
/// loads or makes its certificate, and serves.
pub async fn run_node(
    loaded: &crate::config::LoadedConfig,
    store: crate::store::Store,
    bind: &str,
) -> Result<(), String> {
    let config = &loaded.config;
    let identity = Arc::new(keys::load_or_create_identity(
        &pairing::node_dir(&config.data_dir),
        "clawvisor-node",
    )?);
    let roots = node_roots(config);
    // `[node] roots` exist (validated); the default one is made the first time.
    for root in &roots {
        std::fs::create_dir_all(root)
            .map_err(|error| format!("cannot create {}: {error}", root.display()))?;
    }
    let settings = crate::tool::ToolSettings::for_node(
        &config.tools,
        crate::sandbox::protected_paths(loaded),
        roots[1..].to_vec(),
    );
    let upstream = upstream::start(
        &config.mcp.servers,
        Arc::new(loaded.secrets.clone()),
        config.mcp.connect_timeout.0,
        store.clone(),
    )
    .await;
    let tools = Arc::new(handler::NodeTools {
        data_dir: config.data_dir.clone(),
        roots,
        settings: Arc::new(settings),
        store,
        tools: handler::node_tools(),
        upstream,
    });
    let server_config = tls::server_config(
        &identity,
        serve::handshake_acceptor(config.data_dir.clone()),
    )?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|error| format!("cannot listen on {bind}: {}", crate::cause::explain(&error)))?;
    let bound = listener
        .local_addr()
        .map_err(|error| format!("cannot listen on {bind}: {error}"))?;
    let paired = pairing::daemon_pin(&config.data_dir)?.is_some();
    println!(
        "node listening on https://{bound} (fingerprint {}; {})",
        identity.fingerprint(),
        if paired {
            "paired"
        } else {
            "not paired yet: run `clawvisor node pair`"
        }
    );
    tracing::info!(%bound, protections = %crate::sandbox::protections().summary(), "node serving");
    let router = serve::router(config.data_dir.clone(), identity, tools);
    serve::serve(serve::tls_listener(listener, server_config), router)
        .await
        .map_err(|error| format!("the node's server stopped: {error}"))
}

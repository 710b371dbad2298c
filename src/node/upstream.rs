//! MCP servers configured on a node (`[[mcp.servers]]` in the node's own config, the section the
//! daemon reads): the node offers their tools in its one MCP server as `<server>__<tool>`, so
//! the daemon's agents see `<node>__<server>__<tool>`, and forwards calls to them.
//!
//! Who owns what: `run_node` calls [`start`] once; it spawns one task per enabled server, owned
//! by the node's runtime (it ends with the `node serve` process). The task owns the server's
//! session and, for a stdio server, its process group ([`ServerProcess`], killed when dropped;
//! the child also dies with the node, `PR_SET_PDEATHSIG`, and is recorded in the node's
//! `mcp_processes`, so that the next `node serve` reaps what a killed node left). It connects
//! (`mcp::client`, as the daemon's `actors/mcp_link` does), lists the tools, puts them in the
//! shared [`Upstreams`] table, waits for the session to end, takes them out, and connects again
//! after a backoff (1 s doubling to 60 s). A server that fails to start is logged in a plain
//! sentence and does not stop the node: its tools are just absent. The node listens once every
//! server made its first attempt, because the daemon lists a node's tools when its link
//! connects: a server that comes up later offers its tools to the daemon after the link's next
//! reconnect, and a call while its server is down gets an error at once.
//!
//! Invariant: the node rates a forwarded call as the daemon rates an MCP tool of that trust
//! (`policy::mcp::classify_mcp`: the server's `trust`, the tool's read-only / destructive hints),
//! and `handler` admits it like the node's own tools (a token for exactly that action above L0,
//! audited on the node). The level is stated in the tool's `_meta` (`mcp::NODE_META_KEY`), and
//! the daemon rates the tool at least that high.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::config::{McpServerConfig, McpTransportKind};
use crate::mcp::process::ServerProcess;
use crate::mcp::{ToolInfo, client};
use crate::policy::{Assessment, McpTrust};
use crate::protocol::mcp::McpError;
use crate::secrets::Secret;
use crate::store::Store;
use crate::tool::ToolOutput;

/// The first wait before a server is connected again; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// One forwarded tool: where it lives and how the node rates it.
#[derive(Clone)]
pub struct UpstreamTool {
    /// `<server>__<tool>` (what the node lists), the server's own name in `info.remote_name`.
    pub info: ToolInfo,
    pub server: String,
    pub trust: McpTrust,
    pub timeout: Duration,
    peer: Peer<RoleClient>,
}

impl UpstreamTool {
    /// The node's rating of a call (whatever its arguments: the rule reads only the hints).
    pub fn assess(&self) -> Assessment {
        let mut assessment = crate::policy::mcp::classify_mcp(self.trust, &self.info.hints);
        assessment.reasons.push(format!(
            "MCP tool `{}` of the node's server `{}`",
            self.info.remote_name, self.server
        ));
        assessment
    }

    /// Forwards a call (its arguments checked against the tool's schema first).
    pub async fn call(&self, arguments: Value) -> Result<ToolOutput, String> {
        crate::mcp::schema::validate(&self.info.input_schema, &arguments)
            .map_err(|problem| format!("{}: {problem}", self.info.name))?;
        client::call(&self.peer, &self.info.remote_name, arguments, self.timeout)
            .await
            .map_err(|error| match error {
                McpError::Timeout { after, .. } => format!(
                    "the node's MCP server `{}` did not answer within {after:?}",
                    self.server
                ),
                other => format!("the node's MCP server `{}`: {other}", self.server),
            })
    }
}

/// The tools of the node's connected servers, by server (shared by the server tasks and every
/// MCP session's handler).
#[derive(Clone, Default)]
pub struct Upstreams {
    servers: Arc<RwLock<BTreeMap<String, Vec<UpstreamTool>>>>,
}

impl Upstreams {
    /// Every forwarded tool now, in server order.
    pub fn tools(&self) -> Vec<UpstreamTool> {
        match self.servers.read() {
            Ok(servers) => servers.values().flatten().cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The forwarded tool named `name` (`<server>__<tool>`), if its server is connected.
    pub fn find(&self, name: &str) -> Option<UpstreamTool> {
        let servers = self.servers.read().ok()?;
        servers
            .values()
            .flatten()
            .find(|tool| tool.info.name == name)
            .cloned()
    }

    /// How many servers are connected now.
    pub fn connected(&self) -> usize {
        self.servers.read().map_or(0, |servers| servers.len())
    }

    fn set(&self, server: &str, tools: Option<Vec<UpstreamTool>>) {
        // A poisoned lock means a panic while swapping a list; the table is still a table.
        let mut servers = match self.servers.write() {
            Ok(servers) => servers,
            Err(poisoned) => poisoned.into_inner(),
        };
        match tools {
            Some(tools) => servers.insert(server.to_string(), tools),
            None => servers.remove(server),
        };
    }
}

/// Starts one task per enabled server (see the module doc) and returns the shared table once
/// each has made its first attempt (all at once, each within `connect_timeout`): the daemon
/// lists a node's tools when it connects, so the node listens with its servers' tools in place.
pub async fn start(
    servers: &[McpServerConfig],
    secrets: Arc<BTreeMap<String, Secret>>,
    connect_timeout: Duration,
    store: Store,
) -> Upstreams {
    // What a killed node left running (a grandchild escapes PR_SET_PDEATHSIG), recorded below.
    crate::mcp::process::reap_recorded(&store).await;
    let upstreams = Upstreams::default();
    let mut first_attempts = Vec::new();
    for server in servers.iter().filter(|server| server.enabled) {
        let (attempted, first_attempt) = tokio::sync::oneshot::channel();
        first_attempts.push(first_attempt);
        let link = Link {
            server: server.clone(),
            secrets: secrets.clone(),
            connect_timeout,
            store: store.clone(),
        };
        tokio::spawn(keep_connected(link, upstreams.clone(), attempted));
    }
    for first_attempt in first_attempts {
        // An error means the task ended early, which it never does but by a panic: go on.
        let _ = first_attempt.await;
    }
    upstreams
}

/// What one server's task needs.
struct Link {
    server: McpServerConfig,
    secrets: Arc<BTreeMap<String, Secret>>,
    connect_timeout: Duration,
    /// The node's database: a stdio server's process is recorded in `mcp_processes` while it
    /// runs, for [`crate::mcp::process::reap_recorded`] at the next start.
    store: Store,
}

/// Connects, publishes, waits for the end, withdraws; again after a backoff, for ever.
async fn keep_connected(
    link: Link,
    upstreams: Upstreams,
    attempted: tokio::sync::oneshot::Sender<()>,
) {
    let server = &link.server;
    let mut attempted = Some(attempted);
    let mut wait = RETRY_FIRST;
    loop {
        let connected = connect(&link).await;
        if let Some(attempted) = attempted.take() {
            let _ = attempted.send(());
        }
        match connected {
            Ok((service, tools, process)) => {
                wait = RETRY_FIRST;
                tracing::info!(server = %server.name, tools = tools.len(),
                    "node: the MCP server is connected; its tools are offered");
                upstreams.set(&server.name, Some(tools));
                let ended = service.waiting().await;
                upstreams.set(&server.name, None);
                forget(&link.store, process).await;
                tracing::warn!(server = %server.name, ended = ?ended.map(|reason| format!("{reason:?}")),
                    "node: the MCP server's session ended; its tools are withdrawn until it is back");
            }
            Err(error) => {
                tracing::warn!(server = %server.name, %error, retry_in = ?wait,
                    "node: the MCP server could not be started or reached; the node runs on without its tools and tries again");
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(RETRY_MAX);
    }
}

/// Kills a stdio server's group (if it still runs) and forgets its `mcp_processes` row.
async fn forget(store: &Store, process: Option<ServerProcess>) {
    let Some(process) = process else { return };
    let token = process.token.clone();
    drop(process);
    let forgotten = store
        .write(move |conn| crate::store::mcp::delete(conn, &token))
        .await;
    if let Err(error) = forgotten {
        tracing::warn!(%error, "node: cannot forget a stopped MCP server's process");
    }
}

/// One connection: the session, the tools as the node offers them, the process (stdio).
async fn connect(
    link: &Link,
) -> Result<(client::Service, Vec<UpstreamTool>, Option<ServerProcess>), McpError> {
    let (server, timeout) = (&link.server, link.connect_timeout);
    let (service, process) = match server.transport {
        McpTransportKind::Stdio => {
            let (process, mut pipes) = crate::mcp::process::spawn(server, &link.secrets)?;
            let row = process.row(&server.name);
            let recorded = link
                .store
                .write(move |conn| crate::store::mcp::insert(conn, &row))
                .await;
            if let Err(error) = recorded {
                tracing::warn!(server = %server.name, %error,
                    "node: could not record the MCP server's process");
            }
            if let Some(stderr) = pipes.stderr.take() {
                tokio::spawn(log_stderr(server.name.clone(), stderr));
            }
            match client::handshake_stdio(pipes, timeout).await {
                Ok(service) => (service, Some(process)),
                Err(error) => {
                    forget(&link.store, Some(process)).await;
                    return Err(error);
                }
            }
        }
        McpTransportKind::Http => (
            client::handshake_http(server, &link.secrets, timeout).await?,
            None,
        ),
    };
    let infos = match client::list_tools(service.peer(), &server.name, timeout).await {
        Ok(infos) => infos,
        Err(error) => {
            forget(&link.store, process).await;
            return Err(error);
        }
    };
    let peer = service.peer().clone();
    let tools = infos
        .into_iter()
        .map(|info| UpstreamTool {
            info,
            server: server.name.clone(),
            trust: server.trust.into(),
            timeout: server.timeout.0,
            peer: peer.clone(),
        })
        .collect();
    Ok((service, tools, process))
}

/// Drains a stdio server's stderr into the node's log (a full pipe would block the server).
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line: String = line.chars().take(500).collect();
        tracing::debug!(server = %server, line = %line, "node: MCP server stderr");
    }
}

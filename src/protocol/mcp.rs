//! The MCP service: one link per configured server under a supervisor. Agents' MCP tools call a
//! link; Studio and `doctor` read the servers' health. Served by `actors/mcp_supervisor.rs` and
//! `actors/mcp_link.rs`.

use std::time::Duration;

use ractor::RpcReplyPort;
use serde_json::Value;

use super::{CallError, ServiceName};
use crate::config::McpServerConfig;
use crate::mcp::process::ServerProcess;
use crate::mcp::{Connection, McpError};
use crate::registry::Registry;
use crate::supervision::ChildCmd;
use crate::tools::ToolOutput;

/// Where the MCP supervisor is registered.
pub const NAME: ServiceName<McpSupervisorMsg> = ServiceName::fixed("mcp");
/// How long a health report or a reload may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where the link to `server` is registered.
pub fn link(server: &str) -> ServiceName<McpLinkMsg> {
    ServiceName::new(format!("mcp:{server}"))
}

pub enum McpSupervisorMsg {
    Child(ChildCmd),
    /// A link's news about itself.
    Report(String, LinkReport),
    Health(RpcReplyPort<Vec<McpHealth>>),
    /// A new `[[mcp.servers]]` list: links whose entry changed are restarted, others untouched.
    Reload(McpReload, RpcReplyPort<()>),
}

/// What a reload hands the MCP supervisor: the server list, the agents (who gets which tools) and
/// the secrets the servers' entries name.
pub struct McpReload {
    pub servers: Vec<McpServerConfig>,
    pub agents: Vec<crate::config::AgentSpec>,
    pub secrets: std::sync::Arc<std::collections::BTreeMap<String, crate::secrets::Secret>>,
}

/// What a link reports.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkReport {
    Connecting,
    Up {
        tools: Vec<String>,
        latency: Duration,
    },
    Latency(Duration),
    Down(String),
}

/// One server's health, as Studio and `doctor` show it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpHealth {
    pub server: String,
    pub transport: &'static str,
    pub trust: &'static str,
    /// `connecting`, `up`, `down`, `restarting`, `degraded`, `disabled`.
    pub state: &'static str,
    pub last_error: Option<String>,
    pub restarts: u32,
    pub last_latency_ms: Option<u64>,
    pub tools: Vec<String>,
}

pub enum McpLinkMsg {
    /// The connect task succeeded (internal: carries the live session).
    Connected(Box<Connection>),
    /// The connect task failed (with the server process it started, killed with the state, so
    /// that its death is not mistaken for the reason).
    ConnectFailed(McpError, Option<ServerProcess>),
    /// The server process exited or the session closed.
    Down(String),
    /// Calls `tool` (the server's own name) with `arguments`.
    Call {
        id: u64,
        tool: String,
        arguments: Value,
        reply: RpcReplyPort<Result<ToolOutput, McpError>>,
    },
    /// The caller of call `id` went away (run cancelled): cancel it at the server.
    Cancel(u64),
    /// A call task finished.
    CallDone {
        id: u64,
        latency: Duration,
        transport_closed: bool,
    },
    Tick,
    Pinged(Result<Duration, McpError>),
    /// The namespaced names of the tools this link publishes (empty while not connected).
    Tools(RpcReplyPort<Vec<String>>),
}

/// The MCP supervisor, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Mcp {
    registry: Registry,
}

impl Mcp {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    /// Every configured server's health.
    pub async fn health(&self) -> Result<Vec<McpHealth>, CallError> {
        super::ask(
            &self.registry,
            &NAME,
            Some(TIMEOUT),
            McpSupervisorMsg::Health,
        )
        .await
    }

    /// Applies a new `[[mcp.servers]]` list: links whose entry or whose agents changed restart,
    /// the others are untouched.
    pub async fn reload(&self, reload: McpReload) -> Result<(), CallError> {
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            McpSupervisorMsg::Reload(reload, reply)
        })
        .await
    }
}

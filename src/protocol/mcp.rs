//! The MCP service: one link per configured server under a supervisor. Agents' MCP tools call a
//! link; Studio and `doctor` read the servers' health; `/readyz` and every run ask whether the
//! servers have published their tools yet. Served by `actors/mcp_supervisor.rs` and
//! `actors/mcp_link/`.
//!
//! "Published" means more than "the link is up": every agent allowed to use the server has
//! confirmed that its tool set holds the server's tools (the link asks each agent after handing
//! them over). A server holds readiness back while it is *pending*: enabled, not yet published,
//! and not failed visibly (a failure leaves its reason in the health, Studio's MCP page and the
//! log, so readiness never waits for ever on a broken server). Meanwhile `/readyz` answers 503
//! naming it, and a run of one of its agents waits for it (`agent/run/mcp_wait.rs`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ractor::RpcReplyPort;
use serde_json::Value;

use super::reload::Changes;
use super::{CallError, ServiceName};
use crate::config::McpServerConfig;
use crate::registry::Registry;
use crate::tool::ToolOutput;

/// Where the MCP supervisor is registered.
pub const NAME: ServiceName<McpSupervisorMsg> = ServiceName::fixed(NAME_TEXT);
/// The registered name's text (the supervisor's links reach it under it too).
pub const NAME_TEXT: &str = "mcp";
/// How long a health report or a reload may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a run waits for its servers, whatever `[mcp] startup_wait` says: the supervisor
/// clamps its deadlines to this, and the handle gives up a little later still.
pub const MAX_STARTUP_WAIT: Duration = Duration::from_secs(600);

/// Where the link to `server` is registered.
pub fn link(server: &str) -> ServiceName<McpLinkMsg> {
    ServiceName::new(format!("mcp:{server}"))
}

/// What others may ask of the MCP supervisor.
pub enum McpSupervisorMsg {
    Health(RpcReplyPort<Vec<McpHealth>>),
    /// A new `[[mcp.servers]]` list: links whose entry changed are restarted, links whose
    /// agents alone changed are retargeted without reconnecting, others untouched.
    Reload(McpReload, RpcReplyPort<Changes>),
    /// Answers, once none of the servers that give tools to `agent` is pending (or at
    /// `[mcp] startup_wait` at the latest), with those servers' health. `None`: every server.
    Settled(Option<String>, RpcReplyPort<Vec<McpHealth>>),
}

/// What a reload hands the MCP supervisor: the server list, the agents (who gets which tools) and
/// the secrets the servers' entries name.
pub struct McpReload {
    pub servers: Vec<McpServerConfig>,
    pub agents: Vec<crate::config::AgentSpec>,
    pub secrets: std::sync::Arc<std::collections::BTreeMap<String, crate::secrets::Secret>>,
}

/// An agent that gets a server's tools, and which ones (`None`: all).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTarget {
    pub agent: String,
    pub only: Option<BTreeSet<String>>,
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
    /// Every agent allowed to use the server holds its tools (since it last came up).
    pub published: bool,
}

impl McpHealth {
    /// Still holding readiness back: enabled, neither published nor failed visibly (a server
    /// that failed once stays "failed visibly" while it is retried, so readiness does not flap).
    pub fn is_pending(&self) -> bool {
        matches!(self.state, "connecting" | "up") && !self.published && self.last_error.is_none()
    }

    /// Its tools are with the agents and it answers.
    pub fn is_published(&self) -> bool {
        self.state == "up" && self.published
    }

    /// Why the server is not published, in words fit for the model: its state only. The last
    /// error stays out (a server's stderr is not to be trusted in a prompt); Studio shows it.
    pub fn unavailable_reason(&self) -> String {
        match (self.state, self.last_error.is_some()) {
            ("up", false) => "its tools are still being handed to the agents".to_string(),
            ("connecting", false) => "it is still starting".to_string(),
            ("disabled", _) => "it is disabled in the configuration".to_string(),
            (state, _) => {
                format!("it failed and is {state}; the operator can see why on Studio's MCP page")
            }
        }
    }
}

/// What others may ask of one server's link.
pub enum McpLinkMsg {
    /// Calls `tool` (the server's own name) with `arguments`.
    Call {
        id: u64,
        tool: String,
        arguments: Value,
        reply: RpcReplyPort<Result<ToolOutput, McpError>>,
    },
    /// The caller of call `id` went away (run cancelled): cancel it at the server.
    Cancel(u64),
    /// The namespaced names of the tools this link publishes (empty while not connected).
    Tools(RpcReplyPort<Vec<String>>),
    /// Gives the tools to `agent` now if its current actor lacks them (it restarted since the
    /// last publication), and answers whether it is one of this server's agents. The agent's
    /// mailbox is ordered, so a later question to it sees the tools.
    EnsurePublished(String, RpcReplyPort<bool>),
    /// The agents that get the tools changed (a reload): publish to the new ones, withdraw from
    /// the ones that left, keep the connection.
    SetTargets(Vec<AgentTarget>),
}

/// Why a call to a server, or connecting to it, failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    #[error("cannot start the server: {0}")]
    Spawn(String),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("{what} got no answer within {after:?}")]
    Timeout { what: &'static str, after: Duration },
    #[error("the server broke the protocol: {0}")]
    Protocol(String),
    #[error("the connection to the server is closed")]
    Closed,
    #[error("the server is not connected (it is starting or restarting); try again shortly")]
    NotConnected,
    #[error("{0}")]
    Call(String),
}

impl McpError {
    /// True when the link itself is broken (the caller should treat the server as down).
    pub fn is_transport(&self) -> bool {
        matches!(self, McpError::Closed)
    }
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

    /// Waits until none of the servers that give tools to `agent` (`None`: any server) is
    /// pending — each published or failed visibly — or until `[mcp] startup_wait` passed, and
    /// returns those servers' health then. A run calls this before it lists its tools.
    pub async fn settled(&self, agent: Option<&str>) -> Result<Vec<McpHealth>, CallError> {
        let agent = agent.map(str::to_string);
        super::ask(
            &self.registry,
            &NAME,
            Some(MAX_STARTUP_WAIT + TIMEOUT),
            |reply| McpSupervisorMsg::Settled(agent, reply),
        )
        .await
    }

    /// Applies a new `[[mcp.servers]]` list: links whose entry changed restart, links whose
    /// agents alone changed are retargeted, the others are untouched; answers what it did.
    pub async fn reload(&self, reload: McpReload) -> Result<Changes, CallError> {
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            McpSupervisorMsg::Reload(reload, reply)
        })
        .await
    }

    /// Makes sure `agent`'s current actor holds `server`'s tools (see
    /// [`McpLinkMsg::EnsurePublished`]); `false` when the server gives it none or is not running.
    pub async fn ensure_published(&self, server: &str, agent: &str) -> Result<bool, CallError> {
        let agent = agent.to_string();
        super::ask(&self.registry, &link(server), Some(TIMEOUT), |reply| {
            McpLinkMsg::EnsurePublished(agent, reply)
        })
        .await
    }
}

/// One server's link, by name, for calling its tools. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Link {
    registry: Registry,
    name: ServiceName<McpLinkMsg>,
}

impl Link {
    pub fn new(registry: &Registry, server: &str) -> Self {
        Self {
            registry: registry.clone(),
            name: link(server),
        }
    }

    /// Whether the link runs (it may still be connecting).
    pub fn is_running(&self) -> bool {
        self.registry.lookup(&self.name).is_some()
    }

    /// Calls `tool` (the server's own name) and waits for its answer; the link bounds the wait
    /// by the server's timeout. When the caller goes away first (the run is cancelled and this
    /// future dropped), the link is told to cancel the call at the server.
    pub async fn call(&self, tool: String, arguments: Value) -> Result<ToolOutput, McpError> {
        let Some(link) = self.registry.lookup(&self.name) else {
            return Err(McpError::NotConnected);
        };
        let id = next_call_id();
        let (sender, receiver) = ractor::concurrency::oneshot();
        let mut guard = CancelOnDrop {
            link: link.clone(),
            id,
            armed: true,
        };
        link.cast(McpLinkMsg::Call {
            id,
            tool,
            arguments,
            reply: sender.into(),
        })
        .map_err(|_| McpError::NotConnected)?;
        let answer = receiver.await;
        guard.armed = false;
        // A dropped reply port means the link stopped while the call was in flight.
        answer.unwrap_or(Err(McpError::Closed))
    }
}

/// Tells the link to cancel a call whose caller went away before the answer.
struct CancelOnDrop {
    link: crate::registry::Mailbox<McpLinkMsg>,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.link.cast(McpLinkMsg::Cancel(self.id));
        }
    }
}

fn next_call_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::McpHealth;

    fn health(state: &'static str, published: bool, last_error: Option<&str>) -> McpHealth {
        McpHealth {
            server: "time".into(),
            transport: "stdio",
            trust: "trusted",
            state,
            last_error: last_error.map(str::to_string),
            restarts: 0,
            last_latency_ms: None,
            tools: Vec::new(),
            published,
        }
    }

    #[test]
    fn a_server_is_pending_until_published_or_failed_visibly() {
        // Starting, or up with the tools not yet confirmed by the agents: waited for.
        assert!(health("connecting", false, None).is_pending());
        assert!(health("up", false, None).is_pending());
        // Published: ready.
        let published = health("up", true, None);
        assert!(!published.is_pending() && published.is_published());
        // Failed with a reason (also while it is retried): not waited for, and not usable.
        for state in ["down", "restarting", "degraded", "connecting"] {
            let failed = health(state, false, Some("cannot start `/nope`"));
            assert!(!failed.is_pending(), "{state}");
            assert!(!failed.is_published(), "{state}");
            // What the model reads holds no server output (it could say anything).
            let reason = failed.unavailable_reason();
            assert!(reason.contains("failed"), "{state}: {reason}");
            assert!(!reason.contains("/nope"), "{state}: {reason}");
        }
        // Disabled servers are never waited for.
        assert!(!health("disabled", false, None).is_pending());
    }
}

//! McpSupervisor: one [`McpLink`] per enabled `[[mcp.servers]]` entry, and their health.
//!
//! Responsibility: start the links (after reaping server processes a killed daemon left behind),
//! restart them with backoff through the one restart policy (`supervise::Children`), keep each
//! server's health (state, last error, restarts, last latency, tools) and publish every change as
//! an `mcp_health` event for Studio; answer health queries; apply a reload (start, stop or restart
//! only the links whose entry changed; a link whose agents alone changed keeps its connection and
//! is retargeted, `McpLinkMsg::SetTargets`); answer runs waiting for their servers (`Settled`).
//!
//! Readiness follows the current server set: a server added by a reload is pending until it
//! publishes or fails, a removed one is forgotten at once (its health entry goes with it), so a
//! waiting run or `/readyz` never waits for a server that no longer exists.
//!
//! Which agents get a server's tools: those named in the server's `agents` (`"*"`: all), and
//! those whose own file lists `mcp:<server>` (all tools) or `<server>__<tool>` (just those).
//!
//! Invariants:
//! - A link that fails never takes the daemon down: links are transient children whose exhausted
//!   budget degrades them (`OnExhausted::Degrade`, retried after `[mcp] degraded_retry`).
//! - Boot reaping happens before any link starts, and only in the daemon that owns the schedule
//!   (`chat` beside a running daemon must not kill that daemon's servers).
//!
//! Background job: none of its own (restarts are `send_after` timers of `Children`; each waiting
//! run's deadline is a `send_after` of `WaitersDue`).
//!
//! Restart policy: permanent under the root, `[supervision]` budget.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::mcp_link::{McpLink, McpLinkArgs};
use super::supervise::actor_spec;
use super::supervise::{Action, ChildCmd, ChildSpec, ChildStatus, Children, OnExhausted, Restart};
use crate::config::{AgentSpec, McpConfig, McpServerConfig, McpTransportKind};
use crate::events::{EventBus, EventData, EventKind};
use crate::protocol::mcp::AgentTarget;
use crate::protocol::mcp::{McpHealth, McpSupervisorMsg};
use crate::protocol::reload::Changes;
use crate::registry::{Registry, ServiceName};
use crate::secrets::Secret;
use crate::store::Store;

/// What makes the MCP supervisor act: others' requests, its links' news, its own timers.
pub enum SupervisorMsg {
    Request(McpSupervisorMsg),
    Child(ChildCmd),
    /// A link's news about itself.
    Report(String, LinkReport),
    /// A waiter's deadline may have passed.
    WaitersDue,
}

wraps_requests!(SupervisorMsg, McpSupervisorMsg);

impl From<ChildCmd> for SupervisorMsg {
    fn from(cmd: ChildCmd) -> Self {
        SupervisorMsg::Child(cmd)
    }
}

/// The supervisor's own name, typed with its own messages: how its links reach it.
pub(super) const OWN_NAME: ServiceName<SupervisorMsg> =
    ServiceName::fixed(crate::protocol::mcp::NAME_TEXT);

/// What a link reports about itself.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkReport {
    Connecting,
    Up {
        tools: Vec<String>,
        latency: std::time::Duration,
    },
    Latency(std::time::Duration),
    Down(String),
    /// Every agent allowed to use the server confirmed that it holds the server's tools.
    Published,
    /// An agent that should hold the tools does not (yet): it restarted, or was just added.
    Unpublished,
}

#[derive(Clone)]
pub struct McpSupervisorArgs {
    pub config: McpConfig,
    pub agents: Vec<AgentSpec>,
    pub secrets: Arc<BTreeMap<String, Secret>>,
    pub registry: Registry,
    pub store: Store,
    pub events: EventBus,
    pub policy: super::supervise::RestartPolicy,
    /// Reap server processes left by a killed daemon (only the daemon that owns the data).
    pub reap: bool,
}

pub struct McpSupervisor;

pub struct McpSupervisorState {
    args: McpSupervisorArgs,
    children: Children,
    health: BTreeMap<String, McpHealth>,
    servers: BTreeMap<String, McpServerConfig>,
    /// Runs waiting for their agent's servers to settle (`Settled`).
    waiters: Vec<Waiter>,
}

/// A run waiting for the servers of `agent` (`None`: all) to be published or failed.
struct Waiter {
    agent: Option<String>,
    deadline: Instant,
    reply: RpcReplyPort<Vec<McpHealth>>,
}

/// The agents that get `server`'s tools, and which ones.
pub fn targets(server: &McpServerConfig, agents: &[AgentSpec]) -> Vec<AgentTarget> {
    let everyone = server.agents.iter().any(|agent| agent == "*");
    let prefix = format!("{}__", server.name);
    let whole = format!("mcp:{}", server.name);
    agents
        .iter()
        .filter_map(|spec| {
            if everyone || server.agents.contains(&spec.name) || spec.tools.contains(&whole) {
                return Some(AgentTarget {
                    agent: spec.name.clone(),
                    only: None,
                });
            }
            let only: BTreeSet<String> = spec
                .tools
                .iter()
                .filter(|tool| tool.starts_with(&prefix))
                .cloned()
                .collect();
            (!only.is_empty()).then(|| AgentTarget {
                agent: spec.name.clone(),
                only: Some(only),
            })
        })
        .collect()
}

fn initial_health(server: &McpServerConfig) -> McpHealth {
    McpHealth {
        server: server.name.clone(),
        transport: match server.transport {
            McpTransportKind::Stdio => "stdio",
            McpTransportKind::Http => "http",
        },
        trust: server.trust.as_str(),
        state: if server.enabled {
            "connecting"
        } else {
            "disabled"
        },
        last_error: None,
        restarts: 0,
        last_latency_ms: None,
        tools: Vec::new(),
        published: false,
    }
}

fn link_spec(args: &McpSupervisorArgs, server: &McpServerConfig) -> ChildSpec {
    actor_spec(
        &args.registry,
        &crate::protocol::mcp::link(&server.name),
        args.policy.clone(),
        || McpLink,
        McpLinkArgs {
            server: server.clone(),
            secrets: args.secrets.clone(),
            targets: targets(server, &args.agents),
            registry: args.registry.clone(),
            store: args.store.clone(),
            connect_timeout: args.config.connect_timeout.0,
            ping_every: args.config.ping_every.0,
        },
    )
    .restart(Restart::Transient)
    .on_exhausted(OnExhausted::Degrade {
        retry_after: args.config.degraded_retry.0,
    })
}

impl McpSupervisorState {
    fn publish(&self, server: &str) {
        let Some(health) = self.health.get(server) else {
            return;
        };
        self.args.events.publish_data(
            EventKind::McpHealth,
            crate::protocol::mcp::link(server).local(),
            health.state,
            EventData::McpHealth {
                server: health.server.clone(),
                transport: health.transport.to_string(),
                trust: health.trust.to_string(),
                state: health.state.to_string(),
                last_error: health.last_error.clone(),
                restarts: health.restarts,
                last_latency_ms: health.last_latency_ms,
                tool_count: health.tools.len(),
            },
        );
    }

    /// Copies restart counts and supervision states (restarting, degraded) into the health map.
    fn sync_children(&mut self) {
        let mut changed = Vec::new();
        for info in self.children.info() {
            let Some(server) = info.id.strip_prefix("mcp:") else {
                continue;
            };
            let Some(health) = self.health.get_mut(server) else {
                continue;
            };
            let state = match info.status {
                ChildStatus::Restarting => Some("restarting"),
                ChildStatus::Degraded => Some("degraded"),
                _ => None,
            };
            let mut dirty = health.restarts != info.restarts;
            health.restarts = info.restarts;
            if let Some(state) = state
                && health.state != state
            {
                health.state = state;
                health.tools.clear();
                health.published = false;
                dirty = true;
            }
            if dirty {
                changed.push(server.to_string());
            }
        }
        for server in changed {
            self.publish(&server);
        }
    }

    async fn start(&mut self, myself: &ActorRef<SupervisorMsg>, server: &McpServerConfig) {
        self.health
            .insert(server.name.clone(), initial_health(server));
        self.servers.insert(server.name.clone(), server.clone());
        if !server.enabled {
            self.publish(&server.name);
            return;
        }
        let spec = link_spec(&self.args, server);
        let id = spec.id.clone();
        self.children.insert(spec);
        // A link's failure is never escalated (Degrade), so the action is always Nothing.
        let _ = self.children.start(myself, &id).await;
        self.sync_children();
    }

    async fn stop(&mut self, server: &str) {
        self.children
            .remove(crate::protocol::mcp::link(server).local())
            .await;
        self.health.remove(server);
        self.servers.remove(server);
    }

    /// The health of the enabled servers that give `agent` tools (`None`: every enabled one).
    fn servers_of(&self, agent: Option<&str>) -> Vec<McpHealth> {
        self.servers
            .values()
            .filter(|server| server.enabled)
            .filter(|server| {
                agent.is_none_or(|agent| {
                    targets(server, &self.args.agents)
                        .iter()
                        .any(|target| target.agent == agent)
                })
            })
            .filter_map(|server| self.health.get(&server.name).cloned())
            .collect()
    }

    /// Answers every waiter whose servers are all settled or whose deadline passed; forgets
    /// those whose run went away.
    fn settle_waiters(&mut self) {
        let now = Instant::now();
        let waiters = std::mem::take(&mut self.waiters);
        for waiter in waiters {
            if waiter.reply.is_closed() {
                continue;
            }
            let servers = self.servers_of(waiter.agent.as_deref());
            if now >= waiter.deadline || !servers.iter().any(McpHealth::is_pending) {
                let _ = waiter.reply.send(servers);
            } else {
                self.waiters.push(waiter);
            }
        }
    }
}

impl Actor for McpSupervisor {
    type Msg = SupervisorMsg;
    type State = McpSupervisorState;
    type Arguments = McpSupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: McpSupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let children = Children::new(crate::protocol::mcp::NAME.local(), args.events.clone());
        Ok(McpSupervisorState {
            args,
            children,
            health: BTreeMap::new(),
            servers: BTreeMap::new(),
            waiters: Vec::new(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.args.reap {
            crate::mcp::process::reap_recorded(&state.args.store).await;
        }
        for server in state.args.config.servers.clone() {
            for agent in &server.agents {
                if agent != "*" && !state.args.agents.iter().any(|spec| &spec.name == agent) {
                    tracing::warn!(server = %server.name, agent = %agent,
                        "[[mcp.servers]] names an agent that does not exist");
                }
            }
            state.start(&myself, &server).await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Request(request) => on_request(&myself, state, request).await,
            SupervisorMsg::Child(cmd) => {
                let _ = state.children.handle_cmd(&myself, cmd).await;
                state.sync_children();
                state.settle_waiters();
            }
            SupervisorMsg::Report(server, report) => {
                let Some(health) = state.health.get_mut(&server) else {
                    return Ok(());
                };
                match report {
                    LinkReport::Connecting => {
                        health.state = "connecting";
                        health.published = false;
                    }
                    LinkReport::Up { tools, latency } => {
                        health.state = "up";
                        health.tools = tools;
                        health.published = false;
                        health.last_latency_ms = Some(latency.as_millis() as u64);
                    }
                    LinkReport::Published => health.published = true,
                    LinkReport::Unpublished => health.published = false,
                    LinkReport::Latency(latency) => {
                        health.last_latency_ms = Some(latency.as_millis() as u64);
                        // Latency alone is not worth an event per call.
                        return Ok(());
                    }
                    LinkReport::Down(error) => {
                        health.state = "down";
                        health.tools.clear();
                        health.published = false;
                        health.last_error = Some(error);
                    }
                }
                state.publish(&server);
                state.settle_waiters();
            }
            SupervisorMsg::WaitersDue => state.settle_waiters(),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let action = state.children.on_supervision_event(&myself, &event);
        state.sync_children();
        state.settle_waiters();
        match action {
            Action::Escalate(reason) => Err(reason.into()),
            Action::Nothing => Ok(()),
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.children.stop_all().await;
        Ok(())
    }
}

/// Answers a request from outside: health, a reload, or a run waiting for its servers.
async fn on_request(
    myself: &ActorRef<SupervisorMsg>,
    state: &mut McpSupervisorState,
    request: McpSupervisorMsg,
) {
    match request {
        McpSupervisorMsg::Health(reply) => {
            state.sync_children();
            let _ = reply.send(state.health.values().cloned().collect());
        }
        McpSupervisorMsg::Reload(reload, reply) => {
            let outcome = reload_servers(myself, state, reload).await;
            let _ = reply.send(outcome);
            state.settle_waiters();
        }
        McpSupervisorMsg::Settled(agent, reply) => {
            let wait = state
                .args
                .config
                .startup_wait
                .0
                .min(crate::protocol::mcp::MAX_STARTUP_WAIT);
            state.waiters.push(Waiter {
                agent,
                deadline: Instant::now() + wait,
                reply,
            });
            state.settle_waiters();
            if !state.waiters.is_empty() {
                myself.send_after(wait, || SupervisorMsg::WaitersDue);
            }
        }
    }
}

/// Applies a reload: links whose entry changed restart, removed ones stop, new ones start, and
/// a link whose agents alone changed keeps its connection and gets its new agents
/// (`SetTargets`) — so adding an agent never cuts the calls of an `agents = ["*"]` server.
async fn reload_servers(
    myself: &ActorRef<SupervisorMsg>,
    state: &mut McpSupervisorState,
    reload: crate::protocol::mcp::McpReload,
) -> Changes {
    let wanted: BTreeMap<String, McpServerConfig> = reload
        .servers
        .into_iter()
        .map(|server| (server.name.clone(), server))
        .collect();
    let old_agents = std::mem::replace(&mut state.args.agents, reload.agents);
    state.args.secrets = reload.secrets;
    let mut outcome = Changes::default();
    let current: Vec<String> = state.servers.keys().cloned().collect();
    for name in current {
        let Some(server) = state.servers.get(&name).cloned() else {
            continue;
        };
        match wanted.get(&name) {
            None => {
                state.stop(&name).await;
                outcome.removed.push(name);
            }
            Some(entry) if !same_connection(entry, &server) => {
                state.stop(&name).await;
                outcome.restarted.push(name);
            }
            Some(entry) => {
                let entry = entry.clone();
                let new_targets = targets(&entry, &state.args.agents);
                let unchanged = targets(&server, &old_agents) == new_targets;
                state.servers.insert(name.clone(), entry.clone());
                if unchanged || !entry.enabled {
                    continue;
                }
                // The link's next restart (after a failure) starts with the new agents too.
                state.children.insert(link_spec(&state.args, &entry));
                if let Some(link) = state
                    .args
                    .registry
                    .lookup(&crate::protocol::mcp::link(&name))
                {
                    let _ = link.cast(crate::protocol::mcp::McpLinkMsg::SetTargets(new_targets));
                }
                outcome.retargeted.push(name);
            }
        }
    }
    for (name, server) in wanted {
        if !state.servers.contains_key(&name) {
            state.start(myself, &server).await;
            if !outcome.restarted.contains(&name) {
                outcome.added.push(name);
            }
        }
    }
    outcome
}

/// Whether two entries of a server connect the same way: equal but for `agents`, which only
/// decides who gets the tools (a retarget, not a restart).
fn same_connection(new: &McpServerConfig, old: &McpServerConfig) -> bool {
    let mut new = new.clone();
    new.agents.clone_from(&old.agents);
    new == *old
}

//! McpLink(server): one configured MCP server — its connection, its tools, its calls.
//!
//! Lifecycle: `pre_start` only builds the state; `post_start` spawns the connect task (spawn the
//! stdio server in its own process group, or reach the HTTP endpoint; `initialize`; list every
//! tool), bounded by `[mcp] connect_timeout`. When it succeeds the tools are published to the
//! allowed agents as `<server>__<tool>` (`AgentMsg::SetTools("mcp:<server>", ..)`), and the link
//! answers calls. A task then asks each agent for its tool list (its mailbox is ordered, so the
//! answer comes after the tools were applied) and confirms that it holds them; once every allowed
//! agent has, the link reports `LinkReport::Published` — what `/readyz` and waiting runs wait
//! for. When an agent restarts (a new actor without the tools) or a reload adds one
//! (`SetTargets`), the link reports `LinkReport::Unpublished`, publishes to it and confirms
//! again; a run that starts before the tick noticed asks the link itself (`EnsurePublished`). A
//! confirmation that failed (the agent did not answer in time) is tried again by the tick, with
//! backoff, so readiness never stays held back by one slow answer. Each call runs in its own task, bounded by the server's `timeout`, and answers the
//! caller's reply port directly — a slow tool never blocks the link, other links or the agent.
//!
//! The link dies (returns an error, so its supervisor restarts it with backoff) when: the connect
//! task fails (spawn error, no answer to initialize, garbage instead of JSON-RPC, tools/list
//! fails), the server process exits, the rmcp session closes, a call finds the transport closed,
//! or a ping gets no answer.
//!
//! Invariants:
//! - The tools are withdrawn from every agent the moment the link knows it is down, before it
//!   stops; and again when its state is dropped (stop, error or panic: ractor runs no `post_stop`
//!   after a failure, so every cleanup lives in `Drop for McpLinkState`).
//! - A stdio server's whole process group is killed when the link stops or its state drops
//!   (`ServerProcess`). Every `mcp_processes` row the link recorded is deleted: awaited in
//!   `post_stop` on a clean stop (so a shutdown never leaves rows behind), in the background
//!   after a failure; a daemon killed with SIGKILL leaves the rows for the boot-time reaper
//!   (`mcp::process::reap`).
//! - Messages from agents are plain data (tool name, JSON arguments, a reply port).
//!
//! Background jobs (all owned by this actor, aborted when its state drops; restarting the link
//! starts them afresh; none writes anything but `mcp_processes`):
//! - the connect task (once per link);
//! - the process watcher (stdio): keeps the last stderr lines, reports the exit;
//! - the session watcher: owns the rmcp service, reports its end;
//! - a 500 ms tick: re-publishes tools to agents that restarted, retries failed confirmations
//!   (backoff 1 s doubling to 30 s), pings every `[mcp] ping_every`;
//! - at most one confirmation task per agent (one ask of the agent's tool list);
//! - one task per call in flight.
//!
//! Restart policy: transient under the McpSupervisor, `[supervision]` backoff; a link that
//! exhausts its budget is degraded and tried again after `[mcp] degraded_retry`.

mod connect;
mod publish;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::mcp_supervisor::LinkReport;
use crate::config::McpServerConfig;
use crate::mcp::process::ServerProcess;
use crate::mcp::{Connection, ToolInfo, client};
use crate::protocol::mcp::{AgentTarget, McpError, McpLinkMsg};
use crate::registry::Registry;
use crate::secrets::Secret;
use crate::store::Store;
use crate::tool::ToolOutput;

/// How often the link checks its agents (a restarted agent lost its tools) and its ping timer.
const TICK: Duration = Duration::from_millis(500);
/// Lines of a server's stderr kept to explain its death.
const STDERR_TAIL: usize = 5;
/// The first wait before a failed confirmation is tried again; it doubles up to the next.
const CONFIRM_RETRY_FIRST: Duration = Duration::from_secs(1);
const CONFIRM_RETRY_MAX: Duration = Duration::from_secs(30);

/// What makes a link act: others' requests, and what its own tasks report.
pub enum LinkMsg {
    Request(McpLinkMsg),
    /// The connect task succeeded (with the live session).
    Connected(Box<Connection>),
    /// The connect task failed (with the server process it started, killed with the state, so
    /// that its death is not mistaken for the reason).
    ConnectFailed(McpError, Option<ServerProcess>),
    /// The server process exited or the session closed.
    Down(String),
    /// A call task finished.
    CallDone {
        id: u64,
        latency: Duration,
        transport_closed: bool,
    },
    Tick,
    Pinged(Result<Duration, McpError>),
    /// `agent` (the actor that had `ActorId` when it was given the tools) answered whether its
    /// tool set holds them (`false` also when it did not answer in time).
    Confirmed(String, ActorId, bool),
}

wraps_requests!(LinkMsg, McpLinkMsg);

#[derive(Clone)]
pub struct McpLinkArgs {
    pub server: McpServerConfig,
    pub secrets: Arc<BTreeMap<String, Secret>>,
    pub targets: Vec<AgentTarget>,
    pub registry: Registry,
    pub store: Store,
    pub connect_timeout: Duration,
    pub ping_every: Duration,
}

/// Tokens of the `mcp_processes` rows this link instance recorded (shared with its connect
/// task, which records the row before the link holds the process).
pub(super) type Recorded = Arc<std::sync::Mutex<Vec<String>>>;

pub struct McpLink;

pub struct McpLinkState {
    args: McpLinkArgs,
    peer: Option<Peer<RoleClient>>,
    process: Option<ServerProcess>,
    tools: Vec<ToolInfo>,
    /// Agents that hold our tools, by the actor id they had when we published.
    published: HashMap<String, ActorId>,
    /// Agents that confirmed they hold them, by the same actor id.
    confirmed: HashMap<String, ActorId>,
    /// Agents whose confirmation task is in flight.
    confirming: HashSet<String>,
    /// Agents whose last confirmation failed: when to publish and confirm again, and the wait
    /// after that.
    retry: HashMap<String, (Instant, Duration)>,
    /// `LinkReport::Published` was sent for this connection.
    announced: bool,
    calls: HashMap<u64, JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
    last_ping: Instant,
    ping_in_flight: bool,
    recorded: Recorded,
}

impl McpLinkState {
    /// Stops everything this link started: its tasks (a connect task in flight drops the process
    /// it spawned, which kills the group) and the server's process group.
    fn stop_all(&mut self) {
        self.withdraw();
        for (_, call) in self.calls.drain() {
            call.abort();
        }
        for task in self.tasks.drain(..) {
            task.abort();
        }
        self.peer = None;
        if let Some(process) = self.process.take() {
            process.kill_group();
        }
    }

    /// The recorded rows, taken: whoever takes them deletes them.
    fn take_recorded(&self) -> Vec<String> {
        match self.recorded.lock() {
            Ok(mut tokens) => std::mem::take(&mut *tokens),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }
}

impl Drop for McpLinkState {
    /// After a failure (ractor runs no `post_stop`) the rows are deleted in the background; a
    /// clean stop has deleted them already, awaited, in `post_stop`.
    fn drop(&mut self) {
        self.stop_all();
        let tokens = self.take_recorded();
        if tokens.is_empty() {
            return;
        }
        let store = self.args.store.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = store
                    .write(move |conn| crate::store::mcp::delete_all(conn, &tokens))
                    .await;
            });
        }
    }
}

impl Actor for McpLink {
    type Msg = LinkMsg;
    type State = McpLinkState;
    type Arguments = McpLinkArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: McpLinkArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(McpLinkState {
            args,
            peer: None,
            process: None,
            tools: Vec::new(),
            published: HashMap::new(),
            confirmed: HashMap::new(),
            confirming: HashSet::new(),
            retry: HashMap::new(),
            announced: false,
            calls: HashMap::new(),
            tasks: Vec::new(),
            last_ping: Instant::now(),
            ping_in_flight: false,
            recorded: Recorded::default(),
        })
    }

    /// A clean stop (shutdown, reload) kills the server and forgets its rows before it returns,
    /// so the store, stopped after the MCP links, has written the deletion.
    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.stop_all();
        let tokens = state.take_recorded();
        if !tokens.is_empty() {
            let server = state.args.server.name.clone();
            if let Err(error) = state
                .args
                .store
                .write(move |conn| crate::store::mcp::delete_all(conn, &tokens))
                .await
            {
                tracing::warn!(%server, %error, "could not forget the MCP server's process; the next boot reaps it");
            }
        }
        Ok(())
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.report(LinkReport::Connecting);
        let args = state.args.clone();
        let link = myself.clone();
        let recorded = state.recorded.clone();
        state.tasks.push(tokio::spawn(async move {
            let message = match connect::connect(&args, &link, &recorded).await {
                Ok(connection) => LinkMsg::Connected(Box::new(connection)),
                Err((error, process)) => LinkMsg::ConnectFailed(error, process),
            };
            let _ = link.cast(message);
        }));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            LinkMsg::Request(request) => state.on_request(&myself, request),
            LinkMsg::Connected(connection) => state.on_connected(&myself, *connection),
            LinkMsg::ConnectFailed(error, process) => {
                state.process = process;
                return Err(fail(state, error.to_string()));
            }
            LinkMsg::Down(reason) => return Err(fail(state, reason)),
            LinkMsg::CallDone {
                id,
                latency,
                transport_closed,
            } => {
                state.calls.remove(&id);
                if transport_closed {
                    return Err(fail(
                        state,
                        "the connection closed during a call".to_string(),
                    ));
                }
                state.report(LinkReport::Latency(latency));
            }
            LinkMsg::Tick => state.on_tick(&myself),
            LinkMsg::Pinged(result) => {
                state.ping_in_flight = false;
                state.last_ping = Instant::now();
                match result {
                    Ok(latency) => state.report(LinkReport::Latency(latency)),
                    Err(error) => return Err(fail(state, format!("ping failed: {error}"))),
                }
            }
            LinkMsg::Confirmed(agent, id, holds) => state.on_confirmed(&myself, agent, id, holds),
        }
        Ok(())
    }
}

impl McpLinkState {
    /// A request from outside: a call, its cancellation, the tool list, a publication check or
    /// new targets.
    fn on_request(&mut self, myself: &ActorRef<LinkMsg>, request: McpLinkMsg) {
        match request {
            McpLinkMsg::Call {
                id,
                tool,
                arguments,
                reply,
            } => self.call(myself, id, tool, arguments, reply),
            McpLinkMsg::Cancel(id) => {
                if let Some(task) = self.calls.remove(&id) {
                    // Dropping rmcp's request future sends `notifications/cancelled`.
                    task.abort();
                }
            }
            McpLinkMsg::Tools(reply) => {
                let names = if self.peer.is_some() {
                    self.tools.iter().map(|tool| tool.name.clone()).collect()
                } else {
                    Vec::new()
                };
                let _ = reply.send(names);
            }
            McpLinkMsg::EnsurePublished(agent, reply) => {
                self.publish(myself);
                let current = self
                    .args
                    .registry
                    .lookup(&crate::protocol::agent::name(&agent))
                    .map(|actor| actor.get_id());
                let holds = current.is_some() && self.published.get(&agent) == current.as_ref();
                let _ = reply.send(holds);
            }
            McpLinkMsg::SetTargets(targets) => self.set_targets(targets, myself),
        }
    }

    /// The connect task succeeded: keep the session, watch it, start the tick, hand the tools
    /// to the agents and tell the supervisor.
    fn on_connected(&mut self, myself: &ActorRef<LinkMsg>, connection: Connection) {
        let Connection {
            service,
            process,
            tools,
            latency,
        } = connection;
        self.peer = Some(service.peer().clone());
        self.process = process;
        self.tools = tools;
        let link = myself.clone();
        self.tasks.push(tokio::spawn(async move {
            let reason = match service.waiting().await {
                Ok(reason) => format!("the session ended ({reason:?})"),
                Err(_) => "the session task failed".to_string(),
            };
            let _ = link.cast(LinkMsg::Down(reason));
        }));
        self.tasks
            .push(myself.send_interval(TICK, || LinkMsg::Tick));
        self.last_ping = Instant::now();
        self.publish(myself);
        tracing::info!(server = %self.args.server.name, tools = self.tools.len(),
            "MCP server connected");
        self.report(LinkReport::Up {
            tools: self.tools.iter().map(|tool| tool.name.clone()).collect(),
            latency,
        });
        // A server with no tools (or none for any agent) has nothing to deliver.
        self.update_announcement();
    }

    /// Runs one call in its own task, which answers the caller directly.
    fn call(
        &mut self,
        myself: &ActorRef<LinkMsg>,
        id: u64,
        tool: String,
        arguments: Value,
        reply: RpcReplyPort<Result<ToolOutput, McpError>>,
    ) {
        let Some(peer) = self.peer.clone() else {
            let _ = reply.send(Err(McpError::NotConnected));
            return;
        };
        let timeout = self.args.server.timeout.0;
        let link = myself.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let result = client::call(&peer, &tool, arguments, timeout).await;
            let transport_closed = matches!(&result, Err(error) if error.is_transport());
            let _ = reply.send(result);
            let _ = link.cast(LinkMsg::CallDone {
                id,
                latency: started.elapsed(),
                transport_closed,
            });
        });
        self.calls.insert(id, task);
    }

    /// The 500 ms tick: publish to agents that lack the tools, and ping when it is time.
    fn on_tick(&mut self, myself: &ActorRef<LinkMsg>) {
        self.publish(myself);
        if self.peer.is_none()
            || self.ping_in_flight
            || self.last_ping.elapsed() < self.args.ping_every
        {
            return;
        }
        self.ping_in_flight = true;
        let peer = self.peer.clone();
        let link = myself.clone();
        let timeout = self.args.connect_timeout;
        self.tasks.retain(|task| !task.is_finished());
        self.tasks.push(tokio::spawn(async move {
            if let Some(peer) = peer {
                let result = client::ping(&peer, timeout).await;
                let _ = link.cast(LinkMsg::Pinged(result));
            }
        }));
    }

    /// An agent answered whether it holds the tools given to its actor `id`.
    fn on_confirmed(
        &mut self,
        myself: &ActorRef<LinkMsg>,
        agent: String,
        id: ActorId,
        holds: bool,
    ) {
        self.confirming.remove(&agent);
        if self.published.get(&agent) == Some(&id) {
            if holds {
                self.retry.remove(&agent);
                self.confirmed.insert(agent, id);
            } else {
                self.confirmation_failed(&agent);
            }
        }
        // A newer actor of the agent (or one whose confirmation was in flight while it
        // restarted) gets its own confirmation now.
        self.publish(myself);
    }
}

/// The link is down: tools away at once, the supervisor told, then the error that stops us.
fn fail(state: &mut McpLinkState, reason: String) -> ActorProcessingErr {
    let reason = crate::secrets::redact(&reason).into_owned();
    state.withdraw();
    state.peer = None;
    tracing::warn!(server = %state.args.server.name, error = %reason, "MCP server link down");
    state.report(LinkReport::Down(reason.clone()));
    format!("MCP server `{}`: {reason}", state.args.server.name).into()
}

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
//! - A stdio server's whole process group is killed when the state drops (`ServerProcess`), its
//!   `mcp_processes` row is deleted afterwards; a daemon killed with SIGKILL leaves the row for the
//!   boot-time reaper (`mcp::process::reap`).
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

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef};
use rmcp::service::{Peer, RoleClient};
use tokio::io::AsyncBufReadExt;
use tokio::task::JoinHandle;

use crate::config::{McpServerConfig, McpTransportKind};
use crate::mcp::process::ServerProcess;
use crate::mcp::tool::McpTool;
use crate::mcp::{Connection, McpError, ToolInfo, client};
use crate::protocol::agent::AgentMsg;
pub use crate::protocol::mcp::{AgentTarget, McpLinkMsg};
use crate::protocol::mcp::{LinkReport, McpSupervisorMsg};
use crate::registry::Registry;
use crate::secrets::Secret;
use crate::store::Store;
use crate::tool::Tool;

/// How often the link checks its agents (a restarted agent lost its tools) and its ping timer.
const TICK: Duration = Duration::from_millis(500);
/// Lines of a server's stderr kept to explain its death.
const STDERR_TAIL: usize = 5;
/// The first wait before a failed confirmation is tried again; it doubles up to the next.
const CONFIRM_RETRY_FIRST: Duration = Duration::from_secs(1);
const CONFIRM_RETRY_MAX: Duration = Duration::from_secs(30);

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
}

impl McpLinkState {
    fn source(&self) -> String {
        crate::protocol::mcp::link(&self.args.server.name)
            .local()
            .to_string()
    }

    fn report(&self, report: LinkReport) {
        if let Some(supervisor) = self.args.registry.lookup(&crate::protocol::mcp::NAME) {
            let _ = supervisor.cast(McpSupervisorMsg::Report(
                self.args.server.name.clone(),
                report,
            ));
        }
    }

    /// Takes the tools away from every agent that has them.
    fn withdraw(&mut self) {
        self.confirmed.clear();
        self.retry.clear();
        self.announced = false;
        let source = self.source();
        for (agent, _) in self.published.drain() {
            if let Some(agent) = self
                .args
                .registry
                .lookup(&crate::protocol::agent::name(&agent))
            {
                let _ = agent.cast(AgentMsg::SetTools(source.clone(), Vec::new()));
            }
        }
    }

    /// The tools `target` may use.
    fn tools_for<'a>(&'a self, target: &'a AgentTarget) -> impl Iterator<Item = &'a ToolInfo> {
        self.tools.iter().filter(|info| {
            target
                .only
                .as_ref()
                .is_none_or(|only| only.contains(&info.name))
        })
    }

    /// Publishes the tools to every allowed agent whose current actor does not hold them yet
    /// (new, restarted, or due again after a failed confirmation), and has each publication
    /// confirmed (`McpLinkMsg::Confirmed`, at most one in flight per agent).
    fn publish(&mut self, myself: &ActorRef<McpLinkMsg>) {
        if self.peer.is_none() || self.tools.is_empty() {
            return;
        }
        let source = self.source();
        let trust = self.args.server.trust.into();
        let mut to_confirm = Vec::new();
        for target in &self.args.targets {
            let Some(agent) = self
                .args
                .registry
                .lookup(&crate::protocol::agent::name(&target.agent))
            else {
                continue;
            };
            let id = agent.get_id();
            if self.tools_for(target).next().is_none() {
                continue;
            }
            if self.published.get(&target.agent) != Some(&id) {
                if self
                    .retry
                    .get(&target.agent)
                    .is_some_and(|(due, _)| Instant::now() < *due)
                {
                    continue;
                }
                // A new actor (the agent restarted) holds none of the tools the old one had.
                self.confirmed.remove(&target.agent);
                let tools: Vec<Arc<dyn Tool>> = self
                    .tools_for(target)
                    .map(|info| {
                        Arc::new(McpTool {
                            server: self.args.server.name.clone(),
                            info: info.clone(),
                            trust,
                            timeout: self.args.server.timeout.0,
                            registry: self.args.registry.clone(),
                        }) as Arc<dyn Tool>
                    })
                    .collect();
                if agent
                    .cast(AgentMsg::SetTools(source.clone(), tools))
                    .is_err()
                {
                    continue;
                }
                self.published.insert(target.agent.clone(), id);
            }
            if self.confirmed.get(&target.agent) != Some(&id)
                && !self.confirming.contains(&target.agent)
            {
                let names: Vec<String> = self
                    .tools_for(target)
                    .map(|info| info.name.clone())
                    .collect();
                to_confirm.push((target.agent.clone(), id, names));
            }
        }
        for (agent, id, names) in to_confirm {
            self.confirming.insert(agent.clone());
            self.tasks.retain(|task| !task.is_finished());
            self.tasks.push(tokio::spawn(confirm(
                crate::protocol::agent::Agent::new(&self.args.registry, &agent),
                agent,
                id,
                names,
                myself.clone(),
            )));
        }
        self.update_announcement();
    }

    /// Takes the new list of agents that get the tools (a reload): withdraws them from agents
    /// that left or whose tool selection changed, then publishes to the new ones.
    fn set_targets(&mut self, targets: Vec<AgentTarget>, myself: &ActorRef<McpLinkMsg>) {
        let old = std::mem::replace(&mut self.args.targets, targets);
        let source = self.source();
        for target in old {
            if self.args.targets.contains(&target) {
                continue;
            }
            self.confirmed.remove(&target.agent);
            self.retry.remove(&target.agent);
            if self.published.remove(&target.agent).is_some()
                && let Some(agent) = self
                    .args
                    .registry
                    .lookup(&crate::protocol::agent::name(&target.agent))
            {
                let _ = agent.cast(AgentMsg::SetTools(source.clone(), Vec::new()));
            }
        }
        self.publish(myself);
        self.update_announcement();
    }

    /// Whether every agent that gets at least one of our tools confirmed that its current
    /// actor holds them (an agent given none, by its `<server>__<tool>` list, is not waited for).
    fn all_confirmed(&self) -> bool {
        let registry = &self.args.registry;
        self.args.targets.iter().all(|target| {
            self.tools_for(target).next().is_none()
                || self.confirmed.get(&target.agent).is_some_and(|confirmed| {
                    self.published.get(&target.agent) == Some(confirmed)
                        // A restarted agent the tick has not seen yet holds nothing.
                        && registry
                            .lookup(&crate::protocol::agent::name(&target.agent))
                            .is_none_or(|agent| &agent.get_id() == confirmed)
                })
        })
    }

    /// Reports `Published` once every agent holds the tools (`all_confirmed`), and
    /// `Unpublished` when one stopped holding them after that, so that waiters wait again.
    fn update_announcement(&mut self) {
        if self.peer.is_none() {
            return;
        }
        let all_confirmed = self.all_confirmed();
        if all_confirmed && !self.announced {
            self.announced = true;
            tracing::info!(server = %self.args.server.name, agents = self.confirmed.len(),
                "MCP server's tools published to its agents");
            self.report(LinkReport::Published);
        } else if !all_confirmed && self.announced {
            self.announced = false;
            tracing::info!(server = %self.args.server.name,
                "an agent lacks the MCP server's tools (it restarted or was added); publishing again");
            self.report(LinkReport::Unpublished);
        }
    }

    /// A confirmation failed: publish and confirm again after a backoff.
    fn confirmation_failed(&mut self, agent: &str) {
        self.published.remove(agent);
        let wait = self
            .retry
            .get(agent)
            .map_or(CONFIRM_RETRY_FIRST, |(_, wait)| *wait);
        self.retry.insert(
            agent.to_string(),
            (Instant::now() + wait, (wait * 2).min(CONFIRM_RETRY_MAX)),
        );
        tracing::warn!(server = %self.args.server.name, agent, retry_in = ?wait,
            "an agent did not confirm that it holds the MCP server's tools; trying again");
    }
}

/// Asks `agent` for its tool list (the agent applies `SetTools` before it answers a later
/// message) and tells the link whether it holds `names` — `false` also when it did not answer;
/// the link's tick then tries again.
async fn confirm(
    agent: crate::protocol::agent::Agent,
    name: String,
    id: ActorId,
    names: Vec<String>,
    link: ActorRef<McpLinkMsg>,
) {
    let holds = match agent.view().await {
        Ok(view) => names.iter().all(|tool| view.tools.contains(tool)),
        Err(_) => false,
    };
    let _ = link.cast(McpLinkMsg::Confirmed(name, id, holds));
}

impl Drop for McpLinkState {
    fn drop(&mut self) {
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
            let token = process.token.clone();
            drop(process);
            let store = self.args.store.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = store
                        .write(move |conn| crate::store::mcp::delete(conn, &token))
                        .await;
                });
            }
        }
    }
}

impl Actor for McpLink {
    type Msg = McpLinkMsg;
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
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.report(LinkReport::Connecting);
        let args = state.args.clone();
        let link = myself.clone();
        state.tasks.push(tokio::spawn(async move {
            let message = match connect(&args, &link).await {
                Ok(connection) => McpLinkMsg::Connected(Box::new(connection)),
                Err((error, process)) => McpLinkMsg::ConnectFailed(error, process),
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
            McpLinkMsg::Connected(connection) => {
                let Connection {
                    service,
                    process,
                    tools,
                    latency,
                } = *connection;
                state.peer = Some(service.peer().clone());
                state.process = process;
                state.tools = tools;
                let link = myself.clone();
                state.tasks.push(tokio::spawn(async move {
                    let reason = match service.waiting().await {
                        Ok(reason) => format!("the session ended ({reason:?})"),
                        Err(_) => "the session task failed".to_string(),
                    };
                    let _ = link.cast(McpLinkMsg::Down(reason));
                }));
                state
                    .tasks
                    .push(myself.send_interval(TICK, || McpLinkMsg::Tick));
                state.last_ping = Instant::now();
                state.publish(&myself);
                tracing::info!(server = %state.args.server.name, tools = state.tools.len(),
                    "MCP server connected");
                state.report(LinkReport::Up {
                    tools: state.tools.iter().map(|tool| tool.name.clone()).collect(),
                    latency,
                });
                // A server with no tools (or none for any agent) has nothing to deliver.
                state.update_announcement();
            }
            McpLinkMsg::ConnectFailed(error, process) => {
                state.process = process;
                return Err(fail(state, error.to_string()));
            }
            McpLinkMsg::Down(reason) => {
                return Err(fail(state, reason));
            }
            McpLinkMsg::Call {
                id,
                tool,
                arguments,
                reply,
            } => {
                let Some(peer) = state.peer.clone() else {
                    let _ = reply.send(Err(McpError::NotConnected));
                    return Ok(());
                };
                let timeout = state.args.server.timeout.0;
                let link = myself.clone();
                let task = tokio::spawn(async move {
                    let started = Instant::now();
                    let result = client::call(&peer, &tool, arguments, timeout).await;
                    let transport_closed = matches!(&result, Err(error) if error.is_transport());
                    let _ = reply.send(result);
                    let _ = link.cast(McpLinkMsg::CallDone {
                        id,
                        latency: started.elapsed(),
                        transport_closed,
                    });
                });
                state.calls.insert(id, task);
            }
            McpLinkMsg::Cancel(id) => {
                if let Some(task) = state.calls.remove(&id) {
                    // Dropping rmcp's request future sends `notifications/cancelled`.
                    task.abort();
                }
            }
            McpLinkMsg::CallDone {
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
            McpLinkMsg::Tick => {
                state.publish(&myself);
                if state.peer.is_some()
                    && !state.ping_in_flight
                    && state.last_ping.elapsed() >= state.args.ping_every
                {
                    state.ping_in_flight = true;
                    let peer = state.peer.clone();
                    let link = myself.clone();
                    let timeout = state.args.connect_timeout;
                    state.tasks.retain(|task| !task.is_finished());
                    state.tasks.push(tokio::spawn(async move {
                        if let Some(peer) = peer {
                            let result = client::ping(&peer, timeout).await;
                            let _ = link.cast(McpLinkMsg::Pinged(result));
                        }
                    }));
                }
            }
            McpLinkMsg::Pinged(result) => {
                state.ping_in_flight = false;
                state.last_ping = Instant::now();
                match result {
                    Ok(latency) => state.report(LinkReport::Latency(latency)),
                    Err(error) => {
                        return Err(fail(state, format!("ping failed: {error}")));
                    }
                }
            }
            McpLinkMsg::Tools(reply) => {
                let names = if state.peer.is_some() {
                    state.tools.iter().map(|tool| tool.name.clone()).collect()
                } else {
                    Vec::new()
                };
                let _ = reply.send(names);
            }
            McpLinkMsg::Confirmed(agent, id, holds) => {
                state.confirming.remove(&agent);
                if state.published.get(&agent) == Some(&id) {
                    if holds {
                        state.retry.remove(&agent);
                        state.confirmed.insert(agent, id);
                    } else {
                        state.confirmation_failed(&agent);
                    }
                }
                // A newer actor of the agent (or one whose confirmation was in flight while it
                // restarted) gets its own confirmation now.
                state.publish(&myself);
            }
            McpLinkMsg::EnsurePublished(agent, reply) => {
                state.publish(&myself);
                let current = state
                    .args
                    .registry
                    .lookup(&crate::protocol::agent::name(&agent))
                    .map(|actor| actor.get_id());
                let holds = current.is_some() && state.published.get(&agent) == current.as_ref();
                let _ = reply.send(holds);
            }
            McpLinkMsg::SetTargets(targets) => state.set_targets(targets, &myself),
        }
        Ok(())
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

/// Connects, initializes and lists the tools, all within `connect_timeout`.
async fn connect(
    args: &McpLinkArgs,
    link: &ActorRef<McpLinkMsg>,
) -> Result<Connection, (McpError, Option<ServerProcess>)> {
    let started = Instant::now();
    let timeout = args.connect_timeout;
    let server = &args.server;
    let (service, process) = match server.transport {
        McpTransportKind::Stdio => {
            let (mut process, mut pipes) =
                crate::mcp::process::spawn(server, &args.secrets).map_err(|error| (error, None))?;
            let row = process.row(&server.name);
            let recorded = args
                .store
                .write(move |conn| crate::store::mcp::insert(conn, &row))
                .await;
            if let Err(error) = recorded {
                tracing::warn!(server = %server.name, %error, "could not record the MCP server's process");
            }
            if let Some(child) = process.take_child() {
                let stderr = pipes.stderr.take();
                let name = server.name.clone();
                let link = link.clone();
                tokio::spawn(watch_process(name, child, stderr, link));
            }
            match client::handshake_stdio(pipes, timeout).await {
                Ok(service) => (service, Some(process)),
                Err(error) => return Err((error, Some(process))),
            }
        }
        McpTransportKind::Http => (
            client::handshake_http(server, &args.secrets, timeout)
                .await
                .map_err(|error| (error, None))?,
            None,
        ),
    };
    let remaining = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(100));
    let tools = match client::list_tools(service.peer(), &server.name, remaining).await {
        Ok(tools) => tools,
        Err(error) => return Err((error, process)),
    };
    Ok(Connection {
        service,
        process,
        tools,
        latency: started.elapsed(),
    })
}

/// Waits for a stdio server to exit, keeping the last lines of its stderr to explain why.
async fn watch_process(
    server: String,
    mut child: tokio::process::Child,
    stderr: Option<tokio::process::ChildStderr>,
    link: ActorRef<McpLinkMsg>,
) {
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut lines = stderr.map(|stderr| tokio::io::BufReader::new(stderr).lines());
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            line = async {
                match lines.as_mut() {
                    Some(lines) => lines.next_line().await,
                    None => std::future::pending().await,
                }
            } => match line {
                Ok(Some(line)) => {
                    let line: String = line.chars().take(500).collect();
                    tracing::debug!(server = %server, line = %line, "MCP server stderr");
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
                _ => lines = None,
            },
        }
    };
    let status = match status {
        Ok(status) => status.to_string(),
        Err(error) => format!("unknown status ({error})"),
    };
    let mut reason = format!("the server process exited ({status})");
    if !tail.is_empty() {
        reason.push_str("; its last output: ");
        reason.push_str(&tail.into_iter().collect::<Vec<_>>().join(" | "));
    }
    let _ = link.cast(McpLinkMsg::Down(reason));
}

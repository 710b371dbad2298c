//! Handing a link's tools to its agents, and making sure they hold them: publication,
//! confirmation (one ask of each agent's tool list), retries with backoff, and the `Published` /
//! `Unpublished` reports that readiness waits on.

use std::sync::Arc;
use std::time::Instant;

use ractor::{ActorId, ActorRef};

use super::{CONFIRM_RETRY_FIRST, CONFIRM_RETRY_MAX, LinkMsg, McpLinkState};
use crate::actors::mcp_supervisor::{LinkReport, OWN_NAME, SupervisorMsg};
use crate::mcp::ToolInfo;
use crate::mcp::tool::McpTool;
use crate::protocol::agent::AgentMsg;
use crate::protocol::mcp::AgentTarget;
use crate::tool::Tool;

impl McpLinkState {
    pub(super) fn source(&self) -> String {
        crate::protocol::mcp::link(&self.args.server.name)
            .local()
            .to_string()
    }

    pub(super) fn report(&self, report: LinkReport) {
        if let Some(supervisor) = self.args.registry.lookup(&OWN_NAME) {
            let _ = supervisor.cast(SupervisorMsg::Report(self.args.server.name.clone(), report));
        }
    }

    /// Takes the tools away from every agent that has them.
    pub(super) fn withdraw(&mut self) {
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

    /// One tool as agents get it: a node's (issue #34) judged by the daemon's own tool of that
    /// name, or an MCP server's.
    fn tool(&self, info: &ToolInfo, trust: crate::policy::McpTrust) -> Option<Arc<dyn Tool>> {
        let server = &self.args.server;
        if let Some(data_dir) = &server.node {
            let tool = crate::node::tool::NodeTool::for_remote(
                &server.name,
                info,
                data_dir.clone(),
                server.timeout.0,
                self.args.registry.clone(),
            )?;
            return Some(Arc::new(tool));
        }
        Some(Arc::new(McpTool {
            server: server.name.clone(),
            info: info.clone(),
            trust,
            timeout: server.timeout.0,
            registry: self.args.registry.clone(),
        }))
    }

    /// Publishes the tools to every allowed agent whose current actor does not hold them yet
    /// (new, restarted, or due again after a failed confirmation), and has each publication
    /// confirmed (`LinkMsg::Confirmed`, at most one in flight per agent).
    pub(super) fn publish(&mut self, myself: &ActorRef<LinkMsg>) {
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
                    .filter_map(|info| self.tool(info, trust))
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
    pub(super) fn set_targets(&mut self, targets: Vec<AgentTarget>, myself: &ActorRef<LinkMsg>) {
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
    pub(super) fn update_announcement(&mut self) {
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
    pub(super) fn confirmation_failed(&mut self, agent: &str) {
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
    link: ActorRef<LinkMsg>,
) {
    let holds = match agent.view().await {
        Ok(view) => names.iter().all(|tool| view.tools.contains(tool)),
        Err(_) => false,
    };
    let _ = link.cast(LinkMsg::Confirmed(name, id, holds));
}

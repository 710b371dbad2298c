//! AgentSupervisor: one Agent actor per agent definition.
//!
//! Agents start one after another at boot (each resumes its unfinished sessions) and stop together
//! at shutdown within the shutdown budget. Channels reach an agent by its registered name
//! (`agent:<name>`); this supervisor only keeps them alive.
//!
//! A reload adds, removes or replaces agents one by one (`Add`, `Remove`): a removed or replaced
//! agent stops as at shutdown (its sessions stop; in-flight work is durable in SQLite and resumed
//! by the next start of that agent, as after a crash); the other agents are not touched.
//!
//! Restart policy: each Agent is permanent; an agent that exhausts its budget escalates (the root
//! then fails and systemd restarts the daemon — an agent that cannot run is a real outage).

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::agent::{AgentActor, AgentArgs};
use super::supervise::spawn_child;
use super::supervise::{Action, ChildCmd, ChildInfo, ChildSpec, Children, RestartPolicy};
use crate::agent::AgentRuntime;
use crate::events::EventBus;
use crate::registry::ServiceName;
use crate::tool::Tool;

pub enum AgentSupervisorMsg {
    Child(ChildCmd),
    Children(RpcReplyPort<Vec<ChildInfo>>),
    /// Starts an agent, replacing (stopping first) a running one of the same name (a reload).
    Add(AgentPlan, RpcReplyPort<()>),
    /// Stops an agent as at shutdown and forgets it (its file was removed).
    Remove(String, RpcReplyPort<()>),
}

impl From<ChildCmd> for AgentSupervisorMsg {
    fn from(cmd: ChildCmd) -> Self {
        AgentSupervisorMsg::Child(cmd)
    }
}

/// One agent to run: its runtime and its built-in tools.
#[derive(Clone)]
pub struct AgentPlan {
    pub runtime: Arc<AgentRuntime>,
    pub tools: Vec<Arc<dyn Tool>>,
    /// The agent's browser (issue #32), when it lists the `browser` tool.
    pub browser: Option<crate::browser::BrowserSetup>,
}

/// Where the agent supervisor is registered (the daemon asks it once every agent has started).
pub const NAME: ServiceName<AgentSupervisorMsg> =
    ServiceName::fixed(crate::protocol::agent::SUPERVISOR);

#[derive(Clone)]
pub struct AgentSupervisorArgs {
    pub agents: Vec<AgentPlan>,
    pub policy: RestartPolicy,
    pub events: EventBus,
}

pub struct AgentSupervisor;

pub struct AgentSupervisorState {
    children: Children,
    policy: RestartPolicy,
}

/// The child spec of one agent: its actor, spawned from the plan at every (re)start.
fn agent_spec(plan: AgentPlan, policy: &RestartPolicy) -> ChildSpec {
    let registry = plan.runtime.registry.clone();
    let local_name = crate::protocol::agent::name(&plan.runtime.spec.name);
    let agent_args = AgentArgs {
        runtime: plan.runtime,
        tools: plan.tools,
        session_policy: policy.clone(),
        browser: plan.browser,
    };
    let id = local_name.local().to_string();
    ChildSpec::new(id, policy.clone(), move |supervisor| {
        let registry = registry.clone();
        let local_name = local_name.clone();
        let agent_args = agent_args.clone();
        async move { spawn_child(&registry, &local_name, AgentActor, agent_args, supervisor).await }
    })
    .shutdown(std::time::Duration::from_secs(10))
}

impl Actor for AgentSupervisor {
    type Msg = AgentSupervisorMsg;
    type State = AgentSupervisorState;
    type Arguments = AgentSupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: AgentSupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut children = Children::new(crate::protocol::agent::SUPERVISOR, args.events);
        for plan in args.agents {
            children.insert(agent_spec(plan, &args.policy));
        }
        Ok(AgentSupervisorState {
            children,
            policy: args.policy,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for id in state.children.ids() {
            if let Action::Escalate(reason) = state.children.start(&myself, &id).await {
                return Err(reason.into());
            }
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
            AgentSupervisorMsg::Child(cmd) => {
                if let Action::Escalate(reason) = state.children.handle_cmd(&myself, cmd).await {
                    return Err(reason.into());
                }
            }
            AgentSupervisorMsg::Children(reply) => {
                let _ = reply.send(state.children.info());
            }
            AgentSupervisorMsg::Add(plan, reply) => {
                let spec = agent_spec(plan, &state.policy);
                let action = if state.children.contains(&spec.id) {
                    state.children.replace(&myself, spec).await
                } else {
                    let id = spec.id.clone();
                    state.children.insert(spec);
                    state.children.start(&myself, &id).await
                };
                let _ = reply.send(());
                if let Action::Escalate(reason) = action {
                    return Err(reason.into());
                }
            }
            AgentSupervisorMsg::Remove(name, reply) => {
                let id = crate::protocol::agent::name(&name).local().to_string();
                state.children.remove(&id).await;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match state.children.on_supervision_event(&myself, &event) {
            Action::Escalate(reason) => Err(reason.into()),
            Action::Nothing => Ok(()),
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state
            .children
            .stop_all_parallel(std::time::Duration::from_secs(10))
            .await;
        Ok(())
    }
}

//! AgentSupervisor: one Agent actor per agent definition.
//!
//! Agents start one after another at boot (each resumes its unfinished sessions) and stop together
//! at shutdown within the shutdown budget. Channels reach an agent by its registered name
//! (`agent:<name>`); this supervisor only keeps them alive.
//!
//! Restart policy: each Agent is permanent; an agent that exhausts its budget escalates (the root
//! then fails and systemd restarts the daemon — an agent that cannot run is a real outage).

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::agent::{AgentActor, AgentArgs};
use super::root::spawn_child;
use super::supervise::{Action, ChildCmd, ChildInfo, ChildSpec, Children, RestartPolicy};
use crate::agent::AgentRuntime;
use crate::events::EventBus;
use crate::registry::ServiceName;
use crate::tools::Tool;

pub enum AgentSupervisorMsg {
    Child(ChildCmd),
    Children(RpcReplyPort<Vec<ChildInfo>>),
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
            let registry = plan.runtime.registry.clone();
            let local_name = crate::protocol::agent::name(&plan.runtime.spec.name);
            let agent_args = AgentArgs {
                runtime: plan.runtime,
                tools: plan.tools,
                session_policy: args.policy.clone(),
            };
            let id = local_name.local().to_string();
            let spec = ChildSpec::new(id, args.policy.clone(), move |supervisor| {
                let registry = registry.clone();
                let local_name = local_name.clone();
                let agent_args = agent_args.clone();
                async move {
                    spawn_child(&registry, &local_name, AgentActor, agent_args, supervisor).await
                }
            })
            .shutdown(std::time::Duration::from_secs(10));
            children.insert(spec);
        }
        Ok(AgentSupervisorState { children })
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

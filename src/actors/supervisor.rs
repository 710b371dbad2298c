//! A one-for-one supervisor over a fixed list of children, built on [`super::supervise`].
//!
//! Used for the root of the tree and for supervisors that have no domain logic of their own.
//! Children start in list order (one after another, or `stagger` apart) and stop in reverse order,
//! each within its shutdown timeout — so the root stops Studio and the channels first (no new
//! input), then the agents, and the store last.
//!
//! Restart policy: per child (see `ChildSpec`). When a child exhausts its budget with
//! `OnExhausted::Escalate`, this supervisor fails, which hands the problem to its own parent
//! (for the root: the process exits non-zero and systemd restarts it).

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::supervise::{Action, ChildCmd, ChildInfo, ChildSpec, Children};
use crate::events::EventBus;

pub enum SupervisorMsg {
    Child(ChildCmd),
    /// Adds and starts a child at run time (e.g. a new agent after a reload).
    Add(ChildSpec, RpcReplyPort<()>),
    /// Stops and forgets a child.
    Remove(String, RpcReplyPort<()>),
    /// Restarts a child on purpose with a new spec (a reload changed its slice of the config).
    Replace(ChildSpec, RpcReplyPort<()>),
    /// Replaces the spec a child is restarted from, without restarting it (a reload applied the
    /// change to the running child itself). Answers false when no child has that id.
    SetSpec(ChildSpec, RpcReplyPort<bool>),
    Children(RpcReplyPort<Vec<ChildInfo>>),
}

impl From<ChildCmd> for SupervisorMsg {
    fn from(cmd: ChildCmd) -> Self {
        SupervisorMsg::Child(cmd)
    }
}

/// How children are started at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    /// One after another, each fully started before the next (the root).
    Sequential,
    /// One at a time, `interval` apart (bots).
    Staggered(Duration),
}

pub struct SupervisorArgs {
    pub name: String,
    pub children: Vec<ChildSpec>,
    pub start: StartMode,
    pub events: EventBus,
}

pub struct Supervisor;

pub struct SupervisorState {
    children: Children,
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let spacing = match args.start {
            StartMode::Sequential => Duration::ZERO,
            StartMode::Staggered(interval) => interval,
        };
        let mut children = Children::new(args.name, args.events).with_spacing(spacing);
        for spec in args.children {
            children.insert(spec);
        }
        Ok(SupervisorState { children })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let ids = state.children.ids();
        let spacing = state.children.spacing();
        if spacing.is_zero() {
            for id in ids {
                if let Action::Escalate(reason) = state.children.start(&myself, &id).await {
                    return Err(reason.into());
                }
            }
        } else {
            state.children.start_staggered(&myself, &ids, spacing);
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
            SupervisorMsg::Child(cmd) => {
                if let Action::Escalate(reason) = state.children.handle_cmd(&myself, cmd).await {
                    return Err(reason.into());
                }
            }
            SupervisorMsg::Add(spec, reply) => {
                let id = spec.id.clone();
                state.children.insert(spec);
                let action = state.children.start(&myself, &id).await;
                let _ = reply.send(());
                if let Action::Escalate(reason) = action {
                    return Err(reason.into());
                }
            }
            SupervisorMsg::Replace(spec, reply) => {
                let action = state.children.replace(&myself, spec).await;
                let _ = reply.send(());
                if let Action::Escalate(reason) = action {
                    return Err(reason.into());
                }
            }
            SupervisorMsg::SetSpec(spec, reply) => {
                // Only a child it has: a reload never adds one this way.
                let known = state.children.contains(&spec.id);
                if known {
                    state.children.insert(spec);
                }
                let _ = reply.send(known);
            }
            SupervisorMsg::Remove(id, reply) => {
                state.children.remove(&id).await;
                let _ = reply.send(());
            }
            SupervisorMsg::Children(reply) => {
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
        state.children.stop_all().await;
        Ok(())
    }
}

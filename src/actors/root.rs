//! Root: the top of the supervision tree, a one-for-one [`Supervisor`] over the daemon's services.
//!
//! Children, in start order (stopped in reverse, so input stops first and the store last):
//! Store, Events, ApprovalDesk, Memory, Scheduler, McpSupervisor, LocalChannel, AgentSupervisor,
//! HandoffSupervisor, ChannelSupervisor, Reloader, Triggers (with `[[triggers]]`), Backup (when
//! scheduled), Studio. The
//! ChannelSupervisor is a generic [`Supervisor`] whose bots start `[telegram] boot_stagger`
//! apart; a bot that exhausts its budget is degraded instead of escalating
//! (`specs::channel_supervisor`).
//!
//! The children's specs are built from a [`RootContext`] (`context.rs`) by `specs.rs`, at boot
//! and by the reloader for the children a reload changes (the services holding a slice of the
//! agent files, the bots, the agent, MCP and channel supervisors, the reloader). After every reload the root is given the
//! new specs of the supervisors the reload changed in place (`SupervisorMsg::SetSpec`), so that
//! a restart of one of them brings back what the last reload applied, not the boot's files.
//!
//! Restart policy of the root itself: none. When a child exhausts its budget the root fails, the
//! daemon exits non-zero, and systemd (`Restart=always`) starts a fresh process.

use std::time::Duration;

use ractor::Actor;

use super::context::RootContext;
use super::events::{EventsActor, EventsArgs};
use super::local_channel::{LocalChannel, LocalChannelArgs};
use super::specs::{
    agent_supervisor, approvals_spec, channel_supervisor, handoff_spec, mcp_supervisor,
    memory_spec, reloader_spec, scheduler_spec, studio_state,
};
use super::store::{StoreActor, StoreArgs, StoreMsg};
use super::studio::{StudioActor, StudioArgs, StudioMsg};
use super::supervise::{ChildSpec, actor_spec};
use super::supervisor::{StartMode, Supervisor, SupervisorArgs};
use crate::protocol::{events, local};
use crate::registry::ServiceName;

/// The store actor's and Studio's names (nothing calls them by name).
const STORE: &str = "store";
const STUDIO: &str = "studio";

/// The root's children, in start order.
pub fn children(context: &RootContext) -> Vec<ChildSpec> {
    let config = &context.loaded.config;
    let policy = config.supervision.policy();
    let registry = &context.registry;
    let mut children = vec![
        actor_spec(
            registry,
            &ServiceName::<StoreMsg>::fixed(STORE),
            policy.clone(),
            || StoreActor,
            StoreArgs {
                store: context.store.clone(),
                events: context.events.clone(),
                checkpoint_every: crate::actors::store::CHECKPOINT_EVERY,
            },
        )
        .shutdown(Duration::from_secs(30)),
        actor_spec(
            registry,
            &events::NAME,
            policy.clone(),
            || EventsActor,
            EventsArgs {
                bus: context.events.clone(),
                store: context.store.clone(),
                retention: config.store.events_retention,
            },
        ),
        approvals_spec(context),
        memory_spec(context),
        scheduler_spec(context),
        mcp_supervisor(context),
        actor_spec(
            registry,
            &local::NAME,
            policy.clone(),
            || LocalChannel,
            LocalChannelArgs {
                events: context.events.clone(),
            },
        ),
        agent_supervisor(context),
        handoff_spec(context),
        channel_supervisor(context, true),
        reloader_spec(context),
    ];
    children.extend(super::triggers::child_spec(context));
    children.extend(super::backup::child_spec(context));
    if !context.options.studio {
        return children;
    }
    children.push(actor_spec(
        registry,
        &ServiceName::<StudioMsg>::fixed(STUDIO),
        policy,
        || StudioActor,
        StudioArgs {
            bind: config.studio_addr(),
            state: studio_state(context),
            bound: context.studio_bound.clone(),
        },
    ));
    children
}

/// Spawns the root supervisor (unlinked: nothing supervises the root but systemd).
pub async fn spawn(
    context: &RootContext,
) -> Result<
    (
        ractor::ActorRef<super::supervisor::SupervisorMsg>,
        tokio::task::JoinHandle<()>,
    ),
    ractor::SpawnErr,
> {
    let args = SupervisorArgs {
        name: "root".into(),
        children: children(context),
        start: StartMode::Sequential,
        events: context.events.clone(),
    };
    Actor::spawn(Some(context.registry.name("root")), Supervisor, args).await
}

//! Root: the top of the supervision tree, a one-for-one [`Supervisor`] over the daemon's services.
//!
//! Children, in start order (stopped in reverse, so input stops first and the store last):
//! Store, Events, ApprovalDesk, Scheduler, McpSupervisor, AgentSupervisor, HandoffSupervisor,
//! ChannelSupervisor, Studio.
//!
//! Restart policy of the root itself: none. When a child exhausts its budget the root fails, the
//! daemon exits non-zero, and systemd (`Restart=on-failure`) starts a fresh process.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell};
use tokio::sync::watch;

use super::events::{EventsActor, EventsArgs};
use super::store::{StoreActor, StoreArgs};
use super::studio::{StudioActor, StudioArgs};
use super::supervise::{ChildSpec, RestartPolicy};
use super::supervisor::{StartMode, Supervisor, SupervisorArgs};
use crate::config::LoadedConfig;
use crate::events::EventBus;
use crate::registry::{Registry, names};
use crate::store::Store;
use crate::studio::StudioState;

/// Everything the root's children are built from.
#[derive(Clone)]
pub struct RootContext {
    pub loaded: Arc<LoadedConfig>,
    pub registry: Registry,
    pub store: Store,
    pub events: EventBus,
    pub studio_bound: watch::Sender<Option<std::net::SocketAddr>>,
}

/// Spawns one linked actor under its registered name and returns its cell.
pub async fn spawn_child<A: Actor>(
    registry: &Registry,
    local_name: &str,
    actor: A,
    args: A::Arguments,
    supervisor: ActorCell,
) -> Result<ActorCell, ractor::SpawnErr> {
    let (actor_ref, _) =
        Actor::spawn_linked(Some(registry.name(local_name)), actor, args, supervisor).await?;
    Ok(actor_ref.get_cell())
}

/// A child spec whose actor is spawned from cloned `args` at every (re)start.
pub fn actor_spec<A>(
    registry: &Registry,
    local_name: &str,
    policy: RestartPolicy,
    make: fn() -> A,
    args: A::Arguments,
) -> ChildSpec
where
    A: Actor,
    A::Arguments: Clone + Sync,
{
    let registry = registry.clone();
    let name = local_name.to_string();
    ChildSpec::new(local_name, policy, move |supervisor| {
        let registry = registry.clone();
        let name = name.clone();
        let args = args.clone();
        async move { spawn_child(&registry, &name, make(), args, supervisor).await }
    })
}

/// An empty one-for-one supervisor at a place of the tree whose children arrive with later work.
fn empty_supervisor(context: &RootContext, local_name: &'static str) -> ChildSpec {
    let registry = context.registry.clone();
    let events = context.events.clone();
    ChildSpec::new(
        local_name,
        context.loaded.config.supervision.policy(),
        move |supervisor| {
            let registry = registry.clone();
            let events = events.clone();
            async move {
                let args = SupervisorArgs {
                    name: local_name.to_string(),
                    children: Vec::new(),
                    start: StartMode::Sequential,
                    events,
                };
                spawn_child(&registry, local_name, Supervisor, args, supervisor).await
            }
        },
    )
}

/// The root's children, in start order.
pub fn children(context: &RootContext) -> Vec<ChildSpec> {
    let config = &context.loaded.config;
    let policy = config.supervision.policy();
    let registry = &context.registry;
    let mut children = vec![
        actor_spec(
            registry,
            names::STORE,
            policy.clone(),
            || StoreActor,
            StoreArgs {
                store: context.store.clone(),
                checkpoint_every: Duration::from_secs(60),
            },
        )
        .shutdown(Duration::from_secs(30)),
        actor_spec(
            registry,
            names::EVENTS,
            policy.clone(),
            || EventsActor,
            EventsArgs {
                bus: context.events.clone(),
                store: context.store.clone(),
                retention: config.store.events_retention,
            },
        ),
        empty_supervisor(context, names::APPROVALS),
        empty_supervisor(context, names::SCHEDULER),
        empty_supervisor(context, names::MCP),
        empty_supervisor(context, names::AGENTS).shutdown(config.shutdown.timeout.0),
        empty_supervisor(context, names::HANDOFFS),
        empty_supervisor(context, names::CHANNELS),
    ];
    children.push(actor_spec(
        registry,
        names::STUDIO,
        policy,
        || StudioActor,
        StudioArgs {
            bind: config.studio_addr(),
            state: StudioState {
                registry: context.registry.clone(),
                store: context.store.clone(),
                events: context.events.clone(),
                expect_ready: Arc::new(Vec::new()),
            },
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

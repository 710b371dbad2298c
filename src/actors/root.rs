//! Root: the top of the supervision tree, a one-for-one [`Supervisor`] over the daemon's services.
//!
//! Children, in start order (stopped in reverse, so input stops first and the store last):
//! Store, Events, ApprovalDesk, Memory, Scheduler, McpSupervisor, LocalChannel, AgentSupervisor,
//! HandoffSupervisor, ChannelSupervisor, Studio.
//!
//! Restart policy of the root itself: none. When a child exhausts its budget the root fails, the
//! daemon exits non-zero, and systemd (`Restart=on-failure`) starts a fresh process.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell};
use tokio::sync::watch;

use super::agent_supervisor::{AgentPlan, AgentSupervisor, AgentSupervisorArgs};
use super::approval_desk::{AgentApprovers, ApprovalDesk, ApprovalDeskArgs};
use super::events::{EventsActor, EventsArgs};
use super::handoff_supervisor::{HandoffArgs, HandoffSupervisor};
use super::local_channel::{LocalChannel, LocalChannelArgs};
use super::memory::{MemoryActor, MemoryArgs};
use super::scheduler::{Scheduler, SchedulerArgs, SchedulerClock};
use super::store::{StoreActor, StoreArgs, StoreMsg};
use super::studio::{StudioActor, StudioArgs, StudioMsg};
use super::supervise::{ChildSpec, RestartPolicy};
use super::supervise::{OnExhausted, Restart};
use super::supervisor::{StartMode, Supervisor, SupervisorArgs, SupervisorMsg};
use super::telegram_bot::{TelegramBot, TelegramBotArgs};
use crate::config::LoadedConfig;
use crate::events::EventBus;
use crate::protocol::{approvals, events, handoff, local, mcp, memory, scheduler, telegram};
use crate::registry::{Registry, ServiceName};
use crate::store::Store;
use crate::studio::StudioState;

/// The store actor's and Studio's names (nothing calls them by name).
const STORE: &str = "store";
const STUDIO: &str = "studio";

/// Which parts of the tree run. `serve` runs everything; `chat` and `eval` run the agents without
/// Studio, bots or the scheduler, so that a terminal session beside a running daemon never polls a
/// bot token twice or fires a job twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartOptions {
    pub studio: bool,
    pub channels: bool,
    pub scheduler: bool,
}

impl StartOptions {
    pub fn serve() -> Self {
        Self {
            studio: true,
            channels: true,
            scheduler: true,
        }
    }

    pub fn local_only() -> Self {
        Self {
            studio: false,
            channels: false,
            scheduler: false,
        }
    }
}

/// Everything the root's children are built from.
#[derive(Clone)]
pub struct RootContext {
    pub loaded: Arc<LoadedConfig>,
    pub registry: Registry,
    pub store: Store,
    pub events: EventBus,
    pub studio_bound: watch::Sender<Option<std::net::SocketAddr>>,
    /// One plan per agent: its runtime and built-in tools.
    pub agents: Vec<AgentPlan>,
    pub options: StartOptions,
    /// When the daemon started (bots ignore updates sent long before it).
    pub boot_ms: i64,
    /// The local access token (`<data_dir>/studio.token`), when Studio runs.
    pub studio_token: Option<crate::secrets::Secret>,
    /// The model providers and prices, built once per boot (agents, boot checks, Studio).
    pub providers: Arc<crate::llm::Providers>,
    pub prices: Arc<crate::llm::prices::Prices>,
}

/// Spawns one linked actor under its registered name and returns its cell.
pub async fn spawn_child<A: Actor>(
    registry: &Registry,
    name: &ServiceName<A::Msg>,
    actor: A,
    args: A::Arguments,
    supervisor: ActorCell,
) -> Result<ActorCell, ractor::SpawnErr> {
    let (actor_ref, _) =
        Actor::spawn_linked(Some(registry.name(name.local())), actor, args, supervisor).await?;
    Ok(actor_ref.get_cell())
}

/// A child spec whose actor is spawned from cloned `args` at every (re)start.
pub fn actor_spec<A>(
    registry: &Registry,
    name: &ServiceName<A::Msg>,
    policy: RestartPolicy,
    make: fn() -> A,
    args: A::Arguments,
) -> ChildSpec
where
    A: Actor,
    A::Arguments: Clone + Sync,
{
    let registry = registry.clone();
    let name = name.clone();
    let id = name.local().to_string();
    ChildSpec::new(id, policy, move |supervisor| {
        let registry = registry.clone();
        let name = name.clone();
        let args = args.clone();
        async move { spawn_child(&registry, &name, make(), args, supervisor).await }
    })
}

/// An empty one-for-one supervisor at a place of the tree whose children arrive with later work.
fn empty_supervisor(context: &RootContext, local_name: &str) -> ChildSpec {
    let name = ServiceName::<SupervisorMsg>::new(local_name);
    let registry = context.registry.clone();
    let events = context.events.clone();
    ChildSpec::new(
        local_name,
        context.loaded.config.supervision.policy(),
        move |supervisor| {
            let registry = registry.clone();
            let events = events.clone();
            let name = name.clone();
            async move {
                let args = SupervisorArgs {
                    name: name.local().to_string(),
                    children: Vec::new(),
                    start: StartMode::Sequential,
                    events,
                };
                spawn_child(&registry, &name, Supervisor, args, supervisor).await
            }
        },
    )
}

/// The memory actor's slice of the config: its embeddings provider (if any) and the hierarchy.
pub fn memory_args(context: &RootContext) -> MemoryArgs {
    let config = &context.loaded.config;
    let (embeddings, full_text_reason) =
        crate::memory::embeddings_config(config, &context.loaded.secrets);
    MemoryArgs {
        store: context.store.clone(),
        dir: config.data_dir.join("memory"),
        embeddings,
        full_text_reason,
        surprise_threshold: config.memory.surprise_threshold,
        hierarchy: context
            .loaded
            .agents
            .iter()
            .map(|agent| (agent.name.clone(), agent.reports_to.clone()))
            .collect(),
        events: context.events.clone(),
    }
}

/// The scheduler with its slice of the config, or an empty placeholder when this start runs no
/// scheduler (`chat` and `eval` beside a running daemon must never fire a job twice).
fn scheduler_spec(context: &RootContext) -> ChildSpec {
    if !context.options.scheduler {
        return empty_supervisor(context, scheduler::NAME.local());
    }
    actor_spec(
        &context.registry,
        &scheduler::NAME,
        context.loaded.config.supervision.policy(),
        || Scheduler,
        SchedulerArgs {
            store: context.store.clone(),
            registry: context.registry.clone(),
            events: context.events.clone(),
            config: context.loaded.config.scheduler.clone(),
            agents: context.loaded.agents.clone(),
            clock: SchedulerClock::Wall,
        },
    )
}

/// The MCP supervisor with its slice of the config: one link per enabled `[[mcp.servers]]` entry.
fn mcp_supervisor(context: &RootContext) -> ChildSpec {
    let config = &context.loaded.config;
    actor_spec(
        &context.registry,
        &mcp::NAME,
        config.supervision.policy(),
        || super::mcp_supervisor::McpSupervisor,
        super::mcp_supervisor::McpSupervisorArgs {
            config: config.mcp.clone(),
            agents: context.loaded.agents.clone(),
            secrets: Arc::new(context.loaded.secrets.clone()),
            registry: context.registry.clone(),
            store: context.store.clone(),
            events: context.events.clone(),
            policy: config.supervision.policy(),
            reap: context.options.scheduler,
        },
    )
    .shutdown(Duration::from_secs(10))
}

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
                checkpoint_every: Duration::from_secs(60),
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
        actor_spec(
            registry,
            &approvals::NAME,
            policy.clone(),
            || ApprovalDesk,
            approval_args(context),
        ),
        actor_spec(
            registry,
            &memory::NAME,
            policy.clone(),
            || MemoryActor,
            memory_args(context),
        ),
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
        actor_spec(
            registry,
            &super::agent_supervisor::NAME,
            policy.clone(),
            || AgentSupervisor,
            AgentSupervisorArgs {
                agents: context.agents.clone(),
                policy: policy.clone(),
                events: context.events.clone(),
            },
        )
        .shutdown(config.shutdown.timeout.0 + Duration::from_secs(5)),
        actor_spec(
            registry,
            &handoff::NAME,
            policy.clone(),
            || HandoffSupervisor,
            HandoffArgs {
                store: context.store.clone(),
                registry: context.registry.clone(),
                events: context.events.clone(),
                policy: policy.clone(),
                delegates: context
                    .loaded
                    .agents
                    .iter()
                    .map(|agent| (agent.name.clone(), agent.delegates(&context.loaded.agents)))
                    .collect(),
            },
        ),
        channel_supervisor(context),
    ];
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

fn approval_args(context: &RootContext) -> ApprovalDeskArgs {
    let loaded = &context.loaded;
    let approvers = loaded
        .agents
        .iter()
        .map(|spec| {
            let telegram = spec.telegram.as_ref();
            let ids = telegram
                .map(|t| {
                    if t.approvers.is_empty() {
                        t.allow_users.clone()
                    } else {
                        t.approvers.clone()
                    }
                })
                .unwrap_or_default();
            let has_bot = context.options.channels
                && telegram.is_some_and(|t| loaded.secret(&t.token_env).is_some());
            (
                spec.name.clone(),
                AgentApprovers {
                    has_bot,
                    telegram: ids,
                },
            )
        })
        .collect();
    ApprovalDeskArgs {
        store: context.store.clone(),
        registry: context.registry.clone(),
        events: context.events.clone(),
        approvers,
        studio: context.options.studio,
    }
}

/// Agents with a Telegram bot whose token is set (a missing token is a boot hint, not an error).
fn bots(context: &RootContext) -> Vec<(crate::config::AgentSpec, crate::secrets::Secret)> {
    if !context.options.channels {
        return Vec::new();
    }
    context
        .loaded
        .agents
        .iter()
        .filter_map(|spec| {
            let token = context
                .loaded
                .secret(&spec.telegram.as_ref()?.token_env)?
                .clone();
            Some((spec.clone(), token))
        })
        .collect()
}

/// The channel supervisor: one bot per agent, started `boot_stagger` apart; a bot that exhausts
/// its budget is degraded and retried later instead of escalating.
fn channel_supervisor(context: &RootContext) -> ChildSpec {
    let config = &context.loaded.config;
    let policy = config.supervision.policy();
    let stagger = config.telegram.boot_stagger.0;
    let degraded_retry = config.telegram.degraded_retry.0;
    let voice = crate::voice::VoiceSettings::from_config(config, &context.loaded.secrets);
    if let Err(unavailable) = &voice.transcriber
        && !bots(context).is_empty()
    {
        tracing::info!(
            "voice notes are saved but not transcribed: {}",
            unavailable.reason
        );
    }
    let speech = match crate::voice::speech::speech_config(config, &context.loaded.secrets) {
        Ok(speech) => speech.map(crate::voice::speech::SpeechClient::new),
        Err(reason) => {
            tracing::warn!(%reason, "spoken replies are off; answers are sent as text");
            None
        }
    };
    let bots: Vec<ChildSpec> = bots(context)
        .into_iter()
        .map(|(spec, token)| {
            let workspace = spec
                .workspace
                .clone()
                .unwrap_or_else(|| config.data_dir.join("workspaces").join(&spec.name));
            let args = TelegramBotArgs {
                spec: spec.clone(),
                token,
                config: config.telegram.clone(),
                store: context.store.clone(),
                registry: context.registry.clone(),
                events: context.events.clone(),
                boot_ms: context.boot_ms,
                workspace,
                timezone: context.loaded.timezone.clone(),
                voice: voice.clone(),
                speech: speech.clone(),
            };
            actor_spec(
                &context.registry,
                &telegram::name(&spec.name),
                policy.clone(),
                || TelegramBot,
                args,
            )
            .restart(Restart::Transient)
            .on_exhausted(OnExhausted::Degrade {
                retry_after: degraded_retry,
            })
        })
        .collect();
    let registry = context.registry.clone();
    let events = context.events.clone();
    let name = ServiceName::<SupervisorMsg>::fixed(telegram::CHANNELS);
    ChildSpec::new(telegram::CHANNELS, policy, move |supervisor| {
        let registry = registry.clone();
        let events = events.clone();
        let bots = bots.clone();
        let name = name.clone();
        async move {
            let args = SupervisorArgs {
                name: telegram::CHANNELS.to_string(),
                children: bots,
                start: StartMode::Staggered(stagger),
                events,
            };
            spawn_child(&registry, &name, Supervisor, args, supervisor).await
        }
    })
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

/// What Studio's handlers reach: built once per boot from the context (the daemon keeps a copy
/// so that tests can call the router in-process).
pub fn studio_state(context: &RootContext) -> StudioState {
    let config = &context.loaded.config;
    StudioState {
        access: Arc::new(crate::studio::access::Access::new(
            context
                .studio_token
                .iter()
                .chain(context.loaded.secrets.get(&config.studio.token_env))
                .cloned()
                .collect(),
            context
                .loaded
                .secrets
                .get(config.studio.metrics_token_env.trim())
                .cloned(),
            config.studio_addr(),
            &config.studio.public_url,
        )),
        providers: context.providers.clone(),
        registry: context.registry.clone(),
        store: context.store.clone(),
        events: context.events.clone(),
        expect_ready: Arc::new(
            bots(context)
                .iter()
                .map(|(spec, _)| telegram::name(&spec.name).local().to_string())
                .collect(),
        ),
        agents: Arc::new(
            context
                .loaded
                .agents
                .iter()
                .map(|spec| crate::studio::AgentEntry {
                    name: spec.name.clone(),
                    telegram: spec.telegram.is_some(),
                })
                .collect(),
        ),
        started_ms: context.boot_ms,
        timezones: Arc::new(crate::studio::timezones::Directory::new(
            &context.loaded.timezone,
            &context.loaded.agents,
        )),
        people: Arc::new(crate::studio::people::FilePeople::from_specs(
            &context.loaded.agents,
        )),
        bill: Arc::new(crate::studio::costs::Bill::new(
            &context.prices,
            &context.loaded.agents,
        )),
    }
}

//! Root: the top of the supervision tree, a one-for-one [`Supervisor`] over the daemon's services.
//!
//! Children, in start order (stopped in reverse, so input stops first and the store last):
//! Store, Events, ApprovalDesk, Memory, Scheduler, McpSupervisor, LocalChannel, AgentSupervisor,
//! HandoffSupervisor, ChannelSupervisor, Reloader, Backup (when scheduled), Studio.
//!
//! The specs of the children a reload changes (the services holding a slice of the agent files,
//! the bots, the agent, MCP and channel supervisors, the reloader) are built by the functions here
//! from a [`RootContext`], at boot and by the reloader. After every reload the root is given the
//! new specs of the supervisors the reload changed in place (`SupervisorMsg::SetSpec`), so that
//! a restart of one of them brings back what the last reload applied, not the boot's files.
//!
//! Restart policy of the root itself: none. When a child exhausts its budget the root fails, the
//! daemon exits non-zero, and systemd (`Restart=always`) starts a fresh process.

use std::sync::Arc;
use std::time::Duration;

use ractor::Actor;
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
use super::supervise::{ChildSpec, actor_spec, spawn_child};
use super::supervise::{OnExhausted, Restart};
use super::supervisor::{StartMode, Supervisor, SupervisorArgs, SupervisorMsg};
use super::telegram_bot::{TelegramBot, TelegramBotArgs};
use crate::config::LoadedConfig;
use crate::events::EventBus;
use crate::protocol::{approvals, events, handoff, local, mcp, memory, scheduler, telegram};
use crate::registry::{Registry, ServiceName};
use crate::store::Store;
use crate::studio::{Live, StudioState};

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
    /// One plan per agent: its runtime and built-in tools (kept current by the reloader).
    pub agents: Vec<AgentPlan>,
    pub options: StartOptions,
    /// When the daemon started (bots ignore updates sent long before it).
    pub boot_ms: i64,
    /// The local access token (`<data_dir>/studio.token`), when Studio runs.
    pub studio_token: Option<crate::secrets::Secret>,
    /// The model providers and prices, built once per boot (agents, boot checks, Studio).
    pub providers: Arc<crate::llm::Providers>,
    pub prices: Arc<crate::llm::prices::Prices>,
    /// How the files were read (the command line's flags), so that a reload reads them the same way.
    pub overrides: crate::config::Overrides,
    /// Studio's views of the files, replaced by a reload.
    pub views: StudioViews,
}

/// Studio's views of the config and agent files (shared by every clone of the Studio state).
#[derive(Clone)]
pub struct StudioViews {
    pub agents: Live<Vec<crate::studio::AgentEntry>>,
    pub timezones: Live<crate::studio::timezones::Directory>,
    pub people: Live<Vec<crate::studio::people::FilePeople>>,
    pub bill: Live<crate::studio::costs::Bill>,
    pub ready: Live<Vec<String>>,
}

impl StudioViews {
    pub fn new(
        loaded: &LoadedConfig,
        prices: &crate::llm::prices::Prices,
        options: StartOptions,
    ) -> Self {
        Self {
            agents: Live::new(agent_entries(loaded)),
            timezones: Live::new(crate::studio::timezones::Directory::new(
                &loaded.timezone,
                &loaded.agents,
            )),
            people: Live::new(crate::studio::people::FilePeople::from_specs(
                &loaded.agents,
            )),
            bill: Live::new(crate::studio::costs::Bill::new(prices, &loaded.agents)),
            ready: Live::new(ready_ids(loaded, options)),
        }
    }

    /// Replaces every view with what `loaded` says (after a reload).
    pub fn refresh(
        &self,
        loaded: &LoadedConfig,
        prices: &crate::llm::prices::Prices,
        options: StartOptions,
    ) {
        self.agents.set(agent_entries(loaded));
        self.timezones.set(crate::studio::timezones::Directory::new(
            &loaded.timezone,
            &loaded.agents,
        ));
        self.people
            .set(crate::studio::people::FilePeople::from_specs(
                &loaded.agents,
            ));
        self.bill
            .set(crate::studio::costs::Bill::new(prices, &loaded.agents));
        self.ready.set(ready_ids(loaded, options));
    }
}

fn agent_entries(loaded: &LoadedConfig) -> Vec<crate::studio::AgentEntry> {
    loaded
        .agents
        .iter()
        .map(|spec| crate::studio::AgentEntry {
            name: spec.name.clone(),
            telegram: spec.telegram.is_some(),
        })
        .collect()
}

/// The actor ids `/readyz` waits for: every configured bot. (MCP servers are not listed: `/readyz`
/// asks the MCP supervisor for its current servers at every probe, so one a reload removed
/// cannot hold readiness.)
fn ready_ids(loaded: &LoadedConfig, options: StartOptions) -> Vec<String> {
    crate::reload::bot_specs(loaded, options.channels)
        .iter()
        .map(|(spec, _)| telegram::name(&spec.name).local().to_string())
        .collect()
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

/// The approval desk with each agent's approvers.
pub fn approvals_spec(context: &RootContext) -> ChildSpec {
    actor_spec(
        &context.registry,
        &approvals::NAME,
        context.loaded.config.supervision.policy(),
        || ApprovalDesk,
        approval_args(context),
    )
}

/// The memory actor with the agents' hierarchy.
pub fn memory_spec(context: &RootContext) -> ChildSpec {
    actor_spec(
        &context.registry,
        &memory::NAME,
        context.loaded.config.supervision.policy(),
        || MemoryActor,
        memory_args(context),
    )
}

/// Each agent and the agents it may delegate to.
pub fn delegates(context: &RootContext) -> std::collections::BTreeMap<String, Vec<String>> {
    context
        .loaded
        .agents
        .iter()
        .map(|agent| (agent.name.clone(), agent.delegates(&context.loaded.agents)))
        .collect()
}

/// The handoff supervisor with who may delegate to whom.
pub fn handoff_spec(context: &RootContext) -> ChildSpec {
    let policy = context.loaded.config.supervision.policy();
    actor_spec(
        &context.registry,
        &handoff::NAME,
        policy.clone(),
        || HandoffSupervisor,
        HandoffArgs {
            store: context.store.clone(),
            registry: context.registry.clone(),
            events: context.events.clone(),
            policy,
            delegates: delegates(context),
        },
    )
}

/// The scheduler with its slice of the config, or an empty placeholder when this start runs no
/// scheduler (`chat` and `eval` beside a running daemon must never fire a job twice).
pub fn scheduler_spec(context: &RootContext) -> ChildSpec {
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
pub fn mcp_supervisor(context: &RootContext) -> ChildSpec {
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

/// The agent supervisor with one plan per agent.
pub fn agent_supervisor(context: &RootContext) -> ChildSpec {
    let config = &context.loaded.config;
    let policy = config.supervision.policy();
    actor_spec(
        &context.registry,
        &super::agent_supervisor::NAME,
        policy.clone(),
        || AgentSupervisor,
        AgentSupervisorArgs {
            agents: context.agents.clone(),
            policy,
            events: context.events.clone(),
        },
    )
    .shutdown(config.shutdown.timeout.0 + Duration::from_secs(5))
}

/// The reloader, starting from `context` as its running configuration.
pub fn reloader_spec(context: &RootContext) -> ChildSpec {
    actor_spec(
        &context.registry,
        &crate::protocol::reload::NAME,
        context.loaded.config.supervision.policy(),
        || super::reloader::ReloaderActor,
        context.clone(),
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

pub fn approval_args(context: &RootContext) -> ApprovalDeskArgs {
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
pub fn bots(context: &RootContext) -> Vec<(crate::config::AgentSpec, crate::secrets::Secret)> {
    crate::reload::bot_specs(&context.loaded, context.options.channels)
}

/// What every bot shares: who transcribes voice notes and who speaks replies.
#[derive(Clone)]
pub struct BotVoice {
    voice: crate::voice::VoiceSettings,
    speech: Option<crate::voice::speech::SpeechClient>,
}

impl BotVoice {
    pub fn new(context: &RootContext, log: bool) -> Self {
        let config = &context.loaded.config;
        let voice = crate::voice::VoiceSettings::from_config(config, &context.loaded.secrets);
        if log
            && let Err(unavailable) = &voice.transcriber
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
                if log {
                    tracing::warn!(%reason, "spoken replies are off; answers are sent as text");
                }
                None
            }
        };
        Self { voice, speech }
    }
}

/// One agent's bot. `boot_ms`: the stale filter's reference (the daemon's start, or the reload
/// that added the bot).
pub fn bot_spec(
    context: &RootContext,
    spec: &crate::config::AgentSpec,
    token: crate::secrets::Secret,
    boot_ms: i64,
    voice: &BotVoice,
) -> ChildSpec {
    let config = &context.loaded.config;
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
        boot_ms,
        workspace,
        timezone: context.loaded.timezone.clone(),
        voice: voice.voice.clone(),
        speech: voice.speech.clone(),
    };
    actor_spec(
        &context.registry,
        &telegram::name(&spec.name),
        config.supervision.policy(),
        || TelegramBot,
        args,
    )
    .restart(Restart::Transient)
    .on_exhausted(OnExhausted::Degrade {
        retry_after: config.telegram.degraded_retry.0,
    })
}

/// The channel supervisor: one bot per agent, started `boot_stagger` apart; a bot that exhausts
/// its budget is degraded and retried later instead of escalating. `log`: say once how voice
/// notes are handled (at boot, not at every reload).
pub fn channel_supervisor(context: &RootContext, log: bool) -> ChildSpec {
    let config = &context.loaded.config;
    let policy = config.supervision.policy();
    let stagger = config.telegram.boot_stagger.0;
    let voice = BotVoice::new(context, log);
    let bots: Vec<ChildSpec> = bots(context)
        .into_iter()
        .map(|(spec, token)| bot_spec(context, &spec, token, context.boot_ms, &voice))
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
        agents: context.views.agents.clone(),
        started_ms: context.boot_ms,
        timezones: context.views.timezones.clone(),
        people: context.views.people.clone(),
        bill: context.views.bill.clone(),
        ready_ids: context.views.ready.clone(),
        backups: Arc::new(crate::backup::schedule::BackupPlan::from_config(
            &context.loaded,
        )),
    }
}

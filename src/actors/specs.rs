//! Each child of the root as a spec: its slice of the config as `Args`, its restart policy and
//! how it stops. The root uses them at boot; the reloader uses them to respec the children a
//! reload changed (and compares the slices to know which did).

use std::sync::Arc;
use std::time::Duration;

use super::agent_supervisor::{AgentSupervisor, AgentSupervisorArgs};
use super::approval_desk::{AgentApprovers, ApprovalDesk, ApprovalDeskArgs};
use super::context::RootContext;
use super::handoff_supervisor::{HandoffArgs, HandoffSupervisor};
use super::memory::{MemoryActor, MemoryArgs};
use super::scheduler::{Scheduler, SchedulerArgs, SchedulerClock};
use super::supervise::{ChildSpec, actor_spec, spawn_child};
use super::supervise::{OnExhausted, Restart};
use super::supervisor::{StartMode, Supervisor, SupervisorArgs, SupervisorMsg};
use super::telegram_bot::{TelegramBot, TelegramBotArgs};
use crate::protocol::{approvals, handoff, mcp, memory, scheduler, telegram};
use crate::registry::ServiceName;
use crate::studio::StudioState;

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
    let (embeddings, mode_reason) =
        crate::memory::embeddings_choice(config, &context.loaded.secrets);
    MemoryArgs {
        store: context.store.clone(),
        dir: config.data_dir.join("memory"),
        embeddings,
        mode_reason,
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
            config: crate::config::McpConfig {
                // `[[mcp.servers]]` and a link per `[[nodes]]` entry (issue #34).
                servers: crate::node::mcp_servers(config),
                ..config.mcp.clone()
            },
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
            let mut channels = std::collections::BTreeMap::new();
            if let Some(whatsapp) = &spec.whatsapp {
                channels.insert("wa".to_string(), whatsapp.people().1);
            }
            if let Some(signal) = &spec.signal {
                channels.insert("sg".to_string(), signal.people().1);
            }
            (
                spec.name.clone(),
                AgentApprovers {
                    has_bot,
                    telegram: ids,
                    channels,
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
    let mut bots: Vec<ChildSpec> = bots(context)
        .into_iter()
        .map(|(spec, token)| bot_spec(context, &spec, token, context.boot_ms, &voice))
        .collect();
    bots.extend(whatsapp_specs(context, &voice));
    bots.extend(signal_specs(context, &voice));
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

/// One seam account (`actors/channel_account`) per agent with a WhatsApp account whose secrets
/// are set, supervised like the bots.
pub fn whatsapp_specs(context: &RootContext, voice: &BotVoice) -> Vec<ChildSpec> {
    crate::whatsapp::Directory::new(&context.loaded, context.options.channels)
        .accounts
        .into_values()
        .filter_map(|account| {
            let spec = context.loaded.agent(&account.agent)?.clone();
            let (allowed, approvers) = account.spec.people();
            let template = account
                .spec
                .template
                .clone()
                .map(|name| (name, account.spec.template_language.clone()));
            let adapter =
                std::sync::Arc::new(crate::whatsapp::client::WhatsAppAdapter::new(account));
            let people = crate::channel::screen::FilePeople { allowed, approvers };
            Some(seam_account_spec(
                context, voice, &spec, adapter, people, template,
            ))
        })
        .collect()
}

/// One seam account per agent with a `[signal]` table (signal-cli needs no secret of ours).
pub fn signal_specs(context: &RootContext, voice: &BotVoice) -> Vec<ChildSpec> {
    if !context.options.channels {
        return Vec::new();
    }
    context
        .loaded
        .agents
        .iter()
        .filter_map(|spec| {
            let signal = spec.signal.as_ref()?;
            let (allowed, approvers) = signal.people();
            let adapter = std::sync::Arc::new(crate::signal::adapter::SignalAdapter::new(signal));
            let people = crate::channel::screen::FilePeople { allowed, approvers };
            Some(seam_account_spec(
                context, voice, spec, adapter, people, None,
            ))
        })
        .collect()
}

/// The spec of one seam channel account of `spec`'s agent: transient under the channel
/// supervisor, degraded (and retried later) when its budget is exhausted, like a bot.
fn seam_account_spec(
    context: &RootContext,
    voice: &BotVoice,
    spec: &crate::config::AgentSpec,
    adapter: std::sync::Arc<dyn crate::channel::Adapter>,
    people: crate::channel::screen::FilePeople,
    template: Option<(String, String)>,
) -> ChildSpec {
    let config = &context.loaded.config;
    let name = crate::protocol::channel::name(adapter.channel(), &spec.name);
    let args = super::channel_account::ChannelAccountArgs {
        agent: spec.name.clone(),
        adapter,
        people,
        template,
        store: context.store.clone(),
        registry: context.registry.clone(),
        events: context.events.clone(),
        workspace: spec
            .workspace
            .clone()
            .unwrap_or_else(|| config.data_dir.join("workspaces").join(&spec.name)),
        voice: voice.voice.clone(),
        echo_transcripts: spec.echo_transcripts,
    };
    actor_spec(
        &context.registry,
        &name,
        config.supervision.policy(),
        || super::channel_account::ChannelAccount,
        args,
    )
    .restart(Restart::Transient)
    .on_exhausted(OnExhausted::Degrade {
        retry_after: config.telegram.degraded_retry.0,
    })
}

/// The networks of `[studio] tls_proxies` or `plain_http_peers` entries.
fn networks(entries: &[String]) -> Vec<ipnet::IpNet> {
    entries
        .iter()
        .filter_map(|entry| crate::config::tls_proxy_network(entry).ok())
        .collect()
}

/// What Studio's handlers reach: built once per boot from the context (the daemon keeps a copy
/// so that tests can call the router in-process).
pub fn studio_state(context: &RootContext) -> StudioState {
    let config = &context.loaded.config;
    StudioState {
        access: Arc::new(
            crate::studio::access::Access::new(
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
            )
            // Validated when the config was loaded; an entry that does not parse is left out.
            .with_tls_proxies(networks(&config.studio.tls_proxies))
            .with_plain_http_peers(networks(&config.studio.plain_http_peers)),
        ),
        providers: context.views.providers.clone(),
        registry: context.registry.clone(),
        store: context.store.clone(),
        events: context.events.clone(),
        agents: context.views.agents.clone(),
        started_ms: context.boot_ms,
        timezones: context.views.timezones.clone(),
        people: context.views.people.clone(),
        bill: context.views.bill.clone(),
        ready_ids: context.views.ready.clone(),
        files: context.views.files.clone(),
        whatsapp: context.views.whatsapp.clone(),
        secrets: context.views.secrets.clone(),
        backups: Arc::new(crate::backup::schedule::BackupPlan::from_config(
            &context.loaded,
        )),
        triggers: Arc::new(crate::triggers::TriggerBook::new(&context.loaded)),
        trigger_window: Arc::default(),
        trigger_counts: Arc::default(),
    }
}

//! Reloader: re-reads the config and agent files and applies the difference through the
//! supervision tree, one reload at a time (its mailbox orders SIGHUP, Studio and the CLI).
//!
//! A reload reads the files exactly as boot did (`config::load` with the same flags, the boot
//! values of the secret variables put back), validates them whole (`crate::reload::validate`) and
//! only then changes anything, in this order: bots to remove or restart stop (no new input), agents
//! to remove stop as at shutdown, the services holding a slice of the agent files (approvals,
//! memory, scheduler, handoffs) restart when their slice changed, changed agents are replaced and
//! new ones start, the MCP links are given the new server list and agents, and bots start. A bot
//! keeps its `getUpdates` offset across a restart (it is stored by bot id); an agent's in-flight
//! runs are durable in SQLite and resumed by its next start, as after a crash. Every report is
//! logged, published (`config_reloaded`), audited (`config.reload`) and returned.
//!
//! Its state is the running configuration; it is the only one that changes it after boot.
//! Restart policy: permanent under the root. After a crash it starts from the boot
//! configuration, so its next reload compares against that and may restart agents that had
//! already been reloaded (harmless: restarting an agent loses nothing).

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::agent_supervisor::{AgentSupervisorMsg, NAME as AGENTS};
use super::root::{self, BotVoice, RootContext};
use super::supervisor::SupervisorMsg;
use crate::events::EventKind;
use crate::protocol::reload::{Changes, ReloadMsg, ReloadReport};
use crate::protocol::{mcp, telegram};
use crate::registry::ServiceName;

/// The root supervisor, by name (registered by `root::spawn`).
const ROOT: ServiceName<SupervisorMsg> = ServiceName::fixed("root");

pub struct ReloaderActor;

pub struct ReloaderState {
    context: RootContext,
}

impl Actor for ReloaderActor {
    type Msg = ReloadMsg;
    type State = ReloaderState;
    type Arguments = RootContext;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        context: RootContext,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(ReloaderState { context })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ReloadMsg::Reload { trigger, reply } => {
                let report = reload(state).await;
                tell(&state.context, &trigger, &report).await;
                let _ = reply.send(report);
            }
        }
        Ok(())
    }
}

/// Reads, validates and applies the files; the report says what happened.
async fn reload(state: &mut ReloaderState) -> ReloadReport {
    let running = state.context.loaded.clone();
    let overrides = state.context.overrides.clone();
    let env = crate::reload::environment(&running);
    let read =
        tokio::task::spawn_blocking(move || crate::config::load_with_env(&overrides, env)).await;
    let new = match read {
        Ok(Ok(new)) => new,
        Ok(Err(error)) => return ReloadReport::refused(error.to_string()),
        Err(_) => return ReloadReport::refused("reading the files failed unexpectedly (a panic)"),
    };
    if let Err(error) = crate::reload::validate(&running, &new) {
        return ReloadReport::refused(error);
    }
    let mut report = ReloadReport {
        ok: true,
        needs_restart: crate::reload::needs_restart(&running.config, &new.config),
        warnings: new.warnings.clone(),
        ..ReloadReport::default()
    };
    for var in new.secrets.keys() {
        if !running.secrets.contains_key(var) {
            report.warnings.push(format!(
                "`{var}` was read after start, so it stays in the daemon's environment; restart to remove it from there"
            ));
        }
    }
    let new = Arc::new(crate::reload::effective(&running, new));
    let plan = crate::reload::plan(&running, &new, state.context.options.channels);
    let before = state.context.clone();
    state.context.loaded = new.clone();
    apply(&before, &state.context, &plan, &mut report).await;
    state
        .context
        .views
        .refresh(&new, &state.context.prices, state.context.options);
    report
}

/// Changes the tree as `plan` says, in the order of the module doc.
async fn apply(
    before: &RootContext,
    after: &RootContext,
    plan: &crate::reload::Plan,
    report: &mut ReloadReport,
) {
    let registry = &after.registry;
    let channels = registry.lookup(&ServiceName::<SupervisorMsg>::fixed(telegram::CHANNELS));
    if let Some(channels) = &channels {
        for agent in &plan.bots_removed {
            let id = telegram::name(agent).local().to_string();
            if ractor::call!(channels, SupervisorMsg::Remove, id).is_ok() {
                report.bots.removed.push(agent.clone());
            }
        }
    }
    let agents = registry.lookup(&AGENTS);
    if let Some(agents) = &agents {
        for agent in &plan.agents_removed {
            if ractor::call!(agents, AgentSupervisorMsg::Remove, agent.clone()).is_ok() {
                report.agents.removed.push(agent.clone());
            }
        }
    }
    restart_services(before, after, &mut report.services).await;
    if let Some(agents) = &agents {
        let names: Vec<String> = plan
            .agents_changed
            .iter()
            .chain(&plan.agents_added)
            .cloned()
            .collect();
        let plans = super::plans::agent_plans(
            &after.loaded,
            Some(&names),
            &after.store,
            registry,
            &after.events,
            after.options.scheduler,
            (&after.providers, &after.prices),
        );
        for agent_plan in plans {
            let name = agent_plan.runtime.spec.name.clone();
            if ractor::call!(agents, AgentSupervisorMsg::Add, agent_plan).is_err() {
                continue;
            }
            if plan.agents_added.contains(&name) {
                report.agents.added.push(name);
            } else {
                report.agents.restarted.push(name);
            }
        }
    }
    if plan.mcp_changed {
        mcp_reload(after, &mut report.mcp_servers).await;
    }
    if let Some(channels) = &channels {
        let voice = BotVoice::new(after, false);
        let now = crate::clock::now_ms();
        for (spec, token) in root::bots(after) {
            let restarted = plan.bots_restarted.contains(&spec.name);
            if !restarted && !plan.bots_added.contains(&spec.name) {
                continue;
            }
            let sent = if restarted {
                // A restarted bot keeps the boot's stale filter; its offset is in the database.
                let bot = root::bot_spec(after, &spec, token, after.boot_ms, &voice);
                ractor::call!(channels, SupervisorMsg::Replace, bot)
            } else {
                let bot = root::bot_spec(after, &spec, token, now, &voice);
                ractor::call!(channels, SupervisorMsg::Add, bot)
            };
            if sent.is_ok() {
                let list = if restarted {
                    &mut report.bots.restarted
                } else {
                    &mut report.bots.added
                };
                list.push(spec.name.clone());
            }
        }
    }
}

/// Restarts each root service whose slice of the agent files changed (they recover their work
/// from the database at start, as after a crash).
async fn restart_services(before: &RootContext, after: &RootContext, changes: &mut Changes) {
    let Some(root) = after.registry.lookup(&ROOT) else {
        return;
    };
    let names = |context: &RootContext| -> Vec<String> {
        context
            .loaded
            .agents
            .iter()
            .map(|spec| spec.name.clone())
            .collect()
    };
    let mut replaced = Vec::new();
    if root::approval_args(before).approvers != root::approval_args(after).approvers {
        replaced.push(root::approvals_spec(after));
    }
    if root::memory_args(before).hierarchy != root::memory_args(after).hierarchy {
        replaced.push(root::memory_spec(after));
    }
    if after.options.scheduler && names(before) != names(after) {
        replaced.push(root::scheduler_spec(after));
    }
    if root::delegates(before) != root::delegates(after) {
        replaced.push(root::handoff_spec(after));
    }
    for spec in replaced {
        let id = spec.id.clone();
        if ractor::call!(root, SupervisorMsg::Replace, spec).is_ok() {
            changes.restarted.push(id);
        }
    }
}

/// Gives the MCP supervisor the new server list and agents; it restarts only the links whose
/// entry changed, retargets those whose agents alone changed, and says what it did.
async fn mcp_reload(after: &RootContext, changes: &mut Changes) {
    let reload = mcp::McpReload {
        servers: after.loaded.config.mcp.servers.clone(),
        agents: after.loaded.agents.clone(),
        secrets: Arc::new(after.loaded.secrets.clone()),
    };
    match mcp::Mcp::new(&after.registry).reload(reload).await {
        Ok(outcome) => {
            changes.added = outcome.added;
            changes.removed = outcome.removed;
            changes.restarted = outcome.restarted;
            changes.retargeted = outcome.retargeted;
        }
        Err(error) => tracing::warn!(%error, "the MCP servers were not reloaded"),
    }
}

/// Logs, publishes and audits a report.
async fn tell(context: &RootContext, trigger: &str, report: &ReloadReport) {
    let summary = report.summary();
    if report.ok {
        tracing::info!(trigger, "{summary}");
    } else {
        tracing::error!(trigger, "{summary}");
    }
    context
        .events
        .publish(EventKind::ConfigReloaded, "reloader", &summary);
    let details = serde_json::json!({ "trigger": trigger, "report": report });
    let action = if report.ok {
        "config.reload"
    } else {
        "config.reload_refused"
    };
    let written = context
        .store
        .write(move |conn| crate::audit::append(conn, "operator", action, "config", &details))
        .await;
    match written {
        Ok(_) => crate::audit::announce(&context.events, action, "config"),
        Err(error) => tracing::warn!(%error, "the reload could not be audited"),
    }
}

//! Reloader: re-reads the config and agent files and applies the difference through the
//! supervision tree, one reload at a time (its mailbox orders SIGHUP, Studio and the CLI).
//!
//! A reload reads the files exactly as boot did (`config::load` with the same flags, the boot
//! values of the secret variables put back), validates them whole (`crate::reload::validate`) and
//! only then changes anything, in this order: bots and WhatsApp/Signal accounts to remove or
//! restart stop (no new input, and none keeps running an old definition beside its new agent),
//! agents to remove stop as at
//! shutdown, the services holding a slice of the agent files (approvals, memory, scheduler,
//! handoffs) are replaced when their slice changed (`SupervisorMsg::Replace`; they recover from the
//! database as after a crash), changed agents are replaced and new ones start
//! (`AgentSupervisorMsg::Add` / `Remove`), the MCP supervisor is given the new server list and
//! agents (`McpReload`: only links whose entry changed restart; a link whose agents alone changed
//! is retargeted without reconnecting), and the new and restarted accounts and bots start (`Add`
//! on the channel supervisor; an account's stored, unanswered messages are dispatched by the new
//! actor's first sweep, and Studio's webhook routes by the new phone number ids). A bot keeps its `getUpdates` offset across a restart (it is stored by bot id); an
//! agent's in-flight runs are durable in SQLite and resumed by its next start, as after a crash.
//! Last, the root is given the new specs of the agent, MCP and channel supervisors and of the
//! reloader (`SupervisorMsg::SetSpec`: stored, not restarted), so that a restart of any of them
//! keeps what this reload applied, and Studio's views of the files (`StudioViews`: agents,
//! people, zones, budgets, the ids `/readyz` waits for, the secrets) are replaced. A provider
//! whose key changed in the secrets store is built again, and its agents restart with it.
//!
//! The report (added, removed and restarted per kind, MCP servers also retargeted, settings that
//! need a restart, warnings, or the refusal) is logged, published (`config_reloaded`), audited
//! (`config.reload`, or `config.reload_partial` / `config.reload_refused`) and returned.
//!
//! A step that fails (its supervisor is not running or does not answer) is a warning in the
//! report, which is then `partial` (`ok: false`), and is remembered (`reload::Unapplied`): the
//! next reload does it again even if the files have not changed since.
//!
//! Studio's edits of the files (`ReloadMsg::Edit`, `edit.rs`) come here too: validated whole
//! with the new text in place before anything is written, written atomically, audited, then
//! applied by a reload like any other.
//!
//! Its state is the running configuration; it is the only one that changes it after boot.
//! Restart policy: permanent under the root. After a crash it starts from the configuration of
//! the last reload (its spec is replaced after each one); what that reload could not apply is
//! forgotten then, and applied by the next reload only if the files differ.

mod edit;

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::agent_supervisor::{AgentSupervisorMsg, NAME as AGENTS};
use super::context::RootContext;
use super::specs::{self, BotVoice};
use super::supervisor::SupervisorMsg;
use crate::events::EventKind;
use crate::protocol::reload::{ReloadMsg, ReloadReport};
use crate::protocol::{mcp, telegram};
use crate::registry::ServiceName;
use crate::reload::{Plan, SeamAccount, Unapplied};

/// The root supervisor, by name (registered by `root::spawn`).
const ROOT: ServiceName<SupervisorMsg> = ServiceName::fixed("root");

pub struct ReloaderActor;

pub struct ReloaderState {
    context: RootContext,
    /// What the last reload could not apply (retried by the next one).
    unapplied: Unapplied,
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
        Ok(ReloaderState {
            context,
            unapplied: Unapplied::default(),
        })
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
            ReloadMsg::Edit { edit, by, reply } => {
                let outcome = edit::edit(state, edit, &by).await;
                let _ = reply.send(outcome);
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
        needs_restart: crate::reload::needs_restart(&running.config, &new.config)
            .into_iter()
            .collect(),
        warnings: new.warnings.clone(),
        ..ReloadReport::default()
    };
    for var in new.secrets.keys() {
        // A value from the secrets store was never in the environment.
        if !running.secrets.contains_key(var) && !new.secret_from_store(var) {
            report.warnings.push(format!(
                "`{var}` was read after start, so it stays in the daemon's environment; restart to remove it from there"
            ));
        }
    }
    let new = Arc::new(crate::reload::effective(&running, new));
    let channels = state.context.options.channels;
    let mut plan = crate::reload::plan(&running, &new, channels);
    plan.retry(&state.unapplied, &new, channels);
    let before = state.context.clone();
    state.context.loaded = new.clone();
    if plan.providers_changed {
        // The agents that use a changed provider are in the plan: they start with these.
        state.context.providers = Arc::new(crate::llm::Providers::from_config_with_secrets(
            &new.config,
            &new.secrets,
        ));
    }
    let mut step = Step {
        report: &mut report,
        unapplied: Unapplied::default(),
    };
    let built = apply(&before, &state.context, &plan, &state.unapplied, &mut step).await;
    let unapplied = step.unapplied;
    // The agents the tree should run now: the running plans, less the removed and replaced ones,
    // plus the new ones (what the agent supervisor is rebuilt from if it restarts).
    state.context.agents.retain(|agent_plan| {
        let name = &agent_plan.runtime.spec.name;
        new.agent(name).is_some() && !built.iter().any(|b| &b.runtime.spec.name == name)
    });
    state.context.agents.extend(built);
    respec_root(&state.context, &mut report).await;
    state.unapplied = unapplied;
    if !state.unapplied.is_empty() {
        report.ok = false;
        report.partial = true;
    }
    state.context.views.refresh(
        &new,
        &state.context.prices,
        &state.context.providers,
        state.context.options,
    );
    report
}

/// One reload's report and what it could not apply.
struct Step<'a> {
    report: &'a mut ReloadReport,
    unapplied: Unapplied,
}

impl Step<'_> {
    fn warn(&mut self, what: String) {
        self.report
            .warnings
            .push(format!("{what}; the next reload tries again"));
    }
}

/// Changes the tree as `plan` says, in the order of the module doc. Returns the agent plans it
/// built (for the agents added or replaced).
async fn apply(
    before: &RootContext,
    after: &RootContext,
    plan: &Plan,
    retry: &Unapplied,
    step: &mut Step<'_>,
) -> Vec<super::agent_supervisor::AgentPlan> {
    let registry = &after.registry;
    let channels = ServiceName::<SupervisorMsg>::fixed(telegram::CHANNELS);
    let stopped = stop_bots(after, plan, step).await;
    let seam_stopped = stop_seam_accounts(after, plan, step).await;
    for agent in &plan.agents_removed {
        let remove = |reply| AgentSupervisorMsg::Remove(agent.clone(), reply);
        match ask(registry, &AGENTS, remove).await {
            Ok(()) => step.report.agents.removed.push(agent.clone()),
            Err(reason) => {
                step.unapplied.agents.insert(agent.clone());
                step.warn(format!("agent `{agent}` was not stopped: {reason}"));
            }
        }
    }
    restart_services(before, after, &retry.services, step).await;
    let names: Vec<String> = plan
        .agents_changed
        .iter()
        .chain(&plan.agents_added)
        .cloned()
        .collect();
    let built = super::plans::agent_plans(
        &after.loaded,
        Some(&names),
        &after.store,
        registry,
        &after.events,
        after.options.scheduler,
        (&after.providers, &after.prices, &after.model_calls),
    );
    for agent_plan in &built {
        let name = agent_plan.runtime.spec.name.clone();
        let add = |reply| AgentSupervisorMsg::Add(agent_plan.clone(), reply);
        match ask(registry, &AGENTS, add).await {
            Ok(()) if plan.agents_added.contains(&name) => step.report.agents.added.push(name),
            Ok(()) => step.report.agents.restarted.push(name),
            Err(reason) => {
                step.warn(format!("agent `{name}` was not started: {reason}"));
                step.unapplied.agents.insert(name);
            }
        }
    }
    if plan.mcp_changed {
        mcp_reload(after, step).await;
    }
    let voice = BotVoice::new(after, false);
    start_seam_accounts(after, plan, &seam_stopped, &voice, step).await;
    let now = crate::clock::now_ms();
    for (spec, token) in specs::bots(after) {
        let restarted = plan.bots_restarted.contains(&spec.name);
        if !restarted && !plan.bots_added.contains(&spec.name) {
            continue;
        }
        if restarted && !stopped.contains(&spec.name) {
            // Its old bot still runs (and is in `unapplied`): not started twice.
            continue;
        }
        // A restarted bot keeps the boot's stale filter; its offset is in the database.
        let since = if restarted { after.boot_ms } else { now };
        let bot = specs::bot_spec(after, &spec, token, since, &voice);
        match ask(registry, &channels, |reply| SupervisorMsg::Add(bot, reply)).await {
            Ok(()) if restarted => step.report.bots.restarted.push(spec.name.clone()),
            Ok(()) => step.report.bots.added.push(spec.name.clone()),
            Err(reason) => {
                step.warn(format!(
                    "the bot of `{}` was not started: {reason}",
                    spec.name
                ));
                step.unapplied.bots.insert(spec.name.clone());
            }
        }
    }
    built
}

/// Stops the bots to remove, and the bots to restart (started again after their agent);
/// returns the agents whose bot it stopped.
async fn stop_bots(after: &RootContext, plan: &Plan, step: &mut Step<'_>) -> Vec<String> {
    let channels = ServiceName::<SupervisorMsg>::fixed(telegram::CHANNELS);
    let mut stopped = Vec::new();
    for agent in plan.bots_removed.iter().chain(&plan.bots_restarted) {
        let id = telegram::name(agent).local().to_string();
        match ask(&after.registry, &channels, |reply| {
            SupervisorMsg::Remove(id, reply)
        })
        .await
        {
            Ok(()) => stopped.push(agent.clone()),
            Err(reason) => {
                step.unapplied.bots.insert(agent.clone());
                step.warn(format!("the bot of `{agent}` was not stopped: {reason}"));
            }
        }
    }
    step.report.bots.removed = plan
        .bots_removed
        .iter()
        .filter(|agent| stopped.contains(agent))
        .cloned()
        .collect();
    stopped
}

/// The child id of a seam account under the channel supervisor (`channel:sg:ada`).
fn seam_id(account: &SeamAccount) -> String {
    crate::protocol::channel::name(account.channel, &account.agent)
        .local()
        .to_string()
}

/// Stops the WhatsApp and Signal accounts the plan removes or restarts (their own tasks — the
/// send worker, Signal's event stream — end with them); returns those it stopped.
async fn stop_seam_accounts(
    after: &RootContext,
    plan: &Plan,
    step: &mut Step<'_>,
) -> Vec<SeamAccount> {
    let channels = ServiceName::<SupervisorMsg>::fixed(telegram::CHANNELS);
    let mut stopped = Vec::new();
    for account in plan.seam_removed.iter().chain(&plan.seam_restarted) {
        let id = seam_id(account);
        match ask(&after.registry, &channels, |reply| {
            SupervisorMsg::Remove(id, reply)
        })
        .await
        {
            Ok(()) => stopped.push(account.clone()),
            Err(reason) => {
                step.unapplied.seam.insert(account.clone());
                step.warn(format!("{} was not stopped: {reason}", account.describe()));
            }
        }
    }
    step.report.channel_accounts.removed = plan
        .seam_removed
        .iter()
        .filter(|account| stopped.contains(account))
        .map(SeamAccount::describe)
        .collect();
    stopped
}

/// Starts the new WhatsApp and Signal accounts and the restarted ones (with the new files): what
/// was stored for them and not yet answered is dispatched by the new actor's first sweep, and the
/// webhook routes by the new phone number ids (`StudioViews::refresh`).
async fn start_seam_accounts(
    after: &RootContext,
    plan: &Plan,
    stopped: &[SeamAccount],
    voice: &BotVoice,
    step: &mut Step<'_>,
) {
    let channels = ServiceName::<SupervisorMsg>::fixed(telegram::CHANNELS);
    let mut built: Vec<super::supervise::ChildSpec> = specs::whatsapp_specs(after, voice);
    built.extend(specs::signal_specs(after, voice));
    for account in plan.seam_added.iter().chain(&plan.seam_restarted) {
        let restarted = plan.seam_restarted.contains(account);
        if restarted && !stopped.contains(account) {
            // The old account still runs (and is in `unapplied`): not started twice.
            continue;
        }
        let id = seam_id(account);
        let Some(spec) = built.iter().find(|spec| spec.id == id).cloned() else {
            continue;
        };
        match ask(&after.registry, &channels, |reply| {
            SupervisorMsg::Add(spec, reply)
        })
        .await
        {
            Ok(()) if restarted => step
                .report
                .channel_accounts
                .restarted
                .push(account.describe()),
            Ok(()) => step.report.channel_accounts.added.push(account.describe()),
            Err(reason) => {
                step.warn(format!("{} was not started: {reason}", account.describe()));
                step.unapplied.seam.insert(account.clone());
            }
        }
    }
}

/// Asks a supervisor to apply one step, waiting as long as it takes (a step may stop an actor
/// that finishes its work first); the error says which supervisor failed and how.
async fn ask<M: ractor::Message>(
    registry: &crate::registry::Registry,
    supervisor: &ServiceName<M>,
    make: impl FnOnce(ractor::RpcReplyPort<()>) -> M,
) -> Result<(), crate::protocol::CallError> {
    crate::protocol::ask(registry, supervisor, None, make).await
}

/// Restarts each root service whose slice of the agent files changed, or that the last reload
/// could not restart (`retry`, by child id). They recover their work from the database at start,
/// as after a crash.
async fn restart_services(
    before: &RootContext,
    after: &RootContext,
    retry: &std::collections::BTreeSet<String>,
    step: &mut Step<'_>,
) {
    let names = |context: &RootContext| -> Vec<String> {
        context
            .loaded
            .agents
            .iter()
            .map(|spec| spec.name.clone())
            .collect()
    };
    let candidates = [
        (
            specs::approval_args(before).approvers != specs::approval_args(after).approvers,
            specs::approvals_spec(after),
        ),
        (
            specs::memory_args(before).hierarchy != specs::memory_args(after).hierarchy,
            specs::memory_spec(after),
        ),
        (
            after.options.scheduler && names(before) != names(after),
            specs::scheduler_spec(after),
        ),
        (
            specs::delegates(before) != specs::delegates(after),
            specs::handoff_spec(after),
        ),
    ];
    for (changed, spec) in candidates {
        let id = spec.id.clone();
        if !changed && !retry.contains(&id) {
            continue;
        }
        let replace = |reply| SupervisorMsg::Replace(spec, reply);
        match ask(&after.registry, &ROOT, replace).await {
            Ok(()) => step.report.services.restarted.push(id),
            Err(reason) => {
                step.warn(format!("the service `{id}` was not restarted: {reason}"));
                step.unapplied.services.insert(id);
            }
        }
    }
}

/// Gives the MCP supervisor the new server list and agents; it restarts only the links whose
/// entry changed, retargets those whose agents alone changed, and says what it did.
async fn mcp_reload(after: &RootContext, step: &mut Step<'_>) {
    let reload = mcp::McpReload {
        servers: crate::node::mcp_servers(&after.loaded.config),
        agents: after.loaded.agents.clone(),
        secrets: Arc::new(after.loaded.secrets.clone()),
    };
    match mcp::Mcp::new(&after.registry).reload(reload).await {
        Ok(outcome) => {
            step.report.mcp_servers = outcome;
        }
        Err(error) => {
            step.unapplied.mcp = true;
            step.warn(format!("the MCP servers were not reloaded: {error}"));
        }
    }
}

/// Gives the root the specs of the children this reload changed in place, so that a restart of
/// one of them (a crash, an exhausted budget) brings back what the reload applied, not the boot's
/// files. The children keep running.
async fn respec_root(context: &RootContext, report: &mut ReloadReport) {
    let specs = [
        specs::agent_supervisor(context),
        specs::mcp_supervisor(context),
        specs::channel_supervisor(context, false),
        specs::reloader_spec(context),
    ];
    let Some(root) = context.registry.lookup(&ROOT) else {
        report.warnings.push(
            "the root supervisor is not running: a restarted supervisor would start from older files"
                .into(),
        );
        return;
    };
    for spec in specs {
        let id = spec.id.clone();
        match ractor::call!(root, SupervisorMsg::SetSpec, spec) {
            Ok(true) => {}
            Ok(false) => report.warnings.push(format!(
                "the root has no child `{id}`, so its restart spec was not updated"
            )),
            Err(error) => report.warnings.push(format!(
                "the root supervisor did not take the new spec of `{id}` ({error}): if it restarts, it starts from older files"
            )),
        }
    }
}

/// Logs, publishes and audits a report.
async fn tell(context: &RootContext, trigger: &str, report: &ReloadReport) {
    let summary = report.summary();
    if report.ok {
        tracing::info!(trigger, "{summary}");
    } else if report.partial {
        tracing::warn!(trigger, "{summary}");
    } else {
        tracing::error!(trigger, "{summary}");
    }
    context
        .events
        .publish(EventKind::ConfigReloaded, "reloader", &summary);
    let details = serde_json::json!({ "trigger": trigger, "report": report });
    let action = if report.ok {
        "config.reload"
    } else if report.partial {
        "config.reload_partial"
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

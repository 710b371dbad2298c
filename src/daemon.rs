//! Boots the supervision tree, waits for shutdown, and stops the tree in order.
//!
//! [`run`] is what `clawvisor serve` calls; it takes the shutdown future as a parameter so tests
//! pass their own. [`start`] and [`start_with`] (with a `domain::StartOptions`: `chat` runs
//! without Studio, bots or the scheduler; tests choose) return a [`Daemon`] handle. Booting
//! opens the store (creating the data directory, migrating), records the boot, builds each
//! agent's runtime (`actors::plans`), spawns the root and probes the model providers in the
//! background.
//!
//! The boot record: every boot writes a `daemon_boots` row (its kind, `serve` or `local`, and its
//! process id) and a clean stop records its `stopped_ms`; a boot without one was unclean (said at
//! the next boot). Operator commands ask it whether a daemon runs (`store::running_boot`). Every
//! boot first checks the audit chain's tail and anchors, and refuses to start (writing nothing)
//! unless they check out.
//!
//! Shutdown runs in one direction: the root stops its children in reverse start order — Studio and
//! the channels first (no new input), then agents (runs finish or checkpoint within
//! `[shutdown] timeout`), the scheduler and approvals (pending approvals stay pending in the DB),
//! the event history, and the store last.
//!
//! Exit codes (`clawvisor serve`): 0 after a clean stop; 78 (`EX_CONFIG`, [`EXIT_CONFIG`]) for a
//! configuration error, a database newer than the binary, or a data directory that cannot be
//! created or cannot hold the Studio token, or an audit log whose anchors (key, head, marker) or
//! tail do not check out — restarting cannot fix these, and the systemd unit
//! (`deploy/clawvisor.service`) does not restart on 78; 1 for anything else, including the root's
//! exhausted restart budget (the unit has `Restart=always` for every
//! exit but 78, so a stray signal cannot leave the daemon down). SIGHUP is a reload, never an
//! exit; its listener is stopped as soon as shutdown begins, and a SIGHUP during boot is ignored.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::watch;

use crate::actors::agent_supervisor::AgentSupervisorMsg;
use crate::actors::context::RootContext;
use crate::actors::supervisor::SupervisorMsg;
use crate::actors::{root, specs};
use crate::config::LoadedConfig;
use crate::domain::StartOptions;
use crate::events::{EventBus, EventKind};
use crate::llm::Providers;
use crate::registry::Registry;
use crate::store::{Store, StoreError};

/// Exit code for configuration errors (`EX_CONFIG`; the systemd unit does not restart on it).
pub const EXIT_CONFIG: u8 = 78;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("the supervision tree could not start: {0}")]
    Boot(String),
    #[error("the supervision tree failed: {0}")]
    RootFailed(String),
    #[error("{0}")]
    StudioToken(#[from] crate::studio::token_file::TokenFileError),
    /// The audit log's anchors or tail do not check out (`audit::boot_check`).
    #[error("refusing to start: {0}")]
    Audit(String),
}

impl DaemonError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            // Restarting cannot fix a database newer than the binary.
            DaemonError::Store(StoreError::NewerSchema { .. }) => EXIT_CONFIG,
            DaemonError::Store(StoreError::DataDir { .. }) => EXIT_CONFIG,
            // A read-only mount, permissions, a full disk, a corrupt file, the file limit.
            DaemonError::Store(StoreError::Unusable {
                needs_a_person: true,
                ..
            }) => EXIT_CONFIG,
            // Free space below `[store] hold_free` at boot: someone must free space first.
            DaemonError::Store(StoreError::Holding(_)) => EXIT_CONFIG,
            // The data directory cannot hold the Studio token file: a permissions problem.
            DaemonError::StudioToken(_) => EXIT_CONFIG,
            // Anchors that do not match need the operator (restore or `audit rekey`).
            DaemonError::Audit(_) => EXIT_CONFIG,
            _ => 1,
        }
    }
}

/// A running daemon.
pub struct Daemon {
    pub registry: Registry,
    pub store: Store,
    pub events: EventBus,
    pub config: Arc<LoadedConfig>,
    root: ActorRef<SupervisorMsg>,
    root_task: tokio::task::JoinHandle<()>,
    studio_bound: watch::Receiver<Option<SocketAddr>>,
    /// What Studio's handlers reach (tests call `studio::router` with it in-process).
    studio: crate::studio::StudioState,
    /// The local access token, when Studio runs.
    studio_token: Option<crate::secrets::Secret>,
    boot_id: i64,
}

/// Opens the store and starts the full tree.
pub async fn start(loaded: LoadedConfig) -> Result<Daemon, DaemonError> {
    start_with(loaded, StartOptions::serve()).await
}

/// Opens the store and starts the tree with the given parts. A reload reads the files from where
/// `loaded` came from (its config file and agents directory, its data directory).
pub async fn start_with(
    loaded: LoadedConfig,
    options: StartOptions,
) -> Result<Daemon, DaemonError> {
    let overrides = reload_overrides(&loaded);
    start_reloadable(loaded, options, overrides).await
}

/// What a reload of an in-process daemon reads: the files `loaded` came from, on its data
/// directory (no command line to repeat).
fn reload_overrides(loaded: &LoadedConfig) -> crate::config::Overrides {
    crate::config::Overrides {
        config: match &loaded.source {
            crate::config::ConfigSource::File(path) => Some(path.clone()),
            crate::config::ConfigSource::BuiltIn => None,
        },
        data_dir: Some(loaded.config.data_dir.clone()),
        actors_dir: loaded.agents_source.clone(),
        studio_bind: Some(loaded.config.studio.bind.clone()),
        ..Default::default()
    }
}

/// Like [`start_with`]; a reload reads the files with `overrides` (the command line's flags).
pub async fn start_reloadable(
    loaded: LoadedConfig,
    options: StartOptions,
    overrides: crate::config::Overrides,
) -> Result<Daemon, DaemonError> {
    let mut loaded = loaded;
    let store = open_store(&loaded.config).await?;
    let boot = record_boot(&store, options).await?;
    let events = EventBus::new();
    move_studio_settings_into_files(&mut loaded, &store, &events).await;
    let loaded = Arc::new(loaded);
    let studio_token = studio_token(&loaded.config, options).await?;
    let registry = Registry::new();
    let (studio_bound_tx, studio_bound) = watch::channel(None);
    // Built once per boot and shared: the agents' runs, the boot checks below and Studio.
    let providers = Arc::new(Providers::from_config_with_secrets(
        &loaded.config,
        &loaded.secrets,
    ));
    let prices = Arc::new(crate::llm::prices::Prices::from_config(&loaded.config));
    let model_calls = crate::agent::ModelCalls::new(loaded.config.sessions.max_model_calls);
    let agents = crate::actors::plans::agent_plans(
        &loaded,
        None,
        &store,
        &registry,
        &events,
        options.scheduler,
        (&providers, &prices, &model_calls),
    );
    let context = RootContext {
        loaded: loaded.clone(),
        registry: registry.clone(),
        store: store.clone(),
        events: events.clone(),
        studio_bound: studio_bound_tx,
        agents,
        options,
        boot_ms: boot.started_ms,
        studio_token,
        providers: providers.clone(),
        prices: prices.clone(),
        model_calls,
        overrides,
        views: crate::studio::views::StudioViews::new(&loaded, &prices, &providers, options),
    };
    let studio = specs::studio_state(&context);
    let (root, root_task) = start_tree(&context).await?;
    say_what_is_up(&loaded, &prices, &events, boot.audit_warning);
    probe_providers(providers, events.clone());
    events.publish(
        EventKind::BootComplete,
        "root",
        "the supervision tree is up",
    );
    Ok(Daemon {
        registry,
        store,
        events,
        config: loaded,
        root,
        root_task,
        studio_bound,
        studio,
        studio_token: context.studio_token.clone(),
        boot_id: boot.id,
    })
}

/// Creates the data directory if needed and opens the database (migrating it).
async fn open_store(config: &crate::config::Config) -> Result<Store, DaemonError> {
    std::fs::create_dir_all(&config.data_dir).map_err(|source| StoreError::DataDir {
        path: config.data_dir.display().to_string(),
        source,
    })?;
    let db_path = config.db_path();
    let store_options = crate::store::StoreOptions::from(config);
    let store = tokio::task::spawn_blocking(move || Store::open(&db_path, store_options))
        .await
        .map_err(|_| DaemonError::Boot("opening the database panicked".into()))??;
    Ok(store)
}

/// Autonomy, model and skill toggles that earlier versions kept in the database when they were
/// set in Studio (and that silently beat the agent's file) move into the agent's file, once:
/// the file is edited with its comments kept, the database forgets them, and the move is
/// audited. An agent whose file cannot be written keeps them (the warning says where to put
/// them), so nothing the operator chose is lost.
async fn move_studio_settings_into_files(
    loaded: &mut LoadedConfig,
    store: &Store,
    events: &EventBus,
) {
    use crate::config::edit;
    let Some(dir) = loaded.agents_source.clone() else {
        return;
    };
    for spec in &mut loaded.agents {
        let name = spec.name.clone();
        let stored = store
            .read(move |conn| {
                Ok((
                    crate::store::runs::settings(conn, &name)?,
                    crate::store::studio::skill_toggles(conn, &name)?,
                ))
            })
            .await;
        let Ok((row, toggles)) = stored else {
            continue;
        };
        if row.autonomy.is_none() && row.model.is_none() && toggles.is_empty() {
            continue;
        }
        let skills = crate::skills::enabled_names(&spec.skills, &toggles);
        let settings = settings_to_move(&row, &skills, !toggles.is_empty());
        let written = edit::find_agent_file(&dir, &spec.name)
            .ok_or_else(|| "its file was not found".to_string())
            .and_then(|path| {
                let text = std::fs::read_to_string(&path).map_err(|error| error.to_string())?;
                let text = edit::edit_agent(&text, &settings).map_err(|error| error.to_string())?;
                edit::write_atomically(&path, &text).map_err(|error| error.to_string())?;
                Ok(path)
            });
        let path = match written {
            Ok(path) => path,
            Err(error) => {
                tracing::warn!(agent = %spec.name, "Settings made in Studio could not move into the agent's file ({error}); they still apply. Set them in the file by hand: {settings:?}");
                continue;
            }
        };
        if let Some(autonomy) = row
            .autonomy
            .as_deref()
            .and_then(crate::config::Autonomy::parse)
        {
            spec.autonomy = autonomy;
        }
        if let Some(model) = row.model.clone() {
            spec.model = model;
        }
        spec.skills = skills;
        forget_moved_settings(store, events, &spec.name, &path, &row, toggles.len()).await;
    }
}

/// The file keys that take over what the database held: autonomy, model, and the skills list
/// when a skill was toggled.
fn settings_to_move(
    row: &crate::store::runs::SettingsRow,
    skills: &[String],
    toggled: bool,
) -> Vec<(String, crate::config::edit::Setting)> {
    use crate::config::edit::Setting;
    let mut settings = Vec::new();
    if let Some(autonomy) = row
        .autonomy
        .as_deref()
        .and_then(crate::config::Autonomy::parse)
    {
        settings.push((
            "autonomy".to_string(),
            Setting::Text(autonomy.as_str().into()),
        ));
    }
    if let Some(model) = &row.model {
        settings.push(("model".to_string(), Setting::Text(model.clone())));
    }
    if toggled {
        settings.push(("skills".to_string(), Setting::Texts(skills.to_vec())));
    }
    settings
}

/// Once the file holds them: the database forgets the moved settings (keeping pause), audited.
async fn forget_moved_settings(
    store: &Store,
    events: &EventBus,
    agent: &str,
    path: &std::path::Path,
    row: &crate::store::runs::SettingsRow,
    toggles: usize,
) {
    let (name, paused, now) = (agent.to_string(), row.paused, crate::clock::now_ms());
    let details = serde_json::json!({"file": path.display().to_string(), "autonomy": row.autonomy, "model": row.model, "skill_toggles": toggles});
    let subject = format!("agent:{name}");
    let audited = subject.clone();
    let moved = store
        .write(move |conn| {
            let kept = crate::store::runs::SettingsRow {
                autonomy: None,
                model: None,
                paused,
            };
            crate::store::runs::save_settings(conn, &name, &kept, now)?;
            crate::store::studio::clear_skill_toggles(conn, &name)?;
            crate::audit::append(
                conn,
                "daemon",
                "agent.settings_moved_to_file",
                &audited,
                &details,
            )?;
            Ok(())
        })
        .await;
    match moved {
        Ok(()) => {
            crate::audit::announce(events, "agent.settings_moved_to_file", &subject);
            tracing::info!(%agent, file = %path.display(), "Settings made in Studio now live in the agent's file, the one place an agent is defined.")
        }
        Err(error) => {
            tracing::warn!(%agent, %error, "the settings were written into the agent's file but the database kept its copy")
        }
    }
}

/// This boot as recorded: its row's id, when it started, and what the audit check found.
struct Boot {
    id: i64,
    started_ms: i64,
    /// Said in Studio's events once the tree is up.
    audit_warning: Option<String>,
}

/// Records the boot, checks the tail of the audit chain and warns of earlier unclean stops.
async fn record_boot(store: &Store, options: StartOptions) -> Result<Boot, DaemonError> {
    // The tail of the audit chain and its anchors are checked at every boot, before anything is
    // written (the whole chain: `clawvisor audit verify`); anchors that do not match refuse it.
    let audit_warning = crate::audit::boot_check(store)
        .await
        .map_err(DaemonError::Audit)?;
    let started_ms = crate::clock::now_ms();
    // Operator commands call the API of a boot that runs Studio (`serve`) and work on the files
    // beside one that does not (`clawvisor chat`): decided by the flag, not by which preset.
    let boot_kind = if !options.studio {
        crate::store::events::BootKind::Local
    } else {
        crate::store::events::BootKind::Serve
    };
    let id = store
        .write(move |conn| {
            crate::store::events::record_boot(
                conn,
                started_ms,
                env!("CARGO_PKG_VERSION"),
                std::process::id(),
                boot_kind,
            )
        })
        .await?;
    let unclean = store
        .read(move |conn| crate::store::events::unclean_stops(conn, id))
        .await
        .unwrap_or(0);
    if unclean > 0 {
        tracing::warn!(
            unclean,
            "earlier runs ended without a clean stop; interrupted work is recovered from the database"
        );
    }
    Ok(Boot {
        id,
        started_ms,
        audit_warning,
    })
}

/// The local token Studio accepts, when Studio runs: commands on the server call Studio with the
/// token in this file (`studio::token_file`).
async fn studio_token(
    config: &crate::config::Config,
    options: StartOptions,
) -> Result<Option<crate::secrets::Secret>, DaemonError> {
    if !options.studio {
        return Ok(None);
    }
    let data_dir = config.data_dir.clone();
    let token =
        tokio::task::spawn_blocking(move || crate::studio::token_file::load_or_create(&data_dir))
            .await
            .map_err(|_| DaemonError::Boot("creating the Studio token file panicked".into()))??;
    Ok(Some(token))
}

/// Spawns the root and returns once every child, and every agent, has started.
async fn start_tree(
    context: &RootContext,
) -> Result<(ActorRef<SupervisorMsg>, tokio::task::JoinHandle<()>), DaemonError> {
    let (root, root_task) = root::spawn(context)
        .await
        .map_err(|error| DaemonError::Boot(crate::actors::supervise::error_chain(&error)))?;
    // `spawn` returns after the root's `pre_start`; its children start in `post_start`. A message
    // is handled only after `post_start`, so this call returns once every child has started.
    ractor::call!(root, SupervisorMsg::Children).map_err(|error| {
        DaemonError::Boot(format!("the root supervisor did not start: {error}"))
    })?;
    // The same holds one level down: once the agent supervisor answers, every agent has started.
    if let Some(agents) = context
        .registry
        .lookup(&crate::actors::agent_supervisor::NAME)
    {
        ractor::call!(agents, AgentSupervisorMsg::Children).map_err(|error| {
            DaemonError::Boot(format!("the agent supervisor did not start: {error}"))
        })?;
    }
    Ok((root, root_task))
}

/// The boot's lines for the log: the config's warnings and next steps, what runs, the shell's
/// sandbox, models without a price; and the audit check's warning for Studio.
fn say_what_is_up(
    loaded: &LoadedConfig,
    prices: &crate::llm::prices::Prices,
    events: &EventBus,
    audit_warning: Option<String>,
) {
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    for hint in &loaded.hints {
        tracing::info!("next step: {hint}");
    }
    tracing::info!(
        config = %loaded.source,
        data_dir = %loaded.config.data_dir.display(),
        agents = loaded.agents.len(),
        timezone = %loaded.timezone.zone.name(),
        "clawvisor is up"
    );
    let protections = crate::sandbox::protections();
    if protections.complete() {
        tracing::info!(protections = %protections.summary(), "shell sandbox");
    } else {
        let missing = protections.missing_for(crate::policy::Reach::READ_ONLY);
        tracing::warn!(
            protections = %protections.summary(),
            "The shell sandbox is incomplete on this machine: commands run with the protections \
             that remain, and every shell approval prompt says which are missing. Missing: {}. \
             `clawvisor doctor` lists them per profile.",
            if missing.is_empty() { "bash".to_string() } else { missing.join("; ") }
        );
    }
    if let Some(text) = audit_warning {
        events.publish(EventKind::Warning, "audit", &text);
    }
    // A paid model without a price would cost $0 silently: said once, one line per model.
    for unpriced in crate::llm::prices::unpriced_in_use(prices, &loaded.agents) {
        tracing::warn!(provider = %unpriced.provider, model = %unpriced.model, "{}", unpriced.describe());
    }
}

/// Asks each provider once for its model list, in the background (a slow provider must not
/// delay the boot): one line each, and a warning event for Studio when one fails.
fn probe_providers(providers: Arc<Providers>, events: EventBus) {
    tokio::spawn(async move {
        for outcome in providers.probe_all().await {
            if outcome.ok {
                tracing::info!(provider = %outcome.provider, "provider check: {}", outcome.detail);
            } else {
                tracing::warn!(provider = %outcome.provider, "provider check failed: {}", outcome.detail);
                events.publish(
                    EventKind::Warning,
                    &format!("provider:{}", outcome.provider),
                    &format!("provider `{}`: {}", outcome.provider, outcome.detail),
                );
            }
        }
    });
}

/// Runs until `shutdown` resolves (then stops gracefully) or the tree fails.
pub async fn run(
    loaded: LoadedConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let overrides = reload_overrides(&loaded);
    serve(loaded, overrides, shutdown).await
}

/// `clawvisor serve`: runs until `shutdown` resolves or the tree fails; SIGHUP reloads the files
/// (read with `overrides`, the command line's flags, as at boot).
pub async fn serve(
    loaded: LoadedConfig,
    overrides: crate::config::Overrides,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    start_serving(loaded, overrides).await?.wait(shutdown).await
}

/// A daemon started for `clawvisor serve`: the full tree, and a reload on every SIGHUP. The
/// command tells the operator where Studio is between [`start_serving`] and [`Serving::wait`].
pub struct Serving {
    pub daemon: Daemon,
    hangups: Option<tokio::task::JoinHandle<()>>,
}

/// Starts the full tree and the SIGHUP listener; a reload reads the files with `overrides`.
pub async fn start_serving(
    loaded: LoadedConfig,
    overrides: crate::config::Overrides,
) -> Result<Serving, DaemonError> {
    let daemon = start_reloadable(loaded, StartOptions::serve(), overrides).await?;
    let hangups = reload_on_hangup(&daemon.registry);
    Ok(Serving { daemon, hangups })
}

impl Serving {
    /// Runs until `shutdown` resolves (then stops gracefully) or the tree fails.
    pub async fn wait(self, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
        let Serving { daemon, hangups } = self;
        // Once shutdown begins, a SIGHUP must not start a reload into a tree that is stopping.
        let hangups_abort = hangups.as_ref().map(tokio::task::JoinHandle::abort_handle);
        let shutdown = async move {
            shutdown.await;
            if let Some(hangups) = hangups_abort {
                hangups.abort();
            }
        };
        let result = daemon.wait(shutdown).await;
        if let Some(hangups) = hangups {
            hangups.abort();
        }
        result
    }
}

/// Reloads the files on every SIGHUP (`systemctl reload`), one reload after another; the report
/// goes to the log (and, from the reloader, to Studio's events and the audit log).
fn reload_on_hangup(registry: &Registry) -> Option<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => hangup,
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGHUP; reload with `clawvisor reload` instead");
            return None;
        }
    };
    let reloader = crate::protocol::reload::Reloader::new(registry);
    Some(tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            tracing::info!("SIGHUP received: reloading the config and agent files");
            if let Err(error) = reloader.reload("sighup").await {
                tracing::error!(%error, "the reload did not run");
            }
        }
    }))
}

impl Daemon {
    /// The address Studio listens on, once it is bound (waits up to `timeout`).
    pub async fn studio_addr(&self, timeout: Duration) -> Option<SocketAddr> {
        let mut bound = self.studio_bound.clone();
        let result = tokio::time::timeout(timeout, bound.wait_for(Option::is_some)).await;
        match result {
            Ok(Ok(addr)) => *addr,
            _ => None,
        }
    }

    pub fn studio_state(&self) -> crate::studio::StudioState {
        self.studio.clone()
    }

    /// The local access token (`<data_dir>/studio.token`) that Studio accepts as
    /// `Authorization: Bearer`; `None` when Studio does not run.
    pub fn studio_token(&self) -> Option<crate::secrets::Secret> {
        self.studio_token.clone()
    }

    pub fn root(&self) -> &ActorRef<SupervisorMsg> {
        &self.root
    }

    /// Waits for `shutdown`, then stops; or returns the tree's failure.
    pub async fn wait(mut self, shutdown: impl Future<Output = ()>) -> Result<(), DaemonError> {
        tokio::select! {
            _ = shutdown => {
                self.stop().await;
                Ok(())
            }
            _ = &mut self.root_task => {
                self.store.stop_writer();
                Err(DaemonError::RootFailed(
                    "a service exhausted its restart budget (see the log above); exiting so that the service manager restarts the daemon".into(),
                ))
            }
        }
    }

    /// Stops the tree in order, within `[shutdown] timeout` plus a margin.
    pub async fn stop(self) {
        tracing::info!("shutting down");
        self.events.publish(
            EventKind::ShutdownStarted,
            "root",
            "stopping the tree in order",
        );
        let budget = self.config.config.shutdown.timeout.0 + Duration::from_secs(40);
        if self
            .root
            .stop_and_wait(Some("shutdown".into()), Some(budget))
            .await
            .is_err()
        {
            tracing::error!("the tree did not stop within {budget:?}; killing what is left");
            self.root.kill();
        }
        let _ = self.root_task.await;
        // The store actor stopped the writer in its post_stop; this records the clean stop
        // with a short-lived writer if needed.
        let boot_id = self.boot_id;
        let store = self.store.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if store.start_writer().is_ok() {
                let stopped = crate::clock::now_ms();
                let _ = store.write_blocking(move |conn| {
                    crate::store::events::record_stop(conn, boot_id, stopped)
                });
            }
            store.stop_writer();
        })
        .await;
        tracing::info!("stopped cleanly");
    }
}

/// Resolves on SIGINT or SIGTERM. SIGHUP is taken over too (a reload once the daemon is up,
/// see [`serve`]): its default action would end the process, and systemd counts that as a clean
/// exit.
pub fn shutdown_signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Registered now, before the daemon starts, so that a SIGTERM arriving during boot stops it
    // cleanly instead of killing it with the default action. SIGHUP is registered now for the
    // same reason: once tokio handles a signal, its default action never runs again, so a
    // SIGHUP during boot is ignored instead of ending the daemon (the files were just read).
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    if let Err(error) = signal(SignalKind::hangup()) {
        tracing::warn!(%error, "cannot take over SIGHUP; a reload signal would stop the daemon");
    }
    async move {
        match (terminate, interrupt) {
            (Ok(mut terminate), Ok(mut interrupt)) => {
                tokio::select! {
                    _ = interrupt.recv() => tracing::info!("SIGINT received"),
                    _ = terminate.recv() => tracing::info!("SIGTERM received"),
                }
            }
            (Err(error), _) | (_, Err(error)) => {
                tracing::error!(%error, "cannot listen for SIGTERM/SIGINT; only Ctrl-C will stop the daemon");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

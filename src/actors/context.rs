//! What the root's children are built from: the loaded files, the shared handles, the plans of the
//! agents and how this start runs. The root builds its children from it at boot; the reloader
//! keeps its own copy current and builds the changed children's specs from it.

use std::sync::Arc;

use tokio::sync::watch;

use super::agent_supervisor::AgentPlan;
use crate::config::LoadedConfig;
use crate::domain::StartOptions;
use crate::events::EventBus;
use crate::registry::Registry;
use crate::store::Store;

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
    /// The turns for model calls every agent shares (`[sessions] max_model_calls`, one per boot).
    pub model_calls: crate::agent::ModelCalls,
    /// How the files were read (the command line's flags), so that a reload reads them the same way.
    pub overrides: crate::config::Overrides,
    /// Studio's views of the files, replaced by a reload.
    pub views: crate::studio::views::StudioViews,
}

//! The agent loop as plain code, driven by the `Run` actor (src/actors/run.rs).
//!
//! `run::execute` takes one run from its input messages to its final answer: it composes the
//! prompt (`composer`), calls the model through the fallback chain, passes every tool call through
//! the policy gate and the dispatcher (`dispatch`), guards against loops (`loop_guard`), compacts
//! long conversations (`compaction`) and records every step in `runs` / `run_steps`. Beside it:
//! `zone` (the run's time zone), `transcript` (stored events ⇄ messages, tool output wrapped as
//! data), `approval` (waiting for a human decision) and `recall` (the prompt's memory layer).
//!
//! [`AgentRuntime`] is what every run of an agent shares (immutable; a reload builds a new one);
//! [`AgentSettings`] is what changes at run time (the operator's edits, MCP tools coming and
//! going), pushed by the agent actor to its sessions by message.
//!
//! Architecture Invariant: `agent` knows nothing about Telegram or HTTP; it talks to channels only
//! through `channels::deliver` with plain `Outbound` values.

pub mod approval;
pub mod compaction;
pub mod composer;
pub mod dispatch;
pub mod loop_guard;
pub mod recall;
pub mod run;
pub mod transcript;
pub mod workspace_writes;
pub mod zone;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{AgentSpec, Autonomy};
use crate::events::EventBus;
use crate::llm::{ModelRef, Providers};
use crate::registry::Registry;
use crate::store::Store;
use crate::tool::{Tool, ToolSettings};

/// Limits of the loop that are not per-agent settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeLimits {
    pub tool_calls_per_minute: usize,
    pub max_parallel_tools: usize,
    /// Tool output longer than this is truncated (with a note) before the model sees it.
    pub tool_output_max_chars: usize,
    /// A session with nothing to do stops after this long (its state stays in SQLite).
    pub session_idle: Duration,
    /// Transcript events kept in memory and in prompts before older ones are compacted into a recap.
    pub history_events: u32,
    /// Memories put into the prompt for each message (0: no memory layer).
    pub recall_limit: usize,
    /// `[policy] allow_l3_once`: a call the risk check alone blocks is put to the operator.
    pub allow_l3_once: bool,
}

/// The limits of the default configuration.
impl Default for RuntimeLimits {
    fn default() -> Self {
        Self::from(&crate::config::Config::default())
    }
}

/// What every run of one agent shares. Immutable; replaced as a whole when the agent is reloaded.
pub struct AgentRuntime {
    pub spec: AgentSpec,
    pub providers: Arc<Providers>,
    /// What each model call costs (`[pricing]` over the built-in table, free providers).
    pub prices: Arc<crate::llm::prices::Prices>,
    pub tool_settings: Arc<ToolSettings>,
    pub workspace: PathBuf,
    pub store: Store,
    pub registry: Registry,
    pub events: EventBus,
    pub limits: RuntimeLimits,
    /// Every agent's spec, for delegation rules and the read model of memory.
    pub all_agents: Arc<Vec<AgentSpec>>,
    /// Every skill the agent could see, with whether it can use it. Which are enabled is a
    /// runtime setting ([`AgentSettings::skills`]).
    pub skill_catalogue: Arc<Vec<crate::skills::AgentSkill>>,
    /// The daemon's time zone, for runs whose person and agent chose none (`zone`).
    pub daemon_timezone: crate::config::DaemonTimezone,
    /// The turns for model calls that every agent of the daemon shares.
    pub model_calls: ModelCalls,
}

/// The daemon's turns for model calls (`[sessions] max_model_calls`), shared by every agent:
/// a run holds one while it asks the model, so a burst of conversations queues here instead of
/// holding a request, a response and a connection for each at once. A run waiting for a person
/// (an approval) or a tool holds none, so waiting never starves the others.
#[derive(Debug, Clone)]
pub struct ModelCalls(Arc<tokio::sync::Semaphore>);

impl ModelCalls {
    /// `limit` calls at once (at least one).
    pub fn new(limit: u32) -> ModelCalls {
        ModelCalls(Arc::new(tokio::sync::Semaphore::new(limit.max(1) as usize)))
    }

    /// Waits for a turn; the turn ends when the permit is dropped.
    pub async fn turn(&self) -> tokio::sync::OwnedSemaphorePermit {
        self.0
            .clone()
            .acquire_owned()
            .await
            // The semaphore is never closed (nothing calls `close`), so acquiring cannot fail.
            .expect("the model-call semaphore is never closed")
    }
}

impl AgentRuntime {
    pub fn name(&self) -> &str {
        &self.spec.name
    }
}

/// Settings that change at run time (Studio edits, MCP tools coming and going). The agent actor
/// owns them and pushes a fresh copy to its sessions on every change.
#[derive(Clone)]
pub struct AgentSettings {
    pub autonomy: Autonomy,
    pub model: String,
    pub paused: bool,
    pub tools: Arc<Vec<Arc<dyn Tool>>>,
    /// The enabled and available skills (listed in the prompt; loaded by `use_skill`).
    pub skills: Arc<Vec<crate::skills::Skill>>,
}

impl AgentSettings {
    /// The fallback chain: the configured model first, then the agent file's fallbacks.
    pub fn model_chain(&self, spec: &AgentSpec) -> Vec<ModelRef> {
        let mut chain = vec![ModelRef {
            provider: spec.provider.clone(),
            model: self.model.clone(),
        }];
        chain.extend(spec.fallback.iter().map(|fallback| ModelRef {
            provider: fallback.provider.clone(),
            model: fallback.model.clone(),
        }));
        chain
    }

    pub fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.iter().find(|tool| tool.name() == name).cloned()
    }
}

/// The loop's limits from `[policy]` and `[sessions]`.
impl From<&crate::config::Config> for RuntimeLimits {
    fn from(config: &crate::config::Config) -> Self {
        RuntimeLimits {
            tool_calls_per_minute: config.policy.tool_calls_per_minute.max(1) as usize,
            max_parallel_tools: config.policy.max_parallel_tools.max(1) as usize,
            tool_output_max_chars: config.policy.tool_output_max_chars.max(1_000) as usize,
            session_idle: config.sessions.idle_stop.0,
            history_events: config.sessions.history_events.max(10),
            recall_limit: config.memory.recall_limit as usize,
            allow_l3_once: config.policy.allow_l3_once,
        }
    }
}

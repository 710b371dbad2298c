//! The agent service: one actor per agent, registered as `agent:<name>`. Channels hand it what
//! people say; Studio and the CLI read and change its runtime settings. Served by
//! `actors/agent.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::config::Autonomy;
use crate::domain::{ChatKey, Inbound, SessionCommand};
use crate::registry::Registry;
use crate::skills;
use crate::tool::Tool;

/// How long a view or a settings change may take (a stored write at most).
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where an agent is registered.
pub fn name(agent: &str) -> ServiceName<AgentMsg> {
    ServiceName::new(format!("agent:{agent}"))
}

/// The supervisor of every agent.
pub const SUPERVISOR: &str = "agents";

/// What others may ask of an agent.
pub enum AgentMsg {
    Inbound(Inbound),
    Command(ChatKey, SessionCommand),
    /// Something was stored in this chat's transcript for the agent (a handoff's outcome): the
    /// session starts a run for it.
    Wake(ChatKey),
    /// Tools published by a source (an MCP link, the memory service); an empty list withdraws them.
    SetTools(String, Vec<Arc<dyn Tool>>),
    /// The operator pauses or resumes the agent: its runtime state (stored, applied at once).
    /// What the agent is (model, autonomy, skills, ...) is its file, changed by the reloader.
    SetPaused(bool, RpcReplyPort<Result<AgentView, AgentError>>),
    View(RpcReplyPort<AgentView>),
    /// The tools its runs get now (a run that waited for MCP servers takes the fresh set).
    Tools(RpcReplyPort<Arc<Vec<Arc<dyn Tool>>>>),
}

/// What Studio shows about an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentView {
    pub name: String,
    pub description: String,
    pub provider: String,
    pub model: String,
    pub autonomy: Autonomy,
    pub paused: bool,
    pub tools: Vec<String>,
    pub sessions: usize,
    pub has_telegram: bool,
    /// Every skill it could see: enabled or not, usable or why not.
    pub skills: Vec<SkillView>,
}

/// One skill as an agent has it: its catalogue entry (what `clawvisor skills show` prints) and
/// whether this agent has it enabled and can use it.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillView {
    pub name: String,
    pub description: String,
    /// bundled | installed | workspace
    pub level: &'static str,
    pub path: String,
    pub enabled: bool,
    /// Why this agent cannot use it, when it cannot (an invalid skill says so here too).
    pub unavailable: Option<String>,
    /// Why its `SKILL.md` does not load (what to fix), when it does not.
    pub invalid: Option<String>,
    /// Front matter: required tools, MCP servers, the risk hint, the agents it is limited to, and
    /// the variables and programs it needs.
    pub tools: Vec<String>,
    pub mcp: Vec<String>,
    pub risk: Option<String>,
    pub agents: Option<Vec<String>>,
    pub requires: skills::Requires,
    /// Front-matter keys this runtime does not use, as text.
    pub unknown: BTreeMap<String, String>,
    /// Other files of the skill's folder.
    pub files: Vec<String>,
}

/// Why an agent could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Unavailable(#[from] CallError),
    /// No skill of that name in the agent's skills folders.
    #[error("no skill named `{0}` in this agent's skills folders")]
    NoSkill(String),
    /// The change was refused; the text says why (an empty model, an unusable skill, ...).
    #[error("{0}")]
    Refused(String),
}

/// One agent, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Agent {
    registry: Registry,
    name: ServiceName<AgentMsg>,
}

impl Agent {
    pub fn new(registry: &Registry, agent: &str) -> Self {
        Self {
            registry: registry.clone(),
            name: name(agent),
        }
    }

    fn cast(&self, message: AgentMsg) -> Result<(), AgentError> {
        Ok(super::tell(&self.registry, &self.name, message)?)
    }

    /// Hands the agent something a person (or a job, or a contract) said.
    pub fn inbound(&self, inbound: Inbound) -> Result<(), AgentError> {
        self.cast(AgentMsg::Inbound(inbound))
    }

    /// A chat command (`/stop`, `/new`) for one conversation.
    pub fn command(&self, chat: ChatKey, command: SessionCommand) -> Result<(), AgentError> {
        self.cast(AgentMsg::Command(chat, command))
    }

    /// Something was stored in `chat`'s transcript for the agent: its session runs for it.
    pub fn wake(&self, chat: ChatKey) -> Result<(), AgentError> {
        self.cast(AgentMsg::Wake(chat))
    }

    /// Tools published by `source` (an MCP link, the memory service); empty withdraws them.
    pub fn set_tools(&self, source: &str, tools: Vec<Arc<dyn Tool>>) -> Result<(), AgentError> {
        self.cast(AgentMsg::SetTools(source.to_string(), tools))
    }

    pub async fn view(&self) -> Result<AgentView, AgentError> {
        Ok(super::ask(&self.registry, &self.name, Some(TIMEOUT), AgentMsg::View).await?)
    }

    /// The tools the agent's runs get now: its own and every source's (MCP links, ...).
    pub async fn tools(&self) -> Result<Arc<Vec<Arc<dyn Tool>>>, AgentError> {
        Ok(super::ask(&self.registry, &self.name, Some(TIMEOUT), AgentMsg::Tools).await?)
    }

    /// Pauses or resumes the agent (stored, pushed to the sessions; a resumed agent answers
    /// what was kept while it was paused).
    pub async fn set_paused(&self, paused: bool) -> Result<AgentView, AgentError> {
        super::ask(&self.registry, &self.name, Some(TIMEOUT), |reply| {
            AgentMsg::SetPaused(paused, reply)
        })
        .await?
    }
}

//! Agent(name): one per agent definition. Routes inbound messages to its sessions (spawning them on
//! demand), owns the agent's runtime settings (autonomy, model, paused, tools) and pushes every
//! change to its sessions, then announces it as `agent_changed` (settings, skill toggles, tools).
//!
//! Skills: the enabled set is the agent file's `skills` list with the operator's Studio toggles
//! (`agent_skill_toggles`) over it. This actor owns it: a toggle is stored, `use_skill` is
//! rebuilt and the new skill set is pushed to the sessions with the other settings (applied from
//! their next turn, kept across restarts).
//!
//! Invariants:
//! - One session per chat; a session is stopped for idleness only when every message routed to it
//!   has been handled (routed count == handled count), so a stop never drops a message in flight.
//! - At start, sessions with unfinished work in the database (pending messages, open runs) are
//!   started, so nothing waits for a new message to be resumed.
//! - A paused agent never drops what a person said: the message is stored (unclaimed), the chat
//!   is told it is kept, and when the operator resumes the agent it wakes every conversation with
//!   pending messages (`resume_unfinished`, the same path as at boot). Scheduled, handoff and
//!   gateway requests get a run that says the agent is paused.
//!
//! Restart policy: permanent, under the AgentSupervisor. Sessions are transient children.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::json;

use super::session::{Session, SessionArgs, SessionMsg};
use super::supervise::spawn_child;
use super::supervise::{Action, ChildCmd, ChildSpec, Children, Restart, RestartPolicy};
use crate::agent::{AgentRuntime, AgentSettings};
use crate::config::Autonomy;
use crate::domain::ChatKey;
use crate::events::{EventData, EventKind};
use crate::protocol::agent::AgentError;
use crate::protocol::agent::{AgentMsg, AgentView, SkillView};
use crate::registry::ServiceName;
use crate::skills;
use crate::store::runs;
use crate::store::sessions;
use crate::tool::Tool;

/// What makes an agent act: others' requests, its sessions' news, and its supervision timers.
pub enum AgentEvent {
    Request(AgentMsg),
    Child(ChildCmd),
    /// A session has nothing to do; `handled` is how many messages it handled.
    SessionIdle {
        chat: ChatKey,
        handled: u64,
    },
}

wraps_requests!(AgentEvent, AgentMsg);

impl From<ChildCmd> for AgentEvent {
    fn from(cmd: ChildCmd) -> Self {
        AgentEvent::Child(cmd)
    }
}

#[derive(Clone)]
pub struct AgentArgs {
    pub runtime: Arc<AgentRuntime>,
    pub tools: Vec<Arc<dyn Tool>>,
    pub session_policy: RestartPolicy,
    /// The browser child's setup (issue #32), when the agent lists the `browser` tool.
    pub browser: Option<crate::browser::BrowserSetup>,
}

pub struct AgentActor;

pub struct AgentState {
    runtime: Arc<AgentRuntime>,
    settings: AgentSettings,
    base_tools: Vec<Arc<dyn Tool>>,
    extra_tools: BTreeMap<String, Vec<Arc<dyn Tool>>>,
    /// The enabled skill names (the agent file's list with the operator's toggles over it).
    enabled_skills: Vec<String>,
    sessions: Children,
    session_policy: RestartPolicy,
    routed: HashMap<ChatKey, u64>,
    browser: Option<crate::browser::BrowserSetup>,
}

/// A session's child id, also its registered name and its id in the live tree:
/// `session:<agent>:<chat>`.
fn session_child_id(agent: &str, chat: &ChatKey) -> String {
    format!("session:{agent}:{chat}")
}

impl Actor for AgentActor {
    type Msg = AgentEvent;
    type State = AgentState;
    type Arguments = AgentArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: AgentArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let name = args.runtime.spec.name.clone();
        let (overrides, toggles) = args
            .runtime
            .store
            .read(move |conn| {
                Ok((
                    runs::settings(conn, &name)?,
                    crate::store::studio::skill_toggles(conn, &name)?,
                ))
            })
            .await?;
        std::fs::create_dir_all(&args.runtime.workspace).map_err(|error| {
            format!(
                "cannot create the workspace {}: {error}",
                args.runtime.workspace.display()
            )
        })?;
        let spec = &args.runtime.spec;
        let enabled_skills = skills::enabled_names(&spec.skills, &toggles);
        let skill_set = Arc::new(skills::usable(
            &args.runtime.skill_catalogue,
            &enabled_skills,
        ));
        let base_tools = crate::tools::with_skills(&args.tools, spec, &skill_set);
        let settings = AgentSettings {
            autonomy: overrides
                .autonomy
                .as_deref()
                .and_then(Autonomy::parse)
                .unwrap_or(spec.autonomy),
            model: overrides
                .model
                .clone()
                .unwrap_or_else(|| spec.model.clone()),
            paused: overrides.paused,
            tools: Arc::new(base_tools.clone()),
            skills: skill_set,
        };
        let owner = format!("agent:{}", spec.name);
        Ok(AgentState {
            sessions: Children::new(owner, args.runtime.events.clone()),
            runtime: args.runtime,
            settings,
            base_tools,
            extra_tools: BTreeMap::new(),
            enabled_skills,
            session_policy: args.session_policy,
            routed: HashMap::new(),
            browser: args.browser,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(setup) = state.browser.clone() {
            // The browser is a permanent child beside the sessions (`actors/browser.rs`).
            if let Action::Escalate(reason) =
                super::browser::start_child(&myself, &mut state.sessions, setup, &state.runtime)
                    .await
            {
                return Err(reason.into());
            }
        }
        resume_unfinished(&myself, state).await
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AgentEvent::Request(request) => on_request(&myself, state, request).await,
            AgentEvent::Child(cmd) => match state.sessions.handle_cmd(&myself, cmd).await {
                Action::Escalate(reason) => Err(reason.into()),
                Action::Nothing => Ok(()),
            },
            AgentEvent::SessionIdle { chat, handled } => {
                let routed = state.routed.get(&chat).copied().unwrap_or(0);
                if routed == handled {
                    state.routed.remove(&chat);
                    state
                        .sessions
                        .remove_quietly(&session_child_id(&state.runtime.spec.name, &chat))
                        .await;
                }
                Ok(())
            }
        }
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match state.sessions.on_supervision_event(&myself, &event) {
            Action::Escalate(reason) => Err(reason.into()),
            Action::Nothing => Ok(()),
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Sessions stop together: each gives its active run a bounded chance to finish.
        state
            .sessions
            .stop_all_parallel(Duration::from_secs(9))
            .await;
        Ok(())
    }
}

/// A request from outside: a message or command for a conversation, a wake-up, tools or a
/// setting changed, or a question.
async fn on_request(
    myself: &ActorRef<AgentEvent>,
    state: &mut AgentState,
    request: AgentMsg,
) -> Result<(), ActorProcessingErr> {
    match request {
        AgentMsg::Inbound(inbound) => {
            let chat = inbound.chat.clone();
            let Some(session) = session_for(myself, state, &chat).await? else {
                return Ok(());
            };
            *state.routed.entry(chat).or_default() += 1;
            session.cast(SessionMsg::Inbound(inbound))?;
        }
        AgentMsg::Command(chat, command) => {
            if let Some(session) = session_for(myself, state, &chat).await? {
                session.cast(SessionMsg::Command(command))?;
            }
        }
        AgentMsg::Wake(chat) => {
            if let Some(session) = session_for(myself, state, &chat).await? {
                session.cast(SessionMsg::Wake)?;
            }
        }
        AgentMsg::SetTools(source, tools) => set_tools(state, source, tools),
        AgentMsg::SetPaused(paused, reply) => {
            let was_paused = state.settings.paused;
            let result = set_paused(state, paused).await;
            if result.is_ok() {
                push_settings(state);
                announce_settings(state);
            }
            let _ = reply.send(result.map(|()| view(state)).map_err(AgentError::Refused));
            if was_paused && !state.settings.paused {
                // Conversations whose session stopped while paused get theirs back too.
                resume_unfinished(myself, state).await?;
            }
        }
        AgentMsg::View(reply) => {
            let _ = reply.send(view(state));
        }
        AgentMsg::Tools(reply) => {
            let _ = reply.send(state.settings.tools.clone());
        }
    }
    Ok(())
}

/// The session of `chat`, started if needed (`None`: it could not start and will be retried).
async fn session_for(
    myself: &ActorRef<AgentEvent>,
    state: &mut AgentState,
    chat: &ChatKey,
) -> Result<Option<ActorRef<SessionMsg>>, ActorProcessingErr> {
    if let Action::Escalate(reason) = ensure_session(myself, state, chat).await {
        return Err(reason.into());
    }
    Ok(session_ref(state, chat))
}

/// Tools published by a source (an MCP link, the memory service); an empty list withdraws them.
fn set_tools(state: &mut AgentState, source: String, tools: Vec<Arc<dyn Tool>>) {
    let before = tool_names(state);
    if tools.is_empty() {
        state.extra_tools.remove(&source);
    } else {
        state.extra_tools.insert(source.clone(), tools);
    }
    rebuild_tools(state);
    push_settings(state);
    if tool_names(state) != before {
        announce(state, &format!("tools from {source} changed"), |agent| {
            EventData::AgentToolsChanged { agent, source }
        });
    }
}

/// Announces the runtime settings after a change (`agent_changed`).
fn announce_settings(state: &AgentState) {
    let settings = &state.settings;
    announce(
        state,
        &format!(
            "settings: autonomy {}, model {}, {}",
            settings.autonomy.as_str(),
            settings.model,
            if settings.paused { "paused" } else { "running" }
        ),
        |agent| EventData::AgentSettingsChanged {
            agent,
            autonomy: settings.autonomy.as_str().to_string(),
            model: settings.model.clone(),
            paused: settings.paused,
        },
    );
}

/// Makes sure the session of `chat` runs (spawning it if needed).
async fn ensure_session(
    myself: &ActorRef<AgentEvent>,
    state: &mut AgentState,
    chat: &ChatKey,
) -> Action {
    let id = session_child_id(&state.runtime.spec.name, chat);
    if !state.sessions.contains(&id) {
        let runtime = state.runtime.clone();
        let registry = runtime.registry.clone();
        let local_name = ServiceName::<SessionMsg>::new(id.clone());
        let args = SessionArgs {
            runtime,
            settings: state.settings.clone(),
            chat: chat.clone(),
            agent: myself.clone(),
        };
        let spec = ChildSpec::new(
            id.clone(),
            state.session_policy.clone(),
            move |supervisor| {
                let registry = registry.clone();
                let local_name = local_name.clone();
                let args = args.clone();
                async move { spawn_child(&registry, &local_name, Session, args, supervisor).await }
            },
        )
        .restart(Restart::Transient)
        .shutdown(Duration::from_secs(9));
        state.sessions.insert(spec);
    }
    if state
        .sessions
        .cell(&id)
        .is_some_and(|cell| cell.get_status() != ractor::ActorStatus::Stopped)
    {
        return Action::Nothing;
    }
    state.sessions.start(myself, &id).await
}

fn session_ref(state: &AgentState, chat: &ChatKey) -> Option<ActorRef<SessionMsg>> {
    state
        .sessions
        .cell(&session_child_id(&state.runtime.spec.name, chat))
        .map(|cell| ActorRef::from(cell.clone()))
}

/// The tools sessions see: the agent's own, then each source's (MCP links, the scheduler).
fn rebuild_tools(state: &mut AgentState) {
    let mut all = state.base_tools.clone();
    for tools in state.extra_tools.values() {
        all.extend(tools.iter().cloned());
    }
    state.settings.tools = Arc::new(all);
}

/// Starts (or wakes) the session of every conversation with unfinished work in the database:
/// pending messages or open runs. At start, and when the agent is resumed after a pause.
async fn resume_unfinished(
    myself: &ActorRef<AgentEvent>,
    state: &mut AgentState,
) -> Result<(), ActorProcessingErr> {
    let agent = state.runtime.spec.name.clone();
    let pending = state
        .runtime
        .store
        .read(sessions::with_pending_work)
        .await?
        .into_iter()
        .filter(|(owner, _)| *owner == agent)
        .filter_map(|(_, chat)| ChatKey::parse(&chat))
        .collect::<Vec<_>>();
    if !pending.is_empty() {
        tracing::info!(agent = %state.runtime.spec.name, sessions = pending.len(), "resuming sessions with unfinished work");
    }
    for chat in pending {
        if let Action::Escalate(reason) = ensure_session(myself, state, &chat).await {
            return Err(reason.into());
        }
        if let Some(session) = session_ref(state, &chat) {
            session.cast(SessionMsg::Wake)?;
        }
    }
    Ok(())
}

fn tool_names(state: &AgentState) -> Vec<String> {
    state
        .settings
        .tools
        .iter()
        .map(|tool| tool.name().to_string())
        .collect()
}

/// `agent_changed` once a change is stored and applied (Studio's Agents, Skills and Chat pages);
/// `data` builds the payload from the agent's name.
fn announce(state: &AgentState, detail: &str, data: impl FnOnce(String) -> EventData) {
    let agent = &state.runtime.spec.name;
    state.runtime.events.publish_data(
        EventKind::AgentChanged,
        &format!("agent:{agent}"),
        detail,
        data(agent.clone()),
    );
}

fn push_settings(state: &AgentState) {
    for id in state.sessions.ids() {
        if let Some(cell) = state.sessions.cell(&id) {
            let session: ActorRef<SessionMsg> = ActorRef::from(cell.clone());
            let _ = session.cast(SessionMsg::Settings(state.settings.clone()));
        }
    }
}

/// Stores the paused state (the row keeps any override a migration could not move into the
/// file), audited as the operator's.
async fn set_paused(state: &mut AgentState, paused: bool) -> Result<(), String> {
    let name = state.runtime.spec.name.clone();
    let now = crate::clock::now_ms();
    let details = json!({"paused": {"from": state.settings.paused, "to": paused}});
    let subject = format!("agent:{name}");
    let audited_subject = subject.clone();
    state
        .runtime
        .store
        .write(move |conn| {
            let mut row = runs::settings(conn, &name)?;
            row.paused = paused;
            runs::save_settings(conn, &name, &row, now)?;
            crate::audit::append(
                conn,
                "operator",
                "agent.settings_changed",
                &audited_subject,
                &details,
            )?;
            Ok(())
        })
        .await
        .map_err(|error| error.to_string())?;
    crate::audit::announce(&state.runtime.events, "agent.settings_changed", &subject);
    state.settings.paused = paused;
    Ok(())
}

fn view(state: &AgentState) -> AgentView {
    let spec = &state.runtime.spec;
    AgentView {
        name: spec.name.clone(),
        description: spec.description.clone(),
        provider: spec.provider.clone(),
        model: state.settings.model.clone(),
        autonomy: state.settings.autonomy,
        paused: state.settings.paused,
        tools: tool_names(state),
        sessions: state.sessions.ids().len(),
        has_telegram: spec.telegram.is_some(),
        skills: state
            .runtime
            .skill_catalogue
            .iter()
            .map(|skill| skill_view(skill, &state.enabled_skills))
            .collect(),
    }
}

fn skill_view(skill: &skills::AgentSkill, enabled: &[String]) -> SkillView {
    let parsed = skill.entry.skill.as_ref().ok();
    SkillView {
        name: skill.entry.name.clone(),
        description: skill.description().to_string(),
        level: skill.entry.level.as_str(),
        path: skill.entry.dir.display().to_string(),
        enabled: enabled.contains(&skill.entry.name),
        unavailable: skill.available.as_ref().err().cloned(),
        invalid: skill.entry.skill.as_ref().err().cloned(),
        tools: parsed.map(|s| s.tools.clone()).unwrap_or_default(),
        mcp: parsed.map(|s| s.mcp.clone()).unwrap_or_default(),
        risk: parsed.and_then(|s| s.risk.clone()),
        agents: parsed.and_then(|s| s.agents.clone()),
        requires: parsed.map(|s| s.requires.clone()).unwrap_or_default(),
        unknown: parsed.map(|s| s.unknown.clone()).unwrap_or_default(),
        files: parsed.map(|s| s.files.clone()).unwrap_or_default(),
    }
}

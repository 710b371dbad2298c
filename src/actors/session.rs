//! Session(agent, chat): one conversation. Owns its transcript (in SQLite) and starts one run at a
//! time.
//!
//! Message path: an inbound message is appended to `session_events` (deduplicated by its stored
//! update id) before anything else; if no run is active, a run is created that claims every pending
//! user message (messages arriving during a run wait and are merged into the next run). Stateless
//! gateway requests (with their own context) run one by one, unmerged. `/stop` cancels the active
//! run; `/new` archives the session and opens a fresh one.
//!
//! Recovery (`post_start`): open runs of this session are resumed from their last recorded step,
//! then pending messages get a run. A session with nothing to do asks its agent to stop it after
//! `[sessions] idle_stop` (10 min by default; any message cancels the timer); the agent only does
//! so when no message is in flight (a counter of routed vs. handled messages), so stopping never
//! loses one.
//!
//! Restart policy: transient (restarted by its Agent when it fails; state comes back from SQLite).
//! Its Run children are temporary: a failed run is recorded and reported, never retried blindly.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::agent::AgentEvent;
use super::run::{RunActor, RunArgs, RunMsg};
use crate::agent::run::{RunReport, RunRequest, Trigger};
use crate::agent::{AgentRuntime, AgentSettings};
use crate::domain::{
    ChatKey, ChatKind, Inbound, InboundSource, OutEvent, Outbound, SessionCommand,
};
use crate::events::{EventData, EventKind};
use crate::llm::ChatMessage;
use crate::policy::rate_limit::RateLimiter;
use crate::store::outbox;
use crate::store::runs::{self, RunStatus};
use crate::store::sessions::{self, EventKindRow, NewEvent};

pub enum SessionMsg {
    Inbound(Inbound),
    Command(SessionCommand),
    Settings(AgentSettings),
    RunFinished(RunReport),
    IdleCheck,
    /// Pending messages were stored by someone else (a handoff's outcome): run for them.
    Wake,
}

#[derive(Clone)]
pub struct SessionArgs {
    pub runtime: Arc<AgentRuntime>,
    pub settings: AgentSettings,
    pub chat: ChatKey,
    pub agent: ActorRef<AgentEvent>,
}

pub struct Session;

struct ActiveRun {
    run_id: i64,
    cancel: CancellationToken,
    actor: ActorRef<RunMsg>,
}

pub struct SessionState {
    runtime: Arc<AgentRuntime>,
    settings: AgentSettings,
    chat: ChatKey,
    agent: ActorRef<AgentEvent>,
    session_id: i64,
    active: Option<ActiveRun>,
    /// Lent to the active run and handed back with its report.
    limiter: Option<RateLimiter>,
    /// Inbound messages handled, compared with the agent's count before an idle stop.
    handled: u64,
    /// Stored user messages no run has taken yet (a run claims them all when it starts).
    has_pending: bool,
    /// The correlation of the newest message, given to the run that answers it.
    correlation: Option<String>,
    stateless: VecDeque<Inbound>,
    resume: VecDeque<i64>,
    idle_timer: Option<tokio::task::JoinHandle<Result<(), ractor::MessagingErr<SessionMsg>>>>,
}

impl Actor for Session {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: SessionArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (agent, chat) = (
            args.runtime.spec.name.clone(),
            args.chat.as_str().to_string(),
        );
        let now = crate::clock::now_ms();
        let session = args
            .runtime
            .store
            .write(move |conn| sessions::active_or_create(conn, &agent, &chat, now))
            .await?;
        let limiter = RateLimiter::new(
            args.runtime.limits.tool_calls_per_minute,
            Duration::from_secs(60),
        );
        Ok(SessionState {
            runtime: args.runtime,
            settings: args.settings,
            chat: args.chat,
            agent: args.agent,
            session_id: session.id,
            active: None,
            limiter: Some(limiter),
            handled: 0,
            has_pending: false,
            correlation: None,
            stateless: VecDeque::new(),
            resume: VecDeque::new(),
            idle_timer: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let session_id = state.session_id;
        let (open, pending) = state
            .runtime
            .store
            .read(move |conn| {
                Ok((
                    runs::open_runs(conn, session_id)?,
                    sessions::pending_user_events(conn, session_id)?,
                ))
            })
            .await?;
        for run in open {
            if run.correlation.is_some() && state.correlation.is_none() {
                state.correlation = run.correlation.clone();
            }
            state.resume.push_back(run.id);
        }
        state.has_pending = !pending.is_empty();
        advance(&myself, state).await
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SessionMsg::Inbound(inbound) => {
                on_inbound(state, inbound).await?;
                advance(&myself, state).await?;
            }
            SessionMsg::Wake => {
                cancel_idle(state);
                state.has_pending = true;
                advance(&myself, state).await?;
            }
            SessionMsg::Command(SessionCommand::Stop) => {
                let text = match &state.active {
                    Some(active) => {
                        active.cancel.cancel();
                        None
                    }
                    None => Some("Nothing is running right now."),
                };
                if let Some(text) = text {
                    notice(state, text);
                }
            }
            SessionMsg::Command(SessionCommand::New) => start_new_conversation(state).await?,
            SessionMsg::Settings(settings) => {
                let resumed = state.settings.paused && !settings.paused;
                state.settings = settings;
                if resumed {
                    // What was kept while paused is answered now.
                    cancel_idle(state);
                    state.has_pending = true;
                    advance(&myself, state).await?;
                }
            }
            SessionMsg::RunFinished(report) => {
                if state
                    .active
                    .as_ref()
                    .is_some_and(|active| active.run_id == report.run_id)
                {
                    state.active = None;
                    state.limiter = Some(report.limiter);
                }
                advance(&myself, state).await?;
            }
            SessionMsg::IdleCheck => {
                state.idle_timer = None;
                if is_idle(state) {
                    let _ = state.agent.cast(AgentEvent::SessionIdle {
                        chat: state.chat.clone(),
                        handled: state.handled,
                    });
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Runs are temporary children: a failure is recorded and reported, never restarted.
        if let SupervisionEvent::ActorFailed(cell, error) = event {
            let Some(active) = state
                .active
                .take_if(|active| active.actor.get_id() == cell.get_id())
            else {
                return Ok(());
            };
            let error = crate::secrets::redact(&error.to_string()).into_owned();
            tracing::error!(run_id = active.run_id, %error, "a run crashed");
            let text = crate::store::telegram::CRASHED_RUN_NOTICE;
            let outbox_id = record_crash(state, active.run_id, error, text).await;
            state.limiter = Some(RateLimiter::new(
                state.runtime.limits.tool_calls_per_minute,
                Duration::from_secs(60),
            ));
            deliver(
                state,
                Some(active.run_id),
                OutEvent::Final {
                    text: text.into(),
                    outbox_id,
                },
            );
            advance(&myself, state).await?;
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        cancel_idle(state);
        // Give an active run a bounded chance to finish; if it does not, it stays open in the
        // database and is resumed at the next start.
        if let Some(active) = state.active.take() {
            let _ = active.actor.wait(Some(Duration::from_secs(8))).await;
        }
        Ok(())
    }
}

/// Records a crashed run as failed, with the notice the person gets, in one transaction; in a
/// Telegram chat the notice is an outbox row that answers the run's messages, so they are marked
/// processed once it is delivered (or re-sent after a crash) instead of staying `dispatched`
/// forever. The outbox id, or `None` when the chat has no outbox or the record failed (the run
/// then stays open in the database and is resumed at the next start).
async fn record_crash(
    state: &SessionState,
    run_id: i64,
    error: String,
    text: &'static str,
) -> Option<i64> {
    let session_id = state.session_id;
    let agent = state.runtime.spec.name.clone();
    let chat = state.chat.as_str().to_string();
    let needs_outbox = state.chat.kind().has_outbox();
    let now = crate::clock::now_ms();
    let written = state
        .runtime
        .store
        .write(move |conn| {
            // A run that crashed after recording its end already has its outbox row.
            let was_open = runs::get(conn, run_id)?.is_some_and(|run| run.status.is_open());
            runs::add_step(
                conn,
                run_id,
                &runs::NewStep {
                    kind: "error",
                    name: Some("crash".into()),
                    detail: json!({"error": error}),
                    ..Default::default()
                },
                now,
            )?;
            sessions::append(
                conn,
                session_id,
                &NewEvent {
                    kind: EventKindRow::Notice,
                    sender: None,
                    content: text,
                    data: None,
                    run_id: Some(run_id),
                    inbound_id: None,
                },
                now,
            )?;
            runs::finish(conn, run_id, RunStatus::Failed, text, now)?;
            if !needs_outbox || !was_open {
                return Ok(None);
            }
            let inbound_ids: Vec<i64> = sessions::run_events(conn, run_id)?
                .iter()
                .filter_map(|event| event.inbound_id)
                .collect();
            outbox::enqueue_reply(conn, &agent, &chat, Some(run_id), text, &inbound_ids, now)
                .map(Some)
        })
        .await;
    written.unwrap_or_else(|error| {
        tracing::error!(run_id, %error, "could not record a crashed run");
        None
    })
}

/// While its agent is paused, a conversation with a person keeps its messages (stored, unclaimed)
/// and interrupted runs for later instead of answering "paused" and dropping them; the agent
/// wakes it when resumed. Scheduled, handoff and stateless requests still get a run that says
/// the agent is paused (their callers wait for an outcome).
fn holds_for_pause(state: &SessionState) -> bool {
    state.settings.paused
        && (state.chat.kind().has_outbox() || state.chat.kind() == ChatKind::Local)
}

fn is_idle(state: &SessionState) -> bool {
    state.active.is_none()
        && !state.has_pending
        && state.stateless.is_empty()
        && state.resume.is_empty()
}

fn cancel_idle(state: &mut SessionState) {
    if let Some(timer) = state.idle_timer.take() {
        timer.abort();
    }
}

async fn store_inbound(
    state: &mut SessionState,
    inbound: &Inbound,
) -> Result<(), ActorProcessingErr> {
    let inbound_id = match inbound.source {
        InboundSource::Telegram { inbound_id } => Some(inbound_id),
        // A seam channel's message: negated, so that it never collides with a Telegram update.
        InboundSource::Channel { inbound_id } => Some(-inbound_id),
        _ => None,
    };
    let (session_id, text, sender) = (
        state.session_id,
        inbound.text.clone(),
        inbound.sender.name.clone(),
    );
    let attachments: Vec<serde_json::Value> = inbound
        .attachments
        .iter()
        .map(|a| {
            json!({"path": a.path.display().to_string(), "mime": a.mime,
                   "kind": a.kind.as_str(), "bytes": a.bytes})
        })
        .collect();
    let data = (!attachments.is_empty()).then(|| json!({"attachments": attachments}).to_string());
    let now = crate::clock::now_ms();
    // Recoverable: a Telegram update stays durable (stored before it was confirmed) and is
    // dispatched again if a power cut loses its copy here; the run's answer is a durable write.
    let stored = state
        .runtime
        .store
        .write_recoverable(move |conn| {
            sessions::append(
                conn,
                session_id,
                &NewEvent {
                    kind: EventKindRow::User,
                    sender: Some(&sender),
                    content: &text,
                    data: data.as_deref(),
                    run_id: None,
                    inbound_id,
                },
                now,
            )
        })
        .await?;
    if stored.is_some() {
        state.has_pending = true;
        if inbound.correlation.is_some() {
            state.correlation = inbound.correlation.clone();
        }
        state.runtime.events.publish_data(
            EventKind::MessageIn,
            state.chat.as_str(),
            &inbound.text.chars().take(200).collect::<String>(),
            EventData::MessageIn {
                agent: state.runtime.spec.name.clone(),
                chat: state.chat.as_str().to_string(),
                sender: inbound.sender.name.clone(),
            },
        );
    }
    Ok(())
}

/// A message for this conversation: kept in memory when it carries its own context (the
/// gateway's stateless requests), stored in the transcript otherwise; while the agent is paused
/// the person is told that it is kept.
async fn on_inbound(state: &mut SessionState, inbound: Inbound) -> Result<(), ActorProcessingErr> {
    state.handled += 1;
    cancel_idle(state);
    if inbound.context.is_some() {
        state.stateless.push_back(inbound);
        return Ok(());
    }
    store_inbound(state, &inbound).await?;
    if holds_for_pause(state) {
        // The turn's answer for now (no run, nothing claimed); the real one follows when the
        // agent is resumed.
        deliver(
            state,
            None,
            OutEvent::Final {
                text: format!(
                    "{} is paused by the operator; your message is kept and will be answered when it resumes.",
                    state.runtime.spec.name
                ),
                outbox_id: None,
            },
        );
    }
    Ok(())
}

/// `/new`: the active run is cancelled, the conversation archived and a fresh one started.
async fn start_new_conversation(state: &mut SessionState) -> Result<(), ActorProcessingErr> {
    if let Some(active) = &state.active {
        active.cancel.cancel();
    }
    let (old, agent, chat) = (
        state.session_id,
        state.runtime.spec.name.clone(),
        state.chat.as_str().to_string(),
    );
    let now = crate::clock::now_ms();
    let fresh = state
        .runtime
        .store
        .write(move |conn| {
            sessions::archive(conn, old, now)?;
            sessions::active_or_create(conn, &agent, &chat, now)
        })
        .await?;
    state.session_id = fresh.id;
    state.has_pending = false;
    notice(
        state,
        "Started a new conversation. Earlier messages are kept in the history but no longer in context.",
    );
    Ok(())
}

/// Starts the next run if none is active: a resumed run first, then queued stateless requests,
/// then the pending messages. With nothing to do, arms the idle timer.
async fn advance(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
) -> Result<(), ActorProcessingErr> {
    if state.active.is_some() {
        return Ok(());
    }
    let paused = holds_for_pause(state);
    if paused {
        // The messages stay pending in the database; the agent wakes this chat when resumed.
        state.has_pending = false;
    }
    if !paused && let Some(run_id) = state.resume.pop_front() {
        return start_run(myself, state, run_id, None, true).await;
    }
    if let Some(inbound) = state.stateless.pop_front() {
        let (run_id, context) = create_stateless_run(state, inbound).await?;
        return start_run(myself, state, run_id, Some(context), false).await;
    }
    if state.has_pending {
        let created = claim_pending(state).await?;
        state.has_pending = false;
        if let Some(run_id) = created {
            return start_run(myself, state, run_id, None, false).await;
        }
    }
    if is_idle(state) && state.idle_timer.is_none() {
        state.idle_timer =
            Some(myself.send_after(state.runtime.limits.session_idle, || SessionMsg::IdleCheck));
    }
    Ok(())
}

/// A run for a stateless request (its conversation came with it): the run and the request's
/// user message are stored; the context is the request's messages and its text.
async fn create_stateless_run(
    state: &mut SessionState,
    inbound: Inbound,
) -> Result<(i64, Vec<ChatMessage>), ActorProcessingErr> {
    let context: Vec<ChatMessage> = inbound
        .context
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(role, text)| match role.as_str() {
            "assistant" => ChatMessage::assistant(text),
            "system" => ChatMessage::system(text),
            _ => ChatMessage::user(text),
        })
        .chain(std::iter::once(ChatMessage::user(inbound.text.clone())))
        .collect();
    let (session_id, agent, chat, text, sender) = (
        state.session_id,
        state.runtime.spec.name.clone(),
        state.chat.as_str().to_string(),
        inbound.text.clone(),
        inbound.sender.name.clone(),
    );
    let correlation = inbound.correlation.clone();
    let stored_correlation = correlation.clone();
    let trigger = trigger_of(&state.chat);
    let now = crate::clock::now_ms();
    let run_id = state
        .runtime
        .store
        .write(move |conn| {
            let run_id = runs::create(
                conn,
                session_id,
                &agent,
                &chat,
                trigger.as_str(),
                stored_correlation.as_deref(),
                now,
            )?;
            sessions::append(
                conn,
                session_id,
                &NewEvent {
                    kind: EventKindRow::User,
                    sender: Some(&sender),
                    content: &text,
                    data: None,
                    run_id: Some(run_id),
                    inbound_id: None,
                },
                now,
            )?;
            Ok(run_id)
        })
        .await?;
    state.correlation = correlation;
    Ok((run_id, context))
}

/// A run that claims every pending user message of the conversation, in one transaction;
/// `None` when nothing is pending.
async fn claim_pending(state: &SessionState) -> Result<Option<i64>, ActorProcessingErr> {
    let (session_id, agent, chat) = (
        state.session_id,
        state.runtime.spec.name.clone(),
        state.chat.as_str().to_string(),
    );
    let correlation = state.correlation.clone();
    let trigger = trigger_of(&state.chat);
    let now = crate::clock::now_ms();
    // Recoverable: a claim a power cut loses leaves the messages pending, claimed again.
    let created = state
        .runtime
        .store
        .write_recoverable(move |conn| {
            let pending = sessions::pending_user_events(conn, session_id)?;
            if pending.is_empty() {
                return Ok(None);
            }
            let run_id = runs::create(
                conn,
                session_id,
                &agent,
                &chat,
                trigger.as_str(),
                correlation.as_deref(),
                now,
            )?;
            let ids: Vec<i64> = pending.iter().map(|event| event.id).collect();
            sessions::claim_events(conn, &ids, run_id)?;
            let updates: Vec<i64> = pending
                .iter()
                .filter_map(|event| event.inbound_id)
                .collect();
            Ok(Some((run_id, updates)))
        })
        .await?;
    Ok(created.map(|(run_id, updates)| {
        crate::reply_latency::run_started(run_id, &updates);
        run_id
    }))
}

fn trigger_of(chat: &ChatKey) -> Trigger {
    match chat.kind() {
        ChatKind::Schedule => Trigger::Schedule,
        ChatKind::Handoff => Trigger::Handoff,
        ChatKind::Trigger => Trigger::Webhook,
        _ => Trigger::Message,
    }
}

async fn start_run(
    myself: &ActorRef<SessionMsg>,
    state: &mut SessionState,
    run_id: i64,
    context: Option<Vec<ChatMessage>>,
    resume: bool,
) -> Result<(), ActorProcessingErr> {
    let cancel = CancellationToken::new();
    let limiter = state.limiter.take().unwrap_or_else(|| {
        RateLimiter::new(
            state.runtime.limits.tool_calls_per_minute,
            Duration::from_secs(60),
        )
    });
    let request = RunRequest {
        run_id,
        session_id: state.session_id,
        chat: state.chat.clone(),
        runtime: state.runtime.clone(),
        settings: state.settings.clone(),
        cancel: cancel.clone(),
        limiter,
        correlation: state.correlation.take(),
        context,
        resume,
    };
    let args = RunArgs {
        request,
        session: myself.clone(),
    };
    let (actor, _) = Actor::spawn_linked(None, RunActor, args, myself.get_cell()).await?;
    state.active = Some(ActiveRun {
        run_id,
        cancel,
        actor,
    });
    Ok(())
}

fn deliver(state: &SessionState, run_id: Option<i64>, event: OutEvent) {
    crate::channels::deliver(
        &state.runtime.registry,
        Outbound {
            agent: state.runtime.spec.name.clone(),
            chat: state.chat.clone(),
            run_id,
            correlation: None,
            event,
        },
    );
}

fn notice(state: &SessionState, text: &str) {
    deliver(
        state,
        None,
        OutEvent::Notice {
            text: text.to_string(),
        },
    );
}

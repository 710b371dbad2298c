//! Browser(agent): one per agent that lists the `browser` tool, a permanent child of its Agent.
//! It owns at most one headless Chromium (`crate::browser::BrowserSession`): started on the first
//! action, closed after `[browser] idle_timeout` without one (so the idle daemon's memory comes
//! back), and dropped when it exits unexpectedly — the action in flight gets a clear error at
//! once (its DevTools pipe closed) and the next action starts a fresh Chromium with the same
//! profile. Actions run one at a time, each bounded (`session`'s timeouts).
//!
//! Background job: the idle timer (one `send_after` per action; a stale one is ignored) and a
//! watcher per Chromium that tells the actor when its pipe closes (cancelled with the session).

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::browser::{BrowserError, BrowserSession, BrowserSetup};
use crate::events::{EventBus, EventKind};
use crate::protocol::browser::{BrowserMsg, BrowserStatus};

/// What the browser actor handles: others' requests and its own timers and watcher.
pub enum BrowserEvent {
    Request(BrowserMsg),
    /// The idle timer set after action `action` fired.
    IdleCheck {
        action: u64,
    },
    /// Chromium number `start` closed its pipe.
    Closed {
        start: u64,
    },
    /// An action's task ended: the session comes back with its result.
    Finished(Box<Finished>),
}

/// What an action's task hands back.
pub struct Finished {
    session: BrowserSession,
    action: &'static str,
    result: Result<crate::browser::Outcome, BrowserError>,
    reply: Reply,
}

type Reply = ractor::RpcReplyPort<Result<crate::browser::Outcome, BrowserError>>;

wraps_requests!(BrowserEvent, BrowserMsg);

#[derive(Clone)]
pub struct BrowserArgs {
    pub setup: BrowserSetup,
    pub events: EventBus,
    pub store: crate::store::Store,
    /// The agent's workspace: downloads are moved into its `inbox/`.
    pub workspace: std::path::PathBuf,
}

pub struct BrowserActor;

pub struct BrowserState {
    args: BrowserArgs,
    /// The running Chromium, unless an action's task holds it (`busy`) or none runs.
    session: Option<BrowserSession>,
    /// The pid of the Chromium an action's task holds, while it runs.
    busy: Option<Option<u32>>,
    /// Actions waiting for the one running.
    queue: std::collections::VecDeque<(crate::browser::Action, Reply)>,
    /// The idle timer of the newest action.
    idle_timer: Option<tokio::task::JoinHandle<Result<(), ractor::MessagingErr<BrowserEvent>>>>,
    status: BrowserStatus,
}

impl Actor for BrowserActor {
    type Msg = BrowserEvent;
    type State = BrowserState;
    type Arguments = BrowserArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: BrowserArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(BrowserState {
            args,
            session: None,
            busy: None,
            queue: std::collections::VecDeque::new(),
            idle_timer: None,
            status: BrowserStatus::default(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BrowserEvent::Request(BrowserMsg::Act(action, reply)) => {
                if state.busy.is_some() {
                    state.queue.push_back((action, reply));
                } else {
                    begin(&myself, state, action, reply).await;
                }
            }
            BrowserEvent::Finished(finished) => {
                end(state, *finished).await;
                while state.busy.is_none()
                    && let Some((action, reply)) = state.queue.pop_front()
                {
                    begin(&myself, state, action, reply).await;
                }
            }
            BrowserEvent::Request(BrowserMsg::Screenshot(reply)) => {
                let shot = match state.session.as_mut() {
                    Some(session) if !session.is_closed() => session.screenshot().await.ok(),
                    _ => None,
                };
                let _ = reply.send(shot);
            }
            BrowserEvent::Request(BrowserMsg::Status(reply)) => {
                let _ = reply.send(current_status(state));
            }
            BrowserEvent::IdleCheck { action } => {
                if action == state.status.actions && state.busy.is_none() && state.session.is_some()
                {
                    close(state, "idle").await;
                }
            }
            BrowserEvent::Closed { start } => {
                // While an action runs, its own end notices the crash.
                if start == state.status.starts && state.busy.is_none() && state.session.is_some() {
                    crashed(state);
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.idle_timer.take() {
            timer.abort();
        }
        if let Some(session) = state.session.take() {
            session.stop().await;
        }
        Ok(())
    }
}

fn current_status(state: &BrowserState) -> BrowserStatus {
    let mut status = state.status.clone();
    if let Some(pid) = state.busy {
        status.open = true;
        status.pid = pid;
        return status;
    }
    match &state.session {
        Some(session) if !session.is_closed() => {
            status.open = true;
            status.pid = session.pid();
            status.confined = session.confined().to_string();
        }
        _ => {
            status.open = false;
            status.pid = None;
        }
    }
    status
}

/// Starts one action: Chromium first when needed, then the action in a task of its own (the
/// actor keeps answering status and queueing meanwhile); its end comes back as `Finished`.
async fn begin(
    myself: &ActorRef<BrowserEvent>,
    state: &mut BrowserState,
    action: crate::browser::Action,
    reply: Reply,
) {
    if state
        .session
        .as_ref()
        .is_some_and(BrowserSession::is_closed)
    {
        crashed(state);
    }
    if state.session.is_none()
        && let Err(error) = start(myself, state).await
    {
        let _ = reply.send(Err(error));
        return;
    }
    let Some(mut session) = state.session.take() else {
        let _ = reply.send(Err(BrowserError::Crashed));
        return;
    };
    state.status.actions += 1;
    let action_number = state.status.actions;
    let timer = myself.send_after(state.args.setup.idle_timeout, move || {
        BrowserEvent::IdleCheck {
            action: action_number,
        }
    });
    // Only the newest action's timer matters: the one before is cancelled.
    if let Some(previous) = state.idle_timer.replace(timer) {
        previous.abort();
    }
    state.busy = Some(session.pid());
    let me = myself.clone();
    let name = action.name();
    tokio::spawn(async move {
        let result = session.act(action).await;
        let finished = Finished {
            session,
            action: name,
            result,
            reply,
        };
        // When the actor is gone, the session is dropped here and Chromium killed with it.
        let _ = me.cast(BrowserEvent::Finished(Box::new(finished)));
    });
}

/// An action's end: the session back (or dropped after a crash), downloads and audit, the reply.
async fn end(state: &mut BrowserState, finished: Finished) {
    let Finished {
        session,
        action,
        result,
        reply,
    } = finished;
    state.busy = None;
    state.session = Some(session);
    if result.is_err() {
        state.status.failures += 1;
    }
    if matches!(result, Err(BrowserError::Crashed))
        || state
            .session
            .as_ref()
            .is_some_and(BrowserSession::is_closed)
    {
        crashed(state);
    }
    let result = match result {
        Ok(mut outcome) => {
            record(state, action, &mut outcome).await;
            Ok(outcome)
        }
        Err(error) => Err(error),
    };
    let _ = reply.send(result);
}

/// Actions with an effect, audited as `browser.<action>`.
const AUDITED: &[&str] = &["click", "type", "select", "press", "login"];

/// Moves the outcome's downloads into the workspace's `inbox/` (each a workspace write, like a
/// file sent in a chat) and audits what had an effect; announced once committed.
async fn record(state: &BrowserState, action: &'static str, outcome: &mut crate::browser::Outcome) {
    let agent = state.args.setup.agent.clone();
    let mut saved = Vec::new();
    for download in std::mem::take(&mut outcome.downloads) {
        match save_download(state, &download).await {
            Ok(path) => saved.push(crate::browser::Download {
                path: path.into(),
                name: download.name,
            }),
            Err(error) => {
                tracing::warn!(%agent, %error, "a download could not be saved in the workspace")
            }
        }
    }
    outcome.downloads = saved;
    if !AUDITED.contains(&action) && outcome.downloads.is_empty() {
        return;
    }
    let subject = format!("site:{}", outcome.page.host());
    let details = serde_json::json!({
        "agent": agent,
        "action": action,
        "url": crate::secrets::redact(&outcome.page.url),
        "title": outcome.page.title,
        "downloads": outcome.downloads.iter().map(|download| download.path.display().to_string()).collect::<Vec<_>>(),
    });
    let (actor, audit_subject) = (format!("agent:{agent}"), subject.clone());
    let audit_action = format!("browser.{action}");
    let written = state
        .args
        .store
        .write(move |conn| {
            crate::audit::append(conn, &actor, &audit_action, &audit_subject, &details)
        })
        .await;
    match written {
        Ok(_) => crate::audit::announce(&state.args.events, &format!("browser.{action}"), &subject),
        Err(error) => tracing::warn!(%agent, %error, "a browser action could not be audited"),
    }
}

/// Records the workspace write (grants given before lapse), then copies the downloaded file into
/// `inbox/` and removes it from the profile. Answers the path in the workspace.
async fn save_download(
    state: &BrowserState,
    download: &crate::browser::Download,
) -> Result<String, String> {
    let agent = state.args.setup.agent.clone();
    let now = crate::clock::now_ms();
    let what = format!("the browser downloaded {}", download.name);
    let lapsed = state
        .args
        .store
        .write(move |conn| {
            let write = crate::store::workspace::WorkspaceWrite {
                agent: &agent,
                what: &what,
                action: None,
            };
            crate::agent::workspace_writes::record(conn, &write, "system", now)
        })
        .await
        .map_err(|error| error.to_string())?;
    crate::agent::workspace_writes::announce(&state.args.events, &lapsed);
    let (root, source, name) = (
        state.args.workspace.clone(),
        download.path.clone(),
        download.name.clone(),
    );
    tokio::task::spawn_blocking(move || {
        let bytes = std::fs::read(&source).map_err(|error| error.to_string())?;
        let saved = crate::tools::browser::save_in_workspace(&root, "inbox", &name, &bytes)
            .map_err(|error| error.to_string())?;
        let _ = std::fs::remove_file(&source);
        Ok(saved)
    })
    .await
    .map_err(|error| error.to_string())?
}

async fn start(
    myself: &ActorRef<BrowserEvent>,
    state: &mut BrowserState,
) -> Result<(), BrowserError> {
    let agent = state.args.setup.agent.clone();
    let session = match BrowserSession::start(&state.args.setup).await {
        Ok(session) => session,
        Err(error) => {
            state.status.failures += 1;
            tracing::warn!(%agent, %error, "the browser could not be started");
            return Err(error);
        }
    };
    state.status.starts += 1;
    let start = state.status.starts;
    tracing::info!(%agent, pid = ?session.pid(), confined = session.confined(), "browser started");
    state.args.events.publish(
        EventKind::ActorStarted,
        &format!("browser:{agent}"),
        &format!("Chromium started {}", session.confined()),
    );
    let watcher = session.closed_signal();
    let me = myself.clone();
    tokio::spawn(async move {
        watcher.await;
        let _ = me.cast(BrowserEvent::Closed { start });
    });
    state.session = Some(session);
    Ok(())
}

/// Chromium went away without being asked: counted, told, dropped (the next action starts one).
fn crashed(state: &mut BrowserState) {
    let agent = &state.args.setup.agent;
    let said = state
        .session
        .take()
        .map(|session| session.last_words())
        .unwrap_or_default();
    state.status.crashes += 1;
    tracing::warn!(%agent, last_error = %said, "Chromium exited unexpectedly; it is started again on the next browser action");
    state.args.events.publish(
        EventKind::ActorFailed,
        &format!("browser:{agent}"),
        "Chromium exited unexpectedly; it starts again on the next browser action",
    );
}

/// Closes Chromium on purpose (`idle`).
async fn close(state: &mut BrowserState, why: &str) {
    let Some(session) = state.session.take() else {
        return;
    };
    session.stop().await;
    state.status.idle_closes += 1;
    let agent = &state.args.setup.agent;
    tracing::info!(%agent, why, "browser closed");
    state.args.events.publish(
        EventKind::ActorStopped,
        &format!("browser:{agent}"),
        &format!("Chromium closed ({why})"),
    );
}

/// How long the tool waits for an action's answer: the slowest an action may take (a page load,
/// then a download) plus a margin.
pub fn action_timeout(setup: &BrowserSetup) -> Duration {
    setup.page_timeout + Duration::from_secs(150)
}

/// Adds the agent's browser to its children (permanent: restarted if the actor itself fails)
/// and starts it. Chromium itself starts on the first action.
pub async fn start_child<M>(
    agent: &ActorRef<M>,
    children: &mut super::supervise::Children,
    setup: BrowserSetup,
    runtime: &crate::agent::AgentRuntime,
) -> super::supervise::Action
where
    M: ractor::Message + From<super::supervise::ChildCmd>,
{
    let local_name = crate::protocol::browser::name(&setup.agent);
    let id = local_name.local().to_string();
    let registry = runtime.registry.clone();
    let args = BrowserArgs {
        setup,
        events: runtime.events.clone(),
        store: runtime.store.clone(),
        workspace: runtime.workspace.clone(),
    };
    let policy = super::supervise::RestartPolicy::default();
    let spec = super::supervise::ChildSpec::new(id.clone(), policy, move |supervisor| {
        let (registry, local_name, args) = (registry.clone(), local_name.clone(), args.clone());
        async move {
            super::supervise::spawn_child(&registry, &local_name, BrowserActor, args, supervisor)
                .await
        }
    })
    .shutdown(Duration::from_secs(8))
    // A browser that keeps failing must not take its agent down: it is marked degraded and
    // tried again later.
    .on_exhausted(crate::supervision::OnExhausted::Degrade {
        retry_after: Duration::from_secs(60),
    });
    children.insert(spec);
    children.start(agent, &id).await
}

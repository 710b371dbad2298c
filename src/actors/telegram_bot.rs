//! TelegramBot(agent): one per bot token; polls, routes, and delivers for exactly one agent.
//!
//! Inbound: the poll loop (`telegram::poller`, a task owned by this actor) stores each batch with
//! its offset before confirming it. This actor then reads every stored update in order: stale ones
//! (older than `stale_grace` before boot) and unauthorized ones are recorded and not answered;
//! unknown private users get one pairing reply; group messages not addressed to the bot are kept
//! as context for its next answer; commands are handled here; everything else goes to the agent
//! (`agent:<name>`) — the bot that received an update decides the agent, never a guess.
//!
//! Outbound: `Deliver(Outbound)` goes to a per-chat worker (`telegram::sender`) that paces sends
//! and edits and confirms delivery in the outbox.
//!
//! Background jobs (owner: this actor, cancelled with it through a drop guard — also when it
//! fails): the poll loop; the sweep every 30 s, which re-dispatches stored updates that never
//! reached a session and re-delivers replies still in the outbox (both idempotent).
//!
//! Restart policy: transient under the ChannelSupervisor with backoff and a budget; exhausted →
//! degraded and retried later. A rejected token (401) stops the bot normally with a clear event:
//! restarting cannot fix it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;
use teloxide::prelude::*;
use teloxide::types::BotCommand;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::agent::AgentMsg;
use super::approval_desk::{ApprovalDeskMsg, Decider, Decision};
use super::events::EventsMsg;
use crate::config::{AgentSpec, TelegramConfig};
use crate::domain::{
    Attachment, ChatKey, Inbound, InboundSource, OutEvent, Outbound, Sender, SessionCommand,
};
use crate::events::{EventBus, EventKind};
use crate::registry::{Registry, names};
use crate::secrets::Secret;
use crate::store::Store;
use crate::store::runs as outbox;
use crate::store::telegram::{self as queries, PairingRow, StoredUpdate};
use crate::telegram::client::{self, TelegramError};
use crate::telegram::governor::{Governor, Limits};
use crate::telegram::intake::{self, IncomingCallback, IncomingMessage, Intake};
use crate::telegram::pairing;
use crate::telegram::poller::{PollEnd, PollEvent, Poller};
use crate::telegram::sender::{ChatWorker, SendJob};

const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// Group messages kept as context for one answer.
const GROUP_CONTEXT: u32 = 30;
const MAX_DOWNLOAD: u64 = 20 * 1024 * 1024;

pub enum TelegramMsg {
    /// The startup task reached Telegram: the bot's username.
    Online {
        username: String,
    },
    Poll(PollEvent),
    Deliver(Outbound),
    Sweep,
    /// Post an approval request with buttons; the message id comes back to the desk.
    PostApproval {
        approval_id: String,
        chat_id: i64,
        text: String,
        grant_minutes: Option<u32>,
    },
    /// Replace a decided approval's message (buttons removed).
    ResolveApproval {
        chat_id: i64,
        message_id: i32,
        text: String,
    },
    /// Send a plain message to a chat (pairing approved, approval notices).
    Notify {
        chat_id: i64,
        text: String,
    },
    /// Is the bot polling? (for approvals: is an approver reachable here)
    IsOnline(RpcReplyPort<bool>),
    /// Fault injection (chaos tests, Studio's "crash" action): the handler panics, as a bug
    /// would, so that supervision is exercised for real.
    Panic(String),
}

#[derive(Clone)]
pub struct TelegramBotArgs {
    pub spec: AgentSpec,
    pub token: Secret,
    pub config: TelegramConfig,
    pub store: Store,
    pub registry: Registry,
    pub events: EventBus,
    /// When the daemon started (the stale filter's reference).
    pub boot_ms: i64,
    pub workspace: PathBuf,
}

pub struct TelegramBot;

pub struct TelegramBotState {
    args: TelegramBotArgs,
    bot: Bot,
    governor: Arc<Governor>,
    bot_id: i64,
    username: Option<String>,
    workers: HashMap<i64, mpsc::UnboundedSender<SendJob>>,
    cancel: CancellationToken,
    /// Cancels every task of this incarnation when the state is dropped (stop or failure).
    _guard: DropGuard,
    /// Updates stored before `getMe` answered (the username decides group addressing).
    early: Vec<StoredUpdate>,
    sweeper: Option<tokio::task::JoinHandle<()>>,
}

impl TelegramBotArgs {
    fn subject(&self) -> String {
        names::bot(&self.spec.name)
    }

    fn allowed_by_file(&self, user_id: i64) -> bool {
        self.spec.telegram.as_ref().is_some_and(|telegram| {
            telegram.allow_users.contains(&user_id) || telegram.approvers.contains(&user_id)
        })
    }

    fn is_approver(&self, user_id: i64) -> bool {
        self.spec.telegram.as_ref().is_some_and(|telegram| {
            if telegram.approvers.is_empty() {
                telegram.allow_users.contains(&user_id)
            } else {
                telegram.approvers.contains(&user_id)
            }
        })
    }
}

impl Actor for TelegramBot {
    type Msg = TelegramMsg;
    type State = TelegramBotState;
    type Arguments = TelegramBotArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: TelegramBotArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let telegram = args
            .spec
            .telegram
            .clone()
            .ok_or("agent has no [telegram] table")?;
        let bot_id = client::bot_id(&args.token).ok_or_else(|| {
            format!(
                "the token in {} is not a bot token (expected <id>:<secret>)",
                telegram.token_env
            )
        })?;
        let bot = client::build(&args.token, &telegram.api_url, args.config.poll_timeout.0)?;

        let cancel = CancellationToken::new();
        Ok(TelegramBotState {
            _guard: cancel.clone().drop_guard(),
            args,
            bot,
            governor: Arc::new(Governor::new(Limits::default())),
            bot_id,
            username: None,
            workers: HashMap::new(),
            cancel,
            early: Vec::new(),
            sweeper: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Network work happens in a task: a failure here is a supervision event, not a boot failure.
        let bot = state.bot.clone();
        let me = myself.clone();
        let cancel = state.cancel.clone();
        let args = state.args.clone();
        let bot_id = state.bot_id;
        tokio::spawn(async move {
            let online = tokio::select! {
                online = go_online(&bot) => online,
                _ = cancel.cancelled() => return,
            };
            match online {
                Ok(username) => {
                    let _ = me.cast(TelegramMsg::Online { username });
                }
                Err(TelegramError::Unauthorized) => {
                    let _ = me.cast(TelegramMsg::Poll(PollEvent::Ended(PollEnd::Unauthorized)));
                    return;
                }
                Err(error) => {
                    // Let the poll loop's backoff handle a flaky start; report what happened.
                    let _ = me.cast(TelegramMsg::Poll(PollEvent::Status {
                        state: "network_error",
                        detail: error.to_string(),
                    }));
                }
            }
            let report_to = me.clone();
            Poller {
                bot,
                bot_id,
                agent: args.spec.name.clone(),
                poll_timeout: args.config.poll_timeout.0,
                wait_for_previous: args.config.wait_for_previous.0,
                store: args.store.clone(),
                report: Box::new(move |event| {
                    let _ = report_to.cast(TelegramMsg::Poll(event));
                }),
                cancel,
            }
            .run()
            .await;
        });
        let sweep_cancel = state.cancel.clone();
        let me = myself.clone();
        state.sweeper = Some(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(SWEEP_EVERY);
            loop {
                tokio::select! {
                    _ = ticker.tick() => { if me.cast(TelegramMsg::Sweep).is_err() { return } }
                    _ = sweep_cancel.cancelled() => return,
                }
            }
        }));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TelegramMsg::Online { username } => {
                tracing::info!(agent = %state.args.spec.name, bot = %username, "telegram bot online");
                state.args.events.publish_data(
                    EventKind::BotStatus,
                    &state.args.subject(),
                    &format!("@{username} online"),
                    json!({"agent": state.args.spec.name, "state": "online", "username": username}),
                );
                state.username = Some(username);
                if let Some(desk) = state
                    .args
                    .registry
                    .lookup::<ApprovalDeskMsg>(names::APPROVALS)
                {
                    let _ = desk.cast(ApprovalDeskMsg::BotOnline {
                        agent: state.args.spec.name.clone(),
                    });
                }
                let early = std::mem::take(&mut state.early);
                dispatch(&myself, state, early).await?;
                // Right after start nothing is in flight: recover everything left from before.
                sweep(&myself, state, Recovery::Everything).await?;
            }
            TelegramMsg::Poll(PollEvent::Polled { at_ms }) => {
                // Kept by the Events actor in memory, for `/metrics`' polling lag.
                if let Some(events) = state.args.registry.lookup::<EventsMsg>(names::EVENTS) {
                    let _ = events.cast(EventsMsg::BotPolled {
                        agent: state.args.spec.name.clone(),
                        at_ms,
                    });
                }
            }
            TelegramMsg::Poll(PollEvent::Stored(updates)) => {
                if state.username.is_none() {
                    state.early.extend(updates);
                } else {
                    dispatch(&myself, state, updates).await?;
                }
            }
            TelegramMsg::Poll(PollEvent::Status {
                state: status,
                detail,
            }) => {
                if status != "polling" {
                    tracing::warn!(agent = %state.args.spec.name, status, %detail, "telegram polling");
                }
                state.args.events.publish_data(
                    EventKind::BotStatus,
                    &state.args.subject(),
                    &if detail.is_empty() { status.to_string() } else { format!("{status}: {detail}") },
                    json!({"agent": state.args.spec.name, "state": status, "detail": detail, "at_ms": crate::clock::now_ms()}),
                );
            }
            TelegramMsg::Poll(PollEvent::Ended(PollEnd::Unauthorized)) => {
                let env = state
                    .args
                    .spec
                    .telegram
                    .as_ref()
                    .map(|t| t.token_env.clone())
                    .unwrap_or_default();
                let text = format!(
                    "Telegram rejected the token in {env} (401). The bot of `{}` is off until the token is fixed and the daemon restarted; other bots keep running.",
                    state.args.spec.name
                );
                tracing::error!("{text}");
                state.args.events.publish_data(
                    EventKind::BotStatus,
                    &state.args.subject(),
                    &text,
                    json!({"agent": state.args.spec.name, "state": "unauthorized"}),
                );
                myself.stop(Some("unauthorized".into()));
            }
            TelegramMsg::Poll(PollEvent::Ended(PollEnd::Stuck(after))) => {
                return Err(format!(
                    "getUpdates did not answer within {} s; restarting the bot",
                    after.as_secs()
                )
                .into());
            }
            TelegramMsg::Deliver(outbound) => deliver(state, outbound).await,
            TelegramMsg::Sweep => sweep(&myself, state, Recovery::Stale).await?,
            TelegramMsg::PostApproval {
                approval_id,
                chat_id,
                text,
                grant_minutes,
            } => {
                let mut buttons = vec![("✅ Approve".to_string(), format!("ap:{approval_id}"))];
                if let Some(minutes) = grant_minutes {
                    buttons.push((format!("✅ {minutes} min"), format!("ag:{approval_id}")));
                }
                buttons.push(("❌ Deny".to_string(), format!("dn:{approval_id}")));
                let (reply, answer) = tokio::sync::oneshot::channel();
                worker(state, chat_id)
                    .send(SendJob::Buttons {
                        text,
                        buttons,
                        reply,
                    })
                    .ok();
                let registry = state.args.registry.clone();
                tokio::spawn(async move {
                    if let Ok(Ok(message_id)) = answer.await
                        && let Some(desk) = registry.lookup::<ApprovalDeskMsg>(names::APPROVALS)
                    {
                        let _ = desk.cast(ApprovalDeskMsg::Posted {
                            id: approval_id,
                            chat_id,
                            message_id,
                        });
                    }
                });
            }
            TelegramMsg::ResolveApproval {
                chat_id,
                message_id,
                text,
            } => {
                let _ = worker(state, chat_id).send(SendJob::Resolve { message_id, text });
            }
            TelegramMsg::Notify { chat_id, text } => {
                let _ = worker(state, chat_id).send(SendJob::Notice { text });
            }
            TelegramMsg::IsOnline(reply) => {
                let _ = reply.send(state.username.is_some());
            }
            TelegramMsg::Panic(reason) => panic!("fault injected: {reason}"),
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.cancel.cancel();
        if let Some(sweeper) = state.sweeper.take() {
            sweeper.abort();
        }
        Ok(())
    }
}

/// deleteWebhook (we poll), getMe (checks the token), setMyCommands.
async fn go_online(bot: &Bot) -> Result<String, TelegramError> {
    bot.delete_webhook().await.map_err(TelegramError::from)?;
    let me = bot.get_me().await.map_err(TelegramError::from)?;
    let commands = [
        ("start", "Say hello"),
        ("help", "What I can do"),
        ("new", "Start a fresh conversation"),
        ("stop", "Stop what I am doing"),
        ("status", "How I am doing"),
        ("approve", "Approve a pending action: /approve <id>"),
        ("deny", "Deny a pending action: /deny <id>"),
        ("pair", "Let a new user talk to me: /pair <code>"),
    ]
    .map(|(command, description)| BotCommand::new(command, description));
    if let Err(error) = bot.set_my_commands(commands).await {
        tracing::debug!(error = %TelegramError::from(error), "could not register bot commands");
    }
    Ok(me.username.clone().unwrap_or_default())
}

fn worker(state: &mut TelegramBotState, chat_id: i64) -> mpsc::UnboundedSender<SendJob> {
    if let Some(sender) = state
        .workers
        .get(&chat_id)
        .filter(|sender| !sender.is_closed())
    {
        return sender.clone();
    }
    let sender = ChatWorker {
        bot: state.bot.clone(),
        governor: state.governor.clone(),
        chat_id,
        agent: state.args.spec.name.clone(),
        store: state.args.store.clone(),
        events: state.args.events.clone(),
        cancel: state.cancel.child_token(),
    }
    .spawn();
    state.workers.insert(chat_id, sender.clone());
    sender
}

async fn deliver(state: &mut TelegramBotState, outbound: Outbound) {
    let Some(chat_id) = outbound.chat.telegram_chat_id() else {
        return;
    };
    let job = match outbound.event {
        OutEvent::Working => SendJob::Typing(true),
        OutEvent::Partial { text } => match outbound.run_id {
            Some(run_id) => SendJob::Partial { run_id, text },
            None => return,
        },
        OutEvent::Final { text, outbox_id } => SendJob::Final {
            run_id: outbound.run_id,
            text,
            outbox_id,
        },
        OutEvent::Notice { text } => SendJob::Notice { text },
        OutEvent::Tool { .. } => return,
        OutEvent::Silent { inbound_ids } => {
            let now = crate::clock::now_ms();
            let _ = state
                .args
                .store
                .write(move |conn| queries::mark_processed(conn, &inbound_ids, now))
                .await;
            return;
        }
    };
    let _ = worker(state, chat_id).send(job);
}

/// What to do with each stored update; statuses are written together at the end.
async fn dispatch(
    myself: &ActorRef<TelegramMsg>,
    state: &mut TelegramBotState,
    updates: Vec<StoredUpdate>,
) -> Result<(), ActorProcessingErr> {
    let username = state.username.clone().unwrap_or_default();
    let mut statuses: Vec<(i64, &'static str, Option<String>)> = Vec::new();
    for update in updates {
        match intake::read(&update.payload, state.bot_id, &username) {
            Intake::Unsupported(why) => statuses.push((update.id, "ignored", Some(why))),
            Intake::Callback(callback) => {
                on_callback(state, callback).await;
                statuses.push((update.id, "processed", Some("callback".into())));
            }
            Intake::Message(message) => {
                let (status, note) = on_message(myself, state, &update, message).await;
                statuses.push((update.id, status, note));
            }
        }
    }
    let now = crate::clock::now_ms();
    state
        .args
        .store
        .write(move |conn| {
            for (id, status, note) in &statuses {
                queries::set_status(conn, *id, status, note.as_deref(), now)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

async fn on_message(
    myself: &ActorRef<TelegramMsg>,
    state: &mut TelegramBotState,
    update: &StoredUpdate,
    message: IncomingMessage,
) -> (&'static str, Option<String>) {
    let grace = state.args.config.stale_grace.0.as_millis() as i64;
    if message.date_ms < state.args.boot_ms - grace {
        tracing::info!(agent = %state.args.spec.name, update = update.update_id, "stale update stored but not answered");
        return (
            "ignored",
            Some("stale: sent long before the daemon started".into()),
        );
    }
    let agent = state.args.spec.name.clone();
    let user_id = message.user_id;
    let allowed = state.args.allowed_by_file(user_id)
        || state
            .args
            .store
            .read(move |conn| queries::user_allowed(conn, &agent, user_id))
            .await
            .unwrap_or(false);
    if !allowed {
        if message.private {
            pairing_reply(state, &message).await;
        }
        return ("ignored", Some("unauthorized sender".into()));
    }
    if !message.addressed {
        return ("context", None);
    }
    if let Some((command, args)) = message.command.clone() {
        return on_command(state, &message, &command, &args).await;
    }

    // Group answers get the conversation since the bot's last answer, with names and times.
    let mut text = message.text.clone();
    if !message.private {
        let (agent, chat_id, now) = (
            state.args.spec.name.clone(),
            message.chat_id,
            crate::clock::now_ms(),
        );
        let context = state
            .args
            .store
            .write(move |conn| queries::take_context(conn, &agent, chat_id, GROUP_CONTEXT, now))
            .await
            .unwrap_or_default();
        let lines: Vec<String> = context
            .iter()
            .filter_map(
                |stored| match intake::read(&stored.payload, state.bot_id, "") {
                    Intake::Message(earlier) => Some(format!(
                        "{} ({}): {}",
                        earlier.user_name,
                        crate::clock::to_datetime(earlier.date_ms).format("%H:%M"),
                        earlier.text
                    )),
                    _ => None,
                },
            )
            .collect();
        let now_text = crate::clock::to_datetime(message.date_ms).format("%H:%M");
        text = if lines.is_empty() {
            format!(
                "{} ({now_text}) in {}: {}",
                message.user_name, message.chat_title, message.text
            )
        } else {
            format!(
                "[Conversation in {} since your last answer]\n{}\n\n{} ({now_text}) to you: {}",
                message.chat_title,
                lines.join("\n"),
                message.user_name,
                message.text
            )
        };
    }
    let inbound = Inbound {
        agent: state.args.spec.name.clone(),
        chat: ChatKey::telegram(message.chat_id),
        sender: Sender::new(message.user_id.to_string(), message.user_name.clone()),
        text,
        attachments: Vec::new(),
        source: InboundSource::Telegram {
            inbound_id: update.id,
        },
        received_ms: update.received_ms,
        context: None,
        correlation: None,
    };
    if message.files.is_empty() {
        return forward(state, inbound);
    }
    // Files are downloaded in a task; the update is dispatched when they are in the workspace.
    let bot = state.bot.clone();
    let registry = state.args.registry.clone();
    let inbox = state.args.workspace.join("inbox");
    let files = message.files.clone();
    let update_id = update.update_id;
    let store = state.args.store.clone();
    let row_id = update.id;
    let _ = myself;
    tokio::spawn(async move {
        let mut inbound = inbound;
        let mut notes = Vec::new();
        for file in files {
            match download(&bot, &file, &inbox, update_id).await {
                Ok(attachment) => {
                    notes.push(format!(
                        "[{} saved to {}]",
                        file.name,
                        attachment.path.display()
                    ));
                    inbound.attachments.push(attachment);
                }
                Err(error) => {
                    notes.push(format!("[{} could not be downloaded: {error}]", file.name))
                }
            }
        }
        if !notes.is_empty() {
            inbound.text = format!("{}\n{}", inbound.text, notes.join("\n"))
                .trim()
                .to_string();
        }
        if let Some(agent) = registry.lookup::<AgentMsg>(&names::agent(&inbound.agent))
            && agent.cast(AgentMsg::Inbound(inbound)).is_ok()
        {
            let now = crate::clock::now_ms();
            let _ = store
                .write(move |conn| queries::set_status(conn, row_id, "dispatched", None, now))
                .await;
        }
    });
    ("pending", Some("downloading attachments".into()))
}

fn forward(state: &TelegramBotState, inbound: Inbound) -> (&'static str, Option<String>) {
    match state
        .args
        .registry
        .lookup::<AgentMsg>(&names::agent(&inbound.agent))
    {
        Some(agent) if agent.cast(AgentMsg::Inbound(inbound)).is_ok() => ("dispatched", None),
        // The agent is restarting: the sweep dispatches the update once it is back.
        _ => ("pending", Some("agent not reachable; will retry".into())),
    }
}

async fn download(
    bot: &Bot,
    file: &intake::RemoteFile,
    inbox: &std::path::Path,
    update_id: i64,
) -> Result<Attachment, String> {
    use teloxide::net::Download;
    if file.size > MAX_DOWNLOAD {
        return Err(format!(
            "{} bytes is over the {} MB limit",
            file.size,
            MAX_DOWNLOAD / 1024 / 1024
        ));
    }
    let remote = bot
        .get_file(teloxide::types::FileId(file.file_id.clone()))
        .await
        .map_err(|e| TelegramError::from(e).to_string())?;
    tokio::fs::create_dir_all(inbox)
        .await
        .map_err(|e| e.to_string())?;
    let safe_name: String = file
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let relative = PathBuf::from("inbox").join(format!("{update_id}-{safe_name}"));
    let path = inbox.join(format!("{update_id}-{safe_name}"));
    let mut output = tokio::fs::File::create(&path)
        .await
        .map_err(|e| e.to_string())?;
    bot.download_file(&remote.path, &mut output)
        .await
        .map_err(|e| crate::secrets::redact(&e.to_string()).into_owned())?;
    Ok(Attachment {
        kind: file.kind,
        path: relative,
        mime: file.mime.clone(),
        bytes: remote.size as u64,
    })
}

async fn pairing_reply(state: &mut TelegramBotState, message: &IncomingMessage) {
    let (agent, user_id, now) = (
        state.args.spec.name.clone(),
        message.user_id,
        crate::clock::now_ms(),
    );
    let row = PairingRow {
        code: pairing::new_code(),
        agent: agent.clone(),
        user_id,
        chat_id: message.chat_id,
        name: message.user_name.clone(),
        created_ms: now,
        expires_ms: now + pairing::VALIDITY_MS,
        approved_ms: None,
    };
    // One reply per pairing request: a user who already has a live code hears nothing more.
    let created = state
        .args
        .store
        .write(move |conn| {
            if queries::live_pairing(conn, &agent, user_id, now)?.is_some() {
                return Ok(None);
            }
            queries::create_pairing(conn, &row)?;
            Ok(Some(row))
        })
        .await;
    if let Ok(Some(row)) = created {
        let text = format!(
            "Hi {}! I only talk to people my owner approved. Ask them to approve code {} (in Studio, or by sending /pair {} to me). The code is valid for an hour.",
            message.user_name,
            pairing::display(&row.code),
            pairing::display(&row.code)
        );
        state.args.events.publish_data(
            EventKind::BotStatus,
            &state.args.subject(),
            &format!("pairing requested by {} ({})", row.name, row.user_id),
            json!({"agent": row.agent, "state": "pairing_requested", "code": row.code, "user_id": row.user_id}),
        );
        let _ = worker(state, message.chat_id).send(SendJob::Notice { text });
    }
}

async fn on_command(
    state: &mut TelegramBotState,
    message: &IncomingMessage,
    command: &str,
    args: &str,
) -> (&'static str, Option<String>) {
    let chat = ChatKey::telegram(message.chat_id);
    let agent_ref = state
        .args
        .registry
        .lookup::<AgentMsg>(&names::agent(&state.args.spec.name));
    let reply: Option<String> = match command {
        "start" => Some(format!(
            "Hi {}, I'm {}. {}\nJust write to me. /help lists what else I understand.",
            message.user_name,
            state.args.spec.name,
            state.args.spec.description
        )),
        "help" => Some(
            "Write to me in plain words.\n/new starts a fresh conversation\n/stop stops what I am doing\n/status shows how I am doing\n/approve <id> or /deny <id> decides a pending action\n/pair <code> lets a new user talk to me (approvers only)".into(),
        ),
        "new" | "stop" => {
            let command = if command == "new" { SessionCommand::New } else { SessionCommand::Stop };
            match agent_ref {
                Some(agent) => {
                    let _ = agent.cast(AgentMsg::Command(chat, command));
                    None
                }
                None => Some("I am restarting; try again in a moment.".into()),
            }
        }
        "status" => Some(match agent_ref {
            Some(agent) => match ractor::call_t!(agent, AgentMsg::View, 2_000) {
                Ok(view) => format!(
                    "{}: model {}, {} mode{}. {} active conversation(s).",
                    view.name,
                    view.model,
                    view.autonomy.as_str(),
                    if view.paused { ", paused by the operator" } else { "" },
                    view.sessions
                ),
                Err(_) => "I am busy right now; try again.".into(),
            },
            None => "I am restarting; try again in a moment.".into(),
        }),
        "approve" | "deny" => Some(decide_by_text(state, message, command, args).await),
        "pair" => Some(pair(state, message, args).await),
        other => Some(format!("I don't know /{other}. /help lists what I understand.")),
    };
    if let Some(text) = reply {
        let _ = worker(state, message.chat_id).send(SendJob::Notice { text });
    }
    ("processed", Some(format!("command /{command}")))
}

async fn decide_by_text(
    state: &TelegramBotState,
    message: &IncomingMessage,
    command: &str,
    args: &str,
) -> String {
    let id = args
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    if id.is_empty() {
        return format!("Usage: /{command} <id> (the id is shown in the approval request).");
    }
    let decision = if command == "approve" {
        Decision::Approve
    } else {
        Decision::Deny
    };
    decide(state, id, decision, message.user_id, &message.user_name).await
}

async fn decide(
    state: &TelegramBotState,
    id: String,
    decision: Decision,
    user_id: i64,
    name: &str,
) -> String {
    let Some(desk) = state
        .args
        .registry
        .lookup::<ApprovalDeskMsg>(names::APPROVALS)
    else {
        return "Approvals are not available right now; try again in a moment.".into();
    };
    let decider = Decider::Telegram {
        agent: state.args.spec.name.clone(),
        user_id,
        name: name.to_string(),
        approver: state.args.is_approver(user_id),
    };
    match ractor::call_t!(desk, ApprovalDeskMsg::Decide, 10_000, id, decision, decider) {
        Ok(outcome) => outcome.message(),
        Err(_) => "Approvals did not answer; try again.".into(),
    }
}

async fn on_callback(state: &mut TelegramBotState, callback: IncomingCallback) {
    let (kind, id) = callback.data.split_once(':').unwrap_or(("", ""));
    let decision = match kind {
        "ap" => Some(Decision::Approve),
        "ag" => Some(Decision::ApproveFor(Duration::from_secs(30 * 60))),
        "dn" => Some(Decision::Deny),
        _ => None,
    };
    // The decision (and its audit row) is stored before the button press is answered.
    let text = match decision {
        Some(decision) if !id.is_empty() => {
            decide(
                state,
                id.to_string(),
                decision,
                callback.user_id,
                &callback.user_name,
            )
            .await
        }
        _ => "This button is no longer active.".to_string(),
    };
    let bot = state.bot.clone();
    let callback_id = callback.callback_id.clone();
    tokio::spawn(async move {
        let short: String = text.chars().take(190).collect();
        if let Err(error) = bot
            .answer_callback_query(teloxide::types::CallbackQueryId(callback_id))
            .text(short)
            .await
        {
            tracing::debug!(error = %TelegramError::from(error), "could not answer a button press");
        }
    });
}

async fn pair(state: &mut TelegramBotState, message: &IncomingMessage, args: &str) -> String {
    if !state.args.is_approver(message.user_id) {
        return "Only my approvers can pair new users.".into();
    }
    let code = args.trim().to_string();
    if code.is_empty() {
        return "Usage: /pair <code> (the code the new user received).".into();
    }
    let (agent, by, now) = (
        state.args.spec.name.clone(),
        format!("telegram:{}", message.user_id),
        crate::clock::now_ms(),
    );
    match state
        .args
        .store
        .write(move |conn| queries::approve_pairing(conn, &code, Some(&agent), &by, now))
        .await
    {
        Ok(Some(row)) => {
            let _ = worker(state, row.chat_id).send(SendJob::Notice {
                text: format!("You're approved, {}. Write to me anytime.", row.name),
            });
            format!(
                "Paired {} ({}). They can talk to me now.",
                row.name, row.user_id
            )
        }
        Ok(None) => "That code is unknown, already used or expired.".into(),
        Err(error) => format!("Could not pair: {error}"),
    }
}

/// What a sweep picks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recovery {
    /// Right after start: every undelivered update and reply, however recent.
    Everything,
    /// Periodically: only what has waited long enough to be stuck (not merely in flight).
    Stale,
}

/// Re-dispatches stored updates that never reached a session, and re-delivers replies still in
/// the outbox (with a growing delay per attempt).
async fn sweep(
    myself: &ActorRef<TelegramMsg>,
    state: &mut TelegramBotState,
    recovery: Recovery,
) -> Result<(), ActorProcessingErr> {
    if state.username.is_none() {
        return Ok(());
    }
    let agent = state.args.spec.name.clone();
    let now = crate::clock::now_ms();
    let threshold = match recovery {
        Recovery::Everything => now,
        Recovery::Stale => now - 20_000,
    };
    let (stuck, pending) = state
        .args
        .store
        .read(move |conn| {
            Ok((
                queries::undelivered(conn, &agent, threshold)?,
                outbox::outbox_pending(conn, &agent)?,
            ))
        })
        .await?;
    if !stuck.is_empty() {
        tracing::info!(agent = %state.args.spec.name, count = stuck.len(), "re-dispatching stored updates");
        dispatch(myself, state, stuck).await?;
    }
    for row in pending {
        let delay = 20_000i64.saturating_mul(1 << row.attempts.clamp(0, 8));
        if recovery == Recovery::Stale && now - row.created_ms < delay {
            continue;
        }
        let Some(chat) = ChatKey::parse(&row.chat) else {
            continue;
        };
        deliver(
            state,
            Outbound {
                agent: row.agent.clone(),
                chat,
                run_id: row.run_id,
                correlation: None,
                event: OutEvent::Final {
                    text: row.text.clone(),
                    outbox_id: Some(row.id),
                },
            },
        )
        .await;
    }
    Ok(())
}

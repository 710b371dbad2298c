//! TelegramBot(agent): one per bot token; polls, routes, and delivers for exactly one agent.
//!
//! Starting: a task deletes the webhook and asks `getMe`. Only when that succeeds is the bot online
//! and its poll loop and sweep started; when it fails (no network, too many open files, ...) the
//! actor fails with the reason in words for people (its status `failing` in Studio, `/readyz` 503,
//! one log line) and the ChannelSupervisor starts it again with backoff. Invariant: no update is
//! confirmed to Telegram unless a fully started bot runs to dispatch it.
//!
//! Inbound: the poll loop (`telegram::poller`, a task owned by this actor) stores each batch with
//! its offset before confirming it. This actor then reads every stored update in order: ones sent
//! long before boot are answered when an earlier incarnation accepted them, else the person is
//! told they came too late (`late.rs`); unauthorized ones are recorded and not answered;
//! unknown private users get one pairing reply (or, when the bot is unclaimed, may claim it with
//! `/start <code>`); blocked users get nothing; group messages not addressed to the bot are kept
//! as context for its next answer; commands are handled here; everything else goes to the agent
//! (`agent:<name>`) — the bot that received an update decides the agent, never a guess.
//!
//! In a forum supergroup, a message Telegram marks `is_topic_message` belongs to its topic's own
//! conversation, `tg:<chat>/<thread>` (General, and reply chains in ordinary groups, stay
//! `tg:<chat>`); commands such as `/new` and `/stop` act on that conversation only. A message
//! with files is handed to the agent from a task once they are in the workspace's `inbox/`; a
//! voice note is transcribed there first (`voice.rs`), and a transient failure of its download or
//! transcription leaves the update pending for the sweep.
//!
//! Every completed poll is told to the Events actor (`Events::bot_polled`, kept in memory, never
//! stored), which is what `/metrics`' `clawvisor_bot_poll_lag_seconds` measures.
//!
//! Outbound: `Deliver(Outbound)` goes to a per-conversation worker (`telegram::sender`: one per
//! chat, or per forum topic of a chat) that paces sends and edits and confirms delivery in the
//! outbox. The bot's one governor paces per Telegram chat, so a forum's topics share its limits.
//!
//! Background jobs (owner: this actor, cancelled with it through a drop guard — also when it
//! fails; the first two start only once the bot is online):
//! - the poll loop (`inbound_updates`, `bot_offsets`; on restart it resumes from the stored
//!   offset; idempotent: updates are unique on their id);
//! - the sweep, when online and every 30 s, which re-dispatches stored updates that never reached a
//!   session and re-delivers replies still in the outbox (idempotent: the session dedupes, the
//!   outbox row is checked before sending, a row whose record is held is skipped), and renews an
//!   expired claim code;
//! - the per-conversation send workers (`outbox`, `<data dir>/outbox-files/`), which also end
//!   after 2 minutes idle; undelivered rows are re-sent by the sweep, and at start spool copies
//!   older than an hour that no pending row needs are removed. A sent reply whose record failed
//!   is held by its worker until the record lands (`telegram::hold`); the stop waits (bounded)
//!   for the workers' last try.
//!
//! Restart policy: transient under the ChannelSupervisor with backoff and a budget; exhausted →
//! degraded and retried later. A rejected token (401) stops the bot normally with a clear event:
//! restarting cannot fix it.

mod backlog;
mod claim;
mod commands;
mod inbound;
mod late;
mod voice;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use teloxide::prelude::*;
use teloxide::types::BotCommand;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::config::{AgentSpec, TelegramConfig};
use crate::domain::{
    Attachment, ChatKey, Inbound, InboundSource, OutEvent, Outbound, Sender, SessionCommand,
};
use crate::events::{EventBus, EventData, EventKind};
use crate::protocol::agent::AgentMsg;
use crate::protocol::approvals::{Approvals, Decider, Decision};
use crate::protocol::events::Events;
use crate::protocol::telegram::{ApprovalPrompt, TelegramMsg};
use crate::registry::Registry;
use crate::secrets::Secret;
use crate::store::Store;
use crate::store::outbox;
use crate::store::telegram::{self as queries, PairingRow, StoredUpdate, UpdateStatus};
use crate::telegram::approval::{self, ApprovalButton};
use crate::telegram::client::{self, TelegramError};
use crate::telegram::governor::{Governor, Limits};
use crate::telegram::hold::{self, HeldDeliveries};
use crate::telegram::intake::{self, IncomingCallback, IncomingMessage, Intake};
use crate::telegram::pairing;
use crate::telegram::poller::{PollEnd, PollEvent, Poller};
use crate::telegram::sender::{ChatWorker, SendJob};
use crate::telegram::stream::StreamSettings;

const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// Group messages kept as context for one answer.
const GROUP_CONTEXT: u32 = 30;
const MAX_DOWNLOAD: u64 = 20 * 1024 * 1024;

/// What makes a bot act: others' requests, and what its own tasks report.
pub enum BotMsg {
    Request(TelegramMsg),
    /// The startup task reached Telegram: the bot's username.
    Online {
        username: String,
    },
    /// The startup task could not reach Telegram (network, too many open files, ...): the bot
    /// fails, and its supervisor starts it again with backoff. `reason` is for people.
    StartFailed {
        reason: String,
    },
    /// The poll loop's news: a batch stored, a poll done, its state, its end.
    Poll(PollEvent),
    /// Every 30 s: re-dispatch what never reached a session, re-deliver the outbox.
    Sweep,
}

wraps_requests!(BotMsg, TelegramMsg);

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
    /// The daemon's time zone (`/timezone` shows where a person's zone comes from).
    pub timezone: crate::config::DaemonTimezone,
    /// Who transcribes voice notes (or why nobody does), and the longest note transcribed.
    pub voice: crate::voice::VoiceSettings,
    /// Speaks replies marked `speak` (`voice_replies`); none: they are sent as text.
    pub speech: Option<crate::voice::speech::SpeechClient>,
}

pub struct TelegramBot;

pub struct TelegramBotState {
    args: TelegramBotArgs,
    bot: Bot,
    governor: Arc<Governor>,
    /// How streamed answers are shown; whether the Bot API takes drafts is remembered here.
    streaming: StreamSettings,
    bot_id: i64,
    username: Option<String>,
    /// One send worker per conversation: a chat, or one forum topic of it.
    workers: HashMap<ChatKey, mpsc::UnboundedSender<SendJob>>,
    cancel: CancellationToken,
    /// Cancels every task of this incarnation when the state is dropped (stop or failure).
    _guard: DropGuard,
    sweeper: Option<tokio::task::JoinHandle<()>>,
    /// Chats already told this incarnation that a message came too late to be answered.
    told_late: std::collections::HashSet<ChatKey>,
    /// Updates whose attachments a task is fetching (see `inbound::InFlight`).
    fetching: inbound::Fetching,
    /// Outbox rows Telegram accepted whose record a worker is still retrying (`telegram::hold`).
    held: HeldDeliveries,
}

impl TelegramBotArgs {
    fn subject(&self) -> String {
        crate::protocol::telegram::name(&self.spec.name)
            .local()
            .to_string()
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
    type Msg = BotMsg;
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
        let streaming = StreamSettings::from_config(&args.config);
        Ok(TelegramBotState {
            _guard: cancel.clone().drop_guard(),
            args,
            bot,
            governor: Arc::new(Governor::new(Limits::default())),
            streaming,
            bot_id,
            username: None,
            workers: HashMap::new(),
            cancel,
            sweeper: None,
            told_late: Default::default(),
            fetching: Default::default(),
            held: HeldDeliveries::default(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Network work happens in a task: a failure here is a supervision event, not a boot
        // failure. Nothing else starts before it succeeds: the poll loop and the sweep begin in
        // `on_online`, so a bot that never got online confirms no update to Telegram.
        let bot = state.bot.clone();
        let me = myself.clone();
        let cancel = state.cancel.clone();
        let agent = state.args.spec.name.clone();
        tokio::spawn(async move {
            let online = tokio::select! {
                online = go_online(&bot) => online,
                _ = cancel.cancelled() => return,
            };
            let _ = match online {
                Ok(username) => me.cast(BotMsg::Online { username }),
                Err(TelegramError::Unauthorized) => {
                    me.cast(BotMsg::Poll(PollEvent::Ended(PollEnd::Unauthorized)))
                }
                Err(error) => me.cast(BotMsg::StartFailed {
                    reason: start_failure(&agent, &error),
                }),
            };
        });
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BotMsg::Request(request) => on_request(state, request).await,
            BotMsg::Online { username } => on_online(&myself, state, username).await?,
            BotMsg::StartFailed { reason } => return Err(start_failed(state, reason)),
            BotMsg::Poll(event) => on_poll(&myself, state, event).await?,
            BotMsg::Sweep => sweep(&myself, state, Recovery::Stale).await?,
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
        // Workers holding a sent reply's record try it once more; the store stops after the bots.
        if !state
            .held
            .wait_released(hold::LAST_TRY + Duration::from_secs(1))
            .await
        {
            tracing::error!(agent = %state.args.spec.name, unrecorded = state.held.len(), "stopped with sent replies whose delivery is not recorded; each may be sent once more after the restart");
        }
        Ok(())
    }
}

/// A request from outside: output to deliver, an approval to post or resolve, a notice, a
/// question, or a fault to inject.
async fn on_request(state: &mut TelegramBotState, request: TelegramMsg) {
    match request {
        TelegramMsg::Deliver(outbound) => deliver(state, outbound).await,
        TelegramMsg::PostApproval { chat, prompt } => post_approval(state, chat, prompt),
        TelegramMsg::ResolveApproval {
            chat_id,
            message_id,
            text,
        } => {
            // An edit names the message; the whole chat's worker makes it, topic or not.
            let _ = worker(state, &ChatKey::telegram(chat_id))
                .send(SendJob::Resolve { message_id, text });
        }
        TelegramMsg::Notify { chat, text } => {
            if chat.telegram_chat_id().is_some() {
                let _ = worker(state, &chat).send(SendJob::Notice { text });
            }
        }
        TelegramMsg::IsOnline(reply) => {
            let _ = reply.send(state.username.is_some());
        }
        TelegramMsg::Panic(reason) => panic!("fault injected: {reason}"),
    }
}

/// Posts an approval request with its buttons; the message id goes back to the desk.
fn post_approval(state: &mut TelegramBotState, chat: ChatKey, prompt: ApprovalPrompt) {
    let Some(chat_id) = chat.telegram_chat_id() else {
        return;
    };
    let buttons = approval::buttons(&prompt)
        .iter()
        .map(|button| (button.label(), button.encode()))
        .collect();
    let (reply, answer) = tokio::sync::oneshot::channel();
    worker(state, &chat)
        .send(SendJob::Buttons {
            parts: approval::render(&prompt),
            buttons,
            reply,
        })
        .ok();
    let desk = Approvals::new(&state.args.registry);
    tokio::spawn(async move {
        if let Ok(Ok(message_id)) = answer.await {
            desk.posted(prompt.id, chat_id, message_id);
        }
    });
}

/// The bot reached Telegram: say so, hand over what was stored meanwhile, recover the rest.
async fn on_online(
    myself: &ActorRef<BotMsg>,
    state: &mut TelegramBotState,
    username: String,
) -> Result<(), ActorProcessingErr> {
    tracing::info!(agent = %state.args.spec.name, bot = %username, "telegram bot online");
    state.args.events.publish_data(
        EventKind::BotStatus,
        &state.args.subject(),
        &format!("@{username} online"),
        EventData::BotOnline {
            agent: state.args.spec.name.clone(),
            username: username.clone(),
        },
    );
    state.username = Some(username);
    Approvals::new(&state.args.registry).bot_online(&state.args.spec.name);
    start_polling(myself, state);
    // Right after start nothing is in flight: recover everything left from before.
    sweep(myself, state, Recovery::Everything).await
}

/// Starts the poll loop and the 30 s sweep, once the bot is online: both live and die with this
/// fully started incarnation (its cancellation token), so an update is confirmed to Telegram
/// only while a bot that dispatches it runs.
fn start_polling(myself: &ActorRef<BotMsg>, state: &mut TelegramBotState) {
    let report_to = myself.clone();
    let args = &state.args;
    let poller = Poller {
        bot: state.bot.clone(),
        bot_id: state.bot_id,
        agent: args.spec.name.clone(),
        poll_timeout: args.config.poll_timeout.0,
        wait_for_previous: args.config.wait_for_previous.0,
        store: args.store.clone(),
        report: Box::new(move |event| {
            let _ = report_to.cast(BotMsg::Poll(event));
        }),
        cancel: state.cancel.clone(),
    };
    tokio::spawn(poller.run());
    let sweep_cancel = state.cancel.clone();
    let me = myself.clone();
    state.sweeper = Some(tokio::spawn(async move {
        let mut ticker = tokio::time::interval(SWEEP_EVERY);
        // The first tick is now; `on_online` has just swept everything.
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = ticker.tick() => { if me.cast(BotMsg::Sweep).is_err() { return } }
                _ = sweep_cancel.cancelled() => return,
            }
        }
    }));
}

/// Why a bot could not get online, for people: the agent, what failed, and — when it is known —
/// what to do (`crate::cause`: "raise LimitNOFILE" for too many open files).
fn start_failure(agent: &str, error: &TelegramError) -> String {
    let cause = match error {
        // A cause without plain advice (a cut connection, a timeout) still leads with words.
        TelegramError::Network(cause) if crate::cause::text_advice(cause).is_none() => {
            format!("the connection failed — check this machine's network ({cause})")
        }
        TelegramError::Network(cause) => cause.clone(),
        other => other.to_string(),
    };
    format!("bot `{agent}` can't reach Telegram: {cause}")
}

/// The bot could not get online: said once in the log and as the bot's status (Studio shows it
/// failing), then the actor fails so that its supervisor restarts it with backoff.
fn start_failed(state: &TelegramBotState, reason: String) -> ActorProcessingErr {
    tracing::error!(agent = %state.args.spec.name, %reason, "telegram bot failed to start; its supervisor restarts it");
    state.args.events.publish_data(
        EventKind::BotStatus,
        &state.args.subject(),
        &reason,
        EventData::BotPolling {
            agent: state.args.spec.name.clone(),
            state: "failing".to_string(),
            detail: reason.clone(),
            at_ms: crate::clock::now_ms(),
        },
    );
    reason.into()
}

/// The poll loop's news.
async fn on_poll(
    myself: &ActorRef<BotMsg>,
    state: &mut TelegramBotState,
    event: PollEvent,
) -> Result<(), ActorProcessingErr> {
    match event {
        PollEvent::Polled { at_ms } => {
            // Kept by the Events actor in memory, for `/metrics`' polling lag.
            Events::new(&state.args.registry).bot_polled(&state.args.spec.name, at_ms);
        }
        // The poll loop runs only once the bot is online (`start_polling`).
        PollEvent::Stored(updates) => dispatch(myself, state, updates).await?,
        PollEvent::Status {
            state: status,
            detail,
        } => publish_polling(state, status, detail),
        PollEvent::Ended(PollEnd::Unauthorized) => token_rejected(myself, state),
        PollEvent::Ended(PollEnd::Stuck(after)) => {
            return Err(format!(
                "getUpdates did not answer within {} s; restarting the bot",
                after.as_secs()
            )
            .into());
        }
    }
    Ok(())
}

/// The poll loop's state, for the log (when it is not plain polling) and Studio.
fn publish_polling(state: &TelegramBotState, status: &'static str, detail: String) {
    // A store that cannot commit has said so once, with the cause and the path: the poller's
    // share of it is not repeated at warn.
    let the_store_said_it = status == "store_error" && !state.args.store.writes_commit();
    if status != "polling" && !the_store_said_it {
        tracing::warn!(agent = %state.args.spec.name, status, %detail, "telegram polling");
    } else if the_store_said_it {
        tracing::debug!(agent = %state.args.spec.name, %detail, "telegram polling waits for the store");
    }
    state.args.events.publish_data(
        EventKind::BotStatus,
        &state.args.subject(),
        &if detail.is_empty() {
            status.to_string()
        } else {
            format!("{status}: {detail}")
        },
        EventData::BotPolling {
            agent: state.args.spec.name.clone(),
            state: status.to_string(),
            detail,
            at_ms: crate::clock::now_ms(),
        },
    );
}

/// Telegram rejected the token (401): said plainly, and the bot stops — restarting cannot fix it.
fn token_rejected(myself: &ActorRef<BotMsg>, state: &TelegramBotState) {
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
        EventData::BotUnauthorized {
            agent: state.args.spec.name.clone(),
        },
    );
    myself.stop(Some("unauthorized".into()));
}

/// Room for one more bot (`client::FD_RESERVE`), then deleteWebhook (we poll), getMe (checks the
/// token), setMyCommands.
async fn go_online(bot: &Bot) -> Result<String, TelegramError> {
    client::room_for_a_bot()?;
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
        ("timezone", "Your time zone: /timezone Europe/Berlin"),
    ]
    .map(|(command, description)| BotCommand::new(command, description));
    if let Err(error) = bot.set_my_commands(commands).await {
        tracing::debug!(error = %TelegramError::from(error), "could not register bot commands");
    }
    Ok(me.username.clone().unwrap_or_default())
}

/// The send worker of a conversation (a `tg:` key: a chat, or a forum topic of it), started on
/// first use. Callers pass only Telegram keys.
fn worker(state: &mut TelegramBotState, chat: &ChatKey) -> mpsc::UnboundedSender<SendJob> {
    if let Some(sender) = state.workers.get(chat).filter(|sender| !sender.is_closed()) {
        return sender.clone();
    }
    let sender = ChatWorker {
        bot: state.bot.clone(),
        governor: state.governor.clone(),
        chat_id: chat.telegram_chat_id().unwrap_or_default(),
        thread_id: chat.telegram_thread_id(),
        agent: state.args.spec.name.clone(),
        store: state.args.store.clone(),
        events: state.args.events.clone(),
        cancel: state.cancel.child_token(),
        speech: state.args.speech.clone(),
        streaming: state.streaming.clone(),
        held: state.held.clone(),
    }
    .spawn();
    state.workers.insert(chat.clone(), sender.clone());
    sender
}

async fn deliver(state: &mut TelegramBotState, outbound: Outbound) {
    if outbound.chat.telegram_chat_id().is_none() {
        return;
    }
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
    let _ = worker(state, &outbound.chat).send(job);
}

/// What to do with each stored update; statuses are written together at the end.
async fn dispatch(
    myself: &ActorRef<BotMsg>,
    state: &mut TelegramBotState,
    updates: Vec<StoredUpdate>,
) -> Result<(), ActorProcessingErr> {
    let username = state.username.clone().unwrap_or_default();
    let mut statuses: Vec<(i64, UpdateStatus, Option<String>)> = Vec::new();
    for update in updates {
        match intake::read(&update.payload, state.bot_id, &username) {
            Intake::Unsupported(why) => {
                statuses.push((update.id, UpdateStatus::Ignored, Some(why)))
            }
            Intake::Callback(callback) => {
                on_callback(state, callback).await;
                statuses.push((update.id, UpdateStatus::Processed, Some("callback".into())));
            }
            Intake::Message(message) => {
                if let Some((status, note)) = on_message(myself, state, &update, message).await {
                    statuses.push((update.id, status, note));
                }
            }
        }
    }
    let now = crate::clock::now_ms();
    // Recoverable: an update whose status a power cut loses is pending again and dispatched
    // again; its session keeps one copy (unique on the update).
    state
        .args
        .store
        .write_recoverable(move |conn| {
            for (id, status, note) in &statuses {
                queries::set_status(conn, *id, *status, note.as_deref(), now)?;
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|error| {
            // A store fault is not the bot's: restarting it would not help, and a bot that
            // exhausted its restarts would sit out the fault's end. The sweep hands these
            // updates over again (a session takes each update once).
            tracing::debug!(agent = %state.args.spec.name, %error, "could not record the updates' statuses; the sweep hands them over again");
        });
    Ok(())
}

use commands::*;
use inbound::*;

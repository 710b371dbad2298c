//! ChannelAccount(channel, agent): one per account of a seam channel (WhatsApp, Signal): the
//! seam's actor half (`crate::channel` says what an adapter
//! implements and what this gives it).
//!
//! Starting: a task asks the adapter's `check` (WhatsApp: the phone number on the Graph API).
//! Only when it succeeds is the account online and its send worker and 30 s sweep started; when
//! it fails the actor fails with the reason in words (shown failing in Studio) and the channel
//! supervisor starts it again with backoff; a refused credential (`Rejected`) stops it for good
//! with a clear event, since restarting cannot fix it.
//!
//! Inbound (`inbound.rs`): the channel's edge stored each message before acknowledging it (a
//! webhook in Studio, or the adapter's `inbound_edge` task, started once the account is online and
//! cancelled with it: Signal's event stream); on `Stored` (and every sweep) this actor reads what
//! is open, in order, and screens it (stranger, blocked, claim, pairing (`pairing.rs`), approval
//! buttons and the text form) before anything reaches the agent; media is saved in the
//! workspace's `inbox/` and voice notes transcribed first. A message reaches the
//! session exactly once (its event is unique on `-channel_inbound.id`).
//!
//! Outbound (`sender.rs`): one worker task per account sends outbox rows and notices in order,
//! split at the channel's limit, paced per person after a rate error, held (and reported) outside
//! the window when no template is configured, and marks a row delivered only after the channel
//! accepted every part.
//!
//! Background jobs (owner: this actor; cancelled with it through a drop guard): the send worker
//! (`outbox`; on restart the sweep re-queues undelivered rows; idempotent: a delivered row is
//! skipped), the 30 s sweep (`channel_inbound`, `outbox`; idempotent as above) and the adapter's
//! inbound edge, if any (`channel_inbound`; on restart it reconnects; idempotent: unique ids).
//!
//! Restart policy: transient under the channel supervisor, degraded when its budget is exhausted.

mod inbound;
mod pairing;
mod sender;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::channel::screen::FilePeople;
use crate::channel::{Adapter, OutPart, SendError, approval};
use crate::domain::{ChatKey, OutEvent, Outbound};
use crate::events::{EventBus, EventKind};
use crate::protocol::channel::ChannelMsg;
use crate::registry::Registry;
use crate::store::Store;
use sender::{Job, SenderArgs};

const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// What makes an account act: others' requests, and what its own tasks report.
#[expect(
    clippy::large_enum_variant,
    reason = "requests are almost every message; boxing them to shrink the rare task reports would cost an allocation each"
)]
pub enum AccountMsg {
    Request(ChannelMsg),
    /// The start task reached the channel: the account's name for people.
    Online {
        name: String,
    },
    /// The start task could not; `lasting` when restarting cannot help.
    StartFailed {
        reason: String,
        lasting: bool,
    },
    Sweep,
}

wraps_requests!(AccountMsg, ChannelMsg);

#[derive(Clone)]
pub struct ChannelAccountArgs {
    pub adapter: Arc<dyn Adapter>,
    pub agent: String,
    pub people: FilePeople,
    /// `[whatsapp] template` and its language: what goes outside the window.
    pub template: Option<(String, String)>,
    pub store: Store,
    pub registry: Registry,
    pub events: EventBus,
    pub workspace: PathBuf,
    pub voice: crate::voice::VoiceSettings,
    pub echo_transcripts: bool,
}

impl ChannelAccountArgs {
    fn subject(&self) -> String {
        crate::protocol::channel::name(self.adapter.channel(), &self.agent)
            .local()
            .to_string()
    }
}

pub struct ChannelAccount;

pub struct AccountState {
    args: ChannelAccountArgs,
    online: bool,
    jobs: Option<mpsc::UnboundedSender<Job>>,
    cancel: CancellationToken,
    _guard: DropGuard,
    sweeper: Option<tokio::task::JoinHandle<()>>,
}

impl Actor for ChannelAccount {
    type Msg = AccountMsg;
    type State = AccountState;
    type Arguments = ChannelAccountArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ChannelAccountArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let cancel = CancellationToken::new();
        Ok(AccountState {
            args,
            online: false,
            jobs: None,
            _guard: cancel.clone().drop_guard(),
            cancel,
            sweeper: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let adapter = state.args.adapter.clone();
        let cancel = state.cancel.clone();
        tokio::spawn(async move {
            let checked = tokio::select! {
                _ = cancel.cancelled() => return,
                checked = adapter.check() => checked,
            };
            let _ = match checked {
                Ok(name) => myself.cast(AccountMsg::Online { name }),
                Err(error) => myself.cast(AccountMsg::StartFailed {
                    lasting: matches!(error, SendError::Rejected(_)),
                    reason: error.to_string(),
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
            AccountMsg::Online { name } => on_online(&myself, state, &name).await,
            AccountMsg::StartFailed { reason, lasting } => {
                let subject = state.args.subject();
                let text = format!(
                    "The {} account of agent {} cannot start: {reason}",
                    channel_name(state.args.adapter.channel()),
                    state.args.agent
                );
                state
                    .args
                    .events
                    .publish(EventKind::BotStatus, &subject, &text);
                if lasting {
                    tracing::error!(account = %subject, "{text}; fix the credentials, then reload");
                    myself.stop(Some(text));
                    return Ok(());
                }
                return Err(text.into());
            }
            AccountMsg::Sweep => sweep(state).await,
            AccountMsg::Request(request) => on_request(state, request).await,
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

/// The channel's name for people.
fn channel_name(channel: &str) -> &'static str {
    match channel {
        "wa" => "WhatsApp",
        "sg" => "Signal",
        _ => "messaging",
    }
}

async fn on_online(myself: &ActorRef<AccountMsg>, state: &mut AccountState, name: &str) {
    state.online = true;
    let (sender, receiver) = mpsc::unbounded_channel();
    let worker = SenderArgs {
        adapter: state.args.adapter.clone(),
        agent: state.args.agent.clone(),
        template: state.args.template.clone(),
        store: state.args.store.clone(),
        events: state.args.events.clone(),
    };
    let cancel = state.cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = sender::run(worker, receiver) => {}
        }
    });
    state.jobs = Some(sender);
    // The channel's own inbound edge (Signal's event stream), only once the account is online:
    // nothing is taken from the channel before the account can dispatch it.
    let edge = state
        .args
        .adapter
        .inbound_edge(crate::channel::EdgeContext {
            store: state.args.store.clone(),
            events: state.args.events.clone(),
            registry: state.args.registry.clone(),
            agent: state.args.agent.clone(),
            cancel: state.cancel.child_token(),
        });
    if let Some(edge) = edge {
        tokio::spawn(edge);
    }
    let me = myself.clone();
    let cancel = state.cancel.clone();
    state.sweeper = Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(SWEEP_EVERY) => {}
            }
            if me.cast(AccountMsg::Sweep).is_err() {
                return;
            }
        }
    }));
    let subject = state.args.subject();
    tracing::info!(account = %subject, "the {} account {name} is online", channel_name(state.args.adapter.channel()));
    state
        .args
        .events
        .publish(EventKind::BotStatus, &subject, &format!("online as {name}"));
    if !state.args.people.names_anyone() {
        inbound::announce_claim_code(state).await;
    }
    sweep(state).await;
}

/// Dispatches what is open and queues every undelivered row again.
async fn sweep(state: &mut AccountState) {
    if !state.online {
        return;
    }
    inbound::dispatch_open(state).await;
    let (agent, channel) = (state.args.agent.clone(), state.args.adapter.channel());
    let pending = state
        .args
        .store
        .read(move |conn| crate::store::outbox::outbox_pending_channel(conn, &agent, channel))
        .await
        .unwrap_or_default();
    for row in pending {
        queue(state, Job::Outbox(row.id));
    }
}

fn queue(state: &AccountState, job: Job) {
    if let Some(jobs) = &state.jobs {
        let _ = jobs.send(job);
    }
}

/// The peer of a chat of this channel (`wa:4915…` → `4915…`).
fn peer_of(state: &AccountState, chat: &ChatKey) -> Option<String> {
    (chat.kind().seam_name() == Some(state.args.adapter.channel())).then(|| chat.id().to_string())
}

async fn on_request(state: &mut AccountState, request: ChannelMsg) {
    match request {
        ChannelMsg::IsOnline(reply) => {
            let _ = reply.send(state.online);
        }
        ChannelMsg::Stored => {
            if state.online {
                inbound::dispatch_open(state).await;
            }
        }
        ChannelMsg::Deliver(outbound) => deliver(state, outbound).await,
        ChannelMsg::PostApproval { chat, prompt } => {
            let Some(peer) = peer_of(state, &chat) else {
                return;
            };
            let capabilities = state.args.adapter.capabilities();
            let part = approval::render(
                &prompt,
                &capabilities,
                crate::whatsapp::client::BUTTON_BODY_LIMIT,
            );
            queue(state, Job::Part { peer, part });
        }
        ChannelMsg::Notify { chat, text } => {
            if let Some(peer) = peer_of(state, &chat) {
                queue(
                    state,
                    Job::Part {
                        peer,
                        part: OutPart::Text(text),
                    },
                );
            }
        }
    }
}

async fn deliver(state: &mut AccountState, outbound: Outbound) {
    let Some(peer) = peer_of(state, &outbound.chat) else {
        return;
    };
    match outbound.event {
        OutEvent::Final {
            outbox_id: Some(id),
            ..
        } => queue(state, Job::Outbox(id)),
        OutEvent::Final {
            text,
            outbox_id: None,
        }
        | OutEvent::Notice { text } => {
            queue(
                state,
                Job::Part {
                    peer,
                    part: OutPart::Text(text),
                },
            );
        }
        OutEvent::Silent { inbound_ids } => {
            let now = crate::clock::now_ms();
            let _ = state
                .args
                .store
                .write(move |conn| crate::store::channels::mark_answered(conn, &inbound_ids, now))
                .await;
        }
        OutEvent::Working => {
            // "typing…" while a run works (a no-op on channels without it); best effort.
            let adapter = state.args.adapter.clone();
            tokio::spawn(async move {
                let _ = adapter.typing(&peer, false).await;
            });
        }
        OutEvent::Partial { .. } | OutEvent::Tool { .. } => {}
    }
}

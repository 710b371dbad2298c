//! ApprovalDesk: every pending confirmation, durable, explainable, expiring.
//!
//! A request is stored (with its audit row) before it is shown anywhere. It is shown where an
//! approver can see it: with buttons in the Telegram chat (and privately to the agent's approvers
//! — the file's, and the owner who claimed its bot — when the requester is not one), as a notice in a terminal chat, and always in Studio's inbox.
//! When no approver can be reached the request is denied at once, with that reason — never a silent
//! wait. Expiry is enforced from the stored `expires_ms` by one timer for the earliest deadline;
//! expiry is a denial (`denied_timeout`) that the run and the chat are told about.
//!
//! A decision is stored, with its audit row, before anyone is told (the Telegram button press is
//! answered after this actor replied). Only approvers decide: the agent's Telegram approvers for
//! that agent's requests, the Studio operator, the terminal user for their own chat.
//!
//! A blocked (L3) action reaches the desk only where `[policy] allow_l3_once` lets the run ask:
//! it is shown in Studio alone (the chat was told by the run why it waits), never offered with a
//! grant, and only the Studio operator can allow it, once, by typing the action exactly
//! (`Decision::AllowBlockedOnce`). Without Studio nobody could, so it is refused at once.
//!
//! Restart: pending requests are reloaded, expired ones are expired (and reported), live ones are
//! posted again with fresh buttons (Telegram drops unanswered button presses after a while) — a
//! Telegram one when its bot says it is online (`BotOnline`), since bots start after this actor. Runs
//! waiting on them are resumed by their sessions and re-attach with `Request` (same run + call).
//!
//! A posted prompt's message id is recorded by retrying the record, never the post (`posted`).
//!
//! Background job: the expiry timer (owner: this actor; table `approvals`; one `send_after` for the
//! earliest deadline; cancelled with the actor; on restart recomputed from `expires_ms`; expiring
//! twice is a no-op).
//!
//! Restart policy: permanent.

mod decide;
mod posted;
mod request;
mod rules;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;

use crate::domain::{ChatKey, ChatKind, OutEvent, Outbound};
use crate::events::{EventBus, EventData, EventKind};
use crate::policy::RiskLevel;
use crate::protocol::approvals::{
    ApprovalDeskMsg, ApprovalRequest, ApprovalVerdict, GRANT_MINUTES, plain_duration,
};
use crate::protocol::channel::ChannelAccount;
use crate::protocol::telegram::{ApprovalPrompt, Bot};
use crate::registry::Registry;
use crate::store::Store;
use crate::store::approvals::{self as queries, ApprovalRow, ApprovalStatus};
use decide::on_decide;
use posted::{PostedPrompt, record_posted};
use request::on_request;

/// Who may approve an agent's requests over Telegram.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentApprovers {
    pub has_bot: bool,
    /// Telegram user ids (the agent's `approvers`, or its `allow_users` when none are set).
    pub telegram: Vec<i64>,
    /// Per seam channel (`wa`, `sg`): the file's approvers (or `allow_users`), normalized.
    pub channels: BTreeMap<String, Vec<String>>,
}

#[derive(Clone)]
pub struct ApprovalDeskArgs {
    pub store: Store,
    pub registry: Registry,
    pub events: EventBus,
    pub approvers: BTreeMap<String, AgentApprovers>,
    /// Studio runs: its operator can decide any request.
    pub studio: bool,
}

pub struct ApprovalDesk;

/// The one pending expiry timer: fires `ExpireDue` at the earliest deadline.
type ExpiryTimer = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<DeskMsg>>>;

pub struct DeskState {
    args: ApprovalDeskArgs,
    waiters: HashMap<String, Vec<RpcReplyPort<ApprovalVerdict>>>,
    deadlines: BinaryHeap<Reverse<(i64, String)>>,
    timer: Option<(i64, ExpiryTimer)>,
    /// Telegram requests pending from before this start, waiting for their bot to come online
    /// (bots start after this actor, staggered) to be posted again with fresh buttons.
    carried_over: HashSet<String>,
}

/// What makes the desk act: others' requests and its one expiry timer.
#[expect(
    clippy::large_enum_variant,
    reason = "requests are almost every message; boxing them to shrink the timer's would cost an allocation each"
)]
pub enum DeskMsg {
    Request(ApprovalDeskMsg),
    /// The earliest pending request's deadline passed.
    ExpireDue,
    /// A posted prompt's record to try again (the store refused it).
    RecordPosted(PostedPrompt),
}

wraps_requests!(DeskMsg, ApprovalDeskMsg);

impl Actor for ApprovalDesk {
    type Msg = DeskMsg;
    type State = DeskState;
    type Arguments = ApprovalDeskArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ApprovalDeskArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(DeskState {
            args,
            waiters: HashMap::new(),
            deadlines: BinaryHeap::new(),
            timer: None,
            carried_over: HashSet::new(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let pending = state.args.store.read(queries::pending).await?;
        let now = crate::clock::now_ms();
        let mut reposted = 0;
        for row in pending {
            state
                .deadlines
                .push(Reverse((row.expires_ms, row.id.clone())));
            if row.expires_ms <= now {
                continue;
            }
            let telegram =
                ChatKey::parse(&row.chat).is_some_and(|c| c.kind() == ChatKind::Telegram);
            if telegram && !bot_online(&state.args, &row.agent).await {
                // Shown when the agent's bot reports it is online (`BotOnline`).
                state.carried_over.insert(row.id.clone());
            } else {
                show(&state.args, &row, true).await;
                reposted += 1;
            }
        }
        if reposted > 0 {
            tracing::info!(reposted, "pending approvals posted again after a restart");
        }
        expire_due(&myself, state).await?;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            DeskMsg::Request(request) => on_message(&myself, state, request).await?,
            DeskMsg::ExpireDue => {
                state.timer = None;
                expire_due(&myself, state).await?;
            }
            DeskMsg::RecordPosted(posted) => record_posted(&myself, state, posted).await?,
        }
        Ok(())
    }
}

/// A request from outside: an approval to ask for or decide, a posted prompt, a bot back online,
/// a grant or rule to change.
async fn on_message(
    myself: &ActorRef<DeskMsg>,
    state: &mut DeskState,
    request: ApprovalDeskMsg,
) -> Result<(), ActorProcessingErr> {
    match request {
        ApprovalDeskMsg::Request(request, reply) => {
            on_request(myself, state, request, reply).await?
        }
        ApprovalDeskMsg::Decide(id, decision, decider, reply) => {
            let outcome = on_decide(state, &id, decision, &decider).await?;
            let _ = reply.send(outcome);
        }
        ApprovalDeskMsg::Posted {
            id,
            chat_id,
            message_id,
        } => {
            let posted = PostedPrompt {
                id,
                chat_id,
                message_id,
                tries: 0,
            };
            record_posted(myself, state, posted).await?
        }
        ApprovalDeskMsg::BotOnline { agent } => {
            if state.carried_over.is_empty() {
                return Ok(());
            }
            let pending = state.args.store.read(queries::pending).await?;
            let now = crate::clock::now_ms();
            let mut reposted = 0;
            for row in pending {
                if row.agent != agent || !state.carried_over.remove(&row.id) {
                    continue;
                }
                if row.expires_ms > now {
                    show(&state.args, &row, true).await;
                    reposted += 1;
                }
            }
            if reposted > 0 {
                tracing::info!(%agent, reposted, "pending approvals posted again after a restart");
            }
        }
        ApprovalDeskMsg::RevokeGrant { id, by, reply } => {
            let _ = reply.send(rules::revoke_grant(state, id, by).await?);
        }
        ApprovalDeskMsg::AddRule { rule, by, reply } => {
            let _ = reply.send(rules::add_rule(state, rule, by).await?);
        }
        ApprovalDeskMsg::DisableRule { id, by, reply } => {
            let _ = reply.send(rules::disable_rule(state, id, by).await?);
        }
    }
    Ok(())
}

fn nonce() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
    let mut rng = rand::rng();
    (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

async fn bot_online(args: &ApprovalDeskArgs, agent: &str) -> bool {
    Bot::new(&args.registry, agent).is_online().await
}

/// Where an approver can see this request; `None` when nowhere. A blocked (L3) action can only
/// be allowed in Studio.
async fn reachable(state: &DeskState, request: &ApprovalRequest) -> Option<&'static str> {
    if state.args.studio {
        return Some("studio");
    }
    if request.risk == RiskLevel::L3 {
        return None;
    }
    match request.chat.kind() {
        ChatKind::Local if request.chat.as_str().starts_with("cli:") => return Some("terminal"),
        kind if kind.is_seam_channel() => {
            let approvers = channel_approvers(&state.args, &request.agent, &request.chat).await;
            let account =
                ChannelAccount::for_chat(&state.args.registry, &request.agent, &request.chat)?;
            return (!approvers.is_empty() && account.is_online().await)
                .then_some(kind.seam_name().unwrap_or("channel"));
        }
        _ => {}
    }
    let approvers = state.args.approvers.get(&request.agent)?;
    if !approvers.has_bot
        || telegram_approvers(&state.args, &request.agent, approvers)
            .await
            .is_empty()
    {
        return None;
    }
    bot_online(&state.args, &request.agent)
        .await
        .then_some("telegram")
}

/// The agent's Telegram approvers: its file's, and the owner who claimed its bot (`people`).
async fn telegram_approvers(
    args: &ApprovalDeskArgs,
    agent: &str,
    approvers: &AgentApprovers,
) -> Vec<i64> {
    let mut all = approvers.telegram.clone();
    let agent = agent.to_string();
    if let Ok(Some(owner)) = args
        .store
        .read(move |conn| crate::store::people::owner(conn, &agent))
        .await
        && !all.contains(&owner.user_id)
    {
        all.push(owner.user_id);
    }
    all
}

/// The agent's approvers on the seam channel of `chat`: its file's, and the owner who claimed
/// the account (`channel_people`).
async fn channel_approvers(args: &ApprovalDeskArgs, agent: &str, chat: &ChatKey) -> Vec<String> {
    let Some(channel) = chat.kind().seam_name() else {
        return Vec::new();
    };
    let mut all = args
        .approvers
        .get(agent)
        .and_then(|approvers| approvers.channels.get(channel))
        .cloned()
        .unwrap_or_default();
    let (agent, channel_name) = (agent.to_string(), channel.to_string());
    if let Ok(Some(owner)) = args
        .store
        .read(move |conn| crate::store::channels::owner(conn, &agent, &channel_name))
        .await
        && !all.contains(&owner.user)
    {
        all.push(owner.user);
    }
    all
}

/// How long until `expires_ms`, as people read it ("40 s", "5 min").
fn expires_in(expires_ms: i64) -> String {
    let milliseconds = (expires_ms - crate::clock::now_ms()).max(0) as u64 + 999;
    plain_duration(Duration::from_millis(milliseconds))
}

/// The request as a person must see it: what the agent wants in a sentence, the whole action,
/// its risk, and the one grant offered (exactly this action, in this chat, for `GRANT_MINUTES`).
fn prompt(row: &ApprovalRow, again: bool) -> ApprovalPrompt {
    ApprovalPrompt {
        id: row.id.clone(),
        agent: row.agent.clone(),
        tool: row.tool.clone(),
        action: row.action.clone(),
        risk: row.risk.as_str().to_string(),
        reason: row.reason.clone(),
        expires_in: expires_in(row.expires_ms),
        again,
        grant_minutes: Some(GRANT_MINUTES),
        from_chat: None,
    }
}

/// Shows a pending request wherever approvers are: Telegram buttons, the terminal, Studio (events).
/// A Studio chat gets a `waiting_approval` tool event (its page draws the request as a card with
/// buttons); a blocked action is shown in Studio only.
async fn show(args: &ApprovalDeskArgs, row: &ApprovalRow, again: bool) {
    let Some(chat) = ChatKey::parse(&row.chat) else {
        return;
    };
    if row.chat.starts_with("studio:") {
        crate::channels::deliver(
            &args.registry,
            Outbound {
                agent: row.agent.clone(),
                chat,
                run_id: Some(row.run_id),
                correlation: None,
                event: OutEvent::Tool {
                    name: row.tool.clone(),
                    status: "waiting_approval".into(),
                },
            },
        );
        return;
    }
    if row.risk == RiskLevel::L3 {
        return;
    }
    let prompt = prompt(row, again);
    // A webhook trigger's run has nobody in its own chat: its requests are shown where its answer
    // is meant to go (the trigger's `deliver_to`, resolved when the delivery started).
    let (chat, prompt) = if chat.kind() == ChatKind::Trigger {
        let Some(meant_for) = trigger_destination(args, chat.id()).await else {
            return;
        };
        let from = ApprovalPrompt {
            from_chat: Some(chat),
            ..prompt
        };
        (meant_for, from)
    } else {
        (chat, prompt)
    };
    match chat.kind() {
        ChatKind::Telegram => {
            let bot = Bot::new(&args.registry, &row.agent);
            let chat_id = chat.telegram_chat_id().unwrap_or_default();
            // In the conversation that asked: a forum topic's key posts it in that topic.
            bot.post_approval(chat.clone(), prompt.clone());
            // Approvers who are not in this chat get it privately.
            if let Some(approvers) = args.approvers.get(&row.agent) {
                for approver in telegram_approvers(args, &row.agent, approvers)
                    .await
                    .iter()
                    .filter(|approver| **approver != chat_id)
                {
                    let private = ApprovalPrompt {
                        from_chat: prompt.from_chat.clone().or_else(|| Some(chat.clone())),
                        ..prompt.clone()
                    };
                    bot.post_approval(ChatKey::telegram(*approver), private);
                }
            }
        }
        ChatKind::Local => crate::channels::deliver(
            &args.registry,
            Outbound {
                agent: row.agent.clone(),
                chat,
                run_id: Some(row.run_id),
                correlation: None,
                event: OutEvent::Notice {
                    text: prompt.plain_text(),
                },
            },
        ),
        ChatKind::WhatsApp | ChatKind::Signal => {
            let Some(account) = ChannelAccount::for_chat(&args.registry, &row.agent, &chat) else {
                return;
            };
            account.post_approval(chat.clone(), prompt.clone());
            // Approvers who are not this conversation get it in their own.
            for approver in channel_approvers(args, &row.agent, &chat).await {
                if let Some(theirs) =
                    ChatKey::seam(chat.kind().seam_name().unwrap_or(""), &approver)
                    && theirs != chat
                {
                    let private = ApprovalPrompt {
                        from_chat: prompt.from_chat.clone().or_else(|| Some(chat.clone())),
                        ..prompt.clone()
                    };
                    account.post_approval(theirs, private);
                }
            }
        }
        ChatKind::Schedule | ChatKind::Handoff | ChatKind::Trigger => {}
    }
}

/// The chat the running delivery of trigger `name` is meant for, when it is a person's channel.
async fn trigger_destination(args: &ApprovalDeskArgs, name: &str) -> Option<ChatKey> {
    let name = name.to_string();
    let stored = args
        .store
        .read(move |conn| crate::store::triggers::running_destination(conn, &name))
        .await
        .ok()
        .flatten()?;
    ChatKey::parse(&stored).filter(|chat| chat.kind().has_outbox())
}

fn resolve_message(args: &ApprovalDeskArgs, row: &ApprovalRow, text: &str) {
    if let (Some(chat_id), Some(message_id)) = (row.tg_chat_id, row.tg_message_id) {
        Bot::new(&args.registry, &row.agent).resolve_approval(
            chat_id,
            message_id as i32,
            text.to_string(),
        );
    }
}

fn arm_timer(myself: &ActorRef<DeskMsg>, state: &mut DeskState) {
    let Some(Reverse((earliest, _))) = state.deadlines.peek() else {
        return;
    };
    let earliest = *earliest;
    if let Some((armed_for, _)) = &state.timer
        && *armed_for <= earliest
    {
        return;
    }
    if let Some((_, handle)) = state.timer.take() {
        handle.abort();
    }
    let delay = Duration::from_millis((earliest - crate::clock::now_ms()).max(0) as u64);
    let handle = myself.send_after(delay, || DeskMsg::ExpireDue);
    state.timer = Some((earliest, handle));
}

async fn expire_due(
    myself: &ActorRef<DeskMsg>,
    state: &mut DeskState,
) -> Result<(), ActorProcessingErr> {
    let now = crate::clock::now_ms();
    let mut due = Vec::new();
    while let Some(Reverse((at, _))) = state.deadlines.peek() {
        if *at > now {
            break;
        }
        if let Some(Reverse((_, id))) = state.deadlines.pop() {
            due.push(id);
        }
    }
    if !due.is_empty() {
        let ids = due.clone();
        let expired: Vec<ApprovalRow> = state
            .args
            .store
            .write(move |conn| {
                let mut expired = Vec::new();
                for id in &ids {
                    if queries::decide(conn, id, ApprovalStatus::DeniedTimeout, "system", now)? {
                        crate::audit::append(
                            conn,
                            "system",
                            "approval.expired",
                            id,
                            &json!({"decision": "denied_timeout"}),
                        )?;
                        if let Some(row) = queries::get(conn, id)? {
                            expired.push(row);
                        }
                    }
                }
                Ok(expired)
            })
            .await?;
        for row in expired {
            crate::audit::announce(&state.args.events, "approval.expired", &row.id);
            for waiter in state.waiters.remove(&row.id).unwrap_or_default() {
                let _ = waiter.send(ApprovalVerdict::Denied {
                    id: row.id.clone(),
                    reason: "nobody approved it in time (the request expired)".into(),
                });
            }
            resolve_message(
                &state.args,
                &row,
                &format!(
                    "⌛ Expired: nobody decided in time, so it did not run: `{}`",
                    row.action.chars().take(300).collect::<String>()
                ),
            );
            state.args.events.publish_data(
                EventKind::ApprovalDecided,
                &format!("approval:{}", row.id),
                "denied_timeout",
                EventData::ApprovalExpired {
                    id: row.id.clone(),
                    agent: row.agent.clone(),
                    expires_ms: row.expires_ms,
                    expired_ms: now,
                },
            );
        }
    }
    arm_timer(myself, state);
    Ok(())
}

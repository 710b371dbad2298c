//! Contract(id): one open handoff, from the subtask sent to the delegate to the outcome delivered
//! to the owner.
//!
//! Lifecycle (persisted at every transition, with a timeline row): `created → accepted →
//! in_progress → returned | failed | expired | cancelled`. The delegate works in its own
//! conversation (`handoff:<id>`); its final answer (or what it passed to `handoff_return`) is the
//! result. With a validator, the result is reviewed in `handoff:<id>.review` (APPROVE, or
//! REJECT: reason); a rejection goes back to the delegate as feedback; the third rejection fails
//! the contract.
//!
//! Architecture Invariant: the owner owns the answer: a delegate's output reaches only its
//! contract (`channels::deliver` routes `handoff:` chats to this actor), never the user, and the
//! result enters the owner's run as data.
//! Architecture Invariant: a contract's outcome reaches the owner exactly once: to the waiting
//! `handoff_task` call, or — when nobody waits any more (the run ended, or the daemon restarted)
//! — into the owner's conversation as a pending message written in the same transaction as
//! `delivered_ms`, after which the owner is woken to answer it. (Known window: a crash after the
//! waiting call was answered but before its tool result was recorded loses that one delivery.)
//!
//! Restart: the actor reloads its row. A contract created but not yet sent is sent; one in
//! progress whose delegate has nothing pending takes the delegate's last answer (it finished while
//! the daemon was down) or sends the subtask again (it never arrived); an ended one not yet
//! delivered is delivered.
//!
//! Background job: the deadline timer (owner: this actor; table `handoff_contracts`; `send_after`;
//! cancelled when the contract ends or the actor stops; recomputed from `deadline_ms` at start;
//! expiring an ended contract is a no-op).
//!
//! Every stored change is announced as `handoff_changed` once committed (Studio's Handoffs page).
//!
//! Restart policy: transient under the HandoffSupervisor (it stops normally when delivered).

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::domain::{ChatKey, Inbound, InboundSource, OutEvent, Outbound, Sender, SessionCommand};
use crate::events::{EventBus, EventKind};
use crate::protocol::agent::AgentMsg;
use crate::protocol::handoff::ContractOutcome;
use crate::registry::{Mailbox, Registry};
use crate::store::Store;
use crate::store::handoff::{self as queries, ContractRow, ContractStatus};

/// Rejections by the validator after which the contract fails (the "at most 2 retries").
pub const MAX_REJECTIONS: i64 = 3;

pub enum ContractMsg {
    /// A run waits for the outcome (the `handoff_task` call).
    Await(RpcReplyPort<ContractOutcome>),
    /// Output of the delegate's or the validator's conversation.
    Output(Outbound),
    Progress(String),
    /// The delegate's explicit result (`handoff_return`); its final answer then only closes.
    Return(String),
    Cancel {
        by: String,
        reply: RpcReplyPort<bool>,
    },
    Expire,
}

#[derive(Clone)]
pub struct ContractArgs {
    pub id: String,
    pub store: Store,
    pub registry: Registry,
    pub events: EventBus,
}

pub struct Contract;

pub struct ContractState {
    args: ContractArgs,
    row: ContractRow,
    waiters: Vec<RpcReplyPort<ContractOutcome>>,
    explicit_result: Option<String>,
}

/// The chat of a contract's review conversation.
pub fn review_chat(id: &str) -> ChatKey {
    ChatKey::handoff(&format!("{id}.review"))
}

impl Actor for Contract {
    type Msg = ContractMsg;
    type State = ContractState;
    type Arguments = ContractArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: ContractArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let id = args.id.clone();
        let row = args
            .store
            .read(move |conn| queries::get(conn, &id))
            .await?
            .ok_or_else(|| format!("contract {} is not in the database", args.id))?;
        Ok(ContractState {
            args,
            row,
            waiters: Vec::new(),
            explicit_result: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if !state.row.is_open() {
            deliver(&myself, state).await?;
            return Ok(());
        }
        let left = state.row.deadline_ms - crate::clock::now_ms();
        if left <= 0 {
            let _ = myself.cast(ContractMsg::Expire);
            return Ok(());
        }
        myself.send_after(Duration::from_millis(left as u64), || ContractMsg::Expire);
        match state.row.status {
            ContractStatus::Created | ContractStatus::Accepted => send_subtask(state, None).await?,
            _ => resume(&myself, state).await?,
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ContractMsg::Await(reply) => state.waiters.push(reply),
            ContractMsg::Output(outbound) => {
                let OutEvent::Final { text, .. } = outbound.event else {
                    return Ok(());
                };
                if outbound.chat == review_chat(&state.row.id) {
                    on_review(&myself, state, text).await?;
                } else {
                    let result = state.explicit_result.take().unwrap_or(text);
                    on_result(&myself, state, result).await?;
                }
            }
            ContractMsg::Progress(note) => {
                let (id, now) = (state.row.id.clone(), crate::clock::now_ms());
                state
                    .args
                    .store
                    .write(move |conn| queries::timeline(conn, &id, "progress", &note, now))
                    .await?;
                announce(&state.args.events, &state.row, "progress");
            }
            ContractMsg::Return(result) => state.explicit_result = Some(result),
            ContractMsg::Cancel { by, reply } => {
                let ended = end(
                    &myself,
                    state,
                    ContractStatus::Cancelled,
                    format!("cancelled by {by}"),
                )
                .await?;
                let _ = reply.send(ended);
            }
            ContractMsg::Expire => {
                let reason = "the deadline passed before the delegate returned".to_string();
                end(&myself, state, ContractStatus::Expired, reason).await?;
            }
        }
        Ok(())
    }
}

/// `handoff_changed` for a stored change of a contract (call it after the write committed); the
/// HandoffSupervisor announces a contract's creation the same way.
pub fn announce(events: &EventBus, row: &ContractRow, change: &str) {
    events.publish_data(
        EventKind::HandoffChanged,
        &format!("contract:{}", row.id),
        change,
        crate::events::EventData::HandoffChanged {
            id: row.id.clone(),
            status: row.status.as_str().to_string(),
            change: change.to_string(),
            owner: row.owner.clone(),
            delegate: row.delegate.clone(),
        },
    );
}

fn agent(state: &ContractState, name: &str) -> Option<Mailbox<AgentMsg>> {
    state
        .args
        .registry
        .lookup(&crate::protocol::agent::name(name))
}

/// Sends the subtask (or, with `feedback`, the validator's rejection) to the delegate.
async fn send_subtask(
    state: &mut ContractState,
    feedback: Option<&str>,
) -> Result<(), ActorProcessingErr> {
    let row = &state.row;
    let text = match feedback {
        None => format!(
            "A task delegated to you by {} (contract {}). Your answer goes back to {}, not to the user.\n\n\
             Task: {}\n{}\nDeadline: {} minutes from now.",
            row.owner,
            row.id,
            row.owner,
            row.subtask,
            if row.expected.is_empty() {
                String::new()
            } else {
                format!("Expected output: {}\n", row.expected)
            },
            ((row.deadline_ms - crate::clock::now_ms()).max(0) / 60_000).max(1)
        ),
        Some(reason) => format!(
            "The reviewer rejected your work on contract {}: {reason}\nFix it and answer again with the complete result.",
            row.id
        ),
    };
    let (id, now) = (row.id.clone(), crate::clock::now_ms());
    state
        .args
        .store
        .write(move |conn| {
            queries::transition(
                conn,
                &id,
                ContractStatus::Accepted,
                "sent to the delegate",
                now,
            )?;
            queries::transition(
                conn,
                &id,
                ContractStatus::InProgress,
                "the delegate is working",
                now,
            )?;
            Ok(())
        })
        .await?;
    state.row.status = ContractStatus::InProgress;
    announce(
        &state.args.events,
        &state.row,
        ContractStatus::InProgress.as_str(),
    );
    let Some(delegate) = agent(state, &state.row.delegate) else {
        return Err(format!("the delegate `{}` is not running", state.row.delegate).into());
    };
    delegate.cast(AgentMsg::Inbound(contract_inbound(
        &state.row,
        &state.row.delegate,
        ChatKey::handoff(&state.row.id),
        Sender::new(format!("handoff:{}", state.row.owner), &state.row.owner),
        text,
    )))?;
    Ok(())
}

/// A message of a contract to one of its agents (the delegate, or the validator).
fn contract_inbound(
    row: &ContractRow,
    agent: &str,
    chat: ChatKey,
    sender: Sender,
    text: String,
) -> Inbound {
    Inbound {
        agent: agent.to_string(),
        chat,
        sender,
        text,
        attachments: Vec::new(),
        source: InboundSource::Handoff {
            contract_id: row.id.clone(),
        },
        received_ms: crate::clock::now_ms(),
        correlation: None,
        context: None,
    }
}

/// After a restart, while in progress: pick up what happened while the daemon was down.
async fn resume(
    myself: &ActorRef<ContractMsg>,
    state: &mut ContractState,
) -> Result<(), ActorProcessingErr> {
    let (delegate, chat) = (
        state.row.delegate.clone(),
        ChatKey::handoff(&state.row.id).as_str().to_string(),
    );
    let (busy, answer, started) = state
        .args
        .store
        .read(move |conn| {
            let busy = crate::store::sessions::with_pending_work(conn)?
                .iter()
                .any(|(agent, pending)| *agent == delegate && *pending == chat);
            let started = crate::store::sessions::active(conn, &delegate, &chat)?.is_some();
            Ok((busy, queries::last_answer(conn, &delegate, &chat)?, started))
        })
        .await?;
    if busy {
        // The delegate's session resumes its own work; its answer arrives as usual.
        return Ok(());
    }
    match answer {
        Some(answer) => {
            let _ = myself.cast(ContractMsg::Output(Outbound {
                agent: state.row.delegate.clone(),
                chat: ChatKey::handoff(&state.row.id),
                run_id: None,
                correlation: None,
                event: OutEvent::Final {
                    text: answer,
                    outbox_id: None,
                },
            }));
            Ok(())
        }
        None if !started => send_subtask(state, None).await,
        None => Ok(()),
    }
}

async fn on_result(
    myself: &ActorRef<ContractMsg>,
    state: &mut ContractState,
    result: String,
) -> Result<(), ActorProcessingErr> {
    if !state.row.is_open() {
        return Ok(());
    }
    let Some(validator) = state.row.validator.clone() else {
        return finish(myself, state, ContractStatus::Returned, result).await;
    };
    state.row.result = Some(result.clone());
    let (id, now, candidate) = (state.row.id.clone(), crate::clock::now_ms(), result.clone());
    state
        .args
        .store
        .write(move |conn| {
            conn.execute(
                "UPDATE handoff_contracts SET result = ?2, updated_ms = ?3 WHERE id = ?1",
                rusqlite::params![id, candidate, now],
            )?;
            queries::timeline(conn, &id, "review", "sent to the validator", now)
        })
        .await?;
    announce(&state.args.events, &state.row, "review");
    let Some(reviewer) = agent(state, &validator) else {
        return end(
            myself,
            state,
            ContractStatus::Failed,
            format!("the validator `{validator}` is not running"),
        )
        .await
        .map(|_| ());
    };
    let text = format!(
        "Review the work delegated to {} under contract {}.\nTask: {}\n{}\nWork to review:\n<work>\n{}\n</work>\n\n\
         Answer with APPROVE if it fulfils the task, or REJECT: <what is wrong> if it does not.",
        state.row.delegate,
        state.row.id,
        state.row.subtask,
        if state.row.expected.is_empty() {
            String::new()
        } else {
            format!("Expected output: {}", state.row.expected)
        },
        result
    );
    reviewer.cast(AgentMsg::Inbound(contract_inbound(
        &state.row,
        &validator,
        review_chat(&state.row.id),
        Sender::new("handoff", "handoff review"),
        text,
    )))?;
    Ok(())
}

async fn on_review(
    myself: &ActorRef<ContractMsg>,
    state: &mut ContractState,
    verdict: String,
) -> Result<(), ActorProcessingErr> {
    if !state.row.is_open() {
        return Ok(());
    }
    let trimmed = verdict.trim();
    if trimmed.to_ascii_uppercase().starts_with("APPROVE") {
        let result = state.row.result.clone().unwrap_or_default();
        return finish(myself, state, ContractStatus::Returned, result).await;
    }
    let reason = trimmed
        .split_once(':')
        .map(|(_, reason)| reason.trim())
        .filter(|reason| !reason.is_empty())
        .unwrap_or(trimmed)
        .to_string();
    let (id, now, detail) = (state.row.id.clone(), crate::clock::now_ms(), reason.clone());
    let rejections = state
        .args
        .store
        .write(move |conn| {
            queries::timeline(conn, &id, "rejected", &detail, now)?;
            queries::count_attempt(conn, &id, now)
        })
        .await?;
    announce(&state.args.events, &state.row, "rejected");
    if rejections >= MAX_REJECTIONS {
        end(
            myself,
            state,
            ContractStatus::Failed,
            format!("the validator rejected the work {rejections} times; last: {reason}"),
        )
        .await?;
        return Ok(());
    }
    send_subtask(state, Some(&reason)).await
}

async fn finish(
    myself: &ActorRef<ContractMsg>,
    state: &mut ContractState,
    status: ContractStatus,
    text: String,
) -> Result<(), ActorProcessingErr> {
    let (id, now, stored) = (state.row.id.clone(), crate::clock::now_ms(), text.clone());
    let changed = state
        .args
        .store
        .write(move |conn| {
            let (result, reason) = if status == ContractStatus::Returned {
                (Some(stored.as_str()), None)
            } else {
                (None, Some(stored.as_str()))
            };
            queries::finish(conn, &id, status, result, reason, now)
        })
        .await?;
    if !changed {
        return Ok(());
    }
    state.row.status = status;
    if status == ContractStatus::Returned {
        state.row.result = Some(text);
    } else {
        state.row.reason = Some(text);
    }
    announce(&state.args.events, &state.row, status.as_str());
    deliver(myself, state).await
}

/// Ends an open contract early (failed, expired, cancelled): the delegate's work is stopped.
async fn end(
    myself: &ActorRef<ContractMsg>,
    state: &mut ContractState,
    status: ContractStatus,
    reason: String,
) -> Result<bool, ActorProcessingErr> {
    if !state.row.is_open() {
        return Ok(false);
    }
    for (name, chat) in [
        (state.row.delegate.clone(), ChatKey::handoff(&state.row.id)),
        (
            state.row.validator.clone().unwrap_or_default(),
            review_chat(&state.row.id),
        ),
    ] {
        if let Some(agent) = agent(state, &name) {
            let _ = agent.cast(AgentMsg::Command(chat, SessionCommand::Stop));
        }
    }
    finish(myself, state, status, reason).await?;
    Ok(true)
}

/// Gives the outcome to a waiting run, or else into the owner's conversation; exactly once.
async fn deliver(
    myself: &ActorRef<ContractMsg>,
    state: &mut ContractState,
) -> Result<(), ActorProcessingErr> {
    if state.row.delivered_ms.is_some() {
        myself.stop(None);
        return Ok(());
    }
    let outcome = ContractOutcome {
        id: state.row.id.clone(),
        status: state.row.status,
        delegate: state.row.delegate.clone(),
        text: state.row.outcome_text(),
    };
    state.waiters.retain(|waiter| !waiter.is_closed());
    let now = crate::clock::now_ms();
    if !state.waiters.is_empty() {
        let id = state.row.id.clone();
        let first = state
            .args
            .store
            .write(move |conn| queries::mark_delivered(conn, &id, "to the waiting run", now))
            .await?;
        if first {
            for waiter in state.waiters.drain(..) {
                let _ = waiter.send(outcome.clone());
            }
        }
    } else {
        let (row, text) = (state.row.clone(), outcome.as_data());
        let delivered = state
            .args
            .store
            .write(move |conn| queries::deliver_into_session(conn, &row, &text, now))
            .await?;
        if delivered
            && let Some(owner) = agent(state, &state.row.owner)
            && let Some(chat) = ChatKey::parse(&state.row.owner_chat)
        {
            let _ = owner.cast(AgentMsg::Wake(chat));
        }
    }
    state.row.delivered_ms = Some(now);
    announce(&state.args.events, &state.row, "delivered");
    myself.stop(None);
    Ok(())
}

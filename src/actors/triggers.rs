//! Triggers: runs each stored webhook delivery of `[[triggers]]` once (issue #32).
//!
//! A delivery is in `trigger_deliveries` before this actor hears of it (`triggers::Receiver`), so
//! the table is the queue: at start and every [`CHECK_EVERY`] the actor reads the open rows. Per
//! trigger one delivery runs at a time (a session's run claims every pending message, so two
//! at once would share one answer): the row is marked running, then the agent gets the message
//! (`triggers::prompt`, the body labelled untrusted) in session `trigger:<name>`, correlated
//! `trigger-delivery:<id>`. The run's final answer comes back here through `channels::deliver`;
//! the row's end, the answer's outbox row (any person's channel: `tg:`, `wa:`, `sg:`; the row's
//! chat names the channel whose worker sends it) and the audit row commit in one transaction, and
//! the answer is handed to the destination's channel.
//!
//! After a crash a running row is reconciled like a scheduled fire: its message not in the
//! session → sent again; in the session with the run ended → the run's recorded outcome ends
//! the row; pending or running → the session resumes it and answers. So a delivery stored
//! before a kill -9 runs once after the restart.
//!
//! Destinations: `owner` is the agent's claimed owner's private chat on the channel they claimed,
//! else its first approver's (`triggers::destination`); a chat key is used as the config
//! normalized it; `none` records the answer only.
//!
//! Background job: the check timer. Owner: this actor; table: `trigger_deliveries`; cancelled
//! with the actor; on restart the open rows are read again; idempotent (guarded updates).
//! Restart policy: permanent (the root's).

use std::collections::HashMap;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::config::{AgentSpec, DeliverTo};
use crate::domain::{ChatKey, ChatKind, Inbound, InboundSource, OutEvent, Outbound, Sender};
use crate::events::EventBus;
use crate::protocol::agent::AgentMsg;
use crate::protocol::triggers::TriggersMsg;
use crate::registry::Registry;
use crate::store::Store;
use crate::store::runs::{self, RunStatus};
use crate::store::triggers::{self as queries, DeliveryRow, DeliveryStatus, Ending};
use crate::triggers::{BookEntry, TriggerBook};

/// How often open deliveries are looked at (missed messages, runs that never answered).
const CHECK_EVERY: Duration = Duration::from_secs(5);
/// A running delivery without an answer this long is looked up in the database.
const RECONCILE_AFTER_MS: i64 = 30_000;
/// When the agent could not be reached, the message is tried again this soon.
const AGENT_RETRY_MS: i64 = 2_000;

/// What makes the actor act: others' requests and its timer.
pub enum TriggersEvent {
    Request(TriggersMsg),
    /// The check timer fired.
    Check,
}

wraps_requests!(TriggersEvent, TriggersMsg);

#[derive(Clone)]
pub struct TriggersArgs {
    pub store: Store,
    pub events: EventBus,
    pub registry: Registry,
    pub book: TriggerBook,
    pub agents: Vec<AgentSpec>,
}

/// The delivery a trigger is running.
#[derive(Debug, Clone, Copy)]
struct Running {
    id: i64,
    /// When to look it up in the database if no answer came.
    check_at_ms: i64,
}

pub struct TriggersActor;

pub struct TriggersState {
    args: TriggersArgs,
    /// Itself: an ended delivery asks for a check, which starts the trigger's next one.
    myself: ActorRef<TriggersEvent>,
    /// By trigger name.
    running: HashMap<String, Running>,
    timer: Option<tokio::task::JoinHandle<Result<(), ractor::MessagingErr<TriggersEvent>>>>,
}

/// The correlation id of delivery `id`'s run.
fn correlation(id: i64) -> String {
    format!("trigger-delivery:{id}")
}

impl Actor for TriggersActor {
    type Msg = TriggersEvent;
    type State = TriggersState;
    type Arguments = TriggersArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: TriggersArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let open = args.store.read(queries::open).await?;
        let now = crate::clock::now_ms();
        let mut running = HashMap::new();
        for row in open
            .iter()
            .filter(|row| row.status == DeliveryStatus::Running)
        {
            // Looked up at the first check: the session may have answered before the crash.
            running.entry(row.trigger.clone()).or_insert(Running {
                id: row.id,
                check_at_ms: now,
            });
        }
        // The first check runs at once; every check re-arms the timer.
        myself.send_message(TriggersEvent::Check)?;
        Ok(TriggersState {
            args,
            myself,
            running,
            timer: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TriggersEvent::Request(TriggersMsg::Stored { id }) => {
                let row = state
                    .args
                    .store
                    .read(move |conn| queries::get(conn, id))
                    .await?;
                if let Some(row) = row
                    && !state.running.contains_key(&row.trigger)
                {
                    start(state, row).await?;
                }
            }
            TriggersEvent::Request(TriggersMsg::Deliver(outbound)) => {
                on_answer(state, outbound).await?;
            }
            TriggersEvent::Check => {
                check(state).await?;
                if let Some(timer) = state.timer.take() {
                    timer.abort();
                }
                state.timer = Some(myself.send_after(CHECK_EVERY, || TriggersEvent::Check));
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        Ok(())
    }
}

/// Reconciles running deliveries whose check time came, and starts the next received delivery
/// of every trigger that runs nothing.
async fn check(state: &mut TriggersState) -> Result<(), ActorProcessingErr> {
    let now = crate::clock::now_ms();
    let due: Vec<(String, Running)> = state
        .running
        .iter()
        .filter(|(_, running)| running.check_at_ms <= now)
        .map(|(name, running)| (name.clone(), *running))
        .collect();
    for (name, running) in due {
        reconcile(state, &name, running).await?;
    }
    let open = state.args.store.read(queries::open).await?;
    for row in open {
        if row.status == DeliveryStatus::Received && !state.running.contains_key(&row.trigger) {
            start(state, row).await?;
        }
    }
    Ok(())
}

/// Marks `row` running and sends its message to the agent (a row started already is only
/// tracked: its message may be in the session).
async fn start(state: &mut TriggersState, row: DeliveryRow) -> Result<(), ActorProcessingErr> {
    let Some(entry) = state.args.book.get(&row.trigger) else {
        let detail = format!(
            "the trigger `{}` is no longer configured, so this delivery was not run",
            row.trigger
        );
        return finish(state, &row, DeliveryStatus::Failed, None, &detail, None).await;
    };
    let now = crate::clock::now_ms();
    let id = row.id;
    // Where the answer is meant to go is where the run's approval requests are shown too.
    let meant_for = destination(state, &row)
        .await
        .ok()
        .flatten()
        .map(|chat| chat.as_str().to_string());
    let started = state
        .args
        .store
        .write(move |conn| queries::start(conn, id, now, meant_for.as_deref()))
        .await?;
    if started {
        crate::triggers::publish(&state.args.events, &entry.config, id, "running");
    } else if row.status != DeliveryStatus::Running {
        return Ok(());
    }
    let sent = send(&state.args, &entry, &row, now);
    state.running.insert(
        row.trigger.clone(),
        Running {
            id,
            check_at_ms: now
                + if sent {
                    RECONCILE_AFTER_MS
                } else {
                    AGENT_RETRY_MS
                },
        },
    );
    Ok(())
}

/// Sends delivery `row`'s message to its agent; `false` when the agent is not reachable.
fn send(args: &TriggersArgs, entry: &BookEntry, row: &DeliveryRow, now: i64) -> bool {
    let Some(agent) = args
        .registry
        .lookup(&crate::protocol::agent::name(&row.agent))
    else {
        return false;
    };
    let inbound = Inbound {
        agent: row.agent.clone(),
        chat: ChatKey::trigger(&row.trigger),
        sender: Sender::new(format!("trigger:{}", row.trigger), "Webhook trigger"),
        text: crate::triggers::prompt(&entry.config, row.id, &row.body),
        attachments: Vec::new(),
        source: InboundSource::Trigger { delivery: row.id },
        received_ms: now,
        context: None,
        correlation: Some(correlation(row.id)),
    };
    agent.cast(AgentMsg::Inbound(inbound)).is_ok()
}

/// Looks up in the database where a running delivery got to (see the module header).
async fn reconcile(
    state: &mut TriggersState,
    name: &str,
    running: Running,
) -> Result<(), ActorProcessingErr> {
    let id = running.id;
    let Some(row) = state
        .args
        .store
        .read(move |conn| queries::get(conn, id))
        .await?
    else {
        state.running.remove(name);
        return Ok(());
    };
    if row.status != DeliveryStatus::Running {
        state.running.remove(name);
        return Ok(());
    }
    let (agent, chat) = (
        row.agent.clone(),
        ChatKey::trigger(&row.trigger).to_string(),
    );
    let marker = crate::triggers::prompt_marker(id);
    let found = state
        .args
        .store
        .read(move |conn| {
            let Some(run_id) =
                crate::store::schedules::delivered_prompt(conn, &agent, &chat, &marker)?
            else {
                return Ok(None);
            };
            let run = match run_id {
                Some(run_id) => runs::get(conn, run_id)?,
                None => None,
            };
            Ok(Some((run_id, run)))
        })
        .await?;
    let now = crate::clock::now_ms();
    match found {
        None => {
            // The message never reached the session: send it again.
            let sent = match state.args.book.get(&row.trigger) {
                Some(entry) => send(&state.args, &entry, &row, now),
                None => false,
            };
            if sent {
                tracing::info!(
                    trigger = name,
                    delivery = id,
                    "a trigger's delivery was sent to its agent again"
                );
            }
            let wait = if sent {
                RECONCILE_AFTER_MS
            } else {
                AGENT_RETRY_MS
            };
            state.running.insert(
                name.to_string(),
                Running {
                    id,
                    check_at_ms: now + wait,
                },
            );
        }
        Some((Some(run_id), Some(run))) if !run.status.is_open() => {
            let text = run.outcome.clone().unwrap_or_default();
            end_run(state, &row, run.status, text, Some(run_id)).await?;
        }
        Some(_) => {
            state.running.insert(
                name.to_string(),
                Running {
                    id,
                    check_at_ms: now + RECONCILE_AFTER_MS,
                },
            );
        }
    }
    Ok(())
}

/// A trigger run's output: its final answer ends the running delivery.
async fn on_answer(
    state: &mut TriggersState,
    outbound: Outbound,
) -> Result<(), ActorProcessingErr> {
    let OutEvent::Final { text, .. } = &outbound.event else {
        return Ok(());
    };
    if outbound.chat.kind() != ChatKind::Trigger {
        return Ok(());
    }
    let name = outbound.chat.id().to_string();
    let Some(running) = state.running.get(&name).copied() else {
        return Ok(());
    };
    if outbound
        .correlation
        .as_ref()
        .is_some_and(|given| *given != correlation(running.id))
    {
        return Ok(());
    }
    let id = running.id;
    let Some(row) = state
        .args
        .store
        .read(move |conn| queries::get(conn, id))
        .await?
    else {
        return Ok(());
    };
    let status = match outbound.run_id {
        Some(run_id) => state
            .args
            .store
            .read(move |conn| runs::get(conn, run_id))
            .await?
            .map_or(RunStatus::Succeeded, |run| run.status),
        None => RunStatus::Succeeded,
    };
    end_run(state, &row, status, text.clone(), outbound.run_id).await
}

/// Ends `row` for a run that ended with `status` and `text`.
async fn end_run(
    state: &mut TriggersState,
    row: &DeliveryRow,
    status: RunStatus,
    text: String,
    run_id: Option<i64>,
) -> Result<(), ActorProcessingErr> {
    if status == RunStatus::Succeeded {
        return finish(
            state,
            row,
            DeliveryStatus::Succeeded,
            Some(text),
            "",
            run_id,
        )
        .await;
    }
    let detail = format!("the run ended {}: {}", status.as_str(), shorten(&text, 300));
    finish(state, row, DeliveryStatus::Failed, None, &detail, run_id).await
}

/// Where `row`'s answer goes: a chat, or why nowhere.
async fn destination(state: &TriggersState, row: &DeliveryRow) -> Result<Option<ChatKey>, String> {
    let Some(entry) = state.args.book.get(&row.trigger) else {
        return Err("the trigger is no longer configured".into());
    };
    match entry.config.destination() {
        DeliverTo::Nowhere => Err("deliver_to is \"none\": the answer is only recorded".into()),
        DeliverTo::Chat(key) => ChatKey::parse(&key).map(Some).ok_or_else(|| {
            format!("this daemon has no channel for `{key}`, so the answer was only recorded")
        }),
        DeliverTo::Owner => {
            let Some(spec) = state
                .args
                .agents
                .iter()
                .find(|spec| spec.name == row.agent)
                .cloned()
            else {
                return Err(format!("agent {} is no longer configured", row.agent));
            };
            let agent = spec.name.clone();
            let owner = state
                .args
                .store
                .read(move |conn| crate::triggers::destination::owner_chat(conn, &spec))
                .await
                .map_err(|error| format!("the agent's owner could not be read: {error}"))?;
            owner.map(Some).ok_or_else(|| {
                format!(
                    "agent {agent} has no claimed owner or approver yet, so the answer was only recorded"
                )
            })
        }
    }
}

/// Ends `row` (its row, outbox row and audit row in one transaction), hands the answer or a
/// notice of the failure to the destination, and starts the trigger's next delivery.
async fn finish(
    state: &mut TriggersState,
    row: &DeliveryRow,
    status: DeliveryStatus,
    answer: Option<String>,
    detail: &str,
    run_id: Option<i64>,
) -> Result<(), ActorProcessingErr> {
    let target = destination(state, row).await;
    let message = match (&answer, status) {
        (Some(answer), _) => Some(answer.clone()),
        (None, DeliveryStatus::Failed) => Some(format!(
            "The webhook trigger \"{}\" could not be handled: {detail}. Studio's Triggers page shows the delivery.",
            row.trigger
        )),
        _ => None,
    };
    let detail = match (&target, detail.is_empty()) {
        (Err(why), true) => why.clone(),
        (Ok(Some(chat)), true) => format!("sent to {}", chat_in_words(chat)),
        _ => detail.to_string(),
    };
    let chat = target.ok().flatten();
    let write = FinishWrite {
        id: row.id,
        trigger: row.trigger.clone(),
        agent: row.agent.clone(),
        status,
        chat: chat.clone(),
        answer,
        message: message.clone(),
        detail,
        run_id,
    };
    let written = state
        .args
        .store
        .write(move |conn| write.apply(conn))
        .await?;
    state.running.remove(&row.trigger);
    if let Some(outbox_id) = written {
        let action = audit_action(status);
        crate::audit::announce(
            &state.args.events,
            action,
            &format!("trigger:{}", row.trigger),
        );
        if let Some(entry) = state.args.book.get(&row.trigger) {
            crate::triggers::publish(&state.args.events, &entry.config, row.id, status.as_str());
        }
        if let (Some(chat), Some(text)) = (chat, message) {
            let event = match chat.kind() {
                kind if kind.has_outbox() => OutEvent::Final { text, outbox_id },
                _ => OutEvent::Notice { text },
            };
            crate::channels::deliver(
                &state.args.registry,
                Outbound {
                    agent: row.agent.clone(),
                    chat,
                    run_id: None,
                    correlation: None,
                    event,
                },
            );
        }
    }
    // The trigger's next delivery starts at the check (not here: a check may end a delivery).
    let _ = state.myself.send_message(TriggersEvent::Check);
    Ok(())
}

fn audit_action(status: DeliveryStatus) -> &'static str {
    if status == DeliveryStatus::Succeeded {
        "trigger.answered"
    } else {
        "trigger.failed"
    }
}

/// What ending a delivery writes, in one transaction.
struct FinishWrite {
    id: i64,
    trigger: String,
    agent: String,
    status: DeliveryStatus,
    chat: Option<ChatKey>,
    answer: Option<String>,
    /// What the destination is told (the answer, or a notice of the failure).
    message: Option<String>,
    detail: String,
    run_id: Option<i64>,
}

impl FinishWrite {
    /// `None`: the delivery had ended already; else the outbox row of a person's channel (every
    /// channel's row is the same: its chat key names the channel whose worker sends it).
    fn apply(&self, conn: &rusqlite::Connection) -> crate::store::Result<Option<Option<i64>>> {
        let now = crate::clock::now_ms();
        let ending = Ending {
            status: self.status,
            deliver_to: self.chat.as_ref().map(ChatKey::as_str),
            answer: self.answer.as_deref(),
            detail: &self.detail,
            run_id: self.run_id,
        };
        if !queries::finish(conn, self.id, &ending, now)? {
            return Ok(None);
        }
        let outbox_id = match (&self.chat, &self.message) {
            (Some(chat), Some(text)) if chat.kind().has_outbox() => {
                Some(crate::store::outbox::enqueue_reply(
                    conn,
                    &self.agent,
                    chat.as_str(),
                    None,
                    text,
                    &[],
                    now,
                )?)
            }
            _ => None,
        };
        crate::audit::append(
            conn,
            "triggers",
            audit_action(self.status),
            &format!("trigger:{}", self.trigger),
            &serde_json::json!({
                "delivery": self.id, "agent": self.agent, "run_id": self.run_id,
                "deliver_to": self.chat.as_ref().map(ChatKey::as_str), "detail": self.detail,
            }),
        )?;
        Ok(Some(outbox_id))
    }
}

/// A chat for people: "Telegram chat 42", "WhatsApp chat 4915…", else its key.
fn chat_in_words(chat: &ChatKey) -> String {
    let channel = match chat.kind() {
        ChatKind::Telegram => "Telegram",
        ChatKind::WhatsApp => "WhatsApp",
        ChatKind::Signal => "Signal",
        _ => return format!("chat {chat}"),
    };
    format!("{channel} chat {}", chat.id())
}

/// `text` cut to `max` characters.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    format!("{cut}…")
}

/// The triggers service's spec: only where the scheduler runs (`serve`; not `chat` or `eval`
/// beside a running daemon, which would run a delivery twice), and only with `[[triggers]]`.
pub fn child_spec(context: &super::context::RootContext) -> Option<super::supervise::ChildSpec> {
    let loaded = &context.loaded;
    (context.options.scheduler && !loaded.config.triggers.is_empty()).then(|| {
        super::supervise::actor_spec(
            &context.registry,
            &crate::protocol::triggers::NAME,
            loaded.config.supervision.policy(),
            || TriggersActor,
            TriggersArgs {
                store: context.store.clone(),
                events: context.events.clone(),
                registry: context.registry.clone(),
                book: TriggerBook::new(loaded),
                agents: loaded.agents.clone(),
            },
        )
    })
}

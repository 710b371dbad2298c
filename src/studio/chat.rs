//! Studio's chat: the operator talks to an agent — in a Studio conversation, or in one of the
//! agent's conversations on a person's channel (Telegram, WhatsApp, Signal) — and can stop the
//! answer being worked on.
//!
//! `POST /api/v1/agents/{name}/chat` with `{"text": "...", "chat": "<conversation>"}` answers as
//! Server-Sent Events (`tool`, `partial`, `notice`, `final`). The conversation is a Studio one
//! (an id such as `operator`, or `studio:<id>`) or one the agent already has on a person's channel
//! (`tg:<chat>`, `tg:<chat>/<topic>`, `wa:<number>`, `sg:<number or group>`):
//!
//! - A Studio conversation goes through the local channel like the terminal chat: the message is a
//!   real inbound of chat `studio:<id>`, and the answer streams back as it is written.
//! - A person's conversation is continued as the operator: the message reaches the agent like the
//!   others in that chat (sender `operator`), the answer is the run's ordinary reply — stored in
//!   the outbox and delivered by the agent's bot or account to that chat — and the stream follows the
//!   run on the event bus and ends with the stored answer. Only a conversation the agent already
//!   has can be continued: Studio never opens a chat with a stranger. Each such message is audited
//!   (`chat.operator_message`).
//!
//! While a run waits for an approval, a `tool` event with status `waiting_approval` tells the
//! page to draw the request as a card (it reads the pending approvals of the conversation).
//!
//! `POST /api/v1/agents/{name}/chat/stop` with `{"chat": ...}` is the conversation's `/stop`.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::openapi::{array, integer, object, string};
use super::{ApiError, StudioState, json_body};
use crate::domain::{ChatKey, ChatKind, Inbound, InboundSource, OutEvent, Sender, SessionCommand};
use crate::events::{EventData, EventReceiver};
use crate::protocol::agent::Agent;
use crate::protocol::local::LocalChannel;
use crate::store::Store;
use crate::store::runs;
use crate::store::sessions::{self, EventKindRow};

/// How long a Studio chat answer may take before the stream ends with a notice.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);
/// How often a person's conversation's stream looks for its answer besides the bus's events (a
/// subscriber that fell behind misses events; the store does not).
const CHANNEL_POLL: Duration = Duration::from_secs(2);
/// Who the operator is in a conversation's transcript.
const OPERATOR: &str = "operator";

fn agent(state: &StudioState, name: &str) -> Result<Agent, ApiError> {
    if !state.agents.get().iter().any(|agent| agent.name == name) {
        return Err(ApiError::not_found(format!("no agent is named `{name}`")));
    }
    Ok(Agent::new(&state.registry, name))
}

/// The conversation a request names: a Studio id (`operator`, `c-1x`, `studio:c-1x`; default
/// `operator`) or a conversation the agent already has on a person's channel (`tg:42`,
/// `tg:-100123/7`, `wa:4915100000001`, `sg:+4915100000001`).
async fn conversation(
    state: &StudioState,
    agent: &str,
    chat: Option<String>,
) -> Result<ChatKey, ApiError> {
    let chat = chat.unwrap_or_else(|| OPERATOR.into());
    if let Some(key) = ChatKey::parse(&chat).filter(|key| key.kind().has_outbox()) {
        if key.kind() == ChatKind::Telegram && key.telegram_chat_id().is_none() {
            return Err(ApiError::bad_request(format!(
                "`chat` `{chat}` is not a Telegram conversation (expected `tg:<chat id>` or `tg:<chat id>/<topic>`)"
            )));
        }
        let (owner, lookup) = (agent.to_string(), key.as_str().to_string());
        let known = state
            .store
            .read(move |conn| sessions::active(conn, &owner, &lookup))
            .await?
            .is_some();
        if !known {
            let channel = key.kind().channel_name().unwrap_or("this");
            return Err(ApiError::not_found(format!(
                "`chat`: agent `{agent}` has no conversation in {channel} chat `{chat}`; Studio only continues conversations the agent already has"
            )));
        }
        return Ok(key);
    }
    let id = chat.strip_prefix("studio:").unwrap_or(&chat);
    if id.is_empty()
        || id.len() > 64
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ApiError::bad_request(
            "`chat` must be a Studio conversation id (1-64 letters, digits, `-` or `_`) or one of the agent's conversations on Telegram, WhatsApp or Signal (`tg:<chat id>`, `wa:<number>`, `sg:<number>`)",
        ));
    }
    Ok(ChatKey::studio(id))
}

/// The events of a chat answer, for the API's description.
pub const EVENTS: &str = "`tool` ({name, status}; status `waiting_approval` while a request waits for a person), `partial` ({text}: the answer so far), `notice` ({text}), then `final` ({text, run_id}; in a Telegram, WhatsApp or Signal conversation also `delivered_to`)";

/// The operator's message.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatBody {
    /// What the operator says (not empty).
    text: String,
    /// The conversation: a Studio id (default `operator`), `tg:<chat id>`, `wa:<number>` or
    /// `sg:<number>`.
    chat: Option<String>,
}

/// `POST /api/v1/agents/{name}/chat` with `{"text": "...", "chat": "id"}`: the answer as SSE.
pub async fn chat(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    body: Result<Json<ChatBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let body = json_body(body)?;
    let text = body.text.trim().to_string();
    if text.is_empty() {
        return Err(ApiError::bad_request("`text` must not be empty"));
    }
    let agent = agent(&state, &name)?;
    let chat = conversation(&state, &name, body.chat).await?;
    let correlation = format!("studio-{:016x}", rand::random::<u64>());
    let inbound = Inbound {
        agent: name.clone(),
        chat: chat.clone(),
        sender: Sender::new(format!("studio:{OPERATOR}"), OPERATOR.to_string()),
        text: text.clone(),
        attachments: Vec::new(),
        source: InboundSource::Local,
        received_ms: crate::clock::now_ms(),
        context: None,
        correlation: Some(correlation.clone()),
    };
    if chat.kind().has_outbox() {
        audit_channel_message(&state, &name, &chat, &text).await?;
        // Subscribed before the message is sent, so that no event of its run is missed.
        let events = state.events.subscribe();
        let sent_ms = inbound.received_ms;
        agent
            .inbound(inbound)
            .map_err(|_| ApiError::unavailable(&format!("agent `{name}`")))?;
        let follow = Followed {
            store: state.store.clone(),
            agent: name,
            chat,
            text,
            sent_ms,
        };
        return Ok(Sse::new(channel_stream(events, follow))
            .keep_alive(KeepAlive::default())
            .into_response());
    }
    let receiver = LocalChannel::new(&state.registry)
        .subscribe(&chat)
        .await
        .ok_or_else(|| ApiError::unavailable("the local channel"))?;
    agent
        .inbound(inbound)
        .map_err(|_| ApiError::unavailable(&format!("agent `{name}`")))?;
    Ok(Sse::new(answer_stream(receiver, correlation))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The operator writing into a person's conversation (Telegram, WhatsApp, Signal) is audited
/// (who, where, how long; not the words, which are in the transcript).
async fn audit_channel_message(
    state: &StudioState,
    agent: &str,
    chat: &ChatKey,
    text: &str,
) -> Result<(), ApiError> {
    const ACTION: &str = "chat.operator_message";
    let subject = chat.as_str().to_string();
    let details = json!({"agent": agent, "chat": subject, "characters": text.chars().count()});
    let written = subject.clone();
    state
        .store
        .write(move |conn| {
            crate::audit::append(conn, "operator (studio)", ACTION, &written, &details).map(|_| ())
        })
        .await?;
    crate::audit::announce(&state.events, ACTION, &subject);
    Ok(())
}

fn sse(kind: &str, data: Value) -> Event {
    Event::default().event(kind).data(data.to_string())
}

/// A Studio conversation's answer, as the local channel shows it.
fn answer_stream(
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<crate::domain::Outbound>,
    correlation: String,
) -> impl Stream<Item = Result<Event, Infallible>> {
    super::gateway::async_stream(move |sender| async move {
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        loop {
            let Ok(Some(outbound)) = tokio::time::timeout_at(deadline, receiver.recv()).await
            else {
                let _ = sender.send(sse(
                    "notice",
                    json!({"text": "No answer in time. The agent is still working on it; its run is on the Runs page."}),
                ));
                let _ = sender.send(sse("final", json!({"text": "", "run_id": null})));
                break;
            };
            // A Studio chat has one subscriber per request; other requests' output is skipped.
            if outbound
                .correlation
                .as_deref()
                .is_some_and(|c| c != correlation)
            {
                continue;
            }
            let event = match outbound.event {
                OutEvent::Partial { text } => sse("partial", json!({"text": text})),
                OutEvent::Tool { name, status } => {
                    sse("tool", json!({"name": name, "status": status}))
                }
                OutEvent::Notice { text } => sse("notice", json!({"text": text})),
                OutEvent::Final { text, .. } => {
                    let _ = sender.send(sse(
                        "final",
                        json!({"text": text, "run_id": outbound.run_id}),
                    ));
                    break;
                }
                OutEvent::Working | OutEvent::Silent { .. } => continue,
            };
            if sender.send(event).is_err() {
                break;
            }
        }
    })
}

/// The operator's message in a person's conversation, followed to its answer.
struct Followed {
    store: Store,
    agent: String,
    chat: ChatKey,
    text: String,
    sent_ms: i64,
}

impl Followed {
    /// The run that took the operator's message and, once it ended, its answer: `(run_id,
    /// Some(text))` when finished.
    async fn answer(&self) -> Option<(i64, Option<String>)> {
        let (agent, chat, text, since) = (
            self.agent.clone(),
            self.chat.as_str().to_string(),
            self.text.clone(),
            self.sent_ms - 1_000,
        );
        self.store
            .read(move |conn| {
                let Some(session) = sessions::active(conn, &agent, &chat)? else {
                    return Ok(None);
                };
                let mine = sessions::recent_events(conn, session.id, 200)?
                    .into_iter()
                    .rev()
                    .find(|event| {
                        event.kind == EventKindRow::User
                            && event.sender.as_deref() == Some(OPERATOR)
                            && event.content == text
                            && event.created_ms >= since
                    });
                let Some(run_id) = mine.and_then(|event| event.run_id) else {
                    return Ok(None);
                };
                let run = runs::get(conn, run_id)?;
                Ok(Some((
                    run_id,
                    run.filter(|run| run.finished_ms.is_some())
                        .map(|run| run.outcome.unwrap_or_default()),
                )))
            })
            .await
            .ok()
            .flatten()
    }
}

/// The answer in a person's conversation: the run is followed on the event bus (and, in case
/// the subscriber falls behind, in the store every few seconds); the answer itself goes to the
/// person's channel through the outbox.
fn channel_stream(
    mut events: EventReceiver,
    follow: Followed,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let channel = follow.chat.kind().channel_name().unwrap_or("person's");
    let sent = format!(
        "Sent into the {channel} chat as the operator. The agent's answer goes to that chat and shows here too."
    );
    super::gateway::async_stream(move |sender| async move {
        let _ = sender.send(sse("notice", json!({ "text": sent })));
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        let chat = follow.chat.as_str().to_string();
        loop {
            let woke = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + CHANNEL_POLL),
                events.recv(),
            )
            .await;
            if tokio::time::Instant::now() >= deadline {
                let _ = sender.send(sse(
                    "notice",
                    json!({"text": "No answer in time. The agent is still working on it; its run is on the Runs page."}),
                ));
                let _ = sender.send(sse("final", json!({"text": "", "run_id": null})));
                break;
            }
            let look = match woke {
                // No event for a while: look in the store anyway.
                Err(_) => true,
                Ok(Ok(event)) => match event.data.as_ref() {
                    EventData::ApprovalRequested {
                        agent,
                        chat: asked,
                        tool,
                        ..
                    } if *agent == follow.agent && *asked == chat => {
                        let waiting =
                            sse("tool", json!({"name": tool, "status": "waiting_approval"}));
                        if sender.send(waiting).is_err() {
                            break;
                        }
                        false
                    }
                    EventData::RunFinished {
                        agent, chat: ended, ..
                    } => *agent == follow.agent && *ended == chat,
                    _ => false,
                },
                // Fell behind: what was missed is in the store.
                Ok(Err(RecvError::Lagged(_))) => true,
                Ok(Err(RecvError::Closed)) => {
                    tokio::time::sleep(CHANNEL_POLL).await;
                    true
                }
            };
            if look && let Some((run_id, Some(text))) = follow.answer().await {
                let _ = sender.send(sse(
                    "final",
                    json!({"text": text, "run_id": run_id, "delivered_to": chat}),
                ));
                break;
            }
            if sender.is_closed() {
                break;
            }
        }
    })
}

/// Which conversation to stop.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopBody {
    /// The conversation, as for chat (default `operator`).
    chat: Option<String>,
}

/// `POST /api/v1/agents/{name}/chat/stop` with `{"chat": "id"}`: stops the answer being worked
/// on in that conversation, as `/stop` does (the run ends as `cancelled` and says "Stopped.").
pub async fn stop(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    body: Result<Json<StopBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = json_body(body)?;
    let agent = agent(&state, &name)?;
    let chat = conversation(&state, &name, body.chat).await?;
    let (owner, key) = (name.clone(), chat.as_str().to_string());
    let running = state
        .store
        .read(move |conn| {
            let Some(session) = sessions::active(conn, &owner, &key)? else {
                return Ok(Vec::new());
            };
            runs::open_runs(conn, session.id)
        })
        .await?;
    if running.is_empty() {
        return Err(ApiError::conflict(
            "Nothing is running in this conversation right now, so there is nothing to stop.",
        ));
    }
    agent
        .command(chat.clone(), SessionCommand::Stop)
        .map_err(|_| ApiError::unavailable(&format!("agent `{name}`")))?;
    Ok(Json(json!({
        "chat": chat.as_str(),
        "runs": running.iter().map(|run| run.id).collect::<Vec<_>>(),
        "message": "Asked the agent to stop. Its answer ends with “Stopped.” in a moment.",
    })))
}

/// What `POST /api/v1/agents/{name}/chat/stop` answers (409 when nothing runs there).
pub fn stop_schema() -> Value {
    object([
        ("chat", string()),
        ("runs", array(integer())),
        ("message", string()),
    ])
}

//! The OpenAI-compatible gateway: `POST /v1/chat/completions` with `model` = an agent's name.
//!
//! Like the OpenAI API it is stateless: the request's messages are the conversation. The optional
//! `user` field names the chat (`api:<user>`) for runs, memory lineage and approvals; requests of
//! one chat run one after another. `stream: true` answers with SSE chunks in OpenAI's format.
//! The answer is matched to the request by a correlation id carried through the session and run.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rand::Rng;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::StudioState;
use super::openapi::{any, array, boolean, described, integer, object, one_of, string};
use crate::domain::{ChatKey, Inbound, InboundSource, OutEvent, Outbound, Sender};
use crate::protocol::agent::Agent;
use crate::protocol::local::LocalChannel;

/// How long a request waits for its answer before the gateway gives up (the run goes on).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

fn error(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"error": {"message": message.into(), "type": kind, "code": Value::Null}})),
    )
        .into_response()
}

/// Text of an OpenAI message `content`: a string, or an array of parts whose text parts are joined.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

/// What `POST /v1/chat/completions` reads, for the API's description ([`parse`] reads the body
/// by hand, as OpenAI's clients send it, and names what is wrong).
pub struct CompletionRequest;

impl JsonSchema for CompletionRequest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CompletionRequest".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let message = object([
            (
                "role",
                one_of(&["system", "developer", "user", "assistant", "tool"]),
            ),
            (
                "content",
                described(
                    "a text, or an array of parts whose `text` parts are joined",
                    any(),
                ),
            ),
        ]);
        let request = object([
            ("model", described("the agent's name", string())),
            (
                "messages",
                described(
                    "the conversation; the last one is the user's",
                    array(message),
                ),
            ),
            (
                "stream?",
                described("answer as Server-Sent Events", boolean()),
            ),
            (
                "user?",
                described(
                    "names the chat (`api:<user>`) for runs, memory and approvals",
                    string(),
                ),
            ),
        ]);
        Schema::try_from(request).unwrap_or_default()
    }
}

/// The chunks of a streamed answer, for the API's description.
pub const STREAM_EVENTS: &str = "`chat.completion.chunk` objects as `data:`, then `data: [DONE]`";

/// What `POST /v1/chat/completions` answers without `stream` (errors in OpenAI's shape:
/// `error.message`, `error.type`).
pub fn completion_schema() -> Value {
    let choice = object([
        ("index", integer()),
        (
            "message",
            object([("role", string()), ("content", string())]),
        ),
        ("finish_reason", string()),
    ]);
    let usage = object([
        ("prompt_tokens", integer()),
        ("completion_tokens", integer()),
        ("total_tokens", integer()),
    ]);
    object([
        ("id", string()),
        ("object", string()),
        ("created", integer()),
        ("model", string()),
        ("choices", array(choice)),
        ("usage", usage),
    ])
}

struct Parsed {
    agent: String,
    user: String,
    context: Vec<(String, String)>,
    last: String,
    stream: bool,
}

/// Reads the request; an error is the message of a 400 answer.
fn parse(body: &Value) -> Result<Parsed, String> {
    let agent = body["model"]
        .as_str()
        .filter(|model| !model.is_empty())
        .ok_or("`model` (an agent's name) is required")?
        .to_string();
    let messages = body["messages"]
        .as_array()
        .filter(|messages| !messages.is_empty())
        .ok_or("`messages` must be a non-empty array")?;
    let mut conversation = Vec::with_capacity(messages.len());
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or_default();
        if role == "tool" {
            continue;
        }
        if !matches!(role, "system" | "user" | "assistant" | "developer") {
            return Err(format!(
                "messages[{index}].role `{role}` is not one of system, developer, user, assistant"
            ));
        }
        let text = content_text(&message["content"]).ok_or_else(|| {
            format!("messages[{index}].content must be a string or an array of parts")
        })?;
        let role = if role == "developer" { "system" } else { role };
        conversation.push((role.to_string(), text));
    }
    let Some((role, last)) = conversation.pop() else {
        return Err("`messages` has no usable message".into());
    };
    if role != "user" {
        return Err("the last message must have role `user`".into());
    }
    let user = body["user"]
        .as_str()
        .filter(|user| !user.trim().is_empty())
        .unwrap_or("default");
    let user: String = user
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
        .take(64)
        .collect();
    Ok(Parsed {
        agent,
        user: if user.is_empty() {
            "default".into()
        } else {
            user
        },
        context: conversation,
        last,
        stream: body["stream"].as_bool().unwrap_or(false),
    })
}

pub async fn chat_completions(
    State(state): State<StudioState>,
    body: Result<Json<Value>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body {
        Ok(Json(body)) => body,
        Err(rejection) => {
            let problem = super::body_problem(&rejection);
            return error(StatusCode::BAD_REQUEST, "invalid_request_error", problem);
        }
    };
    let parsed = match parse(&body) {
        Ok(parsed) => parsed,
        Err(message) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", message),
    };
    if !state
        .agents
        .get()
        .iter()
        .any(|agent| agent.name == parsed.agent)
    {
        return error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("no agent is named `{}`", parsed.agent),
        );
    }
    let agent = Agent::new(&state.registry, &parsed.agent);
    let chat = ChatKey::api(&parsed.user);
    let Some(receiver) = LocalChannel::new(&state.registry).subscribe(&chat).await else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "the daemon is starting or stopping; try again",
        );
    };
    let correlation = format!("gw-{:016x}", rand::rng().random::<u64>());
    let inbound = Inbound {
        agent: parsed.agent.clone(),
        chat: chat.clone(),
        sender: Sender::new(format!("api:{}", parsed.user), parsed.user.clone()),
        text: parsed.last,
        attachments: Vec::new(),
        source: InboundSource::Local,
        received_ms: crate::clock::now_ms(),
        context: Some(parsed.context),
        correlation: Some(correlation.clone()),
    };
    if agent.inbound(inbound).is_err() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "the agent is restarting; try again",
        );
    }
    let id = format!("chatcmpl-{correlation}");
    if parsed.stream {
        Sse::new(stream_answer(receiver, correlation, id, parsed.agent))
            .keep_alive(KeepAlive::default())
            .into_response()
    } else {
        answer(state, receiver, correlation, id, parsed.agent).await
    }
}

async fn wait_for_final(
    receiver: &mut mpsc::UnboundedReceiver<Outbound>,
    correlation: &str,
) -> Option<(String, Option<i64>)> {
    let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
    loop {
        let outbound = tokio::time::timeout_at(deadline, receiver.recv())
            .await
            .ok()??;
        if outbound.correlation.as_deref() != Some(correlation) {
            continue;
        }
        if let OutEvent::Final { text, .. } = outbound.event {
            return Some((text, outbound.run_id));
        }
    }
}

async fn answer(
    state: StudioState,
    mut receiver: mpsc::UnboundedReceiver<Outbound>,
    correlation: String,
    id: String,
    agent: String,
) -> Response {
    let Some((text, run_id)) = wait_for_final(&mut receiver, &correlation).await else {
        return error(
            StatusCode::GATEWAY_TIMEOUT,
            "server_error",
            "the agent did not answer in time; the run goes on and is visible in Studio",
        );
    };
    let (input, output) = match run_id {
        Some(run_id) => state
            .store
            .read(move |conn| crate::store::runs::get(conn, run_id))
            .await
            .ok()
            .flatten()
            .map(|run| (run.input_tokens, run.output_tokens))
            .unwrap_or((0, 0)),
        None => (0, 0),
    };
    Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": crate::clock::now_ms() / 1000,
        "model": agent,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
    }))
    .into_response()
}

fn chunk(id: &str, agent: &str, delta: Value, finish: Option<&str>) -> Event {
    Event::default().data(
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": crate::clock::now_ms() / 1000,
            "model": agent,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string(),
    )
}

fn stream_answer(
    mut receiver: mpsc::UnboundedReceiver<Outbound>,
    correlation: String,
    id: String,
    agent: String,
) -> impl Stream<Item = Result<Event, Infallible>> {
    async_stream(move |sender| async move {
        let _ = sender.send(chunk(
            &id,
            &agent,
            json!({"role": "assistant", "content": ""}),
            None,
        ));
        let mut sent = String::new();
        let deadline = tokio::time::Instant::now() + ANSWER_TIMEOUT;
        loop {
            let Ok(Some(outbound)) = tokio::time::timeout_at(deadline, receiver.recv()).await
            else {
                break;
            };
            if outbound.correlation.as_deref() != Some(correlation.as_str()) {
                continue;
            }
            let (text, done) = match outbound.event {
                OutEvent::Partial { text } => (text, false),
                OutEvent::Final { text, .. } => (text, true),
                _ => continue,
            };
            // Only text that extends what was sent can be streamed; a reset is rare and the final
            // text then arrives as one more piece.
            if let Some(rest) = text.strip_prefix(sent.as_str()) {
                if !rest.is_empty() {
                    let _ = sender.send(chunk(&id, &agent, json!({"content": rest}), None));
                }
                sent = text;
            } else if done {
                let _ = sender.send(chunk(
                    &id,
                    &agent,
                    json!({"content": format!("\n{text}")}),
                    None,
                ));
            }
            if done {
                break;
            }
        }
        let _ = sender.send(chunk(&id, &agent, json!({}), Some("stop")));
        let _ = sender.send(Event::default().data("[DONE]"));
    })
}

/// A stream fed by a producer task through a channel (no extra crate for ten lines).
pub fn async_stream<F, Fut>(producer: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(mpsc::UnboundedSender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = mpsc::unbounded_channel();
    tokio::spawn(producer(sender));
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|event| (Ok(event), receiver))
    })
}

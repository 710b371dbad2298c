//! `send_message`: say something to a person now, while the run goes on.
//!
//! A run's final answer reaches its chat anyway; this tool is for what cannot wait for it
//! ("on it, this takes a few minutes") and for telling someone else of the agent's people
//! (a Telegram user in the agent's `allow_users` or `approvers`).
//!
//! Speaking in the run's own conversation changes nothing beyond it, so it is judged like a
//! read (L0, runs freely under `require_approval`); a message to another of the agent's people is
//! a write at L2; any other chat is blocked (L3).
//! Telegram messages go through the outbox, like final answers: stored before they are sent,
//! marked delivered only after Telegram accepted them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::domain::{ChatKey, ChatKind, OutEvent, Outbound};
use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, RiskLevel};
use crate::store::outbox;
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// Longest message accepted (Telegram splits it into several messages of 4096 characters).
pub const MAX_MESSAGE_CHARS: usize = 16_000;

const FIELDS: &[&str] = &["text", "chat_id"];

/// `send_message`, for one agent: `people` are the Telegram user ids it may write to besides
/// the chat its run is in.
pub struct SendMessageTool {
    people: Vec<i64>,
}

impl SendMessageTool {
    pub fn new(people: Vec<i64>) -> SendMessageTool {
        SendMessageTool { people }
    }

    /// Where a call goes: the run's chat, or the Telegram chat it names.
    fn destination(&self, args: &Value, ctx: &ToolContext) -> Result<ChatKey, ToolError> {
        let chat_id = match args.get("chat_id") {
            None | Some(Value::Null) => None,
            Some(_) => Some(chat_id_argument(args).ok_or_else(|| {
                ToolError::InvalidArguments(
                    "send_message: `chat_id` must be an integer Telegram chat id".into(),
                )
            })?),
        };
        let Some(chat_id) = chat_id else {
            return match ctx.chat.kind() {
                ChatKind::Telegram | ChatKind::WhatsApp | ChatKind::Signal | ChatKind::Local => {
                    Ok(ctx.chat.clone())
                }
                ChatKind::Schedule | ChatKind::Handoff | ChatKind::Trigger => {
                    Err(ToolError::Refused(
                        "this run is not in a conversation with a person; name a `chat_id`".into(),
                    ))
                }
            };
        };
        // The run's own chat by its id is the run's conversation: in a forum, its topic.
        if ctx.chat.telegram_chat_id() == Some(chat_id) {
            return Ok(ctx.chat.clone());
        }
        if self.people.contains(&chat_id) {
            return Ok(ChatKey::telegram(chat_id));
        }
        Err(ToolError::Refused(format!(
            "chat {chat_id} is neither this conversation nor one of this agent's Telegram users \
             (`allow_users` / `approvers` in its file)"
        )))
    }
}

fn chat_id_argument(args: &Value) -> Option<i64> {
    let value = args.get("chat_id")?;
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
}

/// True when the call speaks in the run's own conversation.
fn in_own_chat(args: &Value, ctx: &ToolContext) -> bool {
    match chat_id_argument(args) {
        None => true,
        Some(chat_id) => ctx.chat.telegram_chat_id() == Some(chat_id),
    }
}

impl Tool for SendMessageTool {
    fn name(&self) -> &str {
        "send_message"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send_message".to_string(),
            description: "Send a message now, before your final answer: to this conversation \
                          (leave out chat_id), or to one of your Telegram users by chat_id. Use it \
                          for progress on long tasks or to notify someone; your final answer is \
                          sent anyway, do not repeat it here."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The message (Markdown)."},
                    "chat_id": {
                        "type": "integer",
                        "description": "A Telegram chat id of one of your users (optional; default: this conversation)."
                    }
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn may_write_workspace(
        &self,
        _args: &Value,
        _effect: Effect,
        _assessment: &Assessment,
    ) -> bool {
        // A message goes to a chat, never into the workspace.
        false
    }

    fn effect(&self) -> Effect {
        Effect::Write
    }

    fn effect_for(&self, args: &Value, ctx: &ToolContext) -> Effect {
        if in_own_chat(args, ctx) {
            Effect::ReadOnly
        } else {
            Effect::Write
        }
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        if in_own_chat(args, ctx) {
            return Assessment::new(RiskLevel::L0, "speaks in the run's own conversation");
        }
        match chat_id_argument(args) {
            Some(chat_id) if self.people.contains(&chat_id) => Assessment::new(
                RiskLevel::L2,
                "messages one of the agent's people outside this conversation",
            ),
            _ => Assessment::new(
                RiskLevel::L3,
                "the chat is not one of the agent's Telegram users (allow_users / approvers)",
            ),
        }
    }

    fn describe_call(&self, args: &Value) -> String {
        let text = args.get("text").and_then(Value::as_str).unwrap_or("");
        let preview: String = text.chars().take(120).collect();
        match chat_id_argument(args) {
            Some(chat_id) => format!("send_message to {chat_id}: {preview}"),
            None => format!("send_message: {preview}"),
        }
    }

    fn target(&self, args: &Value) -> String {
        chat_id_argument(args)
            .map(|chat_id| chat_id.to_string())
            .unwrap_or_else(|| "this chat".to_string())
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(10)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("send_message", &args, FIELDS)?;
            let text = parsed.required_str("text")?.trim().to_string();
            if text.is_empty() {
                return Err(ToolError::InvalidArguments(
                    "send_message: `text` is empty".into(),
                ));
            }
            if text.chars().count() > MAX_MESSAGE_CHARS {
                return Err(ToolError::InvalidArguments(format!(
                    "send_message: `text` is longer than {MAX_MESSAGE_CHARS} characters; shorten it"
                )));
            }
            let chat = self.destination(&args, ctx)?;
            let event = if chat.kind() == ChatKind::Telegram {
                let (agent, key, body) =
                    (ctx.agent.clone(), chat.as_str().to_string(), text.clone());
                let id = ctx
                    .store
                    .write(move |conn| {
                        outbox::enqueue_reply(
                            conn,
                            &agent,
                            &key,
                            None,
                            &body,
                            &[],
                            crate::clock::now_ms(),
                        )
                    })
                    .await
                    .map_err(|error| {
                        ToolError::Failed(format!("could not queue the message: {error}"))
                    })?;
                OutEvent::Final {
                    text,
                    outbox_id: Some(id),
                }
            } else {
                OutEvent::Notice { text }
            };
            crate::channels::deliver(
                &ctx.registry,
                Outbound {
                    agent: ctx.agent.clone(),
                    chat: chat.clone(),
                    run_id: None,
                    correlation: None,
                    event,
                },
            );
            Ok(ToolOutput::ok(format!("Sent to {}.", chat.as_str())))
        })
    }
}

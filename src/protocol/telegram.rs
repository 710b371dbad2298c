//! The Telegram bot service: one bot per agent, registered as `bot:<agent>`. Sessions, the
//! approval desk and the scheduler hand it output; it posts approval requests with buttons.
//! Served by `actors/telegram_bot/`.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::ServiceName;
use crate::domain::{ChatKey, Outbound};
use crate::registry::Registry;

/// How long "is the bot online?" may take.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Where an agent's bot is registered.
pub fn name(agent: &str) -> ServiceName<TelegramMsg> {
    ServiceName::new(format!("bot:{agent}"))
}

/// The supervisor of every bot.
pub const CHANNELS: &str = "channels";

/// What others may ask of a bot.
pub enum TelegramMsg {
    Deliver(Outbound),
    /// Post an approval request with buttons in a chat (or its forum topic); the message id
    /// comes back to the desk.
    PostApproval {
        chat: ChatKey,
        prompt: ApprovalPrompt,
    },
    /// Replace a decided approval's message (buttons removed).
    ResolveApproval {
        chat_id: i64,
        message_id: i32,
        text: String,
    },
    /// Send a plain message to a chat or its forum topic (pairing approved, approval notices).
    Notify {
        chat: ChatKey,
        text: String,
    },
    /// Is the bot polling? (for approvals: is an approver reachable here)
    IsOnline(RpcReplyPort<bool>),
    /// Fault injection (chaos tests, Studio's "crash" action): the handler panics, as a bug
    /// would, so that supervision is exercised for real.
    Panic(String),
}

/// An approval request as a person must see it before deciding: a plain sentence of what the
/// agent wants to do, the whole action, and — when a grant is offered — its exact scope; the
/// technical detail (tool, risk level, why) on request. Rendered by `telegram::approval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPrompt {
    pub id: String,
    pub agent: String,
    /// The tool asked for: with the action, what the prompt's plain sentence is made of
    /// ([`ApprovalPrompt::summary`]).
    pub tool: String,
    /// The whole action, unshortened and unescaped (the renderer escapes it).
    pub action: String,
    pub risk: String,
    pub reason: String,
    /// "5 min", "40 s".
    pub expires_in: String,
    /// Posted again after a restart.
    pub again: bool,
    /// A grant offered with the request: exactly this action, in this chat, for this long.
    pub grant_minutes: Option<u32>,
    /// Shown privately to an approver: the chat (or forum topic) the request came from.
    pub from_chat: Option<ChatKey>,
}

impl ApprovalPrompt {
    /// "ada wants to delete files in its workspace" (`protocol::approvals::plain_summary`).
    pub fn summary(&self) -> String {
        super::approvals::plain_summary(&self.agent, &self.tool, &self.action)
    }

    /// The prompt as plain text (a terminal chat's notice): the sentence, the action whole on its
    /// own lines, how to decide, then the technical detail.
    pub fn plain_text(&self) -> String {
        let again = if self.again {
            "(posted again after a restart) "
        } else {
            ""
        };
        format!(
            "{again}Approval needed: {summary}.\n{action}\nExpires in {expires}. Reply /approve {id} or /deny {id}.\nDetails: tool {tool}, risk {risk}: {reason}",
            id = self.id,
            summary = self.summary(),
            action = self.action,
            tool = self.tool,
            risk = self.risk,
            reason = self.reason,
            expires = self.expires_in,
        )
    }
}

/// One agent's bot, by name. Cheap to clone; a bot that is down simply misses what it is sent
/// (what must not be lost is in the outbox).
#[derive(Clone, Debug)]
pub struct Bot {
    registry: Registry,
    name: ServiceName<TelegramMsg>,
}

impl Bot {
    pub fn new(registry: &Registry, agent: &str) -> Self {
        Self {
            registry: registry.clone(),
            name: name(agent),
        }
    }

    fn cast(&self, message: TelegramMsg) {
        let _ = super::tell(&self.registry, &self.name, message);
    }

    pub fn deliver(&self, outbound: Outbound) {
        self.cast(TelegramMsg::Deliver(outbound));
    }

    /// Posts an approval request with buttons in `chat` — a forum topic's key posts it in that
    /// topic (the message id goes back to the desk).
    pub fn post_approval(&self, chat: ChatKey, prompt: ApprovalPrompt) {
        self.cast(TelegramMsg::PostApproval { chat, prompt });
    }

    /// Replaces a decided approval's message (its buttons removed).
    pub fn resolve_approval(&self, chat_id: i64, message_id: i32, text: String) {
        self.cast(TelegramMsg::ResolveApproval {
            chat_id,
            message_id,
            text,
        });
    }

    /// Sends a plain message to a chat (a pairing approved in Studio).
    pub fn notify(&self, chat: ChatKey, text: String) {
        self.cast(TelegramMsg::Notify { chat, text });
    }

    /// Is the bot polling? `false` when it is down or does not answer at once.
    pub async fn is_online(&self) -> bool {
        let answer = super::ask(
            &self.registry,
            &self.name,
            Some(TIMEOUT),
            TelegramMsg::IsOnline,
        );
        matches!(answer.await, Ok(true))
    }

    /// Fault injection: the bot's handler panics (chaos tests, Studio's crash action).
    pub fn panic(&self, why: &str) {
        self.cast(TelegramMsg::Panic(why.to_string()));
    }
}

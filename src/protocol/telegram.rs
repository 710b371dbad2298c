//! The Telegram bot service: one bot per agent, registered as `bot:<agent>`. Sessions, the
//! approval desk and the scheduler hand it output; it posts approval requests with buttons.
//! Served by `actors/telegram_bot.rs`.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::ServiceName;
use crate::domain::Outbound;
use crate::registry::Registry;
use crate::telegram::poller::PollEvent;

/// How long "is the bot online?" may take.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Where an agent's bot is registered.
pub fn name(agent: &str) -> ServiceName<TelegramMsg> {
    ServiceName::new(format!("bot:{agent}"))
}

/// The supervisor of every bot.
pub const CHANNELS: &str = "channels";

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
        if let Some(bot) = self.registry.lookup(&self.name) {
            let _ = bot.cast(message);
        }
    }

    pub fn deliver(&self, outbound: Outbound) {
        self.cast(TelegramMsg::Deliver(outbound));
    }

    /// Posts an approval request with buttons (the message id goes back to the desk).
    pub fn post_approval(
        &self,
        approval_id: &str,
        chat_id: i64,
        text: String,
        grant_minutes: Option<u32>,
    ) {
        self.cast(TelegramMsg::PostApproval {
            approval_id: approval_id.to_string(),
            chat_id,
            text,
            grant_minutes,
        });
    }

    /// Replaces a decided approval's message (its buttons removed).
    pub fn resolve_approval(&self, chat_id: i64, message_id: i32, text: String) {
        self.cast(TelegramMsg::ResolveApproval {
            chat_id,
            message_id,
            text,
        });
    }

    /// Is the bot polling? `false` when it is down or does not answer at once.
    pub async fn is_online(&self) -> bool {
        let Some(bot) = self.registry.lookup(&self.name) else {
            return false;
        };
        matches!(
            super::call(
                &bot,
                self.name.local(),
                Some(TIMEOUT),
                TelegramMsg::IsOnline
            )
            .await,
            Ok(true)
        )
    }

    /// Fault injection: the bot's handler panics (chaos tests, Studio's crash action).
    pub fn panic(&self, why: &str) {
        self.cast(TelegramMsg::Panic(why.to_string()));
    }
}

//! Where an agent's output goes: the one place that maps a chat to the actor that shows it.
//!
//! Sessions and runs call [`deliver`] with a plain [`Outbound`]; the chat key's kind names the
//! channel: `tg:` → the agent's Telegram bot, `cli:`/`studio:`/`api:` → the local channel,
//! `sched:` → the scheduler, `handoff:` → the handoff contracts. A channel that is down simply
//! misses the message: what must not be lost (final replies to Telegram) is in the outbox table and
//! is delivered when the channel is back.

use crate::actors::local_channel::LocalChannelMsg;
use crate::actors::telegram_bot::TelegramMsg;
use crate::domain::{ChatKind, Outbound};
use crate::registry::{Registry, names};

pub fn deliver(registry: &Registry, outbound: Outbound) {
    match outbound.chat.kind() {
        ChatKind::Local => {
            if let Some(local) = registry.lookup::<LocalChannelMsg>(names::LOCAL_CHANNEL) {
                let _ = local.cast(LocalChannelMsg::Deliver(outbound));
            }
        }
        ChatKind::Telegram => {
            if let Some(bot) = registry.lookup::<TelegramMsg>(&names::bot(&outbound.agent)) {
                let _ = bot.cast(TelegramMsg::Deliver(outbound));
            }
        }
        ChatKind::Schedule | ChatKind::Handoff => {
            tracing::debug!(chat = %outbound.chat, "no channel is running for this chat yet");
        }
    }
}

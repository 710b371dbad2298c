//! Where an agent's output goes: the one place that maps a chat to the service that shows it.
//!
//! Sessions and runs call [`deliver`] with a plain [`Outbound`]; the chat key's kind names the
//! channel: `tg:` → the agent's Telegram bot, `wa:`/`sg:` → the agent's account on that seam
//! channel (`protocol::channel`), `cli:`/`studio:`/`api:` → the local channel,
//! `sched:` → the scheduler, `handoff:` → the handoff contracts, `trigger:` → the triggers service.
//! A channel that is down simply misses the message: what must not be lost (final replies to a
//! person's channel) is in the outbox table and
//! is delivered when the channel is back.

use crate::domain::{ChatKind, Outbound};
use crate::protocol::channel::ChannelAccount;
use crate::protocol::handoff::Handoffs;
use crate::protocol::local::LocalChannel;
use crate::protocol::scheduler::Scheduler;
use crate::protocol::telegram::Bot;
use crate::protocol::triggers::Triggers;
use crate::registry::Registry;

pub fn deliver(registry: &Registry, outbound: Outbound) {
    match outbound.chat.kind() {
        ChatKind::Local => LocalChannel::new(registry).deliver(outbound),
        ChatKind::Telegram => Bot::new(registry, &outbound.agent).deliver(outbound),
        ChatKind::WhatsApp | ChatKind::Signal => {
            if let Some(account) =
                ChannelAccount::for_chat(registry, &outbound.agent, &outbound.chat)
            {
                account.deliver(outbound);
            }
        }
        ChatKind::Schedule => Scheduler::new(registry).deliver(outbound),
        ChatKind::Handoff => Handoffs::new(registry).deliver(outbound),
        ChatKind::Trigger => Triggers::new(registry).deliver(outbound),
    }
}

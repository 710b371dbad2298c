//! Where an agent's output goes: the one place that maps a chat to the actor that shows it.
//!
//! Sessions and runs call [`deliver`] with a plain [`Outbound`]; the chat key's kind names the
//! channel: `tg:` → the agent's Telegram bot, `cli:`/`studio:`/`api:` → the local channel,
//! `sched:` → the scheduler, `handoff:` → the handoff contracts. A channel that is down simply
//! misses the message: what must not be lost (final replies to Telegram) is in the outbox table and
//! is delivered when the channel is back.

use crate::actors::handoff_supervisor::HandoffMsg;
use crate::actors::local_channel::LocalChannelMsg;
use crate::actors::scheduler::SchedulerMsg;
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
        ChatKind::Schedule => {
            if let Some(scheduler) = registry.lookup::<SchedulerMsg>(names::SCHEDULER) {
                let _ = scheduler.cast(SchedulerMsg::Deliver(outbound));
            }
        }
        ChatKind::Handoff => {
            if let Some(handoffs) = registry.lookup::<HandoffMsg>(names::HANDOFFS) {
                let _ = handoffs.cast(HandoffMsg::Deliver(outbound));
            }
        }
    }
}

//! A seam channel's account (WhatsApp, Signal; `crate::channel`): one per agent and channel,
//! registered as `channel:<wa|sg>:<agent>`. Sessions, the scheduler and the approval desk hand
//! it output; the webhook (or the channel's link) tells it when a message was stored.
//! Served by `actors/channel_account/`.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::ServiceName;
use super::telegram::ApprovalPrompt;
use crate::domain::{ChatKey, Outbound};
use crate::registry::Registry;

/// How long "is the account online?" may take.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Where `agent`'s account on `channel` (`wa`, `sg`) is registered.
pub fn name(channel: &str, agent: &str) -> ServiceName<ChannelMsg> {
    ServiceName::new(format!("channel:{channel}:{agent}"))
}

/// What others may ask of an account.
pub enum ChannelMsg {
    Deliver(Outbound),
    /// Show an approval request in a conversation: buttons where the channel has them, the text
    /// form where it does not.
    PostApproval {
        chat: ChatKey,
        prompt: ApprovalPrompt,
    },
    /// Send a plain message (a decided approval, a pairing approved).
    Notify {
        chat: ChatKey,
        text: String,
    },
    /// A message of this account was stored (by the webhook): dispatch what waits.
    Stored,
    /// Is the account started and its channel reachable?
    IsOnline(RpcReplyPort<bool>),
}

/// One agent's account on one seam channel. Cheap to clone; an account that is down simply
/// misses what it is sent (what must not be lost is in the outbox and `channel_inbound`).
#[derive(Clone, Debug)]
pub struct ChannelAccount {
    registry: Registry,
    name: ServiceName<ChannelMsg>,
}

impl ChannelAccount {
    pub fn new(registry: &Registry, channel: &str, agent: &str) -> Self {
        Self {
            registry: registry.clone(),
            name: name(channel, agent),
        }
    }

    /// The account that serves `chat` (a `wa:`/`sg:` key); `None` for other chats.
    pub fn for_chat(registry: &Registry, agent: &str, chat: &ChatKey) -> Option<Self> {
        let channel = chat.kind().seam_name()?;
        Some(Self::new(registry, channel, agent))
    }

    fn cast(&self, message: ChannelMsg) {
        let _ = super::tell(&self.registry, &self.name, message);
    }

    pub fn deliver(&self, outbound: Outbound) {
        self.cast(ChannelMsg::Deliver(outbound));
    }

    pub fn post_approval(&self, chat: ChatKey, prompt: ApprovalPrompt) {
        self.cast(ChannelMsg::PostApproval { chat, prompt });
    }

    pub fn notify(&self, chat: ChatKey, text: String) {
        self.cast(ChannelMsg::Notify { chat, text });
    }

    pub fn stored(&self) {
        self.cast(ChannelMsg::Stored);
    }

    /// Is the account online? `false` when it is down or does not answer at once.
    pub async fn is_online(&self) -> bool {
        let answer = super::ask(
            &self.registry,
            &self.name,
            Some(TIMEOUT),
            ChannelMsg::IsOnline,
        );
        matches!(answer.await, Ok(true))
    }
}

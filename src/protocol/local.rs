//! The local channel: output of terminal, Studio and gateway chats (`cli:`, `studio:`, `api:`) to
//! whoever listens in this process. Served by `actors/local_channel.rs`.

use std::time::Duration;

use ractor::RpcReplyPort;
use tokio::sync::mpsc;

use super::ServiceName;
use crate::domain::{ChatKey, Outbound};
use crate::registry::Registry;

/// Where the local channel is registered.
pub const NAME: ServiceName<LocalChannelMsg> = ServiceName::fixed("local");
/// How long subscribing may take.
const TIMEOUT: Duration = Duration::from_secs(5);

pub enum LocalChannelMsg {
    Subscribe(ChatKey, mpsc::UnboundedSender<Outbound>, RpcReplyPort<()>),
    Deliver(Outbound),
}

/// The local channel, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LocalChannel {
    registry: Registry,
}

impl LocalChannel {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    /// Shows `outbound` to whoever listens to its chat (nobody listening: it is dropped).
    pub fn deliver(&self, outbound: Outbound) {
        let _ = super::tell(&self.registry, &NAME, LocalChannelMsg::Deliver(outbound));
    }

    /// Subscribes to a local chat's output. `None` when the local channel is not running.
    pub async fn subscribe(&self, chat: &ChatKey) -> Option<mpsc::UnboundedReceiver<Outbound>> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let chat = chat.clone();
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            LocalChannelMsg::Subscribe(chat, sender, reply)
        })
        .await
        .ok()?;
        Some(receiver)
    }
}

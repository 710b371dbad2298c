//! The events service: the history of runtime events and the live view of the supervision tree
//! (and each bot's last completed poll). Served by `actors/events.rs`; publishing events goes
//! through the `EventBus` (`crate::events`), not through this actor.

use std::collections::BTreeMap;
use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::registry::Registry;

/// Where the events actor is registered.
pub const NAME: ServiceName<EventsMsg> = ServiceName::fixed("events");
/// How long a tree snapshot may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What others may tell or ask the events actor.
pub enum EventsMsg {
    /// A bot's `getUpdates` call completed at `at_ms` (sent by its TelegramBot on every poll;
    /// kept in memory only, never stored).
    BotPolled {
        agent: String,
        at_ms: i64,
    },
    Snapshot(RpcReplyPort<TreeSnapshot>),
}

/// The latest known state of one actor.
#[derive(Debug, Clone, PartialEq)]
pub struct ActorView {
    pub id: String,
    pub status: &'static str,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub since_ms: i64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreeSnapshot {
    pub boot_complete: bool,
    pub actors: Vec<ActorView>,
    /// Each bot's last completed `getUpdates` (agent → ms), since this actor started.
    pub bot_polls: BTreeMap<String, i64>,
    /// Each seam channel account's last status in words (`channel:sg:ada` → (ms, sentence)):
    /// online, its stream dropped or back; since this actor started.
    pub channel_status: BTreeMap<String, (i64, String)>,
}

/// The events service, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Events {
    registry: Registry,
}

impl Events {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    /// The live view of the supervision tree.
    pub async fn snapshot(&self) -> Result<TreeSnapshot, CallError> {
        super::ask(&self.registry, &NAME, Some(TIMEOUT), EventsMsg::Snapshot).await
    }

    /// A bot's `getUpdates` call completed at `at_ms`.
    pub fn bot_polled(&self, agent: &str, at_ms: i64) {
        let polled = EventsMsg::BotPolled {
            agent: agent.to_string(),
            at_ms,
        };
        let _ = super::tell(&self.registry, &NAME, polled);
    }
}

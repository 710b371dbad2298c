//! The triggers service: runs each stored webhook delivery of `[[triggers]]` once, as a run of
//! the trigger's agent in its own session (`trigger:<name>`), and sends the answer on. Served by
//! `actors/triggers.rs`; a delivery is stored by `triggers::receive` before this service hears
//! of it, so a message missed here (the service restarting) is found in the table at its start.

use super::ServiceName;
use crate::domain::Outbound;
use crate::registry::Registry;

/// Where the triggers service is registered.
pub const NAME: ServiceName<TriggersMsg> = ServiceName::fixed("triggers");

/// What others may ask of the triggers service.
pub enum TriggersMsg {
    /// Delivery `id` was stored: run it (once; a row already started is left alone).
    Stored { id: i64 },
    /// Output of a trigger's run (its session's chat is `trigger:<name>`).
    Deliver(Outbound),
}

/// The triggers service, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Triggers {
    registry: Registry,
}

impl Triggers {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    /// Delivery `id` was stored; missed when the service is down (it reads the table at start).
    pub fn stored(&self, id: i64) {
        let _ = super::tell(&self.registry, &NAME, TriggersMsg::Stored { id });
    }

    /// Output of a trigger's run; missed when the service is down (reconciled at its start).
    pub fn deliver(&self, outbound: Outbound) {
        let _ = super::tell(&self.registry, &NAME, TriggersMsg::Deliver(outbound));
    }
}

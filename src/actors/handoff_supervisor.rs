//! HandoffSupervisor: one Contract actor per open handoff (built out by the handoff work).
//!
//! The interface other parts rely on: a delegate's output arrives here as
//! `HandoffMsg::Deliver(Outbound)` for a `handoff:<contract_id>` chat (routed by `channels::deliver`).

use crate::domain::Outbound;

pub enum HandoffMsg {
    /// Output of a delegate's run (its session's chat is `handoff:<contract_id>`).
    Deliver(Outbound),
}

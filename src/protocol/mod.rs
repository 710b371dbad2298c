//! Service protocols: how the rest of the daemon talks to each service actor.
//!
//! One file per service (approvals, memory, scheduler, handoff, telegram bot, agent, MCP, events,
//! the local channel, reload). Each holds the service's message enum with its request and reply
//! types, its typed name (a [`ServiceName`] pairs the registered name with the message type at
//! compile time), its error enum, and a cloneable handle whose methods own the lookup, the
//! service's one timeout and the mapping of "not running" / "no answer" into that error. This is
//! the shape of mini-redis's `Db` handle and of "Actors with Tokio": callers use methods, never
//! `ActorRef`s or `call_t!`.
//! The handles are `agent::Agent`, `approvals::Approvals`, `events::Events`, `handoff::Handoffs`,
//! `local::LocalChannel`, `mcp::Mcp` (and `mcp::Link` for one server), `memory::Memory`,
//! `reload::Reloader`, `scheduler::Scheduler` and `telegram::Bot`; a lookup that finds nothing
//! or a call that gets no answer is a [`CallError`] inside the service's own error enum.
//!
//! Layers (the ranks of `tests/tidy.rs`): `domain`, `config`, `store`, `policy`, `schedule`,
//! `llm`, `voice`, `supervision` (plain types, pure logic and capabilities, no actors) ←
//! `protocol` ← `agent`, `tools`, `mcp`, `telegram`, `people`, `studio` ← `actors` ← `daemon` ←
//! `testkit`, `cli`.
//! **Architecture Invariant:** only `actors/` (and `daemon.rs`, which spawns the tree) import
//! `crate::actors`; everything else reaches a service through its handle here (`tests/tidy.rs`).
//! **Architecture Invariant:** a message enum is the closed list of what can make its actor act;
//! variants marked internal are sent by the actor (or its tasks) to itself.

pub mod agent;
pub mod approvals;
pub mod events;
pub mod handoff;
pub mod local;
pub mod mcp;
pub mod memory;
pub mod reload;
pub mod scheduler;
pub mod telegram;

use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{Message, RpcReplyPort};

use crate::registry::Mailbox;
pub use crate::registry::ServiceName;

/// Why a call to a service got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The service is not running (not configured, or between a crash and its restart).
    #[error("the {service} service is not running")]
    NotRunning { service: String },
    /// The service did not answer in time, or stopped while the call waited.
    #[error("the {service} service did not answer")]
    NoAnswer { service: String },
}

/// Sends a request built by `make` to `actor` and waits for the reply, at most `timeout` (`None`:
/// as long as it takes, e.g. a human's decision).
async fn call<M, T>(
    actor: &Mailbox<M>,
    service: &str,
    timeout: Option<Duration>,
    make: impl FnOnce(RpcReplyPort<T>) -> M,
) -> Result<T, CallError>
where
    M: Message,
    T: Send + 'static,
{
    match actor.call(make, timeout).await {
        Ok(CallResult::Success(value)) => Ok(value),
        Ok(CallResult::Timeout | CallResult::SenderError) | Err(_) => Err(CallError::NoAnswer {
            service: service.to_string(),
        }),
    }
}

/// The actor under `name`, or [`CallError::NotRunning`].
fn find<M: Message>(
    registry: &crate::registry::Registry,
    name: &ServiceName<M>,
) -> Result<Mailbox<M>, CallError> {
    registry.lookup(name).ok_or_else(|| CallError::NotRunning {
        service: name.local().to_string(),
    })
}

/// Finds the service under `name` and asks it (see [`call`]).
pub(crate) async fn ask<M, T>(
    registry: &crate::registry::Registry,
    name: &ServiceName<M>,
    timeout: Option<Duration>,
    make: impl FnOnce(RpcReplyPort<T>) -> M,
) -> Result<T, CallError>
where
    M: Message,
    T: Send + 'static,
{
    let actor = find(registry, name)?;
    call(&actor, name.local(), timeout, make).await
}

/// Sends `message` to the service under `name` without waiting for anything.
pub(crate) fn tell<M: Message>(
    registry: &crate::registry::Registry,
    name: &ServiceName<M>,
    message: M,
) -> Result<(), CallError> {
    find(registry, name)?
        .cast(message)
        .map_err(|_| CallError::NotRunning {
            service: name.local().to_string(),
        })
}

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
//! Rank 3 (`ARCHITECTURE.md`, "Ranks"): above the capabilities its messages carry (`store`, `tool`,
//! `jobs`, ...), below everything that sends them (`agent`, `tools`, `studio`, ... and `actors`).
//! **Architecture Invariant:** only `actors/` (and `daemon.rs`, which spawns the tree) import
//! `crate::actors`; everything else reaches a service through its handle here (`tests/tidy.rs`).
//! **Architecture Invariant:** a message enum here is the closed list of what others may ask of
//! its service. What only the actor and its tasks send it (connection results, poll events, timer
//! ticks, supervision commands) is in the actor's own enum, which wraps this one; a lookup hands
//! out a mailbox that takes this one only (`registry`). No file here imports the module that
//! implements its service.

pub mod agent;
pub mod approvals;
pub mod browser;
pub mod channel;
pub mod events;
pub mod handoff;
pub mod local;
pub mod mcp;
pub mod memory;
pub mod reload;
pub mod scheduler;
pub mod telegram;
pub mod triggers;

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

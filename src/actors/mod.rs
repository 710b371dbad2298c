//! Actors: one file per actor kind, plus the shared restart policy (`supervise`).
//!
//! Each file follows the same order: `//!` doc (responsibility, invariants, restart policy),
//! `Msg` enum, `Args`, the behaviour struct, its state, `impl Actor`. An actor that outgrew one
//! file is a folder (`approval_desk/`, `mcp_link/`, `memory/`, `scheduler/`, `telegram_bot/`)
//! whose `mod.rs` keeps that order and whose other files are its named steps.
//!
//! Beside the actors: `supervise.rs`, the supervisors' children table (`Children`, `ChildSpec`)
//! driving the one pure restart policy of `crate::supervision`; `supervisor.rs`, a generic
//! one-for-one supervisor over a list that a reload may change (`Add`, `Remove`, `Replace`,
//! `SetSpec`); `root.rs`, the root's children; `context.rs`, what they are built from
//! (`RootContext`); `specs.rs`, each child as a spec; `plans.rs`, the agents' runtimes built from
//! the files; `reloader.rs`, the reload.
//!
//! A service's actor takes its protocol's public messages (`protocol/<service>.rs`) wrapped in the
//! `Request` variant of an enum of its own, whose other variants are what only the actor and its
//! tasks send it (connection results, poll events, timer ticks); [`supervise::spawn_child`]
//! registers it with a mailbox that takes the public messages only.
//!
//! Architecture Invariant: actors hold only `ActorRef`s (or registered names) of each other, never
//! another actor's state or shared mutable state (`AgentRuntime` is shared but immutable; settings
//! changes are pushed to sessions by message). Long I/O runs in spawned tasks that report back by
//! message.

/// Implements the conversions between an actor's own message enum and the protocol enum it wraps
/// in its `Request` variant, which its public mailbox needs (`Registry::publish`): a request
/// becomes the actor's message, and a request the mailbox could not deliver is handed back.
macro_rules! wraps_requests {
    ($own:ident, $public:ty) => {
        impl From<$public> for $own {
            fn from(request: $public) -> Self {
                $own::Request(request)
            }
        }

        impl TryFrom<$own> for $public {
            type Error = ();

            fn try_from(own: $own) -> Result<Self, ()> {
                match own {
                    $own::Request(request) => Ok(request),
                    _ => Err(()),
                }
            }
        }
    };
}

pub mod agent;
pub mod agent_supervisor;
pub mod approval_desk;
pub mod backup;
pub mod browser;
pub mod channel_account;
pub mod context;
pub mod contract;
pub mod events;
pub mod handoff_supervisor;
pub mod local_channel;
pub mod mcp_link;
pub mod mcp_supervisor;
pub mod memory;
pub mod plans;
pub mod reloader;
pub mod root;
pub mod run;
pub mod scheduler;
pub mod session;
pub mod specs;
pub mod store;
pub mod studio;
pub mod supervise;
pub mod supervisor;
pub mod telegram_bot;
pub mod triggers;

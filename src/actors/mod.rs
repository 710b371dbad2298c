//! Actors: one file per actor kind, plus the shared restart policy (`supervise`).
//!
//! Each file follows the same order: `//!` doc (responsibility, invariants, restart policy),
//! `Msg` enum, `Args`, the behaviour struct, its state, `impl Actor`.
//!
//! Architecture Invariant: actors hold only `ActorRef`s (or registered names) of each other, never
//! another actor's state. Long I/O runs in spawned tasks that report back by message.

pub mod agent;
pub mod agent_supervisor;
pub mod approval_desk;
pub mod backup;
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
pub mod store;
pub mod studio;
pub mod supervise;
pub mod supervisor;
pub mod telegram_bot;

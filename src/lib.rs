//! clawvisor: a local-first daemon that hosts personal AI agents on a supervision tree.
//!
//! Start at `ARCHITECTURE.md` for the map; `daemon::run` is where the tree is booted.

pub mod actors;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod domain;
pub mod events;
pub mod llm;
pub mod logging;
pub mod policy;
pub mod registry;
pub mod secrets;
pub mod store;
pub mod studio;
pub mod tools;

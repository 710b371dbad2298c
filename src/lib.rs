//! clawvisor: a local-first daemon that hosts personal AI agents on a supervision tree.
//!
//! Start at `ARCHITECTURE.md` for the map; `daemon::run` is where the tree is booted.

pub mod actors;
pub mod agent;
pub mod audit;
pub mod backup;
pub mod channels;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod domain;
pub mod events;
pub mod jobs;
pub mod llm;
pub mod logging;
pub mod mcp;
pub mod memory;
pub mod people;
pub mod policy;
pub mod protocol;
pub mod registry;
pub mod reload;
pub mod resident;
pub mod sandbox;
pub mod schedule;
pub mod secrets;
pub mod skills;
pub mod store;
pub mod studio;
pub mod supervision;
pub mod telegram;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod tool;
pub mod tools;
pub mod voice;

//! clawvisor: a local-first daemon that hosts personal AI agents on a supervision tree.
//!
//! Start at `ARCHITECTURE.md` for the map; `daemon::run` is where the tree is booted.
//!
//! One process, one tokio runtime, one supervision tree of ractor actors, one SQLite file. Each
//! module's `//!` header says what it is for, how it works and what must stay true of it; the
//! measured figures are in `BENCHMARKS.md`.
//!
//! The daemon never panics on input; an `unwrap` or `expect` in non-test code says why it cannot
//! fail. `tests/fuzz.rs` checks it at each input surface (config loading, stored Telegram
//! updates, the shell classifier, schedules, zone names, Markdown → Telegram HTML, the Studio
//! API, …) from a committed corpus (`tests/fuzz_corpus/`) plus generated cases, with properties
//! beyond "no panic".
//!
//! `tests/tidy.rs` checks the tree's shape: every top-level module has a rank and imports only
//! its own rank or lower; only `actors/` and `daemon.rs` name `crate::actors`; no non-test source
//! file under `src/` passes 800 lines (exceptions would be listed there with their reason; there
//! are none); at most five non-test functions pass 100 lines, each saying why in its doc comment.

pub mod actors;
pub mod agent;
pub mod audit;
pub mod backup;
pub mod browser;
pub mod cause;
pub mod channel;
pub mod channels;
pub mod cli;
pub mod clock;
pub mod config;
pub mod daemon;
pub mod domain;
pub mod events;
pub mod fds;
pub mod jobs;
pub mod llm;
pub mod logging;
pub mod mcp;
pub mod memory;
pub mod node;
pub mod people;
pub mod policy;
pub mod protocol;
pub mod registry;
pub mod reload;
pub mod reply_latency;
pub mod resident;
pub mod sandbox;
pub mod schedule;
pub mod secrets;
pub mod signal;
pub mod skills;
pub mod store;
pub mod studio;
pub mod supervision;
pub mod telegram;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod tool;
pub mod tools;
pub mod triggers;
pub mod voice;
pub mod whatsapp;

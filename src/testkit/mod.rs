//! Loopback fakes that speak real protocols over HTTP: used by tests, benchmarks and
//! `clawvisor eval`, never on the daemon's runtime path.
//!
//! Each fake binds 127.0.0.1 on a free port, answers like the real service (same JSON shapes,
//! same streaming format, same errors) and records what it received so callers can assert on it.
//! **Architecture Invariant:** nothing under `src/` outside `testkit` and the `eval` command
//! depends on this module.

pub mod fake_embeddings;
pub mod fake_search;
pub mod fake_speech;
pub mod fake_telegram;
pub mod fake_transcription;
pub mod harness;
pub mod process;
pub mod scripted_llm;
pub mod wait;
pub mod world;

pub use wait::{poll_until, wait_until, wait_until_blocking};

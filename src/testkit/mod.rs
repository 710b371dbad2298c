//! Loopback fakes that speak real protocols over HTTP: used by tests, benchmarks and
//! `clawvisor eval`, never on the daemon's runtime path.
//!
//! Each fake binds 127.0.0.1 on a free port, answers like the real service (same JSON shapes,
//! same streaming format, same errors) and records what it received so callers can assert on it.
//! The fakes: `scripted_llm` (an OpenAI-compatible model answering from `script` rules matched
//! on the `request`), `fake_telegram` (the Bot API: `records`, `server`, `wire`, `state`,
//! `methods`, `html`, `flood`, `forum` for forum supergroups and `message_thread_id`, `drafts`),
//! `fake_embeddings`, `fake_speech` (`/v1/audio/speech` answering real Ogg/Opus),
//! `fake_transcription`, `fake_search` (SearXNG's and Brave's JSON APIs), `fake_signal`
//! (signal-cli's HTTP daemon: event stream, JSON-RPC, drops and refusals) and `fake_whatsapp` (the
//! Graph API with signed webhooks, media, the 24-hour window and rate errors). Around them:
//! `harness` (a real daemon in-process on a scratch directory) and `process` (the real binary,
//! SIGKILL and restart), both with `TZ=UTC` unless the test sets it, so the daemon's zone is never
//! the machine's; `world` builds the usual test world (fake Bot API, scripted model, agents with
//! bots, the daemon in-process or staged for the binary); `wait` is the one way tests wait for a
//! state (`wait_until`: poll the row or event that proves it, fail naming what was awaited)
//! instead of sleeping.
//!
//! Proof at the edges is in `tests/`: `chaos.rs` (the real binary, 5 bots, 20 SIGKILLs under a
//! stream of questions, approvals, reminders and heartbeats: nothing lost, doubled or run
//! unapproved), `faults.rs` (each dependency failing: Bot API, model, MCP, a locked database, a
//! full disk), `fuzz.rs` (bad input at every surface), and the `evals/` scenarios run by
//! `clawvisor eval`; `BENCHMARKS.md` has the figures.
//! **Architecture Invariant:** nothing under `src/` outside `testkit` and the `eval` command
//! depends on this module.

pub mod fake_embeddings;
pub mod fake_search;
pub mod fake_signal;
pub mod fake_speech;
pub mod fake_telegram;
pub mod fake_transcription;
pub mod fake_whatsapp;
pub mod harness;
pub mod process;
pub mod scripted_llm;
pub mod test_model;
pub mod test_site;
pub mod tmpfs;
pub mod wait;
pub mod world;

pub use wait::{poll_until, wait_until, wait_until_blocking};

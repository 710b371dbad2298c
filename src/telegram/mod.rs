//! The Telegram channel's edge: the Bot API client, the long-poll loop, reading updates, the
//! per-chat send workers and message formatting. The actor that ties them together is
//! `actors::telegram_bot`.
//!
//! Architecture Invariant: only `telegram` (and the bot actor) know teloxide types; the rest of the
//! daemon sees chat keys, user ids and strings.

pub mod approval;
pub mod client;
pub mod format;
pub mod governor;
pub mod intake;
pub mod pairing;
pub mod poller;
pub mod sender;
pub mod stream;
pub mod upload;

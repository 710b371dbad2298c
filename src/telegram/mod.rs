//! The Telegram channel's edge: the Bot API client (`client`), the long-poll loop (`poller`),
//! reading updates (`intake`), the per-conversation send workers (`sender`), how an answer is
//! shown while written (`stream`), file and voice uploads (`upload`), records of accepted sends
//! retried rather than the sends repeated (`hold`), the flood-limit governor
//! (`governor`), message formatting (`format`), pairing codes (`pairing`) and approval prompts
//! (`approval`). The actor that ties them together is `actors::telegram_bot`.
//!
//! Architecture Invariant: only `telegram` (and the bot actor) know teloxide types; the rest of the
//! daemon sees chat keys, user ids and strings.

pub mod approval;
pub mod client;
pub mod format;
pub mod governor;
pub mod hold;
pub mod intake;
pub mod pairing;
pub mod poller;
pub mod sender;
pub mod stream;
pub mod upload;

//! Voice: speaking the agent's replies (`speech`, OpenAI-compatible `POST /audio/speech`).
//!
//! Architecture Invariant: `voice` knows nothing about Telegram, SQLite or actors; its errors
//! never contain a key or a URL.

pub mod speech;

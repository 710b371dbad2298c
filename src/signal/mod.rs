//! The Signal channel's edge: a client for signal-cli's HTTP daemon
//! (`signal-cli -a <number> daemon --http 127.0.0.1:7583 --receive-mode=manual`).
//!
//! - `sse` decodes the Server-Sent Events of `GET /api/v1/events`;
//! - `inbound` reads a `receive` object into a typed [`inbound::SignalInbound`] (sender, group,
//!   text, mentions, quote, attachments, voice notes) with its dedupe key and whether it is
//!   addressed to us, or says why it is ignored or unreadable;
//! - `link` keeps the event stream (or the `receive` pull loop) open with backoff and records each
//!   gap for Studio;
//! - `rpc` calls `POST /api/v1/rpc` (JSON-RPC 2.0): `send`, `sendTyping`, `sendReceipt`,
//!   `sendReaction`, `getAttachment`, `receive`, in single- or multi-account mode;
//! - `adapter` is the account on the channel seam (`crate::channel::Adapter`): sends, receipts,
//!   typing, attachments, and `edge` its inbound edge — the link, each message stored on receipt.
//!
//! Approvals use the seam's text form with the request's id (`yes <id>` / `no <id>`,
//! `channel::approval`). The account's actor is the seam's (`actors/channel_account/`, one per
//! `[signal]` table): people, claim and pairing screening, sessions `sg:<number or group id>`,
//! the outbox worker.
//!
//! Architecture Invariant: only `signal` knows signal-cli's wire shapes; errors say what happened
//! and what to do (`crate::cause`), and never carry a secret.

pub mod adapter;
pub mod edge;
pub mod inbound;
pub mod link;
pub mod rpc;
pub mod sse;

pub use inbound::{OwnAccount, Received, SignalInbound};
pub use link::{GapLog, LinkEvent, LinkSettings, StreamGap};
pub use rpc::{OutgoingAttachment, OutgoingMessage, Recipient, SignalError, SignalRpc};

//! The channel seam: what every person's channel besides Telegram shares (WhatsApp, Signal),
//! so that a channel is a small adapter and keeps Telegram's guarantees.
//!
//! **What an adapter implements** ([`Adapter`]): its short name (`wa`, `sg`: the chat keys'
//! prefix) and account id; its [`Capabilities`] (text limit, reply buttons or not, a
//! customer-service window or not); `check` (are the credentials good: who the account is);
//! `send` one [`OutPart`] to a peer (text, buttons, a file, a template) and map the channel's
//! errors onto [`SendError`] (`Paced` for rate limits, `OutsideWindow`, `Rejected` for good,
//! `Unreachable` for now); `mark_read`; `download` a media reference; `parse` a stored
//! payload into an [`Incoming`] (text, a button id, media); optionally `typing`. Its inbound edge
//! (a webhook in Studio, or a link the account runs while online: `inbound_edge`) stores each
//! message with [`crate::store::channels::store_inbound`] **before** it is acknowledged,
//! then tells the account (`protocol::channel::ChannelAccount::stored`).
//!
//! **What the seam gives it** (`actors/channel_account/`, one supervised actor per account,
//! started `boot_stagger` apart under the channel supervisor like the bots): dispatch of stored
//! messages in order, exactly once per message id (a redelivery is not stored again; a session
//! event is unique on `-channel_inbound.id`); who may talk (`screen`: the file's numbers, the
//! claimed owner, the paired, the blocked; a stranger never reaches the model, an unclaimed
//! account is claimed with its one-time code, anyone else gets one pairing code (`pairing`));
//! approvals rendered with buttons where the channel has them
//! and as text (`yes <id>` / `no <id>`) where it does not, decided only by approvers
//! (`approval`); voice notes and files saved in the workspace's `inbox/` and transcribed by
//! `crate::voice`; the outbox (`store/outbox.rs`, channel-aware by chat prefix) sent by one worker
//! per account, split at the channel's limit, paced after `Paced` errors (per peer, like
//! Telegram's 429s), held and reported (never dropped) outside a window without a template, and
//! marked delivered only after the channel accepted it.
//!
//! What stays Telegram's own (not on the seam): its poller and offsets, teloxide's types, HTML
//! formatting and edits of streamed answers, forum topics, groups, commands, the
//! chat-worker governor (`telegram::governor`, whose draft budget has no equivalent elsewhere).

pub mod approval;
pub mod pairing;
pub mod screen;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use crate::domain::AttachmentKind;
use crate::store::channels::ChannelInboundRow;
use crate::store::outbox::OutboxFileKind;

/// What an adapter's methods return.
pub type AdapterFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a channel can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The longest text message, in characters.
    pub text_limit: usize,
    /// Reply buttons: how many, and the longest title; `None` where the channel has none.
    pub buttons: Option<ButtonLimits>,
    /// Free-form messages only this long after the person last wrote (WhatsApp: 24 h).
    pub window: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ButtonLimits {
    pub max: usize,
    pub title_chars: usize,
}

/// One reply button.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    /// What comes back when it is pressed.
    pub id: String,
    pub title: String,
}

/// One thing to send.
#[derive(Debug, Clone, PartialEq)]
pub enum OutPart {
    Text(String),
    Buttons {
        body: String,
        buttons: Vec<Button>,
    },
    File {
        kind: OutboxFileKind,
        path: PathBuf,
        name: String,
        caption: String,
    },
    /// An approved template (outside a window), with the text as its one body parameter.
    Template {
        name: String,
        language: String,
        text: String,
    },
}

/// Why a send failed, in the seam's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// A rate limit (WhatsApp 130429 throughput, 131056 pair rate): wait, then send again.
    #[error("the channel asks to slow down: {reason}")]
    Paced {
        retry_after: Duration,
        reason: String,
    },
    /// Outside the customer-service window (WhatsApp 131047): only a template may go.
    #[error("the person has not written in the last 24 hours")]
    OutsideWindow,
    /// Refused for good (a bad number, a bad token): trying again cannot help.
    #[error("the channel refused it: {0}")]
    Rejected(String),
    /// The channel could not be reached, or failed for now.
    #[error("the channel could not be reached: {0}")]
    Unreachable(String),
}

/// Media a message carries, still at the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingMedia {
    pub kind: AttachmentKind,
    /// The adapter's reference to download it (a media id).
    pub reference: String,
    pub mime: String,
    pub name: Option<String>,
}

/// A stored message as the seam reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Incoming {
    /// The text, or a media's caption.
    pub text: String,
    /// The id of a pressed reply button.
    pub button: Option<String>,
    pub media: Option<IncomingMedia>,
}

/// A channel's adapter for one account (see the module header).
pub trait Adapter: Send + Sync + 'static {
    /// `wa`, `sg`: the chat keys' prefix and `channel_inbound.channel`.
    fn channel(&self) -> &'static str;
    /// The account (`channel_inbound.account`).
    fn account(&self) -> &str;
    fn capabilities(&self) -> Capabilities;
    /// Checks the credentials against the channel; the account's name for people.
    fn check(&self) -> AdapterFuture<'_, Result<String, SendError>>;
    /// Sends one part to `peer`; the channel's message id.
    fn send<'a>(
        &'a self,
        peer: &'a str,
        part: &'a OutPart,
    ) -> AdapterFuture<'a, Result<String, SendError>>;
    /// Marks a received message read (a no-op where the channel has no receipts).
    fn mark_read<'a>(&'a self, message_id: &'a str) -> AdapterFuture<'a, Result<(), SendError>>;
    /// Downloads media: its bytes and MIME type.
    fn download<'a>(
        &'a self,
        media: &'a IncomingMedia,
    ) -> AdapterFuture<'a, Result<(Vec<u8>, String), SendError>>;
    /// Reads a stored payload; `Err` names what is unsupported.
    fn parse(&self, row: &ChannelInboundRow) -> Result<Incoming, String>;
    /// Shows (or with `stop`, ends) "typing…" to `peer` while a run works (a no-op where the
    /// channel has no such notice).
    fn typing<'a>(
        &'a self,
        _peer: &'a str,
        _stop: bool,
    ) -> AdapterFuture<'a, Result<(), SendError>> {
        Box::pin(async { Ok(()) })
    }
    /// The inbound edge the account runs while it is online (Signal's event stream), ending when
    /// `context.cancel` is cancelled; `None` where the channel delivers to us (WhatsApp's webhook).
    fn inbound_edge(&self, _context: EdgeContext) -> Option<AdapterFuture<'static, ()>> {
        None
    }
}

/// What an adapter's own inbound edge needs: where to store, whom to tell, when to stop.
#[derive(Clone)]
pub struct EdgeContext {
    pub store: crate::store::Store,
    pub events: crate::events::EventBus,
    pub registry: crate::registry::Registry,
    pub agent: String,
    pub cancel: tokio_util::sync::CancellationToken,
}

/// Splits `text` into pieces of at most `limit` characters, at a paragraph, line or word
/// boundary where one is in the second half of a piece.
pub fn split_text(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut pieces = Vec::new();
    let mut rest = text.trim();
    while rest.chars().count() > limit {
        let cut_at = rest
            .char_indices()
            .nth(limit)
            .map_or(rest.len(), |(index, _)| index);
        let head = &rest[..cut_at];
        let boundary = ["\n\n", "\n", " "]
            .iter()
            .filter_map(|separator| head.rfind(separator))
            .find(|index| *index >= cut_at / 2)
            .unwrap_or(cut_at);
        pieces.push(rest[..boundary].trim_end().to_string());
        rest = rest[boundary..].trim_start();
    }
    if !rest.is_empty() || pieces.is_empty() {
        pieces.push(rest.to_string());
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_split_within_the_limit_at_boundaries() {
        let text = format!("{}\n\n{}", "a ".repeat(3000), "b".repeat(5000));
        let pieces = split_text(&text, 4096);
        assert!(pieces.iter().all(|piece| piece.chars().count() <= 4096));
        assert_eq!(
            pieces.concat().replace([' ', '\n'], ""),
            text.replace([' ', '\n'], "")
        );
        assert_eq!(split_text("hi", 4096), vec!["hi".to_string()]);
        assert_eq!(split_text("äöü", 1), vec!["ä", "ö", "ü"]);
    }
}

//! One Signal account as the channel seam's [`Adapter`]: sends through signal-cli's JSON-RPC
//! (`send` with attachments inline, `sendTyping`, `sendReceipt`, `getAttachment`), reads stored
//! payloads back, and runs the account's inbound edge (`edge.rs`: the event stream, stored on
//! receipt).
//!
//! A peer is a person (a number `+49…` or a Signal uuid) or a group (its base64 id): chats are
//! `sg:<number>` and `sg:<group id>`. Signal has no reply buttons and no customer-service window,
//! so approvals go out in the seam's text form (`yes <id>` / `no <id>`, `channel::approval`).
//! A stored message's id is its dedupe key (`account/sender/timestamp`, see
//! [`SignalInbound::dedupe_key`]), from which a read receipt names the sender and the timestamp.
//!
//! Errors map onto the seam's: a rate limit → `Paced`; signal-cli unreachable, an HTTP status,
//! an unreadable answer → `Unreachable` (tried again); a JSON-RPC refusal (an unregistered
//! number, an unknown group) → `Rejected`. No secret is involved: signal-cli's HTTP endpoint has
//! none (it listens on loopback only).

use std::time::Duration;

use super::edge;
use super::inbound::{OwnAccount, SignalInbound};
use super::link::LinkSettings;
use super::rpc::{OutgoingAttachment, OutgoingMessage, Recipient, SignalError, SignalRpc};
use crate::channel::{
    Adapter, AdapterFuture, Capabilities, EdgeContext, Incoming, IncomingMedia, OutPart, SendError,
};
use crate::config::signal::SignalSpec;
use crate::domain::AttachmentKind;
use crate::store::channels::ChannelInboundRow;
use crate::store::outbox::OutboxFileKind;

/// The longest text sent as one message (Signal's apps show longer ones as "read more"; signal-cli
/// sends them as a long-text attachment, which older clients show as a file).
pub const TEXT_LIMIT: usize = 2000;
/// The largest attachment fetched (Signal's own limit is 100 MB; 20 MB as for Telegram).
const MAX_DOWNLOAD: usize = 20 * 1024 * 1024;

/// The adapter of one Signal account.
pub struct SignalAdapter {
    number: String,
    rpc: SignalRpc,
    link: LinkSettings,
}

impl SignalAdapter {
    /// The adapter for `spec`'s account (single-account mode: signal-cli started with `-a`).
    pub fn new(spec: &SignalSpec) -> SignalAdapter {
        let number = spec.account.trim().to_string();
        let own = OwnAccount {
            number: number.clone(),
            uuid: None,
        };
        SignalAdapter {
            rpc: SignalRpc::new(&spec.rpc_url, None),
            link: LinkSettings::new(&spec.rpc_url, own),
            number,
        }
    }

    /// The same with the link's reconnection settings replaced (tests, benchmarks).
    pub fn with_link(mut self, link: LinkSettings) -> SignalAdapter {
        self.link = link;
        self
    }

    async fn send_part(&self, peer: &str, part: &OutPart) -> Result<String, SendError> {
        let mut message = OutgoingMessage {
            to: recipient(peer),
            text: String::new(),
            attachments: Vec::new(),
            voice_note: false,
            quote: None,
        };
        match part {
            OutPart::Text(text) => message.text = text.clone(),
            // No buttons on Signal: the body says how to answer in words.
            OutPart::Buttons { body, .. } => message.text = body.clone(),
            OutPart::Template { text, .. } => message.text = text.clone(),
            OutPart::File {
                kind,
                path,
                name,
                caption,
            } => {
                let bytes = tokio::fs::read(path).await.map_err(|error| {
                    SendError::Rejected(format!("the file to send is gone: {error}"))
                })?;
                let mime = mime_guess::from_path(name)
                    .first_or_octet_stream()
                    .essence_str()
                    .to_string();
                message.text = caption.clone();
                message.voice_note = *kind == OutboxFileKind::Voice;
                message.attachments.push(OutgoingAttachment {
                    file_name: name.clone(),
                    mime,
                    bytes,
                });
            }
        }
        let outcome = self.rpc.send(&message).await.map_err(seam_error)?;
        Ok(outcome.timestamp.to_string())
    }
}

/// A peer as signal-cli takes it: a number or uuid is a person, anything else a group id.
pub fn recipient(peer: &str) -> Recipient {
    if crate::config::signal::is_phone_number(peer) || crate::config::signal::is_uuid(peer) {
        Recipient::Person(peer.to_string())
    } else {
        Recipient::Group(peer.to_string())
    }
}

/// signal-cli's errors in the seam's terms.
fn seam_error(error: SignalError) -> SendError {
    match error {
        SignalError::RateLimited { retry_after, .. } => SendError::Paced {
            retry_after: retry_after.max(Duration::from_secs(1)),
            reason: error.to_string(),
        },
        SignalError::Rpc { .. } => SendError::Rejected(error.to_string()),
        SignalError::Unreachable { .. }
        | SignalError::Status { .. }
        | SignalError::Malformed { .. } => SendError::Unreachable(error.to_string()),
    }
}

/// The sender and timestamp of a stored message id (`account/sender/timestamp`).
fn sender_and_timestamp(message_id: &str) -> Option<(&str, i64)> {
    let mut parts = message_id.rsplitn(3, '/');
    let timestamp = parts.next()?.parse().ok()?;
    let sender = parts.next().filter(|sender| !sender.is_empty())?;
    Some((sender, timestamp))
}

/// What the seam calls an attachment of this type.
fn attachment_kind(content_type: &str, voice_note: bool) -> AttachmentKind {
    let content_type = content_type.to_ascii_lowercase();
    if voice_note {
        AttachmentKind::Voice
    } else if content_type.starts_with("image/") {
        AttachmentKind::Image
    } else if content_type.starts_with("audio/") {
        AttachmentKind::Audio
    } else {
        AttachmentKind::Document
    }
}

impl Adapter for SignalAdapter {
    fn channel(&self) -> &'static str {
        "sg"
    }

    fn account(&self) -> &str {
        &self.number
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            text_limit: TEXT_LIMIT,
            buttons: None,
            window: None,
        }
    }

    fn check(&self) -> AdapterFuture<'_, Result<String, SendError>> {
        Box::pin(async move {
            self.rpc.check().await.map_err(seam_error)?;
            Ok(self.number.clone())
        })
    }

    fn send<'a>(
        &'a self,
        peer: &'a str,
        part: &'a OutPart,
    ) -> AdapterFuture<'a, Result<String, SendError>> {
        Box::pin(self.send_part(peer, part))
    }

    fn mark_read<'a>(&'a self, message_id: &'a str) -> AdapterFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let Some((sender, timestamp)) = sender_and_timestamp(message_id) else {
                return Ok(());
            };
            self.rpc
                .send_read_receipt(sender, &[timestamp])
                .await
                .map(|_| ())
                .map_err(seam_error)
        })
    }

    fn download<'a>(
        &'a self,
        media: &'a IncomingMedia,
    ) -> AdapterFuture<'a, Result<(Vec<u8>, String), SendError>> {
        Box::pin(async move {
            // The reference is `<peer>\n<attachment id>`: the sender, or the group it came in.
            let (from, id) = media
                .reference
                .split_once('\n')
                .ok_or_else(|| SendError::Rejected("an attachment without its origin".into()))?;
            let bytes = self
                .rpc
                .get_attachment(id, &recipient(from))
                .await
                .map_err(seam_error)?;
            if bytes.len() > MAX_DOWNLOAD {
                return Err(SendError::Rejected(format!(
                    "the attachment is larger than {} MB",
                    MAX_DOWNLOAD / (1024 * 1024)
                )));
            }
            Ok((bytes, media.mime.clone()))
        })
    }

    fn parse(&self, row: &ChannelInboundRow) -> Result<Incoming, String> {
        let message: SignalInbound = serde_json::from_str(&row.payload)
            .map_err(|error| format!("a stored Signal message is unreadable: {error}"))?;
        let peer = message
            .group
            .as_ref()
            .map_or_else(|| message.source().to_string(), |group| group.id.clone());
        let media = message.attachments.first().map(|attachment| IncomingMedia {
            kind: attachment_kind(&attachment.content_type, attachment.voice_note),
            reference: format!("{peer}\n{}", attachment.id),
            mime: attachment.content_type.clone(),
            name: attachment.file_name.clone(),
        });
        let caption = message
            .attachments
            .first()
            .and_then(|attachment| attachment.caption.clone())
            .unwrap_or_default();
        let text = if message.text.trim().is_empty() {
            caption
        } else {
            message.text.clone()
        };
        if text.trim().is_empty() && media.is_none() {
            return Err("an empty message".into());
        }
        Ok(Incoming {
            text,
            button: None,
            media,
        })
    }

    fn typing<'a>(&'a self, peer: &'a str, stop: bool) -> AdapterFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            self.rpc
                .send_typing(&recipient(peer), stop)
                .await
                .map(|_| ())
                .map_err(seam_error)
        })
    }

    fn inbound_edge(&self, context: EdgeContext) -> Option<AdapterFuture<'static, ()>> {
        Some(Box::pin(edge::run(self.link.clone(), context)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_read_as_people_or_groups_and_message_ids_as_receipts() {
        assert_eq!(
            recipient("+4917200000001"),
            Recipient::Person("+4917200000001".into())
        );
        assert_eq!(
            recipient("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
            Recipient::Person("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".into())
        );
        assert_eq!(
            recipient("aGVsbG8gZ3JvdXAgaWQ+/x=="),
            Recipient::Group("aGVsbG8gZ3JvdXAgaWQ+/x==".into())
        );
        assert_eq!(
            sender_and_timestamp("+4915100000000/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0/1700"),
            Some(("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 1700))
        );
        assert_eq!(sender_and_timestamp("nonsense"), None);
        assert_eq!(sender_and_timestamp("a//12"), None);
    }
}

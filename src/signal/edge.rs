//! A Signal account's inbound edge: the link (`link.rs`, signal-cli's event stream with backoff)
//! read by one task that stores every message the moment it arrives, then tells the account.
//!
//! Storing: each message is stored with [`store_inbound`] (unique on account + sender +
//! timestamp, so a message signal-cli hands over twice is stored once) in its own transaction,
//! retried until it commits (`Store::write_until_committed`) — signal-cli has acknowledged it to
//! Signal already, so a store fault must not drop it; while the retry waits, the link waits
//! too (its channel is bounded). Only then is the account told (`ChannelAccount::stored`). A
//! group message not addressed to the agent (no mention of us, no reply to us, no `/command`)
//! is stored already `ignored` in the same transaction: it never reaches the model.
//!
//! Gaps: a dropped stream is published once when it drops (a `bot_status` event naming the
//! cause) and once when it is back (how long it was away; what was sent meanwhile waited on
//! Signal's servers and arrives now, since signal-cli in `--receive-mode=manual` receives only
//! while a stream is open). Studio's People page shows the last gap from these events.
//!
//! The remaining window (README "Signal"): a message signal-cli wrote to the stream but this
//! process had not committed when it was killed is lost — signal-cli acknowledged it on writing.

use tokio::sync::{mpsc, watch};

use super::inbound::{Received, SignalInbound};
use super::link::{self, GapLog, LinkEvent, LinkSettings, StreamGap};
use crate::channel::EdgeContext;
use crate::events::EventKind;
use crate::protocol::channel::ChannelAccount;
use crate::store::channels::{self as queries, ChannelInboundStatus, NewChannelInbound};

/// Events the link may have read ahead of the store.
const AHEAD: usize = 64;

/// Runs the link and stores what it reads until `context.cancel` is cancelled.
pub async fn run(settings: LinkSettings, context: EdgeContext) {
    let (sink, mut events) = mpsc::channel(AHEAD);
    let (stop, stop_watch) = watch::channel(false);
    let own = settings.own.clone();
    let link = tokio::spawn(link::run_event_stream(settings, sink, stop_watch));
    let subject = crate::protocol::channel::name("sg", &context.agent)
        .local()
        .to_string();
    let mut gaps = GapLog::default();
    loop {
        let event = tokio::select! {
            _ = context.cancel.cancelled() => break,
            event = events.recv() => match event {
                Some(event) => event,
                None => break,
            },
        };
        gaps.observe(&event);
        match event {
            LinkEvent::Received(Received::Message(message)) => {
                let addressed = message.addressed_to(&own);
                if store(&context, &own.number, &message, addressed).await {
                    ChannelAccount::new(&context.registry, "sg", &context.agent).stored();
                }
            }
            LinkEvent::Received(Received::Ignored { what, .. }) => {
                tracing::debug!(agent = %context.agent, "Signal: {what}; not for the agent");
            }
            LinkEvent::Unreadable(problem) => {
                tracing::warn!(agent = %context.agent, "{problem}");
                context
                    .events
                    .publish(EventKind::Warning, &subject, &problem);
            }
            LinkEvent::Connected { gap, .. } => {
                let text = match gap {
                    Some(gap) => back_after(&gap),
                    None => "Signal's message stream is open".to_string(),
                };
                tracing::info!(agent = %context.agent, "{text}");
                context
                    .events
                    .publish(EventKind::BotStatus, &subject, &text);
            }
            LinkEvent::Dropped {
                cause, retry_in, ..
            } => {
                // Once per gap: the first drop opens it, further failed attempts only count.
                if gaps.open_gap().is_some_and(|gap| gap.failed_attempts == 0) {
                    let text = format!(
                        "Signal's message stream dropped: {cause}. clawvisor reconnects (next try in {} s); messages sent meanwhile wait on Signal's servers.",
                        retry_in.as_secs().max(1)
                    );
                    tracing::warn!(agent = %context.agent, "{text}");
                    context
                        .events
                        .publish(EventKind::BotStatus, &subject, &text);
                }
            }
        }
    }
    let _ = stop.send(true);
    link.abort();
}

/// "Signal's message stream is back after 12 s away (…)".
fn back_after(gap: &StreamGap) -> String {
    let away = gap.restored_at_ms.unwrap_or(gap.dropped_at_ms) - gap.dropped_at_ms;
    format!(
        "Signal's message stream is back after {} s away ({}); what was sent meanwhile arrives now.",
        (away.max(0) + 999) / 1000,
        gap.cause
    )
}

/// Stores `message` under `account` (the configured number, as the account's actor reads it),
/// retried until it commits; whether it was new and is for the agent.
async fn store(
    context: &EdgeContext,
    account: &str,
    message: &SignalInbound,
    addressed: bool,
) -> bool {
    let payload = match serde_json::to_string(message) {
        Ok(payload) => payload,
        // A struct of strings and numbers always serializes; log rather than panic.
        Err(error) => {
            tracing::error!(agent = %context.agent, %error, "a Signal message could not be serialized");
            return false;
        }
    };
    let peer = message
        .group
        .as_ref()
        .map_or_else(|| message.source().to_string(), |group| group.id.clone());
    let chat = format!("sg:{peer}");
    let sender = message.source().to_string();
    let message_id = message.dedupe_key();
    let kind = match message.attachments.first() {
        Some(attachment) if attachment.voice_note => "voice",
        Some(attachment) if attachment.content_type.starts_with("image/") => "image",
        Some(attachment) if attachment.content_type.starts_with("audio/") => "audio",
        Some(_) => "document",
        None => "text",
    };
    let (agent, account, name, sent_ms) = (
        context.agent.clone(),
        account.to_string(),
        message.source_name.clone(),
        message.timestamp,
    );
    let make = || {
        let (payload, chat, sender, message_id, agent, account, name) = (
            payload.clone(),
            chat.clone(),
            sender.clone(),
            message_id.clone(),
            agent.clone(),
            account.clone(),
            name.clone(),
        );
        move |conn: &rusqlite::Connection| {
            let now = crate::clock::now_ms();
            let new = NewChannelInbound {
                channel: "sg",
                account: &account,
                message_id: &message_id,
                agent: &agent,
                chat: &chat,
                sender: &sender,
                sender_name: &name,
                kind,
                payload: &payload,
                sent_ms: Some(sent_ms),
            };
            let Some(id) = queries::store_inbound(conn, &new, now)? else {
                return Ok(false);
            };
            if !addressed {
                queries::set_inbound_status(
                    conn,
                    id,
                    ChannelInboundStatus::Ignored,
                    Some("a group message not addressed to the agent"),
                    now,
                )?;
            }
            Ok(addressed)
        }
    };
    context
        .store
        .write_until_committed("a received Signal message", make)
        .await
        .unwrap_or(false)
}

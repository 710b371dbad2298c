//! Showing an answer while the model writes it — without ever slowing down one that is quick.
//!
//! The policy (issue #20): nothing is shown until the run has been answering for
//! `[telegram] stream_after` (1 s by default) and the text has `stream_min_chars` characters; an
//! answer finished sooner is delivered as ONE `sendMessage`, with no partial message, edit or
//! draft in front of it, so it costs the chat one message slot and no waiting.
//!
//! A longer answer is shown as it grows:
//! - in a private chat, as a draft (`sendMessageDraft`, Bot API 9.5): the user sees the bot
//!   "typing" the text; a draft posts no message and takes no chat slot (only the bot-wide rate),
//!   and the final text then arrives with `sendMessage`. Drafts are updated at most every
//!   [`DRAFT_SPACING`], and skipped while the bot is busy sending messages (the governor's
//!   `try_acquire_draft`);
//! - in groups, or when the Bot API refuses drafts, as a message sent once and edited as it
//!   grows, at most every [`EDIT_SPACING`], the final text being its last edit. A refusal (any
//!   4xx answer, such as 404 "Not Found" from a Bot API that does not know the method) is
//!   remembered for the bot ([`DraftSupport`]), so its other chats do not ask again. The edited
//!   message is stored (`telegram_streams`), so that a reply delivered after a crash edits it
//!   instead of appearing twice; a store that refuses has the record retried (`hold`).
//!
//! teloxide 0.17 has no `sendMessageDraft`: it is sent as a raw JSON request through the bot's
//! own client ([`SendMessageDraft`]), so it shares its connection pool and its error mapping
//! (which redacts the token from any error).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use teloxide::requests::{JsonRequest, Payload};
use teloxide::types::MessageId;
use tokio::time::Instant;

use super::client::TelegramError;
use super::format;
use super::sender::{ChatWorker, MESSAGE_LIMIT};
use crate::store::telegram as updates;

/// Streaming edits of one message are at least this far apart.
pub const EDIT_SPACING: Duration = Duration::from_millis(1500);
/// Drafts of one answer are at least this far apart. (Telegram animates the change from one
/// version to the next; its limit on drafts is not documented, and a 429 would freeze the
/// whole bot, so this stays at the chat's long-run pace.)
pub const DRAFT_SPACING: Duration = Duration::from_secs(1);

/// How a bot's chats stream (from `[telegram]`), shared by its chat workers.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// Nothing is shown before the run has been answering this long.
    pub after: Duration,
    /// Nothing is shown before the text has this many characters.
    pub min_chars: usize,
    pub drafts: Arc<DraftSupport>,
}

impl StreamSettings {
    pub fn from_config(config: &crate::config::TelegramConfig) -> StreamSettings {
        StreamSettings {
            after: config.stream_after.0,
            min_chars: config.stream_min_chars,
            drafts: Arc::new(DraftSupport::default()),
        }
    }
}

/// Whether the bot's Bot API takes drafts: assumed until it refuses one.
#[derive(Debug, Default)]
pub struct DraftSupport {
    refused: AtomicBool,
}

impl DraftSupport {
    pub fn available(&self) -> bool {
        !self.refused.load(Ordering::Relaxed)
    }

    /// Remembers a refusal; true the first time (to log it once).
    fn refuse(&self) -> bool {
        !self.refused.swap(true, Ordering::Relaxed)
    }
}

/// How a streamed answer is being shown so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Not at all yet.
    Nothing,
    /// As a draft (private chats): the final answer is a new message.
    Draft,
    /// As a message edited as it grows: the final answer is its last edit.
    Message(MessageId),
}

/// The streamed answer of one run in one chat.
#[derive(Debug)]
pub struct Stream {
    pub run_id: i64,
    /// When the run started answering (its typing indicator), else its first partial text.
    pub started: Instant,
    pub shown: Shown,
    /// The HTML last shown.
    pub shown_html: String,
    /// The newest text not shown yet.
    pub pending: Option<String>,
    /// When the last version was shown.
    pub last_shown: Instant,
    /// Nothing is tried before this (a draft put off because the bot was busy).
    pub not_before: Instant,
}

impl Stream {
    pub fn new(run_id: i64, started: Instant) -> Stream {
        Stream {
            run_id,
            started,
            shown: Shown::Nothing,
            shown_html: String::new(),
            pending: None,
            last_shown: started,
            not_before: started,
        }
    }

    /// The message a final answer edits (none: the final answer is sent as new messages).
    pub fn message_id(&self) -> Option<MessageId> {
        match self.shown {
            Shown::Message(id) => Some(id),
            Shown::Nothing | Shown::Draft => None,
        }
    }

    /// When the pending text is to be shown; `None` while there is nothing (worth) showing.
    pub fn due(&self, settings: &StreamSettings) -> Option<Instant> {
        let pending = self.pending.as_deref()?;
        let due = match self.shown {
            Shown::Nothing => (pending
                .trim()
                .chars()
                .nth(settings.min_chars.max(1) - 1)
                .is_some())
            .then_some(self.started + settings.after),
            Shown::Draft => Some(self.last_shown + DRAFT_SPACING),
            Shown::Message(_) => Some(self.last_shown + EDIT_SPACING),
        };
        due.map(|due| due.max(self.not_before))
    }
}

/// `sendMessageDraft` (Bot API 9.5), which teloxide 0.17 does not know.
#[derive(Debug, Clone, Serialize)]
struct SendMessageDraft {
    chat_id: i64,
    draft_id: i64,
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_thread_id: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parse_mode: Option<&'static str>,
}

impl Payload for SendMessageDraft {
    type Output = teloxide::types::True;
    const NAME: &'static str = "sendMessageDraft";
}

/// A run's draft id: non-zero, and the same for every version of one answer.
fn draft_id(run_id: i64) -> i64 {
    run_id.rem_euclid(i64::from(i32::MAX)) + 1
}

impl ChatWorker {
    /// Shows the newest streamed text (the first message's worth): as a draft in a private chat
    /// while the Bot API takes them, else as a message sent once and then edited.
    pub(super) async fn flush_partial(&self, current: &mut Stream) {
        let Some(text) = current.pending.take() else {
            return;
        };
        let html = format::markdown_to_html(&text);
        let first = format::split_html(&html, MESSAGE_LIMIT)
            .into_iter()
            .next()
            .unwrap_or_default();
        if first.trim().is_empty() || first == current.shown_html {
            return;
        }
        let drafts_possible = self.chat_id > 0 && self.streaming.drafts.available();
        if drafts_possible && matches!(current.shown, Shown::Nothing | Shown::Draft) {
            match self.send_draft(draft_id(current.run_id), &first).await {
                Ok(()) => {
                    current.shown = Shown::Draft;
                    current.last_shown = Instant::now();
                    current.shown_html = first;
                    return;
                }
                // A busy bot or a passing failure: the text waits for the next turn.
                Err(error) if error.is_transient() => {
                    tracing::debug!(chat = self.chat_id, %error, "could not show a draft");
                    current.pending.get_or_insert(text);
                    current.not_before = Instant::now() + DRAFT_SPACING;
                    return;
                }
                Err(error) => {
                    if self.streaming.drafts.refuse() {
                        tracing::info!(agent = %self.agent, %error, "the Bot API refused a draft; answers are streamed by editing a message instead");
                    }
                }
            }
        }
        match current.shown {
            Shown::Nothing | Shown::Draft => match self.send_html(&first, None).await {
                Ok(id) => {
                    current.shown = Shown::Message(id);
                    // Kept so that the final answer edits this message even after a crash.
                    // Not recorded, a restart would answer in a new message and leave this one
                    // half-written: the record is retried (the chat waits) rather than lost.
                    let (run_id, chat_id, now) =
                        (current.run_id, self.chat_id, crate::clock::now_ms());
                    let store = self.store.clone();
                    let what = format!("a streamed answer's message in chat {chat_id} was sent");
                    super::hold::until_recorded(&what, &self.cancel, || {
                        let store = store.clone();
                        async move {
                            store
                                .write(move |conn| {
                                    updates::record_stream(conn, run_id, chat_id, id.0 as i64, now)
                                })
                                .await
                        }
                    })
                    .await;
                }
                Err(error) => {
                    tracing::debug!(chat = self.chat_id, %error, "could not start a streamed message")
                }
            },
            Shown::Message(id) => {
                if let Err(error) = self.edit_html(id, &first).await {
                    tracing::debug!(chat = self.chat_id, %error, "could not edit a streamed message");
                }
            }
        }
        // Measured from when Telegram has the version: a send may wait in the governor first.
        current.last_shown = Instant::now();
        current.shown_html = first;
    }

    /// Shows `html` as the draft `draft_id` (plain text when Telegram cannot parse it); a 429
    /// freezes the bot as for any send.
    async fn send_draft(&self, draft_id: i64, html: &str) -> Result<(), TelegramError> {
        let mut payload = SendMessageDraft {
            chat_id: self.chat_id,
            draft_id,
            text: html.to_string(),
            message_thread_id: self.thread_id,
            parse_mode: Some("HTML"),
        };
        for _ in 0..2 {
            if !self.governor.try_acquire_draft() {
                return Err(TelegramError::Other(
                    "the bot is busy sending messages; the draft waits".into(),
                ));
            }
            let sent = JsonRequest::new(self.bot.clone(), payload.clone())
                .await
                .map(|_| ())
                .map_err(TelegramError::from);
            match sent {
                Err(TelegramError::ParseEntities(_)) if payload.parse_mode.is_some() => {
                    payload.text = format::plain_text(html);
                    payload.parse_mode = None;
                }
                Err(TelegramError::RetryAfter(wait)) => {
                    self.governor.freeze(wait);
                    return Err(TelegramError::RetryAfter(wait));
                }
                other => return other,
            }
        }
        Err(TelegramError::Other(
            "Telegram could not parse a draft, even as plain text".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> StreamSettings {
        StreamSettings {
            after: Duration::from_secs(1),
            min_chars: 20,
            drafts: Arc::new(DraftSupport::default()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_shown_before_the_threshold_or_with_too_little_text() {
        let start = Instant::now();
        let mut stream = Stream::new(1, start);
        assert_eq!(stream.due(&settings()), None, "no text");
        stream.pending = Some("Hello".into());
        assert_eq!(
            stream.due(&settings()),
            None,
            "five characters are not worth a draft"
        );
        stream.pending = Some("Hello, this is a longer answer".into());
        assert_eq!(
            stream.due(&settings()),
            Some(start + Duration::from_secs(1))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn drafts_and_edits_are_paced_from_the_last_version() {
        let start = Instant::now();
        let mut stream = Stream::new(1, start);
        stream.pending = Some("more text than twenty characters".into());
        stream.shown = Shown::Draft;
        stream.last_shown = start + Duration::from_secs(3);
        assert_eq!(
            stream.due(&settings()),
            Some(start + Duration::from_secs(3) + DRAFT_SPACING)
        );
        stream.shown = Shown::Message(MessageId(5));
        assert_eq!(
            stream.due(&settings()),
            Some(start + Duration::from_secs(3) + EDIT_SPACING)
        );
        assert_eq!(stream.message_id(), Some(MessageId(5)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_draft_put_off_is_not_tried_again_at_once() {
        let start = Instant::now();
        let mut stream = Stream::new(1, start);
        stream.pending = Some("more text than twenty characters".into());
        stream.not_before = start + Duration::from_secs(5);
        assert_eq!(
            stream.due(&settings()),
            Some(start + Duration::from_secs(5))
        );
    }

    #[test]
    fn draft_ids_are_never_zero_and_fit_telegrams_integer() {
        for run_id in [
            0,
            1,
            i64::from(i32::MAX) - 1,
            i64::from(i32::MAX),
            i64::MAX,
            -4,
        ] {
            let id = draft_id(run_id);
            assert!(id > 0 && id <= i64::from(i32::MAX), "{run_id} → {id}");
        }
        assert_ne!(draft_id(7), draft_id(8));
    }

    #[test]
    fn a_refusal_is_remembered_and_reported_once() {
        let support = DraftSupport::default();
        assert!(support.available());
        assert!(support.refuse());
        assert!(!support.refuse());
        assert!(!support.available());
    }
}

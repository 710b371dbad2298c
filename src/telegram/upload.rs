//! Files to a chat: `sendPhoto`, `sendDocument` and `sendVoice` as multipart uploads, for the
//! outbox rows `send_file` queues and for spoken replies.
//!
//! A file row is delivered by the chat's worker in its place among the chat's other replies,
//! from the daemon's spool copy (`store::outbox::spool_dir`), with its caption formatted like a
//! message and its forum topic (`message_thread_id`) taken from the row's chat key. It is marked
//! delivered only after Telegram accepted it. A file Telegram refuses (too big, not an image it
//! can read) is not tried again: a photo it cannot take is sent once more as a document, and if
//! that fails too the row is recorded as failed and the chat told in one sentence. The spool copy
//! is deleted once the row is done.
//!
//! Spoken replies (rows marked `speak`): the text is synthesized when it is delivered and sent
//! as a voice message. The written text follows the voice when a voice cannot carry it well —
//! longer than [`SPOKEN_ALONE_MAX_CHARS`], or holding code or links — and replaces it when
//! synthesis fails (logged): the answer is never lost to a speech error.

use std::time::Duration;

use teloxide::RequestError;
use teloxide::payloads::{
    SendChatActionSetters, SendDocumentSetters, SendPhotoSetters, SendVoiceSetters,
};
use teloxide::prelude::*;
use teloxide::types::{ChatAction, InputFile, MessageId, ParseMode, ThreadId};

use super::client::TelegramError;
use super::format;
use super::sender::ChatWorker;
use crate::domain::ChatKey;
use crate::store::outbox::{OutboxFileKind, OutboxRow};

/// A spoken reply longer than this (visible characters) is also sent as text.
pub const SPOKEN_ALONE_MAX_CHARS: usize = 600;

/// What became of a spoken reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spoken {
    /// The voice message carries the whole answer.
    Alone,
    /// The voice message went out; the text is to follow.
    WithText,
    /// No voice message: the text is to be sent instead.
    Failed,
}

/// One file to upload.
struct Upload<'a> {
    kind: OutboxFileKind,
    file: InputFile,
    caption_html: &'a str,
    thread: Option<i32>,
}

impl ChatWorker {
    /// Uploads a file row's spool copy with its caption.
    pub(super) async fn send_file_row(&self, row: &OutboxRow) -> Result<(), TelegramError> {
        let Some(file) = row.file.as_ref() else {
            return Err(TelegramError::Other(
                "the outbox row carries no file".into(),
            ));
        };
        let bytes = match tokio::fs::read(&file.path).await {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(TelegramError::Rejected(
                    "the copy taken when it was sent is gone from the outbox spool".into(),
                ));
            }
            Err(error) => {
                return Err(TelegramError::Other(format!(
                    "cannot read the file's copy: {error}"
                )));
            }
        };
        let caption_html = format::markdown_to_html(&row.text);
        let thread = ChatKey::parse(&row.chat).and_then(|chat| chat.telegram_thread_id());
        let input = InputFile::memory(bytes).file_name(file.name.clone());
        let sent = self
            .send_upload(Upload {
                kind: file.kind,
                file: input.clone(),
                caption_html: &caption_html,
                thread,
            })
            .await;
        match sent {
            Ok(_) => Ok(()),
            // Telegram could not take it as a photo (dimensions, format): the file as it is.
            Err(TelegramError::Rejected(reason)) if file.kind == OutboxFileKind::Photo => {
                tracing::info!(chat = self.chat_id, %reason, "a photo was refused; sending it as a document");
                self.send_upload(Upload {
                    kind: OutboxFileKind::Document,
                    file: input,
                    caption_html: &caption_html,
                    thread,
                })
                .await
                .map(|_| ())
            }
            Err(error) => Err(error),
        }
    }

    /// After a file row's delivery was recorded: once it is done, the chat hears of a failure
    /// (one sentence) and the spool copy goes.
    pub(super) async fn file_row_done(
        &self,
        row: &OutboxRow,
        result: &Result<(), TelegramError>,
        done: bool,
    ) {
        let Some(file) = row.file.as_ref() else {
            return;
        };
        if !done {
            return;
        }
        if let Err(error) = result {
            let sentence = format!(
                "I could not send you {}: {error}.",
                format::escape_html(&file.name)
            );
            if let Err(error) = self.send_html(&sentence, None).await {
                tracing::warn!(chat = self.chat_id, %error, "could not say that a file was not sent");
            }
        }
        match tokio::fs::remove_file(&file.path).await {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(path = %file.path.display(), %error, "could not remove a sent file's spool copy")
            }
        }
    }

    /// Speaks a reply marked `speak` and sends it as a voice message.
    pub(super) async fn send_spoken(&self, row: &OutboxRow) -> Spoken {
        let html = format::markdown_to_html(&row.text);
        let visible = format::plain_text(&html);
        let Some(speech) = self.speech.as_ref() else {
            tracing::warn!(
                chat = self.chat_id,
                "a reply was to be spoken, but no speech provider is configured; sent as text"
            );
            return Spoken::Failed;
        };
        let thread = ChatKey::parse(&row.chat).and_then(|chat| chat.telegram_thread_id());
        // "recording a voice message…" while the speech is made.
        let mut action = self
            .bot
            .send_chat_action(ChatId(self.chat_id), ChatAction::RecordVoice);
        if let Some(thread) = thread {
            action = action.message_thread_id(ThreadId(MessageId(thread)));
        }
        let _ = action.await;
        let audio = match speech.synthesize(&visible).await {
            Ok(audio) => audio,
            Err(error) => {
                tracing::warn!(chat = self.chat_id, %error, "could not speak a reply; sent as text");
                return Spoken::Failed;
            }
        };
        let sent = self
            .send_upload(Upload {
                kind: OutboxFileKind::Voice,
                file: InputFile::memory(audio).file_name("reply.ogg"),
                caption_html: "",
                thread,
            })
            .await;
        if let Err(error) = sent {
            tracing::warn!(chat = self.chat_id, %error, "could not send a spoken reply; sent as text");
            return Spoken::Failed;
        }
        let lower = html.to_ascii_lowercase();
        let needs_text = visible.chars().count() > SPOKEN_ALONE_MAX_CHARS
            || lower.contains("<pre")
            || lower.contains("<code")
            || lower.contains("<a ")
            || visible.contains("http://")
            || visible.contains("https://");
        if needs_text {
            Spoken::WithText
        } else {
            Spoken::Alone
        }
    }

    /// Uploads one file, paced by the governor: HTML caption with a plain-text fallback, 429s
    /// waited out, network errors retried twice.
    async fn send_upload(&self, upload: Upload<'_>) -> Result<MessageId, TelegramError> {
        let mut plain = false;
        for attempt in 0..3 {
            self.governor.acquire(self.chat_id).await;
            let caption = if plain {
                format::plain_text(upload.caption_html)
            } else {
                upload.caption_html.to_string()
            };
            match self
                .upload_once(&upload, upload.file.clone(), caption, !plain)
                .await
            {
                Ok(id) => return Ok(id),
                Err(TelegramError::ParseEntities(_)) if !plain => plain = true,
                Err(TelegramError::RetryAfter(wait)) if attempt < 2 => self.governor.freeze(wait),
                Err(TelegramError::Network(_)) if attempt < 2 => {
                    tokio::time::sleep(Duration::from_secs(1 << attempt)).await
                }
                Err(error) => return Err(error),
            }
        }
        Err(TelegramError::Other(
            "gave up after repeated rate limits".into(),
        ))
    }

    async fn upload_once(
        &self,
        upload: &Upload<'_>,
        file: InputFile,
        caption: String,
        html: bool,
    ) -> Result<MessageId, TelegramError> {
        let chat = ChatId(self.chat_id);
        let thread = upload.thread.map(|id| ThreadId(MessageId(id)));
        let has_caption = !caption.trim().is_empty();
        let sent = match upload.kind {
            OutboxFileKind::Photo => {
                let mut request = self.bot.send_photo(chat, file);
                if has_caption {
                    request = request.caption(caption);
                    if html {
                        request = request.parse_mode(ParseMode::Html);
                    }
                }
                if let Some(thread) = thread {
                    request = request.message_thread_id(thread);
                }
                request.await
            }
            OutboxFileKind::Document => {
                let mut request = self.bot.send_document(chat, file);
                if has_caption {
                    request = request.caption(caption);
                    if html {
                        request = request.parse_mode(ParseMode::Html);
                    }
                }
                if let Some(thread) = thread {
                    request = request.message_thread_id(thread);
                }
                request.await
            }
            OutboxFileKind::Voice => {
                let mut request = self.bot.send_voice(chat, file);
                if has_caption {
                    request = request.caption(caption);
                    if html {
                        request = request.parse_mode(ParseMode::Html);
                    }
                }
                if let Some(thread) = thread {
                    request = request.message_thread_id(thread);
                }
                request.await
            }
        };
        sent.map(|message| message.id).map_err(upload_error)
    }
}

/// Telegram's answer to an upload, in the daemon's terms: a Bad Request about the file (too big,
/// unreadable, wrong dimensions) is a refusal that sending again cannot fix.
fn upload_error(error: RequestError) -> TelegramError {
    let answered = matches!(error, RequestError::Api(_));
    match TelegramError::from(error) {
        TelegramError::Other(reason) if answered => {
            TelegramError::Rejected(format!("Telegram refused the file ({reason})"))
        }
        other => other,
    }
}

//! Files to a chat: `sendPhoto`, `sendDocument` and `sendVoice` as multipart uploads, for the
//! outbox rows `send_file` queues and for spoken replies.
//!
//! A file row is delivered by the chat's worker in its place among the chat's other replies,
//! from the daemon's spool copy (`store::outbox::spool_dir`), with its caption formatted like a
//! message and its forum topic (`message_thread_id`) taken from the row's chat key. It is marked
//! delivered only after Telegram accepted it. An upload is paced by the governor like a message
//! and goes through its own HTTP client, without the long poll's timeout and with a time limit
//! that grows with the file's size; when its forum topic is gone it goes into the chat's General.
//! A server error (5xx) or a lost connection is tried again (twice). A file Telegram refuses with
//! a 4xx (too big, not an image it can read) is not tried again: a photo it cannot take is sent
//! once more as a document, and if that fails too the row is recorded as failed and the chat told
//! in one sentence. The spool copy is deleted once the row is done.
//!
//! Spoken replies (rows marked `speak`): the text is synthesized when it is delivered and sent
//! as a voice message. The written text follows the voice when a voice cannot carry it well —
//! longer than [`SPOKEN_ALONE_MAX_CHARS`], or holding code or links — and replaces it when
//! synthesis fails (logged): the answer is never lost to a speech error. When the text follows,
//! the voice is recorded as sent first (`outbox::mark_voice_sent`), so a retry of the text does
//! not speak again.

use std::time::Duration;

use teloxide::RequestError;
use teloxide::payloads::{
    SendChatActionSetters, SendDocumentSetters, SendPhotoSetters, SendVoiceSetters,
};
use teloxide::prelude::*;
use teloxide::types::{ChatAction, InputFile, MessageId, ParseMode, ThreadId};

use super::client::{self, TelegramError};
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
    /// The file's size: an upload may take longer the larger it is.
    bytes: u64,
    caption_html: &'a str,
    thread: Option<i32>,
}

/// How long one upload of `bytes` may take: a minute, and a second more per 100 KB.
pub(super) fn upload_time_limit(bytes: u64) -> Duration {
    Duration::from_secs(60 + bytes / (100 * 1024))
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
        let size = bytes.len() as u64;
        let input = InputFile::memory(bytes).file_name(file.name.clone());
        let sent = self
            .send_upload(Upload {
                kind: file.kind,
                file: input.clone(),
                bytes: size,
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
                    bytes: size,
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
        let audio_bytes = audio.len() as u64;
        let sent = self
            .send_upload(Upload {
                kind: OutboxFileKind::Voice,
                file: InputFile::memory(audio).file_name("reply.ogg"),
                bytes: audio_bytes,
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

    /// Uploads one file into its topic; when the topic is gone, into the chat's General, as
    /// text replies do.
    async fn send_upload(&self, upload: Upload<'_>) -> Result<MessageId, TelegramError> {
        match self.send_upload_in(&upload, upload.thread).await {
            Err(TelegramError::TopicGone(why)) if upload.thread.is_some() => {
                tracing::warn!(chat = self.chat_id, thread = ?upload.thread, %why, "forum topic gone; uploading in the chat instead");
                self.send_upload_in(&upload, None).await
            }
            result => result,
        }
    }

    /// Uploads one file, paced by the governor: HTML caption with a plain-text fallback, 429s
    /// waited out, network errors retried twice. The upload has its own HTTP client, without the
    /// long poll's timeout, and a time limit that grows with the file's size.
    async fn send_upload_in(
        &self,
        upload: &Upload<'_>,
        thread: Option<i32>,
    ) -> Result<MessageId, TelegramError> {
        let bot = client::upload_bot(&self.bot)?;
        let limit = upload_time_limit(upload.bytes);
        let mut plain = false;
        for attempt in 0..3 {
            self.governor.acquire(self.chat_id).await;
            let caption = if plain {
                format::plain_text(upload.caption_html)
            } else {
                upload.caption_html.to_string()
            };
            let sent = tokio::time::timeout(
                limit,
                upload_once(&bot, self.chat_id, upload, thread, caption, !plain),
            )
            .await
            .unwrap_or_else(|_| {
                Err(TelegramError::Network(format!(
                    "the upload took longer than {} s",
                    limit.as_secs()
                )))
            });
            match sent {
                Ok(id) => return Ok(id),
                Err(TelegramError::ParseEntities(_)) if !plain => plain = true,
                Err(TelegramError::RetryAfter(wait)) if attempt < 2 => self.governor.freeze(wait),
                // A server error (5xx) or a lost connection: the file is worth another try.
                Err(TelegramError::Network(_) | TelegramError::Other(_)) if attempt < 2 => {
                    tokio::time::sleep(Duration::from_secs(1 << attempt)).await
                }
                Err(error) => return Err(error),
            }
        }
        Err(TelegramError::Other(
            "gave up after repeated rate limits".into(),
        ))
    }
}

async fn upload_once(
    bot: &Bot,
    chat_id: i64,
    upload: &Upload<'_>,
    thread: Option<i32>,
    caption: String,
    html: bool,
) -> Result<MessageId, TelegramError> {
    let chat = ChatId(chat_id);
    let file = upload.file.clone();
    let thread = thread.map(|id| ThreadId(MessageId(id)));
    let has_caption = !caption.trim().is_empty();
    // The three requests are different types with the same setters.
    macro_rules! send {
        ($request:expr) => {{
            let mut request = $request;
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
        }};
    }
    let sent = match upload.kind {
        OutboxFileKind::Photo => send!(bot.send_photo(chat, file)),
        OutboxFileKind::Document => send!(bot.send_document(chat, file)),
        OutboxFileKind::Voice => send!(bot.send_voice(chat, file)),
    };
    sent.map(|message| message.id).map_err(upload_error)
}

/// Telegram's answer to an upload, in the daemon's terms: a Bad Request about the file (too big,
/// unreadable, wrong dimensions) is a refusal that sending again cannot fix; any other answer
/// (a 5xx from Telegram's front end) is worth another try.
fn upload_error(error: RequestError) -> TelegramError {
    let refused = match &error {
        RequestError::Api(teloxide::ApiError::Unknown(description)) => {
            client::is_refusal(description)
        }
        // The errors teloxide knows by name are all Telegram's 4xx answers about the request.
        RequestError::Api(_) => true,
        _ => false,
    };
    match TelegramError::from(error) {
        TelegramError::Other(reason) if refused => {
            TelegramError::Rejected(format!("Telegram refused the file ({reason})"))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bad_requests_are_refusals_of_the_file() {
        assert!(client::is_refusal(
            "Bad Request: wrong file identifier/HTTP URL specified"
        ));
        assert!(client::is_refusal("Request Entity Too Large"));
        assert!(!client::is_refusal("Bad Gateway"));
        assert!(!client::is_refusal("Internal Server Error"));
        let refused = upload_error(RequestError::Api(teloxide::ApiError::Unknown(
            "Bad Request: IMAGE_PROCESS_FAILED".into(),
        )));
        assert!(matches!(refused, TelegramError::Rejected(_)), "{refused:?}");
        let server = upload_error(RequestError::Api(teloxide::ApiError::Unknown(
            "Bad Gateway".into(),
        )));
        assert!(server.is_transient(), "{server:?}");
    }

    #[test]
    fn an_upload_may_take_longer_the_larger_its_file() {
        assert_eq!(upload_time_limit(10_000), Duration::from_secs(60));
        assert_eq!(
            upload_time_limit(50 * 1024 * 1024),
            Duration::from_secs(60 + 512)
        );
    }
}

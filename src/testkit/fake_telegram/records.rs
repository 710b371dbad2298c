//! What a test pushes into the fake and reads back from it: incoming messages, and the
//! messages, edits, attachments, buttons, chat actions and commands the bot sent.

use std::time::Instant;

/// The fake server could not start.
#[derive(Debug, thiserror::Error)]
pub enum FakeTelegramError {
    #[error(
        "fake Telegram: cannot listen on 127.0.0.1 ({0}); the machine needs a loopback interface with a free port"
    )]
    Bind(#[source] std::io::Error),
}

/// A bot registered with [`FakeTelegram::add_bot`]. Only valid for the fake that issued it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BotId(pub(super) usize);

/// An update queued by a test control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PushedUpdate {
    pub update_id: i64,
    pub message_id: i32,
}

/// A callback query queued by [`FakeTelegram::push_callback`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushedCallback {
    pub update_id: i64,
    pub callback_query_id: String,
}

/// A user's text message, for [`FakeTelegram::push`]. A positive `chat_id` is the private chat
/// with that user; a negative one is a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncomingMessage {
    pub chat_id: i64,
    pub user_id: i64,
    pub text: String,
    /// A message of the same chat this one replies to; ignored if the chat has no such message.
    pub reply_to_message_id: Option<i32>,
    /// The forum topic it is sent in (see [`FakeTelegram::create_forum_topic`]); `None`: the
    /// chat itself (a forum's General).
    ///
    /// [`FakeTelegram::create_forum_topic`]: super::FakeTelegram::create_forum_topic
    pub thread_id: Option<i32>,
}

impl IncomingMessage {
    pub fn new(chat_id: i64, user_id: i64, text: impl Into<String>) -> IncomingMessage {
        IncomingMessage {
            chat_id,
            user_id,
            text: text.into(),
            reply_to_message_id: None,
            thread_id: None,
        }
    }

    pub fn replying_to(mut self, message_id: i32) -> IncomingMessage {
        self.reply_to_message_id = Some(message_id);
        self
    }

    /// Sent in the forum topic `thread_id` of its chat.
    pub fn in_topic(mut self, thread_id: i32) -> IncomingMessage {
        self.thread_id = Some(thread_id);
        self
    }
}

/// One inline keyboard button of a sent message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentButton {
    pub text: String,
    pub callback_data: Option<String>,
    pub url: Option<String>,
}

/// What kind of file a message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachmentKind {
    Document,
    Photo,
    /// A voice message (OGG/Opus), `sendVoice` or a user's voice note.
    Voice,
}

/// A file the bot sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentAttachment {
    pub kind: AttachmentKind,
    pub file_name: Option<String>,
    /// Empty when the bot sent a URL or a file id instead of bytes.
    pub bytes: Vec<u8>,
}

/// One edit of a sent message: its content after the edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentEdit {
    pub at: Instant,
    /// `editMessageText` or `editMessageReplyMarkup`.
    pub method: &'static str,
    pub text: String,
    pub visible_text: String,
    pub parse_mode: Option<String>,
    pub buttons: Vec<Vec<SentButton>>,
}

/// A message the bot sent, in its current state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMessage {
    pub chat_id: i64,
    pub message_id: i32,
    /// The forum topic it was sent in (`message_thread_id`); `None`: the chat itself.
    pub thread_id: Option<i32>,
    /// `sendMessage`, `sendDocument`, `sendPhoto` or `sendVoice`.
    pub method: &'static str,
    /// The text (or caption) as the bot sent it, after the latest edit.
    pub text: String,
    /// The text after entity parsing (tags removed, `&amp;` decoded), after the latest edit.
    pub visible_text: String,
    /// The text as first sent.
    pub original_text: String,
    pub parse_mode: Option<String>,
    pub buttons: Vec<Vec<SentButton>>,
    pub reply_to_message_id: Option<i32>,
    pub attachment: Option<SentAttachment>,
    pub sent_at: Instant,
    pub edits: Vec<SentEdit>,
    pub deleted: bool,
}

impl SentMessage {
    /// The callback data of every button, row by row.
    pub fn callback_data(&self) -> Vec<&str> {
        self.buttons
            .iter()
            .flatten()
            .filter_map(|button| button.callback_data.as_deref())
            .collect()
    }
}

/// A `sendChatAction` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatActionRecord {
    pub chat_id: i64,
    /// The forum topic it was shown in; `None`: the chat itself.
    pub thread_id: Option<i32>,
    pub action: String,
    pub at: Instant,
}

/// A `sendMessageDraft` call that Telegram would have accepted: the text a user saw the bot
/// "typing" (it posts no message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraftRecord {
    pub chat_id: i64,
    /// The `message_thread_id` it named; `None`: the chat itself.
    pub thread_id: Option<i32>,
    pub draft_id: i64,
    /// The raw text as sent.
    pub text: String,
    /// The text after `parse_mode` was applied.
    pub visible_text: String,
    pub parse_mode: Option<String>,
    pub at: Instant,
}

/// An `answerCallbackQuery` call that Telegram would have accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallbackAnswer {
    pub callback_query_id: String,
    pub text: Option<String>,
    pub show_alert: bool,
    pub url: Option<String>,
    pub at: Instant,
}

/// One command of the bot's menu.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotCommandRecord {
    pub command: String,
    pub description: String,
}

/// A file a test made downloadable with [`FakeTelegram::register_file`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredFile {
    pub file_id: String,
    pub file_path: String,
}

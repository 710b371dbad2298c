//! Reading a stored update: what it is, who sent it, whether it is addressed to the bot.
//!
//! Updates are stored as JSON before they are read here, so a payload this code does not
//! understand is simply `Intake::Unsupported` — never a panic, never a lost offset.
//!
//! Forum topics: a message sent in a topic of a forum supergroup carries `message_thread_id` and
//! `is_topic_message: true`, and belongs to the conversation `tg:<chat>/<thread>`. Replies in
//! ordinary supergroups (and, in forums, in General) may carry a `message_thread_id` too — the
//! id of the reply chain's first message, not a topic — so only `is_topic_message` makes a topic.

use teloxide::types::{MediaKind, Message, MessageEntityKind, MessageKind, Update, UpdateKind};

use crate::domain::ChatKey;

/// A file attached to a message, still on Telegram's servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    pub file_id: String,
    pub kind: crate::domain::AttachmentKind,
    pub name: String,
    pub mime: String,
    pub size: u64,
    /// A voice note's length as Telegram reports it (0 for other files).
    pub duration_secs: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingMessage {
    pub chat_id: i64,
    /// The forum topic the message was sent in (`message_thread_id`); `None` outside topics.
    pub thread_id: Option<i32>,
    pub private: bool,
    pub chat_title: String,
    pub user_id: i64,
    pub user_name: String,
    pub date_ms: i64,
    /// Text or caption, with a leading `@botname` mention removed.
    pub text: String,
    /// A private message, a mention of the bot, a reply to the bot, or a command.
    pub addressed: bool,
    /// `/command args` (the `@botname` suffix removed), when the text is a command.
    pub command: Option<(String, String)>,
    pub files: Vec<RemoteFile>,
}

impl IncomingMessage {
    /// The conversation the message belongs to: the chat, or its forum topic.
    pub fn chat(&self) -> ChatKey {
        ChatKey::telegram_topic(self.chat_id, self.thread_id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingCallback {
    pub callback_id: String,
    pub user_id: i64,
    pub user_name: String,
    pub chat_id: Option<i64>,
    pub message_id: Option<i32>,
    pub data: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intake {
    Message(IncomingMessage),
    Callback(IncomingCallback),
    Unsupported(String),
}

/// The columns stored with an update: kind, chat, user, and the message date in ms.
pub fn summary(update: &Update) -> (&'static str, Option<i64>, Option<i64>, Option<i64>) {
    match &update.kind {
        UpdateKind::Message(message) => (
            "message",
            Some(message.chat.id.0),
            message.from.as_ref().map(|user| user.id.0 as i64),
            Some(message.date.timestamp_millis()),
        ),
        UpdateKind::EditedMessage(message) => (
            "edited_message",
            Some(message.chat.id.0),
            message.from.as_ref().map(|user| user.id.0 as i64),
            Some(message.date.timestamp_millis()),
        ),
        UpdateKind::CallbackQuery(query) => (
            "callback_query",
            query.message.as_ref().map(|message| message.chat().id.0),
            Some(query.from.id.0 as i64),
            None,
        ),
        _ => ("other", None, None, None),
    }
}

/// The forum topic of a stored update's message (stored beside it, so that a group's context
/// is taken per topic); `None` for anything else.
pub fn topic(update: &Update) -> Option<i32> {
    match &update.kind {
        UpdateKind::Message(message) | UpdateKind::EditedMessage(message) => topic_of(message),
        _ => None,
    }
}

/// The topic a message was sent in: only a message Telegram marks `is_topic_message`, and only
/// a positive id (a thread id is the id of the message that created the topic).
fn topic_of(message: &Message) -> Option<i32> {
    if !message.is_topic_message {
        return None;
    }
    message
        .thread_id
        .map(|thread| thread.0.0)
        .filter(|thread| *thread > 0)
}

fn display_name(user: &teloxide::types::User) -> String {
    match &user.last_name {
        Some(last) => format!("{} {last}", user.first_name),
        None => user.first_name.clone(),
    }
}

/// Reads a stored update. `bot_id` and `bot_username` decide whether a group message is addressed.
pub fn read(payload: &str, bot_id: i64, bot_username: &str) -> Intake {
    let update: Update = match serde_json::from_str(payload) {
        Ok(update) => update,
        Err(error) => return Intake::Unsupported(format!("unreadable update: {error}")),
    };
    match update.kind {
        UpdateKind::Message(message) => read_message(&message, bot_id, bot_username),
        UpdateKind::CallbackQuery(query) => Intake::Callback(IncomingCallback {
            callback_id: query.id.0.clone(),
            user_id: query.from.id.0 as i64,
            user_name: display_name(&query.from),
            chat_id: query.message.as_ref().map(|message| message.chat().id.0),
            message_id: query.message.as_ref().map(|message| message.id().0),
            data: query.data.unwrap_or_default(),
        }),
        UpdateKind::EditedMessage(_) => {
            Intake::Unsupported("edited messages are not answered again".into())
        }
        _ => Intake::Unsupported("update kind not handled".into()),
    }
}

fn read_message(message: &Message, bot_id: i64, bot_username: &str) -> Intake {
    let Some(from) = message.from.as_ref() else {
        return Intake::Unsupported("message without a sender (channel post)".into());
    };
    if from.is_bot {
        return Intake::Unsupported("messages from bots are not answered".into());
    }
    if matches!(
        message.kind,
        MessageKind::ForumTopicCreated(_)
            | MessageKind::ForumTopicEdited(_)
            | MessageKind::ForumTopicClosed(_)
            | MessageKind::ForumTopicReopened(_)
            | MessageKind::GeneralForumTopicHidden(_)
            | MessageKind::GeneralForumTopicUnhidden(_)
    ) {
        return Intake::Unsupported("a forum topic's service message".into());
    }
    let thread_id = topic_of(message);
    let private = message.chat.is_private();
    let raw_text = message
        .text()
        .or_else(|| message.caption())
        .unwrap_or_default()
        .to_string();
    let mention = format!("@{bot_username}");
    // Not teloxide's `parse_entities`: it panics on offsets inside a character or past the end.
    let entities = match (message.text(), message.entities()) {
        (Some(text), Some(entities)) => Some((text, entities)),
        _ => message.caption().zip(message.caption_entities()),
    };
    let mentioned = !bot_username.is_empty()
        && (entities.is_some_and(|(text, entities)| {
            entities.iter().any(|entity| {
                matches!(entity.kind, MessageEntityKind::Mention)
                    && utf16_slice(text, entity.offset, entity.length)
                        .is_some_and(|named| named.eq_ignore_ascii_case(&mention))
            })
        }) || raw_text.to_lowercase().contains(&mention.to_lowercase()));
    // In a topic, a message that replies to nothing else "replies" to the topic's first message
    // (the one that created it): that is not a reply to the bot, even if the bot made the topic.
    let reply_to_bot = message
        .reply_to_message()
        .filter(|reply| thread_id != Some(reply.id.0))
        .and_then(|reply| reply.from.as_ref())
        .is_some_and(|user| user.id.0 as i64 == bot_id);
    let command = parse_command(&raw_text, bot_username);
    let addressed_command = command.is_some()
        && (private
            || raw_text.split_whitespace().next().is_some_and(|first| {
                first.contains('@') && first.to_lowercase().ends_with(&mention.to_lowercase())
            })
            || !raw_text.contains('@'));
    let text = strip_mention(&raw_text, &mention);
    Intake::Message(IncomingMessage {
        chat_id: message.chat.id.0,
        thread_id,
        private,
        chat_title: message.chat.title().unwrap_or_default().to_string(),
        user_id: from.id.0 as i64,
        user_name: display_name(from),
        date_ms: message.date.timestamp_millis(),
        text,
        addressed: private || mentioned || reply_to_bot || addressed_command,
        command,
        files: files(message),
    })
}

/// `text[offset..offset + length]`, both counted in UTF-16 code units as Telegram counts them;
/// `None` when either falls inside a character or past the end.
fn utf16_slice(text: &str, offset: usize, length: usize) -> Option<&str> {
    let end = offset.checked_add(length)?;
    let mut start = None;
    let mut units = 0;
    let boundaries = text
        .char_indices()
        .chain(std::iter::once((text.len(), '\0')));
    for (byte, character) in boundaries {
        if units == offset {
            start = Some(byte);
        }
        if units == end {
            return text.get(start?..byte);
        }
        if units > end {
            return None;
        }
        units += character.len_utf16();
    }
    None
}

/// Removes a leading `@botname`. Compared byte for byte ignoring ASCII case: lowercasing the
/// whole text could change its length (a KELVIN SIGN becomes `k`), moving the cut.
fn strip_mention(text: &str, mention: &str) -> String {
    if mention.len() <= 1 {
        return text.trim().to_string();
    }
    match text.get(..mention.len()) {
        Some(head) if head.eq_ignore_ascii_case(mention) => {
            text[mention.len()..].trim().to_string()
        }
        _ => text.trim().to_string(),
    }
}

/// `/cmd@bot args` → ("cmd", "args"); only when the text starts with a slash.
pub fn parse_command(text: &str, bot_username: &str) -> Option<(String, String)> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let (head, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let (name, target) = head.split_once('@').unwrap_or((head, ""));
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    if !target.is_empty() && !bot_username.is_empty() && !target.eq_ignore_ascii_case(bot_username)
    {
        return None;
    }
    Some((name.to_ascii_lowercase(), args.trim().to_string()))
}

fn files(message: &Message) -> Vec<RemoteFile> {
    use crate::domain::AttachmentKind;
    let MessageKind::Common(common) = &message.kind else {
        return Vec::new();
    };
    match &common.media_kind {
        MediaKind::Photo(photo) => photo
            .photo
            .iter()
            .max_by_key(|size| u64::from(size.width) * u64::from(size.height))
            .map(|size| RemoteFile {
                file_id: size.file.id.0.clone(),
                kind: AttachmentKind::Image,
                name: format!("photo-{}.jpg", message.id.0),
                mime: "image/jpeg".into(),
                size: size.file.size as u64,
                duration_secs: 0,
            })
            .into_iter()
            .collect(),
        MediaKind::Voice(voice) => vec![RemoteFile {
            file_id: voice.voice.file.id.0.clone(),
            kind: AttachmentKind::Voice,
            name: format!("voice-{}.ogg", message.id.0),
            mime: voice
                .voice
                .mime_type
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_else(|| "audio/ogg".into()),
            size: voice.voice.file.size as u64,
            duration_secs: voice.voice.duration.seconds() as u64,
        }],
        MediaKind::Document(document) => vec![RemoteFile {
            file_id: document.document.file.id.0.clone(),
            kind: AttachmentKind::Document,
            name: document
                .document
                .file_name
                .clone()
                // Telegram may send an empty name; the file still needs one in the workspace.
                .filter(|name| !name.trim().is_empty())
                .unwrap_or_else(|| format!("document-{}", message.id.0)),
            mime: document
                .document
                .mime_type
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_else(|| "application/octet-stream".into()),
            size: document.document.file.size as u64,
            duration_secs: 0,
        }],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_and_without_the_bot_name() {
        assert_eq!(
            parse_command("/stop", "ada_bot"),
            Some(("stop".into(), String::new()))
        );
        assert_eq!(
            parse_command("/approve@ada_bot ab12", "ada_bot"),
            Some(("approve".into(), "ab12".into()))
        );
        assert_eq!(parse_command("/approve@other_bot ab12", "ada_bot"), None);
        assert_eq!(parse_command("hello /stop", "ada_bot"), None);
        assert_eq!(parse_command("/", "ada_bot"), None);
        assert_eq!(parse_command("/päir x", "ada_bot"), None);
    }

    #[test]
    fn utf16_slices_refuse_offsets_inside_characters_or_past_the_end() {
        assert_eq!(utf16_slice("👍 @ab", 3, 3), Some("@ab"));
        assert_eq!(utf16_slice("👍 @ab", 0, 2), Some("👍"));
        assert_eq!(utf16_slice("👍 @ab", 1, 2), None);
        assert_eq!(utf16_slice("👍 @ab", 3, 4), None);
        assert_eq!(utf16_slice("👍 @ab", 6, 0), Some(""));
        assert_eq!(utf16_slice("👍 @ab", usize::MAX, 2), None);
    }

    #[test]
    fn a_mention_that_only_matches_when_case_folded_is_kept() {
        // KELVIN SIGN lowercases to `k`: it is not the bot's name, and not three bytes to cut.
        assert_eq!(
            strip_mention("@\u{212A}\u{212A} hi", "@kk"),
            "@\u{212A}\u{212A} hi"
        );
        assert_eq!(strip_mention("@KK hi", "@kk"), "hi");
    }

    #[test]
    fn garbage_payloads_are_unsupported_not_panics() {
        for payload in [
            "",
            "{",
            "[]",
            "{\"update_id\": 1}",
            "{\"update_id\": -5, \"message\": {}}",
            "null",
        ] {
            assert!(
                matches!(read(payload, 1, "bot"), Intake::Unsupported(_)),
                "{payload}"
            );
        }
    }
    /// A message update in supergroup `-1001234567890`; `extra` is merged into the message.
    fn group_update(extra: serde_json::Value, forum: bool) -> String {
        let mut message = serde_json::json!({
            "message_id": 50,
            "date": 1_700_000_000,
            "chat": {"id": -1_001_234_567_890_i64, "type": "supergroup", "title": "Home", "is_forum": forum},
            "from": {"id": 42, "is_bot": false, "first_name": "Ada"},
            "text": "@ada_bot hello"
        });
        for (key, value) in extra.as_object().unwrap() {
            message[key] = value.clone();
        }
        serde_json::json!({"update_id": 1, "message": message}).to_string()
    }

    fn read_group(extra: serde_json::Value, forum: bool) -> IncomingMessage {
        match read(&group_update(extra, forum), 999, "ada_bot") {
            Intake::Message(message) => message,
            other => panic!("not a message: {other:?}"),
        }
    }

    #[test]
    fn a_topic_message_belongs_to_its_topic_and_general_to_the_chat() {
        let topic = read_group(
            serde_json::json!({"message_thread_id": 7, "is_topic_message": true}),
            true,
        );
        assert_eq!(topic.thread_id, Some(7));
        assert_eq!(topic.chat().as_str(), "tg:-1001234567890/7");
        assert_eq!(topic.chat().telegram_chat_id(), Some(-1_001_234_567_890));

        let general = read_group(serde_json::json!({}), true);
        assert_eq!(general.thread_id, None);
        assert_eq!(general.chat(), ChatKey::telegram(-1_001_234_567_890));
    }

    #[test]
    fn a_reply_thread_is_not_a_topic() {
        // Replies in an ordinary supergroup (and in a forum's General) name their reply chain.
        for forum in [false, true] {
            let reply = read_group(serde_json::json!({"message_thread_id": 31}), forum);
            assert_eq!(reply.thread_id, None, "forum: {forum}");
        }
        let odd = read_group(
            serde_json::json!({"message_thread_id": -5, "is_topic_message": true}),
            true,
        );
        assert_eq!(odd.thread_id, None, "a thread id is a positive message id");
        let zero = read_group(
            serde_json::json!({"message_thread_id": 0, "is_topic_message": true}),
            true,
        );
        assert_eq!(zero.thread_id, None);
    }

    #[test]
    fn the_topics_first_message_is_not_a_reply_to_the_bot() {
        let created_by_bot = serde_json::json!({
            "message_id": 7,
            "date": 1_700_000_000,
            "chat": {"id": -1_001_234_567_890_i64, "type": "supergroup", "title": "Home", "is_forum": true},
            "from": {"id": 999, "is_bot": true, "first_name": "Ada", "username": "ada_bot"},
            "message_thread_id": 7,
            "is_topic_message": true,
            "forum_topic_created": {"name": "Shopping", "icon_color": 7_322_096}
        });
        let plain = read_group(
            serde_json::json!({
                "text": "milk is gone",
                "message_thread_id": 7,
                "is_topic_message": true,
                "reply_to_message": created_by_bot
            }),
            true,
        );
        assert!(!plain.addressed, "not addressed: only in the bot's topic");
        let mut bots_answer = created_by_bot.clone();
        bots_answer["message_id"] = serde_json::json!(9);
        bots_answer
            .as_object_mut()
            .unwrap()
            .remove("forum_topic_created");
        bots_answer["text"] = serde_json::json!("noted");
        let reply = read_group(
            serde_json::json!({
                "text": "thanks",
                "message_thread_id": 7,
                "is_topic_message": true,
                "reply_to_message": bots_answer
            }),
            true,
        );
        assert!(
            reply.addressed,
            "a reply to the bot's own message addresses it"
        );
    }

    #[test]
    fn topic_service_messages_are_not_conversation() {
        let payload = group_update(
            serde_json::json!({
                "message_thread_id": 7,
                "is_topic_message": true,
                "forum_topic_created": {"name": "Shopping", "icon_color": 7_322_096}
            }),
            true,
        );
        let mut update: serde_json::Value = serde_json::from_str(&payload).unwrap();
        update["message"].as_object_mut().unwrap().remove("text");
        let payload = update.to_string();
        assert!(
            matches!(read(&payload, 999, "ada_bot"), Intake::Unsupported(_)),
            "{payload}"
        );
    }
}

//! Reading a stored update: what it is, who sent it, whether it is addressed to the bot.
//!
//! Updates are stored as JSON before they are read here, so a payload this code does not
//! understand is simply `Intake::Unsupported` — never a panic, never a lost offset.

use teloxide::types::{MediaKind, MessageEntityKind, MessageKind, Update, UpdateKind};

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

fn read_message(message: &teloxide::types::Message, bot_id: i64, bot_username: &str) -> Intake {
    let Some(from) = message.from.as_ref() else {
        return Intake::Unsupported("message without a sender (channel post)".into());
    };
    if from.is_bot {
        return Intake::Unsupported("messages from bots are not answered".into());
    }
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
    let reply_to_bot = message
        .reply_to_message()
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

fn files(message: &teloxide::types::Message) -> Vec<RemoteFile> {
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
}

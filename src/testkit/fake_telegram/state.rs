//! The fake Bot API server's state: bots, their update queues, chats, sent messages, files and
//! injected faults, and the Bot API JSON of the objects it hands out.
//!
//! Everything here sits behind `Shared::world`'s mutex; nothing here awaits.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::flood::FloodTracker;
use super::forum::{Forum, mark_in_topic};
use super::wire::{mime_type_for, user_json};
use super::{
    AttachmentKind, BotCommandRecord, BotId, CallbackAnswer, ChatActionRecord, SentMessage,
};

/// Update ids of every bot start here (Telegram's start at an arbitrary positive number).
const FIRST_UPDATE_ID: i64 = 10_000;

#[derive(Default)]
pub(super) struct World {
    pub(super) bots: Vec<BotState>,
    pub(super) by_token: HashMap<String, usize>,
    pub(super) directory: Directory,
}

/// What is shared by all bots: people, group titles, id counters.
#[derive(Default)]
pub(super) struct Directory {
    pub(super) users: HashMap<i64, UserProfile>,
    pub(super) chat_titles: HashMap<i64, String>,
    /// Forum supergroups and their open topics.
    pub(super) forums: HashMap<i64, Forum>,
    pub(super) next_callback_id: u64,
    pub(super) next_file_number: u64,
}

pub(super) struct UserProfile {
    pub(super) first_name: String,
    pub(super) username: Option<String>,
}

impl Directory {
    pub(super) fn user_json(&self, user_id: i64) -> Value {
        match self.users.get(&user_id) {
            Some(profile) => user_json(
                user_id,
                false,
                &profile.first_name,
                profile.username.as_deref(),
            ),
            None => user_json(
                user_id,
                false,
                &format!("User{user_id}"),
                Some(&format!("user{user_id}")),
            ),
        }
    }

    pub(super) fn chat_json(&self, chat_id: i64) -> Value {
        if chat_id > 0 {
            let mut chat = json!({"id": chat_id, "type": "private"});
            match self.users.get(&chat_id) {
                Some(profile) => {
                    chat["first_name"] = Value::String(profile.first_name.clone());
                    if let Some(username) = &profile.username {
                        chat["username"] = Value::String(username.clone());
                    }
                }
                None => {
                    chat["first_name"] = Value::String(format!("User{chat_id}"));
                    chat["username"] = Value::String(format!("user{chat_id}"));
                }
            }
            return chat;
        }
        let title = self
            .chat_titles
            .get(&chat_id)
            .cloned()
            .unwrap_or_else(|| format!("Group {}", chat_id.unsigned_abs()));
        // Supergroup ids are -100xxxxxxxxxx on Telegram; shorter negative ids are basic groups.
        if self.is_forum(chat_id) {
            return json!({"id": chat_id, "type": "supergroup", "title": title, "is_forum": true});
        }
        let kind = if chat_id <= -1_000_000_000_000 {
            "supergroup"
        } else {
            "group"
        };
        json!({"id": chat_id, "type": kind, "title": title})
    }
}

pub(super) struct StoredUpdate {
    pub(super) id: i64,
    /// The update's kind as named in `allowed_updates`: `message`, `callback_query`, ...
    pub(super) kind: &'static str,
    pub(super) json: Value,
}

#[derive(Default)]
pub(super) struct ChatState {
    pub(super) next_message_id: i32,
    /// Every live message of the chat (the users' and the bot's) as Bot API JSON.
    pub(super) messages: HashMap<i32, Value>,
}

/// A sent message with what the fake needs beyond the public view.
pub(super) struct SentRecord {
    pub(super) message: SentMessage,
    pub(super) entities: Vec<Value>,
    pub(super) markup: Option<Value>,
    pub(super) reply_to: Option<Value>,
    pub(super) media: Option<(&'static str, Value)>,
    pub(super) date: i64,
    pub(super) edit_date: Option<i64>,
}

pub(super) struct StoredFile {
    pub(super) unique_id: String,
    pub(super) path: String,
    pub(super) file_name: Option<String>,
    pub(super) bytes: Vec<u8>,
}

/// A stored file's ids, as returned when it is stored.
pub(super) struct FileHandle {
    pub(super) file_id: String,
    pub(super) unique_id: String,
    pub(super) path: String,
    pub(super) file_name: Option<String>,
    pub(super) size: usize,
}

pub(super) enum CallbackState {
    Pending,
    Answered,
}

pub(super) struct RateLimitFault {
    pub(super) retry_after_secs: u64,
    pub(super) remaining: u32,
}

#[derive(Default)]
pub(super) struct Faults {
    pub(super) conflicts: u32,
    /// Keyed by lowercase method name.
    pub(super) rate_limits: HashMap<String, RateLimitFault>,
    pub(super) hang_until: Option<Instant>,
    pub(super) revoked: bool,
    pub(super) resets: u32,
    /// Keyed by lowercase method name: how many calls still get 502 Bad Gateway.
    pub(super) server_errors: HashMap<String, u32>,
    /// Keyed by lowercase method name: how many calls still get no answer, and whether they
    /// are carried out first (Telegram did it, the answer was lost) or not (it never arrived).
    pub(super) holds: HashMap<String, (u32, bool)>,
}

pub(super) struct BotState {
    pub(super) user_id: i64,
    pub(super) username: String,
    pub(super) updates: VecDeque<StoredUpdate>,
    pub(super) next_update_id: i64,
    pub(super) confirmed_offset: Option<i64>,
    /// As last given to getUpdates; empty means Telegram's default set.
    pub(super) allowed_updates: Vec<String>,
    /// Incremented by every getUpdates; a waiting poll whose number is no longer current was
    /// displaced and answers 409.
    pub(super) poll_generation: u64,
    pub(super) polls_waiting: usize,
    /// Wakes this bot's waiting long polls.
    pub(super) updates_notify: Arc<Notify>,
    pub(super) chats: HashMap<i64, ChatState>,
    pub(super) sent: Vec<SentRecord>,
    /// (chat, message id) of each live sent message → index in `sent`.
    pub(super) sent_index: HashMap<(i64, i32), usize>,
    pub(super) calls: BTreeMap<String, u64>,
    pub(super) faults: Faults,
    pub(super) flood: FloodTracker,
    pub(super) callbacks: HashMap<String, CallbackState>,
    pub(super) callback_answers: Vec<CallbackAnswer>,
    pub(super) files: HashMap<String, StoredFile>,
    /// file path → file id.
    pub(super) file_paths: HashMap<String, String>,
    pub(super) commands: Vec<BotCommandRecord>,
    pub(super) chat_actions: Vec<ChatActionRecord>,
    pub(super) drafts: Vec<super::DraftRecord>,
    /// `sendMessageDraft` answers 404 "Not Found", as for a method Telegram does not know.
    pub(super) drafts_refused: bool,
}

pub(super) fn bot_ref(bots: &[BotState], bot: BotId) -> &BotState {
    bots.get(bot.0)
        .expect("a BotId comes from add_bot of this FakeTelegram, and bots are never removed")
}

pub(super) fn bot_mut(bots: &mut [BotState], bot: BotId) -> &mut BotState {
    bots.get_mut(bot.0)
        .expect("a BotId comes from add_bot of this FakeTelegram, and bots are never removed")
}

impl BotState {
    pub(super) fn new(user_id: i64, username: &str) -> BotState {
        BotState {
            user_id,
            username: username.to_string(),
            updates: VecDeque::new(),
            next_update_id: FIRST_UPDATE_ID,
            confirmed_offset: None,
            allowed_updates: Vec::new(),
            poll_generation: 0,
            polls_waiting: 0,
            updates_notify: Arc::new(Notify::new()),
            chats: HashMap::new(),
            sent: Vec::new(),
            sent_index: HashMap::new(),
            calls: BTreeMap::new(),
            faults: Faults::default(),
            flood: FloodTracker::default(),
            callbacks: HashMap::new(),
            callback_answers: Vec::new(),
            files: HashMap::new(),
            file_paths: HashMap::new(),
            commands: Vec::new(),
            chat_actions: Vec::new(),
            drafts: Vec::new(),
            drafts_refused: false,
        }
    }

    pub(super) fn user_json(&self) -> Value {
        user_json(self.user_id, true, &self.username, Some(&self.username))
    }

    pub(super) fn allocate_message_id(&mut self, chat_id: i64) -> i32 {
        let chat = self.chats.entry(chat_id).or_default();
        chat.next_message_id += 1;
        chat.next_message_id
    }

    pub(super) fn message(&self, chat_id: i64, message_id: i32) -> Option<&Value> {
        self.chats.get(&chat_id)?.messages.get(&message_id)
    }

    pub(super) fn store_message(&mut self, chat_id: i64, message_id: i32, message: Value) {
        self.chats
            .entry(chat_id)
            .or_default()
            .messages
            .insert(message_id, message);
    }

    /// Queues an update and wakes the waiting long polls.
    pub(super) fn enqueue(&mut self, kind: &'static str, payload: Value) -> i64 {
        let id = self.next_update_id;
        self.next_update_id += 1;
        let mut update = json!({"update_id": id});
        update[kind] = payload;
        self.updates.push_back(StoredUpdate {
            id,
            kind,
            json: update,
        });
        self.updates_notify.notify_waiters();
        id
    }

    /// Applies getUpdates' `offset`: every update below it is confirmed and forgotten; a
    /// negative offset keeps only that many of the latest updates.
    pub(super) fn confirm(&mut self, offset: i64) {
        if offset > 0 {
            while self
                .updates
                .front()
                .is_some_and(|update| update.id < offset)
            {
                self.updates.pop_front();
            }
            self.confirmed_offset = Some(
                self.confirmed_offset
                    .map_or(offset, |known| known.max(offset)),
            );
        } else if offset < 0 {
            let keep = usize::try_from(offset.unsigned_abs()).unwrap_or(usize::MAX);
            while self.updates.len() > keep {
                self.updates.pop_front();
            }
            let first_kept = self
                .updates
                .front()
                .map_or(self.next_update_id, |update| update.id);
            self.confirmed_offset = Some(
                self.confirmed_offset
                    .map_or(first_kept, |known| known.max(first_kept)),
            );
        }
    }

    pub(super) fn allows(&self, kind: &str) -> bool {
        if self.allowed_updates.is_empty() {
            return !matches!(
                kind,
                "chat_member" | "message_reaction" | "message_reaction_count"
            );
        }
        self.allowed_updates.iter().any(|allowed| allowed == kind)
    }

    pub(super) fn deliverable(&self, limit: usize) -> Vec<Value> {
        self.updates
            .iter()
            .filter(|update| self.allows(update.kind))
            .take(limit)
            .map(|update| update.json.clone())
            .collect()
    }

    pub(super) fn store_file(
        &mut self,
        directory: &mut Directory,
        kind: AttachmentKind,
        file_name: Option<String>,
        bytes: Vec<u8>,
    ) -> FileHandle {
        directory.next_file_number += 1;
        let number = directory.next_file_number;
        let folder = match kind {
            AttachmentKind::Document => "documents",
            AttachmentKind::Photo => "photos",
            AttachmentKind::Voice => "voice",
        };
        let extension = match (kind, &file_name) {
            (AttachmentKind::Photo, _) => ".jpg".to_string(),
            (AttachmentKind::Voice, _) => ".oga".to_string(),
            (_, Some(name)) => name
                .rsplit_once('.')
                .map(|(_, extension)| format!(".{extension}"))
                .unwrap_or_default(),
            (_, None) => String::new(),
        };
        let file_id = format!("BQACAgIAAx{number:08}{}", self.user_id);
        let unique_id = format!("AgAD{number:06}");
        let path = format!("{folder}/file_{number}{extension}");
        let handle = FileHandle {
            file_id: file_id.clone(),
            unique_id: unique_id.clone(),
            path: path.clone(),
            file_name: file_name.clone(),
            size: bytes.len(),
        };
        self.file_paths.insert(path.clone(), file_id.clone());
        self.files.insert(
            file_id,
            StoredFile {
                unique_id,
                path,
                file_name,
                bytes,
            },
        );
        handle
    }

    pub(super) fn render_sent(&self, directory: &Directory, record: &SentRecord) -> Value {
        let chat_id = record.message.chat_id;
        let mut message = json!({
            "message_id": record.message.message_id,
            "date": record.date,
            "chat": directory.chat_json(chat_id),
            "from": self.user_json(),
        });
        match &record.media {
            None => {
                message["text"] = Value::String(record.message.visible_text.clone());
                if !record.entities.is_empty() {
                    message["entities"] = Value::Array(record.entities.clone());
                }
            }
            Some((field, media)) => {
                message[*field] = media.clone();
                if !record.message.visible_text.is_empty() {
                    message["caption"] = Value::String(record.message.visible_text.clone());
                    if !record.entities.is_empty() {
                        message["caption_entities"] = Value::Array(record.entities.clone());
                    }
                }
            }
        }
        if let Some(markup) = &record.markup {
            message["reply_markup"] = markup.clone();
        }
        if let Some(reply_to) = &record.reply_to {
            message["reply_to_message"] = reply_to.clone();
        }
        if let Some(edit_date) = record.edit_date {
            message["edit_date"] = json!(edit_date);
        }
        mark_in_topic(&mut message, record.message.thread_id);
        message
    }
}

/// A user's message skeleton: id, date, chat, sender.
pub(super) fn incoming_message_json(
    directory: &Directory,
    chat_id: i64,
    user_id: i64,
    message_id: i32,
) -> Value {
    json!({
        "message_id": message_id,
        "date": unix_now(),
        "chat": directory.chat_json(chat_id),
        "from": directory.user_json(user_id),
    })
}

/// The message's field name and value for a stored file.
pub(super) fn media_json(kind: AttachmentKind, file: &FileHandle) -> (&'static str, Value) {
    match kind {
        AttachmentKind::Photo => (
            "photo",
            json!([{
                "file_id": file.file_id,
                "file_unique_id": file.unique_id,
                "file_size": file.size,
                "width": 1280,
                "height": 960,
            }]),
        ),
        AttachmentKind::Voice => (
            "voice",
            json!({
                "file_id": file.file_id,
                "file_unique_id": file.unique_id,
                "file_size": file.size,
                "duration": 1,
                "mime_type": "audio/ogg",
            }),
        ),
        AttachmentKind::Document => {
            let mut document = json!({
                "file_id": file.file_id,
                "file_unique_id": file.unique_id,
                "file_size": file.size,
            });
            if let Some(name) = &file.file_name {
                document["file_name"] = Value::String(name.clone());
                document["mime_type"] = Value::String(mime_type_for(name).to_string());
            }
            ("document", document)
        }
    }
}

/// A message as embedded in `reply_to_message`: Telegram nests only one level.
pub(super) fn without_reply(message: &Value) -> Value {
    let mut message = message.clone();
    if let Some(object) = message.as_object_mut() {
        object.remove("reply_to_message");
    }
    message
}

pub(super) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64)
}

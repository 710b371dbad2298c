//! Forum supergroups: chats with topics, as Telegram models them for bots.
//!
//! A topic is a thread whose id is the id of the service message that created it
//! (`forum_topic_created`). A user's message in a topic carries `message_thread_id` and
//! `is_topic_message: true` and, when it replies to nothing else, "replies" to that service
//! message; a message in General carries neither. A reply in an ordinary supergroup carries the
//! `message_thread_id` of its reply chain without `is_topic_message` — not a topic, which is
//! exactly what a bot must not mistake for one. A send with `message_thread_id` must name an
//! open topic of a forum ("Bad Request: message thread not found" otherwise, as on Telegram for
//! a deleted topic); the sent message then carries the topic's id too.
//!
//! Topics belong to the chat (every bot can write into them); the service message that created
//! one is stored and queued only for the bot named when it was created.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::state::{BotState, Directory, World, bot_mut, incoming_message_json, without_reply};
use super::wire::{Params, Reply};
use super::{BotId, FakeTelegram};

/// Telegram's description for a send into a topic that does not exist (or no longer does).
pub const THREAD_NOT_FOUND_DESCRIPTION: &str = "Bad Request: message thread not found";

/// A forum supergroup's open topics: thread id → name.
#[derive(Default)]
pub(super) struct Forum {
    pub(super) topics: BTreeMap<i32, String>,
}

impl FakeTelegram {
    /// Makes `chat_id` a forum supergroup (`is_forum: true`) titled `title`. Use a supergroup
    /// id (`-100…`, at most -1 000 000 000 000) as on Telegram; its topics start empty.
    pub fn create_forum(&self, chat_id: i64, title: &str) {
        let mut world = self.shared.lock();
        world
            .directory
            .chat_titles
            .insert(chat_id, title.to_string());
        world.directory.forums.entry(chat_id).or_default();
    }

    /// Opens a topic named `name` in the forum `chat_id`, created by `user_id`, and returns its
    /// thread id (the id of its `forum_topic_created` service message, which is queued for
    /// `bot` like any message of the chat). The chat becomes a forum if it was not one.
    pub fn create_forum_topic(&self, bot: BotId, chat_id: i64, user_id: i64, name: &str) -> i32 {
        let thread_id = {
            let mut world = self.shared.lock();
            let World {
                bots, directory, ..
            } = &mut *world;
            let state = bot_mut(bots, bot);
            let thread_id = state.allocate_message_id(chat_id);
            directory
                .forums
                .entry(chat_id)
                .or_default()
                .topics
                .insert(thread_id, name.to_string());
            let mut message = incoming_message_json(directory, chat_id, user_id, thread_id);
            message["message_thread_id"] = json!(thread_id);
            message["is_topic_message"] = json!(true);
            message["forum_topic_created"] = json!({"name": name, "icon_color": 7_322_096});
            state.store_message(chat_id, thread_id, message.clone());
            state.enqueue("message", message);
            thread_id
        };
        self.shared.activity.notify_waiters();
        thread_id
    }

    /// Deletes a topic: from now on a send into it gets [`THREAD_NOT_FOUND_DESCRIPTION`].
    pub fn delete_forum_topic(&self, chat_id: i64, thread_id: i32) {
        let mut world = self.shared.lock();
        if let Some(forum) = world.directory.forums.get_mut(&chat_id) {
            forum.topics.remove(&thread_id);
        }
    }
}

impl Directory {
    pub(super) fn is_forum(&self, chat_id: i64) -> bool {
        self.forums.contains_key(&chat_id)
    }

    fn has_topic(&self, chat_id: i64, thread_id: i64) -> bool {
        i32::try_from(thread_id).is_ok_and(|thread_id| {
            self.forums
                .get(&chat_id)
                .is_some_and(|forum| forum.topics.contains_key(&thread_id))
        })
    }
}

/// A send's `message_thread_id`: absent, or an open topic of the forum `chat_id`.
pub(super) fn thread_param(
    directory: &Directory,
    chat_id: i64,
    params: &Params,
) -> Result<Option<i32>, Reply> {
    match params.integer("message_thread_id") {
        Ok(None) => Ok(None),
        Ok(Some(thread_id)) if directory.has_topic(chat_id, thread_id) => {
            Ok(i32::try_from(thread_id).ok())
        }
        Ok(Some(_)) => Err(Reply::bad_request(THREAD_NOT_FOUND_DESCRIPTION)),
        Err(description) => Err(Reply::bad_request(description)),
    }
}

/// Gives a user's message its thread as Telegram would: in a topic, `message_thread_id`,
/// `is_topic_message` and (when it replies to nothing else) the topic's service message as
/// `reply_to_message`; a reply in an ordinary supergroup, its reply chain's thread.
pub(super) fn place_in_thread(
    directory: &Directory,
    state: &BotState,
    chat_id: i64,
    thread_id: Option<i32>,
    message: &mut Value,
) {
    if let Some(thread_id) = thread_id {
        message["message_thread_id"] = json!(thread_id);
        message["is_topic_message"] = json!(true);
        if message.get("reply_to_message").is_none()
            && let Some(root) = state.message(chat_id, thread_id)
        {
            message["reply_to_message"] = without_reply(root);
        }
        return;
    }
    let supergroup = chat_id <= -1_000_000_000_000 && !directory.is_forum(chat_id);
    let chain = message.get("reply_to_message").map(|target| {
        target
            .get("message_thread_id")
            .cloned()
            .unwrap_or_else(|| target["message_id"].clone())
    });
    if supergroup && let Some(chain) = chain {
        message["message_thread_id"] = chain;
    }
}

/// Marks a sent message as written in its topic.
pub(super) fn mark_in_topic(message: &mut Value, thread_id: Option<i32>) {
    if let Some(thread_id) = thread_id {
        message["message_thread_id"] = json!(thread_id);
        message["is_topic_message"] = json!(true);
    }
}

//! A fake Telegram Bot API server on loopback HTTP, for tests, benchmarks and `clawvisor eval`.
//!
//! [`FakeTelegram::start`] listens on `127.0.0.1:0`; point a bot at [`FakeTelegram::api_url`]
//! (teloxide: `Bot::new(token).set_api_url(url)`). It speaks the real wire protocol: a POST to
//! `/bot<TOKEN>/<method>` (method names matched case-insensitively, since teloxide sends
//! `GetUpdates` where Telegram documents `getUpdates`) with a JSON, form or multipart body, and
//! answers `{"ok":true,"result":...}` or `{"ok":false,"error_code":..,"description":..}` with
//! Telegram's exact descriptions, because teloxide picks its error variant by that text.
//! It never answers 5xx: teloxide sleeps 10 s after any 5xx.
//!
//! What it models, because a daemon that long-polls many bots depends on it:
//! - several bots at once, keyed by token; an unknown or revoked token gets 401 "Unauthorized";
//! - `getUpdates` with Telegram's offset rules (updates below the offset are confirmed and
//!   forgotten forever; a negative offset keeps only the last updates), `limit`, long polling
//!   (`timeout`, capped at 50 s) and `allowed_updates`; a newer `getUpdates` for the same bot
//!   answers a still-waiting older one with 409, as Telegram does;
//! - `sendMessage` / `editMessageText` with the 4096-character limit counted in UTF-16 units
//!   after entity parsing, `parse_mode=HTML` validated by [`parse_html`], inline keyboards, and
//!   "message is not modified"; `editMessageReplyMarkup`, `deleteMessage`, `sendChatAction`,
//!   `answerCallbackQuery`, `sendMessageDraft` (recorded; refusable with 404 to test a
//!   fallback, see `drafts`), `setMyCommands` / `getMyCommands`, `getFile` with downloads at
//!   `/file/bot<TOKEN>/<path>`, and multipart `sendDocument` / `sendPhoto` / `sendVoice` (an empty
//!   file, or a photo whose header is no image, refused as Telegram does);
//! - fault injection per bot: 409 conflicts, 429 with `retry_after`, 502s, polls that hang, a
//!   revoked token, connections closed without an answer, calls held without an answer;
//! - Telegram's flood limits, counted but not enforced (see [`Violations`]).
//!
//! - forum supergroups (`forum`): topics, `message_thread_id` on messages in them and on sends
//!   into them ("message thread not found" for a topic that does not exist);
//!
//! What it does not model: channels, inline mode, payments, topic management methods
//! (`createForumTopic`: topics are made by test controls), webhooks (setWebhook
//! is unknown; deleteWebhook succeeds), `MarkdownV2` (accepted, not parsed: the visible text is
//! the raw text), and Telegram's "chat not found" (any numeric chat id can be written to).
//!
//! Time: windows and long polls run on real time. Do not drive it from a runtime with paused
//! time (`tokio::time::pause`): its long polls would then end at once.
//!
//! Layout: this file holds the public API; `records` the types a test pushes and reads back,
//! `server` the shared state and the HTTP handler (including `getUpdates`, the one method that
//! waits); `wire` serves connections and reads parameters, `state` models bots,
//! queues, chats and files, `methods` answers the other methods, `html` parses entities, and
//! `flood` counts limit violations.
//!
//! Invariants: all state sits behind one `std::sync::Mutex` that is never held across an
//! `.await`; every request, push, fault change and long-poll start or end wakes
//! `Shared::activity`, so the `wait_for_*` controls never miss a change they wait for.

mod drafts;
mod flood;
mod forum;
mod html;
mod methods;
mod records;
mod server;
mod state;
mod wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

pub use flood::{PER_CHAT_BURST, ViolationExample, ViolationKind, Violations};
pub use forum::THREAD_NOT_FOUND_DESCRIPTION;
pub use html::{HtmlEntity, ParsedHtml, parse_html};
pub use records::{
    AttachmentKind, BotCommandRecord, BotId, CallbackAnswer, ChatActionRecord, DraftRecord,
    FakeTelegramError, IncomingMessage, PushedCallback, PushedUpdate, RegisteredFile,
    SentAttachment, SentButton, SentEdit, SentMessage,
};
use server::{Shared, handle};

use state::{
    BotState, CallbackState, RateLimitFault, UserProfile, World, bot_mut, bot_ref,
    incoming_message_json, media_json, unix_now, without_reply,
};
use wire::detected_entities;

/// Telegram's description for a `getUpdates` displaced by another one; teloxide maps exactly
/// this text to `ApiError::TerminatedByOtherGetUpdates`.
pub const CONFLICT_DESCRIPTION: &str = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";
/// Telegram's limit on a message's visible text, in UTF-16 code units.
pub const MAX_MESSAGE_UTF16: usize = 4096;
/// Telegram's limit on a media caption's visible text, in UTF-16 code units.
pub const MAX_CAPTION_UTF16: usize = 1024;
/// Telegram answers a long poll after at most 50 s.
const MAX_LONG_POLL: Duration = Duration::from_secs(50);

/// The fake server. Dropping it stops the server and closes every connection.
pub struct FakeTelegram {
    shared: Arc<Shared>,
    address: SocketAddr,
    shutdown: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl FakeTelegram {
    /// Starts the server on `127.0.0.1:0`.
    ///
    /// # Panics
    /// When the machine has no usable loopback interface; use [`FakeTelegram::try_start`] to get
    /// the error instead.
    pub async fn start() -> FakeTelegram {
        match FakeTelegram::try_start().await {
            Ok(fake) => fake,
            Err(error) => panic!("{error}"),
        }
    }

    /// Starts the server on `127.0.0.1:0`.
    pub async fn try_start() -> Result<FakeTelegram, FakeTelegramError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(FakeTelegramError::Bind)?;
        let address = listener.local_addr().map_err(FakeTelegramError::Bind)?;
        let shared = Arc::new(Shared {
            world: Mutex::new(World::default()),
            activity: Notify::new(),
            started: Instant::now(),
        });
        let (shutdown, shutdown_receiver) = watch::channel(false);
        let handler_shared = Arc::clone(&shared);
        let handler = move |request: Request<Body>| handle(Arc::clone(&handler_shared), request);
        let server = tokio::spawn(wire::serve(listener, handler, shutdown_receiver));
        Ok(FakeTelegram {
            shared,
            address,
            shutdown,
            server: Some(server),
        })
    }

    /// `http://127.0.0.1:<port>`, the value for teloxide's `set_api_url` or `TELOXIDE_API_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// [`FakeTelegram::base_url`] as a URL.
    pub fn api_url(&self) -> reqwest::Url {
        // An IP address and a port always make a valid http URL.
        reqwest::Url::parse(&self.base_url()).expect("http://<ip>:<port> is a valid URL")
    }

    /// Stops accepting connections, closes every open one (waiting long polls included) and
    /// waits for the server task to end.
    pub async fn stop(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    /// Registers a bot. The token's numeric prefix (`123` in `123:ABC`) becomes the bot's user
    /// id, as on Telegram. Adding a known token again returns its existing id.
    pub fn add_bot(&self, token: &str, username: &str) -> BotId {
        let mut world = self.shared.lock();
        if let Some(&index) = world.by_token.get(token) {
            world.bots[index].username = username.to_string();
            return BotId(index);
        }
        let index = world.bots.len();
        let user_id = token
            .split_once(':')
            .and_then(|(prefix, _)| prefix.parse::<i64>().ok())
            .unwrap_or(7_000_000_000 + index as i64);
        world.bots.push(BotState::new(user_id, username));
        world.by_token.insert(token.to_string(), index);
        BotId(index)
    }

    /// The bot's Telegram user id.
    pub fn bot_user_id(&self, bot: BotId) -> i64 {
        self.with_bot(bot, |state| state.user_id)
    }

    /// Sets the name a user shows in messages and private chats (default `User<id>`, `user<id>`).
    pub fn set_user(&self, user_id: i64, first_name: &str, username: Option<&str>) {
        self.shared.lock().directory.users.insert(
            user_id,
            UserProfile {
                first_name: first_name.to_string(),
                username: username.map(str::to_string),
            },
        );
    }

    /// Sets a group's title (default `Group <id>`).
    pub fn set_chat_title(&self, chat_id: i64, title: &str) {
        self.shared
            .lock()
            .directory
            .chat_titles
            .insert(chat_id, title.to_string());
    }

    /// Queues a user's text message. `chat_id == user_id` is their private chat; a negative
    /// `chat_id` is a group. `@username` mentions and `/commands` get their entities.
    pub fn push_message(&self, bot: BotId, chat_id: i64, user_id: i64, text: &str) -> PushedUpdate {
        self.push(bot, IncomingMessage::new(chat_id, user_id, text))
    }

    /// Queues a user's text message, possibly a reply.
    pub fn push(&self, bot: BotId, incoming: IncomingMessage) -> PushedUpdate {
        let pushed = {
            let mut world = self.shared.lock();
            let World {
                bots, directory, ..
            } = &mut *world;
            let state = bot_mut(bots, bot);
            let message_id = state.allocate_message_id(incoming.chat_id);
            let mut message =
                incoming_message_json(directory, incoming.chat_id, incoming.user_id, message_id);
            message["text"] = Value::String(incoming.text.clone());
            let entities = detected_entities(&incoming.text);
            if !entities.is_empty() {
                message["entities"] = Value::Array(entities);
            }
            if let Some(target) = incoming
                .reply_to_message_id
                .and_then(|id| state.message(incoming.chat_id, id))
            {
                message["reply_to_message"] = without_reply(target);
            }
            forum::place_in_thread(
                directory,
                state,
                incoming.chat_id,
                incoming.thread_id,
                &mut message,
            );
            state.store_message(incoming.chat_id, message_id, message.clone());
            let update_id = state.enqueue("message", message);
            PushedUpdate {
                update_id,
                message_id,
            }
        };
        self.shared.activity.notify_waiters();
        pushed
    }

    /// Queues an `edited_message` update for a user's earlier message; `None` if the chat has no
    /// such message from a user.
    pub fn push_edited_message(
        &self,
        bot: BotId,
        chat_id: i64,
        message_id: i32,
        new_text: &str,
    ) -> Option<PushedUpdate> {
        let pushed = {
            let mut world = self.shared.lock();
            let state = bot_mut(&mut world.bots, bot);
            let mut message = state.message(chat_id, message_id)?.clone();
            if message["from"]["is_bot"].as_bool() != Some(false) {
                return None;
            }
            message["text"] = Value::String(new_text.to_string());
            message["edit_date"] = json!(unix_now());
            let entities = detected_entities(new_text);
            match message.as_object_mut() {
                Some(object) if entities.is_empty() => {
                    object.remove("entities");
                }
                _ => message["entities"] = Value::Array(entities),
            }
            state.store_message(chat_id, message_id, message.clone());
            let update_id = state.enqueue("edited_message", message);
            PushedUpdate {
                update_id,
                message_id,
            }
        };
        self.shared.activity.notify_waiters();
        Some(pushed)
    }

    /// Queues a callback query: `user_id` pressed a button with `data` under message
    /// `message_id` of `chat_id`. The update carries that message as the bot last sent it, or an
    /// inaccessible-message stub (date 0) if the chat has no such message.
    pub fn push_callback(
        &self,
        bot: BotId,
        chat_id: i64,
        user_id: i64,
        message_id: i32,
        data: &str,
    ) -> PushedCallback {
        let pushed = {
            let mut world = self.shared.lock();
            let World {
                bots, directory, ..
            } = &mut *world;
            directory.next_callback_id += 1;
            let callback_query_id =
                format!("{}{:06}", 4_242_000 + bot.0, directory.next_callback_id);
            let state = bot_mut(bots, bot);
            let message = state.message(chat_id, message_id).cloned().unwrap_or_else(|| {
                json!({"chat": directory.chat_json(chat_id), "message_id": message_id, "date": 0})
            });
            let query = json!({
                "id": callback_query_id,
                "from": directory.user_json(user_id),
                "message": message,
                "chat_instance": format!("{}", chat_id.unsigned_abs().wrapping_mul(2_654_435_761)),
                "data": data,
            });
            state
                .callbacks
                .insert(callback_query_id.clone(), CallbackState::Pending);
            let update_id = state.enqueue("callback_query", query);
            PushedCallback {
                update_id,
                callback_query_id,
            }
        };
        self.shared.activity.notify_waiters();
        pushed
    }

    /// Queues a photo from a user; `getFile` and the download URL serve `bytes`.
    pub fn push_photo(
        &self,
        bot: BotId,
        chat_id: i64,
        user_id: i64,
        bytes: impl Into<Vec<u8>>,
        caption: Option<&str>,
    ) -> PushedUpdate {
        let file = IncomingFile {
            kind: AttachmentKind::Photo,
            file_name: None,
            bytes: bytes.into(),
            caption,
        };
        self.push_file(bot, chat_id, user_id, file)
    }

    /// Queues a document from a user; `getFile` and the download URL serve `bytes`.
    pub fn push_document(
        &self,
        bot: BotId,
        chat_id: i64,
        user_id: i64,
        file_name: &str,
        bytes: impl Into<Vec<u8>>,
        caption: Option<&str>,
    ) -> PushedUpdate {
        let file = IncomingFile {
            kind: AttachmentKind::Document,
            file_name: Some(file_name),
            bytes: bytes.into(),
            caption,
        };
        self.push_file(bot, chat_id, user_id, file)
    }

    /// Queues a voice note from a user as Telegram sends it (`voice` with `file_id`,
    /// `file_unique_id`, `duration`, `mime_type` and `file_size`); `getFile` and the download URL
    /// serve `bytes`. `duration_secs` is what Telegram reports, whatever the bytes are.
    pub fn push_voice(
        &self,
        bot: BotId,
        chat_id: i64,
        user_id: i64,
        bytes: impl Into<Vec<u8>>,
        duration_secs: u32,
        caption: Option<&str>,
    ) -> PushedUpdate {
        let pushed = {
            let mut world = self.shared.lock();
            let World {
                bots, directory, ..
            } = &mut *world;
            let state = bot_mut(bots, bot);
            // Stored like a document named `.oga`: the path Telegram gives voice notes
            // (`voice/file_N.oga`) differs only in its folder, which the bot never reads.
            let stored = state.store_file(
                directory,
                AttachmentKind::Document,
                Some("voice.oga".to_string()),
                bytes.into(),
            );
            let message_id = state.allocate_message_id(chat_id);
            let mut message = incoming_message_json(directory, chat_id, user_id, message_id);
            message["voice"] = serde_json::json!({
                "file_id": stored.file_id,
                "file_unique_id": stored.unique_id,
                "duration": duration_secs,
                "mime_type": "audio/ogg",
                "file_size": stored.size,
            });
            if let Some(caption) = caption {
                message["caption"] = Value::String(caption.to_string());
            }
            state.store_message(chat_id, message_id, message.clone());
            let update_id = state.enqueue("message", message);
            PushedUpdate {
                update_id,
                message_id,
            }
        };
        self.shared.activity.notify_waiters();
        pushed
    }

    /// Makes `bytes` downloadable through `getFile` without a message.
    pub fn register_file(
        &self,
        bot: BotId,
        file_name: &str,
        bytes: impl Into<Vec<u8>>,
    ) -> RegisteredFile {
        let mut world = self.shared.lock();
        let World {
            bots, directory, ..
        } = &mut *world;
        let stored = bot_mut(bots, bot).store_file(
            directory,
            AttachmentKind::Document,
            Some(file_name.to_string()),
            bytes.into(),
        );
        RegisteredFile {
            file_id: stored.file_id,
            file_path: stored.path,
        }
    }

    /// Every message the bot sent, in order, in its current state (edits applied).
    pub fn sent(&self, bot: BotId) -> Vec<SentMessage> {
        self.with_bot(bot, |state| {
            state
                .sent
                .iter()
                .map(|record| record.message.clone())
                .collect()
        })
    }

    /// Waits until a sent message (in its current state) matches `predicate`, and returns it;
    /// `None` after `timeout`.
    pub async fn wait_for_sent(
        &self,
        bot: BotId,
        predicate: impl Fn(&SentMessage) -> bool,
        timeout: Duration,
    ) -> Option<SentMessage> {
        self.wait_until(timeout, || {
            self.with_bot(bot, |state| {
                state
                    .sent
                    .iter()
                    .map(|record| &record.message)
                    .find(|message| predicate(message))
                    .cloned()
            })
        })
        .await
    }

    /// Updates queued and not yet confirmed by an offset (delivered or not).
    pub fn updates_pending(&self, bot: BotId) -> usize {
        self.with_bot(bot, |state| state.updates.len())
    }

    /// The highest offset the bot confirmed with; `None` before its first confirming poll.
    pub fn confirmed_offset(&self, bot: BotId) -> Option<i64> {
        self.with_bot(bot, |state| state.confirmed_offset)
    }

    /// How many `getUpdates` of the bot are waiting in a long poll right now (a poll held by
    /// [`FakeTelegram::hang_polls`] counts only once its hang is over).
    pub fn polls_waiting(&self, bot: BotId) -> usize {
        self.with_bot(bot, |state| state.polls_waiting)
    }

    /// Waits until a `getUpdates` of the bot is waiting in a long poll; `false` after `timeout`.
    pub async fn wait_for_poll(&self, bot: BotId, timeout: Duration) -> bool {
        self.wait_until(timeout, || (self.polls_waiting(bot) > 0).then_some(()))
            .await
            .is_some()
    }

    /// Calls per method (Bot API spelling, e.g. `getUpdates`), every call counted as it arrives,
    /// whatever the answer. File downloads count as `downloadFile`.
    pub fn calls(&self, bot: BotId) -> BTreeMap<String, u64> {
        self.with_bot(bot, |state| state.calls.clone())
    }

    /// Calls of one method, its name matched case-insensitively.
    pub fn call_count(&self, bot: BotId, method: &str) -> u64 {
        self.with_bot(bot, |state| {
            state
                .calls
                .iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case(method))
                .map(|(_, count)| count)
                .sum()
        })
    }

    /// Waits until `method` was called at least `at_least` times; `false` after `timeout`.
    pub async fn wait_for_calls(
        &self,
        bot: BotId,
        method: &str,
        at_least: u64,
        timeout: Duration,
    ) -> bool {
        self.wait_until(timeout, || {
            (self.call_count(bot, method) >= at_least).then_some(())
        })
        .await
        .is_some()
    }

    /// Every `sendChatAction` of the bot, in order.
    pub fn chat_actions(&self, bot: BotId) -> Vec<ChatActionRecord> {
        self.with_bot(bot, |state| state.chat_actions.clone())
    }

    /// Every accepted `answerCallbackQuery` of the bot, in order.
    pub fn callback_answers(&self, bot: BotId) -> Vec<CallbackAnswer> {
        self.with_bot(bot, |state| state.callback_answers.clone())
    }

    /// The bot's command menu as last set.
    pub fn commands(&self, bot: BotId) -> Vec<BotCommandRecord> {
        self.with_bot(bot, |state| state.commands.clone())
    }

    /// The bot's flood-limit violations so far.
    pub fn violations(&self, bot: BotId) -> Violations {
        self.with_bot(bot, |state| state.flood.violations())
    }

    /// The next `n` `getUpdates` of the bot get 409 with [`CONFLICT_DESCRIPTION`].
    pub fn conflict_next(&self, bot: BotId, n: u32) {
        self.with_bot_mut(bot, |state| state.faults.conflicts += n);
    }

    /// The next `n` calls of `method` (case-insensitive) get 429
    /// "Too Many Requests: retry after N" with `parameters.retry_after`.
    pub fn rate_limit_next(&self, bot: BotId, method: &str, retry_after_secs: u64, n: u32) {
        self.with_bot_mut(bot, |state| {
            let fault = state
                .faults
                .rate_limits
                .entry(method.to_ascii_lowercase())
                .or_insert(RateLimitFault {
                    retry_after_secs,
                    remaining: 0,
                });
            fault.retry_after_secs = retry_after_secs;
            fault.remaining += n;
        });
    }

    /// The next `n` calls of `method` (case-insensitive) get 502 Bad Gateway, as Telegram's
    /// front end answers when its back end is down.
    pub fn server_error_next(&self, bot: BotId, method: &str, n: u32) {
        self.with_bot_mut(bot, |state| {
            *state
                .faults
                .server_errors
                .entry(method.to_ascii_lowercase())
                .or_default() += n;
        });
    }

    /// Injected faults of the bot that have not happened yet (409s, 429s, 502s and resets still
    /// to be served, plus one while polls hang). A revoked token does not count: it never ends.
    pub fn faults_pending(&self, bot: BotId) -> u32 {
        self.with_bot(bot, |state| {
            let faults = &state.faults;
            faults.conflicts
                + faults
                    .rate_limits
                    .values()
                    .map(|fault| fault.remaining)
                    .sum::<u32>()
                + faults.server_errors.values().sum::<u32>()
                + faults.resets
                + u32::from(
                    faults
                        .hang_until
                        .is_some_and(|until| until > Instant::now()),
                )
        })
    }

    /// Every `getUpdates` of the bot that arrives within `duration` from now gets no answer
    /// until `duration` has passed (then it is served normally), like a stalled network.
    pub fn hang_polls(&self, bot: BotId, duration: Duration) {
        self.with_bot_mut(bot, |state| {
            state.faults.hang_until = Some(Instant::now() + duration);
        });
    }

    /// Every call with the bot's token gets 401 "Unauthorized" from now on, including long
    /// polls already waiting.
    pub fn revoke_token(&self, bot: BotId) {
        self.with_bot_mut(bot, |state| {
            state.faults.revoked = true;
            state.updates_notify.notify_waiters();
        });
    }

    /// The next `n` calls of `method` (case-insensitive) are carried out (a send is recorded,
    /// as Telegram would show it) but never answered: the client waits as for a slow Telegram,
    /// so a test can kill the daemon while Telegram has done the work but not said so.
    pub fn hold_answers(&self, bot: BotId, method: &str, n: u32) {
        self.hold(bot, method, n, true);
    }

    /// The next `n` calls of `method` (case-insensitive) are read but neither carried out nor
    /// answered, as when a request is lost on the way.
    pub fn hold_requests(&self, bot: BotId, method: &str, n: u32) {
        self.hold(bot, method, n, false);
    }

    fn hold(&self, bot: BotId, method: &str, n: u32, carried_out: bool) {
        self.with_bot_mut(bot, |state| {
            let entry = state
                .faults
                .holds
                .entry(method.to_ascii_lowercase())
                .or_insert((0, carried_out));
            entry.0 += n;
            entry.1 = carried_out;
        });
    }

    /// The next `n` calls of the bot (any method) are read and then answered by closing the
    /// connection without a response.
    pub fn reset_connections(&self, bot: BotId, n: u32) {
        self.with_bot_mut(bot, |state| state.faults.resets += n);
    }

    fn push_file(
        &self,
        bot: BotId,
        chat_id: i64,
        user_id: i64,
        file: IncomingFile<'_>,
    ) -> PushedUpdate {
        let IncomingFile {
            kind,
            file_name,
            bytes,
            caption,
        } = file;
        let pushed = {
            let mut world = self.shared.lock();
            let World {
                bots, directory, ..
            } = &mut *world;
            let state = bot_mut(bots, bot);
            let stored = state.store_file(directory, kind, file_name.map(str::to_string), bytes);
            let message_id = state.allocate_message_id(chat_id);
            let mut message = incoming_message_json(directory, chat_id, user_id, message_id);
            let (field, media) = media_json(kind, &stored);
            message[field] = media;
            if let Some(caption) = caption {
                message["caption"] = Value::String(caption.to_string());
            }
            state.store_message(chat_id, message_id, message.clone());
            let update_id = state.enqueue("message", message);
            PushedUpdate {
                update_id,
                message_id,
            }
        };
        self.shared.activity.notify_waiters();
        pushed
    }

    fn with_bot<T>(&self, bot: BotId, read: impl FnOnce(&BotState) -> T) -> T {
        let world = self.shared.lock();
        read(bot_ref(&world.bots, bot))
    }

    fn with_bot_mut<T>(&self, bot: BotId, change: impl FnOnce(&mut BotState) -> T) -> T {
        let result = {
            let mut world = self.shared.lock();
            change(bot_mut(&mut world.bots, bot))
        };
        self.shared.activity.notify_waiters();
        result
    }

    /// Re-evaluates `probe` after every state change until it returns `Some` or `timeout` passes.
    async fn wait_until<T>(&self, timeout: Duration, probe: impl Fn() -> Option<T>) -> Option<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.activity.notified();
            tokio::pin!(notified);
            // Registered before probing, so a change between the probe and the wait still wakes us.
            notified.as_mut().enable();
            if let Some(found) = probe() {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return probe();
            }
        }
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(server) = self.server.take() {
            // Aborting the accept loop drops its set of connection tasks, which aborts them.
            server.abort();
        }
    }
}

/// A user's file, for [`FakeTelegram::push_file`].
struct IncomingFile<'a> {
    kind: AttachmentKind,
    file_name: Option<&'a str>,
    bytes: Vec<u8>,
    caption: Option<&'a str>,
}

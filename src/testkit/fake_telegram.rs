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
//!   `answerCallbackQuery`, `setMyCommands` / `getMyCommands`, `getFile` with downloads at
//!   `/file/bot<TOKEN>/<path>`, and multipart `sendDocument` / `sendPhoto`;
//! - fault injection per bot: 409 conflicts, 429 with `retry_after`, 502s, polls that hang, a
//!   revoked token, connections closed without an answer;
//! - Telegram's flood limits, counted but not enforced (see [`Violations`]).
//!
//! What it does not model: channels, inline mode, payments, forum topics, webhooks (setWebhook
//! is unknown; deleteWebhook succeeds), `MarkdownV2` (accepted, not parsed: the visible text is
//! the raw text), and Telegram's "chat not found" (any numeric chat id can be written to).
//!
//! Time: windows and long polls run on real time. Do not drive it from a runtime with paused
//! time (`tokio::time::pause`): its long polls would then end at once.
//!
//! Layout: this file holds the public API and the server glue (including `getUpdates`, the one
//! method that waits); `wire` serves connections and reads parameters, `state` models bots,
//! queues, chats and files, `methods` answers the other methods, `html` parses entities, and
//! `flood` counts limit violations.
//!
//! Invariants: all state sits behind one `std::sync::Mutex` that is never held across an
//! `.await`; every request, push, fault change and long-poll start or end wakes
//! `Shared::activity`, so the `wait_for_*` controls never miss a change they wait for.

mod flood;
mod html;
mod methods;
mod state;
mod wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

pub use flood::{ViolationExample, ViolationKind, Violations};
pub use html::{HtmlEntity, ParsedHtml, parse_html};

use state::{
    BotState, CallbackState, RateLimitFault, UserProfile, World, bot_mut, bot_ref,
    incoming_message_json, media_json, unix_now, without_reply,
};
use wire::{Params, Reply, canonical_method, detected_entities};

/// Telegram's description for a `getUpdates` displaced by another one; teloxide maps exactly
/// this text to `ApiError::TerminatedByOtherGetUpdates`.
pub const CONFLICT_DESCRIPTION: &str = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";
/// Telegram's limit on a message's visible text, in UTF-16 code units.
pub const MAX_MESSAGE_UTF16: usize = 4096;
/// Telegram's limit on a media caption's visible text, in UTF-16 code units.
pub const MAX_CAPTION_UTF16: usize = 1024;
/// Telegram answers a long poll after at most 50 s.
const MAX_LONG_POLL: Duration = Duration::from_secs(50);

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
pub struct BotId(usize);

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
}

impl IncomingMessage {
    pub fn new(chat_id: i64, user_id: i64, text: impl Into<String>) -> IncomingMessage {
        IncomingMessage {
            chat_id,
            user_id,
            text: text.into(),
            reply_to_message_id: None,
        }
    }

    pub fn replying_to(mut self, message_id: i32) -> IncomingMessage {
        self.reply_to_message_id = Some(message_id);
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
    /// `sendMessage`, `sendDocument` or `sendPhoto`.
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
    pub action: String,
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

/// What the server task and the test controls share.
struct Shared {
    world: Mutex<World>,
    /// Woken after every state change, for the `wait_for_*` controls.
    activity: Notify,
    started: Instant,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, World> {
        // A poisoned lock only means a test thread panicked while holding it; the state is
        // still consistent enough for a fake, and refusing to serve would hide the real failure.
        self.world
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs one Bot API call of `bot`: counts it, applies the injected faults, then the method.
    /// `None` means "close the connection without answering".
    async fn call(
        &self,
        bot: usize,
        method_key: &str,
        method_name: &str,
        params: Params,
    ) -> Option<Reply> {
        {
            let mut world = self.lock();
            let state = &mut world.bots[bot];
            *state.calls.entry(method_name.to_string()).or_default() += 1;
            if state.faults.revoked {
                return Some(Reply::unauthorized());
            }
            if state.faults.resets > 0 {
                state.faults.resets -= 1;
                return None;
            }
            if let Some(fault) = state.faults.rate_limits.get_mut(method_key)
                && fault.remaining > 0
            {
                fault.remaining -= 1;
                return Some(Reply::too_many_requests(fault.retry_after_secs));
            }
            if let Some(remaining) = state.faults.server_errors.get_mut(method_key)
                && *remaining > 0
            {
                *remaining -= 1;
                return Some(Reply::bad_gateway());
            }
            if method_key == "getupdates" && state.faults.conflicts > 0 {
                state.faults.conflicts -= 1;
                return Some(Reply::conflict());
            }
        }
        // The call is counted: tests waiting for it must see it now, not when it is answered.
        self.activity.notify_waiters();
        if method_key == "getupdates" {
            return Some(self.get_updates(bot, &params).await);
        }
        let mut world = self.lock();
        Some(world.call(bot, method_key, &params, self.started))
    }

    async fn get_updates(&self, bot: usize, params: &Params) -> Reply {
        let offset = match params.integer("offset") {
            Ok(offset) => offset.unwrap_or(0),
            Err(description) => return Reply::bad_request(description),
        };
        let limit = match params.integer("limit") {
            Ok(limit) => limit.unwrap_or(100).clamp(1, 100) as usize,
            Err(description) => return Reply::bad_request(description),
        };
        let timeout = match params.integer("timeout") {
            Ok(seconds) => {
                Duration::from_secs(seconds.unwrap_or(0).max(0) as u64).min(MAX_LONG_POLL)
            }
            Err(description) => return Reply::bad_request(description),
        };
        let allowed_updates = match params.json("allowed_updates") {
            Ok(None) => None,
            Ok(Some(Value::Array(kinds))) => Some(
                kinds
                    .iter()
                    .filter_map(|kind| kind.as_str().map(str::to_string))
                    .collect::<Vec<_>>(),
            ),
            Ok(Some(_)) => {
                return Reply::bad_request("Bad Request: can't parse allowed_updates JSON array");
            }
            Err(description) => return Reply::bad_request(description),
        };
        // This request displaces any getUpdates of the same bot still waiting, as on Telegram.
        let (generation, updates_notify, hang_until) = {
            let mut world = self.lock();
            let state = &mut world.bots[bot];
            state.poll_generation += 1;
            state.updates_notify.notify_waiters();
            (
                state.poll_generation,
                Arc::clone(&state.updates_notify),
                state.faults.hang_until,
            )
        };
        if let Some(until) = hang_until
            && until > Instant::now()
        {
            tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
        }
        {
            let mut world = self.lock();
            let state = &mut world.bots[bot];
            if state.poll_generation != generation {
                return Reply::conflict();
            }
            state.confirm(offset);
            if let Some(kinds) = allowed_updates {
                state.allowed_updates = kinds;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let _waiting = PollGuard::enter(self, bot);
        loop {
            let notified = updates_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let world = self.lock();
                let state = &world.bots[bot];
                if state.faults.revoked {
                    return Reply::unauthorized();
                }
                if state.poll_generation != generation {
                    return Reply::conflict();
                }
                let batch = state.deliverable(limit);
                if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
                    return Reply::Done(Value::Array(batch));
                }
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// Counts a long poll as waiting for as long as it lives (it may be dropped mid-wait when its
/// connection closes).
struct PollGuard<'a> {
    shared: &'a Shared,
    bot: usize,
}

impl<'a> PollGuard<'a> {
    fn enter(shared: &'a Shared, bot: usize) -> PollGuard<'a> {
        shared.lock().bots[bot].polls_waiting += 1;
        shared.activity.notify_waiters();
        PollGuard { shared, bot }
    }
}

impl Drop for PollGuard<'_> {
    fn drop(&mut self) {
        {
            let mut world = self.shared.lock();
            let state = &mut world.bots[self.bot];
            state.polls_waiting = state.polls_waiting.saturating_sub(1);
        }
        self.shared.activity.notify_waiters();
    }
}

/// Answers one HTTP request; `None` closes the connection without an answer.
async fn handle(shared: Arc<Shared>, request: Request<Body>) -> Option<Response> {
    let path = request.uri().path().to_string();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        let reply = download(&shared, rest);
        shared.activity.notify_waiters();
        return Some(reply.into_response());
    }
    let Some((token, method)) = path
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
    else {
        return Some(Reply::not_found().into_response());
    };
    let method_key = method.to_ascii_lowercase();
    let method_name =
        canonical_method(&method_key).map_or_else(|| method.to_string(), str::to_string);
    let bot = shared.lock().by_token.get(token).copied();
    let Some(bot) = bot else {
        return Some(Reply::unauthorized().into_response());
    };
    // The whole request is read before any fault applies, so a dropped connection is seen by
    // the client as "no answer", never as "could not send".
    let reply = match Params::from_request(request).await {
        Ok(params) => shared.call(bot, &method_key, &method_name, params).await,
        Err(description) => Some(Reply::bad_request(description)),
    };
    shared.activity.notify_waiters();
    reply.map(Reply::into_response)
}

/// Serves `/file/bot<TOKEN>/<path>`. teloxide sends the path as one percent-encoded segment
/// (`photos%2Ffile_1.jpg`), so it is decoded first.
fn download(shared: &Shared, token_and_path: &str) -> Reply {
    let Some((token, path)) = token_and_path.split_once('/') else {
        return Reply::not_found();
    };
    let path = percent_decode(path);
    let path = path.as_str();
    let mut world = shared.lock();
    let Some(&bot) = world.by_token.get(token) else {
        return Reply::unauthorized();
    };
    let state = &mut world.bots[bot];
    *state.calls.entry("downloadFile".to_string()).or_default() += 1;
    if state.faults.revoked {
        return Reply::unauthorized();
    }
    state
        .file_paths
        .get(path)
        .and_then(|file_id| state.files.get(file_id))
        .map_or_else(Reply::not_found, |file| Reply::File(file.bytes.clone()))
}

/// Decodes `%XX` escapes of a URL path; anything malformed is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%'
            && let Some(hex) = text.get(index + 1..index + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            decoded.push(byte);
            index += 3;
            continue;
        }
        decoded.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

//! The outbound side of a bot: one worker task per active chat, so that one slow chat never holds
//! up another and every chat's messages leave in order.
//!
//! A forum topic (`tg:<chat>/<thread>`) has its own worker: every message and typing indicator
//! it sends carries the topic's `message_thread_id` (edits name their message, which already
//! is in the topic). A topic that was deleted or closed gets the message in the chat instead
//! (its General), so an answer is never lost to it.
//!
//! Pacing (Telegram's flood limits): every send and edit takes a slot from the bot's `Governor`
//! (per chat a burst of a few, then one a second; ≤ 20 per minute per group; ≤ 30 per second per
//! bot), every draft a bot-wide one; how a streamed answer is shown (not at all when it is quick,
//! a draft, or an edited message) is `stream`'s policy; the typing indicator is repeated every
//! 4.5 s while a run works. A 429 freezes the whole bot for its `retry_after`.
//!
//! Delivery of a final answer is confirmed in the outbox (and the answered updates are marked
//! processed) only after Telegram accepted every part. A worker checks the outbox row before
//! sending, so a reply queued twice (live and by the sweep) is sent once. A record that fails
//! after Telegram accepted the reply is retried, not the send (`hold`): the row is held (the
//! sweep skips it) and the worker sends nothing else in its chat until the record lands.
//!
//! A reply is formatted (`format::markdown_to_html`; plain text when Telegram rejects the
//! entities) and split within Telegram's limit (`format::split_html`). A row with a file is an
//! upload of its own, in its place among the chat's replies (`upload`); a row marked `speak` is
//! synthesized and sent as a voice message (`upload::send_spoken`), its text following when the
//! voice cannot carry it well; the voice is recorded as sent first (`outbox::mark_voice_sent`), so
//! a retry of the text does not speak again, and a failed synthesis sends the text instead. A
//! worker ends after 2 minutes with nothing to do (`IDLE_EXIT`); the bot starts a new one for the
//! next message.

use std::sync::Arc;
use std::time::Duration;

use teloxide::payloads::{EditMessageTextSetters, SendChatActionSetters, SendMessageSetters};
use teloxide::prelude::*;
use teloxide::types::{
    ChatAction, InlineKeyboardButton, InlineKeyboardMarkup, MessageId, ParseMode, ThreadId,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::TelegramError;
use super::format;
use super::governor::Governor;
use super::hold::{self, HeldDeliveries};
use super::stream::{EDIT_SPACING, Stream, StreamSettings};
use super::upload;
use crate::events::{EventBus, EventKind};
use crate::reply_latency::{self, Stage};
use crate::store::Store;
use crate::store::outbox::{self, OutboxFile, OutboxRow};
use crate::store::telegram as updates;

const TYPING_EVERY: Duration = Duration::from_millis(4500);
const IDLE_EXIT: Duration = Duration::from_secs(120);
/// Telegram's limit, in UTF-16 code units of visible text.
pub const MESSAGE_LIMIT: usize = 4096;
/// Delivery attempts of one outbox row before it is given up (and reported).
const MAX_ATTEMPTS: i64 = 12;

pub enum SendJob {
    Typing(bool),
    Partial {
        run_id: i64,
        text: String,
    },
    Final {
        run_id: Option<i64>,
        text: String,
        outbox_id: Option<i64>,
    },
    Notice {
        text: String,
    },
    /// HTML messages in order, the last with inline buttons (label, callback data); answers with
    /// the id of the message that carries the buttons.
    Buttons {
        parts: Vec<String>,
        buttons: Vec<(String, String)>,
        reply: oneshot::Sender<Result<i32, TelegramError>>,
    },
    /// Replaces a message's text and removes its buttons (an approval that was decided).
    Resolve {
        message_id: i32,
        text: String,
    },
}

pub struct ChatWorker {
    pub bot: Bot,
    pub governor: Arc<Governor>,
    pub chat_id: i64,
    /// The forum topic this worker writes into (`None`: the chat itself).
    pub thread_id: Option<i32>,
    pub agent: String,
    pub store: Store,
    pub events: EventBus,
    pub cancel: CancellationToken,
    /// Speaks replies marked `speak` (none: they are sent as text).
    pub speech: Option<crate::voice::speech::SpeechClient>,
    /// When and how streamed answers are shown.
    pub streaming: StreamSettings,
    /// The bot's outbox rows whose accepted delivery is not recorded yet (`hold`).
    pub held: HeldDeliveries,
}

impl ChatWorker {
    pub fn spawn(self) -> mpsc::UnboundedSender<SendJob> {
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(self.run(receiver));
        sender
    }

    async fn run(self, mut jobs: mpsc::UnboundedReceiver<SendJob>) {
        let mut typing = false;
        let mut next_typing = Instant::now();
        // When the current run started answering: its streamed text is measured from then.
        let mut working_since: Option<Instant> = None;
        let mut stream: Option<Stream> = None;
        loop {
            let edit_due = stream.as_ref().and_then(|s| s.due(&self.streaming));
            let typing_due = typing.then_some(next_typing);
            let wake = match (edit_due, typing_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let idle = !typing && stream.is_none();
            tokio::select! {
                job = jobs.recv() => {
                    let Some(job) = job else { return };
                    match job {
                        SendJob::Typing(on) => {
                            typing = on;
                            next_typing = Instant::now();
                            working_since = on.then(|| working_since.unwrap_or_else(Instant::now));
                        }
                        SendJob::Partial { run_id, text } => {
                            let started = working_since.unwrap_or_else(Instant::now);
                            let current = stream.get_or_insert_with(|| Stream::new(run_id, started));
                            if current.run_id != run_id {
                                *current = Stream::new(run_id, started);
                            }
                            current.pending = Some(text);
                        }
                        SendJob::Final { run_id, text, outbox_id } => {
                            typing = typing && run_id.is_none();
                            if run_id.is_some() {
                                working_since = None;
                            }
                            // A message without a run (`send_message`) leaves a streamed answer alone.
                            let streamed = match (&stream, run_id) {
                                (Some(current), Some(run_id)) if current.run_id == run_id => stream.take(),
                                (_, Some(_)) => stream.take().and(None),
                                (_, None) => None,
                            };
                            self.deliver_final(run_id, streamed, &text, outbox_id).await;
                        }
                        SendJob::Notice { text } => {
                            if let Err(error) = self.send_html(&format::markdown_to_html(&text), None).await {
                                tracing::warn!(chat = self.chat_id, %error, "could not send a notice");
                            }
                        }
                        SendJob::Buttons { parts, buttons, reply } => {
                            let keyboard = InlineKeyboardMarkup::new(buttons
                                .into_iter()
                                .map(|(label, data)| vec![InlineKeyboardButton::callback(label, data)])
                                .collect::<Vec<_>>());
                            let result = self.send_parts_with_buttons(parts, keyboard).await;
                            let _ = reply.send(result.map(|id| id.0));
                        }
                        SendJob::Resolve { message_id, text } => {
                            let html = format::markdown_to_html(&text);
                            if let Err(error) = self.edit_html(MessageId(message_id), &html).await {
                                tracing::debug!(chat = self.chat_id, %error, "could not update a decided approval message");
                            }
                        }
                    }
                }
                _ = sleep_until(wake), if wake.is_some() => {
                    let now = Instant::now();
                    if typing && now >= next_typing {
                        let mut action = self.bot.send_chat_action(ChatId(self.chat_id), ChatAction::Typing);
                        if let Some(thread) = self.thread_id {
                            action = action.message_thread_id(ThreadId(MessageId(thread)));
                        }
                        let _ = action.await;
                        next_typing = now + TYPING_EVERY;
                    }
                    if let Some(current) = stream.as_mut()
                        && current.due(&self.streaming).is_some_and(|due| now >= due)
                    {
                        self.flush_partial(current).await;
                    }
                }
                _ = tokio::time::sleep(IDLE_EXIT), if idle => return,
                _ = self.cancel.cancelled() => return,
            }
        }
    }

    /// Sends `parts` in order, the buttons under the last; the first failure ends it (the
    /// buttons are never shown under a prompt whose beginning did not arrive).
    async fn send_parts_with_buttons(
        &self,
        parts: Vec<String>,
        keyboard: InlineKeyboardMarkup,
    ) -> Result<MessageId, TelegramError> {
        let count = parts.len();
        let mut last = None;
        for (index, part) in parts.into_iter().enumerate() {
            let buttons = (index + 1 == count).then(|| keyboard.clone());
            last = Some(self.send_html(&part, buttons).await?);
        }
        last.ok_or_else(|| TelegramError::Other("an approval prompt with no text".into()))
    }

    /// Delivers a final answer (or a queued reply): a file, a spoken reply, or text whose first
    /// part replaces the run's streamed message; then records the outbox row's outcome.
    #[tracing::instrument(level = "debug", name = "deliver_reply", skip_all, fields(chat = self.chat_id, run_id = ?run_id, outbox_id = ?outbox_id))]
    async fn deliver_final(
        &self,
        run_id: Option<i64>,
        streamed: Option<Stream>,
        text: &str,
        outbox_id: Option<i64>,
    ) {
        // The outbox row is the truth: a row already delivered is not sent again.
        let row = match outbox_id {
            Some(id) => match self.queued_row(id).await {
                Some(found) => Some(found),
                None => return,
            },
            None => None,
        };
        if let (Some(row), Some(id)) = (row.as_ref(), outbox_id) {
            // A file (`send_file`) is an upload of its own, in its place among the chat's replies.
            if let Some(file) = row.file.as_ref() {
                self.deliver_file_row(id, row, file, text).await;
                return;
            }
            let has_stream = streamed.as_ref().is_some_and(|s| s.message_id().is_some());
            if row.speak && !has_stream && self.speak_reply(id, row, text).await {
                return;
            }
        }
        let (result, parts) = self.send_text_reply(run_id, streamed.as_ref(), text).await;
        if let (Some(run_id), Ok(())) = (run_id, &result) {
            reply_latency::run_reached(run_id, Stage::Sent);
        }
        let Some(id) = outbox_id else {
            if let Err(error) = result {
                tracing::warn!(chat = self.chat_id, %error, "could not send a reply");
            }
            return;
        };
        self.finish_delivery(id, result, text, parts).await;
        if let Some(run_id) = run_id {
            reply_latency::run_reached(run_id, Stage::Confirmed);
        }
    }

    /// The outbox row `id` while it is still to be sent; `None` when it was delivered, ran out of
    /// attempts, or could not be read.
    async fn queued_row(&self, id: i64) -> Option<OutboxRow> {
        match self
            .store
            .read(move |conn| outbox::outbox_get(conn, id))
            .await
        {
            Ok(None) => None,
            Ok(Some(found)) if found.attempts >= MAX_ATTEMPTS => None,
            Ok(Some(found)) => Some(found),
            // Not knowing whether the row is a file or a spoken reply, sending it as text
            // would be wrong; the outbox sweep tries it again.
            Err(error) => {
                tracing::warn!(outbox_id = id, %error, "could not read a queued reply; the sweep retries it");
                None
            }
        }
    }

    /// Uploads `file`, the file of outbox row `id`, and records the outcome.
    async fn deliver_file_row(&self, id: i64, row: &OutboxRow, file: &OutboxFile, text: &str) {
        let result = self.send_file_row(row).await;
        let shown = format!("[{} {}] {text}", file.kind, file.name);
        let done = self.finish_delivery(id, result.clone(), &shown, 1).await;
        self.file_row_done(row, &result, done).await;
    }

    /// Speaks outbox row `id` as a voice message. True when the voice says it all and the row is
    /// finished; false when its text is still to be sent.
    async fn speak_reply(&self, id: i64, row: &OutboxRow, text: &str) -> bool {
        match self.send_spoken(row).await {
            upload::Spoken::Alone => {
                self.finish_delivery(id, Ok(()), text, 1).await;
                true
            }
            // Voice sent; the text follows for what a voice cannot carry. The voice is
            // recorded first, so a retry of the text does not speak it again.
            upload::Spoken::WithText => {
                let store = self.store.clone();
                let _held = self.held.hold(id);
                let what = format!(
                    "a spoken reply to chat {} was sent (outbox {id})",
                    self.chat_id
                );
                let recorded = hold::until_recorded(&what, &self.cancel, || {
                    let store = store.clone();
                    async move {
                        store
                            .write(move |conn| outbox::mark_voice_sent(conn, id))
                            .await
                    }
                })
                .await;
                // Stopped before the voice was recorded: its text waits for the next incarnation.
                !recorded.landed()
            }
            // No voice: the text goes instead of it.
            upload::Spoken::Failed => false,
        }
    }

    /// Sends `text` as HTML messages, the first one as an edit of the run's streamed message when
    /// there is one; the first failure ends it. Returns the outcome and the number of parts.
    async fn send_text_reply(
        &self,
        run_id: Option<i64>,
        streamed: Option<&Stream>,
        text: &str,
    ) -> (Result<(), TelegramError>, usize) {
        let html = format::markdown_to_html(text);
        let chunks = format::split_html(&html, MESSAGE_LIMIT);
        if let Some(current) = streamed.filter(|s| s.message_id().is_some()) {
            // The final edit respects the same spacing as the streamed ones.
            tokio::time::sleep_until(current.last_shown + EDIT_SPACING).await;
        }
        let streamed_id = self.streamed_message_id(run_id, streamed).await;
        let mut result = Ok(());
        for (index, chunk) in chunks.iter().enumerate() {
            let sent = match (index, streamed_id) {
                (0, Some(id)) => self.edit_html(id, chunk).await.map(|_| ()),
                _ => self.send_html(chunk, None).await.map(|_| ()),
            };
            if let Err(error) = sent {
                result = Err(error);
                break;
            }
        }
        (result, chunks.len())
    }

    /// The message a run's answer replaces: the one it is streaming into, else the one recorded
    /// for it in the database.
    async fn streamed_message_id(
        &self,
        run_id: Option<i64>,
        streamed: Option<&Stream>,
    ) -> Option<MessageId> {
        // A run that streamed before a restart: its message id is in the database. (A run shown
        // only as drafts has none: its answer is a new message.)
        let streamed_id = streamed.and_then(|s| s.message_id());
        if streamed_id.is_some() {
            return streamed_id;
        }
        let run_id = run_id?;
        let chat_id = self.chat_id;
        self.store
            .read(move |conn| updates::stream_message(conn, run_id, chat_id))
            .await
            .ok()
            .flatten()
            .map(|id| MessageId(id as i32))
    }

    /// Records the outcome of delivering outbox row `id` (delivered, failed for good, or failed
    /// for now) and announces it. True when the row is done (it will not be sent again).
    ///
    /// A delivery Telegram accepted is recorded whatever it takes: while the store refuses, the
    /// row is held (the sweep leaves it alone) and the record retried; this worker sends nothing
    /// else meanwhile (`hold`).
    pub(super) async fn finish_delivery(
        &self,
        id: i64,
        result: Result<(), TelegramError>,
        text: &str,
        parts: usize,
    ) -> bool {
        let now = crate::clock::now_ms();
        let store = self.store.clone();
        let outcome = result.clone();
        let record = move || {
            let outcome = outcome.clone();
            let store = store.clone();
            async move {
                store
                    .write(move |conn| record_outcome(conn, id, &outcome, now))
                    .await
            }
        };
        let recorded = if result.is_ok() {
            let _held = self.held.hold(id);
            let what = format!("a reply to chat {} was sent (outbox {id})", self.chat_id);
            hold::until_recorded(&what, &self.cancel, record)
                .await
                .landed()
        } else {
            // A send that failed repeats nothing when it is tried again; its count may wait.
            match record().await {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(outbox_id = id, %error, "could not record a failed delivery attempt");
                    false
                }
            }
        };
        let done = recorded
            && match &result {
                Ok(()) => true,
                Err(error) => !error.is_transient(),
            };
        match result {
            Ok(()) => self.events.publish_data(
                EventKind::MessageOut,
                self.chat().as_str(),
                &text.chars().take(200).collect::<String>(),
                crate::events::EventData::TelegramReplySent {
                    agent: self.agent.clone(),
                    chat: self.chat().to_string(),
                    parts,
                },
            ),
            Err(error) => {
                tracing::warn!(chat = self.chat_id, outbox_id = id, %error, "reply not delivered; it stays in the outbox");
                self.events.publish(
                    EventKind::Warning,
                    &format!("bot:{}", self.agent),
                    &format!("reply to chat {} not delivered: {error}", self.chat_id),
                );
            }
        }
        done
    }

    /// The conversation this worker writes into.
    fn chat(&self) -> crate::domain::ChatKey {
        crate::domain::ChatKey::telegram_topic(self.chat_id, self.thread_id)
    }

    /// Sends HTML into the worker's topic; a topic that is gone gets it in the chat instead.
    pub(super) async fn send_html(
        &self,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<MessageId, TelegramError> {
        match self
            .send_html_in(self.thread_id, html, keyboard.clone())
            .await
        {
            Err(TelegramError::TopicGone(why)) if self.thread_id.is_some() => {
                tracing::warn!(chat = self.chat_id, thread = ?self.thread_id, %why, "forum topic gone; sending in the chat instead");
                self.send_html_in(None, html, keyboard).await
            }
            result => result,
        }
    }

    /// Sends HTML, falling back to plain text when Telegram rejects the entities; waits out 429s.
    async fn send_html_in(
        &self,
        thread_id: Option<i32>,
        html: &str,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<MessageId, TelegramError> {
        let thread = thread_id.map(|thread| ThreadId(MessageId(thread)));
        for attempt in 0..3 {
            self.governor.acquire(self.chat_id).await;
            let mut request = self
                .bot
                .send_message(ChatId(self.chat_id), html.to_string())
                .parse_mode(ParseMode::Html);
            if let Some(thread) = thread {
                request = request.message_thread_id(thread);
            }
            if let Some(keyboard) = keyboard.clone() {
                request = request.reply_markup(keyboard);
            }
            match request.await.map_err(TelegramError::from) {
                Ok(message) => return Ok(message.id),
                Err(TelegramError::ParseEntities(_)) => {
                    self.governor.acquire(self.chat_id).await;
                    let mut plain = self
                        .bot
                        .send_message(ChatId(self.chat_id), format::plain_text(html));
                    if let Some(thread) = thread {
                        plain = plain.message_thread_id(thread);
                    }
                    if let Some(keyboard) = keyboard.clone() {
                        plain = plain.reply_markup(keyboard);
                    }
                    return plain
                        .await
                        .map(|message| message.id)
                        .map_err(TelegramError::from);
                }
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

    /// Edits a message's HTML (plain-text fallback), paced by the governor; "not modified" is success.
    pub(super) async fn edit_html(
        &self,
        message_id: MessageId,
        html: &str,
    ) -> Result<(), TelegramError> {
        for attempt in 0..3 {
            self.governor.acquire(self.chat_id).await;
            let result = self
                .bot
                .edit_message_text(ChatId(self.chat_id), message_id, html.to_string())
                .parse_mode(ParseMode::Html)
                .await
                .map_err(TelegramError::from);
            match result {
                Ok(_) | Err(TelegramError::NotModified) => return Ok(()),
                Err(TelegramError::ParseEntities(_)) => {
                    self.governor.acquire(self.chat_id).await;
                    return match self
                        .bot
                        .edit_message_text(
                            ChatId(self.chat_id),
                            message_id,
                            format::plain_text(html),
                        )
                        .await
                        .map_err(TelegramError::from)
                    {
                        Ok(_) | Err(TelegramError::NotModified) => Ok(()),
                        Err(error) => Err(error),
                    };
                }
                Err(TelegramError::RetryAfter(wait)) if attempt < 2 => self.governor.freeze(wait),
                Err(error) => return Err(error),
            }
        }
        Err(TelegramError::Other(
            "gave up after repeated rate limits".into(),
        ))
    }
}

/// Writes what became of outbox row `id`: delivered (and its updates processed), failed for
/// good (kept, never sent again), or one more failed attempt.
fn record_outcome(
    conn: &rusqlite::Connection,
    id: i64,
    outcome: &Result<(), TelegramError>,
    now: i64,
) -> crate::store::Result<()> {
    let Some(row) = outbox::outbox_get(conn, id)? else {
        return Ok(());
    };
    match outcome {
        Ok(()) => {
            outbox::outbox_delivered(conn, id, now)?;
            updates::mark_processed(conn, &row.inbound_ids, now)
        }
        Err(error) if !error.is_transient() || row.attempts + 1 >= MAX_ATTEMPTS => {
            // Undeliverable (blocked, deleted) or out of attempts: stop trying, keep the record.
            outbox::outbox_failed(conn, id, &error.to_string())?;
            outbox::outbox_delivered(conn, id, now)?;
            updates::mark_processed(conn, &row.inbound_ids, now)
        }
        Err(error) => outbox::outbox_failed(conn, id, &error.to_string()),
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

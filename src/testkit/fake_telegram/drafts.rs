//! `sendMessageDraft` (Bot API 9.5): the bot shows a message it is still writing as a draft in a
//! private chat, "typing" the text; the draft posts no message, and the final text is then sent
//! with `sendMessage`. The fake checks the parameters as Telegram documents them (`chat_id` of a
//! private chat, a non-zero `draft_id`, at most 4096 characters of text after entity parsing,
//! optional `message_thread_id` / `parse_mode` / `entities`), answers `true`, and records every
//! draft so a test can see what was shown and when. A switch makes it answer 404 "Not Found", as
//! Telegram answers a method it does not know, to test a daemon's fallback.
//!
//! Drafts take no chat's message slot; they count towards the bot's per-second limit (see
//! `flood`).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::flood::Activity;
use super::methods::{chat_id_param, format_text};
use super::state::BotState;
use super::wire::{Params, Reply};
use super::{BotId, DraftRecord, FakeTelegram, MAX_MESSAGE_UTF16};

/// The fake's answer to a draft for a group or channel. Telegram documents drafts for private
/// chats only; its exact wording for other chats is not documented, so this is a stand-in.
pub const DRAFT_NOT_PRIVATE_DESCRIPTION: &str =
    "Bad Request: drafts can be sent to private chats only";

pub(super) fn send_message_draft(
    state: &mut BotState,
    params: &Params,
    started: Instant,
) -> Result<Value, Reply> {
    if state.drafts_refused {
        return Err(Reply::not_found());
    }
    let chat_id = chat_id_param(params)?;
    if chat_id < 0 {
        return Err(Reply::bad_request(DRAFT_NOT_PRIVATE_DESCRIPTION));
    }
    let draft_id = match params.integer("draft_id") {
        Ok(Some(id)) if id != 0 => id,
        Ok(_) => return Err(Reply::bad_request("Bad Request: draft_id must be non-zero")),
        Err(description) => return Err(Reply::bad_request(description)),
    };
    let thread_id = match params.integer("message_thread_id") {
        Ok(thread) => thread.and_then(|thread| i32::try_from(thread).ok()),
        Err(description) => return Err(Reply::bad_request(description)),
    };
    let text = params.string("text").unwrap_or_default();
    let parse_mode = params.string("parse_mode").filter(|mode| !mode.is_empty());
    let entities = params.json("entities").map_err(Reply::bad_request)?;
    let formatted = format_text(&text, parse_mode.as_deref(), entities)?;
    if formatted.utf16_len > MAX_MESSAGE_UTF16 {
        return Err(Reply::bad_request("Bad Request: message is too long"));
    }
    let now = Instant::now();
    state.flood.record(
        Activity::Draft,
        chat_id,
        0,
        "sendMessageDraft",
        now,
        started,
    );
    state.drafts.push(DraftRecord {
        chat_id,
        thread_id,
        draft_id,
        text,
        visible_text: formatted.visible,
        parse_mode,
        at: now,
    });
    Ok(Value::Bool(true))
}

impl FakeTelegram {
    /// Every draft the bot showed, in order.
    pub fn drafts(&self, bot: BotId) -> Vec<DraftRecord> {
        self.with_bot(bot, |state| state.drafts.clone())
    }

    /// From now on `sendMessageDraft` answers 404 "Not Found" (`true`) or works again (`false`).
    pub fn refuse_drafts(&self, bot: BotId, refused: bool) {
        self.with_bot_mut(bot, |state| state.drafts_refused = refused);
    }

    /// Waits until a draft matches `predicate`, and returns it; `None` after `timeout`.
    pub async fn wait_for_draft(
        &self,
        bot: BotId,
        predicate: impl Fn(&DraftRecord) -> bool,
        timeout: Duration,
    ) -> Option<DraftRecord> {
        self.wait_until(timeout, || {
            self.with_bot(bot, |state| {
                state.drafts.iter().find(|draft| predicate(draft)).cloned()
            })
        })
        .await
    }
}

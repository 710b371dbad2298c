//! Turns through Telegram. With `telegram = true` the main agent gets a bot on a fake Bot API
//! (`testkit::fake_telegram`), and a turn to a `tg:` chat is an update that bot receives: what the
//! turn heard is what the bot sent to that chat (and forum topic) until the update was answered.
//!
//! The people: user 1001 ("Ada") may talk to the agent and approve; user 1002 ("Bo") may talk.
//! A turn's `from` picks the sender; by default the private chat's owner, or Ada in a group.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::domain::ChatKey;
use crate::store::Store;
use crate::testkit::fake_speech::FakeSpeech;
use crate::testkit::fake_telegram::{
    AttachmentKind, BotId, FakeTelegram, IncomingMessage, SentMessage,
};
use crate::testkit::fake_transcription::FakeTranscription;
use crate::testkit::harness::{OPEN_WORK_SQL, telegram_toml};
use crate::testkit::wait::poll_until;

use super::judge::Heard;

/// The user who talks to the agent and approves its requests.
pub(super) const OWNER: i64 = 1001;
/// Another allowed user (not an approver).
const FRIEND: i64 = 1002;
const TOKEN: &str = "424242:eval-bot-token";
const TOKEN_ENV: &str = "CLAWVISOR_EVAL_BOT_TOKEN";
pub(super) const BOT_USERNAME: &str = "eval_bot";
/// How long a settled turn that heard nothing still listens for a late notice.
const LATE_NOTICE: Duration = Duration::from_secs(3);

/// What the user does in a Telegram turn.
#[derive(Debug, Clone, Copy)]
pub(super) enum Said<'a> {
    Text(&'a str),
    /// A voice note in which the transcription server (if any) hears this text.
    Voice(&'a str),
    /// Nothing: the turn waits for the agent's next message.
    Nothing,
}

/// A Telegram turn: who says what, where.
#[derive(Debug, Clone, Copy)]
pub(super) struct Utterance<'a> {
    pub(super) chat: &'a ChatKey,
    pub(super) from: i64,
    pub(super) said: Said<'a>,
}

/// The fake Bot API and the main agent's bot on it.
pub(super) struct TelegramSide {
    pub(super) fake: FakeTelegram,
    pub(super) bot: BotId,
    /// `tg:<chat>/<topic name>` → the topic's key with its thread id.
    topics: BTreeMap<String, ChatKey>,
    /// The agent file names nobody: the bot waits to be claimed.
    unclaimed: bool,
}

impl TelegramSide {
    /// Starts the fake with the scenario's forum groups and their topics; an `unclaimed` bot's
    /// agent file names nobody.
    pub(super) async fn start(
        forums: &BTreeMap<String, Vec<String>>,
        unclaimed: bool,
    ) -> Result<TelegramSide, String> {
        let fake = FakeTelegram::try_start()
            .await
            .map_err(|error| format!("the fake Bot API did not start: {error}"))?;
        let bot = fake.add_bot(TOKEN, BOT_USERNAME);
        fake.set_user(OWNER, "Ada", Some("ada"));
        fake.set_user(FRIEND, "Bo", Some("bo"));
        let mut topics = BTreeMap::new();
        for (group, names) in forums {
            let chat_id: i64 = group
                .parse()
                .map_err(|_| format!("[forums]: `{group}` is not a chat id"))?;
            fake.create_forum(chat_id, &format!("Forum {group}"));
            for name in names {
                let thread = fake.create_forum_topic(bot, chat_id, OWNER, name);
                topics.insert(
                    format!("tg:{group}/{name}"),
                    ChatKey::telegram_topic(chat_id, Some(thread)),
                );
            }
        }
        Ok(TelegramSide {
            fake,
            bot,
            topics,
            unclaimed,
        })
    }

    /// The chat a turn talks in, a named forum topic resolved to its thread id.
    pub(super) fn chat_of(&self, chat: &ChatKey) -> ChatKey {
        self.topics
            .get(chat.as_str())
            .cloned()
            .unwrap_or_else(|| chat.clone())
    }

    /// The `[telegram]` table of the main agent's file.
    pub(super) fn agent_table(&self) -> String {
        let (allowed, approvers): (&[i64], &[i64]) = match self.unclaimed {
            true => (&[], &[]),
            false => (&[OWNER, FRIEND], &[OWNER]),
        };
        telegram_toml(TOKEN_ENV, &self.fake.base_url(), allowed, approvers)
    }

    /// The environment variable holding the bot's token.
    pub(super) fn token_env() -> (String, String) {
        (TOKEN_ENV.to_string(), TOKEN.to_string())
    }

    /// Who sends a turn's message to `chat` when the turn does not say.
    pub(super) fn default_sender(chat: &ChatKey) -> i64 {
        match chat.telegram_chat_id() {
            Some(id) if id > 0 => id,
            _ => OWNER,
        }
    }

    /// Sends the user's message as an update and listens until it was answered: its stored
    /// update is final (or kept as group context), no run is open and no reply waits in the
    /// outbox. What the bot sent to the chat in the meantime is what the turn heard.
    pub(super) async fn converse(
        &self,
        store: &Store,
        agent: &str,
        utterance: Utterance<'_>,
        transcription: Option<&FakeTranscription>,
        limit: Duration,
    ) -> Result<Heard, String> {
        let Utterance { chat, from, said } = utterance;
        let chat_id = chat
            .telegram_chat_id()
            .ok_or_else(|| format!("`{chat}` is not a Telegram chat"))?;
        let already_sent = self.fake.sent(self.bot).len();
        let last_run = last_run_id(store, agent, chat).await?;
        let pushed = match said {
            Said::Text(text) => {
                let text = match text.contains(CLAIM_CODE) {
                    true => text.replace(CLAIM_CODE, &claim_code(store, agent, limit).await?),
                    false => text.to_string(),
                };
                let mut message = IncomingMessage::new(chat_id, from, text);
                if let Some(thread) = chat.telegram_thread_id() {
                    message = message.in_topic(thread);
                }
                Some(self.fake.push(self.bot, message))
            }
            Said::Voice(heard) => {
                // Real Ogg/Opus bytes, different for every text, so each note has its transcript.
                let audio = FakeSpeech::audio_for(heard);
                if let Some(transcription) = transcription {
                    transcription.set_transcript(&audio, heard);
                }
                Some(
                    self.fake
                        .push_voice(self.bot, chat_id, from, audio, 4, None),
                )
            }
            Said::Nothing => None,
        };
        match pushed {
            Some(pushed) => {
                poll_until(limit, || async {
                    match settled(store, agent, pushed.update_id).await {
                        Ok(true) => Ok(()),
                        Ok(false) => Err(format!(
                            "update {} not answered yet (sent so far: {:?})",
                            pushed.update_id,
                            self.texts_since(already_sent, chat)
                        )),
                        Err(error) => Err(error),
                    }
                })
                .await
                .map_err(|seen| format!("no answer within {} s: {seen}", limit.as_secs()))?;
                // A command's answer (`/new`) comes from the session after the update is done:
                // give it a moment to arrive when nothing was said yet.
                if self.sent_since(already_sent, chat).is_empty() {
                    let _ = poll_until(LATE_NOTICE, || async {
                        !self.sent_since(already_sent, chat).is_empty()
                    })
                    .await;
                }
            }
            None => {
                poll_until(limit, || async {
                    !self.sent_since(already_sent, chat).is_empty()
                })
                .await
                .map_err(|_| format!("nothing was sent to {chat} within {} s", limit.as_secs()))?;
            }
        }
        let mut heard = Heard::default();
        for message in self.sent_since(already_sent, chat) {
            if let Some(attachment) = &message.attachment {
                heard.sent_files.push(
                    match attachment.kind {
                        AttachmentKind::Photo => "photo",
                        AttachmentKind::Document => "document",
                        AttachmentKind::Voice => "voice",
                    }
                    .to_string(),
                );
            }
            if message.buttons.is_empty() {
                if !heard.text.is_empty() {
                    heard.text.push('\n');
                }
                heard.text.push_str(&message.visible_text);
            } else {
                heard.notices.push(message.visible_text.clone());
            }
        }
        heard.run_id = match last_run_id(store, agent, chat).await? {
            Some(run) if Some(run) != last_run => Some(run),
            _ => None,
        };
        Ok(heard)
    }

    /// What the bot sent to `chat` (its topic, for a topic's key) after the first `skip` messages.
    fn sent_since(&self, skip: usize, chat: &ChatKey) -> Vec<SentMessage> {
        let (chat_id, thread) = (chat.telegram_chat_id(), chat.telegram_thread_id());
        self.fake
            .sent(self.bot)
            .into_iter()
            .skip(skip)
            .filter(|message| Some(message.chat_id) == chat_id && message.thread_id == thread)
            .collect()
    }

    fn texts_since(&self, skip: usize, chat: &ChatKey) -> Vec<String> {
        self.sent_since(skip, chat)
            .into_iter()
            .map(|message| message.visible_text)
            .collect()
    }
}

/// The placeholder a turn's text uses for the bot's claim code.
const CLAIM_CODE: &str = "{{claim_code}}";

/// The unclaimed bot's claim code, once the bot has made it.
async fn claim_code(store: &Store, agent: &str, limit: Duration) -> Result<String, String> {
    poll_until(limit, || async {
        let agent = agent.to_string();
        store
            .read(move |conn| {
                Ok(conn
                    .query_row(
                        "SELECT code FROM bot_claims WHERE agent = ?1",
                        [&agent],
                        |row| row.get::<_, String>(0),
                    )
                    .ok())
            })
            .await
            .ok()
            .flatten()
    })
    .await
    .map_err(|_| format!("the bot made no claim code within {} s", limit.as_secs()))
}

/// The newest run in the agent's conversation with `chat`.
async fn last_run_id(store: &Store, agent: &str, chat: &ChatKey) -> Result<Option<i64>, String> {
    let (agent, chat) = (agent.to_string(), chat.as_str().to_string());
    store
        .read(move |conn| {
            Ok(conn.query_row(
                "SELECT MAX(id) FROM runs WHERE agent = ?1 AND chat = ?2",
                [&agent, &chat],
                |row| row.get(0),
            )?)
        })
        .await
        .map_err(|error| format!("cannot read the runs: {error}"))
}

/// The update is final (or kept as context) and nothing else is under way: no update waiting,
/// no run open, no reply in the outbox (`harness::OPEN_WORK_SQL`).
async fn settled(store: &Store, agent: &str, update_id: i64) -> Result<bool, String> {
    let agent = agent.to_string();
    store
        .read(move |conn| {
            let status: Option<String> = conn
                .query_row(
                    "SELECT status FROM inbound_updates WHERE agent = ?1 AND update_id = ?2",
                    rusqlite::params![agent, update_id],
                    |row| row.get(0),
                )
                .ok();
            if !matches!(status.as_deref(), Some("processed" | "ignored" | "context")) {
                return Ok(false);
            }
            let open: i64 = conn.query_row(OPEN_WORK_SQL, [], |row| row.get(0))?;
            Ok(open == 0)
        })
        .await
        .map_err(|error| format!("cannot read the updates: {error}"))
}

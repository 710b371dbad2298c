//! Plain types shared by every part of the daemon: chats ([`ChatKey`], whose kind names the
//! channel), senders, inbound and outbound messages ([`Inbound`], [`Outbound`]), and which parts
//! of the tree a start runs ([`StartOptions`]: everything for `serve`; no Studio, bots or
//! scheduler for `chat` and `eval`).
//!
//! Architecture Invariant: `domain` does no I/O and knows no crate beyond serde_json and std.
//! Messages that cross the Channel ↔ Agent boundary are these plain values (ids and strings), so
//! that a channel could one day live on another node (DESIGN.md, "Beyond one machine").

use std::fmt;
use std::path::PathBuf;

/// The kind of conversation a chat key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChatKind {
    /// A Telegram chat (`tg:<chat_id>`), reached through the agent's bot.
    Telegram,
    /// A WhatsApp conversation (`wa:<number>`), reached through the agent's WhatsApp account.
    WhatsApp,
    /// A Signal conversation (`sg:<number>`), reached through the agent's Signal account.
    Signal,
    /// The terminal (`cli:<name>`), Studio (`studio:<id>`) or the OpenAI-compatible gateway (`api:<user>`).
    Local,
    /// The isolated session of a scheduled job (`sched:<job_id>`).
    Schedule,
    /// The delegate's session of a handoff contract (`handoff:<contract_id>`).
    Handoff,
    /// The session of a webhook trigger (`trigger:<name>`): each delivery runs there.
    Trigger,
}

impl ChatKind {
    /// A person's messaging channel (Telegram, WhatsApp, Signal): replies go through the outbox
    /// and are marked delivered only once the channel accepted them.
    pub fn has_outbox(self) -> bool {
        matches!(
            self,
            ChatKind::Telegram | ChatKind::WhatsApp | ChatKind::Signal
        )
    }

    /// The channel's name for people ("Telegram", "WhatsApp", "Signal"); `None` for the
    /// daemon's own conversations.
    pub fn channel_name(self) -> Option<&'static str> {
        match self {
            ChatKind::Telegram => Some("Telegram"),
            ChatKind::WhatsApp => Some("WhatsApp"),
            ChatKind::Signal => Some("Signal"),
            _ => None,
        }
    }

    /// A channel served by the channel seam (`crate::channel`), not by the Telegram bot.
    pub fn is_seam_channel(self) -> bool {
        matches!(self, ChatKind::WhatsApp | ChatKind::Signal)
    }

    /// The seam's short name of the channel (`wa`, `sg`), also its chat keys' prefix.
    pub fn seam_name(self) -> Option<&'static str> {
        match self {
            ChatKind::WhatsApp => Some("wa"),
            ChatKind::Signal => Some("sg"),
            _ => None,
        }
    }
}

/// Identifies one conversation of an agent: `<kind>:<id>`. Sessions are keyed by (agent, chat).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChatKey(String);

impl ChatKey {
    /// Parses a stored key; `None` when the prefix is unknown.
    pub fn parse(text: &str) -> Option<ChatKey> {
        let (prefix, rest) = text.split_once(':')?;
        if rest.is_empty() {
            return None;
        }
        matches!(
            prefix,
            "tg" | "wa" | "sg" | "cli" | "studio" | "api" | "sched" | "handoff" | "trigger"
        )
        .then(|| ChatKey(text.to_string()))
    }

    pub fn telegram(chat_id: i64) -> ChatKey {
        ChatKey(format!("tg:{chat_id}"))
    }

    /// A Telegram chat, or one forum topic of it (`tg:<chat_id>/<thread_id>`): each topic of a
    /// forum group is its own conversation.
    pub fn telegram_topic(chat_id: i64, thread_id: Option<i32>) -> ChatKey {
        match thread_id {
            Some(thread) => ChatKey(format!("tg:{chat_id}/{thread}")),
            None => ChatKey::telegram(chat_id),
        }
    }

    /// A WhatsApp conversation with the person whose WhatsApp id (their number, digits only) is
    /// `number`.
    pub fn whatsapp(number: &str) -> ChatKey {
        ChatKey(format!("wa:{number}"))
    }

    /// A Signal conversation with `number` (or a group id).
    pub fn signal(number: &str) -> ChatKey {
        ChatKey(format!("sg:{number}"))
    }

    /// A conversation on a seam channel by its short name (`wa`, `sg`); `None` for another name.
    pub fn seam(channel: &str, peer: &str) -> Option<ChatKey> {
        matches!(channel, "wa" | "sg").then(|| ChatKey(format!("{channel}:{peer}")))
    }

    pub fn cli(name: &str) -> ChatKey {
        ChatKey(format!("cli:{name}"))
    }

    pub fn studio(id: &str) -> ChatKey {
        ChatKey(format!("studio:{id}"))
    }

    pub fn api(user: &str) -> ChatKey {
        ChatKey(format!("api:{user}"))
    }

    pub fn schedule(job_id: i64) -> ChatKey {
        ChatKey(format!("sched:{job_id}"))
    }

    pub fn handoff(contract_id: &str) -> ChatKey {
        ChatKey(format!("handoff:{contract_id}"))
    }

    /// The session of webhook trigger `name`.
    pub fn trigger(name: &str) -> ChatKey {
        ChatKey(format!("trigger:{name}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn kind(&self) -> ChatKind {
        match self.0.split_once(':').map(|(prefix, _)| prefix) {
            Some("tg") => ChatKind::Telegram,
            Some("wa") => ChatKind::WhatsApp,
            Some("sg") => ChatKind::Signal,
            Some("sched") => ChatKind::Schedule,
            Some("handoff") => ChatKind::Handoff,
            Some("trigger") => ChatKind::Trigger,
            _ => ChatKind::Local,
        }
    }

    /// The part after the prefix.
    pub fn id(&self) -> &str {
        self.0.split_once(':').map(|(_, id)| id).unwrap_or("")
    }

    /// The contract of a `handoff:` key: `handoff:h-1234` (the delegate's conversation) and
    /// `handoff:h-1234.review` (the validator's) both belong to `h-1234`.
    pub fn handoff_contract(&self) -> Option<&str> {
        (self.kind() == ChatKind::Handoff).then(|| {
            let id = self.id();
            id.strip_suffix(".review").unwrap_or(id)
        })
    }

    /// The Telegram chat id of a `tg:` key (of the whole chat, for a topic's key too).
    pub fn telegram_chat_id(&self) -> Option<i64> {
        (self.kind() == ChatKind::Telegram)
            .then(|| {
                let id = self.id();
                id.split_once('/').map_or(id, |(chat, _)| chat).parse().ok()
            })
            .flatten()
    }

    /// The forum topic (`message_thread_id`) of a `tg:<chat_id>/<thread_id>` key.
    pub fn telegram_thread_id(&self) -> Option<i32> {
        (self.kind() == ChatKind::Telegram)
            .then(|| self.id().split_once('/')?.1.parse().ok())
            .flatten()
    }
}

impl fmt::Display for ChatKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who said something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// Channel-specific id: a Telegram user id, `operator`, `scheduler`, an agent name.
    pub id: String,
    /// A display name for prompts and transcripts.
    pub name: String,
}

impl Sender {
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Sender {
        Sender {
            id: id.into(),
            name: name.into(),
        }
    }
}

/// A file that came with a message, already stored in the agent's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub kind: AttachmentKind,
    /// Path relative to the agent's workspace.
    pub path: PathBuf,
    pub mime: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentKind {
    Image,
    Audio,
    /// A voice note recorded in the chat (Telegram `voice`): what the user said, to be transcribed.
    Voice,
    Document,
}

impl AttachmentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AttachmentKind::Image => "image",
            AttachmentKind::Audio => "audio",
            AttachmentKind::Voice => "voice",
            AttachmentKind::Document => "document",
        }
    }
}

/// Where an inbound message came from, so that its durable record can be marked processed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundSource {
    /// A stored Telegram update (`inbound_updates.id`).
    Telegram { inbound_id: i64 },
    /// A stored message of a seam channel (`channel_inbound.id`); its session event carries
    /// `-inbound_id`, so that it never collides with a Telegram update's id.
    Channel { inbound_id: i64 },
    /// Terminal, Studio or the gateway: not stored before it reaches the session.
    Local,
    /// A scheduled job's run (`job_runs.id`).
    Schedule { job_id: i64, job_run_id: i64 },
    /// A handoff contract's subtask (or a validator's review).
    Handoff { contract_id: String },
    /// A webhook trigger's stored delivery (`trigger_deliveries.id`).
    Trigger { delivery: i64 },
}

/// A message for an agent, from any channel.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub agent: String,
    pub chat: ChatKey,
    pub sender: Sender,
    pub text: String,
    pub attachments: Vec<Attachment>,
    pub source: InboundSource,
    pub received_ms: i64,
    /// For stateless callers (the OpenAI-compatible gateway): the conversation so far, used instead
    /// of the session's stored transcript. Each entry is (role, text) with role `user`/`assistant`/`system`.
    pub context: Option<Vec<(String, String)>>,
    /// A caller's request id, echoed on the answer's `Outbound` (the gateway matches replies with it).
    pub correlation: Option<String>,
}

/// Commands a channel parsed from user input (`/stop`, `/new`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionCommand {
    /// Cancel the active run.
    Stop,
    /// Start a fresh session (the old one is archived with a recap).
    New,
}

/// Something to show in a chat.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    pub agent: String,
    pub chat: ChatKey,
    /// The run this belongs to (streamed parts of one run edit one message).
    pub run_id: Option<i64>,
    /// The `correlation` of the inbound message this answers.
    pub correlation: Option<String>,
    pub event: OutEvent,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OutEvent {
    /// The agent is working (channels show a typing indicator).
    Working,
    /// The answer so far (the whole text, not a delta), while the model streams.
    Partial { text: String },
    /// The final answer of a run (or why there is none). `outbox_id` is its durable outbox row when
    /// the channel must confirm delivery (Telegram); the channel marks it delivered after sending.
    Final {
        text: String,
        outbox_id: Option<i64>,
    },
    /// A notice that is not the model's answer: errors, budget stops, interruptions.
    Notice { text: String },
    /// A tool started or finished (Studio shows tool cards; Telegram ignores it).
    Tool { name: String, status: String },
    /// Nothing will be said for these stored updates (filtered, duplicate): mark them processed.
    Silent { inbound_ids: Vec<i64> },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forum_topic_is_its_own_conversation_of_its_chat() {
        let topic = ChatKey::telegram_topic(-100_123, Some(7));
        assert_eq!(topic.as_str(), "tg:-100123/7");
        assert_eq!(topic.kind(), ChatKind::Telegram);
        assert_eq!(topic.telegram_chat_id(), Some(-100_123));
        assert_eq!(topic.telegram_thread_id(), Some(7));
        assert_ne!(topic, ChatKey::telegram_topic(-100_123, Some(8)));
        assert_eq!(ChatKey::parse("tg:-100123/7"), Some(topic));

        let whole = ChatKey::telegram_topic(42, None);
        assert_eq!(whole, ChatKey::telegram(42));
        assert_eq!(whole.telegram_chat_id(), Some(42));
        assert_eq!(whole.telegram_thread_id(), None);
        assert_eq!(ChatKey::cli("x").telegram_thread_id(), None);
        assert_eq!(
            ChatKey::parse("tg:42/x").and_then(|k| k.telegram_thread_id()),
            None
        );
    }
}

/// Which parts of the tree run. `serve` runs everything; `chat` and `eval` run the agents without
/// Studio, bots or the scheduler, so that a terminal session beside a running daemon never polls a
/// bot token twice or fires a job twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartOptions {
    pub studio: bool,
    pub channels: bool,
    pub scheduler: bool,
}

impl StartOptions {
    pub fn serve() -> Self {
        Self {
            studio: true,
            channels: true,
            scheduler: true,
        }
    }

    pub fn local_only() -> Self {
        Self {
            studio: false,
            channels: false,
            scheduler: false,
        }
    }
}

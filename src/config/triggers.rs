//! `[[triggers]]`: webhooks that wake an agent (issue #32). Each entry is served at
//! `POST /hooks/trigger/<name>` on Studio's port, authenticated by its own secret.
//!
//! ```toml
//! [[triggers]]
//! name = "doorbell"                 # POST /hooks/trigger/doorbell
//! agent = "assistant"
//! secret_env = "DOORBELL_SECRET"    # default TRIGGER_DOORBELL_SECRET; environment or Keys & tokens
//! prompt = "The doorbell camera reported: {{body}}. Tell me only if it is a person."
//! deliver_to = "owner"              # "owner", a chat ("tg:<chat id>", "wa:<number>",
//!                                   # "sg:<number, uuid or group id>") or "none"
//! max_body = "64KiB"
//! per_minute = 30                   # deliveries accepted per minute; more are answered 429
//! ```
//!
//! Invariants: a trigger's name is a URL path segment (`a-z`, `0-9`, `-`, `_`) and unique; its
//! agent exists; its secret is a variable of the secrets the config names (`secret_uses`), so it
//! is read, registered for redaction and shown on Keys & tokens like every other secret; a chat
//! destination is one of the agent's own channels (`tg:` needs its `[telegram]`, `wa:` its
//! `[whatsapp]`, `sg:` its `[signal]`), written as that channel keys its chats. A change
//! of `[[triggers]]` (or of a trigger's secret) applies at the next restart: the reload report
//! names `triggers`.

use serde::{Deserialize, Serialize};

use super::{AgentSpec, Bytes, ConfigError};

/// The most a trigger's `max_body` may be: a webhook is an event, not an upload.
pub const MAX_BODY_CEILING: Bytes = Bytes::mib(16);
/// Where `{{body}}` is written in a prompt.
pub const BODY_PLACEHOLDER: &str = "{{body}}";

/// One `[[triggers]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerConfig {
    /// The path segment: `POST /hooks/trigger/<name>`.
    pub name: String,
    /// The agent that runs on each delivery.
    pub agent: String,
    /// The variable (environment or the secrets store) holding the trigger's secret; empty:
    /// `TRIGGER_<NAME>_SECRET`.
    #[serde(default)]
    pub secret_env: String,
    /// What the agent is told; `{{body}}` is replaced by the delivery's body, labelled untrusted
    /// (without it, the body follows the prompt).
    pub prompt: String,
    /// `owner`, a chat key (`tg:<chat id>`, and other channels' `<kind>:<id>`), or `none`.
    #[serde(default = "default_deliver_to")]
    pub deliver_to: String,
    /// Bodies larger than this are refused (413).
    #[serde(default = "default_max_body")]
    pub max_body: Bytes,
    /// Deliveries accepted per minute (a sliding window); more are refused (429).
    #[serde(default = "default_per_minute")]
    pub per_minute: u32,
}

fn default_deliver_to() -> String {
    "owner".into()
}

fn default_max_body() -> Bytes {
    Bytes(64 * 1024)
}

fn default_per_minute() -> u32 {
    30
}

/// Where a trigger's answers go, read from `deliver_to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliverTo {
    /// The agent's claimed owner (their private chat on the channel they claimed), else its
    /// first approver (Telegram's, then WhatsApp's, then Signal's).
    Owner,
    /// A chat key as written (`tg:123`, `wa:…`, `sg:…`): `<kind>:<id>`.
    Chat(String),
    /// Nowhere: the answer is only recorded (Studio shows it).
    Nowhere,
}

impl DeliverTo {
    /// Reads `owner`, `none` or a chat of a person's channel: `tg:<chat id>` (a number),
    /// `wa:<number>` (its digits; `+`, spaces and dashes are dropped, so `wa:+49 151 …` reads as
    /// WhatsApp writes it) or `sg:<number, uuid or group id>` (a number in international form, a
    /// Signal uuid, or a group id as signal-cli writes it).
    pub fn parse(text: &str) -> Result<DeliverTo, String> {
        let text = text.trim();
        match text {
            "owner" => return Ok(DeliverTo::Owner),
            "none" => return Ok(DeliverTo::Nowhere),
            _ => {}
        }
        let shown: String = text.chars().take(64).collect();
        let wrong = || {
            format!(
                "`{shown}` is not a destination: write \"owner\", \"none\" or a chat such as \"tg:123456789\", \"wa:4915112345678\" or \"sg:+4915112345678\""
            )
        };
        let (kind, id) = text.split_once(':').ok_or_else(wrong)?;
        let id = id.trim();
        match kind {
            "tg" => match id.parse::<i64>() {
                Ok(chat) => Ok(DeliverTo::Chat(format!("tg:{chat}"))),
                Err(_) => Err(format!(
                    "`{shown}`: a Telegram chat is `tg:` and the chat's number, such as \"tg:123456789\""
                )),
            },
            "wa" => {
                let number = super::whatsapp::normalize_number(id);
                let only_number_characters = id
                    .chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, '+' | ' ' | '-'));
                if !only_number_characters || !(7..=15).contains(&number.len()) {
                    return Err(format!(
                        "`{shown}`: a WhatsApp chat is `wa:` and the person's number with its country code, such as \"wa:4915112345678\""
                    ));
                }
                Ok(DeliverTo::Chat(format!("wa:{number}")))
            }
            "sg" => {
                if !super::signal::is_phone_number(id)
                    && !super::signal::is_uuid(id)
                    && !is_signal_group_id(id)
                {
                    return Err(format!(
                        "`{shown}`: a Signal chat is `sg:` and a number in international form (\"sg:+4915112345678\"), a Signal uuid, or a group id as signal-cli writes it"
                    ));
                }
                Ok(DeliverTo::Chat(format!("sg:{id}")))
            }
            _ => Err(wrong()),
        }
    }
}

/// A Signal group id as signal-cli writes it: base64 (of 32 bytes: 44 characters; older
/// groups' ids are shorter), so at least 16 characters of the base64 alphabet.
fn is_signal_group_id(text: &str) -> bool {
    text.len() >= 16
        && text.len() <= 128
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'='))
}

/// The channel a chat destination needs the agent to have (`[telegram]`, `[whatsapp]`,
/// `[signal]` in its file), or why the agent lacks it.
fn check_channel(chat: &str, agent: &AgentSpec) -> Result<(), String> {
    let (has, table, channel) = match chat.split_once(':').map(|(kind, _)| kind) {
        Some("tg") => (agent.telegram.is_some(), "[telegram]", "Telegram"),
        Some("wa") => (agent.whatsapp.is_some(), "[whatsapp]", "WhatsApp"),
        Some("sg") => (agent.signal.is_some(), "[signal]", "Signal"),
        _ => return Ok(()),
    };
    if has {
        return Ok(());
    }
    Err(format!(
        "`{chat}` is a {channel} chat, but agent {} has no {channel} account: add {table} to its file, or deliver to \"owner\" or \"none\"",
        agent.name
    ))
}

impl TriggerConfig {
    /// The variable holding the secret: `secret_env`, else `TRIGGER_<NAME>_SECRET`.
    pub fn secret_var(&self) -> String {
        let set = self.secret_env.trim();
        if !set.is_empty() {
            return set.to_string();
        }
        let name: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        format!("TRIGGER_{name}_SECRET")
    }

    /// Where the answers go (validated at load; an unreadable value counts as `none`).
    pub fn destination(&self) -> DeliverTo {
        DeliverTo::parse(&self.deliver_to).unwrap_or(DeliverTo::Nowhere)
    }
}

/// Checks every trigger: names, agents, prompts, destinations and limits.
pub(super) fn validate(
    triggers: &[TriggerConfig],
    agents: &[AgentSpec],
    origin: &str,
) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for (index, trigger) in triggers.iter().enumerate() {
        let key = |field: &str| format!("[[triggers]] #{} ({}).{field}", index + 1, trigger.name);
        let name = trigger.name.trim();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            return Err(ConfigError::key(
                origin,
                key("name"),
                "must be 1 to 64 of a-z, 0-9, - and _ (it is the address /hooks/trigger/<name>)",
            ));
        }
        if !seen.insert(name.to_string()) {
            return Err(ConfigError::key(
                origin,
                key("name"),
                format!("another trigger is already called `{name}`; names must differ"),
            ));
        }
        if !agents.iter().any(|agent| agent.name == trigger.agent) {
            return Err(ConfigError::key(
                origin,
                key("agent"),
                format!(
                    "there is no agent `{}` (agents: {})",
                    trigger.agent,
                    agents
                        .iter()
                        .map(|agent| agent.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if trigger.prompt.trim().is_empty() {
            return Err(ConfigError::key(
                origin,
                key("prompt"),
                "must say what the agent should do with the event (write {{body}} where the event goes)",
            ));
        }
        let destination = DeliverTo::parse(&trigger.deliver_to)
            .map_err(|problem| ConfigError::key(origin, key("deliver_to"), problem))?;
        if let (DeliverTo::Chat(chat), Some(agent)) = (
            &destination,
            agents.iter().find(|agent| agent.name == trigger.agent),
        ) {
            check_channel(chat, agent)
                .map_err(|problem| ConfigError::key(origin, key("deliver_to"), problem))?;
        }
        if trigger.max_body.0 == 0 || trigger.max_body > MAX_BODY_CEILING {
            return Err(ConfigError::key(
                origin,
                key("max_body"),
                format!("must be between 1 byte and {MAX_BODY_CEILING}"),
            ));
        }
        if trigger.per_minute == 0 {
            return Err(ConfigError::key(
                origin,
                key("per_minute"),
                "must be at least 1 (deliveries accepted per minute)",
            ));
        }
        let var = trigger.secret_var();
        if !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ConfigError::key(
                origin,
                key("secret_env"),
                format!("`{var}` is not a variable name (letters, digits and _)"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_read_each_channel_form_and_name_a_wrong_one() {
        assert_eq!(DeliverTo::parse("owner"), Ok(DeliverTo::Owner));
        assert_eq!(DeliverTo::parse("none"), Ok(DeliverTo::Nowhere));
        assert_eq!(
            DeliverTo::parse("tg:-100123"),
            Ok(DeliverTo::Chat("tg:-100123".into()))
        );
        assert_eq!(
            DeliverTo::parse("wa:+49 170 1234567"),
            Ok(DeliverTo::Chat("wa:491701234567".into()))
        );
        assert_eq!(
            DeliverTo::parse("sg:+491701234567"),
            Ok(DeliverTo::Chat("sg:+491701234567".into()))
        );
        assert_eq!(
            DeliverTo::parse("sg:Z3JvdXAtaWQtb2YtdGhlLWhvdXNlaG9sZA=="),
            Ok(DeliverTo::Chat(
                "sg:Z3JvdXAtaWQtb2YtdGhlLWhvdXNlaG9sZA==".into()
            ))
        );
        assert!(DeliverTo::parse("tg:alice").unwrap_err().contains("number"));
        assert!(
            DeliverTo::parse("wa:491701234567@s.whatsapp.net")
                .unwrap_err()
                .contains("WhatsApp chat is `wa:`")
        );
        assert!(DeliverTo::parse("wa:12").is_err(), "too short a number");
        assert!(
            DeliverTo::parse("sg:alice")
                .unwrap_err()
                .contains("Signal chat is `sg:`")
        );
        assert!(DeliverTo::parse("me").unwrap_err().contains("owner"));
        assert!(DeliverTo::parse("TG:1").is_err());
        assert!(
            DeliverTo::parse("mx:1").unwrap_err().contains("wa:"),
            "an unknown channel"
        );
    }
}

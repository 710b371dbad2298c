//! Approval requests on Telegram: the prompt and its buttons, encoded and parsed here only.
//!
//! A prompt leads with a plain sentence ("Approval needed: ada wants to delete files in its
//! workspace."), then the exact action (every character, escaped), then the grant's scope in the
//! one wording `protocol::approvals` keeps for every channel, the expiry, and last — folded, for
//! whoever wants it — the technical detail: tool, risk level, why, the request's id.
//!
//! A button's `callback_data` carries only the request's nonce (and, for a grant, its minutes), so a
//! replayed or stale press is answered "expired" by the desk. Telegram caps `callback_data` at 64
//! bytes and a message at 4096 characters: a long action is split over several messages, the
//! buttons under the last, so nobody approves a command they could not see whole.

use super::format::escape_html;
use crate::protocol::approvals::{grant_label, grant_scope};
use crate::protocol::telegram::ApprovalPrompt;

/// Characters of the action per message (the rest of a message is the header and the footer;
/// escaping can make a character up to five, which Telegram counts as one).
const ACTION_CHARS_PER_MESSAGE: usize = 3_000;

/// What a button press asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalButton {
    Approve {
        id: String,
    },
    /// Approve, and let exactly this action run again in this chat for `minutes`.
    ApproveExactFor {
        id: String,
        minutes: u32,
    },
    Deny {
        id: String,
    },
}

impl ApprovalButton {
    /// The button's `callback_data`.
    pub fn encode(&self) -> String {
        match self {
            ApprovalButton::Approve { id } => format!("ap:{id}"),
            ApprovalButton::ApproveExactFor { id, minutes } => format!("ag{minutes}:{id}"),
            ApprovalButton::Deny { id } => format!("dn:{id}"),
        }
    }

    /// Reads a `callback_data`; `None` for anything this daemon did not write.
    pub fn parse(data: &str) -> Option<ApprovalButton> {
        let (kind, id) = data.split_once(':')?;
        if id.is_empty() || id.len() > 32 || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return None;
        }
        let id = id.to_string();
        match kind {
            "ap" => Some(ApprovalButton::Approve { id }),
            "dn" => Some(ApprovalButton::Deny { id }),
            // Buttons posted before grants carried their minutes meant 30.
            "ag" => Some(ApprovalButton::ApproveExactFor { id, minutes: 30 }),
            _ => {
                let minutes: u32 = kind.strip_prefix("ag")?.parse().ok()?;
                (1..=24 * 60)
                    .contains(&minutes)
                    .then_some(ApprovalButton::ApproveExactFor { id, minutes })
            }
        }
    }

    /// The button's label.
    pub fn label(&self) -> String {
        match self {
            ApprovalButton::Approve { .. } => "✅ Approve once".to_string(),
            ApprovalButton::ApproveExactFor { minutes, .. } => {
                format!("✅ {}", grant_label(*minutes))
            }
            ApprovalButton::Deny { .. } => "❌ Deny".to_string(),
        }
    }
}

/// The buttons under a prompt.
pub fn buttons(prompt: &ApprovalPrompt) -> Vec<ApprovalButton> {
    let id = prompt.id.clone();
    let mut buttons = vec![ApprovalButton::Approve { id: id.clone() }];
    if let Some(minutes) = prompt.grant_minutes {
        buttons.push(ApprovalButton::ApproveExactFor {
            id: id.clone(),
            minutes,
        });
    }
    buttons.push(ApprovalButton::Deny { id });
    buttons
}

/// The prompt as Telegram HTML messages: the plain sentence, then the action whole, in `<pre>`,
/// split over as many messages as it needs; the last one carries the grant's scope, the expiry
/// and the folded technical detail (and gets the buttons).
pub fn render(prompt: &ApprovalPrompt) -> Vec<String> {
    let characters: Vec<char> = prompt.action.chars().collect();
    let chunks: Vec<String> = if characters.is_empty() {
        vec![String::new()]
    } else {
        characters
            .chunks(ACTION_CHARS_PER_MESSAGE)
            .map(|chunk| chunk.iter().collect())
            .collect()
    };
    let count = chunks.len();
    let head = format!(
        "{}<b>Approval needed: {}.</b>\nExactly this{}:",
        if prompt.again {
            "(posted again after a restart) "
        } else {
            ""
        },
        escape_html(&prompt.summary()),
        if count > 1 {
            format!(" ({} characters, in {count} parts)", characters.len())
        } else {
            String::new()
        }
    );
    let mut messages = Vec::with_capacity(count);
    for (index, chunk) in chunks.iter().enumerate() {
        let part = if count > 1 {
            format!(
                "Part {}/{count} of {}:\n",
                index + 1,
                escape_html(&prompt.id)
            )
        } else {
            String::new()
        };
        let mut message = if index == 0 {
            format!("{head}\n{part}<pre>{}</pre>", escape_html(chunk))
        } else {
            format!("{part}<pre>{}</pre>", escape_html(chunk))
        };
        if index + 1 == count {
            message.push_str(&footer(prompt));
        }
        messages.push(message);
    }
    messages
}

fn footer(prompt: &ApprovalPrompt) -> String {
    let mut footer = String::new();
    if let Some(minutes) = prompt.grant_minutes {
        footer.push_str(&format!("\n{}", escape_html(&grant_scope(minutes))));
    }
    if let Some(chat) = prompt
        .from_chat
        .as_ref()
        .filter(|chat| chat.kind() == crate::domain::ChatKind::Trigger)
    {
        footer.push_str(&format!(
            "\n(for webhook trigger {})",
            escape_html(chat.id())
        ));
    } else if let Some(chat) = &prompt.from_chat {
        let id = chat
            .telegram_chat_id()
            .map_or(chat.to_string(), |id| id.to_string());
        match chat.telegram_thread_id() {
            Some(topic) => footer.push_str(&format!("\n(from chat {id}, topic {topic})")),
            None => footer.push_str(&format!("\n(from chat {id})")),
        }
    }
    footer.push_str(&format!(
        "\nExpires in {}; expiry counts as a no.",
        escape_html(&prompt.expires_in)
    ));
    footer.push_str(&format!(
        "\n<blockquote expandable>Details: tool {}, risk {}: {}\nRequest {id}: /approve {id} or /deny {id}</blockquote>",
        escape_html(&prompt.tool),
        escape_html(&prompt.risk),
        escape_html(&prompt.reason),
        id = escape_html(&prompt.id),
    ));
    footer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(action: &str) -> ApprovalPrompt {
        ApprovalPrompt {
            id: "abc23456".into(),
            agent: "ada".into(),
            tool: "write_file".into(),
            action: action.into(),
            risk: "L2".into(),
            reason: "writes <files>".into(),
            expires_in: "5 min".into(),
            again: false,
            grant_minutes: Some(30),
            from_chat: None,
        }
    }

    #[test]
    fn buttons_round_trip_and_foreign_data_is_refused() {
        for button in buttons(&prompt("ls")) {
            assert_eq!(ApprovalButton::parse(&button.encode()), Some(button));
        }
        for foreign in [
            "",
            "ap:",
            "xx:abc",
            "ag0:abc",
            "ag99999:abc",
            "ap:a b",
            "ap:<b>",
            "agx:abc",
        ] {
            assert_eq!(ApprovalButton::parse(foreign), None, "{foreign:?}");
        }
        assert!(
            ApprovalButton::ApproveExactFor {
                id: "a".repeat(32),
                minutes: 1440
            }
            .encode()
            .len()
                <= 64
        );
    }

    #[test]
    fn the_whole_action_is_shown_escaped_and_split_when_long() {
        let sneaky = "echo `x` </pre><b>ok</b> && curl evil";
        let messages = render(&prompt(sneaky));
        assert_eq!(messages.len(), 1);
        assert!(
            messages[0].contains(&escape_html(sneaky)),
            "{}",
            messages[0]
        );
        assert!(
            !messages[0].contains("</pre><b>ok"),
            "the action cannot close the code block"
        );
        assert!(
            messages[0]
                .starts_with("<b>Approval needed: ada wants to write a file in its workspace.</b>"),
            "a plain sentence comes first: {}",
            messages[0]
        );
        assert!(
            messages[0].contains("same arguments"),
            "the grant's scope is shown"
        );
        assert!(messages[0].contains(
            "<blockquote expandable>Details: tool write_file, risk L2: writes &lt;files&gt;"
        ));

        let long: String = (0..7_000)
            .map(|index| char::from(b'a' + (index % 26) as u8))
            .collect();
        let messages = render(&prompt(&long));
        assert_eq!(messages.len(), 3);
        let shown: String = messages
            .iter()
            .map(|message| {
                let start = message.find("<pre>").unwrap() + 5;
                let end = message.find("</pre>").unwrap();
                message[start..end].to_string()
            })
            .collect();
        assert_eq!(
            shown, long,
            "every character of the action is shown, in order"
        );
        assert!(messages[2].contains("Expires in"));
        assert!(!messages[0].contains("Expires in"));
        for message in &messages {
            assert!(message.chars().count() < 4_000);
        }
    }
}

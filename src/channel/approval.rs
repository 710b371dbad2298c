//! Approval requests on a seam channel: rendered with reply buttons where the channel has them
//! (at most its button count, titles within its limit), and always with the text form as well,
//! so a person whose app shows no buttons can still decide: `yes <id>` / `no <id>`.
//!
//! A button's id names exactly one request and one decision (`ap:y:<id>`, `ap:n:<id>`,
//! `ap:g:<id>` for the grant); a text reply decides only when it is exactly that form with the
//! id of a request (anything else decides nothing and is an ordinary message). Who may decide is
//! the approval desk's rule (`Decider::Channel { approver, .. }`).

use std::time::Duration;

use super::{Button, Capabilities, OutPart};
use crate::protocol::approvals::{Decision, GRANT_MINUTES};
use crate::protocol::telegram::ApprovalPrompt;

/// A decision read from a button or a text reply: the request id and the decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub id: String,
    pub decision: Decision,
}

/// The prompt's text: the plain sentence, the action, the expiry, how to decide by text.
pub fn prompt_text(prompt: &ApprovalPrompt, with_buttons: bool) -> String {
    let again = if prompt.again {
        "(asked again after a restart) "
    } else {
        ""
    };
    let from = prompt
        .from_chat
        .as_ref()
        .map(|chat| match chat.kind() {
            crate::domain::ChatKind::Trigger => format!("\nFor webhook trigger {}.", chat.id()),
            _ => format!("\nAsked in {chat}."),
        })
        .unwrap_or_default();
    let how = if with_buttons {
        format!(
            "Press a button, or reply \"yes {id}\" or \"no {id}\".",
            id = prompt.id
        )
    } else {
        format!(
            "Reply \"yes {id}\" to allow it or \"no {id}\" to refuse.",
            id = prompt.id
        )
    };
    format!(
        "{again}Approval needed: {summary}.{from}\n\n{action}\n\nIt expires in {expires}. {how}\n(Details: tool {tool}, risk {risk}: {reason})",
        summary = prompt.summary(),
        action = prompt.action,
        expires = prompt.expires_in,
        tool = prompt.tool,
        risk = prompt.risk,
        reason = prompt.reason,
    )
}

/// The prompt as this channel shows it: buttons (body within `body_limit` characters) where it
/// has them, else text.
pub fn render(prompt: &ApprovalPrompt, capabilities: &Capabilities, body_limit: usize) -> OutPart {
    let Some(limits) = capabilities.buttons else {
        return OutPart::Text(prompt_text(prompt, false));
    };
    let mut buttons = vec![
        Button {
            id: format!("ap:y:{}", prompt.id),
            title: "Approve once".into(),
        },
        Button {
            id: format!("ap:n:{}", prompt.id),
            title: "Deny".into(),
        },
    ];
    if let Some(minutes) = prompt.grant_minutes {
        buttons.push(Button {
            id: format!("ap:g:{}", prompt.id),
            title: format!("Allow {minutes} min"),
        });
    }
    buttons.truncate(limits.max);
    for button in &mut buttons {
        button.title = button.title.chars().take(limits.title_chars).collect();
    }
    let mut body = prompt_text(prompt, true);
    if body.chars().count() > body_limit {
        body = body
            .chars()
            .take(body_limit.saturating_sub(1))
            .collect::<String>()
            + "…";
    }
    OutPart::Buttons { body, buttons }
}

/// The decision a pressed button's id stands for; `None` for any other id.
pub fn from_button(id: &str) -> Option<Reply> {
    let mut parts = id.splitn(3, ':');
    if parts.next()? != "ap" {
        return None;
    }
    let decision = match parts.next()? {
        "y" => Decision::Approve,
        "n" => Decision::Deny,
        "g" => Decision::ApproveFor(Duration::from_secs(u64::from(GRANT_MINUTES) * 60)),
        _ => return None,
    };
    let id = parts.next()?.trim();
    (!id.is_empty() && id.len() <= 32).then(|| Reply {
        id: id.to_ascii_lowercase(),
        decision,
    })
}

/// The text form: `yes <id>` or `no <id>` (case and surrounding space ignored); `None` for any
/// other text, which is then an ordinary message.
pub fn from_text(text: &str) -> Option<Reply> {
    let mut words = text.split_whitespace();
    let decision = match words.next()?.to_ascii_lowercase().as_str() {
        "yes" | "/approve" => Decision::Approve,
        "no" | "/deny" => Decision::Deny,
        _ => return None,
    };
    let id = words.next()?;
    if words.next().is_some()
        || id.len() < 4
        || id.len() > 32
        || !id.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return None;
    }
    Some(Reply {
        id: id.to_ascii_lowercase(),
        decision,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ButtonLimits;

    fn prompt() -> ApprovalPrompt {
        ApprovalPrompt {
            id: "7f3akxyz".into(),
            agent: "ada".into(),
            tool: "shell".into(),
            action: "rm -rf build".into(),
            risk: "L2".into(),
            reason: "deletes files".into(),
            expires_in: "5 min".into(),
            again: false,
            grant_minutes: Some(30),
            from_chat: None,
        }
    }

    #[test]
    fn buttons_fit_the_channel_and_name_exactly_one_request() {
        let capabilities = Capabilities {
            text_limit: 4096,
            buttons: Some(ButtonLimits {
                max: 3,
                title_chars: 20,
            }),
            window: None,
        };
        let OutPart::Buttons { body, buttons } = render(&prompt(), &capabilities, 1024) else {
            panic!("a channel with buttons gets buttons");
        };
        assert!(body.contains("yes 7f3akxyz"));
        assert!(buttons.len() <= 3 && buttons.iter().all(|b| b.title.chars().count() <= 20));
        for button in &buttons {
            assert_eq!(
                from_button(&button.id).map(|r| r.id),
                Some("7f3akxyz".into())
            );
        }
        assert_eq!(from_button("ap:x:7f3akxyz"), None);
        assert_eq!(from_button("other"), None);
    }

    #[test]
    fn only_the_exact_text_form_decides() {
        assert_eq!(
            from_text(" YES 7f3akxyz ").map(|r| r.decision),
            Some(Decision::Approve)
        );
        assert_eq!(
            from_text("no 7f3akxyz").map(|r| r.decision),
            Some(Decision::Deny)
        );
        assert_eq!(from_text("yes please do it"), None);
        assert_eq!(from_text("yes"), None);
        assert_eq!(from_text("sure 7f3akxyz"), None);
        let text_only = Capabilities {
            text_limit: 4096,
            buttons: None,
            window: None,
        };
        assert!(
            matches!(render(&prompt(), &text_only, 1024), OutPart::Text(text) if text.contains("no 7f3akxyz"))
        );
    }
}

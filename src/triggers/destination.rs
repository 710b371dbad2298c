//! Where a trigger's answer goes when its `deliver_to` is `"owner"`: the agent's owner on
//! whichever channel they claimed it (Telegram, WhatsApp, Signal), else its first approver.
//!
//! Invariants: only a channel the agent has in its file is considered (a claim left over from a
//! removed `[whatsapp]` table names nobody the daemon can reach); when the agent was claimed on
//! more than one channel, the earliest claim wins, so the answer's chat does not move when a
//! second channel is claimed later; the file's approvers are tried in the order Telegram,
//! WhatsApp, Signal, each channel's `approvers` (else its `allow_users`) as the approval desk
//! reads them. The chat keys are the ones each channel's sessions use (`tg:<user id>`,
//! `wa:<digits>`, `sg:<number or uuid>`), so the outbox row is sent by that channel's worker.

use rusqlite::Connection;

use crate::config::AgentSpec;
use crate::domain::ChatKey;

/// The chat of `agent`'s claimed owner, else of its first approver; `None` when it has neither.
pub fn owner_chat(conn: &Connection, agent: &AgentSpec) -> crate::store::Result<Option<ChatKey>> {
    if let Some(claimed) = claimed_owner(conn, agent)? {
        return Ok(Some(claimed));
    }
    Ok(first_approver(agent))
}

/// The earliest claim of `agent` on one of its channels.
fn claimed_owner(conn: &Connection, agent: &AgentSpec) -> crate::store::Result<Option<ChatKey>> {
    let mut claims: Vec<(i64, ChatKey)> = Vec::new();
    if agent.telegram.is_some()
        && let Some(owner) = crate::store::people::owner(conn, &agent.name)?
    {
        claims.push((owner.changed_ms, ChatKey::telegram(owner.user_id)));
    }
    for (channel, configured) in [
        ("wa", agent.whatsapp.is_some()),
        ("sg", agent.signal.is_some()),
    ] {
        if !configured {
            continue;
        }
        if let Some(owner) = crate::store::channels::owner(conn, &agent.name, channel)?
            && let Some(chat) = ChatKey::seam(channel, &owner.user)
        {
            claims.push((owner.changed_ms, chat));
        }
    }
    Ok(claims
        .into_iter()
        .min_by_key(|(changed_ms, _)| *changed_ms)
        .map(|(_, chat)| chat))
}

/// The first approver the agent's file names: Telegram's, then WhatsApp's, then Signal's.
fn first_approver(agent: &AgentSpec) -> Option<ChatKey> {
    let telegram = agent.telegram.as_ref().and_then(|telegram| {
        let approvers = if telegram.approvers.is_empty() {
            &telegram.allow_users
        } else {
            &telegram.approvers
        };
        approvers.first().copied().map(ChatKey::telegram)
    });
    let whatsapp = || {
        let whatsapp = agent.whatsapp.as_ref()?;
        ChatKey::seam("wa", whatsapp.people().1.first()?)
    };
    let signal = || {
        let signal = agent.signal.as_ref()?;
        let approvers = if signal.approvers.is_empty() {
            &signal.allow_users
        } else {
            &signal.approvers
        };
        ChatKey::seam("sg", approvers.first()?.trim())
    };
    telegram.or_else(whatsapp).or_else(signal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::channels::{ChannelPerson, ChannelPersonStatus};
    use crate::store::people::{Person, PersonStatus};

    fn agent(tables: &str) -> AgentSpec {
        toml::from_str(&format!(
            "name = \"ada\"\nprovider = \"p\"\nmodel = \"m\"\n{tables}"
        ))
        .expect("a test agent parses")
    }

    const TABLES: &str = "[telegram]\ntoken_env = \"T\"\nallow_users = [7]\n\n\
        [whatsapp]\nphone_number_id = \"1\"\naccess_token_env = \"A\"\napp_secret_env = \"B\"\n\
        verify_token_env = \"C\"\nallow_users = [\"+49 151 1\"]\n\n\
        [signal]\naccount = \"+4915100000000\"\nallow_users = [\"+4917200000001\"]\n";

    fn claim_on_whatsapp(conn: &Connection, at_ms: i64) {
        crate::store::channels::set_person(
            conn,
            &ChannelPerson {
                agent: "ada".into(),
                channel: "wa".into(),
                user: "4915100000009".into(),
                name: "Olivia".into(),
                status: ChannelPersonStatus::Owner,
                changed_ms: at_ms,
                changed_by: "claim".into(),
            },
        )
        .expect("stored");
    }

    #[test]
    fn the_earliest_claim_on_a_configured_channel_wins_else_the_first_approver() {
        let mut conn = Connection::open_in_memory().expect("an in-memory database");
        crate::store::migrate(&mut conn, std::path::Path::new(":memory:")).expect("migrated");
        let all = agent(TABLES);
        assert_eq!(
            owner_chat(&conn, &all).unwrap(),
            ChatKey::parse("tg:7"),
            "no claim: Telegram's first approver"
        );
        let whatsapp_only = agent(&TABLES[TABLES.find("[whatsapp]").unwrap()..]);
        assert_eq!(
            owner_chat(&conn, &whatsapp_only).unwrap(),
            ChatKey::parse("wa:491511")
        );
        let signal_only = agent(&TABLES[TABLES.find("[signal]").unwrap()..]);
        assert_eq!(
            owner_chat(&conn, &signal_only).unwrap(),
            ChatKey::parse("sg:+4917200000001")
        );
        assert_eq!(owner_chat(&conn, &agent("")).unwrap(), None);

        claim_on_whatsapp(&conn, 100);
        assert_eq!(
            owner_chat(&conn, &all).unwrap(),
            ChatKey::parse("wa:4915100000009"),
            "a claim beats the file's approvers"
        );
        assert_eq!(
            owner_chat(&conn, &signal_only).unwrap(),
            ChatKey::parse("sg:+4917200000001"),
            "a claim on a channel the agent does not have names nobody"
        );
        crate::store::people::set_person(
            &conn,
            &Person {
                agent: "ada".into(),
                user_id: 42,
                name: "Tom".into(),
                status: PersonStatus::Owner,
                changed_ms: 200,
                changed_by: "claim".into(),
            },
        )
        .expect("stored");
        assert_eq!(
            owner_chat(&conn, &all).unwrap(),
            ChatKey::parse("wa:4915100000009"),
            "the earlier claim stays the destination"
        );
        claim_on_whatsapp(&conn, 300);
        assert_eq!(owner_chat(&conn, &all).unwrap(), ChatKey::parse("tg:42"));
    }
}

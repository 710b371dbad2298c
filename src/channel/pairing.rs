//! Pairing on a seam channel (WhatsApp, Signal), with Telegram's guarantees: a stranger who
//! writes (in a private chat) to an account that has an owner or whose file names people gets
//! ONE reply with a code (`channel_pairings`, valid `telegram::pairing::VALIDITY_MS`); until that
//! request expires — approved or not, denied or not — they get no second reply, so no reply
//! storm. The account's approvers (the file's, or the owner) are told on the channel; one of them
//! answers `pair <code>` (or `/pair <code>`) to let the person in (`channel_people`, allowed), or
//! `deny <code>` to turn them down (not answered until the request expires). Studio People
//! decides the same requests through [`decide`].
//!
//! The codes, their alphabet, the replies' wording and the constant-time compare are Telegram's
//! (`telegram::pairing`, `people`). Every decision is stored with its audit row in one
//! transaction, then announced (`audit_appended`, `people_changed`).
//!
//! Architecture Invariant: nothing a stranger said before they were paired reaches the model
//! (their messages stay `ignored`); a pairing decides only a request of its own agent and, on
//! the channel, of that channel.

use super::screen::changed;
use crate::audit;
use crate::events::EventBus;
use crate::people::{PeopleError, StartArgument, parse_start_argument};
use crate::store::channels::{self as queries, ChannelPairing};
use crate::store::{Store, StoreError};
use crate::telegram::pairing::{VALIDITY_MS, display, new_code};

/// A new pairing request and the outbox rows that tell of it (the person's code, each
/// approver's note), queued in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requested {
    pub pairing: ChannelPairing,
    pub outbox: Vec<i64>,
}

/// Who asks, on which account, and who is told.
pub struct Asking<'a> {
    pub agent: &'a str,
    /// `wa`, `sg`.
    pub channel: &'a str,
    /// The channel's name for people (WhatsApp, Signal).
    pub channel_name: &'a str,
    pub user: &'a str,
    pub name: &'a str,
    /// The file's approvers (the owner is added from the store).
    pub approvers: &'a [String],
}

/// Records a pairing request unless one of the person's still stands. `Some` when it is new:
/// then — in the same transaction — the person's one reply with the code and a note to each
/// approver are queued in the outbox (so a crash can neither lose them nor send them twice, and
/// WhatsApp holds a note to an approver outside its 24-hour window instead of dropping it).
pub async fn request(
    store: &Store,
    events: &EventBus,
    asking: &Asking<'_>,
) -> Result<Option<Requested>, StoreError> {
    let now = crate::clock::now_ms();
    let pairing = ChannelPairing {
        code: new_code(),
        agent: asking.agent.to_string(),
        channel: asking.channel.to_string(),
        user: asking.user.to_string(),
        name: asking.name.to_string(),
        created_ms: now,
        expires_ms: now + VALIDITY_MS,
        approved_ms: None,
        denied_ms: None,
    };
    let (channel_name, mut approvers) =
        (asking.channel_name.to_string(), asking.approvers.to_vec());
    let created = store
        .write(move |conn| {
            let (agent, channel, user) = (&pairing.agent, &pairing.channel, &pairing.user);
            if queries::live_pairing(conn, agent, channel, user, now)?.is_some() {
                return Ok(None);
            }
            queries::create_pairing(conn, &pairing)?;
            let reply = crate::people::pairing_request_reply(&pairing.name, &pairing.code, "pair");
            let mut outbox = vec![crate::store::outbox::enqueue_reply(
                conn,
                agent,
                &format!("{channel}:{user}"),
                None,
                &reply,
                &[],
                now,
            )?];
            approvers.extend(queries::owner(conn, agent, channel)?.map(|owner| owner.user));
            approvers.sort();
            approvers.dedup();
            let notice = approvers_notice(&pairing, &channel_name);
            for approver in approvers.iter().filter(|approver| *approver != user) {
                outbox.push(crate::store::outbox::enqueue_reply(
                    conn,
                    agent,
                    &format!("{channel}:{approver}"),
                    None,
                    &notice,
                    &[],
                    now,
                )?);
            }
            Ok(Some(Requested { pairing, outbox }))
        })
        .await?;
    if let Some(requested) = &created {
        changed(
            events,
            asking.agent,
            "pairing_requested",
            &format!(
                "{} ({}:{}) asked to talk to {}",
                shown_name(&requested.pairing),
                asking.channel,
                asking.user,
                asking.agent
            ),
        );
    }
    Ok(created)
}

/// Approves (`approve`) or denies the pending request with `code`, only of `agent` and
/// `channel` when given; stored with its audit row in one transaction, then announced.
pub async fn decide(
    store: &Store,
    events: &EventBus,
    code: &str,
    agent: Option<&str>,
    channel: Option<&str>,
    approve: bool,
    actor: &str,
) -> Result<ChannelPairing, PeopleError> {
    let now = crate::clock::now_ms();
    let (action, change) = match approve {
        true => ("people.paired", "paired"),
        false => ("people.pairing_denied", "pairing_denied"),
    };
    let (code, agent, channel, by) = (
        code.to_string(),
        agent.map(str::to_string),
        channel.map(str::to_string),
        actor.to_string(),
    );
    let pairing = store
        .write(move |conn| {
            let Some(pairing) = queries::pending_pairing(
                conn,
                &code,
                agent.as_deref(),
                channel.as_deref(),
                now,
            )?
            else {
                return Ok(None);
            };
            queries::decide_pairing(conn, &pairing, approve, &by, now)?;
            audit::append(
                conn,
                &by,
                action,
                &subject(&pairing),
                &serde_json::json!({"agent": pairing.agent, "channel": pairing.channel, "name": pairing.name}),
            )?;
            Ok(Some(pairing))
        })
        .await?
        .ok_or_else(|| {
            PeopleError::NotFound(
                "no pending pairing request has that code (it may have been decided or expired)"
                    .into(),
            )
        })?;
    audit::announce(events, action, &subject(&pairing));
    let detail = match approve {
        true => format!(
            "{} ({}) was paired",
            shown_name(&pairing),
            subject(&pairing)
        ),
        false => format!(
            "the pairing request of {} ({}) was denied",
            shown_name(&pairing),
            subject(&pairing)
        ),
    };
    changed(events, &pairing.agent, change, &detail);
    Ok(pairing)
}

/// A pairing answer sent on the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `pair <code>` or `/pair <code>`.
    Pair(String),
    /// `deny <code>`, or `/deny <code>` (`slash`: which is also the approvals' text form, so it
    /// decides a pairing only when a request has that code).
    Deny { code: String, slash: bool },
}

/// Reads `pair <code>` / `/pair <code>` / `deny <code>` / `/deny <code>` (the code as shown,
/// `ABCD-EFGH`, or without its dash, in any case); anything else is not a pairing answer.
pub fn parse_command(text: &str) -> Option<Command> {
    let mut words = text.split_whitespace();
    let verb = words.next()?.to_ascii_lowercase();
    let rest: String = words.collect::<Vec<_>>().join("");
    let StartArgument::Code(code) = parse_start_argument(&rest) else {
        return None;
    };
    match verb.as_str() {
        "pair" | "/pair" => Some(Command::Pair(code)),
        "deny" => Some(Command::Deny { code, slash: false }),
        "/deny" => Some(Command::Deny { code, slash: true }),
        _ => None,
    }
}

/// What the approvers are told about a new request on `channel_name` (WhatsApp, Signal).
pub fn approvers_notice(pairing: &ChannelPairing, channel_name: &str) -> String {
    let code = display(&pairing.code);
    format!(
        "Someone new, {} ({}), wrote to me on {channel_name}. To let them talk to me, reply \"pair {code}\"; to turn them down, reply \"deny {code}\". Until then they get no answer from me. The code is valid for an hour.",
        shown_name(pairing),
        pairing.user
    )
}

/// The answer to the approver who denied a request.
pub fn denied_confirmation(pairing: &ChannelPairing) -> String {
    format!(
        "Denied {} ({}). I won't answer them until their request expires.",
        shown_name(pairing),
        pairing.user
    )
}

/// The person's name, or "someone" when the channel gave none.
pub fn shown_name(pairing: &ChannelPairing) -> &str {
    match pairing.name.trim() {
        "" => "someone",
        name => name,
    }
}

/// `<channel>:<user>`: the audit rows' subject.
fn subject(pairing: &ChannelPairing) -> String {
    format!("{}:{}", pairing.channel, pairing.user)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairing_answers_are_read_only_with_a_code() {
        assert_eq!(
            parse_command("pair abcd-efgh"),
            Some(Command::Pair("ABCDEFGH".into()))
        );
        assert_eq!(
            parse_command("/PAIR ABCD EFGH"),
            Some(Command::Pair("ABCDEFGH".into()))
        );
        assert_eq!(
            parse_command("deny ABCDEFGH"),
            Some(Command::Deny {
                code: "ABCDEFGH".into(),
                slash: false
            })
        );
        assert_eq!(
            parse_command("/deny ABCDEFGH"),
            Some(Command::Deny {
                code: "ABCDEFGH".into(),
                slash: true
            })
        );
        assert_eq!(parse_command("pair programming is fun"), None);
        assert_eq!(parse_command("pair"), None);
        assert_eq!(parse_command("yes ABCDEFGH"), None);
        assert_eq!(parse_command("ABCDEFGH"), None);
    }
}

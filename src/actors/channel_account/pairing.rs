//! The account's half of pairing (`crate::channel::pairing` says the rules): a stranger's one
//! reply with a code and the note to the approvers, and an approver's `pair <code>` /
//! `deny <code>` on the channel.
//!
//! In a group (Signal), a stranger gets nothing — as on Telegram, where a pairing reply goes only
//! to a private chat: the agent never posts a code where the whole group reads it, and never
//! writes first to someone who merely spoke in a group. They pair by writing to the number
//! directly.

use super::sender::Job;
use super::{AccountState, channel_name, queue};
use crate::channel::OutPart;
use crate::channel::pairing::{self, Command};
use crate::people::{
    PAIR_CODE_UNKNOWN, PAIR_NOT_APPROVER, PeopleError, paired_confirmation, paired_reply,
};
use crate::store::channels::{self as queries, ChannelInboundRow, ChannelInboundStatus};

/// What a screened message came to: its status and the note Studio shows.
pub(super) type Screened = (ChannelInboundStatus, Option<&'static str>);

/// Whether the message was written in a group rather than to the account directly.
pub(super) fn in_group(row: &ChannelInboundRow) -> bool {
    row.chat != format!("{}:{}", row.channel, row.sender)
}

fn say(state: &AccountState, peer: &str, text: String) {
    queue(
        state,
        Job::Part {
            peer: peer.to_string(),
            part: OutPart::Text(text),
        },
    );
}

/// A stranger wrote to an account that has an owner or names its people: one reply with a code
/// (and a note to each approver, both through the outbox) unless a request of theirs still
/// stands; never the model.
pub(super) async fn stranger(state: &AccountState, row: &ChannelInboundRow) -> Screened {
    if in_group(row) {
        return (
            ChannelInboundStatus::Ignored,
            Some("a stranger in a group: not answered there (pairing is in a private chat)"),
        );
    }
    let args = &state.args;
    let channel = args.adapter.channel();
    let asking = pairing::Asking {
        agent: &args.agent,
        channel,
        channel_name: channel_name(channel),
        user: &row.sender,
        name: &row.sender_name,
        approvers: &args.people.approvers,
    };
    match pairing::request(&args.store, &args.events, &asking).await {
        Ok(Some(requested)) => {
            for id in requested.outbox {
                queue(state, Job::Outbox(id));
            }
            (
                ChannelInboundStatus::Ignored,
                Some("a stranger: sent a pairing code"),
            )
        }
        Ok(None) => (
            ChannelInboundStatus::Ignored,
            Some("a stranger who has a pairing code already: not answered again"),
        ),
        Err(_) => (
            ChannelInboundStatus::Pending,
            Some("store not writable; will retry"),
        ),
    }
}

/// `pair <code>` / `deny <code>` from someone allowed to talk; `None` when the text is not a
/// pairing answer (or is `/deny <id>` of an approval request rather than of a pairing).
pub(super) async fn answer(
    state: &AccountState,
    row: &ChannelInboundRow,
    text: &str,
    approver: bool,
) -> Option<Screened> {
    let command = pairing::parse_command(text)?;
    let args = &state.args;
    let channel = args.adapter.channel();
    let (code, approve) = match command {
        Command::Pair(code) => (code, true),
        Command::Deny { code, slash } => {
            if slash && !pending(state, &code).await {
                return None;
            }
            (code, false)
        }
    };
    if !approver {
        say(state, &row.sender, PAIR_NOT_APPROVER.into());
        return Some((
            ChannelInboundStatus::Processed,
            Some("a pairing answer from someone who may not approve: refused"),
        ));
    }
    let by = format!("{channel}:{}", row.sender);
    let decided = pairing::decide(
        &args.store,
        &args.events,
        &code,
        Some(&args.agent),
        Some(channel),
        approve,
        &by,
    )
    .await;
    let text = match decided {
        Ok(pairing) if approve => {
            say(state, &pairing.user, paired_reply(&pairing.name));
            paired_confirmation(pairing::shown_name(&pairing), &pairing.user)
        }
        Ok(pairing) => pairing::denied_confirmation(&pairing),
        Err(PeopleError::NotFound(_)) => PAIR_CODE_UNKNOWN.into(),
        Err(error) => format!("Could not decide that request: {error}. Try again in a minute."),
    };
    say(state, &row.sender, text);
    Some((ChannelInboundStatus::Processed, Some("a pairing answer")))
}

/// Whether a request of this account waits under `code`.
async fn pending(state: &AccountState, code: &str) -> bool {
    let (agent, channel, code) = (
        state.args.agent.clone(),
        state.args.adapter.channel(),
        code.to_string(),
    );
    let now = crate::clock::now_ms();
    matches!(
        state
            .args
            .store
            .read(move |conn| queries::pending_pairing(
                conn,
                &code,
                Some(&agent),
                Some(channel),
                now
            ))
            .await,
        Ok(Some(_))
    )
}

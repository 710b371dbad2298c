//! Who may talk to an agent on a seam channel, and claiming an account that names nobody.
//!
//! Who may talk: the agent file's numbers (`allow_users`, `approvers`), then the stored owner and
//! allowed people (`channel_people`); a blocked person is never answered. Anyone else is a
//! stranger: their message is stored as ignored and never reaches the model.
//!
//! Claiming: an account whose file names nobody and that has no owner yet has a one-time code
//! (`channel_claims`, 24 h, shown on Studio's People page and logged when the account starts);
//! the first person to send it (alone, or after `claim` or `/start`) becomes the owner — they
//! talk to the agent and approve. The claim is stored with its audit row in one transaction.
//! Wrong codes are limited as on Telegram (`people::CLAIM_ATTEMPTS` per person within
//! `people::CLAIM_WINDOW_MS`, counted in `channel_claim_attempts`); after the last one, no code
//! of theirs is checked until the window has passed (audited once: `people.claim_rate_limited`).
//!
//! Architecture Invariant: the claim code never reaches the audit log or an event.

use crate::audit;
use crate::events::{EventBus, EventData, EventKind};
use crate::people::{
    CLAIM_ATTEMPTS, CLAIM_VALIDITY_MS, CLAIM_WINDOW_MS, StartArgument, parse_start_argument,
};
use crate::store::channels::{self as queries, ChannelClaim, ChannelPerson, ChannelPersonStatus};
use crate::store::{Store, StoreError};

/// The people an agent's file names on a channel (normalized ids).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilePeople {
    pub allowed: Vec<String>,
    pub approvers: Vec<String>,
}

impl FilePeople {
    pub fn names_anyone(&self) -> bool {
        !self.allowed.is_empty() || !self.approvers.is_empty()
    }
}

/// Where a sender stands with the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// May talk; `approver` when they may decide approvals too.
    Allowed { approver: bool },
    /// Never answered.
    Blocked,
    /// Nobody the agent knows; `claimable` when the account has no owner and names nobody.
    Stranger { claimable: bool },
}

/// Where `user` stands with `agent` on `channel`.
pub async fn standing(
    store: &Store,
    agent: &str,
    channel: &str,
    file: &FilePeople,
    user: &str,
) -> Result<Standing, StoreError> {
    let (agent_name, channel_name, user_id) =
        (agent.to_string(), channel.to_string(), user.to_string());
    let (person, owner) = store
        .read(move |conn| {
            Ok((
                queries::person(conn, &agent_name, &channel_name, &user_id)?,
                queries::owner(conn, &agent_name, &channel_name)?,
            ))
        })
        .await?;
    if let Some(person) = &person
        && person.status == ChannelPersonStatus::Blocked
    {
        return Ok(Standing::Blocked);
    }
    let approver = file.approvers.iter().any(|number| number == user)
        || person
            .as_ref()
            .is_some_and(|person| person.status == ChannelPersonStatus::Owner);
    if approver || file.allowed.iter().any(|number| number == user) || person.is_some() {
        return Ok(Standing::Allowed { approver });
    }
    Ok(Standing::Stranger {
        claimable: !file.names_anyone() && owner.is_none(),
    })
}

/// The live claim code of an account that names nobody and has no owner (made when there is
/// none or it expired); `None` once it is owned.
pub async fn ensure_claim_code(
    store: &Store,
    events: &EventBus,
    agent: &str,
    channel: &str,
) -> Result<Option<String>, StoreError> {
    let now = crate::clock::now_ms();
    let (agent_name, channel_name) = (agent.to_string(), channel.to_string());
    let (code, fresh) = store
        .write(move |conn| {
            if queries::owner(conn, &agent_name, &channel_name)?.is_some() {
                return Ok((None, false));
            }
            if let Some(claim) = queries::claim(conn, &agent_name, &channel_name)?
                && claim.claimed_ms.is_none()
                && claim.expires_ms > now
            {
                return Ok((Some(claim.code), false));
            }
            let claim = ChannelClaim {
                agent: agent_name.clone(),
                channel: channel_name.clone(),
                code: crate::telegram::pairing::new_code(),
                created_ms: now,
                expires_ms: now + CLAIM_VALIDITY_MS,
                claimed_ms: None,
            };
            queries::put_claim(conn, &claim)?;
            Ok((Some(claim.code), true))
        })
        .await?;
    if fresh {
        changed(
            events,
            agent,
            "claim_code",
            &format!("a new {channel} claim code was made"),
        );
    }
    Ok(code)
}

/// What a stranger's message did to an unclaimed account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// They own it now.
    Claimed,
    /// The message was shaped like a code but is not this one (or it expired); `left` more may
    /// be tried in the window (`people::CLAIM_ATTEMPTS` per `people::CLAIM_WINDOW_MS`).
    Wrong { left: u32 },
    /// Wrong, and the last one allowed: no code of theirs is checked before `until_ms`.
    NowLimited { until_ms: i64 },
    /// Still limited: not checked (and not answered).
    Limited,
    /// Not a claim at all.
    NotAClaim,
}

/// Reads `text` as a claim (`ABCD-EFGH`, `claim ABCD-EFGH`, `/start ABCD-EFGH`) and, when it is
/// the live code, makes `user` the owner (stored with its audit row).
pub async fn claim(
    store: &Store,
    events: &EventBus,
    agent: &str,
    channel: &str,
    user: &str,
    name: &str,
    text: &str,
) -> Result<ClaimOutcome, StoreError> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let argument = match words.as_slice() {
        [code] => parse_start_argument(code),
        [first, code] if matches!(first.to_ascii_lowercase().as_str(), "claim" | "/start") => {
            parse_start_argument(code)
        }
        _ => return Ok(ClaimOutcome::NotAClaim),
    };
    let StartArgument::Code(code) = argument else {
        return Ok(ClaimOutcome::NotAClaim);
    };
    let now = crate::clock::now_ms();
    let subject = format!("{channel}:{user}");
    let attempt = Attempt {
        agent: agent.to_string(),
        channel: channel.to_string(),
        user: user.to_string(),
        name: name.to_string(),
        subject: subject.clone(),
        code,
    };
    let outcome = store.write(move |conn| decide(conn, &attempt, now)).await?;
    if let ClaimOutcome::NowLimited { .. } = outcome {
        audit::announce(events, "people.claim_rate_limited", &subject);
    }
    if outcome == ClaimOutcome::Claimed {
        audit::announce(events, "people.claimed", &subject);
        changed(
            events,
            agent,
            "claimed",
            &format!("{name} ({subject}) claimed the account and is its owner"),
        );
    }
    Ok(outcome)
}

/// A message read as a claim code, and who sent it.
struct Attempt {
    agent: String,
    channel: String,
    user: String,
    name: String,
    /// `<channel>:<user>`: the audit rows' actor and subject.
    subject: String,
    code: String,
}

/// Decides a claim in one transaction: limited senders are not checked; the live code makes the
/// sender the owner (with its audit row); anything else counts as a wrong code.
fn decide(
    conn: &rusqlite::Connection,
    attempt: &Attempt,
    now: i64,
) -> crate::store::Result<ClaimOutcome> {
    let (agent, channel) = (attempt.agent.as_str(), attempt.channel.as_str());
    let since = now - CLAIM_WINDOW_MS;
    let (wrong, oldest) =
        queries::wrong_claim_attempts(conn, agent, channel, &attempt.user, since)?;
    if wrong >= CLAIM_ATTEMPTS {
        return Ok(ClaimOutcome::Limited);
    }
    let claim = match queries::owner(conn, agent, channel)? {
        Some(_) => None,
        None => queries::claim(conn, agent, channel)?,
    };
    let right = claim.as_ref().is_some_and(|claim| {
        claim.expires_ms > now && crate::people::codes_match(&attempt.code, &claim.code)
    });
    if !right || !queries::consume_claim(conn, agent, channel, &attempt.user, now)? {
        queries::record_wrong_claim_attempt(conn, agent, channel, &attempt.user, since, now)?;
        if wrong + 1 < CLAIM_ATTEMPTS {
            return Ok(ClaimOutcome::Wrong {
                left: CLAIM_ATTEMPTS - wrong - 1,
            });
        }
        let until_ms = oldest.unwrap_or(now) + CLAIM_WINDOW_MS;
        audit::append(
            conn,
            &attempt.subject,
            "people.claim_rate_limited",
            &attempt.subject,
            &serde_json::json!({"agent": agent, "channel": channel, "until_ms": until_ms}),
        )?;
        return Ok(ClaimOutcome::NowLimited { until_ms });
    }
    queries::set_person(
        conn,
        &ChannelPerson {
            agent: agent.to_string(),
            channel: channel.to_string(),
            user: attempt.user.clone(),
            name: attempt.name.clone(),
            status: ChannelPersonStatus::Owner,
            changed_ms: now,
            changed_by: attempt.subject.clone(),
        },
    )?;
    audit::append(
        conn,
        &attempt.subject,
        "people.claimed",
        &attempt.subject,
        &serde_json::json!({"agent": agent, "channel": channel, "name": attempt.name}),
    )?;
    Ok(ClaimOutcome::Claimed)
}

/// Tells open People pages that `agent`'s seam people changed (`change` names how).
pub(super) fn changed(events: &EventBus, agent: &str, change: &str, detail: &str) {
    events.publish_data(
        EventKind::PeopleChanged,
        &format!("people:{agent}"),
        detail,
        EventData::PeopleChanged {
            agent: agent.to_string(),
            user_id: None,
            change: change.to_string(),
        },
    );
}

//! People: who may talk to an agent besides the ones its file names, and the one place that
//! changes it — the bot (a claim with `/start <code>`, `/pair <code>`) and Studio (approve, deny,
//! revoke, block, unblock) both call these functions, so every change is stored with its audit
//! row in one transaction, then announced (`audit_appended` and `people_changed`).
//!
//! Who may talk: the agent file's `allow_users` and `approvers`, then the stored owner and paired
//! people (`telegram_users`). A blocked person's updates are stored as ignored, with a note.
//!
//! Claiming: an agent whose bot has no `allow_users`, no `approvers` and no owner yet gets a
//! one-time claim code (`bot_claims`, 24 h; renewed by the bot's sweep when it expired), written
//! to the log at info level when the bot comes online and shown on Studio's People page; the
//! first person to send `/start <code>` to the bot in a private chat becomes its owner — they
//! talk to the agent and approve, as an approver in the file would. Wrong codes are limited per
//! person (5 in 10 minutes, then none is checked until the window passed).
//!
//! Architecture Invariant: a blocked person is never answered (not even a pairing reply); a
//! person named in the agent file is managed there, never here.
//! Architecture Invariant: the claim code never reaches the audit log or an event (it grants
//! ownership).

use crate::audit;
use crate::events::{EventBus, EventData, EventKind};
use crate::store::people::{self as queries, Claim, Person, PersonStatus};
use crate::store::telegram::{self as telegram_queries, PairingRow, normalize_code};
use crate::store::{Store, StoreError};

/// How long a claim code is valid.
pub const CLAIM_VALIDITY_MS: i64 = 24 * 3_600_000;
/// Wrong claim codes a person may send per window before none of theirs is checked.
pub const CLAIM_ATTEMPTS: u32 = 5;
/// The rate limit's window.
pub const CLAIM_WINDOW_MS: i64 = 10 * 60_000;
/// The longest `/start` argument looked at (a deep-link payload is at most 64 characters).
const LONGEST_ARGUMENT: usize = 64;

/// What follows `/start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartArgument {
    /// Nothing: a plain `/start`.
    Missing,
    /// Something shaped like a code (8 characters of the code alphabet, dashes and spaces and
    /// case ignored), normalized as stored.
    Code(String),
    /// Anything else: counted as a wrong code.
    Malformed,
}

/// Reads `/start`'s argument (`ABCD-EFGH`, `abcdefgh`, a deep link's `ABCDEFGH`).
pub fn parse_start_argument(args: &str) -> StartArgument {
    let Some(first) = args.split_whitespace().next() else {
        return StartArgument::Missing;
    };
    if first.len() > LONGEST_ARGUMENT {
        return StartArgument::Malformed;
    }
    let code = normalize_code(first);
    if crate::telegram::pairing::is_code(&code) {
        StartArgument::Code(code)
    } else {
        StartArgument::Malformed
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PeopleError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Nothing to change: the request or person is unknown (or already decided).
    #[error("{0}")]
    NotFound(String),
    /// The change does not apply to the person as they stand.
    #[error("{0}")]
    Conflict(String),
}

/// What a `/start <code>` achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The sender is the owner now.
    Claimed,
    /// Wrong code; `left` more may be tried in the window.
    Wrong { left: u32 },
    /// Wrong, and the last one allowed: no code of theirs is checked before `until_ms`.
    NowLimited { until_ms: i64 },
    /// Still limited: not checked (and not answered).
    Limited,
    /// The right code, too late: the bot gets a new one.
    Expired,
    /// The bot has an owner already (or names its people in its file).
    AlreadyClaimed,
}

/// What a person who sent a wrong claim code is told, on every channel: how many more they may
/// try (`left` > 0), or, after the last one, for how long no code of theirs is checked.
pub fn wrong_code_reply(left: u32) -> String {
    format!(
        "That claim code is wrong. You can try {left} more time{} in the next {} minutes.",
        if left == 1 { "" } else { "s" },
        CLAIM_WINDOW_MS / 60_000
    )
}

/// See [`wrong_code_reply`]: the last wrong code of the window.
pub fn now_limited_reply(until_ms: i64) -> String {
    format!(
        "That claim code is wrong too. After {CLAIM_ATTEMPTS} wrong codes I don't check codes from you for {} minutes.",
        ((until_ms - crate::clock::now_ms()) as f64 / 60_000.0)
            .ceil()
            .max(1.0)
    )
}

/// What a stranger is told with their pairing code, on every channel; `pair_command` is how an
/// approver answers there (`/pair` on Telegram, `pair` on WhatsApp and Signal).
pub fn pairing_request_reply(name: &str, code: &str, pair_command: &str) -> String {
    let code = crate::telegram::pairing::display(code);
    let hello = match name.trim() {
        "" => "Hi!".to_string(),
        name => format!("Hi {name}!"),
    };
    format!(
        "{hello} I only talk to people my owner approved. Ask them to approve code {code} (in Studio, or by sending {pair_command} {code} to me). The code is valid for an hour."
    )
}

/// What a person is told once their pairing request was approved, on every channel.
pub fn paired_reply(name: &str) -> String {
    match name.trim() {
        "" => "You're approved. Write to me anytime.".to_string(),
        name => format!("You're approved, {name}. Write to me anytime."),
    }
}

/// What the approver who paired someone (`who`: their id on the channel) is told.
pub fn paired_confirmation(name: &str, who: &str) -> String {
    format!("Paired {name} ({who}). They can talk to me now.")
}

/// The answer to `pair <code>` from someone who may not approve.
pub const PAIR_NOT_APPROVER: &str = "Only my approvers can pair new users.";
/// The answer to `pair <code>` with a code that decides nothing.
pub const PAIR_CODE_UNKNOWN: &str = "That code is unknown, already used or expired.";

/// Where an agent's claim stands after [`ensure_claim_code`].
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimCheck {
    Owned(Person),
    /// Unclaimed with this live code; `fresh` when it was made just now.
    Unclaimed {
        claim: Claim,
        fresh: bool,
    },
}

fn people_changed(
    events: &EventBus,
    agent: &str,
    user_id: Option<i64>,
    change: &str,
    detail: &str,
) {
    events.publish_data(
        EventKind::PeopleChanged,
        &format!("people:{agent}"),
        detail,
        EventData::PeopleChanged {
            agent: agent.to_string(),
            user_id,
            change: change.to_string(),
        },
    );
}

fn subject(user_id: i64) -> String {
    format!("telegram:{user_id}")
}

/// Makes sure an unclaimed agent has a live claim code (a new one when there was none or it
/// expired or was used by an owner since revoked). Callers only ask for agents whose file names
/// nobody.
pub async fn ensure_claim_code(
    store: &Store,
    events: &EventBus,
    agent: &str,
) -> Result<ClaimCheck, StoreError> {
    let now = crate::clock::now_ms();
    let name = agent.to_string();
    // Most checks change nothing (a sweep every 30 s): read first, write only when needed.
    let current = store
        .read(move |conn| {
            Ok(match queries::owner(conn, &name)? {
                Some(owner) => Some(ClaimCheck::Owned(owner)),
                None => queries::claim(conn, &name)?
                    .filter(|claim| claim.is_live(now))
                    .map(|claim| ClaimCheck::Unclaimed {
                        claim,
                        fresh: false,
                    }),
            })
        })
        .await?;
    if let Some(current) = current {
        return Ok(current);
    }
    let name = agent.to_string();
    let check = store
        .write(move |conn| {
            if let Some(owner) = queries::owner(conn, &name)? {
                return Ok(ClaimCheck::Owned(owner));
            }
            if let Some(claim) = queries::claim(conn, &name)?
                && claim.is_live(now)
            {
                return Ok(ClaimCheck::Unclaimed {
                    claim,
                    fresh: false,
                });
            }
            let claim = Claim {
                agent: name.clone(),
                code: crate::telegram::pairing::new_code(),
                created_ms: now,
                expires_ms: now + CLAIM_VALIDITY_MS,
                claimed_ms: None,
                claimed_by: None,
                claimed_name: None,
            };
            queries::put_claim_code(conn, &claim)?;
            Ok(ClaimCheck::Unclaimed { claim, fresh: true })
        })
        .await?;
    if let ClaimCheck::Unclaimed { fresh: true, .. } = &check {
        people_changed(
            events,
            agent,
            None,
            "claim_code",
            "a new claim code was made",
        );
    }
    Ok(check)
}

/// Removes an unused claim code: the agent's file names its people now.
pub async fn drop_claim_code(
    store: &Store,
    events: &EventBus,
    agent: &str,
) -> Result<(), StoreError> {
    let name = agent.to_string();
    if store
        .write(move |conn| queries::drop_unused_claim(conn, &name))
        .await?
    {
        people_changed(
            events,
            agent,
            None,
            "claim_code",
            "the claim code was withdrawn",
        );
    }
    Ok(())
}

/// `/start <code>` from `user_id` in a private chat with an unclaimed bot.
pub async fn claim(
    store: &Store,
    events: &EventBus,
    agent: &str,
    user_id: i64,
    name: &str,
    argument: &StartArgument,
) -> Result<ClaimOutcome, StoreError> {
    let now = crate::clock::now_ms();
    let (agent_name, person_name, argument) =
        (agent.to_string(), name.to_string(), argument.clone());
    let actor = subject(user_id);
    let audited_actor = actor.clone();
    let outcome = store
        .write(move |conn| {
            if queries::owner(conn, &agent_name)?.is_some() {
                return Ok(ClaimOutcome::AlreadyClaimed);
            }
            let Some(claim) = queries::claim(conn, &agent_name)? else {
                return Ok(ClaimOutcome::AlreadyClaimed);
            };
            if claim.claimed_ms.is_some() {
                return Ok(ClaimOutcome::AlreadyClaimed);
            }
            let since = now - CLAIM_WINDOW_MS;
            let (wrong, oldest) = queries::wrong_attempts(conn, &agent_name, user_id, since)?;
            if wrong >= CLAIM_ATTEMPTS {
                return Ok(ClaimOutcome::Limited);
            }
            let right = matches!(&argument, StartArgument::Code(code) if codes_match(code, &claim.code));
            if right && claim.expires_ms <= now {
                return Ok(ClaimOutcome::Expired);
            }
            if right && queries::consume_claim(conn, &agent_name, user_id, &person_name, now)? {
                queries::set_person(
                    conn,
                    &Person {
                        agent: agent_name.clone(),
                        user_id,
                        name: person_name.clone(),
                        status: PersonStatus::Owner,
                        changed_ms: now,
                        changed_by: audited_actor.clone(),
                    },
                )?;
                queries::close_pairings(conn, &agent_name, user_id, "claim", now)?;
                audit::append(
                    conn,
                    &audited_actor,
                    "people.claimed",
                    &subject(user_id),
                    &serde_json::json!({"agent": agent_name, "name": person_name}),
                )?;
                return Ok(ClaimOutcome::Claimed);
            }
            queries::record_wrong_attempt(conn, &agent_name, user_id, since, now)?;
            if wrong + 1 < CLAIM_ATTEMPTS {
                return Ok(ClaimOutcome::Wrong {
                    left: CLAIM_ATTEMPTS - wrong - 1,
                });
            }
            let until_ms = oldest.unwrap_or(now) + CLAIM_WINDOW_MS;
            audit::append(
                conn,
                &audited_actor,
                "people.claim_rate_limited",
                &subject(user_id),
                &serde_json::json!({"agent": agent_name, "name": person_name, "until_ms": until_ms}),
            )?;
            Ok(ClaimOutcome::NowLimited { until_ms })
        })
        .await?;
    match &outcome {
        ClaimOutcome::Claimed => {
            audit::announce(events, "people.claimed", &actor);
            people_changed(
                events,
                agent,
                Some(user_id),
                "claimed",
                &format!("{name} ({user_id}) claimed the bot and is its owner"),
            );
        }
        ClaimOutcome::NowLimited { .. } => {
            audit::announce(events, "people.claim_rate_limited", &actor);
        }
        _ => {}
    }
    Ok(outcome)
}

/// Compares in time independent of where the codes differ.
pub(crate) fn codes_match(given: &str, stored: &str) -> bool {
    given.len() == stored.len()
        && given
            .bytes()
            .zip(stored.bytes())
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// Approves a live pairing request (of `agent` only, when given): its person may talk to the
/// agent from now on.
pub async fn approve_pairing(
    store: &Store,
    events: &EventBus,
    code: &str,
    agent: Option<&str>,
    actor: &str,
) -> Result<PairingRow, PeopleError> {
    let agent = agent.map(str::to_string);
    decide_pairing(store, events, code, actor, PairingDecision::Approve(agent)).await
}

/// Turns a live pairing request down; its person is not answered again until it expires.
pub async fn deny_pairing(
    store: &Store,
    events: &EventBus,
    code: &str,
    actor: &str,
) -> Result<PairingRow, PeopleError> {
    decide_pairing(store, events, code, actor, PairingDecision::Deny).await
}

/// What is done with a pairing request.
enum PairingDecision {
    /// Approve it (only for this agent, when given).
    Approve(Option<String>),
    Deny,
}

/// Decides a live pairing request: stored with its audit row in one transaction, then announced.
async fn decide_pairing(
    store: &Store,
    events: &EventBus,
    code: &str,
    actor: &str,
    decision: PairingDecision,
) -> Result<PairingRow, PeopleError> {
    let now = crate::clock::now_ms();
    let approve = matches!(decision, PairingDecision::Approve(_));
    let (action, change) = match approve {
        true => ("people.paired", "paired"),
        false => ("people.pairing_denied", "pairing_denied"),
    };
    let (code, by) = (code.to_string(), actor.to_string());
    let row = store
        .write(move |conn| {
            let decided = match &decision {
                PairingDecision::Approve(agent) => {
                    telegram_queries::approve_pairing(conn, &code, agent.as_deref(), &by, now)?
                }
                PairingDecision::Deny => queries::deny_pairing(conn, &code, &by, now)?,
            };
            let Some(row) = decided else {
                return Ok(None);
            };
            audit::append(
                conn,
                &by,
                action,
                &subject(row.user_id),
                &serde_json::json!({"agent": row.agent, "name": row.name}),
            )?;
            Ok(Some(row))
        })
        .await?
        .ok_or_else(|| {
            PeopleError::NotFound(
                "no pending pairing request has that code (it may have been decided or expired)"
                    .into(),
            )
        })?;
    audit::announce(events, action, &subject(row.user_id));
    let detail = match approve {
        true => format!("{} ({}) was paired", row.name, row.user_id),
        false => format!(
            "the pairing request of {} ({}) was denied",
            row.name, row.user_id
        ),
    };
    people_changed(events, &row.agent, Some(row.user_id), change, &detail);
    Ok(row)
}

/// What the operator may do to a stored person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersonChange {
    /// An owner or paired person is unknown again (their next message gets a pairing reply).
    Revoke,
    /// Never answered again.
    Block,
    /// A blocked person is unknown again.
    Unblock,
}

impl PersonChange {
    pub fn parse(text: &str) -> Option<PersonChange> {
        match text {
            "revoke" => Some(PersonChange::Revoke),
            "block" => Some(PersonChange::Block),
            "unblock" => Some(PersonChange::Unblock),
            _ => None,
        }
    }

    fn past(self) -> &'static str {
        match self {
            PersonChange::Revoke => "revoked",
            PersonChange::Block => "blocked",
            PersonChange::Unblock => "unblocked",
        }
    }
}

/// Revokes, blocks or unblocks `user_id` for `agent`. Returns the person as they stand after
/// it (`None`: unknown again). Anyone may be blocked, known or not.
pub async fn change_person(
    store: &Store,
    events: &EventBus,
    agent: &str,
    user_id: i64,
    change: PersonChange,
    actor: &str,
) -> Result<Option<Person>, PeopleError> {
    let now = crate::clock::now_ms();
    let (agent_name, by) = (agent.to_string(), actor.to_string());
    let action = format!("people.{}", change.past());
    let audited_action = action.clone();
    let after = store
        .write(move |conn| {
            let before = queries::person(conn, &agent_name, user_id)?;
            let before_status = before.as_ref().map(|person| person.status.label());
            let after = match change {
                PersonChange::Revoke | PersonChange::Unblock => {
                    let wanted = |status: PersonStatus| match change {
                        PersonChange::Revoke => status.may_talk(),
                        _ => status == PersonStatus::Blocked,
                    };
                    match &before {
                        Some(person) if wanted(person.status) => {}
                        Some(person) => {
                            return Ok(Err(PeopleError::Conflict(format!(
                                "{} ({user_id}) is {} for {agent_name}: {}",
                                person.name,
                                person.status.label(),
                                if change == PersonChange::Revoke {
                                    "unblock them instead"
                                } else {
                                    "only a blocked person can be unblocked"
                                }
                            ))));
                        }
                        None => {
                            return Ok(Err(PeopleError::NotFound(format!(
                                "{user_id} is neither paired with nor blocked for {agent_name}"
                            ))));
                        }
                    }
                    queries::remove_person(conn, &agent_name, user_id)?;
                    None
                }
                PersonChange::Block => {
                    let name = queries::known_name(conn, &agent_name, user_id)?
                        .unwrap_or_else(|| format!("user {user_id}"));
                    let person = Person {
                        agent: agent_name.clone(),
                        user_id,
                        name,
                        status: PersonStatus::Blocked,
                        changed_ms: now,
                        changed_by: by.clone(),
                    };
                    queries::set_person(conn, &person)?;
                    queries::close_pairings(conn, &agent_name, user_id, &by, now)?;
                    Some(person)
                }
            };
            let name = before
                .as_ref()
                .map(|person| person.name.clone())
                .or_else(|| after.as_ref().map(|person| person.name.clone()));
            audit::append(
                conn,
                &by,
                &audited_action,
                &subject(user_id),
                &serde_json::json!({"agent": agent_name, "name": name, "before": before_status}),
            )?;
            Ok(Ok(after))
        })
        .await??;
    audit::announce(events, &action, &subject(user_id));
    people_changed(
        events,
        agent,
        Some(user_id),
        change.past(),
        &format!("{user_id} was {} for {agent}", change.past()),
    );
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_arguments_are_read_as_codes_whatever_their_dashes_and_case() {
        assert_eq!(parse_start_argument(""), StartArgument::Missing);
        assert_eq!(parse_start_argument("   "), StartArgument::Missing);
        assert_eq!(
            parse_start_argument("abcd-efgh"),
            StartArgument::Code("ABCDEFGH".into())
        );
        assert_eq!(
            parse_start_argument(" ABCDEFGH trailing words"),
            StartArgument::Code("ABCDEFGH".into())
        );
        // Look-alikes are not in the alphabet, so such a text is not a code.
        assert_eq!(parse_start_argument("ABCD-EFG0"), StartArgument::Malformed);
        assert_eq!(parse_start_argument("ABC"), StartArgument::Malformed);
        assert_eq!(
            parse_start_argument(&"A".repeat(100)),
            StartArgument::Malformed
        );
        assert_eq!(parse_start_argument("ÄBCD-EFGH"), StartArgument::Malformed);
    }

    #[test]
    fn codes_match_only_when_equal() {
        assert!(codes_match("ABCDEFGH", "ABCDEFGH"));
        assert!(!codes_match("ABCDEFGJ", "ABCDEFGH"));
        assert!(!codes_match("ABCDEFG", "ABCDEFGH"));
    }
}

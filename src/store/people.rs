//! Queries for the people an agent talks to: `telegram_users` (owner, paired, blocked),
//! `bot_claims` (the one-time code that makes the first sender an unclaimed bot's owner),
//! `claim_attempts` (wrong codes, for the rate limit) and the operator's answer to a pairing
//! request (`pairing_codes.denied_ms`).

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;
use super::telegram::{PairingRow, normalize_code};

stored_text_enum! {
    /// What the operator (or a claim) decided about a person, per agent.
    pub enum PersonStatus {
        /// Claimed the bot with its one-time code: talks to the agent and approves.
        Owner => "owner",
        /// Paired: a pairing request was approved.
        Paired => "allowed",
        /// Never answered, not even with a pairing reply.
        Blocked => "blocked",
    }
}

impl PersonStatus {
    /// The word Studio shows (`paired` rather than the stored `allowed`).
    pub fn label(self) -> &'static str {
        match self {
            PersonStatus::Owner => "owner",
            PersonStatus::Paired => "paired",
            PersonStatus::Blocked => "blocked",
        }
    }

    /// Owner and paired people talk to the agent.
    pub fn may_talk(self) -> bool {
        matches!(self, PersonStatus::Owner | PersonStatus::Paired)
    }
}

/// A person stored for an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Person {
    pub agent: String,
    pub user_id: i64,
    pub name: String,
    pub status: PersonStatus,
    pub changed_ms: i64,
    pub changed_by: String,
}

const PERSON_COLUMNS: &str = "agent, user_id, name, status, changed_ms, changed_by";

fn person_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Person> {
    Ok(Person {
        agent: row.get(0)?,
        user_id: row.get(1)?,
        name: row.get(2)?,
        status: row.get(3)?,
        changed_ms: row.get(4)?,
        changed_by: row.get(5)?,
    })
}

/// What is stored about `user_id` for `agent`, if anything.
pub fn person(conn: &Connection, agent: &str, user_id: i64) -> Result<Option<Person>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PERSON_COLUMNS} FROM telegram_users WHERE agent = ?1 AND user_id = ?2"
        ))?
        .query_row(params![agent, user_id], person_from_row)
        .optional()?)
}

/// Every stored person of every agent, by agent then by when they changed.
pub fn people(conn: &Connection) -> Result<Vec<Person>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {PERSON_COLUMNS} FROM telegram_users ORDER BY agent, changed_ms, user_id"
    ))?;
    let rows = statement.query_map([], person_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The agent's owner, if its bot was claimed.
pub fn owner(conn: &Connection, agent: &str) -> Result<Option<Person>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PERSON_COLUMNS} FROM telegram_users WHERE agent = ?1 AND status = 'owner'
             ORDER BY changed_ms LIMIT 1"
        ))?
        .query_row(params![agent], person_from_row)
        .optional()?)
}

/// Stores `status` for the person (replacing whatever was stored).
pub fn set_person(conn: &Connection, person: &Person) -> Result<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO telegram_users ({PERSON_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (agent, user_id) DO UPDATE SET name = ?3, status = ?4, changed_ms = ?5, changed_by = ?6"
    ))?
    .execute(params![
        person.agent,
        person.user_id,
        person.name,
        person.status,
        person.changed_ms,
        person.changed_by
    ])?;
    Ok(())
}

/// Forgets the person (they are unknown again). Returns what was stored.
pub fn remove_person(conn: &Connection, agent: &str, user_id: i64) -> Result<Option<Person>> {
    let before = person(conn, agent, user_id)?;
    conn.prepare_cached("DELETE FROM telegram_users WHERE agent = ?1 AND user_id = ?2")?
        .execute(params![agent, user_id])?;
    Ok(before)
}

/// An agent's claim code and whether it was used.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub agent: String,
    /// As stored: 8 characters, no dash.
    pub code: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub claimed_ms: Option<i64>,
    pub claimed_by: Option<i64>,
    pub claimed_name: Option<String>,
}

impl Claim {
    /// Not used and not expired at `now_ms`.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.claimed_ms.is_none() && self.expires_ms > now_ms
    }
}

const CLAIM_COLUMNS: &str =
    "agent, code, created_ms, expires_ms, claimed_ms, claimed_by, claimed_name";

fn claim_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Claim> {
    Ok(Claim {
        agent: row.get(0)?,
        code: row.get(1)?,
        created_ms: row.get(2)?,
        expires_ms: row.get(3)?,
        claimed_ms: row.get(4)?,
        claimed_by: row.get(5)?,
        claimed_name: row.get(6)?,
    })
}

pub fn claim(conn: &Connection, agent: &str) -> Result<Option<Claim>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {CLAIM_COLUMNS} FROM bot_claims WHERE agent = ?1"
        ))?
        .query_row(params![agent], claim_from_row)
        .optional()?)
}

pub fn claims(conn: &Connection) -> Result<Vec<Claim>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {CLAIM_COLUMNS} FROM bot_claims ORDER BY agent"
    ))?;
    let rows = statement.query_map([], claim_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Stores a fresh, unused code for the agent (replacing any earlier one).
pub fn put_claim_code(conn: &Connection, claim: &Claim) -> Result<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO bot_claims ({CLAIM_COLUMNS}) VALUES (?1, ?2, ?3, ?4, NULL, NULL, NULL)
         ON CONFLICT (agent) DO UPDATE SET code = ?2, created_ms = ?3, expires_ms = ?4,
             claimed_ms = NULL, claimed_by = NULL, claimed_name = NULL"
    ))?
    .execute(params![
        claim.agent,
        claim.code,
        claim.created_ms,
        claim.expires_ms
    ])?;
    Ok(())
}

/// Removes an unused code (the agent file now names its people). A used one stays as history.
pub fn drop_unused_claim(conn: &Connection, agent: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM bot_claims WHERE agent = ?1 AND claimed_ms IS NULL")?
        .execute(params![agent])?
        > 0)
}

/// Marks the live code used by `user_id`. False when it is not live any more (used meanwhile).
pub fn consume_claim(
    conn: &Connection,
    agent: &str,
    user_id: i64,
    name: &str,
    now_ms: i64,
) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE bot_claims SET claimed_ms = ?3, claimed_by = ?4, claimed_name = ?5
             WHERE agent = ?1 AND claimed_ms IS NULL AND expires_ms > ?2",
        )?
        .execute(params![agent, now_ms, now_ms, user_id, name])?
        == 1)
}

/// Wrong codes `user_id` sent since `since_ms`, and when the oldest of them was sent.
pub fn wrong_attempts(
    conn: &Connection,
    agent: &str,
    user_id: i64,
    since_ms: i64,
) -> Result<(u32, Option<i64>)> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*), MIN(at_ms) FROM claim_attempts WHERE agent = ?1 AND user_id = ?2 AND at_ms > ?3",
        )?
        .query_row(params![agent, user_id, since_ms], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?)
}

/// Records a wrong code and forgets attempts older than `since_ms` (of anyone, for this agent).
pub fn record_wrong_attempt(
    conn: &Connection,
    agent: &str,
    user_id: i64,
    since_ms: i64,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached("DELETE FROM claim_attempts WHERE agent = ?1 AND at_ms <= ?2")?
        .execute(params![agent, since_ms])?;
    conn.prepare_cached("INSERT INTO claim_attempts (agent, user_id, at_ms) VALUES (?1, ?2, ?3)")?
        .execute(params![agent, user_id, now_ms])?;
    Ok(())
}

const PAIRING_COLUMNS: &str =
    "code, agent, user_id, chat_id, name, created_ms, expires_ms, approved_ms";

fn pairing_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<PairingRow> {
    Ok(PairingRow {
        code: row.get(0)?,
        agent: row.get(1)?,
        user_id: row.get(2)?,
        chat_id: row.get(3)?,
        name: row.get(4)?,
        created_ms: row.get(5)?,
        expires_ms: row.get(6)?,
        approved_ms: row.get(7)?,
    })
}

/// Turns a live pairing request down. Returns it, or `None` when the code is unknown, decided or
/// expired.
pub fn deny_pairing(
    conn: &Connection,
    code: &str,
    by: &str,
    now_ms: i64,
) -> Result<Option<PairingRow>> {
    let code = normalize_code(code);
    let row = conn
        .prepare_cached(&format!(
            "SELECT {PAIRING_COLUMNS} FROM pairing_codes WHERE code = ?1
             AND approved_ms IS NULL AND denied_ms IS NULL AND expires_ms > ?2"
        ))?
        .query_row(params![code, now_ms], pairing_from_row)
        .optional()?;
    if row.is_some() {
        conn.prepare_cached(
            "UPDATE pairing_codes SET denied_ms = ?2, denied_by = ?3 WHERE code = ?1",
        )?
        .execute(params![code, now_ms, by])?;
    }
    Ok(row)
}

/// Closes the person's open pairing requests (they were let in another way, or blocked).
pub fn close_pairings(
    conn: &Connection,
    agent: &str,
    user_id: i64,
    by: &str,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE pairing_codes SET denied_ms = ?3, denied_by = ?4
         WHERE agent = ?1 AND user_id = ?2 AND approved_ms IS NULL AND denied_ms IS NULL",
    )?
    .execute(params![agent, user_id, now_ms, by])?;
    Ok(())
}

/// The name a person last went by for `agent` (their pairing request's), if any.
pub fn known_name(conn: &Connection, agent: &str, user_id: i64) -> Result<Option<String>> {
    if let Some(person) = person(conn, agent, user_id)? {
        return Ok(Some(person.name));
    }
    Ok(conn
        .prepare_cached(
            "SELECT name FROM pairing_codes WHERE agent = ?1 AND user_id = ?2 ORDER BY created_ms DESC LIMIT 1",
        )?
        .query_row(params![agent, user_id], |row| row.get(0))
        .optional()?)
}

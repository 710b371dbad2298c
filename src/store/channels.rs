//! Queries for the channel seam's tables (`channel_inbound`, `channel_people`, `channel_claims`,
//! `channel_windows`): WhatsApp, Signal and any later channel besides Telegram.
//!
//! Invariants: an inbound message is unique on (channel, account, message id), so storing a
//! redelivery changes nothing and reports `None`; storing a message also moves its sender's
//! customer-service window, in the same statement batch, so the window never lags a stored
//! message. Nothing here knows HTTP or a channel's wire format.

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;

stored_text_enum! {
    /// Where a stored inbound message stands.
    pub enum ChannelInboundStatus {
        /// Stored, not yet handed to the agent.
        Pending => "pending",
        /// Handed to the agent; answered when its reply is delivered.
        Dispatched => "dispatched",
        /// Answered, or decided (a button press, a claim) without an answer from the model.
        Processed => "processed",
        /// Never reaches the model: a stranger, a blocked person, an unsupported message.
        Ignored => "ignored",
    }
}

stored_text_enum! {
    /// Who a person is to an agent on a channel (besides its file's numbers).
    pub enum ChannelPersonStatus {
        /// Claimed the account with its one-time code: talks to the agent and approves.
        Owner => "owner",
        /// Allowed by the operator.
        Allowed => "allowed",
        /// Never answered.
        Blocked => "blocked",
    }
}

/// A message as the channel's adapter hands it to the seam, before it is stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChannelInbound<'a> {
    pub channel: &'a str,
    pub account: &'a str,
    pub message_id: &'a str,
    pub agent: &'a str,
    pub chat: &'a str,
    pub sender: &'a str,
    pub sender_name: &'a str,
    /// `text`, `button`, `voice`, `audio`, `image`, `document`, `other`.
    pub kind: &'a str,
    pub payload: &'a str,
    pub sent_ms: Option<i64>,
}

/// A stored inbound message.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelInboundRow {
    pub id: i64,
    pub channel: String,
    pub account: String,
    pub message_id: String,
    pub agent: String,
    pub chat: String,
    pub sender: String,
    pub sender_name: String,
    pub kind: String,
    pub payload: String,
    pub sent_ms: Option<i64>,
    pub received_ms: i64,
    pub status: ChannelInboundStatus,
    pub note: Option<String>,
}

const INBOUND_COLUMNS: &str = "id, channel, account, message_id, agent, chat, sender, sender_name, kind, payload, sent_ms, received_ms, status, note";

fn inbound_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ChannelInboundRow> {
    Ok(ChannelInboundRow {
        id: row.get(0)?,
        channel: row.get(1)?,
        account: row.get(2)?,
        message_id: row.get(3)?,
        agent: row.get(4)?,
        chat: row.get(5)?,
        sender: row.get(6)?,
        sender_name: row.get(7)?,
        kind: row.get(8)?,
        payload: row.get(9)?,
        sent_ms: row.get(10)?,
        received_ms: row.get(11)?,
        status: row.get(12)?,
        note: row.get(13)?,
    })
}

/// Stores a message and moves its sender's window; `None` when it was stored before (a
/// redelivery), which changes nothing.
pub fn store_inbound(
    conn: &Connection,
    message: &NewChannelInbound<'_>,
    now_ms: i64,
) -> Result<Option<i64>> {
    let inserted = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO channel_inbound
               (channel, account, message_id, agent, chat, sender, sender_name, kind, payload, sent_ms, received_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?
        .execute(params![
            message.channel,
            message.account,
            message.message_id,
            message.agent,
            message.chat,
            message.sender,
            message.sender_name,
            message.kind,
            message.payload,
            message.sent_ms,
            now_ms
        ])?;
    if inserted == 0 {
        return Ok(None);
    }
    let id = conn.last_insert_rowid();
    conn.prepare_cached(
        "INSERT INTO channel_windows (channel, account, peer, last_inbound_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (channel, account, peer) DO UPDATE SET last_inbound_ms = max(last_inbound_ms, excluded.last_inbound_ms)",
    )?
    .execute(params![
        message.channel,
        message.account,
        message.sender,
        message.sent_ms.unwrap_or(now_ms).min(now_ms)
    ])?;
    Ok(Some(id))
}

pub fn inbound_get(conn: &Connection, id: i64) -> Result<Option<ChannelInboundRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {INBOUND_COLUMNS} FROM channel_inbound WHERE id = ?1"
        ))?
        .query_row(params![id], inbound_from_row)
        .optional()?)
}

/// The account's messages not yet handed to the agent, or handed but never stored in a session
/// (a crash between the two), oldest first.
pub fn inbound_open(
    conn: &Connection,
    channel: &str,
    account: &str,
) -> Result<Vec<ChannelInboundRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {INBOUND_COLUMNS} FROM channel_inbound u
          WHERE channel = ?1 AND account = ?2
            AND (status = 'pending'
                 OR (status = 'dispatched'
                     AND NOT EXISTS (SELECT 1 FROM session_events e WHERE e.inbound_id = -u.id)))
          ORDER BY id"
    ))?;
    let rows = statement.query_map(params![channel, account], inbound_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Sets a message's status (with a note for people, when it is ignored).
pub fn set_inbound_status(
    conn: &Connection,
    id: i64,
    status: ChannelInboundStatus,
    note: Option<&str>,
    now_ms: i64,
) -> Result<()> {
    let done = matches!(
        status,
        ChannelInboundStatus::Processed | ChannelInboundStatus::Ignored
    )
    .then_some(now_ms);
    conn.prepare_cached(
        "UPDATE channel_inbound SET status = ?2, note = coalesce(?3, note), processed_ms = ?4 WHERE id = ?1",
    )?
    .execute(params![id, status, note, done])?;
    Ok(())
}

/// Marks the messages a delivered reply answered (their session events' negated ids) processed.
pub fn mark_answered(conn: &Connection, event_inbound_ids: &[i64], now_ms: i64) -> Result<()> {
    for id in event_inbound_ids.iter().filter(|id| **id < 0) {
        set_inbound_status(conn, -id, ChannelInboundStatus::Processed, None, now_ms)?;
    }
    Ok(())
}

/// When `peer` last wrote to the account.
pub fn last_inbound(
    conn: &Connection,
    channel: &str,
    account: &str,
    peer: &str,
) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT last_inbound_ms FROM channel_windows WHERE channel = ?1 AND account = ?2 AND peer = ?3",
        )?
        .query_row(params![channel, account, peer], |row| row.get(0))
        .optional()?)
}

/// A person an agent knows on a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelPerson {
    pub agent: String,
    pub channel: String,
    pub user: String,
    pub name: String,
    pub status: ChannelPersonStatus,
    pub changed_ms: i64,
    pub changed_by: String,
}

fn person_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ChannelPerson> {
    Ok(ChannelPerson {
        agent: row.get(0)?,
        channel: row.get(1)?,
        user: row.get(2)?,
        name: row.get(3)?,
        status: row.get(4)?,
        changed_ms: row.get(5)?,
        changed_by: row.get(6)?,
    })
}

const PERSON_COLUMNS: &str = "agent, channel, user, name, status, changed_ms, changed_by";

pub fn person(
    conn: &Connection,
    agent: &str,
    channel: &str,
    user: &str,
) -> Result<Option<ChannelPerson>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PERSON_COLUMNS} FROM channel_people WHERE agent = ?1 AND channel = ?2 AND user = ?3"
        ))?
        .query_row(params![agent, channel, user], person_from_row)
        .optional()?)
}

/// Everyone every agent knows on every seam channel.
pub fn people(conn: &Connection) -> Result<Vec<ChannelPerson>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {PERSON_COLUMNS} FROM channel_people ORDER BY agent, channel, user"
    ))?;
    let rows = statement.query_map([], person_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

pub fn owner(conn: &Connection, agent: &str, channel: &str) -> Result<Option<ChannelPerson>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PERSON_COLUMNS} FROM channel_people WHERE agent = ?1 AND channel = ?2 AND status = 'owner'"
        ))?
        .query_row(params![agent, channel], person_from_row)
        .optional()?)
}

pub fn set_person(conn: &Connection, person: &ChannelPerson) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO channel_people (agent, channel, user, name, status, changed_ms, changed_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (agent, channel, user) DO UPDATE SET name = excluded.name, status = excluded.status,
             changed_ms = excluded.changed_ms, changed_by = excluded.changed_by",
    )?
    .execute(params![
        person.agent,
        person.channel,
        person.user,
        person.name,
        person.status,
        person.changed_ms,
        person.changed_by
    ])?;
    Ok(())
}

/// An account's claim code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelClaim {
    pub agent: String,
    pub channel: String,
    pub code: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub claimed_ms: Option<i64>,
}

pub fn claim(conn: &Connection, agent: &str, channel: &str) -> Result<Option<ChannelClaim>> {
    Ok(conn
        .prepare_cached(
            "SELECT agent, channel, code, created_ms, expires_ms, claimed_ms FROM channel_claims
              WHERE agent = ?1 AND channel = ?2",
        )?
        .query_row(params![agent, channel], |row| {
            Ok(ChannelClaim {
                agent: row.get(0)?,
                channel: row.get(1)?,
                code: row.get(2)?,
                created_ms: row.get(3)?,
                expires_ms: row.get(4)?,
                claimed_ms: row.get(5)?,
            })
        })
        .optional()?)
}

/// Wrong claim codes `user` sent on `channel` since `since_ms`, and when the oldest was sent.
pub fn wrong_claim_attempts(
    conn: &Connection,
    agent: &str,
    channel: &str,
    user: &str,
    since_ms: i64,
) -> Result<(u32, Option<i64>)> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*), MIN(at_ms) FROM channel_claim_attempts
              WHERE agent = ?1 AND channel = ?2 AND user = ?3 AND at_ms > ?4",
        )?
        .query_row(params![agent, channel, user, since_ms], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?)
}

/// Records a wrong claim code and forgets attempts older than `since_ms` (of anyone, for this
/// agent and channel).
pub fn record_wrong_claim_attempt(
    conn: &Connection,
    agent: &str,
    channel: &str,
    user: &str,
    since_ms: i64,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "DELETE FROM channel_claim_attempts WHERE agent = ?1 AND channel = ?2 AND at_ms <= ?3",
    )?
    .execute(params![agent, channel, since_ms])?;
    conn.prepare_cached(
        "INSERT INTO channel_claim_attempts (agent, channel, user, at_ms) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![agent, channel, user, now_ms])?;
    Ok(())
}

/// Every account's claim code.
pub fn claims(conn: &Connection) -> Result<Vec<ChannelClaim>> {
    let mut statement = conn.prepare_cached(
        "SELECT agent, channel, code, created_ms, expires_ms, claimed_ms FROM channel_claims ORDER BY agent, channel",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(ChannelClaim {
            agent: row.get(0)?,
            channel: row.get(1)?,
            code: row.get(2)?,
            created_ms: row.get(3)?,
            expires_ms: row.get(4)?,
            claimed_ms: row.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Stores a new live code (replacing an expired or unused one).
pub fn put_claim(conn: &Connection, claim: &ChannelClaim) -> Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO channel_claims (agent, channel, code, created_ms, expires_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        claim.agent,
        claim.channel,
        claim.code,
        claim.created_ms,
        claim.expires_ms
    ])?;
    Ok(())
}

/// Uses the code for `user`; false when it was used already.
pub fn consume_claim(
    conn: &Connection,
    agent: &str,
    channel: &str,
    user: &str,
    now_ms: i64,
) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "UPDATE channel_claims SET claimed_ms = ?4, claimed_by = ?3
              WHERE agent = ?1 AND channel = ?2 AND claimed_ms IS NULL",
        )?
        .execute(params![agent, channel, user, now_ms])?
        == 1)
}

/// A pairing request on a seam channel (`channel_pairings`): a stranger's code, until an
/// approver decides it or it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelPairing {
    /// As stored: 8 characters, no dash.
    pub code: String,
    pub agent: String,
    pub channel: String,
    pub user: String,
    pub name: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub approved_ms: Option<i64>,
    pub denied_ms: Option<i64>,
}

const PAIRING_COLUMNS: &str =
    "code, agent, channel, user, name, created_ms, expires_ms, approved_ms, denied_ms";

fn pairing_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ChannelPairing> {
    Ok(ChannelPairing {
        code: row.get(0)?,
        agent: row.get(1)?,
        channel: row.get(2)?,
        user: row.get(3)?,
        name: row.get(4)?,
        created_ms: row.get(5)?,
        expires_ms: row.get(6)?,
        approved_ms: row.get(7)?,
        denied_ms: row.get(8)?,
    })
}

/// The person's request that still stands (not approved, not expired; a denied one stands until
/// it expires, so that its person is not answered again meanwhile).
pub fn live_pairing(
    conn: &Connection,
    agent: &str,
    channel: &str,
    user: &str,
    now_ms: i64,
) -> Result<Option<ChannelPairing>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PAIRING_COLUMNS} FROM channel_pairings
              WHERE agent = ?1 AND channel = ?2 AND user = ?3 AND approved_ms IS NULL AND expires_ms > ?4
              ORDER BY created_ms DESC LIMIT 1"
        ))?
        .query_row(params![agent, channel, user, now_ms], pairing_from_row)
        .optional()?)
}

pub fn create_pairing(conn: &Connection, pairing: &ChannelPairing) -> Result<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO channel_pairings ({PAIRING_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, NULL)"
    ))?
    .execute(params![
        pairing.code,
        pairing.agent,
        pairing.channel,
        pairing.user,
        pairing.name,
        pairing.created_ms,
        pairing.expires_ms
    ])?;
    Ok(())
}

/// Requests waiting for an answer (not decided, not expired), oldest first (Studio).
pub fn pending_pairings(conn: &Connection, now_ms: i64) -> Result<Vec<ChannelPairing>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {PAIRING_COLUMNS} FROM channel_pairings
          WHERE approved_ms IS NULL AND denied_ms IS NULL AND expires_ms > ?1 ORDER BY created_ms"
    ))?;
    let rows = statement.query_map(params![now_ms], pairing_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The request waiting for an answer under `code` (dashes, spaces and case ignored), of this
/// agent and channel when given.
pub fn pending_pairing(
    conn: &Connection,
    code: &str,
    agent: Option<&str>,
    channel: Option<&str>,
    now_ms: i64,
) -> Result<Option<ChannelPairing>> {
    let code = super::telegram::normalize_code(code);
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {PAIRING_COLUMNS} FROM channel_pairings
              WHERE code = ?1 AND (?2 IS NULL OR agent = ?2) AND (?3 IS NULL OR channel = ?3)
                AND approved_ms IS NULL AND denied_ms IS NULL AND expires_ms > ?4"
        ))?
        .query_row(params![code, agent, channel, now_ms], pairing_from_row)
        .optional()?)
}

/// Records the answer to a pending request; approving also allows its person
/// (`channel_people`, `allowed`).
pub fn decide_pairing(
    conn: &Connection,
    pairing: &ChannelPairing,
    approve: bool,
    by: &str,
    now_ms: i64,
) -> Result<()> {
    let statement = match approve {
        true => "UPDATE channel_pairings SET approved_ms = ?2, approved_by = ?3 WHERE code = ?1",
        false => "UPDATE channel_pairings SET denied_ms = ?2, denied_by = ?3 WHERE code = ?1",
    };
    conn.prepare_cached(statement)?
        .execute(params![pairing.code, now_ms, by])?;
    if approve {
        set_person(
            conn,
            &ChannelPerson {
                agent: pairing.agent.clone(),
                channel: pairing.channel.clone(),
                user: pairing.user.clone(),
                name: pairing.name.clone(),
                status: ChannelPersonStatus::Allowed,
                changed_ms: now_ms,
                changed_by: by.to_string(),
            },
        )?;
    }
    Ok(())
}

//! Studio's own tables (`studio_login_links`, `studio_sessions`, `agent_skill_toggles`) and the
//! read-only summaries its pages show (costs, policy decisions).
//!
//! Login links and session cookies are bearer secrets: only their SHA-256 is stored. A login link
//! is used at most once (the `used_ms` update is the claim); a session lives until it expires or
//! is logged out.

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::Result;

/// How long a login link stays usable.
pub const LOGIN_LINK_TTL_MS: i64 = 15 * 60 * 1000;
/// How long a browser session lasts.
pub const SESSION_TTL_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// A fresh random secret (32 bytes, hex).
pub fn new_secret() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Stores a new one-time login link and returns its secret (shown once, never stored).
pub fn create_login_link(conn: &Connection, created_by: &str, now_ms: i64) -> Result<String> {
    let secret = new_secret();
    conn.execute(
        "INSERT INTO studio_login_links (token_hash, created_ms, expires_ms, created_by)
         VALUES (?1, ?2, ?3, ?4)",
        params![
            hash_secret(&secret),
            now_ms,
            now_ms + LOGIN_LINK_TTL_MS,
            created_by
        ],
    )?;
    // Old links are of no use; keep the table small.
    conn.execute(
        "DELETE FROM studio_login_links WHERE expires_ms < ?1",
        params![now_ms - LOGIN_LINK_TTL_MS],
    )?;
    Ok(secret)
}

/// A browser session: the cookie's secret and its CSRF token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub cookie: String,
    pub csrf: String,
    pub expires_ms: i64,
}

/// Uses a login link: when it exists, is unused and not expired, marks it used and opens a session
/// (one write job: the writer runs it in one transaction). `None` when the link is not (or no
/// longer) valid.
pub fn redeem_login_link(
    conn: &Connection,
    secret: &str,
    now_ms: i64,
) -> Result<Option<NewSession>> {
    let claimed = conn.execute(
        "UPDATE studio_login_links SET used_ms = ?2
         WHERE token_hash = ?1 AND used_ms IS NULL AND expires_ms > ?2",
        params![hash_secret(secret), now_ms],
    )?;
    if claimed == 0 {
        return Ok(None);
    }
    let session = NewSession {
        cookie: new_secret(),
        csrf: new_secret(),
        expires_ms: now_ms + SESSION_TTL_MS,
    };
    conn.execute(
        "INSERT INTO studio_sessions (token_hash, csrf, created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4)",
        params![
            hash_secret(&session.cookie),
            session.csrf,
            now_ms,
            session.expires_ms
        ],
    )?;
    conn.execute(
        "DELETE FROM studio_sessions WHERE expires_ms < ?1",
        params![now_ms],
    )?;
    Ok(Some(session))
}

/// The CSRF token of a live session, by its cookie secret.
pub fn session_csrf(conn: &Connection, cookie: &str, now_ms: i64) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT csrf FROM studio_sessions
             WHERE token_hash = ?1 AND revoked_ms IS NULL AND expires_ms > ?2",
        )?
        .query_row(params![hash_secret(cookie), now_ms], |row| row.get(0))
        .optional()?)
}

pub fn end_session(conn: &Connection, cookie: &str, now_ms: i64) -> Result<()> {
    conn.execute(
        "UPDATE studio_sessions SET revoked_ms = ?2 WHERE token_hash = ?1 AND revoked_ms IS NULL",
        params![hash_secret(cookie), now_ms],
    )?;
    Ok(())
}

/// The operator's skill toggles for one agent: (skill, enabled).
pub fn skill_toggles(conn: &Connection, agent: &str) -> Result<Vec<(String, bool)>> {
    let mut statement = conn.prepare_cached(
        "SELECT skill, enabled FROM agent_skill_toggles WHERE agent = ?1 ORDER BY skill",
    )?;
    let rows = statement.query_map(params![agent], |row| Ok((row.get(0)?, row.get(1)?)))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

pub fn set_skill_toggle(
    conn: &Connection,
    agent: &str,
    skill: &str,
    enabled: bool,
    now_ms: i64,
) -> Result<()> {
    conn.execute(
        "INSERT INTO agent_skill_toggles (agent, skill, enabled, updated_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (agent, skill) DO UPDATE SET enabled = excluded.enabled, updated_ms = excluded.updated_ms",
        params![agent, skill, enabled, now_ms],
    )?;
    Ok(())
}

/// Forgets an agent's skill toggles (they moved into its file).
pub fn clear_skill_toggles(conn: &Connection, agent: &str) -> Result<()> {
    conn.execute(
        "DELETE FROM agent_skill_toggles WHERE agent = ?1",
        params![agent],
    )?;
    Ok(())
}

/// Spending summed over a group: tokens and dollars.
#[derive(Debug, Clone, PartialEq)]
pub struct CostLine {
    /// The group's key: a day, an agent, or `provider/model`.
    pub key: String,
    pub cost_usd: f64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Tokens (input plus output) of calls on models without a price (`cost_events.unpriced`).
    pub unpriced_tokens: i64,
}

/// Costs from `since_day` (YYYY-MM-DD, UTC) on, grouped by `group` (`day`, `agent` or `model`).
pub fn costs(conn: &Connection, since_day: &str, group: CostGroup) -> Result<Vec<CostLine>> {
    let (key, order) = match group {
        CostGroup::Day => ("day", "day"),
        CostGroup::Agent => ("agent", "SUM(cost_usd) DESC"),
        CostGroup::Model => ("provider || '/' || model", "SUM(cost_usd) DESC"),
    };
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {key}, SUM(cost_usd), SUM(input_tokens), SUM(output_tokens),
         SUM(CASE WHEN unpriced THEN input_tokens + output_tokens ELSE 0 END) FROM cost_events
         WHERE day >= ?1 GROUP BY {key} ORDER BY {order}"
    ))?;
    let rows = statement.query_map(params![since_day], |row| {
        Ok(CostLine {
            key: row.get(0)?,
            cost_usd: row.get(1)?,
            input_tokens: row.get(2)?,
            output_tokens: row.get(3)?,
            unpriced_tokens: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostGroup {
    Day,
    Agent,
    Model,
}

/// Runs started since `since_ms`.
pub fn runs_since(conn: &Connection, since_ms: i64) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT COUNT(*) FROM runs WHERE started_ms >= ?1")?
        .query_row(params![since_ms], |row| row.get(0))?)
}

/// One policy decision recorded in a run: (run id, agent, at, detail JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionRow {
    pub run_id: i64,
    pub agent: String,
    pub at_ms: i64,
    pub tool: Option<String>,
    pub detail: String,
}

/// The newest policy decisions across runs.
pub fn decisions(conn: &Connection, limit: u32) -> Result<Vec<DecisionRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT s.run_id, r.agent, s.created_ms, s.name, s.detail FROM run_steps s
         JOIN runs r ON r.id = s.run_id WHERE s.kind = 'decision' ORDER BY s.id DESC LIMIT ?1",
    )?;
    let rows = statement.query_map(params![limit], |row| {
        Ok(DecisionRow {
            run_id: row.get(0)?,
            agent: row.get(1)?,
            at_ms: row.get(2)?,
            tool: row.get(3)?,
            detail: row.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

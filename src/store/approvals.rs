//! Queries for `approvals`, `grants` and `policy_rules`; and the screenshots kept with
//! approval requests (`<data dir>/approval-screenshots/<approval id>.png`, files beside the
//! database rather than rows, kept [`SCREENSHOT_DAYS`] days).

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;
use crate::policy::RiskLevel;

stored_text_enum! {
    /// Where an approval request stands. Only `Pending` can be decided; only `Approved` can be
    /// consumed (exactly once, as its action starts).
    pub enum ApprovalStatus {
        /// Waiting for a human.
        Pending => "pending",
        /// A human allowed it; the action has not started yet.
        Approved => "approved",
        /// A human refused it.
        Denied => "denied",
        /// Nobody decided before it expired.
        DeniedTimeout => "denied_timeout",
        /// No approver could be reached when it was asked, so it was refused at once.
        DeniedUnreachable => "denied_unreachable",
        /// Approved and started: it never runs again from this approval.
        Consumed => "consumed",
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    pub id: String,
    pub agent: String,
    pub chat: String,
    pub run_id: i64,
    pub call_id: String,
    pub tool: String,
    pub action: String,
    pub action_hash: String,
    pub target: String,
    pub risk: RiskLevel,
    pub reason: String,
    pub requested_ms: i64,
    pub expires_ms: i64,
    pub status: ApprovalStatus,
    pub decided_ms: Option<i64>,
    pub decided_by: Option<String>,
    pub consumed_ms: Option<i64>,
    pub tg_chat_id: Option<i64>,
    pub tg_message_id: Option<i64>,
}

const COLUMNS: &str = "id, agent, chat, run_id, call_id, tool, action, action_hash, target, risk, reason, \
    requested_ms, expires_ms, status, decided_ms, decided_by, consumed_ms, tg_chat_id, tg_message_id";

fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRow> {
    Ok(ApprovalRow {
        id: row.get(0)?,
        agent: row.get(1)?,
        chat: row.get(2)?,
        run_id: row.get(3)?,
        call_id: row.get(4)?,
        tool: row.get(5)?,
        action: row.get(6)?,
        action_hash: row.get(7)?,
        target: row.get(8)?,
        risk: row.get(9)?,
        reason: row.get(10)?,
        requested_ms: row.get(11)?,
        expires_ms: row.get(12)?,
        status: row.get(13)?,
        decided_ms: row.get(14)?,
        decided_by: row.get(15)?,
        consumed_ms: row.get(16)?,
        tg_chat_id: row.get(17)?,
        tg_message_id: row.get(18)?,
    })
}

pub fn insert(conn: &Connection, row: &ApprovalRow) -> Result<()> {
    conn.execute(
        &format!("INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"),
        params![
            row.id, row.agent, row.chat, row.run_id, row.call_id, row.tool, row.action, row.action_hash, row.target,
            row.risk, row.reason, row.requested_ms, row.expires_ms, row.status, row.decided_ms, row.decided_by,
            row.consumed_ms, row.tg_chat_id, row.tg_message_id
        ],
    )?;
    Ok(())
}

pub fn get(conn: &Connection, id: &str) -> Result<Option<ApprovalRow>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM approvals WHERE id = ?1"))?
        .query_row(params![id], from_row)
        .optional()?)
}

pub fn for_call(conn: &Connection, run_id: i64, call_id: &str) -> Result<Option<ApprovalRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM approvals WHERE run_id = ?1 AND call_id = ?2"
        ))?
        .query_row(params![run_id, call_id], from_row)
        .optional()?)
}

pub fn pending(conn: &Connection) -> Result<Vec<ApprovalRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM approvals WHERE status = 'pending' ORDER BY expires_ms"
    ))?;
    let rows = statement.query_map([], from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Newest first, optionally one status (Studio's inbox and history).
pub fn list(
    conn: &Connection,
    status: Option<ApprovalStatus>,
    limit: u32,
) -> Result<Vec<ApprovalRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM approvals WHERE (?1 IS NULL OR status = ?1) ORDER BY requested_ms DESC LIMIT ?2"
    ))?;
    let rows = statement.query_map(params![status, limit], from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Moves a pending approval to `status`; false when it was no longer pending.
pub fn decide(
    conn: &Connection,
    id: &str,
    status: ApprovalStatus,
    by: &str,
    now_ms: i64,
) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE approvals SET status = ?2, decided_ms = ?3, decided_by = ?4 WHERE id = ?1 AND status = 'pending'",
        params![id, status, now_ms, by],
    )?;
    Ok(changed == 1)
}

/// Marks an approved action as about to run. Exactly one caller ever gets `true`.
pub fn consume(conn: &Connection, id: &str, now_ms: i64) -> Result<bool> {
    let changed = conn.execute(
        "UPDATE approvals SET status = 'consumed', consumed_ms = ?2 WHERE id = ?1 AND status = 'approved'",
        params![id, now_ms],
    )?;
    Ok(changed == 1)
}

pub fn set_posted(conn: &Connection, id: &str, chat_id: i64, message_id: i64) -> Result<()> {
    conn.execute(
        "UPDATE approvals SET tg_chat_id = ?2, tg_message_id = ?3 WHERE id = ?1",
        params![id, chat_id, message_id],
    )?;
    Ok(())
}

/// Whether the decision on approval `id` gave a grant.
pub fn granted(conn: &Connection, id: &str) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT EXISTS(SELECT 1 FROM grants WHERE approval_id = ?1)",
        params![id],
        |row| row.get(0),
    )?)
}

#[derive(Debug, Clone, PartialEq)]
pub struct GrantRow {
    pub id: i64,
    pub agent: String,
    pub chat: String,
    pub tool: String,
    pub target: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    pub created_by: String,
    pub approval_id: Option<String>,
    pub revoked_ms: Option<i64>,
    /// The agent's workspace generation the grant was given in (`None`: given before generations
    /// were kept; never honoured).
    pub workspace_generation: Option<i64>,
    /// When something that wrote in the workspace made it lapse, and why, in words.
    pub lapsed_ms: Option<i64>,
    pub lapsed_reason: Option<String>,
}

/// A grant: for a while, this exact action (`action_hash`: the tool and its canonical arguments)
/// runs again in this chat without asking — until something else writes in the agent's workspace
/// (`crate::store::workspace`). `target` is kept for display only.
pub struct NewGrant<'a> {
    pub agent: &'a str,
    pub chat: &'a str,
    pub tool: &'a str,
    pub target: &'a str,
    pub action_hash: &'a str,
    pub expires_ms: i64,
    pub created_by: &'a str,
    pub approval_id: Option<&'a str>,
}

/// Stores a grant given now, in the agent's current workspace generation (read in the caller's
/// transaction); answers its id and that generation.
pub fn create_grant(conn: &Connection, grant: &NewGrant<'_>, now_ms: i64) -> Result<(i64, i64)> {
    let generation = super::workspace::generation(conn, grant.agent)?;
    conn.execute(
        "INSERT INTO grants (agent, chat, tool, target, created_ms, expires_ms, created_by, approval_id, action_hash,
                             workspace_generation)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            grant.agent,
            grant.chat,
            grant.tool,
            grant.target,
            now_ms,
            grant.expires_ms,
            grant.created_by,
            grant.approval_id,
            grant.action_hash,
            generation
        ],
    )?;
    Ok((conn.last_insert_rowid(), generation))
}

/// What makes a grant honoured, as SQL over `grants`: not revoked, not expired (`?now`), not
/// lapsed, and given in the agent's current workspace generation.
const HONOURED: &str = "revoked_ms IS NULL AND lapsed_ms IS NULL AND expires_ms > :now
    AND workspace_generation = COALESCE(
        (SELECT generation FROM workspace_generations WHERE workspace_generations.agent = grants.agent), 0)";

/// A live grant covering exactly this action (tool and arguments, by hash) in this chat, given in
/// the agent's current workspace generation.
pub fn live_grant(
    conn: &Connection,
    agent: &str,
    chat: &str,
    tool: &str,
    action_hash: &str,
    now_ms: i64,
) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT id FROM grants WHERE agent = :agent AND chat = :chat AND tool = :tool
             AND action_hash = :hash AND {HONOURED} ORDER BY id DESC LIMIT 1"
        ))?
        .query_row(
            rusqlite::named_params! {":agent": agent, ":chat": chat, ":tool": tool, ":hash": action_hash, ":now": now_ms},
            |row| row.get(0),
        )
        .optional()?)
}

/// The newest grant of exactly this action in this chat that lapsed because something wrote in
/// the workspace and has not expired: its id and the reason (so a prompt can say why it asks again).
pub fn lapsed_grant(
    conn: &Connection,
    agent: &str,
    chat: &str,
    tool: &str,
    action_hash: &str,
    now_ms: i64,
) -> Result<Option<(i64, String)>> {
    Ok(conn
        .prepare_cached(
            "SELECT id, lapsed_reason FROM grants WHERE agent = ?1 AND chat = ?2 AND tool = ?3
             AND action_hash = ?4 AND revoked_ms IS NULL AND lapsed_ms IS NOT NULL AND expires_ms > ?5
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![agent, chat, tool, action_hash, now_ms], |row| {
            Ok((row.get(0)?, row.get::<_, Option<String>>(1)?.unwrap_or_default()))
        })
        .optional()?)
}

/// Whether grant `id` is still honoured now (checked again just before a call it cleared runs).
pub fn grant_is_live(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT 1 FROM grants WHERE id = :id AND {HONOURED}"
        ))?
        .query_row(rusqlite::named_params! {":id": id, ":now": now_ms}, |_| {
            Ok(())
        })
        .optional()?
        .is_some())
}

/// Grants newest first: those not revoked and not expired (lapsed ones included, so a list can say
/// why they no longer apply), or every one with `include_expired`.
pub fn grants(conn: &Connection, include_expired: bool, now_ms: i64) -> Result<Vec<GrantRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, agent, chat, tool, target, created_ms, expires_ms, created_by, approval_id, revoked_ms,
                workspace_generation, lapsed_ms, lapsed_reason FROM grants
         WHERE ?1 OR (revoked_ms IS NULL AND expires_ms > ?2) ORDER BY id DESC LIMIT 500",
    )?;
    let rows = statement.query_map(params![include_expired, now_ms], |row| {
        Ok(GrantRow {
            id: row.get(0)?,
            agent: row.get(1)?,
            chat: row.get(2)?,
            tool: row.get(3)?,
            target: row.get(4)?,
            created_ms: row.get(5)?,
            expires_ms: row.get(6)?,
            created_by: row.get(7)?,
            approval_id: row.get(8)?,
            revoked_ms: row.get(9)?,
            workspace_generation: row.get(10)?,
            lapsed_ms: row.get(11)?,
            lapsed_reason: row.get(12)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

pub fn revoke_grant(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    Ok(conn.execute(
        "UPDATE grants SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms IS NULL",
        params![id, now_ms],
    )? == 1)
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleRow {
    pub id: i64,
    pub effect: String,
    pub tool: Option<String>,
    pub agent: Option<String>,
    pub channel: Option<String>,
    pub pattern: Option<String>,
    pub description: String,
    pub created_ms: i64,
    pub created_by: String,
}

pub fn rules(conn: &Connection) -> Result<Vec<RuleRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, effect, tool, agent, channel, pattern, description, created_ms, created_by FROM policy_rules
         WHERE disabled_ms IS NULL ORDER BY id",
    )?;
    let rows = statement.query_map([], |row| {
        Ok(RuleRow {
            id: row.get(0)?,
            effect: row.get(1)?,
            tool: row.get(2)?,
            agent: row.get(3)?,
            channel: row.get(4)?,
            pattern: row.get(5)?,
            description: row.get(6)?,
            created_ms: row.get(7)?,
            created_by: row.get(8)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

#[allow(clippy::too_many_arguments)]
pub fn add_rule(
    conn: &Connection,
    effect: &str,
    tool: Option<&str>,
    agent: Option<&str>,
    channel: Option<&str>,
    pattern: Option<&str>,
    description: &str,
    by: &str,
    now_ms: i64,
) -> Result<i64> {
    conn.execute(
        "INSERT INTO policy_rules (effect, tool, agent, channel, pattern, description, created_ms, created_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![effect, tool, agent, channel, pattern, description, now_ms, by],
    )?;
    Ok(conn.last_insert_rowid())
}

pub fn disable_rule(conn: &Connection, id: i64, now_ms: i64) -> Result<bool> {
    Ok(conn.execute(
        "UPDATE policy_rules SET disabled_ms = ?2 WHERE id = ?1 AND disabled_ms IS NULL",
        params![id, now_ms],
    )? == 1)
}

impl RuleRow {
    /// Whether this rule applies to a call. `tool` in a rule may end with `*` (prefix match).
    pub fn matches(&self, agent: &str, tool: &str, channel: &str, action: &str) -> bool {
        let tool_ok = match self.tool.as_deref() {
            None | Some("*") => true,
            Some(pattern) if pattern.ends_with('*') => {
                tool.starts_with(&pattern[..pattern.len() - 1])
            }
            Some(exact) => exact == tool,
        };
        tool_ok
            && self.agent.as_deref().is_none_or(|a| a == agent)
            && self.channel.as_deref().is_none_or(|c| c == channel)
            && self.pattern.as_deref().is_none_or(|p| action.contains(p))
    }
}

/// How long an approval's screenshot is kept.
pub const SCREENSHOT_DAYS: u64 = 14;

/// Where the screenshots of approval requests are kept, beside the database.
pub fn screenshot_dir(database: &Path) -> PathBuf {
    database
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("approval-screenshots")
}

/// The screenshot file of approval `id`; `None` when `id` is not an approval id's shape
/// (letters and digits only), so no caller can name another path.
pub fn screenshot_path(database: &Path, id: &str) -> Option<PathBuf> {
    let valid = !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric());
    valid.then(|| screenshot_dir(database).join(format!("{id}.png")))
}

/// Writes approval `id`'s screenshot, and removes those older than [`SCREENSHOT_DAYS`].
pub fn save_screenshot(database: &Path, id: &str, png: &[u8]) -> std::io::Result<()> {
    let path = screenshot_path(database, id).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "not an approval id")
    })?;
    let directory = screenshot_dir(database);
    std::fs::create_dir_all(&directory)?;
    let keep = Duration::from_secs(SCREENSHOT_DAYS * 24 * 3600);
    for entry in std::fs::read_dir(&directory)?.flatten() {
        let old = entry
            .metadata()
            .and_then(|metadata| metadata.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > keep);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    std::fs::write(path, png)
}

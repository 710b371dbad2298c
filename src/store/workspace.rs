//! Workspace generations: one counter per agent that moves on whenever something could have
//! written into the agent's workspace, and the grants that lapse when it does.
//!
//! Architecture Invariant: a grant is honoured only while the workspace generation it was given in
//! (`grants.workspace_generation`) is the agent's current one ([`super::approvals::live_grant`]).
//! [`record_write`] moves the generation and marks every grant it leaves behind as lapsed, with the
//! reason, in the caller's transaction — the one that records the write — so a crash never loses a
//! bump. Only the grants of exactly the action that wrote (the same tool and arguments, by hash, in
//! the same chat) move on with it: an action the human allowed for a while may change the workspace
//! itself without lapsing its own grant, never anyone else's.

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;

/// The agent's workspace generation (0 until anything wrote).
pub fn generation(conn: &Connection, agent: &str) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT generation FROM workspace_generations WHERE agent = ?1")?
        .query_row(params![agent], |row| row.get(0))
        .optional()?
        .unwrap_or(0))
}

/// What last moved the agent's generation: (generation, when, what wrote, in words).
pub fn last_write(conn: &Connection, agent: &str) -> Result<Option<(i64, i64, String)>> {
    Ok(conn
        .prepare_cached(
            "SELECT generation, changed_ms, changed_by FROM workspace_generations WHERE agent = ?1",
        )?
        .query_row(params![agent], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?)
}

/// Something that could have written into an agent's workspace.
#[derive(Debug, Clone, Copy)]
pub struct WorkspaceWrite<'a> {
    pub agent: &'a str,
    /// What wrote, in words an operator reads ("write_file in run 12", "a file sent in a chat was saved").
    pub what: &'a str,
    /// The action that wrote (tool and arguments, by hash) and its chat, when it was a tool call:
    /// its own live grants move on with the generation instead of lapsing.
    pub action: Option<(&'a str, &'a str)>,
}

/// A grant that lapsed because of a write: its id and the reason recorded with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lapsed {
    pub grant: i64,
    pub reason: String,
}

/// Moves the agent's generation on and lapses every live grant given in the old one (except the
/// writing action's own); returns the grants that lapsed. Call it in the transaction that records
/// the write.
pub fn record_write(
    conn: &Connection,
    write: &WorkspaceWrite<'_>,
    now_ms: i64,
) -> Result<Vec<Lapsed>> {
    let old = generation(conn, write.agent)?;
    let new = old + 1;
    conn.execute(
        "INSERT INTO workspace_generations (agent, generation, changed_ms, changed_by) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (agent) DO UPDATE SET generation = ?2, changed_ms = ?3, changed_by = ?4",
        params![write.agent, new, now_ms, write.what],
    )?;
    if let Some((action_hash, chat)) = write.action {
        conn.execute(
            "UPDATE grants SET workspace_generation = ?1
             WHERE agent = ?2 AND chat = ?3 AND action_hash = ?4 AND workspace_generation = ?5
               AND revoked_ms IS NULL AND lapsed_ms IS NULL AND expires_ms > ?6",
            params![new, write.agent, chat, action_hash, old, now_ms],
        )?;
    }
    let reason = format!(
        "Something wrote in the workspace after it was given ({}), so the same action asks again.",
        write.what
    );
    let lapsed: Vec<i64> = conn
        .prepare_cached(
            "SELECT id FROM grants WHERE agent = ?1 AND workspace_generation = ?2
               AND revoked_ms IS NULL AND lapsed_ms IS NULL AND expires_ms > ?3 ORDER BY id",
        )?
        .query_map(params![write.agent, old, now_ms], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for grant in &lapsed {
        conn.execute(
            "UPDATE grants SET lapsed_ms = ?2, lapsed_reason = ?3 WHERE id = ?1",
            params![grant, now_ms, reason],
        )?;
    }
    Ok(lapsed
        .into_iter()
        .map(|grant| Lapsed {
            grant,
            reason: reason.clone(),
        })
        .collect())
}

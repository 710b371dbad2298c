//! Reading the audit log with filters, for Studio's Audit page: by actor, by action (one action
//! or a family such as `approval.*`), by agent, by subject and by time, newest first; and what the
//! filters can choose from ([`facets`]).
//!
//! An entry is *about an agent* when the agent did it (`actor = agent:<name>`), it names the
//! agent as its subject (`agent:<name>`) or in its details (`"agent": "<name>"`), or its subject
//! is one of the agent's approvals (`approval.decided`, `approval.expired` name only the
//! approval) or grants (`grant:<id>`). Reading never changes the log.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params_from_iter};

use super::AuditEntry;
use crate::store::Result;

/// Which entries to read. Every `None` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Exactly this actor (`operator`, `system`, `agent:ada`, `telegram:42`).
    pub actor: Option<String>,
    /// Exactly this action, or every action of a family when it ends in `.*` (`approval.*`).
    pub action: Option<String>,
    /// Entries by or about this agent (see the module's header).
    pub agent: Option<String>,
    /// Exactly this subject (`run:12`, `job:3`, an approval's id).
    pub subject: Option<String>,
    /// Entries at or after this time (ms since the epoch).
    pub since_ms: Option<i64>,
    /// Entries before this time (ms since the epoch).
    pub until_ms: Option<i64>,
}

/// Up to `limit` entries matching `filter` with an id below `before_id`, newest first.
pub fn matching(
    conn: &Connection,
    filter: &AuditFilter,
    before_id: Option<i64>,
    limit: u32,
) -> Result<Vec<AuditEntry>> {
    let mut clauses: Vec<&str> = Vec::new();
    let mut values: Vec<SqlValue> = Vec::new();
    let mut add = |clause: &'static str, parameters: &[SqlValue]| {
        clauses.push(clause);
        values.extend_from_slice(parameters);
    };
    if let Some(before) = before_id {
        add("id < ?", &[before.into()]);
    }
    if let Some(actor) = &filter.actor {
        add("actor = ?", &[actor.clone().into()]);
    }
    if let Some(action) = &filter.action {
        match action.strip_suffix('*') {
            Some(family) => add(
                "substr(action, 1, length(?)) = ?",
                &[family.to_string().into(), family.to_string().into()],
            ),
            None => add("action = ?", &[action.clone().into()]),
        }
    }
    if let Some(agent) = &filter.agent {
        let tagged: SqlValue = format!("agent:{agent}").into();
        let name: SqlValue = agent.clone().into();
        add(
            "(actor = ? OR subject = ?
              OR (json_valid(details) AND json_extract(details, '$.agent') = ?)
              OR subject IN (SELECT id FROM approvals WHERE agent = ?)
              OR subject IN (SELECT 'grant:' || id FROM grants WHERE agent = ?))",
            &[tagged.clone(), tagged, name.clone(), name.clone(), name],
        );
    }
    if let Some(subject) = &filter.subject {
        add("subject = ?", &[subject.clone().into()]);
    }
    if let Some(since) = filter.since_ms {
        add("at_ms >= ?", &[since.into()]);
    }
    if let Some(until) = filter.until_ms {
        add("at_ms < ?", &[until.into()]);
    }
    let condition = if clauses.is_empty() {
        "1".to_string()
    } else {
        clauses.join(" AND ")
    };
    values.push(i64::from(limit).into());
    let sql = format!(
        "SELECT id, at_ms, actor, action, subject, details, prev_hash, hash FROM audit_log
         WHERE {condition} ORDER BY id DESC LIMIT ?"
    );
    let mut statement = conn.prepare_cached(&sql)?;
    let rows = statement.query_map(params_from_iter(values), |row| {
        Ok(AuditEntry {
            id: row.get(0)?,
            at_ms: row.get(1)?,
            actor: row.get(2)?,
            action: row.get(3)?,
            subject: row.get(4)?,
            details: row.get(5)?,
            prev_hash: row.get(6)?,
            hash: row.get(7)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
}

/// What the log's filters can choose from: each actor and each action with its number of
/// entries, most entries first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facets {
    pub actors: Vec<(String, i64)>,
    pub actions: Vec<(String, i64)>,
}

/// The actors and actions in the log, with their counts.
pub fn facets(conn: &Connection) -> Result<Facets> {
    let count = |column: &str| -> Result<Vec<(String, i64)>> {
        let mut statement = conn.prepare_cached(&format!(
            "SELECT {column}, COUNT(*) FROM audit_log GROUP BY {column} ORDER BY COUNT(*) DESC, {column}"
        ))?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<std::result::Result<Vec<_>, _>>()?)
    };
    Ok(Facets {
        actors: count("actor")?,
        actions: count("action")?,
    })
}

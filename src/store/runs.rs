//! Queries for `runs`, `run_steps`, `cost_events` and `agent_settings` (the outbox is `outbox.rs`).

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;

stored_text_enum! {
    /// Where a run stands.
    pub enum RunStatus {
        Running => "running",
        WaitingApproval => "waiting_approval",
        Succeeded => "succeeded",
        Failed => "failed",
        Cancelled => "cancelled",
        Interrupted => "interrupted",
        BudgetStopped => "budget_stopped",
    }
}

impl RunStatus {
    pub fn is_open(self) -> bool {
        matches!(self, RunStatus::Running | RunStatus::WaitingApproval)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub session_id: i64,
    pub agent: String,
    pub chat: String,
    pub status: RunStatus,
    pub trigger: String,
    pub started_ms: i64,
    pub finished_ms: Option<i64>,
    pub model: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    pub turns: i64,
    pub outcome: Option<String>,
    pub correlation: Option<String>,
    /// Some model call of the run had no price (its cost counted as 0).
    pub unpriced: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub id: i64,
    pub run_id: i64,
    pub seq: i64,
    pub kind: String,
    pub name: Option<String>,
    pub detail: String,
    pub tokens_in: Option<i64>,
    pub tokens_out: Option<i64>,
    pub cost_usd: Option<f64>,
    pub duration_ms: Option<i64>,
    pub created_ms: i64,
}

/// A step to record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NewStep {
    pub kind: &'static str,
    pub name: Option<String>,
    pub detail: serde_json::Value,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub cost_usd: Option<f64>,
    pub duration_ms: Option<u64>,
}

const RUN_COLUMNS: &str = "id, session_id, agent, chat, status, trigger, started_ms, finished_ms, model, \
    input_tokens, output_tokens, cost_usd, turns, outcome, correlation, unpriced";

fn run_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: row.get(0)?,
        session_id: row.get(1)?,
        agent: row.get(2)?,
        chat: row.get(3)?,
        status: row.get(4)?,
        trigger: row.get(5)?,
        started_ms: row.get(6)?,
        finished_ms: row.get(7)?,
        model: row.get(8)?,
        input_tokens: row.get(9)?,
        output_tokens: row.get(10)?,
        cost_usd: row.get(11)?,
        turns: row.get(12)?,
        outcome: row.get(13)?,
        correlation: row.get(14)?,
        unpriced: row.get(15)?,
    })
}

pub fn create(
    conn: &Connection,
    session_id: i64,
    agent: &str,
    chat: &str,
    trigger: &str,
    correlation: Option<&str>,
    now_ms: i64,
) -> Result<i64> {
    conn.prepare_cached(
        "INSERT INTO runs (session_id, agent, chat, status, trigger, started_ms, correlation)
         VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6)",
    )?
    .execute(params![
        session_id,
        agent,
        chat,
        trigger,
        now_ms,
        correlation
    ])?;
    Ok(conn.last_insert_rowid())
}

pub fn get(conn: &Connection, run_id: i64) -> Result<Option<RunRow>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
        .query_row(params![run_id], run_from_row)
        .optional()?)
}

pub fn set_status(conn: &Connection, run_id: i64, status: RunStatus) -> Result<()> {
    conn.prepare_cached("UPDATE runs SET status = ?2 WHERE id = ?1")?
        .execute(params![run_id, status.as_str()])?;
    Ok(())
}

/// Closes a run with its outcome text.
pub fn finish(
    conn: &Connection,
    run_id: i64,
    status: RunStatus,
    outcome: &str,
    now_ms: i64,
) -> Result<()> {
    conn.prepare_cached(
        "UPDATE runs SET status = ?2, outcome = ?3, finished_ms = ?4 WHERE id = ?1",
    )?
    .execute(params![run_id, status.as_str(), outcome, now_ms])?;
    Ok(())
}

/// One model call's usage: tokens, dollars, and whether the model had a price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// No price was known: `cost_usd` is 0 and the bill is incomplete.
    pub unpriced: bool,
}

/// Adds a model call's tokens and cost to the run's totals (marking the run unpriced when the
/// call was).
pub fn add_usage(conn: &Connection, run_id: i64, model: &str, usage: &CallUsage) -> Result<()> {
    conn.prepare_cached(
        "UPDATE runs SET model = ?2, input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4,
         cost_usd = cost_usd + ?5, turns = turns + 1, unpriced = MAX(unpriced, ?6) WHERE id = ?1",
    )?
    .execute(params![
        run_id,
        model,
        usage.input_tokens as i64,
        usage.output_tokens as i64,
        usage.cost_usd,
        usage.unpriced
    ])?;
    Ok(())
}

/// Appends a step with the next sequence number; returns the step id.
pub fn add_step(conn: &Connection, run_id: i64, step: &NewStep, now_ms: i64) -> Result<i64> {
    let seq: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM run_steps WHERE run_id = ?1")?
        .query_row(params![run_id], |row| row.get(0))?;
    conn.prepare_cached(
        "INSERT INTO run_steps (run_id, seq, kind, name, detail, tokens_in, tokens_out, cost_usd, duration_ms, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        run_id,
        seq,
        step.kind,
        step.name,
        step.detail.to_string(),
        step.tokens_in.map(|v| v as i64),
        step.tokens_out.map(|v| v as i64),
        step.cost_usd,
        step.duration_ms.map(|v| v as i64),
        now_ms
    ])?;
    Ok(conn.last_insert_rowid())
}

pub fn steps(conn: &Connection, run_id: i64) -> Result<Vec<StepRow>> {
    let mut statement = conn.prepare_cached(
        "SELECT id, run_id, seq, kind, name, detail, tokens_in, tokens_out, cost_usd, duration_ms, created_ms
         FROM run_steps WHERE run_id = ?1 ORDER BY seq",
    )?;
    let rows = statement.query_map(params![run_id], |row| {
        Ok(StepRow {
            id: row.get(0)?,
            run_id: row.get(1)?,
            seq: row.get(2)?,
            kind: row.get(3)?,
            name: row.get(4)?,
            detail: row.get(5)?,
            tokens_in: row.get(6)?,
            tokens_out: row.get(7)?,
            cost_usd: row.get(8)?,
            duration_ms: row.get(9)?,
            created_ms: row.get(10)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Open runs (running or waiting for an approval) of one session.
pub fn open_runs(conn: &Connection, session_id: i64) -> Result<Vec<RunRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE session_id = ?1 AND status IN ('running', 'waiting_approval') ORDER BY id"
    ))?;
    let rows = statement.query_map(params![session_id], run_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Runs newest first, optionally of one agent or status (Studio's runs list).
pub fn list(
    conn: &Connection,
    agent: Option<&str>,
    status: Option<&str>,
    before_id: Option<i64>,
    limit: u32,
) -> Result<Vec<RunRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs WHERE (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR status = ?2)
         AND (?3 IS NULL OR id < ?3) ORDER BY id DESC LIMIT ?4"
    ))?;
    let rows = statement.query_map(params![agent, status, before_id, limit], run_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The UTC day (`YYYY-MM-DD`) containing `at_ms`, as `cost_events.day` stores it.
pub fn day_of(at_ms: i64) -> String {
    crate::clock::to_datetime(at_ms)
        .format("%Y-%m-%d")
        .to_string()
}

/// The start of the UTC day after the one containing `at_ms` (when daily budgets reset).
pub fn next_day_start_ms(at_ms: i64) -> i64 {
    const DAY_MS: i64 = 86_400_000;
    (at_ms.div_euclid(DAY_MS) + 1) * DAY_MS
}

/// Where a model call was made: when, by which agent, on which provider's model, in which run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallSite<'a> {
    pub at_ms: i64,
    pub agent: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub run_id: Option<i64>,
}

/// Records one model call's cost.
pub fn record_cost(conn: &Connection, site: &CallSite<'_>, usage: &CallUsage) -> Result<()> {
    let day = day_of(site.at_ms);
    conn.prepare_cached(
        "INSERT INTO cost_events (at_ms, day, agent, provider, model, run_id, input_tokens, output_tokens, cost_usd, unpriced)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        site.at_ms,
        day,
        site.agent,
        site.provider,
        site.model,
        site.run_id,
        usage.input_tokens as i64,
        usage.output_tokens as i64,
        usage.cost_usd,
        usage.unpriced
    ])?;
    Ok(())
}

/// What an agent used on one UTC day: dollars and tokens (input plus output, every model).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DayUsage {
    pub cost_usd: f64,
    pub tokens: i64,
}

/// What an agent used on the UTC day containing `at_ms`.
pub fn used_on_day(conn: &Connection, agent: &str, at_ms: i64) -> Result<DayUsage> {
    let day = day_of(at_ms);
    Ok(conn
        .prepare_cached(
            "SELECT COALESCE(SUM(cost_usd), 0), COALESCE(SUM(input_tokens + output_tokens), 0)
             FROM cost_events WHERE agent = ?1 AND day = ?2",
        )?
        .query_row(params![agent, day], |row| {
            Ok(DayUsage {
                cost_usd: row.get(0)?,
                tokens: row.get(1)?,
            })
        })?)
}

/// What an agent spent (dollars) on the UTC day containing `at_ms`.
pub fn spent_on_day(conn: &Connection, agent: &str, at_ms: i64) -> Result<f64> {
    used_on_day(conn, agent, at_ms).map(|usage| usage.cost_usd)
}

/// Operator overrides of an agent's settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsRow {
    pub autonomy: Option<String>,
    pub model: Option<String>,
    pub paused: bool,
}

pub fn settings(conn: &Connection, agent: &str) -> Result<SettingsRow> {
    Ok(conn
        .prepare_cached("SELECT autonomy, model, paused FROM agent_settings WHERE agent = ?1")?
        .query_row(params![agent], |row| {
            Ok(SettingsRow {
                autonomy: row.get(0)?,
                model: row.get(1)?,
                paused: row.get::<_, i64>(2)? != 0,
            })
        })
        .optional()?
        .unwrap_or_default())
}

pub fn save_settings(
    conn: &Connection,
    agent: &str,
    settings: &SettingsRow,
    now_ms: i64,
) -> Result<()> {
    conn.execute(
        "INSERT INTO agent_settings (agent, autonomy, model, paused, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (agent) DO UPDATE SET autonomy = ?2, model = ?3, paused = ?4, updated_ms = ?5",
        params![agent, settings.autonomy, settings.model, settings.paused as i64, now_ms],
    )?;
    Ok(())
}

/// How many tool calls of each of these runs were not run because the policy refused them or a
/// person did not approve them (denied, expired, nobody reachable), by run id; runs without any
/// are left out.
pub fn refused_calls(conn: &Connection, run_ids: &[i64]) -> Result<Vec<(i64, i64)>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = run_ids
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut statement = conn.prepare(&format!(
        "SELECT run_id, COUNT(*) FROM run_steps
         WHERE run_id IN ({list}) AND (
           (kind = 'decision' AND json_extract(detail, '$.envelope.decision') = 'deny')
           OR (kind = 'note' AND json_extract(detail, '$.denied') IS NOT NULL))
         GROUP BY run_id"
    ))?;
    let rows = statement.query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)))?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The skills each of these runs used (`use_skill` calls), by run id.
pub fn skills_used(conn: &Connection, run_ids: &[i64]) -> Result<Vec<(i64, String)>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let list = run_ids
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut statement = conn.prepare(&format!(
        "SELECT DISTINCT run_id, json_extract(detail, '$.arguments.name') FROM run_steps
         WHERE kind = 'tool_call' AND name = 'use_skill' AND run_id IN ({list})"
    ))?;
    let rows = statement.query_map([], |row| {
        Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?))
    })?;
    let mut used = Vec::new();
    for row in rows {
        if let (run_id, Some(skill)) = row? {
            used.push((run_id, skill));
        }
    }
    Ok(used)
}

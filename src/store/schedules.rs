//! Queries for `jobs` and `job_runs` (the Scheduler's tables).
//!
//! A job's row holds what it is (agent, prompt, schedule as written, missed-run policy, target
//! chat) and where it stands (status, next regular fire time, last outcome, failures). `job_runs`
//! is its history: every fire time that ran or will run, and one record per batch of fire times
//! that did not (missed, skipped) — nothing is dropped without a row saying so.
//!
//! These functions know nothing about schedules or actors: times are plain milliseconds, the
//! policy and the expression are stored as the text the scheduler reads back. Where a job's
//! answers can go is read here too ([`delivery_chats`]: an agent's Telegram conversations, named
//! from their stored updates).

use rusqlite::{Connection, OptionalExtension, params};

use super::Result;
use super::stored_text::stored_text_enum;

stored_text_enum! {
    /// Where a job stands: live (active, paused) or finished (done, cancelled).
    pub enum JobStatus {
        /// Fires at its next time.
        Active => "active",
        /// Kept, but does not fire until resumed.
        Paused => "paused",
        /// A one-shot job that has fired (or can never fire again).
        Done => "done",
        Cancelled => "cancelled",
    }
}

impl JobStatus {
    /// Active or paused: counted against the agent's limit and listed by default.
    pub fn is_live(self) -> bool {
        matches!(self, JobStatus::Active | JobStatus::Paused)
    }
}

stored_text_enum! {
    /// Where one history row of a job stands.
    pub enum JobRunStatus {
        /// Recorded, its message not sent yet.
        Queued => "queued",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        /// Fire times that passed while the daemon was down (one row per batch).
        Missed => "missed",
        /// Fire times deliberately not run (missed-run policy, busy, cancelled).
        Skipped => "skipped",
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    pub id: i64,
    pub agent: String,
    pub name: String,
    pub prompt: String,
    pub target_chat: Option<String>,
    pub kind: String,
    pub expression: String,
    pub timezone: String,
    pub anchor_ms: i64,
    pub missed_policy: String,
    pub status: JobStatus,
    pub next_run_ms: Option<i64>,
    pub last_run_ms: Option<i64>,
    pub last_outcome: Option<String>,
    pub consecutive_failures: i64,
    pub failing: bool,
    pub created_by: String,
    pub created_in: Option<String>,
    pub created_ms: i64,
    pub updated_ms: i64,
}

const JOB_COLUMNS: &str = "id, agent, name, prompt, target_chat, kind, expression, timezone, \
     anchor_ms, missed_policy, status, next_run_ms, last_run_ms, last_outcome, \
     consecutive_failures, failing, created_by, created_in, created_ms, updated_ms";

fn job_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<JobRow> {
    Ok(JobRow {
        id: row.get(0)?,
        agent: row.get(1)?,
        name: row.get(2)?,
        prompt: row.get(3)?,
        target_chat: row.get(4)?,
        kind: row.get(5)?,
        expression: row.get(6)?,
        timezone: row.get(7)?,
        anchor_ms: row.get(8)?,
        missed_policy: row.get(9)?,
        status: row.get(10)?,
        next_run_ms: row.get(11)?,
        last_run_ms: row.get(12)?,
        last_outcome: row.get(13)?,
        consecutive_failures: row.get(14)?,
        failing: row.get::<_, i64>(15)? != 0,
        created_by: row.get(16)?,
        created_in: row.get(17)?,
        created_ms: row.get(18)?,
        updated_ms: row.get(19)?,
    })
}

/// Inserts a job (its `id`, `created_ms` and `updated_ms` are set here) and returns its id.
pub fn insert_job(conn: &Connection, job: &JobRow, now_ms: i64) -> Result<i64> {
    conn.prepare_cached(
        "INSERT INTO jobs (agent, name, prompt, target_chat, kind, expression, timezone, anchor_ms, \
         missed_policy, status, next_run_ms, last_run_ms, last_outcome, consecutive_failures, \
         failing, created_by, created_in, created_ms, updated_ms) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?18)",
    )?
    .execute(params![
        job.agent,
        job.name,
        job.prompt,
        job.target_chat,
        job.kind,
        job.expression,
        job.timezone,
        job.anchor_ms,
        job.missed_policy,
        job.status,
        job.next_run_ms,
        job.last_run_ms,
        job.last_outcome,
        job.consecutive_failures,
        job.failing as i64,
        job.created_by,
        job.created_in,
        now_ms,
    ])?;
    Ok(conn.last_insert_rowid())
}

/// Writes every changeable field of `job` (all but id, agent, created_*).
pub fn save_job(conn: &Connection, job: &JobRow, now_ms: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE jobs SET name = ?2, prompt = ?3, target_chat = ?4, kind = ?5, expression = ?6, \
         timezone = ?7, anchor_ms = ?8, missed_policy = ?9, status = ?10, next_run_ms = ?11, \
         last_run_ms = ?12, last_outcome = ?13, consecutive_failures = ?14, failing = ?15, \
         updated_ms = ?16 WHERE id = ?1",
    )?
    .execute(params![
        job.id,
        job.name,
        job.prompt,
        job.target_chat,
        job.kind,
        job.expression,
        job.timezone,
        job.anchor_ms,
        job.missed_policy,
        job.status,
        job.next_run_ms,
        job.last_run_ms,
        job.last_outcome,
        job.consecutive_failures,
        job.failing as i64,
        now_ms,
    ])?;
    Ok(())
}

pub fn job(conn: &Connection, id: i64) -> Result<Option<JobRow>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))?
        .query_row(params![id], job_from_row)
        .optional()?)
}

/// The jobs the scheduler keeps in memory: those that may still fire (active or paused) and
/// those with a fire not finished yet, oldest first.
pub fn jobs_to_load(conn: &Connection) -> Result<Vec<JobRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE status IN ('active', 'paused') OR id IN \
         (SELECT job_id FROM job_runs WHERE status IN ('queued', 'running')) ORDER BY id"
    ))?;
    let rows = statement.query_map([], job_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Every job of `agent` (all agents when `None`), newest first; finished ones (done, cancelled)
/// only when asked.
pub fn list_jobs(
    conn: &Connection,
    agent: Option<&str>,
    include_finished: bool,
    limit: u32,
) -> Result<Vec<JobRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE (?1 IS NULL OR agent = ?1) \
         AND (?2 OR status IN ('active', 'paused')) ORDER BY id DESC LIMIT ?3"
    ))?;
    let rows = statement.query_map(params![agent, include_finished, limit], job_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// How many live (active or paused) jobs `agent` has.
pub fn live_count(conn: &Connection, agent: &str) -> Result<u64> {
    Ok(conn
        .prepare_cached(
            "SELECT COUNT(*) FROM jobs WHERE agent = ?1 AND status IN ('active', 'paused')",
        )?
        .query_row(params![agent], |row| row.get::<_, i64>(0))
        .map(|count| count.max(0) as u64)?)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRunRow {
    pub id: i64,
    pub job_id: i64,
    pub fire_ms: i64,
    pub attempt: i64,
    pub trigger: String,
    pub status: JobRunStatus,
    pub due_ms: i64,
    pub started_ms: Option<i64>,
    pub finished_ms: Option<i64>,
    pub run_id: Option<i64>,
    pub missed_count: Option<i64>,
    pub detail: Option<String>,
    pub created_ms: i64,
}

const RUN_COLUMNS: &str = "id, job_id, fire_ms, attempt, trigger, status, due_ms, started_ms, \
     finished_ms, run_id, missed_count, detail, created_ms";

fn run_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<JobRunRow> {
    Ok(JobRunRow {
        id: row.get(0)?,
        job_id: row.get(1)?,
        fire_ms: row.get(2)?,
        attempt: row.get(3)?,
        trigger: row.get(4)?,
        status: row.get(5)?,
        due_ms: row.get(6)?,
        started_ms: row.get(7)?,
        finished_ms: row.get(8)?,
        run_id: row.get(9)?,
        missed_count: row.get(10)?,
        detail: row.get(11)?,
        created_ms: row.get(12)?,
    })
}

/// A history row to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJobRun<'a> {
    pub job_id: i64,
    pub fire_ms: i64,
    pub attempt: i64,
    pub trigger: &'a str,
    pub status: JobRunStatus,
    pub due_ms: i64,
    pub missed_count: Option<i64>,
    pub detail: Option<&'a str>,
}

/// Records a fire (or a record of fire times not run) and returns its id. The fire's key (job,
/// fire time, attempt) is unique: recording the same fire again (a replay, a clock that went
/// back) inserts nothing and returns `None`.
pub fn insert_run(conn: &Connection, run: &NewJobRun<'_>, now_ms: i64) -> Result<Option<i64>> {
    let inserted = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO job_runs (job_id, fire_ms, attempt, trigger, status, due_ms, \
             missed_count, detail, created_ms, finished_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, \
             ?8, ?9, CASE WHEN ?5 IN ('missed', 'skipped') THEN ?9 END)",
        )?
        .execute(params![
            run.job_id,
            run.fire_ms,
            run.attempt,
            run.trigger,
            run.status,
            run.due_ms,
            run.missed_count,
            run.detail,
            now_ms,
        ])?;
    Ok((inserted == 1).then(|| conn.last_insert_rowid()))
}

/// Marks a queued row running (the fire is recorded before its message is sent). `false` when
/// the row was not queued.
pub fn start_run(conn: &Connection, job_run_id: i64, now_ms: i64) -> Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE job_runs SET status = 'running', started_ms = ?2 WHERE id = ?1 AND status = 'queued'",
        )?
        .execute(params![job_run_id, now_ms])?;
    Ok(changed == 1)
}

/// Ends a queued or running row with `status` (succeeded, failed, skipped). `false` when it had
/// already ended (a replayed answer changes nothing).
pub fn finish_run(
    conn: &Connection,
    job_run_id: i64,
    status: JobRunStatus,
    run_id: Option<i64>,
    detail: Option<&str>,
    now_ms: i64,
) -> Result<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE job_runs SET status = ?2, run_id = COALESCE(?3, run_id), detail = ?4, \
             finished_ms = ?5 WHERE id = ?1 AND status IN ('queued', 'running')",
        )?
        .execute(params![job_run_id, status, run_id, detail, now_ms])?;
    Ok(changed == 1)
}

pub fn job_run(conn: &Connection, id: i64) -> Result<Option<JobRunRow>> {
    Ok(conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM job_runs WHERE id = ?1"))?
        .query_row(params![id], run_from_row)
        .optional()?)
}

/// Rows not finished yet (queued or running), in order of due time.
pub fn open_runs(conn: &Connection) -> Result<Vec<JobRunRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM job_runs WHERE status IN ('queued', 'running') ORDER BY due_ms, id"
    ))?;
    let rows = statement.query_map([], run_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The newest `limit` history rows of a job, newest first.
pub fn history(conn: &Connection, job_id: i64, limit: u32) -> Result<Vec<JobRunRow>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM job_runs WHERE job_id = ?1 ORDER BY id DESC LIMIT ?2"
    ))?;
    let rows = statement.query_map(params![job_id, limit], run_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Where the message of a scheduled run got to: the stored user message of `agent`'s `chat`
/// that starts with `marker` (each fire's message starts with its own marker), with the run that
/// took it, if any. `None`: the message never reached the session.
pub fn delivered_prompt(
    conn: &Connection,
    agent: &str,
    chat: &str,
    marker: &str,
) -> Result<Option<Option<i64>>> {
    Ok(conn
        .prepare_cached(
            "SELECT e.run_id FROM session_events e JOIN sessions s ON s.id = e.session_id \
             WHERE s.agent = ?1 AND s.chat = ?2 AND e.kind = 'user' \
             AND substr(e.content, 1, length(?3)) = ?3 ORDER BY e.id LIMIT 1",
        )?
        .query_row(params![agent, chat, marker], |row| {
            row.get::<_, Option<i64>>(0)
        })
        .optional()?)
}

/// The newest `per_job` history rows of each of `job_ids` that stand for a run (records of fire
/// times not run included), newest first within each job (Studio's list of jobs).
pub fn latest_runs(conn: &Connection, job_ids: &[i64], per_job: u32) -> Result<Vec<JobRunRow>> {
    if job_ids.is_empty() {
        return Ok(Vec::new());
    }
    // Integers only: nothing to escape.
    let list = job_ids
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let mut statement = conn.prepare(&format!(
        "SELECT {RUN_COLUMNS} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY job_id ORDER BY id DESC) \
         AS newest FROM job_runs WHERE job_id IN ({list})) WHERE newest <= ?1 ORDER BY job_id, id DESC"
    ))?;
    let rows = statement.query_map(params![per_job], run_from_row)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// A Telegram conversation an agent has a session in: where a job's answers can go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryChat {
    /// The conversation's chat key (`tg:42`, `tg:-100123/7` for a forum topic).
    pub chat: String,
    /// `private`, `group`, `supergroup` or `channel`, as its newest stored message says.
    pub chat_type: Option<String>,
    /// A group's title, or the person of a private chat (first and last name).
    pub title: Option<String>,
    /// The forum topic's name, when the conversation is a topic whose name was seen.
    pub topic: Option<String>,
    /// When the conversation last changed.
    pub updated_ms: i64,
}

/// The Telegram conversations `agent` has sessions in, the most recent first (at most
/// `limit`), named from the updates stored for them (a group's title, a person's name, a forum
/// topic's name from its creation or last rename).
pub fn delivery_chats(conn: &Connection, agent: &str, limit: u32) -> Result<Vec<DeliveryChat>> {
    let mut statement = conn.prepare_cached(
        "SELECT chat, MAX(updated_ms) FROM sessions WHERE agent = ?1 AND chat LIKE 'tg:%' \
         GROUP BY chat ORDER BY MAX(updated_ms) DESC LIMIT ?2",
    )?;
    let sessions = statement
        .query_map(params![agent, limit], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut chats = Vec::with_capacity(sessions.len());
    for (chat, updated_ms) in sessions {
        if let Some(found) = delivery_chat(conn, agent, &chat, updated_ms)? {
            chats.push(found);
        }
    }
    Ok(chats)
}

/// Telegram chat `chat` (`tg:<chat>[/<thread>]`) of `agent`, named from the updates stored for
/// it; `None` when the key is not a Telegram chat's. `updated_ms` is carried as given.
pub fn delivery_chat(
    conn: &Connection,
    agent: &str,
    chat: &str,
    updated_ms: i64,
) -> Result<Option<DeliveryChat>> {
    let (chat_id, thread_id) = split_telegram_chat(chat);
    let Some(chat_id) = chat_id.filter(|_| chat.starts_with("tg:")) else {
        return Ok(None);
    };
    let (chat_type, title) = chat_name(conn, agent, chat_id)?.unwrap_or((None, None));
    let topic = match thread_id {
        Some(thread_id) => topic_name(conn, agent, chat_id, thread_id)?,
        None => None,
    };
    Ok(Some(DeliveryChat {
        chat: chat.to_string(),
        chat_type,
        title,
        topic,
        updated_ms,
    }))
}

/// `tg:<chat>[/<thread>]` read as numbers (`None` where a part is not one).
fn split_telegram_chat(chat: &str) -> (Option<i64>, Option<i64>) {
    let rest = chat.strip_prefix("tg:").unwrap_or(chat);
    let (chat_id, thread) = match rest.split_once('/') {
        Some((chat_id, thread)) => (chat_id, Some(thread)),
        None => (rest, None),
    };
    (
        chat_id.parse().ok(),
        thread.and_then(|thread| thread.parse().ok()),
    )
}

/// The type and name of chat `chat_id` in the newest message stored for `agent`.
fn chat_name(
    conn: &Connection,
    agent: &str,
    chat_id: i64,
) -> Result<Option<(Option<String>, Option<String>)>> {
    Ok(conn
        .prepare_cached(
            "SELECT json_extract(payload, '$.message.chat.type'), \
             COALESCE(json_extract(payload, '$.message.chat.title'), \
             trim(COALESCE(json_extract(payload, '$.message.chat.first_name'), '') || ' ' || \
             COALESCE(json_extract(payload, '$.message.chat.last_name'), ''))) \
             FROM inbound_updates WHERE agent = ?1 AND chat_id = ?2 \
             AND json_extract(payload, '$.message.chat.id') IS NOT NULL ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![agent, chat_id], |row| {
            let title: Option<String> = row.get(1)?;
            Ok((row.get(0)?, title.filter(|title| !title.is_empty())))
        })
        .optional()?)
}

/// The name of forum topic `thread_id` of `chat_id`: its last rename, else its creation (as a
/// service message, or quoted by a message in the topic).
fn topic_name(
    conn: &Connection,
    agent: &str,
    chat_id: i64,
    thread_id: i64,
) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT name FROM (SELECT id, COALESCE(json_extract(payload, '$.message.forum_topic_edited.name'), \
             json_extract(payload, '$.message.forum_topic_created.name'), \
             json_extract(payload, '$.message.reply_to_message.forum_topic_created.name')) AS name \
             FROM inbound_updates WHERE agent = ?1 AND chat_id = ?2 \
             AND json_extract(payload, '$.message.message_thread_id') = ?3) \
             WHERE name IS NOT NULL ORDER BY id DESC LIMIT 1",
        )?
        .query_row(params![agent, chat_id, thread_id], |row| row.get(0))
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::store::migrate(&mut conn, std::path::Path::new(":memory:")).unwrap();
        conn
    }

    fn job(agent: &str) -> JobRow {
        JobRow {
            id: 0,
            agent: agent.into(),
            name: "briefing".into(),
            prompt: "Summarise the news".into(),
            target_chat: Some("tg:42".into()),
            kind: "cron".into(),
            expression: "0 9 * * *".into(),
            timezone: "UTC".into(),
            anchor_ms: 0,
            missed_policy: "run_once".into(),
            status: JobStatus::Active,
            next_run_ms: Some(1_000),
            last_run_ms: None,
            last_outcome: None,
            consecutive_failures: 0,
            failing: false,
            created_by: "agent".into(),
            created_in: Some("tg:42".into()),
            created_ms: 0,
            updated_ms: 0,
        }
    }

    #[test]
    fn a_fire_is_recorded_once_and_a_job_runs_once_at_a_time() {
        let conn = conn();
        let id = insert_job(&conn, &job("ada"), 5).unwrap();
        let fire = NewJobRun {
            job_id: id,
            fire_ms: 1_000,
            attempt: 1,
            trigger: "scheduled",
            status: JobRunStatus::Queued,
            due_ms: 1_000,
            missed_count: None,
            detail: None,
        };
        let first = insert_run(&conn, &fire, 10).unwrap().unwrap();
        assert_eq!(
            insert_run(&conn, &fire, 11).unwrap(),
            None,
            "the fire's key is unique: a replay records nothing"
        );
        assert!(start_run(&conn, first, 12).unwrap());
        assert!(!start_run(&conn, first, 13).unwrap(), "already running");
        let second = insert_run(
            &conn,
            &NewJobRun {
                fire_ms: 2_000,
                ..fire.clone()
            },
            14,
        )
        .unwrap()
        .unwrap();
        assert!(
            start_run(&conn, second, 14).is_err(),
            "a second running row of the same job is refused by the database"
        );
        assert!(
            finish_run(
                &conn,
                first,
                JobRunStatus::Succeeded,
                Some(7),
                Some("ok"),
                15
            )
            .unwrap()
        );
        assert!(!finish_run(&conn, first, JobRunStatus::Failed, None, None, 16).unwrap());
        let row = job_run(&conn, first).unwrap().unwrap();
        assert_eq!(
            (row.status.as_str(), row.run_id, row.finished_ms),
            ("succeeded", Some(7), Some(15))
        );
        assert_eq!(
            open_runs(&conn).unwrap().len(),
            1,
            "the second fire still waits"
        );
    }

    #[test]
    fn jobs_are_listed_per_agent_and_saved() {
        let conn = conn();
        let ada = insert_job(&conn, &job("ada"), 5).unwrap();
        insert_job(&conn, &job("bob"), 6).unwrap();
        let mut row = super::job(&conn, ada).unwrap().unwrap();
        row.status = JobStatus::Paused;
        row.next_run_ms = None;
        save_job(&conn, &row, 9).unwrap();
        let listed = list_jobs(&conn, Some("ada"), false, 10).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].status.as_str(), "paused");
        assert_eq!(listed[0].updated_ms, 9);
        assert_eq!(live_count(&conn, "ada").unwrap(), 1);
        row.status = JobStatus::Cancelled;
        save_job(&conn, &row, 10).unwrap();
        assert!(list_jobs(&conn, Some("ada"), false, 10).unwrap().is_empty());
        assert_eq!(list_jobs(&conn, None, true, 10).unwrap().len(), 2);
        assert_eq!(jobs_to_load(&conn).unwrap().len(), 1);
    }

    #[test]
    fn delivery_chats_are_named_from_their_stored_updates() {
        let conn = conn();
        let session =
            "INSERT INTO sessions (agent, chat, created_ms, updated_ms) VALUES (?1, ?2, 0, ?3)";
        for (chat, at) in [
            ("tg:42", 30),
            ("tg:-100777/7", 20),
            ("tg:-5", 10),
            ("cli:me", 40),
        ] {
            conn.execute(session, params!["ada", chat, at]).unwrap();
        }
        conn.execute(session, params!["bob", "tg:99", 50]).unwrap();
        let update = "INSERT INTO inbound_updates (bot_id, agent, update_id, kind, chat_id, payload, \
                      received_ms) VALUES (1, 'ada', ?1, 'message', ?2, ?3, 0)";
        let updates = [
            (
                1,
                42,
                r#"{"message": {"chat": {"id": 42, "type": "private", "first_name": "Olivia", "last_name": "Okafor"}}}"#,
            ),
            (
                2,
                -100777,
                r#"{"message": {"chat": {"id": -100777, "type": "supergroup", "title": "Home"}, "message_thread_id": 7, "forum_topic_created": {"name": "Shopping"}}}"#,
            ),
            (
                3,
                -100777,
                r#"{"message": {"chat": {"id": -100777, "type": "supergroup", "title": "Home"}, "message_thread_id": 7, "forum_topic_edited": {"name": "Groceries"}}}"#,
            ),
            (
                4,
                -100777,
                r#"{"message": {"chat": {"id": -100777, "type": "supergroup", "title": "Home"}, "message_thread_id": 9, "forum_topic_created": {"name": "Other"}}}"#,
            ),
        ];
        for (update_id, chat_id, payload) in updates {
            conn.execute(update, params![update_id, chat_id, payload])
                .unwrap();
        }
        let chats = delivery_chats(&conn, "ada", 10).unwrap();
        let seen: Vec<(&str, Option<&str>, Option<&str>)> = chats
            .iter()
            .map(|chat| {
                (
                    chat.chat.as_str(),
                    chat.title.as_deref(),
                    chat.topic.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("tg:42", Some("Olivia Okafor"), None),
                ("tg:-100777/7", Some("Home"), Some("Groceries")),
                ("tg:-5", None, None),
            ],
            "newest first, local chats and other agents' left out, the topic's last name"
        );
        assert_eq!(chats[0].chat_type.as_deref(), Some("private"));
    }

    #[test]
    fn the_latest_runs_of_each_job_come_newest_first() {
        let conn = conn();
        let first = insert_job(&conn, &job("ada"), 5).unwrap();
        let second = insert_job(&conn, &job("ada"), 5).unwrap();
        for fire_ms in [1_000, 2_000, 3_000] {
            for job_id in [first, second] {
                let run = NewJobRun {
                    job_id,
                    fire_ms,
                    attempt: 1,
                    trigger: "scheduled",
                    status: JobRunStatus::Queued,
                    due_ms: fire_ms,
                    missed_count: None,
                    detail: None,
                };
                insert_run(&conn, &run, fire_ms).unwrap();
            }
        }
        let latest = latest_runs(&conn, &[first, second], 2).unwrap();
        let seen: Vec<(i64, i64)> = latest.iter().map(|run| (run.job_id, run.fire_ms)).collect();
        assert_eq!(
            seen,
            vec![
                (first, 3_000),
                (first, 2_000),
                (second, 3_000),
                (second, 2_000)
            ]
        );
        assert!(latest_runs(&conn, &[], 2).unwrap().is_empty());
    }
}

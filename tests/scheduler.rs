//! The Scheduler at its boundaries: tasks created by the model through the tools, answers
//! delivered to the right chat through the right bot, pause/resume/update/cancel, missed runs
//! after a restart (skip / run_once / catch_up, recorded), a fire interrupted by a crash (the real
//! binary killed with SIGKILL) run once and not lost, and the timer heap under paused tokio time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{SecondsFormat, TimeZone, Utc};
use clawvisor::actors::scheduler::{Scheduler, SchedulerArgs, SchedulerClock};
use clawvisor::config::{self, AgentSpec, Autonomy, Dur, SchedulerConfig};
use clawvisor::domain::{ChatKey, OutEvent, Outbound};
use clawvisor::events::EventBus;
use clawvisor::jobs::{JobChange, JobScope, JobView, NewJob};
use clawvisor::protocol::agent::{AgentMsg, AgentView};
use clawvisor::protocol::scheduler::{SchedulerMsg, SchedulerStats};
use clawvisor::registry::{Mailbox, Registry};
use clawvisor::store::schedules::{self, JobRow, JobRunRow, JobRunStatus, JobStatus};
use clawvisor::store::{Store, StoreOptions};
use clawvisor::studio::event_json::data_json;
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::{Staged, World};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::json;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const USER: i64 = 42;
const TOOLS: &str = "autonomy = \"trust_first\"\ntools = [\"schedule_task\", \"list_tasks\", \
                     \"get_task\", \"update_task\", \"pause_task\", \"resume_task\", \"cancel_task\"]\n";
const HOUR: i64 = 3_600_000;

// ---------------------------------------------------------------------------------------------
// Helpers.

fn scheduler_of(harness: &Harness) -> Mailbox<SchedulerMsg> {
    harness
        .daemon()
        .registry
        .lookup(&clawvisor::protocol::scheduler::NAME)
        .expect("the scheduler runs")
}

/// Waits until `agent` runs and offers the schedule tools.
async fn wait_for_tools(harness: &Harness, agent: &str) {
    wait_until(
        Duration::from_secs(20),
        &format!("{agent} got the schedule tools"),
        || async {
            harness
                .agent_tools(agent)
                .await
                .iter()
                .any(|tool| tool == "schedule_task")
        },
    )
    .await
}

/// Polls the database until `query` finds something (or fails the test after `timeout`).
async fn wait_for<T, F>(store: &Store, what: &str, timeout: Duration, query: F) -> T
where
    T: Send + 'static,
    F: Fn(&rusqlite::Connection) -> clawvisor::store::Result<Option<T>> + Clone + Send + 'static,
{
    wait_until(timeout, what, || {
        let query = query.clone();
        async move { store.read(move |conn| query(conn)).await.unwrap() }
    })
    .await
}

fn history(conn: &rusqlite::Connection, job_id: i64) -> Vec<JobRunRow> {
    let mut rows = schedules::history(conn, job_id, 100).unwrap();
    rows.reverse();
    rows
}

async fn job_view(scheduler: &Mailbox<SchedulerMsg>, id: i64) -> JobView {
    let (view, _) = ractor::call_t!(
        scheduler,
        |reply| SchedulerMsg::Get {
            scope: JobScope::Operator,
            id,
            history: 1,
            reply
        },
        5_000
    )
    .unwrap()
    .unwrap();
    view
}

async fn stats(scheduler: &Mailbox<SchedulerMsg>) -> SchedulerStats {
    ractor::call_t!(scheduler, SchedulerMsg::Stats, 5_000).unwrap()
}

fn new_job(agent: &str, prompt: &str, kind: &str, expression: &str, missed: &str) -> NewJob {
    NewJob {
        agent: agent.into(),
        name: String::new(),
        prompt: prompt.into(),
        target: Some(ChatKey::cli("watch")),
        kind: kind.into(),
        expression: expression.into(),
        timezone: "UTC".into(),
        missed_policy: missed.into(),
        created_by: "operator".into(),
        created_in: None,
    }
}

async fn create(harness: &Harness, job: NewJob) -> JobView {
    ractor::call_t!(scheduler_of(harness), SchedulerMsg::Create, 5_000, job)
        .unwrap()
        .unwrap()
}

/// The content of the newest tool result in `agent`'s sessions.
async fn last_tool_result(harness: &Harness, agent: &str) -> String {
    let agent = agent.to_string();
    harness
        .store()
        .read(move |conn| {
            Ok(conn.query_row(
                "SELECT e.content FROM session_events e JOIN sessions s ON s.id = e.session_id \
                 WHERE s.agent = ?1 AND e.kind = 'tool_result' ORDER BY e.id DESC LIMIT 1",
                [agent],
                |row| row.get::<_, String>(0),
            )?)
        })
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Through the tools, with Telegram.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_scheduled_by_the_model_answers_in_its_chat_through_its_own_bot() {
    let World {
        fake,
        llm,
        harness,
        bots,
    } = World::builder(Script::new())
        .agent_with_bot(
            "alpha",
            TOOLS,
            "300:AAH-sched-test-token-alpha-0000",
            &[USER],
            &[],
        )
        .agent_with_bot(
            "beta",
            TOOLS,
            "301:AAH-sched-test-token-beta-0001",
            &[USER],
            &[],
        )
        .config_extra("[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"")
        .start()
        .await;
    wait_for_tools(&harness, "alpha").await;
    let (alpha, beta) = (bots[0].id, bots[1].id);

    // The model turns "in a few seconds" into an `at` time (scripted here).
    let at =
        (Utc::now() + chrono::TimeDelta::seconds(6)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let arguments = json!({
        "name": "stretch",
        "kind": "at",
        "schedule": at,
        "prompt": "Tell the user it is time to stretch."
    });
    llm.set_script(
        Script::new()
            .rule(Rule::text("Done: I will remind you.").when_after_tool_result("schedule_task"))
            .rule(
                Rule::tool_call("schedule_task", arguments.to_string())
                    .when_last_user_contains("remind me"),
            )
            .rule(
                Rule::text("Time to stretch, says alpha!")
                    .when_last_user_contains("time to stretch"),
            ),
    );
    fake.push_message(alpha, USER, USER, "remind me to stretch in a few seconds");
    fake.wait_for_sent(
        alpha,
        |m| m.chat_id == USER && m.visible_text.contains("I will remind you"),
        Duration::from_secs(30),
    )
    .await
    .expect("the task is confirmed in the user's chat");
    let reminder = fake
        .wait_for_sent(
            alpha,
            |m| m.chat_id == USER && m.visible_text.contains("Time to stretch, says alpha!"),
            Duration::from_secs(30),
        )
        .await;
    assert!(
        reminder.is_some(),
        "the scheduled answer reached the chat through alpha's bot"
    );
    assert!(
        !fake
            .sent(beta)
            .iter()
            .any(|m| m.visible_text.contains("stretch")),
        "never through another agent's bot"
    );

    // Recorded: the job (created by the agent in that chat), one succeeded fire, its run in the
    // isolated `sched:1` session, the outbox row confirmed by the bot.
    let store = harness.store().clone();
    wait_for(
        &store,
        "the outbox row delivered",
        Duration::from_secs(10),
        |conn| {
            Ok(conn
                .query_row(
                    "SELECT delivered_ms FROM outbox WHERE text LIKE '%Time to stretch%'",
                    [],
                    |row| row.get::<_, Option<i64>>(0),
                )
                .ok()
                .flatten())
        },
    )
    .await;
    let (job, runs, run_chat, user_chat_has_answer) = store
        .read(|conn| {
            let job = schedules::job(conn, 1)?.expect("job 1");
            let runs = history(conn, 1);
            let run_id = runs[0].run_id.expect("the fire knows its run");
            let run_chat: (String, String) = conn.query_row(
                "SELECT chat, trigger FROM runs WHERE id = ?1",
                [run_id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            let in_user_chat: i64 = conn.query_row(
                "SELECT COUNT(*) FROM session_events e JOIN sessions s ON s.id = e.session_id \
                 WHERE s.chat = 'tg:42' AND e.content LIKE '%Time to stretch, says alpha%'",
                [],
                |row| row.get(0),
            )?;
            Ok((job, runs, run_chat, in_user_chat > 0))
        })
        .await
        .unwrap();
    assert_eq!(
        (
            job.agent.as_str(),
            job.status.as_str(),
            job.created_by.as_str(),
            job.target_chat.as_deref(),
            job.created_in.as_deref()
        ),
        ("alpha", "done", "agent", Some("tg:42"), Some("tg:42"))
    );
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        (
            runs[0].status.as_str(),
            runs[0].trigger.as_str(),
            runs[0].attempt
        ),
        ("succeeded", "scheduled", 1)
    );
    assert_eq!(run_chat, ("sched:1".to_string(), "schedule".to_string()));
    assert!(
        !user_chat_has_answer,
        "the scheduled run's turns are not in the user's chat history"
    );
    harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Pause, resume, update, cancel through the tools.

fn tool_script() -> Script {
    let tools = [
        "schedule_task",
        "pause_task",
        "resume_task",
        "update_task",
        "cancel_task",
        "list_tasks",
    ];
    let mut script = Script::new();
    for tool in tools {
        script = script.rule(Rule::text(format!("done {tool}")).when_after_tool_result(tool));
    }
    let calls = [
        (
            "make it",
            "schedule_task",
            json!({"kind": "every", "schedule": "1h", "prompt": "Check the feed", "name": "feed"}),
        ),
        ("pause it", "pause_task", json!({"id": 1})),
        ("resume it", "resume_task", json!({"id": 1})),
        (
            "change it",
            "update_task",
            json!({"id": 1, "kind": "cron", "schedule": "30 7 * * *", "timezone": "Europe/Berlin"}),
        ),
        ("pause theirs", "pause_task", json!({"id": 1})),
        ("drop it", "cancel_task", json!({"id": 1})),
        ("show them", "list_tasks", json!({})),
    ];
    for (words, tool, arguments) in calls {
        script = script
            .rule(Rule::tool_call(tool, arguments.to_string()).when_last_user_contains(words));
    }
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_update_and_cancel_through_the_tools_take_effect_at_once() {
    let llm = ScriptedLlm::start(tool_script()).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", TOOLS), agent_toml("bob", TOOLS)];
    let harness = Harness::start(options).await.expect("the daemon starts");
    wait_for_tools(&harness, "ada").await;
    wait_for_tools(&harness, "bob").await;
    let chat = ChatKey::cli("tester");
    let scheduler = scheduler_of(&harness);

    let reply = harness.ask("ada", &chat, "make it").await.unwrap();
    assert_eq!(reply.text, "done schedule_task");
    assert!(
        last_tool_result(&harness, "ada")
            .await
            .contains("Scheduled task #1")
    );
    let job = job_view(&scheduler, 1).await;
    let next = job.next_run_ms.expect("an active job has a next run");
    assert_eq!((job.status.as_str(), job.upcoming.len()), ("active", 5));
    assert_eq!(job.target.as_deref(), Some("cli:tester"));
    assert_eq!(
        stats(&scheduler).await.next_wake_ms,
        Some(next),
        "the timer is set for it"
    );

    harness.ask("ada", &chat, "pause it").await.unwrap();
    let job = job_view(&scheduler, 1).await;
    assert_eq!((job.status.as_str(), job.next_run_ms), ("paused", None));
    assert_eq!(
        stats(&scheduler).await.next_wake_ms,
        None,
        "nothing left to wake for"
    );
    let stored = harness
        .store()
        .read(|conn| Ok(schedules::job(conn, 1)?.unwrap()))
        .await
        .unwrap();
    assert_eq!(
        (stored.status.as_str(), stored.next_run_ms),
        ("paused", None)
    );

    harness.ask("ada", &chat, "resume it").await.unwrap();
    let job = job_view(&scheduler, 1).await;
    let resumed = job.next_run_ms.expect("resumed");
    assert_eq!(job.status.as_str(), "active");
    assert_eq!(
        (resumed - next) % HOUR,
        0,
        "still on its hourly grid from the anchor"
    );
    assert_eq!(stats(&scheduler).await.next_wake_ms, Some(resumed));

    harness.ask("ada", &chat, "change it").await.unwrap();
    let job = job_view(&scheduler, 1).await;
    assert_eq!(
        (job.kind.as_str(), job.timezone.as_str()),
        ("cron", "Europe/Berlin")
    );
    let berlin = chrono_tz::Europe::Berlin;
    for time in &job.upcoming {
        let local = berlin.timestamp_millis_opt(*time).unwrap();
        assert_eq!(local.format("%H:%M:%S").to_string(), "07:30:00", "{local}");
    }
    let first = job.upcoming[0];
    assert!(
        first > Utc::now().timestamp_millis() && first - Utc::now().timestamp_millis() <= 25 * HOUR
    );
    assert_eq!(
        stats(&scheduler).await.next_wake_ms,
        Some(first),
        "the new schedule is armed"
    );

    // Another agent cannot touch ada's task: it is told there is no such task.
    harness
        .ask("bob", &ChatKey::cli("bob"), "pause theirs")
        .await
        .unwrap();
    assert!(
        last_tool_result(&harness, "bob")
            .await
            .contains("there is no task #1"),
        "{}",
        last_tool_result(&harness, "bob").await
    );
    assert_eq!(job_view(&scheduler, 1).await.status.as_str(), "active");

    harness.ask("ada", &chat, "drop it").await.unwrap();
    let job = job_view(&scheduler, 1).await;
    assert_eq!((job.status.as_str(), job.next_run_ms), ("cancelled", None));
    let after = stats(&scheduler).await;
    assert_eq!((after.jobs, after.next_wake_ms), (0, None));
    harness.ask("ada", &chat, "show them").await.unwrap();
    assert!(
        last_tool_result(&harness, "ada")
            .await
            .contains("no scheduled tasks")
    );
    harness.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Restarts.

/// Moves a job `hours_ago` hours into the past, as if the daemon had been down since then: its
/// `every` anchor and its next fire time become `now - hours_ago`.
fn move_into_the_past(conn: &rusqlite::Connection, job_id: i64, anchor: i64) {
    conn.execute(
        "UPDATE jobs SET anchor_ms = ?2, next_run_ms = ?2 WHERE id = ?1",
        rusqlite::params![job_id, anchor],
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_due_while_the_daemon_was_down_follows_skip_run_once_and_catch_up_and_records_it() {
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    let options = || HarnessOptions::new(llm.base_url());
    let harness = Harness::start(options()).await.expect("the daemon starts");
    let skip = create(
        &harness,
        new_job("ada", "Report for skip", "every", "1h", "skip"),
    )
    .await;
    let once = create(
        &harness,
        new_job("ada", "Report for run_once", "every", "1h", ""),
    )
    .await;
    let catch_up = create(
        &harness,
        new_job(
            "ada",
            "Report for catch_up",
            "every",
            "1h",
            "catch_up max_runs=2 window=3h",
        ),
    )
    .await;
    assert_eq!(once.missed_policy, "run_once", "the default policy");
    let dir = harness.stop().await;

    // Down for three and a half hours: fire times anchor, +1h, +2h, +3h (= now - 30 min) passed.
    let now = Utc::now().timestamp_millis() / 1000 * 1000;
    let anchor = now - 3 * HOUR - HOUR / 2;
    {
        let conn = rusqlite::Connection::open(dir.path().join("data/clawvisor.db")).unwrap();
        for job in [&skip, &once, &catch_up] {
            move_into_the_past(&conn, job.id, anchor);
        }
    }
    let harness = Harness::start_in(dir, options())
        .await
        .expect("the daemon restarts");
    let store = harness.store().clone();
    wait_for(
        &store,
        "the three late runs",
        Duration::from_secs(60),
        |conn| {
            let done: i64 = conn.query_row(
                "SELECT COUNT(*) FROM job_runs WHERE attempt > 0 AND status = 'succeeded'",
                [],
                |row| row.get(0),
            )?;
            Ok((done == 3).then_some(()))
        },
    )
    .await;
    let (skip_rows, once_rows, catch_up_rows, jobs) = store
        .read(move |conn| {
            let jobs: Vec<JobRow> = [skip.id, once.id, catch_up.id]
                .iter()
                .map(|id| schedules::job(conn, *id).unwrap().unwrap())
                .collect();
            Ok((
                history(conn, skip.id),
                history(conn, once.id),
                history(conn, catch_up.id),
                jobs,
            ))
        })
        .await
        .unwrap();
    let summary = |rows: &[JobRunRow]| -> Vec<(String, String, i64, Option<i64>)> {
        rows.iter()
            .map(|row| {
                (
                    row.status.as_str().to_string(),
                    row.trigger.clone(),
                    row.fire_ms - anchor,
                    row.missed_count,
                )
            })
            .collect()
    };
    let row = |status: &str, trigger: &str, offset: i64, count: Option<i64>| {
        (status.to_string(), trigger.to_string(), offset, count)
    };
    // skip: nothing runs; all four are recorded as skipped.
    assert_eq!(
        summary(&skip_rows),
        vec![row("skipped", "record", 0, Some(4))]
    );
    // run_once: the latest runs (late), the three before it are recorded as missed.
    assert_eq!(
        summary(&once_rows),
        vec![
            row("missed", "record", 0, Some(3)),
            row("succeeded", "caught_up", 3 * HOUR, None)
        ]
    );
    // catch_up (2 runs within 3 h): +2h and +3h run, oldest first; anchor and +1h... +1h is in
    // the window but beyond max_runs, the anchor is outside it: both recorded as missed.
    assert_eq!(
        summary(&catch_up_rows),
        vec![
            row("missed", "record", 0, Some(2)),
            row("succeeded", "caught_up", 2 * HOUR, None),
            row("succeeded", "caught_up", 3 * HOUR, None),
        ]
    );
    assert!(
        catch_up_rows[1].started_ms < catch_up_rows[2].started_ms
            && catch_up_rows[1].finished_ms <= catch_up_rows[2].started_ms,
        "one at a time, oldest first: {catch_up_rows:?}"
    );
    for job in &jobs {
        assert_eq!(
            job.next_run_ms,
            Some(anchor + 4 * HOUR),
            "recomputed from the anchor"
        );
        assert_eq!(job.status.as_str(), "active");
    }
    assert_eq!(jobs[0].last_outcome.as_deref(), Some("skipped"));
    assert!(
        skip_rows[0]
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("4 fire time(s)")
    );
    // Shown, not only stored: the outcomes are runtime events (Studio's history).
    wait_for(
        &store,
        "missed / skipped / caught_up events",
        Duration::from_secs(10),
        |conn| {
            let mut statement =
                conn.prepare("SELECT data FROM runtime_events WHERE kind = 'schedule_outcome'")?;
            let outcomes: Vec<String> = statement
                .query_map([], |row| row.get::<_, Option<String>>(0))?
                .filter_map(|data| data.ok().flatten())
                .collect();
            let has = |word: &str| {
                outcomes
                    .iter()
                    .any(|data| data.contains(&format!("\"outcome\":\"{word}\"")))
            };
            Ok((has("skipped") && has("missed") && has("caught_up")).then_some(()))
        },
    )
    .await;
    let scheduled_runs: i64 = store
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM runs WHERE trigger = 'schedule'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(scheduled_runs, 3, "exactly the runs the policies chose");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_recorded_but_never_sent_is_sent_once_and_an_answer_never_recorded_is_not_run_again()
{
    let llm = ScriptedLlm::start(Script::new()).await.unwrap();
    let options = || {
        let mut options = HarnessOptions::new(llm.base_url());
        options.config_extra = "[scheduler]\nmin_interval = \"1s\"\n".into();
        options
    };
    let harness = Harness::start(options()).await.expect("the daemon starts");
    let lost = create(&harness, new_job("ada", "Lost fire", "every", "1h", "")).await;
    let at =
        (Utc::now() + chrono::TimeDelta::seconds(2)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let answered = create(&harness, new_job("ada", "Answered fire", "at", &at, "")).await;
    let store = harness.store().clone();
    let answered_id = answered.id;
    wait_for(
        &store,
        "the one-shot's answer",
        Duration::from_secs(30),
        move |conn| {
            Ok(history(conn, answered_id)
                .first()
                .filter(|row| row.status == JobRunStatus::Succeeded)
                .map(|_| ()))
        },
    )
    .await;
    let dir = harness.stop().await;

    // The two crash windows, written as a SIGKILL would leave them:
    // - `lost`: the fire is recorded and marked running, its message was never sent;
    // - `answered`: its run ended, but the scheduler never recorded the answer.
    let now = Utc::now().timestamp_millis();
    {
        let conn = rusqlite::Connection::open(dir.path().join("data/clawvisor.db")).unwrap();
        conn.execute(
            "INSERT INTO job_runs (job_id, fire_ms, attempt, trigger, status, due_ms, started_ms, created_ms) \
             VALUES (?1, ?2, 1, 'scheduled', 'running', ?2, ?2, ?2)",
            rusqlite::params![lost.id, now - 1_000],
        )
        .unwrap();
        conn.execute(
            "UPDATE job_runs SET status = 'running', finished_ms = NULL, detail = NULL WHERE job_id = ?1",
            [answered.id],
        )
        .unwrap();
    }
    let requests_before = llm.request_count();
    let harness = Harness::start_in(dir, options())
        .await
        .expect("the daemon restarts");
    let store = harness.store().clone();
    let ids = (lost.id, answered.id);
    let (lost_rows, answered_rows) = wait_for(
        &store,
        "both fires finished",
        Duration::from_secs(30),
        move |conn| {
            let (lost, answered) = (history(conn, ids.0), history(conn, ids.1));
            let done =
                |rows: &[JobRunRow]| rows.iter().all(|row| row.status == JobRunStatus::Succeeded);
            Ok((done(&lost) && done(&answered)).then_some((lost, answered)))
        },
    )
    .await;
    assert_eq!(lost_rows.len(), 1, "{lost_rows:?}");
    assert_eq!(answered_rows.len(), 1, "{answered_rows:?}");
    assert!(
        answered_rows[0]
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("Answered fire"),
        "the recorded answer comes from the finished run: {answered_rows:?}"
    );
    let (lost_runs, answered_runs, markers) = store
        .read(move |conn| {
            let count = |chat: String| -> clawvisor::store::Result<i64> {
                Ok(
                    conn.query_row("SELECT COUNT(*) FROM runs WHERE chat = ?1", [chat], |row| {
                        row.get(0)
                    })?,
                )
            };
            let markers: i64 = conn.query_row(
                "SELECT COUNT(*) FROM session_events WHERE kind = 'user' AND content LIKE ?1",
                [format!("[Scheduled run {} of task #%", lost_rows[0].id)],
                |row| row.get(0),
            )?;
            Ok((
                count(format!("sched:{}", ids.0))?,
                count(format!("sched:{}", ids.1))?,
                markers,
            ))
        })
        .await
        .unwrap();
    assert_eq!(lost_runs, 1, "the lost fire ran once");
    assert_eq!(markers, 1, "its message reached the session once");
    assert_eq!(answered_runs, 1, "the answered fire was not run again");
    assert_eq!(
        llm.request_count(),
        requests_before + 1,
        "one model call: the lost fire's"
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_run_killed_midway_is_finished_once_after_a_restart() {
    let dir = ScratchDir::new("clawvisor-sched-kill").unwrap();
    let script = Script::new()
        .rule(
            Rule::text("The first try.")
                .delay(Duration::from_secs(4))
                .times(1),
        )
        .rule(Rule::text("The scheduled answer."));
    let Staged {
        fake,
        llm,
        bots,
        env,
    } = World::builder(script)
        .agent_with_bot(
            "ada",
            "",
            "778:AAH-sched-kill-test-token-0123456789",
            &[USER],
            &[],
        )
        .config_extra(
            "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"5m\"",
        )
        .stage(dir.path())
        .await;
    let bot = bots[0].id;

    // The job exists before the daemon starts: once, in two seconds, answering in the user's chat.
    let db = dir.path().join("data/clawvisor.db");
    let now = Utc::now().timestamp_millis();
    let store = Store::open(&db, StoreOptions::default()).unwrap();
    store
        .write(move |conn| {
            schedules::insert_job(
                conn,
                &JobRow {
                    id: 0,
                    agent: "ada".into(),
                    name: "kill".into(),
                    prompt: "Say the scheduled thing.".into(),
                    target_chat: Some(format!("tg:{USER}")),
                    kind: "at".into(),
                    expression: Utc
                        .timestamp_millis_opt(now + 2_000)
                        .unwrap()
                        .to_rfc3339_opts(SecondsFormat::Millis, true),
                    timezone: "UTC".into(),
                    anchor_ms: now,
                    missed_policy: "run_once".into(),
                    status: JobStatus::Active,
                    next_run_ms: Some(now + 2_000),
                    last_run_ms: None,
                    last_outcome: None,
                    consecutive_failures: 0,
                    failing: false,
                    created_by: "operator".into(),
                    created_in: None,
                    created_ms: now,
                    updated_ms: now,
                },
                now,
            )
        })
        .await
        .unwrap();
    store.stop_writer();
    drop(store);

    let daemon = DaemonProcess::start(BINARY, dir.path(), &env).expect("the daemon starts");
    // Kill while the scheduled run waits for the model.
    wait_until(Duration::from_secs(30), "the job fired", || async {
        llm.request_count() > 0
    })
    .await;
    daemon.kill();
    let daemon = DaemonProcess::start(BINARY, dir.path(), &env).expect("the daemon restarts");
    let sent = fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == USER && m.visible_text.contains("The scheduled answer."),
            Duration::from_secs(40),
        )
        .await;
    assert!(
        sent.is_some(),
        "the interrupted run was finished and delivered"
    );
    daemon.terminate(Duration::from_secs(30)).unwrap();

    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows = history(&conn, 1);
    assert_eq!(rows.len(), 1, "one fire, never recorded twice: {rows:?}");
    assert_eq!((rows[0].status.as_str(), rows[0].attempt), ("succeeded", 1));
    let runs: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM runs WHERE chat = 'sched:1'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(
        runs, 1,
        "the same run continued after the restart; it did not run twice"
    );
    let messages: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM session_events WHERE kind = 'user' AND content LIKE '[Scheduled run %'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(messages, 1, "the fire's message reached the session once");
    assert_eq!(
        fake.sent(bot)
            .iter()
            .filter(|m| m.visible_text.contains("scheduled answer")
                || m.visible_text.contains("first try"))
            .count(),
        1,
        "delivered once"
    );
}

// ---------------------------------------------------------------------------------------------
// The timer heap with paused tokio time: a standalone scheduler and an agent that answers at once.

/// What the stand-in agent saw: (job id, job run id, scheduler-clock time of arrival).
type Seen = Arc<Mutex<Vec<(i64, i64, i64)>>>;

struct EchoAgent;

struct EchoArgs {
    registry: Registry,
    clock: SchedulerClock,
    seen: Seen,
    arrivals: tokio::sync::mpsc::UnboundedSender<()>,
}

impl Actor for EchoAgent {
    type Msg = AgentMsg;
    type State = EchoArgs;
    type Arguments = EchoArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        args: EchoArgs,
    ) -> Result<EchoArgs, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<AgentMsg>,
        message: AgentMsg,
        state: &mut EchoArgs,
    ) -> Result<(), ActorProcessingErr> {
        if let AgentMsg::View(reply) = message {
            let _ = reply.send(AgentView {
                name: "ada".into(),
                description: String::new(),
                provider: "none".into(),
                model: "none".into(),
                autonomy: Autonomy::TrustFirst,
                paused: false,
                tools: Vec::new(),
                sessions: 0,
                has_telegram: false,
                skills: Vec::new(),
            });
            return Ok(());
        }
        if let AgentMsg::Inbound(inbound) = message {
            let clawvisor::domain::InboundSource::Schedule { job_id, job_run_id } = inbound.source
            else {
                return Ok(());
            };
            state
                .seen
                .lock()
                .unwrap()
                .push((job_id, job_run_id, state.clock.now_ms()));
            if let Some(scheduler) = state.registry.lookup(&clawvisor::protocol::scheduler::NAME) {
                scheduler.cast(SchedulerMsg::Deliver(Outbound {
                    agent: inbound.agent,
                    chat: inbound.chat,
                    run_id: None,
                    correlation: inbound.correlation,
                    event: OutEvent::Final {
                        text: "done".into(),
                        outbox_id: None,
                    },
                }))?;
            }
            let _ = state.arrivals.send(());
        }
        Ok(())
    }
}

struct Bench {
    _dir: ScratchDir,
    store: Store,
    scheduler: Mailbox<SchedulerMsg>,
    agent: ActorRef<AgentMsg>,
    events: EventBus,
    seen: Seen,
    arrivals: tokio::sync::mpsc::UnboundedReceiver<()>,
}

fn spec(name: &str) -> AgentSpec {
    let config =
        config::parse_file(&config_toml("http://127.0.0.1:9/v1", ""), "test.toml").unwrap();
    config::parse_agent(&agent_toml(name, ""), "agent.toml", &config).unwrap()
}

const START_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// A scheduler on a fresh database holding `jobs` (inserted before it starts), on a clock that
/// starts at [`START_MS`] and follows tokio's (paused) time.
async fn standalone(jobs: Vec<JobRow>) -> Bench {
    let dir = ScratchDir::new("clawvisor-sched-heap").unwrap();
    let store = Store::open(&dir.path().join("db.sqlite"), StoreOptions::default()).unwrap();
    store
        .write(move |conn| {
            for job in &jobs {
                schedules::insert_job(conn, job, START_MS)?;
            }
            Ok(())
        })
        .await
        .unwrap();
    let registry = Registry::new();
    let clock = SchedulerClock::tokio_from(START_MS);
    let seen: Seen = Arc::default();
    let (sender, arrivals) = tokio::sync::mpsc::unbounded_channel();
    let (agent, _) = Actor::spawn(
        Some(registry.name(clawvisor::protocol::agent::name("ada").local())),
        EchoAgent,
        EchoArgs {
            registry: registry.clone(),
            clock: clock.clone(),
            seen: seen.clone(),
            arrivals: sender,
        },
    )
    .await
    .unwrap();
    let config = SchedulerConfig {
        min_interval: Dur::secs(1),
        ..SchedulerConfig::default()
    };
    let events = EventBus::new();
    let (scheduler, _) = clawvisor::actors::supervise::spawn_unsupervised(
        &registry,
        &clawvisor::protocol::scheduler::NAME,
        Scheduler,
        SchedulerArgs {
            store: store.clone(),
            registry: registry.clone(),
            events: events.clone(),
            config,
            agents: vec![spec("ada")],
            clock,
        },
    )
    .await
    .unwrap();
    Bench {
        _dir: dir,
        store,
        scheduler: scheduler.get_derived(),
        agent,
        events,
        seen,
        arrivals,
    }
}

fn at_job(at_ms: i64) -> JobRow {
    JobRow {
        id: 0,
        agent: "ada".into(),
        name: format!("at {at_ms}"),
        prompt: "tick".into(),
        target_chat: None,
        kind: "at".into(),
        expression: Utc
            .timestamp_millis_opt(at_ms)
            .unwrap()
            .to_rfc3339_opts(SecondsFormat::Millis, true),
        timezone: "UTC".into(),
        anchor_ms: START_MS,
        missed_policy: "run_once".into(),
        status: JobStatus::Active,
        next_run_ms: Some(at_ms),
        last_run_ms: None,
        last_outcome: None,
        consecutive_failures: 0,
        failing: false,
        created_by: "operator".into(),
        created_in: None,
        created_ms: START_MS,
        updated_ms: START_MS,
    }
}

/// Waits (without a timer of its own, so paused time only jumps to the scheduler's) for `count`
/// more arrivals at the stand-in agent.
async fn arrivals(bench: &mut Bench, count: usize) {
    for _ in 0..count {
        bench.arrivals.recv().await.expect("the agent runs");
    }
}

#[tokio::test(start_paused = true)]
async fn a_thousand_jobs_fire_in_order_at_their_times() {
    // Distinct second offsets within an hour, inserted in an order unrelated to their times.
    let times: Vec<i64> = (1..=1000i64)
        .map(|i| START_MS + (i * 7919 % 3600 + 1) * 1000)
        .collect();
    let mut bench = standalone(times.iter().map(|at| at_job(*at)).collect()).await;
    arrivals(&mut bench, 1000).await;
    let seen = bench.seen.lock().unwrap().clone();
    let arrived: Vec<i64> = seen.iter().map(|(_, _, at)| *at).collect();
    let mut expected = times.clone();
    expected.sort();
    assert_eq!(
        arrived, expected,
        "every job arrived at its agent in order, on time"
    );
    // Each job is the one that was due: job ids map to their own times.
    for (job_id, _, at) in &seen {
        assert_eq!(times[(*job_id - 1) as usize], *at, "job {job_id}");
    }
    // The fires are recorded with their due time and dispatch time: no lateness at all.
    let rows = bench
        .store
        .read(|conn| {
            let mut statement = conn.prepare("SELECT fire_ms, started_ms, status FROM job_runs")?;
            let rows = statement
                .query_map([], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, String>(2)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(rows.len(), 1000);
    assert!(
        rows.iter().all(|(fire, started, _)| started == fire),
        "lateness 0 ms"
    );
    let stats = ractor::call!(bench.scheduler, SchedulerMsg::Stats).unwrap();
    assert_eq!(stats.dispatched, 1000);
    assert_eq!(stats.timers_armed, 1, "one timer, always");
    assert_eq!(stats.next_wake_ms, None, "one-shots are done");
    wait_until_recorded(&bench, 1000).await;
}

/// Waits for the scheduler to have recorded `count` answers (a `Stats` call is answered after
/// every `Deliver` queued before it).
async fn wait_until_recorded(bench: &Bench, count: i64) {
    let _ = ractor::call!(bench.scheduler, SchedulerMsg::Stats).unwrap();
    let succeeded: i64 = bench
        .store
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM job_runs WHERE status = 'succeeded'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(succeeded, count);
}

/// Everything the timer set off so far has been handled: the scheduler answers after the
/// messages queued before, the agent after the fires it was sent. Returns how many fires the
/// agent has seen (the arrivals channel is drained).
async fn settle(bench: &mut Bench) -> usize {
    let _ = ractor::call!(bench.scheduler, SchedulerMsg::Stats).unwrap();
    let _ = ractor::call!(bench.agent, AgentMsg::View).unwrap();
    while bench.arrivals.try_recv().is_ok() {}
    bench.seen.lock().unwrap().len()
}

#[tokio::test(start_paused = true)]
async fn pause_resume_update_and_cancel_take_effect_at_once_on_the_timer() {
    let mut bench = standalone(Vec::new()).await;
    let job = ractor::call!(
        bench.scheduler,
        SchedulerMsg::Create,
        new_job("ada", "every ten seconds", "every", "10s", "")
    )
    .unwrap()
    .unwrap();
    let anchor = job.next_run_ms.unwrap() - 10_000;
    arrivals(&mut bench, 2).await;
    let on_grid = |at: i64, step: i64, anchor: i64| (at - anchor) % step == 0;
    for (_, _, at) in bench.seen.lock().unwrap().iter() {
        assert!(on_grid(*at, 10_000, anchor), "fires on its 10 s grid");
    }

    // Pause: however long we wait, it does not fire.
    let paused = ractor::call!(bench.scheduler, |reply| SchedulerMsg::SetPaused {
        scope: JobScope::Operator,
        id: job.id,
        paused: true,
        reply
    })
    .unwrap()
    .unwrap();
    assert_eq!(
        (paused.status.as_str(), paused.next_run_ms),
        ("paused", None)
    );
    let fired = settle(&mut bench).await;
    tokio::time::advance(Duration::from_secs(300)).await;
    assert_eq!(settle(&mut bench).await, fired, "no fire while paused");

    // Resume: the next fire is the next grid time after now, not a burst of the missed ones.
    let resumed = ractor::call!(bench.scheduler, |reply| SchedulerMsg::SetPaused {
        scope: JobScope::Operator,
        id: job.id,
        paused: false,
        reply
    })
    .unwrap()
    .unwrap();
    let resumed_at = resumed.next_run_ms.unwrap();
    arrivals(&mut bench, 1).await;
    let last = *bench.seen.lock().unwrap().last().unwrap();
    assert_eq!(last.2, resumed_at);
    assert!(on_grid(last.2, 10_000, anchor));

    // Update to every 25 s: the next fires follow the new schedule from the update on.
    let updated = ractor::call!(bench.scheduler, |reply| SchedulerMsg::Update {
        scope: JobScope::Operator,
        id: job.id,
        change: JobChange {
            expression: Some("25s".into()),
            ..JobChange::default()
        },
        reply
    })
    .unwrap()
    .unwrap();
    let new_anchor = updated.next_run_ms.unwrap() - 25_000;
    // A fire of the old schedule may have been under way when the update arrived.
    let before = settle(&mut bench).await;
    arrivals(&mut bench, 2).await;
    let seen = bench.seen.lock().unwrap().clone();
    let (a, b) = (seen[before].2, seen[before + 1].2);
    assert_eq!((a, b - a), (updated.next_run_ms.unwrap(), 25_000));
    assert!(on_grid(b, 25_000, new_anchor));

    // Cancel: it never fires again and leaves the scheduler.
    let cancelled = ractor::call!(bench.scheduler, |reply| SchedulerMsg::Cancel {
        scope: JobScope::Operator,
        id: job.id,
        reply
    })
    .unwrap()
    .unwrap();
    assert_eq!(cancelled.status.as_str(), "cancelled");
    let fired = settle(&mut bench).await;
    tokio::time::advance(Duration::from_secs(300)).await;
    assert_eq!(settle(&mut bench).await, fired, "no fire after cancel");
    let stats = ractor::call!(bench.scheduler, SchedulerMsg::Stats).unwrap();
    assert_eq!((stats.jobs, stats.next_wake_ms), (0, None));
}

#[tokio::test(start_paused = true)]
async fn a_failed_run_is_retried_with_backoff_and_marked_failing() {
    // A stand-in agent that never exists: every dispatch finds no agent named `ghost` in the
    // configuration, so every attempt fails at once and is retried after the backoff.
    let bench = standalone(vec![JobRow {
        agent: "ghost".into(),
        ..at_job(START_MS + 5_000)
    }])
    .await;
    // 5 s, then retries after 30 s, 1 min and 5 min (the default backoff). The test waits on the
    // event bus, not on a timer of its own, so paused time only jumps to the scheduler's timer.
    let mut events = bench.events.subscribe();
    loop {
        let event = events.recv().await.expect("the bus is open");
        if data_json(&event.data)["outcome"] == "failing" {
            break;
        }
    }
    let rows = bench.store.read(|conn| Ok(history(conn, 1))).await.unwrap();
    let attempts: Vec<(i64, String, String, i64)> = rows
        .iter()
        .map(|row| {
            (
                row.attempt,
                row.trigger.clone(),
                row.status.as_str().to_string(),
                row.due_ms - START_MS,
            )
        })
        .collect();
    assert_eq!(
        attempts,
        vec![
            (1, "scheduled".to_string(), "failed".to_string(), 5_000),
            (2, "retry".to_string(), "failed".to_string(), 35_000),
            (3, "retry".to_string(), "failed".to_string(), 95_000),
            (4, "retry".to_string(), "failed".to_string(), 395_000),
        ]
    );
    assert!(
        rows[0]
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("`ghost` is not defined")
    );
    let job = bench
        .store
        .read(|conn| Ok(schedules::job(conn, 1)?.unwrap()))
        .await
        .unwrap();
    assert!(job.failing);
    assert_eq!(job.consecutive_failures, 4);
}

#[tokio::test(start_paused = true)]
async fn an_update_with_an_empty_timezone_keeps_the_tasks_zone() {
    let bench = standalone(Vec::new()).await;
    let mut job = new_job("ada", "morning news", "cron", "0 9 * * *", "");
    job.timezone = "Europe/Berlin".into();
    let created = ractor::call!(bench.scheduler, SchedulerMsg::Create, job)
        .unwrap()
        .unwrap();
    let updated = ractor::call!(bench.scheduler, |reply| SchedulerMsg::Update {
        scope: JobScope::Operator,
        id: created.id,
        change: JobChange {
            name: Some("news".into()),
            timezone: Some(String::new()),
            ..JobChange::default()
        },
        reply
    })
    .unwrap()
    .unwrap();
    assert_eq!(updated.name, "news");
    assert_eq!(updated.timezone, "Europe/Berlin");
}

//! SIGKILL the real daemon at bad moments and start it again on the same data: nothing a user said
//! is lost, nothing is answered twice beyond one duplicate per crash, no approved action runs twice.

use std::time::Duration;

use clawvisor::testkit::fake_telegram::BotId;
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::{Staged, World};

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

/// The fakes of the testkit's world staged on disk, with its directory.
struct Setup {
    dir: ScratchDir,
    staged: Staged,
    bot: BotId,
}

impl std::ops::Deref for Setup {
    type Target = Staged;
    fn deref(&self) -> &Staged {
        &self.staged
    }
}

/// One agent `ada` with a bot; `users` may talk to it (the first approves); `extra` goes into its
/// agent file.
async fn setup(script: Script, users: &[i64], extra: &str) -> Setup {
    let dir = ScratchDir::new("clawvisor-crash").unwrap();
    let staged = World::builder(script)
        .agent_with_bot(
            "ada",
            extra,
            "777:AAH-crash-test-token-0123456789",
            users,
            &users[..1],
        )
        .config_extra(
            "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"5m\"",
        )
        .stage(dir.path())
        .await;
    let bot = staged.bot("ada");
    Setup { dir, staged, bot }
}

impl Setup {
    fn start(&self) -> DaemonProcess {
        DaemonProcess::start(BINARY, self.dir.path(), &self.env).expect("the daemon starts")
    }

    fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.path().join("data/clawvisor.db")).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_daemon_while_updates_arrive_loses_nothing() {
    const MESSAGES: i64 = 48;
    const KILLS: usize = 3;
    // Each message comes from its own private chat, so each gets its own run and its own echo.
    let users: Vec<i64> = (0..MESSAGES)
        .map(|i| 5_000 + i)
        .chain((0..MESSAGES).map(|i| 9_000 + i))
        .collect();
    let script = Script::new().rule(Rule::echo().delay(Duration::from_millis(150)));
    let s = setup(script, &users, "").await;
    let mut daemon = Some(s.start());
    let mut kills = 0;
    let mut late = Vec::new();
    for i in 0..MESSAGES {
        s.fake.push_message(
            s.bot,
            users[i as usize],
            users[i as usize],
            &format!("message number {i}"),
        );
        // A deliberate gap: the messages are spread over time so the kills below land while
        // polling, while runs are open and while replies go out.
        tokio::time::sleep(Duration::from_millis(60)).await;
        // Kill at points spread over the run: while polling, while runs are open, while replies go out.
        if kills < KILLS && i > 0 && i % (MESSAGES / (KILLS as i64 + 1)) == 0 {
            daemon.take().unwrap().kill();
            kills += 1;
            // Updates keep arriving while the daemon is down (from other chats, so each is its own run).
            late.push(i);
            s.fake
                .push_message(s.bot, 9_000 + i, 9_000 + i, &format!("late number {i}"));
            daemon = Some(s.start());
        }
    }
    let answered = |text: &str| -> usize {
        s.fake
            .sent(s.bot)
            .iter()
            .filter(|m| m.visible_text.trim() == format!("echo: {text}"))
            .count()
    };
    wait_until(
        Duration::from_secs(120),
        "every message answered after the crashes",
        || async {
            let mut missing: Vec<String> = (0..MESSAGES)
                .map(|i| format!("message number {i}"))
                .filter(|m| answered(m) == 0)
                .collect();
            missing.extend(
                late.iter()
                    .map(|i| format!("late number {i}"))
                    .filter(|m| answered(m) == 0),
            );
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("unanswered after the crashes: {missing:?}"))
            }
        },
    )
    .await;
    let duplicates: usize = (0..MESSAGES)
        .map(|i| format!("message number {i}"))
        .chain(late.iter().map(|i| format!("late number {i}")))
        .map(|m| answered(&m).saturating_sub(1))
        .sum();
    println!("{MESSAGES} messages, {KILLS} kills, {duplicates} duplicate replies");
    if duplicates > KILLS {
        let conn = s.db();
        let mut statement = conn.prepare("SELECT chat, run_id, id, delivered_ms, attempts, created_ms FROM outbox WHERE chat IN ('tg:5000','tg:5001') ORDER BY id").unwrap();
        let rows: Vec<String> = statement
            .query_map([], |r| {
                Ok(format!(
                    "{:?}",
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, Option<i64>>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?
                    )
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        println!("OUTBOX {rows:#?}");
        let mut statement = conn.prepare("SELECT id, chat, status, trigger, started_ms FROM runs WHERE chat IN ('tg:5000','tg:5001')").unwrap();
        let rows: Vec<String> = statement
            .query_map([], |r| {
                Ok(format!(
                    "{:?}",
                    (
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, i64>(4)?
                    )
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        println!("RUNS {rows:#?}");
        for m in s
            .fake
            .sent(s.bot)
            .iter()
            .filter(|m| m.chat_id == 5000 || m.chat_id == 5001)
        {
            println!(
                "SENT chat={} id={} at={:?} text={:?}",
                m.chat_id, m.message_id, m.sent_at, m.visible_text
            );
        }
    }
    assert!(
        duplicates <= KILLS,
        "at most one duplicate per crash, got {duplicates}"
    );
    let log = daemon
        .take()
        .unwrap()
        .terminate(Duration::from_secs(30))
        .unwrap();
    assert!(log.0.success());
    let conn = s.db();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let open: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM runs WHERE status IN ('running', 'waiting_approval')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(open, 0, "every interrupted run was resumed and finished");
    let _ = &s.llm;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_midway_is_resumed_and_the_transcript_is_intact() {
    let script = Script::new()
        .rule(
            Rule::text("Here is the slow answer.")
                .delay(Duration::from_secs(4))
                .times(1),
        )
        .rule(Rule::text("Here is the answer after the restart."));
    let s = setup(script, &[42], "").await;
    let daemon = s.start();
    s.fake.push_message(s.bot, 42, 42, "tell me something");
    // Wait until the run is open and the model is thinking, then kill.
    wait_until(Duration::from_secs(20), "the run's model call", || async {
        s.llm.request_count() > 0
    })
    .await;
    daemon.kill();
    let daemon = s.start();
    let reply = s
        .fake
        .wait_for_sent(
            s.bot,
            |m| m.visible_text.contains("after the restart"),
            Duration::from_secs(30),
        )
        .await;
    assert!(
        reply.is_some(),
        "the interrupted run was resumed and answered"
    );
    daemon.terminate(Duration::from_secs(30)).unwrap();
    let conn = s.db();
    let kinds: Vec<(String, String)> = {
        let mut statement = conn
            .prepare("SELECT kind, content FROM session_events ORDER BY id")
            .unwrap();
        statement
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(
        kinds[0],
        ("user".to_string(), "tell me something".to_string())
    );
    assert_eq!(
        kinds.last().unwrap().1,
        "Here is the answer after the restart."
    );
    let steps: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM run_steps WHERE kind = 'note' AND name = 'resume'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(steps, 1, "the resume is recorded");
    let runs: i64 = conn
        .query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        runs, 1,
        "the same run continued; nothing was answered twice"
    );
    assert_eq!(
        s.fake
            .sent(s.bot)
            .iter()
            .filter(|m| m.chat_id == 42
                && !m.visible_text.is_empty()
                && m.visible_text.contains("answer"))
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_survives_a_kill_and_runs_once_when_approved() {
    let script = Script::new()
        .rule(Rule::text("Written after the restart.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "plan.txt", "content": "survived", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("write"),
        );
    let s = setup(
        script,
        &[42],
        "tools = [\"write_file\"]\nautonomy = \"require_approval\"",
    )
    .await;
    let daemon = s.start();
    s.fake.push_message(s.bot, 42, 42, "write the plan");
    let first = s
        .fake
        .wait_for_sent(
            s.bot,
            |m| m.callback_data().iter().any(|d| d.starts_with("ap:")),
            Duration::from_secs(30),
        )
        .await
        .expect("buttons posted");
    daemon.kill();
    let daemon = s.start();
    // Telegram forgets unanswered buttons: the request is posted again with fresh ones.
    let again = s
        .fake
        .wait_for_sent(
            s.bot,
            |m| {
                m.message_id > first.message_id
                    && m.callback_data().iter().any(|d| d.starts_with("ap:"))
            },
            Duration::from_secs(30),
        )
        .await
        .expect("re-posted after the restart");
    assert!(again.visible_text.contains("posted again after a restart"));
    let workspace = s.dir.path().join("data/workspaces/ada/plan.txt");
    assert!(!workspace.exists(), "nothing ran without a decision");
    let data = again
        .callback_data()
        .into_iter()
        .find(|d| d.starts_with("ap:"))
        .unwrap()
        .to_string();
    s.fake.push_callback(s.bot, 42, 42, again.message_id, &data);
    s.fake
        .wait_for_sent(
            s.bot,
            |m| m.visible_text.contains("Written after the restart."),
            Duration::from_secs(30),
        )
        .await
        .expect("the resumed run finished");
    assert_eq!(std::fs::read_to_string(&workspace).unwrap(), "survived");
    daemon.terminate(Duration::from_secs(30)).unwrap();
    let conn = s.db();
    let executed: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(executed, 1);
    let status: String = conn
        .query_row("SELECT status FROM approvals", [], |r| r.get(0))
        .unwrap();
    assert_eq!(status, "consumed");
}

/// Kills the daemon at a spread of moments around an approval — before it is asked, while it is
/// pending, right after the press, while the action runs, after it ran — and checks the property
/// after each: the action's effect exists only with an approved (and consumed) request behind it,
/// and it ran at most once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_every_kill_point_no_l2_action_runs_without_a_stored_approval() {
    // Milliseconds after the button press (negative: before it, while pending or even earlier).
    const KILL_POINTS_MS: &[i64] = &[-2_000, -1, 0, 5, 20, 60, 150, 400];
    for (round, &kill_at) in KILL_POINTS_MS.iter().enumerate() {
        let script = Script::new()
            .rule(Rule::text("Saved.").when_after_tool_result("write_file"))
            .rule(
                Rule::tool_call(
                    "write_file",
                    r#"{"path": "ledger.txt", "content": "entry", "mode": "append"}"#,
                )
                .when_last_user_contains("record"),
            );
        let s = setup(
            script,
            &[42],
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"",
        )
        .await;
        let ledger = s.dir.path().join("data/workspaces/ada/ledger.txt");
        let daemon = s.start();
        s.fake.push_message(s.bot, 42, 42, "record the entry");
        if kill_at == -2_000 {
            // Killed before the request is even shown (the run may not have asked yet): a
            // deliberate moment of the kill, not a wait for a state.
            tokio::time::sleep(Duration::from_millis(150)).await;
            daemon.kill();
        } else {
            let asked = s
                .fake
                .wait_for_sent(
                    s.bot,
                    |m| m.callback_data().iter().any(|d| d.starts_with("ap:")),
                    Duration::from_secs(30),
                )
                .await
                .expect("buttons posted");
            if kill_at < 0 {
                daemon.kill();
            } else {
                let data = asked
                    .callback_data()
                    .into_iter()
                    .find(|d| d.starts_with("ap:"))
                    .unwrap()
                    .to_string();
                s.fake.push_callback(s.bot, 42, 42, asked.message_id, &data);
                // The kill lands `kill_at` ms after the press: a deliberate moment, not a state.
                tokio::time::sleep(Duration::from_millis(kill_at as u64)).await;
                daemon.kill();
            }
        }
        // The property holds at the moment of the kill.
        check_no_unapproved_effect(&s, &ledger, round);

        // After the restart the request is either done or asked again; approving finishes it.
        let daemon = s.start();
        let pressed = std::cell::RefCell::new(std::collections::HashSet::new());
        wait_until(
            Duration::from_secs(40),
            "the approved action to finish",
            || async {
                let sent = s.fake.sent(s.bot);
                if sent.iter().any(|m| m.visible_text.contains("Saved.")) {
                    return Ok(());
                }
                for message in &sent {
                    for data in message.callback_data() {
                        if data.starts_with("ap:") && pressed.borrow_mut().insert(message.message_id)
                        {
                            s.fake
                                .push_callback(s.bot, 42, 42, message.message_id, data);
                        }
                    }
                }
                Err(format!(
                    "round {round} (kill at {kill_at} ms): the action neither finished nor was asked again; sent: {:?}",
                    sent.iter().map(|m| m.visible_text.clone()).collect::<Vec<_>>()
                ))
            },
        )
        .await;
        daemon.terminate(Duration::from_secs(30)).unwrap();
        check_no_unapproved_effect(&s, &ledger, round);
        let written = std::fs::read_to_string(&ledger).unwrap_or_default();
        assert!(
            written.matches("entry").count() <= 1,
            "round {round} (kill at {kill_at} ms): the action ran more than once: {written:?}"
        );
    }
}

/// The effect on disk exists only if an approver's decision is stored for it, and every executed
/// call in the audit log has an approval that was approved and then consumed.
fn check_no_unapproved_effect(s: &Setup, ledger: &std::path::Path, round: usize) {
    let conn = s.db();
    let approved: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM approvals WHERE status IN ('approved', 'consumed') AND decided_by IS NOT NULL AND decided_ms IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    if ledger.exists() {
        assert!(
            approved >= 1,
            "round {round}: the file was written without a stored approval"
        );
        let consumed: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM approvals WHERE status = 'consumed'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            consumed >= 1,
            "round {round}: an action ran from an approval not marked consumed"
        );
    }
    let mut statement = conn
        .prepare("SELECT details FROM audit_log WHERE action = 'tool.executed'")
        .unwrap();
    let executed: Vec<String> = statement
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for detail in executed {
        let detail: serde_json::Value = serde_json::from_str(&detail).unwrap();
        let id = detail["approval"].as_str().unwrap_or_default().to_string();
        let status: Option<String> = conn
            .query_row("SELECT status FROM approvals WHERE id = ?1", [&id], |r| {
                r.get(0)
            })
            .ok();
        assert_eq!(
            status.as_deref(),
            Some("consumed"),
            "round {round}: executed call {detail} has no consumed approval"
        );
    }
}

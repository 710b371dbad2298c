//! SIGKILL the real daemon at bad moments and start it again on the same data: nothing a user said
//! is lost, nothing is answered twice beyond one duplicate per crash, no approved action runs twice.

use std::collections::BTreeMap;
use std::time::Duration;

use clawvisor::testkit::fake_telegram::{BotId, FakeTelegram};
use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

struct Setup {
    dir: ScratchDir,
    fake: FakeTelegram,
    llm: ScriptedLlm,
    bot: BotId,
    env: BTreeMap<String, String>,
}

/// One agent `ada` with a bot; `users` may talk to it; `extra` goes into its agent file.
async fn setup(script: Script, users: &[i64], extra: &str) -> Setup {
    let dir = ScratchDir::new("clawvisor-crash").unwrap();
    let fake = FakeTelegram::start().await;
    let llm = ScriptedLlm::start(script).await.unwrap();
    let token = "777:AAH-crash-test-token-0123456789";
    let bot = fake.add_bot(token, "ada_bot");
    let users: Vec<String> = users.iter().map(i64::to_string).collect();
    let agent = agent_toml(
        "ada",
        &format!(
            "{extra}\n[telegram]\ntoken_env = \"ADA_TOKEN\"\napi_url = \"{}\"\nallow_users = [{}]\napprovers = [{}]\n",
            fake.base_url(),
            users.join(", "),
            users[0]
        ),
    );
    write_config(
        dir.path(),
        &config_toml(
            &llm.base_url(),
            "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"5m\"\n",
        ),
        &[agent],
    )
    .unwrap();
    let env = BTreeMap::from([("ADA_TOKEN".to_string(), token.to_string())]);
    Setup {
        dir,
        fake,
        llm,
        bot,
        env,
    }
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let answered = |text: &str| -> usize {
        s.fake
            .sent(s.bot)
            .iter()
            .filter(|m| m.visible_text.trim() == format!("echo: {text}"))
            .count()
    };
    loop {
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
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "unanswered after the crashes: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while s.llm.request_count() == 0 {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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

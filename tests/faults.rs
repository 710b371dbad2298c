//! Fault injection against each dependency, with the same checks every time: every message that
//! was accepted is answered exactly once, nothing is lost, and the daemon says what happened.
//! Each scenario prints what was injected, how the daemon reacted, and what was lost.
//!
//! - Bot API: 409 conflicts, 429 with retry_after, 502s, hanging polls, connections reset;
//! - the model: 429, 500, a timeout, a truncated stream, a malformed tool call;
//! - the SQLite file locked by another process for longer than `busy_timeout`;
//! - the disk full while writing (a 6 MiB tmpfs under the data directory; skipped with a printed
//!   reason where mounting is not permitted).
//!
//! - MCP: the server process dying in the middle of a call, and a call that hangs past its
//!   timeout (the repository's MCP test server; `tests/mcp.rs` has more: SIGKILL, servers that
//!   never initialize or answer garbage, no orphans after a daemon kill).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use clawvisor::domain::ChatKey;
use clawvisor::events::{EventKind, EventReceiver};
use clawvisor::testkit::fake_telegram::{BotId, FakeTelegram};
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::tmpfs::Tmpfs;
use clawvisor::testkit::world::World as TestWorld;
use clawvisor::testkit::{poll_until, wait_until};

/// Prints a figure straight to stderr: libtest captures `println!` of passing tests, and these
/// figures belong in CI's log whether the test passes or not.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

const USER: i64 = 42;

/// Puts one fault into the fake Bot API.
type Inject = Box<dyn Fn(&FakeTelegram, BotId)>;

/// The testkit's world (agent `ada` with a bot), that bot, and the daemon's events.
struct World {
    world: TestWorld,
    bot: BotId,
    events: EventReceiver,
}

impl std::ops::Deref for World {
    type Target = TestWorld;
    fn deref(&self) -> &TestWorld {
        &self.world
    }
}

/// One agent with a bot on the fake Bot API; the daemon's data lives in `dir`.
async fn world(dir: ScratchDir, config_extra: &str) -> World {
    let world = TestWorld::builder(Script::new().rule(Rule::echo()))
        .agent_with_bot("ada", "", "5151:AAH-fault-injection-token-01", &[USER], &[])
        .config_extra(config_extra)
        .dir(dir)
        .start()
        .await;
    let bot = world.bot("ada");
    let events = world.harness.daemon().events.subscribe();
    World { world, bot, events }
}

impl World {
    /// Waits until each chat in `chats` has a reply containing its text; returns the replies per
    /// chat (to count duplicates).
    async fn replies(&self, chats: &[(i64, String)], timeout: Duration) -> BTreeMap<i64, usize> {
        let per_chat = || {
            let sent = self.fake.sent(self.bot);
            let mut per_chat = BTreeMap::new();
            for (chat, text) in chats {
                let count = sent
                    .iter()
                    .filter(|message| message.chat_id == *chat && message.text.contains(text))
                    .count();
                per_chat.insert(*chat, count);
            }
            per_chat
        };
        let _ = poll_until(timeout, || async {
            per_chat().values().all(|count| *count >= 1)
        })
        .await;
        per_chat()
    }

    /// A storage fault already in place: three messages arrive, the fault lasts 3 s, `release`
    /// ends it; then nothing may be lost or doubled, and the database file must be intact.
    async fn storage_fault(&mut self, injected: &str, first_chat: i64, release: impl FnOnce()) {
        self.reactions();
        let started = Instant::now();
        let chats: Vec<(i64, String)> = (0..3)
            .map(|k| {
                let chat = first_chat + k;
                let text = format!("during the fault {k}");
                self.fake.push_message(self.bot, chat, USER, &text);
                (chat, text)
            })
            .collect();
        // A deliberate gap: the fault lasts 3 s, whatever the daemon does meanwhile.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let during = self.replies(&chats, Duration::ZERO).await;
        release();
        self.replies(&chats, Duration::from_secs(60)).await;
        let took = started.elapsed();
        // Anything sent twice would be in flight until the daemon settles.
        self.harness.wait_settled(Duration::from_secs(60)).await;
        let replies = self.replies(&chats, Duration::ZERO).await;
        let mut reactions = self.reactions();
        reactions.push(format!(
            "{} answered during the fault",
            during.values().filter(|count| **count > 0).count()
        ));
        verdict(injected, &reactions, &replies, took);
        let integrity: String = self
            .harness
            .store()
            .read(|conn| Ok(conn.query_row("PRAGMA integrity_check", [], |row| row.get(0))?))
            .await
            .unwrap();
        assert_eq!(integrity, "ok", "{injected}");
    }

    /// What the daemon said about itself since the last call (bot status, warnings, failures).
    fn reactions(&mut self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        while let Ok(event) = self.events.try_recv() {
            if matches!(
                event.kind,
                EventKind::BotStatus
                    | EventKind::Warning
                    | EventKind::ActorFailed
                    | EventKind::ActorRestarting
            ) {
                seen.insert(format!("{}: {}", event.kind.as_str(), event.detail));
            }
        }
        seen.into_iter().collect()
    }
}

/// Checks one scenario's outcome and prints its line.
fn verdict(injected: &str, reactions: &[String], replies: &BTreeMap<i64, usize>, took: Duration) {
    let lost = replies.values().filter(|count| **count == 0).count();
    let duplicated: usize = replies.values().map(|count| count.saturating_sub(1)).sum();
    let reaction = if reactions.is_empty() {
        "retried quietly".to_string()
    } else {
        reactions.join("; ")
    };
    report!(
        "fault: {injected}\n    reaction: {reaction}\n    answered {} of {} in {took:?}; lost {lost}; duplicated {duplicated}",
        replies.len() - lost,
        replies.len()
    );
    assert_eq!(lost, 0, "{injected}: lost replies {replies:?}");
    assert_eq!(duplicated, 0, "{injected}: duplicate replies {replies:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_api_faults_lose_nothing() {
    let mut world = world(ScratchDir::new("clawvisor-faults").unwrap(), "").await;
    assert!(
        world
            .fake
            .wait_for_poll(world.bot, Duration::from_secs(10))
            .await
    );
    let faults: Vec<(&str, Inject)> = vec![
        (
            "409 Conflict ×3 on getUpdates (another poller)",
            Box::new(|fake, bot| fake.conflict_next(bot, 3)),
        ),
        (
            "429 retry_after=1 ×2 on sendMessage",
            Box::new(|fake, bot| fake.rate_limit_next(bot, "sendMessage", 1, 2)),
        ),
        // teloxide waits 10 s after any 5xx before it returns; with the tests' 2 s long poll that
        // outlasts the stuck-poll deadline (poll timeout + grace), so the bot is restarted. With
        // the default 30 s poll it is a 10 s pause.
        (
            "502 Bad Gateway ×2 on getUpdates and ×2 on sendMessage",
            Box::new(|fake, bot| {
                fake.server_error_next(bot, "getUpdates", 2);
                fake.server_error_next(bot, "sendMessage", 2);
            }),
        ),
        (
            "getUpdates hangs for 3 s (stalled network)",
            Box::new(|fake, bot| fake.hang_polls(bot, Duration::from_secs(3))),
        ),
        (
            "connection reset ×3 (any method)",
            Box::new(|fake, bot| fake.reset_connections(bot, 3)),
        ),
    ];
    for (index, (injected, inject)) in faults.iter().enumerate() {
        world.reactions();
        inject(&world.fake, world.bot);
        let started = Instant::now();
        let chats: Vec<(i64, String)> = (0..3)
            .map(|k| {
                let chat = 1_000 + index as i64 * 10 + k;
                let text = format!("fault {index} message {k}");
                world.fake.push_message(world.bot, chat, USER, &text);
                (chat, text)
            })
            .collect();
        world.replies(&chats, Duration::from_secs(60)).await;
        // The fault is over (every injected answer served) and the bot polls again, so what it
        // did about this fault (backing off, restarting) is counted here, not in the next one.
        let _ = poll_until(Duration::from_secs(60), || async {
            world.fake.faults_pending(world.bot) == 0
        })
        .await;
        assert!(
            world
                .fake
                .wait_for_poll(world.bot, Duration::from_secs(60))
                .await,
            "{injected}: the bot never polled again"
        );
        let took = started.elapsed();
        // Anything sent twice would be in flight until the daemon settles.
        world.harness.wait_settled(Duration::from_secs(60)).await;
        let replies = world.replies(&chats, Duration::ZERO).await;
        let reactions = world.reactions();
        verdict(injected, &reactions, &replies, took);
    }
    world.world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_faults_end_in_an_answer_or_a_clear_notice() {
    let script = Script::new()
        .rule(
            Rule::error(429, "rate limited")
                .with_retry_after("1")
                .times(1)
                .when_last_user_contains("rate"),
        )
        .rule(
            Rule::error(500, "upstream exploded")
                .times(1)
                .when_last_user_contains("fivehundred"),
        )
        .rule(
            Rule::text("too late")
                .delay(Duration::from_secs(5))
                .times(2)
                .when_last_user_contains("slow"),
        )
        .rule(
            Rule::cut_stream_after("half an ans")
                .times(2)
                .when_last_user_contains("truncated"),
        )
        .rule(Rule::text("Recovered after a bad tool call.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call("write_file", "{\"path\": \"x.txt\", \"content\": ")
                .times(1)
                .when_last_user_contains("malformed"),
        )
        .rule(Rule::echo());
    let llm = ScriptedLlm::start(script).await.expect("model");
    let mut options = HarnessOptions::new(llm.base_url());
    options.config_extra = format!(
        "[providers.flaky]\nkind = \"openai\"\nbase_url = \"{}\"\ntimeout = \"1s\"\nmax_retries = 1\n",
        llm.base_url()
    );
    options.agents = vec![
        "name = \"ada\"\nprovider = \"flaky\"\nmodel = \"scripted-model\"\ninstructions = \"You are ada.\"\ntools = [\"write_file\"]\nautonomy = \"trust_first\"\n"
            .to_string(),
    ];
    let harness = Harness::start(options).await.expect("daemon");
    for (injected, ask) in [
        ("429 with retry-after 1 s, once", "rate check"),
        ("500 once", "fivehundred check"),
        (
            "no answer within the 1 s timeout, twice (every attempt)",
            "slow check",
        ),
        (
            "stream cut mid-answer, twice (every attempt)",
            "truncated check",
        ),
        (
            "a tool call whose arguments are not JSON",
            "malformed check",
        ),
    ] {
        let started = Instant::now();
        let reply = harness
            .ask("ada", &ChatKey::cli(ask.split(' ').next().unwrap()), ask)
            .await
            .unwrap_or_else(|error| panic!("{injected}: no answer at all: {error}"));
        let run = reply.run_id.expect("a run");
        let (status, outcome): (String, Option<String>) = harness
            .store()
            .read(move |conn| {
                Ok(conn.query_row(
                    "SELECT status, outcome FROM runs WHERE id = ?1",
                    [run],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )?)
            })
            .await
            .unwrap();
        report!(
            "fault: model {injected}\n    reaction: run {run} {status}: {}\n    answer: {:?} in {:?}; lost 0",
            outcome
                .as_deref()
                .unwrap_or("")
                .chars()
                .take(120)
                .collect::<String>(),
            reply.text.chars().take(120).collect::<String>(),
            started.elapsed()
        );
        assert!(!reply.text.trim().is_empty(), "{injected}: an empty answer");
        match ask {
            "rate check" | "fivehundred check" => {
                assert_eq!(status, "succeeded", "{injected}: a retry recovers");
                assert!(reply.text.contains(ask), "{injected}: {}", reply.text);
            }
            "malformed check" => {
                assert_eq!(status, "succeeded", "{injected}");
                assert_eq!(reply.text, "Recovered after a bad tool call.");
            }
            _ => {
                assert_eq!(status, "failed", "{injected}: every attempt failed");
                assert!(
                    reply.text.len() > 20,
                    "{injected}: the user is told: {}",
                    reply.text
                );
            }
        }
    }
    // The agent is fine afterwards.
    let reply = harness
        .ask("ada", &ChatKey::cli("after"), "still there?")
        .await
        .unwrap();
    assert!(reply.text.contains("still there?"));
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_locked_by_another_process_delays_but_loses_nothing() {
    let mut world = world(
        ScratchDir::new("clawvisor-faults-lock").unwrap(),
        "[store]\nbusy_timeout = \"500ms\"\n",
    )
    .await;
    assert!(
        world
            .fake
            .wait_for_poll(world.bot, Duration::from_secs(10))
            .await
    );
    let path = world.harness.dir.path().join("data").join("clawvisor.db");
    // Another process (here: another connection) takes the write lock and holds it for 3 s,
    // six times the daemon's busy_timeout.
    let locker = rusqlite::Connection::open(&path).expect("open the daemon's database");
    locker.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    world
        .storage_fault(
            "the SQLite file locked by another process for 3 s (busy_timeout 500 ms)",
            2_000,
            move || {
                locker.execute_batch("COMMIT").expect("unlock");
                drop(locker);
            },
        )
        .await;
    world.world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_delays_but_loses_nothing() {
    let dir = ScratchDir::new("clawvisor-faults-disk").unwrap();
    let data = dir.path().join("data");
    let tmpfs = match Tmpfs::mount(&data, "6m") {
        Ok(mounted) => mounted,
        Err(reason) => {
            report!("fault: disk full — not available here ({reason}); skipped");
            return;
        }
    };
    // Watermarks that fit a 6 MiB disk (the defaults would hold writes from the start).
    let mut world = world(dir, "[store]\nmin_free = \"2MiB\"\nhold_free = \"1MiB\"").await;
    assert!(
        world
            .fake
            .wait_for_poll(world.bot, Duration::from_secs(10))
            .await
    );
    // Fill the file system to the last byte.
    let filler = tmpfs.fill("filler").unwrap();
    world
        .storage_fault(
            "the disk full (6 MiB tmpfs filled to the last byte) for 3 s",
            3_000,
            || std::fs::remove_file(&filler).unwrap(),
        )
        .await;
    world.world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_faults_end_in_an_answer_and_the_link_comes_back() {
    const SERVER: &str = env!("CARGO_BIN_EXE_clawvisor-mcp-test-server");
    let script = Script::new()
        .rule(Rule::text("The tool failed; I said so.").when_after_tool_result("local__crash"))
        .rule(Rule::text("The tool hung; I said so.").when_after_tool_result("local__sleep"))
        .rule(Rule::text("Echo worked.").when_after_tool_result("local__echo"))
        .rule(Rule::tool_call("local__crash", "{}").when_last_user_contains("crash"))
        .rule(Rule::tool_call("local__sleep", r#"{"ms": 30000}"#).when_last_user_contains("hang"))
        .rule(
            Rule::tool_call("local__echo", r#"{"text": "still here"}"#)
                .when_last_user_contains("echo"),
        );
    let llm = ScriptedLlm::start(script).await.expect("model");
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", "autonomy = \"trust_first\"")];
    options.config_extra = format!(
        "[mcp]\nconnect_timeout = \"2s\"\nping_every = \"300ms\"\n\
         [[mcp.servers]]\nname = \"local\"\ntransport = \"stdio\"\ncommand = \"{SERVER}\"\n\
         trust = \"trusted\"\nagents = [\"*\"]\ntimeout = \"1s\"\n"
    );
    let harness = Harness::start(options).await.expect("daemon");
    let mut events = harness.daemon().events.subscribe();
    for (index, (injected, ask, answer)) in [
        (
            "the server process exits in the middle of a call",
            "crash it",
            "The tool failed; I said so.",
        ),
        (
            "a call hangs past the server's 1 s timeout",
            "hang it",
            "The tool hung; I said so.",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        wait_until(
            Duration::from_secs(20),
            &format!("{injected}: the link is not up"),
            || async {
                harness
                    .agent_tools("ada")
                    .await
                    .iter()
                    .any(|tool| tool == "local__echo")
            },
        )
        .await;
        while events.try_recv().is_ok() {}
        let started = Instant::now();
        let chat = ChatKey::cli(&format!("mcp-{index}"));
        let reply = harness.ask("ada", &chat, ask).await.expect("an answer");
        // What the model got back for the failed call: the last tool message of its request.
        let told: String = llm
            .requests()
            .last()
            .and_then(|request| {
                request["messages"].as_array().and_then(|messages| {
                    messages
                        .iter()
                        .rev()
                        .find(|message| message["role"] == "tool")
                        .and_then(|message| message["content"].as_str().map(str::to_string))
                })
            })
            .unwrap_or_default()
            .chars()
            .take(160)
            .collect();
        // The agent answers again afterwards, through the same server (restarted if it died).
        let again = std::cell::RefCell::new(None);
        let _ = poll_until(Duration::from_secs(20), || async {
            let answer = harness
                .ask("ada", &chat, "echo please")
                .await
                .expect("an answer");
            let worked = answer.text == "Echo worked.";
            *again.borrow_mut() = Some(answer);
            worked
        })
        .await;
        let again = again.into_inner().expect("asked at least once");
        let mut reactions = BTreeSet::new();
        while let Ok(event) = events.try_recv() {
            if matches!(
                event.kind,
                EventKind::McpHealth | EventKind::ActorRestarting
            ) {
                reactions.insert(format!("{}: {}", event.kind.as_str(), event.detail));
            }
        }
        report!(
            "fault: MCP {injected}\n    reaction: the model was told {told:?}; {}\n    answer: {:?} in {:?}; afterwards: {:?}; lost 0",
            reactions.into_iter().collect::<Vec<_>>().join("; "),
            reply.text,
            started.elapsed(),
            again.text
        );
        assert_eq!(reply.text, answer, "{injected}: {reply:?}");
        assert!(
            reply.tools.iter().any(|tool| tool.ends_with("failed")),
            "{injected}: {reply:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "{injected}: not waited out for the call's 30 s"
        );
        assert_eq!(
            again.text, "Echo worked.",
            "{injected}: the server is usable again"
        );
    }
    harness.stop().await;
}

//! The Telegram channel against the fake Bot API: several bots in one daemon, faults per bot,
//! pacing, splitting, streaming. The daemon runs in-process; the model is the scripted server.

use std::time::Duration;

use clawvisor::testkit::fake_telegram::{FakeTelegram, IncomingMessage};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::world::{World, WorldBot};
use clawvisor::testkit::{poll_until, wait_until};

const USER: i64 = 42;

/// Agents `names`, each with its own bot on the fake; `telegram` is the daemon's [telegram] table;
/// `before_start` runs once the bots exist, before the daemon starts.
async fn world(
    names: &[&'static str],
    script: Script,
    telegram: &str,
    before_start: impl FnOnce(&FakeTelegram, &[WorldBot]),
) -> World {
    world_with(names, "", script, telegram, before_start).await
}

/// Like [`world`], with `agent_extra` in every agent's file.
async fn world_with(
    names: &[&'static str],
    agent_extra: &str,
    script: Script,
    telegram: &str,
    before_start: impl FnOnce(&FakeTelegram, &[WorldBot]),
) -> World {
    let mut builder = World::builder(script).config_extra(&format!("[telegram]\n{telegram}\n"));
    for (index, name) in names.iter().enumerate() {
        let token = format!("{}:AAH-test-token-{name}-{index:04}", 100 + index);
        builder = builder.agent_with_bot(name, agent_extra, &token, &[USER], &[]);
    }
    builder.start_after(before_start).await
}

/// The statuses of the stored updates from `user`, oldest first.
async fn update_statuses(w: &World, user: i64) -> Vec<String> {
    w.harness
        .store()
        .read(move |conn| {
            let mut statement = conn.prepare(
                "SELECT status FROM inbound_updates WHERE user_id = ?1 ORDER BY update_id",
            )?;
            let rows = statement.query_map([user], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

fn per_agent_script(names: &[&str]) -> Script {
    names.iter().fold(Script::new(), |script, name| {
        script.rule(
            Rule::text(format!("{name} here, answering"))
                .when_system_contains(format!("You are {name}")),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_bots_each_answer_through_their_own_agent() {
    let names = ["alpha", "beta", "gamma"];
    let w = world(
        &names,
        per_agent_script(&names),
        "poll_timeout = \"2s\"\nboot_stagger = \"50ms\"",
        |_, _| {},
    )
    .await;
    for bot in &w.bots {
        w.fake.push_message(bot.id, USER, USER, "hello");
    }
    for bot in &w.bots {
        let expected = format!("{} here, answering", bot.agent);
        let sent = w
            .fake
            .wait_for_sent(
                bot.id,
                |m| m.visible_text.contains(&expected),
                Duration::from_secs(30),
            )
            .await;
        assert!(sent.is_some(), "{} answered through its own bot", bot.agent);
        for other in w.bots.iter().filter(|other| other.agent != bot.agent) {
            assert!(
                !w.fake
                    .sent(other.id)
                    .iter()
                    .any(|m| m.visible_text.contains(&expected)),
                "{} never answers through {}'s bot",
                bot.agent,
                other.agent
            );
        }
        // Typing was shown while the run worked, and commands were registered at start.
        assert!(!w.fake.chat_actions(bot.id).is_empty());
        assert!(!w.fake.commands(bot.id).is_empty());
    }
    // Every update was stored before it was confirmed, and is marked processed once answered.
    wait_until(
        Duration::from_secs(10),
        "3 updates marked processed",
        || async {
            let processed: i64 = w
                .harness
                .store()
                .read(|conn| {
                    Ok(conn.query_row(
                        "SELECT COUNT(*) FROM inbound_updates WHERE status = 'processed'",
                        [],
                        |r| r.get(0),
                    )?)
                })
                .await
                .unwrap();
            if processed == 3 {
                Ok(())
            } else {
                Err(format!("{processed} of 3 updates marked processed"))
            }
        },
    )
    .await;
    let _ = &w.llm;
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_user_gets_one_pairing_reply_and_an_approver_pairs_them() {
    let names = ["alpha"];
    let w = world(
        &names,
        per_agent_script(&names),
        "poll_timeout = \"2s\"",
        |_, _| {},
    )
    .await;
    let bot = w.bot("alpha");
    let stranger = 777;
    w.fake.push_message(bot, stranger, stranger, "hi there");
    let reply = w
        .fake
        .wait_for_sent(bot, |m| m.chat_id == stranger, Duration::from_secs(20))
        .await
        .expect("one short reply");
    assert!(
        reply.visible_text.contains("code"),
        "{}",
        reply.visible_text
    );
    w.fake.push_message(bot, stranger, stranger, "hello again?");
    // Once the second update is stored as ignored, the bot has decided: no reply can follow.
    wait_until(
        Duration::from_secs(20),
        "both updates of the unknown user handled",
        || async { update_statuses(&w, stranger).await == ["ignored", "ignored"] },
    )
    .await;
    assert_eq!(
        w.fake
            .sent(bot)
            .iter()
            .filter(|m| m.chat_id == stranger)
            .count(),
        1,
        "nothing more for an unknown user"
    );
    assert_eq!(
        w.llm.request_count(),
        0,
        "unknown users never reach the model"
    );
    // The approver pairs them with the code from the reply.
    let code: String = w
        .harness
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT code FROM pairing_codes WHERE user_id = 777",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    w.fake
        .push_message(bot, USER, USER, &format!("/pair {code}"));
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == stranger && m.visible_text.contains("approved"),
            Duration::from_secs(20),
        )
        .await
        .expect("told");
    w.fake.push_message(bot, stranger, stranger, "now?");
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == stranger && m.visible_text.contains("alpha here"),
            Duration::from_secs(20),
        )
        .await
        .expect("answered once paired");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_poll_restarts_its_bot_and_a_conflict_backs_off_while_others_keep_answering() {
    let names = ["alpha", "beta"];
    let w = world(
        &names,
        per_agent_script(&names),
        "poll_timeout = \"1s\"\nboot_stagger = \"50ms\"",
        |_, _| {},
    )
    .await;
    let (alpha, beta) = (w.bot("alpha"), w.bot("beta"));
    assert!(w.fake.wait_for_poll(alpha, Duration::from_secs(20)).await);
    let mut events = w.harness.daemon().events.subscribe();
    w.fake.hang_polls(alpha, Duration::from_secs(4));
    w.fake.conflict_next(beta, 2);
    // Beta reports the conflict and keeps going; alpha's stuck poll restarts the bot.
    let mut saw_conflict = false;
    let mut saw_restart = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !(saw_conflict && saw_restart) {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .expect("events within 30 s")
            .unwrap();
        saw_conflict |= event.subject == "bot:beta" && event.detail.contains("conflict");
        saw_restart |= event.subject == "bot:alpha"
            && event.kind == clawvisor::events::EventKind::ActorRestarting;
    }
    w.fake.push_message(beta, USER, USER, "beta, still there?");
    w.fake
        .wait_for_sent(
            beta,
            |m| m.visible_text.contains("beta here"),
            Duration::from_secs(30),
        )
        .await
        .expect("beta answers");
    w.fake.push_message(alpha, USER, USER, "alpha, back?");
    w.fake
        .wait_for_sent(
            alpha,
            |m| m.visible_text.contains("alpha here"),
            Duration::from_secs(40),
        )
        .await
        .expect("alpha answers after its restart");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_fails_its_bot_alone_and_a_panicking_bot_is_restarted() {
    let names = ["alpha", "beta", "gamma"];
    let w = world(
        &names,
        per_agent_script(&names),
        "poll_timeout = \"2s\"\nboot_stagger = \"50ms\"",
        |fake, bots| {
            fake.revoke_token(bots[1].id);
        },
    )
    .await;
    let (alpha, beta, gamma) = (w.bot("alpha"), w.bot("beta"), w.bot("gamma"));
    // The 401 bot is stopped with a clear event; it is not restarted in a loop.
    let status: Vec<String> = poll_until(Duration::from_secs(20), || async {
        let status: Vec<String> = w
            .harness
            .store()
            .read(|conn| {
                let mut statement = conn.prepare("SELECT detail FROM runtime_events WHERE subject = 'bot:beta' AND kind = 'bot_status'")?;
                let rows = statement.query_map([], |r| r.get::<_, String>(0))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
            .unwrap();
        let stopped = w
            .harness
            .daemon()
            .registry
            .lookup(&clawvisor::protocol::telegram::name("beta"))
            .is_none();
        (stopped && status.iter().any(|s| s.contains("401"))).then_some(status)
    })
    .await
    .unwrap_or_default();
    assert!(
        status
            .iter()
            .any(|s| s.contains("401") && s.contains("BETA_TOKEN")),
        "{status:?}"
    );
    assert!(
        w.harness
            .daemon()
            .registry
            .lookup(&clawvisor::protocol::telegram::name("beta"))
            .is_none()
    );
    assert!(
        status.iter().all(|s| !s.contains(&w.bots[1].token)),
        "the token never appears in events"
    );

    // Alpha's handler panics: its supervisor restarts it while the others keep answering.
    let alpha_ref = w
        .harness
        .daemon()
        .registry
        .lookup(&clawvisor::protocol::telegram::name("alpha"))
        .unwrap();
    let old_id = alpha_ref.get_id();
    alpha_ref
        .cast(clawvisor::protocol::telegram::TelegramMsg::Panic(
            "test".into(),
        ))
        .unwrap();
    w.fake.push_message(gamma, USER, USER, "gamma meanwhile");
    w.fake
        .wait_for_sent(
            gamma,
            |m| m.visible_text.contains("gamma here"),
            Duration::from_secs(20),
        )
        .await
        .expect("gamma unaffected");
    let registry = w.harness.daemon().registry.clone();
    wait_until(
        Duration::from_secs(10),
        "alpha restarted under a new id",
        || async {
            let current = registry
                .lookup(&clawvisor::protocol::telegram::name("alpha"))
                .map(|actor| actor.get_id());
            if current.is_some_and(|id| id != old_id) {
                Ok(())
            } else {
                Err(format!("alpha restarted under a new id (now {current:?})"))
            }
        },
    )
    .await;
    w.fake.push_message(alpha, USER, USER, "alpha again");
    w.fake
        .wait_for_sent(
            alpha,
            |m| m.visible_text.contains("alpha here"),
            Duration::from_secs(30),
        )
        .await
        .expect("alpha answers");
    assert_eq!(w.fake.sent(beta).len(), 0);
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_boot_one_at_a_time_the_stagger_apart() {
    let names = ["alpha", "beta", "gamma", "delta"];
    let w = world(
        &names,
        per_agent_script(&names),
        "poll_timeout = \"2s\"\nboot_stagger = \"400ms\"",
        |_, _| {},
    )
    .await;
    let starts: Vec<(String, i64)> = poll_until(Duration::from_secs(20), || async {
        let starts: Vec<(String, i64)> = w
            .harness
            .store()
            .read(|conn| {
                let mut statement = conn.prepare(
                    "SELECT subject, at_ms FROM runtime_events WHERE kind = 'actor_started' AND subject LIKE 'bot:%' ORDER BY at_ms",
                )?;
                let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
            .unwrap();
        if starts.len() >= 4 { Ok(starts) } else { Err(format!("{starts:?}")) }
    })
    .await
    .unwrap_or_default();
    assert_eq!(starts.len(), 4, "{starts:?}");
    for pair in starts.windows(2) {
        let gap = pair[1].1 - pair[0].1;
        assert!(gap >= 380, "bots started {gap} ms apart: {starts:?}");
    }
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_split_and_a_streamed_one_is_shown_as_drafts() {
    let paragraph =
        "This is a sentence of a long answer with **bold** and `code` in it. ".repeat(8);
    let long: String = (0..20)
        .map(|i| format!("Paragraph {i}. {paragraph}\n\n"))
        .collect();
    assert!(long.len() > 10_000);
    let script = Script::new()
        .rule(Rule::text(long.clone()).when_last_user_contains("essay"))
        .rule(
            Rule::text("Streaming ".repeat(60))
                .chunk_delay(Duration::from_millis(80))
                .when_last_user_contains("stream"),
        );
    let w = world(&["alpha"], script, "poll_timeout = \"2s\"", |_, _| {}).await;
    let bot = w.bot("alpha");
    w.fake.push_message(bot, USER, USER, "write an essay");
    w.fake
        .wait_for_sent(
            bot,
            |m| m.visible_text.contains("Paragraph 19."),
            Duration::from_secs(60),
        )
        .await
        .expect("the end arrives");
    let parts: Vec<_> = w
        .fake
        .sent(bot)
        .into_iter()
        .filter(|m| m.chat_id == USER)
        .collect();
    assert!(parts.len() >= 3, "{} parts", parts.len());
    for part in &parts {
        assert!(part.visible_text.encode_utf16().count() <= 4096);
        assert_eq!(part.parse_mode.as_deref(), Some("HTML"));
    }
    let joined: String = parts
        .iter()
        .map(|m| m.visible_text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    for i in 0..20 {
        assert_eq!(
            joined.matches(&format!("Paragraph {i}.")).count(),
            1,
            "paragraph {i} exactly once"
        );
    }
    w.fake.push_message(bot, USER, USER, "now stream something");
    // In a private chat a slow answer is shown as drafts, then sent as one message (issue #20;
    // streaming by edits is for groups, see tests/streaming.rs).
    let streamed = w
        .fake
        .wait_for_sent(
            bot,
            |m| m.visible_text.matches("Streaming").count() == 60,
            Duration::from_secs(60),
        )
        .await
        .expect("the streamed message ends complete");
    assert!(streamed.edits.is_empty(), "{streamed:?}");
    assert!(
        w.fake
            .drafts(bot)
            .iter()
            .any(|draft| draft.visible_text.contains("Streaming")),
        "progress was shown as drafts"
    );
    let violations = w.fake.violations(bot);
    assert_eq!(violations.total(), 0, "{violations:?}");
    assert_eq!(violations.edits_under_one_second, 0, "{violations:?}");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_of_replies_respect_telegram_flood_limits() {
    let script = Script::new().rule(Rule::echo());
    let w = world(&["alpha"], script, "poll_timeout = \"2s\"", |_, _| {}).await;
    let bot = w.bot("alpha");
    // 100 replies to one chat (commands answered by the bot itself) ...
    for _ in 0..100 {
        w.fake.push_message(bot, USER, USER, "/help");
    }
    // ... and one each to 50 group chats, where the same user addresses the bot.
    for chat in 0..50 {
        w.fake.push(
            bot,
            IncomingMessage::new(-(1_000 + chat), USER, "/help@alpha_bot"),
        );
    }
    let _ = poll_until(Duration::from_secs(240), || async {
        w.fake.sent(bot).len() >= 150
    })
    .await;
    let sent = w.fake.sent(bot);
    let private = sent.iter().filter(|m| m.chat_id == USER).count();
    let groups = sent.iter().filter(|m| m.chat_id < 0).count();
    assert_eq!(
        (private, groups),
        (100, 50),
        "every reply went out; calls: {:?}",
        w.fake.calls(bot)
    );
    let violations = w.fake.violations(bot);
    assert_eq!(violations.total(), 0, "{violations:?}");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_the_bot_answers_when_mentioned_with_the_conversation_since_its_last_answer() {
    let names = ["alpha"];
    let w = world(
        &names,
        Script::new().rule(Rule::text("alpha answers the group")),
        "poll_timeout = \"2s\"",
        |_, _| {},
    )
    .await;
    let bot = w.bot("alpha");
    let group = -4242;
    w.fake.set_chat_title(group, "Family");
    w.fake.set_user(USER, "Ada", Some("ada"));
    w.fake.push(
        bot,
        IncomingMessage::new(group, USER, "shall we eat pasta tonight?"),
    );
    w.fake
        .push(bot, IncomingMessage::new(group, USER, "or rather soup"));
    // Both are stored as context (not addressed): the bot has decided about them.
    wait_until(
        Duration::from_secs(20),
        "both group messages stored as context",
        || async { update_statuses(&w, USER).await == ["context", "context"] },
    )
    .await;
    assert_eq!(w.llm.request_count(), 0, "not addressed: no answer");
    w.fake.push(
        bot,
        IncomingMessage::new(group, USER, "@alpha_bot what do you think?"),
    );
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == group && m.visible_text.contains("alpha answers"),
            Duration::from_secs(30),
        )
        .await
        .expect("answered");
    let request = &w.llm.requests()[0];
    let last_user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        last_user.contains("pasta") && last_user.contains("soup"),
        "{last_user}"
    );
    assert!(
        last_user.contains("Ada") && last_user.contains("what do you think"),
        "{last_user}"
    );
    // A reply to the bot's message also addresses it.
    let answer = w
        .fake
        .sent(bot)
        .into_iter()
        .find(|m| m.chat_id == group)
        .unwrap();
    w.fake.push(
        bot,
        IncomingMessage::new(group, USER, "and why?").replying_to(answer.message_id),
    );
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == group && m.message_id > answer.message_id,
            Duration::from_secs(30),
        )
        .await
        .expect("answered the reply");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn photos_are_downloaded_into_the_workspace_and_given_to_the_run() {
    let w = world(
        &["alpha"],
        Script::new().rule(Rule::text("nice picture")),
        "poll_timeout = \"2s\"",
        |_, _| {},
    )
    .await;
    let bytes: Vec<u8> = (0..2048u32).map(|i| (i % 251) as u8).collect();
    let last_user = send_photo(&w, bytes.clone(), "look at this", "nice picture").await;
    let inbox = w.harness.dir.path().join("data/workspaces/alpha/inbox");
    let files: Vec<_> = std::fs::read_dir(&inbox)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(std::fs::read(&files[0]).unwrap(), bytes);
    let last_user = last_user["content"].as_str().unwrap().to_string();
    assert!(
        last_user.contains("look at this") && last_user.contains("saved to inbox/"),
        "{last_user}"
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_older_than_the_grace_period_at_boot_are_not_answered_and_the_person_is_told() {
    let names = ["alpha"];
    // Sent while the daemon was down, more than the grace period before it starts.
    let w = world(
        &names,
        per_agent_script(&names),
        "poll_timeout = \"2s\"\nstale_grace = \"1s\"",
        |fake, bots| {
            fake.push_message(
                bots[0].id,
                USER,
                USER,
                "sent while the daemon was down, long ago",
            );
            // A deliberate gap: the update must be older than the 1 s grace when the daemon
            // boots, and its date is the fake's clock at the push.
            std::thread::sleep(Duration::from_millis(2_500));
        },
    )
    .await;
    let bot = w.bot("alpha");
    // Once the update is stored as ignored the bot has decided: no answer can follow.
    wait_until(
        Duration::from_secs(20),
        "the stale update handled",
        || async { update_statuses(&w, USER).await == ["ignored"] },
    )
    .await;
    // Not answered by the agent, and not dropped in silence: the person is told, once.
    let told = w
        .fake
        .wait_for_sent(
            bot,
            |m| m.visible_text.contains("reached me too late"),
            Duration::from_secs(20),
        )
        .await
        .expect("the person is told the message came too late");
    assert!(
        told.visible_text.contains("send again"),
        "{}",
        told.visible_text
    );
    assert_eq!(
        w.fake.sent(bot).len(),
        1,
        "only the notice: {:?}",
        w.fake.sent(bot)
    );
    let note: String = w
        .harness
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT status || ': ' || note FROM inbound_updates",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert!(
        note.starts_with("ignored: too late") && note.ends_with("the person was told"),
        "{note}"
    );
    w.fake.push_message(bot, USER, USER, "fresh");
    w.fake
        .wait_for_sent(
            bot,
            |m| m.visible_text.contains("alpha here"),
            Duration::from_secs(20),
        )
        .await
        .expect("fresh ones are answered");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_speaks_in_the_chat_before_the_answer_and_never_to_strangers() {
    let script = Script::new()
        .rule(Rule::text("All done.").when_after_tool_result("send_message"))
        .rule(
            Rule::tool_calls([
                ("send_message", r#"{"text": "Working on it"}"#),
                ("send_message", r#"{"chat_id": 999, "text": "psst"}"#),
            ])
            .when_last_user_contains("long task"),
        );
    let World {
        fake,
        llm: _llm,
        harness,
        bots,
    } = World::builder(script)
        .agent_with_bot(
            "messenger",
            "tools = [\"send_message\"]",
            "100:AAH-test-token-messenger-0000",
            &[USER],
            &[],
        )
        .start()
        .await;
    let bot = bots[0].id;
    fake.push_message(bot, USER, USER, "do the long task");
    fake.wait_for_sent(
        bot,
        |m| m.visible_text.contains("All done."),
        Duration::from_secs(30),
    )
    .await
    .expect("the final answer");
    let sent = fake.sent(bot);
    let progress = sent
        .iter()
        .position(|m| m.chat_id == USER && m.visible_text.contains("Working on it"))
        .expect("the progress message reached the chat");
    let done = sent
        .iter()
        .position(|m| m.visible_text.contains("All done."))
        .unwrap();
    assert!(progress < done, "sent before the final answer");
    assert!(
        sent.iter().all(|m| m.chat_id != 999),
        "no message to a stranger"
    );
    let (delivered, blocked): (i64, String) = harness
        .store()
        .read(|conn| {
            Ok((
                conn.query_row(
                    "SELECT COUNT(*) FROM outbox WHERE text = 'Working on it' AND delivered_ms IS NOT NULL",
                    [],
                    |r| r.get(0),
                )?,
                conn.query_row(
                    "SELECT detail FROM run_steps WHERE kind = 'decision' AND detail LIKE '%999%'",
                    [],
                    |r| r.get(0),
                )?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(delivered, 1, "the message went through the outbox");
    assert!(
        blocked.contains("deny") || blocked.contains("block"),
        "{blocked}"
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vision_agent_sees_the_photo_itself() {
    let w = world_with(
        &["alpha"],
        "vision = true",
        Script::new().rule(Rule::text("a fine picture")),
        "poll_timeout = \"2s\"",
        |_, _| {},
    )
    .await;
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 253) as u8).collect();
    let last_user = send_photo(&w, bytes.clone(), "what is this?", "a fine picture").await;
    let parts = last_user["content"]
        .as_array()
        .expect("text and image parts");
    assert!(
        parts.iter().any(|p| p["type"] == "text"
            && p["text"]
                .as_str()
                .unwrap_or_default()
                .contains("what is this?")),
        "{last_user}"
    );
    let url = parts
        .iter()
        .find(|p| p["type"] == "image_url")
        .and_then(|p| p["image_url"]["url"].as_str())
        .expect("an image part");
    let encoded = url
        .strip_prefix("data:image/jpeg;base64,")
        .expect("a data URL");
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    assert_eq!(decoded, bytes, "the model got the photo's bytes");
    w.harness.stop().await;
}

/// Sends a photo with a caption to alpha's bot, waits for `answer`, and returns the last user
/// message of the first request the model got.
async fn send_photo(w: &World, bytes: Vec<u8>, caption: &str, answer: &str) -> serde_json::Value {
    let bot = w.bot("alpha");
    w.fake.push_photo(bot, USER, USER, bytes, Some(caption));
    w.fake
        .wait_for_sent(
            bot,
            |m| m.visible_text.contains(answer),
            Duration::from_secs(30),
        )
        .await
        .expect("answered");
    let request = &w.llm.requests()[0];
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone()
}

/// `clawvisor_reply_stage_seconds_count` of each stage (and the whole, as `total`) in `/metrics`.
async fn reply_stage_counts(w: &World) -> std::collections::BTreeMap<String, u64> {
    let (base, http) = w.harness.studio_http().await;
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    metrics
        .lines()
        .filter_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            let stage = match name.strip_prefix("clawvisor_reply_stage_seconds_count{stage=\"") {
                Some(rest) => rest.trim_end_matches("\"}").to_string(),
                None if name == "clawvisor_reply_seconds_count" => "total".to_string(),
                None => return None,
            };
            Some((stage, value.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_is_timed_stage_by_stage_in_metrics() {
    let w = world(
        &["ada"],
        Script::new().rule(Rule::text("Timed.")),
        "",
        |_, _| {},
    )
    .await;
    let bot = w.bots[0].id;
    assert!(w.fake.wait_for_poll(bot, Duration::from_secs(20)).await);
    let before = reply_stage_counts(&w).await;
    let stages = [
        "stored",
        "run_started",
        "first_token",
        "queued",
        "sent",
        "confirmed",
        "total",
    ];
    for stage in stages {
        assert!(before.contains_key(stage), "{stage} missing: {before:?}");
    }
    w.fake
        .push_message(bot, USER, USER, "how long does this take?");
    w.fake
        .wait_for_sent(bot, |m| m.visible_text == "Timed.", Duration::from_secs(20))
        .await
        .expect("the reply");
    // The delivery is recorded (the last stage) just after Telegram accepted the reply.
    let after = wait_until(Duration::from_secs(10), "every stage counted", || async {
        let after = reply_stage_counts(&w).await;
        stages
            .iter()
            .all(|stage| after[*stage] > before[*stage])
            .then_some(after)
    })
    .await;
    assert!(after.len() >= stages.len(), "{after:?}");
    w.harness.stop().await;
}

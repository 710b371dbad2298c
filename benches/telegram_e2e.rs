//! Issue 4: 10 bots × 100 chats against the fake Bot API with the instant scripted model.
//! Prints, per message, "update stored → reply recorded" (the daemon's own path, from the
//! database's timestamps) and "update pushed → reply at the fake" (adds long polling and the
//! send governor's deliberate spacing); and checks nothing was lost.
//!
//! Issue #20, first: one bot, one private chat, a model answering in ~5 ms with a streamed
//! reply, 20 sequential messages at 1.5 s gaps and 20 at 0.3 s gaps (a gap starts when the
//! previous reply became visible); prints the reply latency (message pushed → reply visible at
//! the fake, final text) next to the targets.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clawvisor::domain::StartOptions;
use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use criterion::{Criterion, criterion_group, criterion_main};

const BOTS: usize = 10;
const CHATS: i64 = 100;
/// The private chat of the #20 sequential phase, apart from the bulk phase's chats.
const SEQUENTIAL_USER: i64 = 20_000;

fn end_to_end(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (fake, _llm, harness, bots) = rt.block_on(async {
        let fake = FakeTelegram::start().await;
        // The sequential phase's messages: a ~5 ms model with a streamed reply (8 characters a
        // chunk), long enough to be worth streaming if the policy allowed it.
        let script = Script::new()
            .rule(Rule::echo().delay(Duration::from_millis(5)).when_last_user_contains("sequential"))
            .rule(Rule::echo());
        let llm = ScriptedLlm::start(script).await.unwrap();
        llm.record_requests(false);
        let mut options = HarnessOptions::new(llm.base_url());
        options.start = StartOptions { studio: false, channels: true, scheduler: false };
        options.agents.clear();
        let users: Vec<String> = (0..CHATS)
            .map(|chat| (10_000 + chat).to_string())
            .chain([SEQUENTIAL_USER.to_string()])
            .collect();
        let mut bots = Vec::new();
        for index in 0..BOTS {
            let token = format!("{}:AAH-bench-token-{index:04}", 900 + index);
            let name = format!("bot{index}");
            bots.push(fake.add_bot(&token, &format!("{name}_bot")));
            options.env.insert(format!("BOT{index}_TOKEN"), token);
            options.agents.push(agent_toml(
                &name,
                &format!(
                    "[telegram]\ntoken_env = \"BOT{index}_TOKEN\"\napi_url = \"{}\"\nallow_users = [{}]\n",
                    fake.base_url(),
                    users.join(", ")
                ),
            ));
        }
        options.config_extra = "[telegram]\npoll_timeout = \"5s\"\nboot_stagger = \"20ms\"\n[store]\nsynchronous = \"normal\"\n".into();
        let harness = Harness::start(options).await.unwrap();
        for bot in &bots {
            assert!(fake.wait_for_poll(*bot, Duration::from_secs(30)).await);
        }
        (fake, llm, harness, bots)
    });

    rt.block_on(sequential_phase(&fake, bots[0]));

    let (mut pushed_to_sent, lost) = rt.block_on(async {
        let mut pushed: BTreeMap<(usize, i64), Instant> = BTreeMap::new();
        for (index, bot) in bots.iter().enumerate() {
            for chat in 0..CHATS {
                let user = 10_000 + chat;
                pushed.insert((index, user), Instant::now());
                fake.push_message(*bot, user, user, &format!("hello from {user}"));
            }
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let answered: usize = bots.iter().map(|bot| bulk_sent(&fake, *bot)).sum();
            if answered >= BOTS * CHATS as usize || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut latencies = Vec::new();
        let mut lost = 0;
        for (index, bot) in bots.iter().enumerate() {
            let sent = fake.sent(*bot);
            for chat in 0..CHATS {
                let user = 10_000 + chat;
                match sent.iter().find(|m| m.chat_id == user) {
                    Some(message) => {
                        latencies.push(message.sent_at.duration_since(pushed[&(index, user)]))
                    }
                    None => lost += 1,
                }
            }
        }
        (latencies, lost)
    });
    let mut stored_to_recorded: Vec<Duration> = rt.block_on(async {
        harness
            .store()
            .read(|conn| {
                let mut statement = conn.prepare(
                    "SELECT o.created_ms - u.received_ms FROM outbox o
                     JOIN inbound_updates u ON u.id = CAST(json_extract(o.inbound_ids, '$[0]') AS INTEGER)",
                )?;
                let rows = statement.query_map([], |row| row.get::<_, i64>(0))?;
                Ok(rows.filter_map(Result::ok).map(|ms| Duration::from_millis(ms.max(0) as u64)).collect())
            })
            .await
            .unwrap()
    });
    support::report(
        "update stored → reply recorded, all 1,000 at once (10 bots × 100 chats; queueing included)",
        &mut stored_to_recorded,
    );
    // The same path at a steady 100 updates/s (what a busy home server sees): the overhead itself.
    let paced_from = clawvisor::clock::now_ms();
    rt.block_on(async {
        for (index, bot) in bots.iter().enumerate() {
            for chat in 0..CHATS {
                let user = 10_000 + chat;
                fake.push_message(*bot, user, user, &format!("paced {index} {user}"));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while bots.iter().map(|bot| bulk_sent(&fake, *bot)).sum::<usize>()
            < 2 * BOTS * CHATS as usize
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut paced: Vec<Duration> = rt.block_on(async {
        harness
            .store()
            .read(move |conn| {
                let mut statement = conn.prepare(
                    "SELECT o.created_ms - u.received_ms FROM outbox o
                     JOIN inbound_updates u ON u.id = CAST(json_extract(o.inbound_ids, '$[0]') AS INTEGER)
                     WHERE u.received_ms >= ?1",
                )?;
                let rows = statement.query_map([paced_from], |row| row.get::<_, i64>(0))?;
                Ok(rows.filter_map(Result::ok).map(|ms| Duration::from_millis(ms.max(0) as u64)).collect())
            })
            .await
            .unwrap()
    });
    support::report(
        "update stored → reply recorded at 100 updates/s (target p99 under 20 ms)",
        &mut paced,
    );
    support::report(
        "update pushed → reply at the fake (includes polling and pacing)",
        &mut pushed_to_sent,
    );
    println!("lost: {lost} of {} (target 0)", BOTS * CHATS as usize);
    let violations: u64 = bots.iter().map(|bot| fake.violations(*bot).total()).sum();
    println!("flood-limit violations at the fake: {violations}");
    for bot in &bots {
        let violations = fake.violations(*bot);
        if violations.total() > 0 {
            println!("  {bot:?}: {violations:?}");
        }
    }

    // One message through one bot, end to end, for criterion's own statistics.
    let bot = bots[0];
    let mut next = 0i64;
    c.bench_function("telegram_message_round_trip", |b| {
        b.iter_custom(|iterations| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iterations {
                    next += 1;
                    let user = 10_000 + (next % CHATS);
                    let text = format!("round {next}");
                    fake.push_message(bot, user, user, &text);
                    let expected = format!("echo: {text}");
                    fake.wait_for_sent(
                        bot,
                        |m| m.visible_text == expected,
                        Duration::from_secs(30),
                    )
                    .await
                    .unwrap();
                }
                started.elapsed()
            })
        })
    });
    rt.block_on(harness.stop());
}

/// The bot's messages to the bulk phase's chats.
fn bulk_sent(fake: &FakeTelegram, bot: clawvisor::testkit::fake_telegram::BotId) -> usize {
    fake.sent(bot)
        .iter()
        .filter(|m| m.chat_id != SEQUENTIAL_USER)
        .count()
}

/// Issue #20: reply latency of sequential messages in one private chat.
async fn sequential_phase(fake: &FakeTelegram, bot: clawvisor::testkit::fake_telegram::BotId) {
    let user = SEQUENTIAL_USER;
    let violations_before = fake.violations(bot).total();
    let mut unanswered = 0;
    let mut number = 0;
    for (gap, median_target, p90_target) in [
        (
            Duration::from_millis(1500),
            Some(Duration::from_millis(60)),
            Some(Duration::from_millis(100)),
        ),
        (
            Duration::from_millis(300),
            Some(Duration::from_millis(800)),
            None,
        ),
    ] {
        let mut latencies = Vec::new();
        for _ in 0..20 {
            tokio::time::sleep(gap).await;
            number += 1;
            let text = format!("sequential message {number}, please answer it right away");
            let expected = format!("echo: {text}");
            let pushed = Instant::now();
            fake.push_message(bot, user, user, &text);
            match fake
                .wait_for_sent(
                    bot,
                    |m| m.chat_id == user && m.visible_text == expected,
                    Duration::from_secs(30),
                )
                .await
            {
                Some(message) => {
                    let visible = message.edits.last().map_or(message.sent_at, |edit| edit.at);
                    latencies.push(visible.duration_since(pushed));
                }
                None => unanswered += 1,
            }
        }
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
        let target =
            |value: Option<Duration>| value.map_or("-".to_string(), |v| format!("<= {v:?}"));
        println!(
            "#20 sequential, {gap:?} gaps: reply visible after median {:?} (target {})  p90 {:?} (target {})  max {:?}  ({} answered)",
            at(0.5),
            target(median_target),
            at(0.9),
            target(p90_target),
            at(1.0),
            latencies.len()
        );
    }
    let drafts_and_edits =
        fake.drafts(bot).len() + fake.sent(bot).iter().map(|m| m.edits.len()).sum::<usize>();
    println!(
        "#20 sequential: unanswered {unanswered} (target 0), flood violations {} (target 0), drafts and edits {drafts_and_edits}",
        fake.violations(bot).total() - violations_before
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(20)).warm_up_time(Duration::from_secs(1));
    targets = end_to_end
}
criterion_main!(benches);

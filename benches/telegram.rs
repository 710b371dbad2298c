//! The cost of formatting a reply (Markdown → Telegram HTML → chunks) and of the fake Bot API
//! server that the daemon's benchmarks and evals run against: a sendMessage round trip through
//! teloxide, and the delay from an update arriving to a waiting long poll answering.
//! Prints median and p99.

mod support;

use std::time::{Duration, Instant};

use clawvisor::telegram::format::{TELEGRAM_MESSAGE_LIMIT, markdown_to_html, split_html};
use clawvisor::testkit::fake_telegram::FakeTelegram;
use criterion::{Criterion, criterion_group, criterion_main};
use teloxide::Bot;
use teloxide::payloads::{GetUpdatesSetters, SendMessageSetters};
use teloxide::requests::Requester;
use teloxide::types::{ChatId, ParseMode};

/// A long answer as a model writes one: about 12,000 characters of prose, lists and code.
fn long_answer() -> String {
    let mut markdown = String::from("# Findings\n\n");
    let mut section = 0;
    while markdown.len() < 12_000 {
        section += 1;
        markdown.push_str(&format!(
            "## Part {section}\n\nThe **result** of step {section} is in `out_{section}.txt`; see \
             [the docs](https://example.com/{section}). It took a while & it worked.\n\n\
             - first finding\n- second finding with *emphasis*\n\n```rust\nfn part_{section}() -> u32 {{\n    \
             (0..{section}).sum()\n}}\n```\n\n"
        ));
    }
    markdown
}

fn formatting(c: &mut Criterion) {
    let markdown = long_answer();
    let html = markdown_to_html(&markdown);
    let mut group = c.benchmark_group("format");
    group.bench_function("markdown_to_html_12k", |b| {
        b.iter(|| markdown_to_html(&markdown))
    });
    group.bench_function("split_html_12k", |b| {
        b.iter(|| split_html(&html, TELEGRAM_MESSAGE_LIMIT))
    });
    group.finish();

    let mut to_html = Vec::with_capacity(2_000);
    let mut split = Vec::with_capacity(2_000);
    for _ in 0..2_000 {
        let start = Instant::now();
        let converted = markdown_to_html(&markdown);
        to_html.push(start.elapsed());
        let start = Instant::now();
        let chunks = split_html(&converted, TELEGRAM_MESSAGE_LIMIT);
        split.push(start.elapsed());
        assert!(chunks.len() >= 3);
    }
    support::report("format: markdown_to_html (12k chars)", &mut to_html);
    support::report("format: split_html (12k chars, 4096 limit)", &mut split);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

fn fake_server(c: &mut Criterion) {
    let rt = runtime();
    let (fake, bot_id, bot) = rt.block_on(async {
        let fake = FakeTelegram::start().await;
        let bot_id = fake.add_bot("100:bench", "bench_bot");
        let bot = Bot::new("100:bench").set_api_url(fake.api_url());
        (fake, bot_id, bot)
    });
    c.bench_function("fake_send_message_round_trip", |b| {
        b.to_async(&rt).iter(|| async {
            bot.send_message(ChatId(1), "<b>hello</b> &amp; more")
                .parse_mode(ParseMode::Html)
                .await
                .expect("the fake accepts it")
        })
    });

    let (sends, wakes) = rt.block_on(async {
        let mut sends = Vec::with_capacity(2_000);
        for _ in 0..2_000 {
            let start = Instant::now();
            bot.send_message(ChatId(2), "plain")
                .await
                .expect("the fake accepts it");
            sends.push(start.elapsed());
        }
        // Push → waiting long poll answered, measured from the push.
        let mut wakes = Vec::with_capacity(300);
        let mut offset = 0;
        for _ in 0..300 {
            let polling = bot.clone();
            let poll = tokio::spawn(async move {
                let updates = polling.get_updates().offset(offset).timeout(10).await;
                (updates, Instant::now())
            });
            assert!(fake.wait_for_poll(bot_id, Duration::from_secs(5)).await);
            let pushed_at = Instant::now();
            fake.push_message(bot_id, 7, 7, "ping");
            let (updates, answered_at) = poll.await.expect("the poll task finishes");
            let updates = updates.expect("the poll answers");
            offset = updates
                .last()
                .map_or(offset, |update| update.id.0 as i32 + 1);
            wakes.push(answered_at.duration_since(pushed_at));
        }
        (sends, wakes)
    });
    support::report(
        "fake: sendMessage round trip (teloxide)",
        &mut sends.clone(),
    );
    support::report(
        "fake: push -> waiting long poll answered",
        &mut wakes.clone(),
    );
    println!(
        "fake: {} messages recorded, RSS {} KiB",
        fake.sent(bot_id).len(),
        support::rss_kib()
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = formatting, fake_server
}
criterion_main!(benches);

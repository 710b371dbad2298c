//! Issue #20: replies at the speed of the model. Against the fake Bot API, with the scripted model
//! streaming its answer: a quick answer is exactly one `sendMessage` (no partial message, edit or
//! draft in front of it); a slow one shows its progress while it is written — as a draft in a
//! private chat, as a message edited as it grows in a group, or by editing when the Bot API
//! refuses drafts (remembered for the bot) — and ends as ONE message with the full text.

use std::time::Duration;

use clawvisor::testkit::fake_telegram::{BotId, IncomingMessage};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;

const USER: i64 = 42;
const GROUP: i64 = -5_000;
const WAIT: Duration = Duration::from_secs(60);

/// About ten seconds of streaming: 8 characters per chunk, 80 ms apart.
fn slow_answer() -> String {
    (0..125)
        .map(|index| format!("w{:06}", index))
        .collect::<Vec<_>>()
        .join(" ")
}

/// About three seconds of streaming.
fn shorter_slow_answer() -> String {
    (0..40)
        .map(|index| format!("s{:06}", index))
        .collect::<Vec<_>>()
        .join(" ")
}

const QUICK: &str = "A quick answer, complete in a few milliseconds.";

fn script() -> Script {
    Script::new()
        .rule(
            Rule::text(slow_answer())
                .chunk_delay(Duration::from_millis(80))
                .when_last_user_contains("slowly"),
        )
        .rule(
            Rule::text(shorter_slow_answer())
                .chunk_delay(Duration::from_millis(80))
                .when_last_user_contains("briefly"),
        )
        .rule(Rule::text(QUICK))
}

async fn world(
    before_start: impl FnOnce(&clawvisor::testkit::fake_telegram::FakeTelegram, BotId),
) -> World {
    World::builder(script())
        .config_extra("[telegram]\npoll_timeout = \"2s\"\n")
        .agent_with_bot("alpha", "", "100:AAH-test-token-alpha-0000", &[USER], &[])
        .start_after(|fake, bots| before_start(fake, bots[0].id))
        .await
}

/// Waits until every reply queued for Telegram was delivered (the worker is done with them).
async fn wait_for_delivered(w: &World, replies: i64) {
    wait_until(WAIT, "the replies are delivered", || async {
        w.store()
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT COUNT(*) FROM outbox WHERE delivered_ms IS NOT NULL",
                    [],
                    |row| row.get::<_, i64>(0),
                )?)
            })
            .await
            .unwrap()
            >= replies
    })
    .await;
}

fn calls(w: &World, bot: BotId, method: &str) -> u64 {
    w.fake.call_count(bot, method)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quick_answer_is_exactly_one_send_message_and_no_edit_or_draft() {
    let w = world(|_, _| {}).await;
    let bot = w.bot("alpha");
    w.fake.push_message(bot, USER, USER, "hello");
    let message = w
        .fake
        .wait_for_sent(bot, |m| m.visible_text == QUICK, WAIT)
        .await
        .expect("the answer arrives");
    wait_for_delivered(&w, 1).await;
    assert!(message.edits.is_empty(), "{message:?}");
    assert_eq!(w.fake.sent(bot).len(), 1, "{:?}", w.fake.sent(bot));
    assert_eq!(calls(&w, bot, "sendMessage"), 1);
    assert_eq!(calls(&w, bot, "editMessageText"), 0);
    assert_eq!(calls(&w, bot, "sendMessageDraft"), 0);
    assert!(w.fake.drafts(bot).is_empty());
    assert_eq!(w.fake.violations(bot).total(), 0);
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_in_a_private_chat_is_shown_as_drafts_then_sent_as_one_message() {
    let w = world(|_, _| {}).await;
    let bot = w.bot("alpha");
    let full = slow_answer();
    w.fake.push_message(bot, USER, USER, "tell me slowly");
    let first_draft = w
        .fake
        .wait_for_draft(bot, |draft| draft.chat_id == USER, WAIT)
        .await
        .expect("progress is shown as a draft");
    // Shown early: well before the model had written half of the answer.
    assert!(
        first_draft.visible_text.len() < full.len() / 2,
        "the first draft came late: {} of {} characters",
        first_draft.visible_text.len(),
        full.len()
    );
    assert!(full.starts_with(first_draft.visible_text.trim_end()));
    let message = w
        .fake
        .wait_for_sent(bot, |m| m.visible_text == full, WAIT)
        .await
        .expect("the whole answer arrives");
    wait_for_delivered(&w, 1).await;
    let sent = w.fake.sent(bot);
    assert_eq!(sent.len(), 1, "ONE message: {sent:?}");
    assert!(message.edits.is_empty(), "drafts, not edits: {message:?}");
    let drafts = w.fake.drafts(bot);
    assert!(drafts.len() >= 2, "the draft grew: {drafts:?}");
    for pair in drafts.windows(2) {
        assert_eq!(pair[0].draft_id, pair[1].draft_id, "one draft per answer");
        assert!(pair[1].visible_text.len() > pair[0].visible_text.len());
        assert!(pair[1].at >= pair[0].at);
    }
    assert!(drafts.iter().all(|draft| draft.draft_id != 0));
    assert!(
        drafts.last().unwrap().at <= message.sent_at,
        "the message follows its drafts"
    );
    assert_eq!(calls(&w, bot, "editMessageText"), 0);
    assert_eq!(
        w.fake.violations(bot).total(),
        0,
        "{:?}",
        w.fake.violations(bot)
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_in_a_group_is_one_message_edited_as_it_grows() {
    let w = world(|_, _| {}).await;
    let bot = w.bot("alpha");
    let full = slow_answer();
    w.fake.push(
        bot,
        IncomingMessage::new(GROUP, USER, "@alpha_bot tell me slowly"),
    );
    let started = w
        .fake
        .wait_for_sent(bot, |m| m.chat_id == GROUP, WAIT)
        .await
        .expect("progress is shown as a message");
    assert!(
        started.original_text.len() < full.len() / 2,
        "shown early: {} of {} characters",
        started.original_text.len(),
        full.len()
    );
    let message = w
        .fake
        .wait_for_sent(bot, |m| m.chat_id == GROUP && m.visible_text == full, WAIT)
        .await
        .expect("the whole answer arrives");
    wait_for_delivered(&w, 1).await;
    let sent = w.fake.sent(bot);
    assert_eq!(sent.len(), 1, "ONE message: {sent:?}");
    assert_eq!(message.message_id, started.message_id);
    assert!(!message.edits.is_empty());
    assert!(w.fake.drafts(bot).is_empty(), "no drafts in a group");
    assert_eq!(calls(&w, bot, "sendMessageDraft"), 0);
    let violations = w.fake.violations(bot);
    assert_eq!(violations.total(), 0, "{violations:?}");
    assert_eq!(violations.edits_under_one_second, 0, "{violations:?}");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_bot_api_refuses_drafts_answers_stream_by_editing_and_it_is_asked_once() {
    let w = world(|fake, bot| fake.refuse_drafts(bot, true)).await;
    let bot = w.bot("alpha");
    let full = shorter_slow_answer();
    let mut last_message_id = 0;
    for round in 1..=2 {
        w.fake.push_message(bot, USER, USER, "tell me briefly");
        let message = w
            .fake
            .wait_for_sent(
                bot,
                |m| m.visible_text == full && !m.edits.is_empty() && m.message_id > last_message_id,
                WAIT,
            )
            .await
            .expect("the answer arrives, streamed by editing");
        last_message_id = message.message_id;
        wait_for_delivered(&w, round).await;
        assert!(message.original_text.len() < full.len(), "{message:?}");
        assert_eq!(
            w.fake.sent(bot).len(),
            round as usize,
            "one message per answer"
        );
    }
    assert_eq!(
        calls(&w, bot, "sendMessageDraft"),
        1,
        "the refusal is remembered for the bot"
    );
    assert!(w.fake.drafts(bot).is_empty());
    assert_eq!(
        w.fake.violations(bot).total(),
        0,
        "{:?}",
        w.fake.violations(bot)
    );
    w.harness.stop().await;
}

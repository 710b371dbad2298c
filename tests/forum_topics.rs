//! Forum topics against the fake Bot API: each topic of a forum supergroup (and its General) is
//! its own conversation, and everything the bot says about it — replies, streamed edits, typing,
//! approval prompts, command answers, scheduled answers — lands in that topic. The daemon runs
//! in-process; the model is the scripted server. The first test holds the fake Bot API to what
//! Telegram does with topics, through teloxide and the daemon's own reading of updates.

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use clawvisor::telegram::client::TelegramError;
use clawvisor::telegram::intake::{self, Intake};
use clawvisor::testkit::fake_telegram::{
    BotId, FakeTelegram, IncomingMessage, SentMessage, THREAD_NOT_FOUND_DESCRIPTION,
};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use serde_json::json;
use teloxide::payloads::{SendChatActionSetters, SendMessageSetters};
use teloxide::requests::Requester;
use teloxide::types::{ChatAction, ChatId, MessageId, MessageKind, ThreadId, UpdateKind};

const USER: i64 = 42;
/// A forum supergroup.
const FORUM: i64 = -1_001_234_567_890;
const WAIT: Duration = Duration::from_secs(40);

/// The daemon with agent `alpha` (its bot on the fake; USER allowed and its approver), the forum
/// `FORUM` with the topics "Shopping" and "Travel" (their thread ids returned).
async fn forum_world(agent_extra: &str, script: Script) -> (World, BotId, i32, i32) {
    let w = World::builder(script)
        .config_extra("[telegram]\npoll_timeout = \"2s\"\n")
        .agent_with_bot(
            "alpha",
            agent_extra,
            "321:AAH-forum-topics-test-token-0001",
            &[USER],
            &[USER],
        )
        .start()
        .await;
    let bot = w.bot("alpha");
    w.fake.set_user(USER, "Ada", Some("ada"));
    w.fake.create_forum(FORUM, "Home");
    let shopping = w.fake.create_forum_topic(bot, FORUM, USER, "Shopping");
    let travel = w.fake.create_forum_topic(bot, FORUM, USER, "Travel");
    (w, bot, shopping, travel)
}

/// `text` from USER in `topic` of the forum (`None`: General).
fn say(w: &World, bot: BotId, topic: Option<i32>, text: &str) {
    let message = IncomingMessage::new(FORUM, USER, text);
    w.fake.push(
        bot,
        match topic {
            Some(thread) => message.in_topic(thread),
            None => message,
        },
    );
}

/// The bot's message in the forum whose visible text contains `needle`.
async fn sent_with(w: &World, bot: BotId, needle: &str) -> SentMessage {
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == FORUM && m.visible_text.contains(needle),
            WAIT,
        )
        .await
        .unwrap_or_else(|| {
            panic!(
                "a message containing `{needle}` in the forum; sent: {:#?}",
                w.fake
                    .sent(bot)
                    .iter()
                    .map(|m| (m.thread_id, m.visible_text.clone()))
                    .collect::<Vec<_>>()
            )
        })
}

/// The model request whose last user message contains `needle`, as text.
fn request_for(w: &World, needle: &str) -> String {
    w.llm
        .requests()
        .iter()
        .find(|request| {
            request["messages"]
                .as_array()
                .and_then(|messages| messages.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .is_some_and(|content| content.contains(needle))
        })
        .map(|request| request["messages"].to_string())
        .unwrap_or_else(|| panic!("no model request answers `{needle}`"))
}

/// The agent's active conversations, by chat key.
async fn active_chats(w: &World) -> Vec<String> {
    w.store()
        .read(|conn| {
            let mut statement = conn.prepare(
                "SELECT chat FROM sessions WHERE agent = 'alpha' AND status = 'active' ORDER BY chat",
            )?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn the_fake_bot_api_speaks_forum_topics_as_telegram_does() {
    const TOKEN: &str = "123456:TEST-token-forum";
    let fake = FakeTelegram::start().await;
    let bot_id = fake.add_bot(TOKEN, "alpha_bot");
    let bot = teloxide::Bot::new(TOKEN).set_api_url(fake.api_url());
    let group = -1_009_999_999_999;
    fake.create_forum(FORUM, "Home");
    let topic = fake.create_forum_topic(bot_id, FORUM, USER, "Shopping");
    fake.push(
        bot_id,
        IncomingMessage::new(FORUM, USER, "@alpha_bot in the topic").in_topic(topic),
    );
    fake.push(
        bot_id,
        IncomingMessage::new(FORUM, USER, "@alpha_bot in General"),
    );
    let root = fake.push(
        bot_id,
        IncomingMessage::new(group, USER, "a plain supergroup"),
    );
    fake.push(
        bot_id,
        IncomingMessage::new(group, USER, "@alpha_bot a reply").replying_to(root.message_id),
    );

    let updates = bot
        .get_updates()
        .await
        .expect("teloxide reads every update");
    let messages: Vec<_> = updates
        .iter()
        .map(|update| match &update.kind {
            UpdateKind::Message(message) => message,
            other => panic!("not a message: {other:?}"),
        })
        .collect();
    assert_eq!(messages.len(), 5);
    let thread = Some(ThreadId(MessageId(topic)));
    // The topic's service message: its id is the thread's.
    assert!(matches!(
        messages[0].kind,
        MessageKind::ForumTopicCreated(_)
    ));
    assert_eq!((messages[0].id.0, messages[0].thread_id), (topic, thread));
    // In the topic: thread, topic flag, and the service message as what it "replies" to.
    assert_eq!(messages[1].thread_id, thread);
    assert!(messages[1].is_topic_message);
    assert_eq!(messages[1].reply_to_message().map(|m| m.id.0), Some(topic));
    // General: neither.
    assert_eq!(messages[2].thread_id, None);
    assert!(!messages[2].is_topic_message);
    // A reply in an ordinary supergroup names its reply chain, and is no topic message.
    assert_eq!(
        messages[4].thread_id,
        Some(ThreadId(MessageId(root.message_id)))
    );
    assert!(!messages[4].is_topic_message);

    // The daemon's reading of the same updates, as the poller stores them.
    let keys: Vec<Option<String>> = updates
        .iter()
        .map(|update| {
            let stored = serde_json::to_string(update).unwrap();
            match intake::read(&stored, fake.bot_user_id(bot_id), "alpha_bot") {
                Intake::Message(message) => Some(message.chat().to_string()),
                _ => None,
            }
        })
        .collect();
    assert_eq!(
        keys,
        [
            None,
            Some(format!("tg:{FORUM}/{topic}")),
            Some(format!("tg:{FORUM}")),
            Some(format!("tg:{group}")),
            Some(format!("tg:{group}")),
        ]
    );

    // Sends into the topic carry it back; an unknown thread, or one outside a forum, is refused
    // with Telegram's words, which the daemon reads as a topic that is gone.
    let sent = bot
        .send_message(ChatId(FORUM), "into the topic")
        .message_thread_id(ThreadId(MessageId(topic)))
        .await
        .unwrap();
    assert_eq!(sent.thread_id, thread);
    assert!(sent.is_topic_message);
    assert_eq!(fake.sent(bot_id).last().unwrap().thread_id, Some(topic));
    bot.send_chat_action(ChatId(FORUM), ChatAction::Typing)
        .message_thread_id(ThreadId(MessageId(topic)))
        .await
        .unwrap();
    assert_eq!(
        fake.chat_actions(bot_id).last().unwrap().thread_id,
        Some(topic)
    );
    fake.delete_forum_topic(FORUM, topic);
    for (chat, thread) in [
        (FORUM, topic),
        (FORUM, topic + 100),
        (group, root.message_id),
    ] {
        let error = bot
            .send_message(ChatId(chat), "nowhere")
            .message_thread_id(ThreadId(MessageId(thread)))
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains(THREAD_NOT_FOUND_DESCRIPTION),
            "{error}"
        );
        assert!(
            matches!(TelegramError::from(error), TelegramError::TopicGone(_)),
            "chat {chat}, thread {thread}"
        );
    }
    let refused = bot
        .send_chat_action(ChatId(FORUM), ChatAction::Typing)
        .message_thread_id(ThreadId(MessageId(topic)))
        .await;
    assert!(refused.is_err(), "typing into a deleted topic is refused");
    assert_eq!(fake.sent(bot_id).len(), 1, "nothing refused was recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_topics_and_general_keep_separate_conversations_and_every_reply_lands_in_its_topic() {
    let script = Script::new()
        .rule(
            Rule::text("Streaming into the travel topic. ".repeat(30))
                .chunk_delay(Duration::from_millis(60))
                .when_last_user_contains("stream the plan"),
        )
        .rule(Rule::echo());
    let (w, bot, shopping, travel) = forum_world("", script).await;

    say(&w, bot, Some(shopping), "@alpha_bot we are out of kiwi");
    let reply = sent_with(&w, bot, "out of kiwi").await;
    assert_eq!(reply.thread_id, Some(shopping), "answered in Shopping");
    // Said in Shopping without addressing the bot: context for Shopping's next answer only.
    say(&w, bot, Some(shopping), "and the pear is gone too");
    wait_until(WAIT, "the unaddressed message kept as context", || async {
        let context: i64 = w
            .store()
            .read(move |conn| {
                Ok(conn.query_row(
                    "SELECT COUNT(*) FROM inbound_updates WHERE status = 'context' AND thread_id = ?1",
                    [shopping],
                    |row| row.get(0),
                )?)
            })
            .await
            .unwrap();
        context == 1
    })
    .await;

    say(
        &w,
        bot,
        Some(travel),
        "@alpha_bot which fruit did I mention?",
    );
    let reply = sent_with(&w, bot, "which fruit").await;
    assert_eq!(reply.thread_id, Some(travel), "answered in Travel");
    let travel_request = request_for(&w, "which fruit");
    assert!(
        !travel_request.contains("kiwi") && !travel_request.contains("pear"),
        "Travel's conversation holds nothing of Shopping: {travel_request}"
    );

    say(&w, bot, None, "@alpha_bot hello from general");
    let reply = sent_with(&w, bot, "hello from general").await;
    assert_eq!(reply.thread_id, None, "General's answer is in General");
    let general_request = request_for(&w, "hello from general");
    assert!(
        !general_request.contains("kiwi") && !general_request.contains("which fruit"),
        "General is its own conversation: {general_request}"
    );

    say(&w, bot, Some(shopping), "@alpha_bot what is missing?");
    let reply = sent_with(&w, bot, "what is missing").await;
    assert_eq!(reply.thread_id, Some(shopping));
    let shopping_request = request_for(&w, "what is missing");
    assert!(
        shopping_request.contains("kiwi") && shopping_request.contains("pear"),
        "Shopping keeps its history and its context: {shopping_request}"
    );
    assert!(
        !shopping_request.contains("which fruit") && !shopping_request.contains("general"),
        "{shopping_request}"
    );

    // A streamed answer starts in its topic; its edits address that message.
    say(&w, bot, Some(travel), "@alpha_bot stream the plan");
    let streamed = w
        .fake
        .wait_for_sent(
            bot,
            |m| {
                m.chat_id == FORUM
                    && m.visible_text.matches("Streaming into").count() == 30
                    && !m.edits.is_empty()
            },
            WAIT,
        )
        .await
        .expect("the streamed answer ends complete");
    assert_eq!(streamed.thread_id, Some(travel), "streamed in Travel");

    // Every message and typing indicator in the forum went to the topic of its conversation.
    let threads: std::collections::BTreeSet<Option<i32>> = w
        .fake
        .chat_actions(bot)
        .iter()
        .filter(|action| action.chat_id == FORUM)
        .map(|action| action.thread_id)
        .collect();
    assert_eq!(
        threads,
        [None, Some(shopping), Some(travel)].into_iter().collect(),
        "typing was shown in each conversation's own topic"
    );
    for message in w.fake.sent(bot).iter().filter(|m| m.chat_id == FORUM) {
        let expected =
            if message.visible_text.contains("kiwi") || message.visible_text.contains("missing") {
                Some(shopping)
            } else if message.visible_text.contains("general") {
                None
            } else {
                Some(travel)
            };
        assert_eq!(message.thread_id, expected, "{}", message.visible_text);
    }
    assert_eq!(
        active_chats(&w).await,
        [
            format!("tg:{FORUM}"),
            format!("tg:{FORUM}/{shopping}"),
            format!("tg:{FORUM}/{travel}"),
        ],
        "one conversation per topic, and one for General"
    );
    assert_eq!(w.fake.violations(bot).total(), 0);
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_resets_only_its_topic_and_approvals_and_pause_notices_are_in_the_topic_concerned() {
    let script = Script::new()
        .rule(Rule::text("The file tool answered.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "notes.txt", "content": "hello", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("write the note"),
        )
        .rule(Rule::echo());
    let (w, bot, shopping, travel) = forum_world(
        "tools = [\"write_file\"]\nautonomy = \"require_approval\"\napproval_ttl = \"5m\"\n",
        script,
    )
    .await;

    say(&w, bot, Some(shopping), "@alpha_bot the code word is kiwi");
    sent_with(&w, bot, "code word is kiwi").await;
    say(&w, bot, Some(travel), "@alpha_bot the code word is mango");
    sent_with(&w, bot, "code word is mango").await;

    // `/new` in Shopping: its answer is in Shopping, and only Shopping starts afresh.
    say(&w, bot, Some(shopping), "/new");
    let started = sent_with(&w, bot, "Started a new conversation").await;
    assert_eq!(started.thread_id, Some(shopping));
    say(
        &w,
        bot,
        Some(shopping),
        "@alpha_bot what was the code word, shop?",
    );
    sent_with(&w, bot, "code word, shop").await;
    let fresh = request_for(&w, "code word, shop");
    assert!(!fresh.contains("kiwi"), "Shopping was reset: {fresh}");
    say(
        &w,
        bot,
        Some(travel),
        "@alpha_bot what was the code word, travel?",
    );
    sent_with(&w, bot, "code word, travel").await;
    let kept = request_for(&w, "code word, travel");
    assert!(kept.contains("mango"), "Travel kept its history: {kept}");
    let archived: Vec<String> = w
        .store()
        .read(|conn| {
            let mut statement =
                conn.prepare("SELECT chat FROM sessions WHERE status = 'archived'")?;
            let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(archived, [format!("tg:{FORUM}/{shopping}")]);

    // An action that needs approval is asked in the topic it comes from (and privately to the
    // approver, saying which topic); pressing the topic's button lets it run, answered there.
    say(&w, bot, Some(travel), "@alpha_bot please write the note");
    let prompt = w
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == FORUM && m.callback_data().iter().any(|d| d.starts_with("ap:")),
            WAIT,
        )
        .await
        .expect("the approval request is posted in the forum");
    assert_eq!(prompt.thread_id, Some(travel), "asked in Travel");
    let private = w
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == USER && m.callback_data().iter().any(|d| d.starts_with("ap:")),
            WAIT,
        )
        .await
        .expect("the approver is asked privately too");
    assert!(
        private
            .visible_text
            .contains(&format!("from chat {FORUM}, topic {travel}")),
        "{}",
        private.visible_text
    );
    let approve = prompt
        .callback_data()
        .into_iter()
        .find(|data| data.starts_with("ap:"))
        .expect("an approve button")
        .to_string();
    w.fake
        .push_callback(bot, FORUM, USER, prompt.message_id, &approve);
    let answer = sent_with(&w, bot, "The file tool answered.").await;
    assert_eq!(
        answer.thread_id,
        Some(travel),
        "the run's answer is in Travel"
    );

    // While the operator pauses the agent, a message in a topic is kept and told so there, and
    // answered there on resume.
    let (studio, http) = w.harness.studio_http().await;
    let pause = |paused: bool| {
        http.patch(format!("{studio}/api/v1/agents/alpha"))
            .json(&json!({ "paused": paused }))
            .send()
    };
    assert!(pause(true).await.unwrap().status().is_success());
    say(&w, bot, Some(shopping), "@alpha_bot are you there?");
    let kept = sent_with(&w, bot, "paused by the operator").await;
    assert_eq!(kept.thread_id, Some(shopping), "told in Shopping");
    assert!(pause(false).await.unwrap().status().is_success());
    let answered = sent_with(&w, bot, "are you there").await;
    assert_eq!(answered.thread_id, Some(shopping), "answered in Shopping");

    assert!(
        w.fake
            .sent(bot)
            .iter()
            .filter(|m| m.chat_id == FORUM)
            .all(|m| m.thread_id.is_some()),
        "nothing of this test was said in General"
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_scheduled_in_a_topic_and_send_message_answer_there_and_a_deleted_topic_falls_back_to_general()
 {
    let at =
        (Utc::now() + chrono::TimeDelta::seconds(6)).to_rfc3339_opts(SecondsFormat::Secs, true);
    let arguments = json!({
        "name": "stretch",
        "kind": "at",
        "schedule": at,
        "prompt": "Tell the user it is time to stretch."
    });
    let script = Script::new()
        .rule(Rule::text("Done: I will remind you.").when_after_tool_result("schedule_task"))
        .rule(
            Rule::tool_call("schedule_task", arguments.to_string())
                .when_last_user_contains("remind me"),
        )
        .rule(
            Rule::text("Time to stretch, in Shopping!").when_last_user_contains("time to stretch"),
        )
        .rule(Rule::text("Progress sent.").when_after_tool_result("send_message"))
        .rule(
            // The chat's id names the run's own conversation: in a forum, its topic.
            Rule::tool_call(
                "send_message",
                json!({"text": "Still checking the shelves.", "chat_id": FORUM}).to_string(),
            )
            .when_last_user_contains("keep me posted"),
        )
        .rule(Rule::echo());
    let (w, bot, shopping, travel) = forum_world(
        "autonomy = \"trust_first\"\ntools = [\"schedule_task\", \"list_tasks\", \"send_message\"]\n",
        script,
    )
    .await;

    say(
        &w,
        bot,
        Some(shopping),
        "@alpha_bot remind me to stretch soon",
    );
    let confirmed = sent_with(&w, bot, "I will remind you").await;
    assert_eq!(confirmed.thread_id, Some(shopping));
    let reminder = sent_with(&w, bot, "Time to stretch, in Shopping!").await;
    assert_eq!(
        reminder.thread_id,
        Some(shopping),
        "the job answers in its topic"
    );
    let target: Option<String> = w
        .store()
        .read(|conn| {
            Ok(
                conn.query_row("SELECT target_chat FROM jobs WHERE id = 1", [], |row| {
                    row.get(0)
                })?,
            )
        })
        .await
        .unwrap();
    assert_eq!(target, Some(format!("tg:{FORUM}/{shopping}")));

    say(&w, bot, Some(shopping), "@alpha_bot keep me posted");
    let progress = sent_with(&w, bot, "Still checking the shelves.").await;
    assert_eq!(
        progress.thread_id,
        Some(shopping),
        "send_message speaks in the topic"
    );
    let done = sent_with(&w, bot, "Progress sent.").await;
    assert_eq!(done.thread_id, Some(shopping));

    // A topic deleted before the answer: Telegram refuses the thread, the answer goes to the
    // chat's General instead of being lost.
    say(&w, bot, Some(travel), "@alpha_bot anyone there?");
    w.fake.delete_forum_topic(FORUM, travel);
    let rescued = sent_with(&w, bot, "anyone there").await;
    assert_eq!(rescued.thread_id, None, "delivered in General");
    w.harness.stop().await;
}

/// A file sent into a topic that was deleted goes to the chat's General, like a text reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_for_a_deleted_topic_is_uploaded_in_general() {
    let script = Script::new()
        .rule(Rule::text("There you go.").when_after_tool_result("send_file"))
        .rule(
            Rule::tool_call("send_file", r#"{"path": "plan.txt"}"#).when_last_user_contains("plan"),
        );
    let (w, bot, _, travel) = forum_world("tools = [\"send_file\"]", script).await;
    let workspace = w.harness.dir.path().join("data/workspaces/alpha");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("plan.txt"), "Day 1: Lisbon\n").unwrap();
    w.fake.delete_forum_topic(FORUM, travel);
    say(&w, bot, Some(travel), "@alpha_bot send me the plan");
    let document = w
        .fake
        .wait_for_sent(bot, |m| m.method == "sendDocument", WAIT)
        .await
        .expect("the file is uploaded");
    assert_eq!(document.thread_id, None, "uploaded in General");
    assert_eq!(document.chat_id, FORUM);
    w.harness.wait_settled(WAIT).await;
    assert_eq!(
        w.fake.call_count(bot, "sendDocument"),
        2,
        "one refused, one sent"
    );
    w.harness.stop().await;
}

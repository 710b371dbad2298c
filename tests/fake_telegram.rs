//! The fake Telegram Bot API server, driven by teloxide's real `Bot` and by raw HTTP: if teloxide
//! deserializes its answers and maps its errors to the right variants, tests of the daemon can
//! trust it.

use std::time::{Duration, Instant};

use clawvisor::telegram::format::{
    TELEGRAM_MESSAGE_LIMIT, markdown_to_html, plain_text, split_html,
};
use clawvisor::testkit::fake_telegram::{
    AttachmentKind, BotId, CONFLICT_DESCRIPTION, FakeTelegram, IncomingMessage, PER_CHAT_BURST,
};
use serde_json::{Value, json};
use teloxide::net::Download;
use teloxide::payloads::{
    AnswerCallbackQuerySetters, EditMessageReplyMarkupSetters, EditMessageTextSetters,
    GetUpdatesSetters, SendDocumentSetters, SendMessageSetters,
};
use teloxide::requests::Requester;
use teloxide::types::{
    BotCommand, CallbackQueryId, ChatAction, ChatId, InlineKeyboardButton, InlineKeyboardMarkup,
    InputFile, MessageEntityKind, MessageId, ParseMode, Update, UpdateKind,
};
use teloxide::{ApiError, Bot, RequestError};

const TOKEN: &str = "123456:TEST-token-alpha";
const OTHER_TOKEN: &str = "654321:TEST-token-bravo";
const USER: i64 = 4242;

async fn fake_with_bot() -> (FakeTelegram, BotId, Bot) {
    let fake = FakeTelegram::start().await;
    let bot_id = fake.add_bot(TOKEN, "alpha_bot");
    let bot = Bot::new(TOKEN).set_api_url(fake.api_url());
    (fake, bot_id, bot)
}

fn message_text(update: &Update) -> Option<&str> {
    match &update.kind {
        UpdateKind::Message(message) => message.text(),
        _ => None,
    }
}

fn keyboard(buttons: &[(&str, &str)]) -> InlineKeyboardMarkup {
    InlineKeyboardMarkup::new(vec![
        buttons
            .iter()
            .map(|(text, data)| InlineKeyboardButton::callback(*text, *data))
            .collect::<Vec<_>>(),
    ])
}

/// POSTs to the fake with plain reqwest and returns (HTTP status, JSON body).
async fn raw_call(fake: &FakeTelegram, token: &str, method: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/bot{token}/{method}", fake.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn get_me_round_trips_and_an_unknown_token_is_invalid() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let me = bot.get_me().await.unwrap();
    assert_eq!(me.username(), "alpha_bot");
    assert_eq!(me.user.id.0 as i64, 123456);
    assert!(me.user.is_bot);
    assert_eq!(fake.bot_user_id(bot_id), 123456);

    let stranger = Bot::new("999:unknown").set_api_url(fake.api_url());
    let error = stranger.get_me().await.unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::InvalidToken)),
        "{error:?}"
    );

    let (status, body) = raw_call(&fake, "999:unknown", "getMe", json!({})).await;
    assert_eq!(status, 401);
    assert_eq!(
        body,
        json!({"ok": false, "error_code": 401, "description": "Unauthorized"})
    );
    assert_eq!(fake.call_count(bot_id, "getMe"), 1);
}

#[tokio::test]
async fn offsets_confirm_and_forget_updates_like_telegram() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let first = fake.push_message(bot_id, USER, USER, "one");
    fake.push_message(bot_id, USER, USER, "two");
    let third = fake.push_message(bot_id, USER, USER, "three");
    assert_eq!(fake.updates_pending(bot_id), 3);
    assert_eq!(fake.confirmed_offset(bot_id), None);

    // Without an offset: everything unconfirmed, in order, and again on the next call.
    let updates = bot.get_updates().await.unwrap();
    let texts: Vec<_> = updates.iter().filter_map(message_text).collect();
    assert_eq!(texts, ["one", "two", "three"]);
    assert_eq!(updates[0].id.0 as i64, first.update_id);
    assert_eq!(bot.get_updates().await.unwrap().len(), 3);

    // `limit` caps the batch.
    assert_eq!(bot.get_updates().limit(2).await.unwrap().len(), 2);

    // An offset confirms everything below it, for good.
    let updates = bot
        .get_updates()
        .offset(first.update_id as i32 + 1)
        .await
        .unwrap();
    assert_eq!(
        updates.iter().filter_map(message_text).collect::<Vec<_>>(),
        ["two", "three"]
    );
    assert_eq!(fake.updates_pending(bot_id), 2);
    assert_eq!(fake.confirmed_offset(bot_id), Some(first.update_id + 1));
    assert_eq!(bot.get_updates().await.unwrap().len(), 2);

    let updates = bot
        .get_updates()
        .offset(third.update_id as i32 + 1)
        .await
        .unwrap();
    assert!(updates.is_empty());
    assert_eq!(fake.updates_pending(bot_id), 0);

    // A negative offset keeps only the latest updates (teloxide's drop_pending_updates).
    fake.push_message(bot_id, USER, USER, "old");
    fake.push_message(bot_id, USER, USER, "latest");
    let updates = bot.get_updates().offset(-1).await.unwrap();
    assert_eq!(
        updates.iter().filter_map(message_text).collect::<Vec<_>>(),
        ["latest"]
    );
    assert_eq!(fake.updates_pending(bot_id), 1);

    // The message is a real one: private chat, sender, date.
    let UpdateKind::Message(message) = &updates[0].kind else {
        panic!("expected a message, got {:?}", updates[0].kind);
    };
    assert!(message.chat.is_private());
    assert_eq!(message.chat.id, ChatId(USER));
    assert_eq!(
        message.from.as_ref().map(|user| user.id.0 as i64),
        Some(USER)
    );
    assert!(message.date.timestamp() > 1_700_000_000);
}

#[tokio::test]
async fn allowed_updates_filter_what_is_delivered() {
    let (fake, bot_id, _bot) = fake_with_bot().await;
    fake.push_message(bot_id, USER, USER, "text");
    fake.push_callback(bot_id, USER, USER, 1, "data");
    let (_, body) = raw_call(
        &fake,
        TOKEN,
        "getUpdates",
        json!({"allowed_updates": ["callback_query"]}),
    )
    .await;
    let results = body["result"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert!(results[0].get("callback_query").is_some());
    // The setting sticks when the parameter is left out, as on Telegram.
    let (_, body) = raw_call(&fake, TOKEN, "getUpdates", json!({})).await;
    assert_eq!(body["result"].as_array().unwrap().len(), 1);
    let (_, body) = raw_call(&fake, TOKEN, "getUpdates", json!({"allowed_updates": []})).await;
    assert_eq!(body["result"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_long_poll_returns_as_soon_as_an_update_arrives_and_times_out_otherwise() {
    let (fake, bot_id, bot) = fake_with_bot().await;

    let started = Instant::now();
    let updates = bot.get_updates().timeout(1).await.unwrap();
    let waited = started.elapsed();
    assert!(updates.is_empty());
    assert!(
        waited >= Duration::from_millis(950),
        "returned after {waited:?}"
    );

    let polling_bot = bot.clone();
    let poll = tokio::spawn(async move {
        let started = Instant::now();
        let updates = polling_bot.get_updates().timeout(10).await;
        (updates, started.elapsed())
    });
    assert!(fake.wait_for_poll(bot_id, Duration::from_secs(5)).await);
    assert_eq!(fake.polls_waiting(bot_id), 1);
    fake.push_message(bot_id, USER, USER, "wake up");
    let (updates, waited) = poll.await.unwrap();
    let updates = updates.unwrap();
    assert_eq!(
        updates.iter().filter_map(message_text).collect::<Vec<_>>(),
        ["wake up"]
    );
    assert!(
        waited < Duration::from_secs(5),
        "the long poll waited {waited:?}"
    );
    assert_eq!(fake.polls_waiting(bot_id), 0);
}

#[tokio::test]
async fn injected_conflicts_surface_as_terminated_by_other_get_updates() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    fake.conflict_next(bot_id, 2);
    for _ in 0..2 {
        let error = bot.get_updates().await.unwrap_err();
        assert!(
            matches!(
                error,
                RequestError::Api(ApiError::TerminatedByOtherGetUpdates)
            ),
            "{error:?}"
        );
    }
    assert!(bot.get_updates().await.unwrap().is_empty());
    // Other methods are not affected.
    fake.conflict_next(bot_id, 1);
    bot.get_me().await.unwrap();
    let (status, body) = raw_call(&fake, TOKEN, "getUpdates", json!({})).await;
    assert_eq!(status, 409);
    assert_eq!(body["description"], CONFLICT_DESCRIPTION);
}

#[tokio::test]
async fn a_newer_get_updates_displaces_a_waiting_one_with_409() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let first = bot.clone();
    let waiting = tokio::spawn(async move { first.get_updates().timeout(10).await });
    assert!(fake.wait_for_poll(bot_id, Duration::from_secs(5)).await);
    // A second instance of "the same bot" polls.
    assert!(bot.get_updates().await.unwrap().is_empty());
    let error = waiting.await.unwrap().unwrap_err();
    assert!(
        matches!(
            error,
            RequestError::Api(ApiError::TerminatedByOtherGetUpdates)
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn injected_rate_limits_carry_retry_after() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    fake.rate_limit_next(bot_id, "sendMessage", 7, 1);
    let error = bot.send_message(ChatId(USER), "hello").await.unwrap_err();
    match error {
        RequestError::RetryAfter(seconds) => assert_eq!(seconds.seconds(), 7),
        other => panic!("expected RetryAfter, got {other:?}"),
    }
    // Only the named method, only n times.
    bot.get_me().await.unwrap();
    bot.send_message(ChatId(USER), "hello").await.unwrap();
    assert_eq!(fake.sent(bot_id).len(), 1);

    fake.rate_limit_next(bot_id, "SENDMESSAGE", 3, 1);
    let (status, body) = raw_call(
        &fake,
        TOKEN,
        "sendMessage",
        json!({"chat_id": USER, "text": "x"}),
    )
    .await;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        json!({
            "ok": false,
            "error_code": 429,
            "description": "Too Many Requests: retry after 3",
            "parameters": {"retry_after": 3},
        })
    );
}

#[tokio::test]
async fn a_revoked_token_is_refused_even_in_a_waiting_poll() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let polling = bot.clone();
    let waiting = tokio::spawn(async move { polling.get_updates().timeout(10).await });
    assert!(fake.wait_for_poll(bot_id, Duration::from_secs(5)).await);
    fake.revoke_token(bot_id);
    let error = waiting.await.unwrap().unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::InvalidToken)),
        "{error:?}"
    );
    let error = bot.get_me().await.unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::InvalidToken)),
        "{error:?}"
    );
    // Calls still count, so a test can see a daemon that keeps hammering a dead token.
    assert_eq!(fake.call_count(bot_id, "getMe"), 1);
    assert_eq!(fake.call_count(bot_id, "getupdates"), 1);
}

#[tokio::test]
async fn reset_connections_close_without_an_answer() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    fake.reset_connections(bot_id, 1);
    let error = bot.get_me().await.unwrap_err();
    assert!(matches!(error, RequestError::Network(_)), "{error:?}");
    bot.get_me().await.unwrap();
    assert_eq!(fake.call_count(bot_id, "getMe"), 2);
}

#[tokio::test]
async fn hung_polls_answer_only_after_the_hang() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    fake.push_message(bot_id, USER, USER, "queued");
    fake.hang_polls(bot_id, Duration::from_millis(1200));
    let started = Instant::now();
    let polling = bot.clone();
    let hung = tokio::spawn(async move { polling.get_updates().timeout(0).await });
    assert!(
        fake.wait_for_calls(bot_id, "getUpdates", 1, Duration::from_secs(5))
            .await
    );
    // Other methods are answered while the poll hangs.
    bot.get_me().await.unwrap();
    assert!(!hung.is_finished());
    let updates = hung.await.unwrap().unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(1100),
        "answered after {:?}",
        started.elapsed()
    );
    assert_eq!(updates.len(), 1);
}

#[tokio::test]
async fn message_length_is_counted_after_entity_parsing_in_utf16_units() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let chat = ChatId(USER);
    bot.send_message(chat, "a".repeat(4096)).await.unwrap();
    let error = bot.send_message(chat, "a".repeat(4097)).await.unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::MessageIsTooLong)),
        "{error:?}"
    );

    // Tags and references do not count; each emoji counts two.
    let html = format!("<b>{}</b>", "&amp;".repeat(4096));
    bot.send_message(chat, html)
        .parse_mode(ParseMode::Html)
        .await
        .unwrap();
    bot.send_message(chat, "😀".repeat(2048)).await.unwrap();
    let error = bot.send_message(chat, "😀".repeat(2049)).await.unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::MessageIsTooLong)),
        "{error:?}"
    );

    let error = bot.send_message(chat, "  ").await.unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::MessageTextIsEmpty)),
        "{error:?}"
    );
    assert_eq!(fake.sent(bot_id).len(), 3);
}

#[tokio::test]
async fn html_is_validated_and_parsed_into_entities() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let chat = ChatId(USER);
    for bad in [
        "<b>unclosed",
        "<b>x</i>",
        "<br>",
        "a < b",
        "<code><b>x</b></code>",
    ] {
        let error = bot
            .send_message(chat, bad)
            .parse_mode(ParseMode::Html)
            .await
            .unwrap_err();
        match error {
            RequestError::Api(ApiError::CantParseEntities(description)) => {
                assert!(
                    description.starts_with("Bad Request: can't parse entities: "),
                    "{description}"
                );
            }
            other => panic!("{bad:?}: expected CantParseEntities, got {other:?}"),
        }
    }
    // The same text without parse_mode is just text.
    bot.send_message(chat, "<b>unclosed").await.unwrap();

    let message = bot
        .send_message(chat, "<b>Hi</b> &amp; <a href=\"https://example.com/x\">link</a>\n<pre><code class=\"language-rust\">let x = 1;</code></pre>")
        .parse_mode(ParseMode::Html)
        .await
        .unwrap();
    assert_eq!(message.text(), Some("Hi & link\nlet x = 1;"));
    let kinds: Vec<_> = message
        .entities()
        .unwrap_or_default()
        .iter()
        .map(|entity| entity.kind.clone())
        .collect();
    assert_eq!(kinds.len(), 3);
    assert_eq!(kinds[0], MessageEntityKind::Bold);
    assert!(
        matches!(&kinds[1], MessageEntityKind::TextLink { url } if url.as_str() == "https://example.com/x")
    );
    assert_eq!(
        kinds[2],
        MessageEntityKind::Pre {
            language: Some("rust".to_string())
        }
    );
    let sent = fake.sent(bot_id);
    assert_eq!(
        sent.last().map(|message| message.parse_mode.as_deref()),
        Some(Some("HTML"))
    );
}

#[tokio::test]
async fn edits_that_change_nothing_are_not_modified() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let chat = ChatId(USER);
    let buttons = keyboard(&[("Approve", "ap:1"), ("Deny", "dn:1")]);
    let message = bot
        .send_message(chat, "Draft")
        .reply_markup(buttons.clone())
        .await
        .unwrap();
    assert_eq!(message.reply_markup(), Some(&buttons));

    let error = bot
        .edit_message_text(chat, message.id, "Draft")
        .reply_markup(buttons.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::MessageNotModified)),
        "{error:?}"
    );

    // Leaving the keyboard out removes it: that is a change.
    let edited = bot
        .edit_message_text(chat, message.id, "Draft")
        .await
        .unwrap();
    assert_eq!(edited.reply_markup(), None);
    assert!(edited.edit_date().is_some());
    let edited = bot
        .edit_message_text(chat, message.id, "Final")
        .await
        .unwrap();
    assert_eq!(edited.text(), Some("Final"));

    let error = bot
        .edit_message_text(chat, MessageId(999), "x")
        .await
        .unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::MessageToEditNotFound)),
        "{error:?}"
    );

    let sent = fake.sent(bot_id);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].original_text, "Draft");
    assert_eq!(sent[0].text, "Final");
    assert_eq!(sent[0].edits.len(), 2);
    assert!(sent[0].edits[0].at <= sent[0].edits[1].at);
    assert!(sent[0].buttons.is_empty());

    bot.edit_message_reply_markup(chat, message.id)
        .reply_markup(buttons)
        .await
        .unwrap();
    assert_eq!(fake.sent(bot_id)[0].callback_data(), ["ap:1", "dn:1"]);
    bot.delete_message(chat, message.id).await.unwrap();
    assert!(fake.sent(bot_id)[0].deleted);
    let error = bot.delete_message(chat, message.id).await.unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::MessageToDeleteNotFound)),
        "{error:?}"
    );
}

#[tokio::test]
async fn callback_queries_round_trip_and_answer_once() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let chat = ChatId(USER);
    let message = bot
        .send_message(chat, "Run the tool?")
        .reply_markup(keyboard(&[("Yes", "ap:42")]))
        .await
        .unwrap();
    let pushed = fake.push_callback(bot_id, USER, USER, message.id.0, "ap:42");
    let updates = bot.get_updates().await.unwrap();
    let UpdateKind::CallbackQuery(query) = &updates[0].kind else {
        panic!("expected a callback query, got {:?}", updates[0].kind);
    };
    assert_eq!(query.data.as_deref(), Some("ap:42"));
    assert_eq!(query.from.id.0 as i64, USER);
    assert_eq!(query.id.0, pushed.callback_query_id);
    let shown = query
        .regular_message()
        .expect("the bot's message is accessible");
    assert_eq!(shown.id, message.id);
    assert_eq!(shown.text(), Some("Run the tool?"));

    bot.answer_callback_query(query.id.clone())
        .text("Approved")
        .await
        .unwrap();
    let error = bot
        .answer_callback_query(query.id.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::InvalidQueryId)),
        "{error:?}"
    );
    let error = bot
        .answer_callback_query(CallbackQueryId("nope".into()))
        .await
        .unwrap_err();
    assert!(
        matches!(error, RequestError::Api(ApiError::InvalidQueryId)),
        "{error:?}"
    );
    let answers = fake.callback_answers(bot_id);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].text.as_deref(), Some("Approved"));

    // A button under a message the chat no longer has arrives with an inaccessible message.
    fake.push_callback(bot_id, USER, USER, 777, "old");
    let updates = bot
        .get_updates()
        .offset(updates[0].id.0 as i32 + 1)
        .await
        .unwrap();
    let UpdateKind::CallbackQuery(query) = &updates[0].kind else {
        panic!("expected a callback query, got {:?}", updates[0].kind);
    };
    assert!(query.regular_message().is_none());
    assert_eq!(
        query.message.as_ref().map(|message| message.id()),
        Some(MessageId(777))
    );
}

#[tokio::test]
async fn group_messages_carry_title_mentions_and_replies() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let group = -1_001_234_567_890;
    fake.set_chat_title(group, "Family");
    fake.set_user(USER, "Ada", Some("ada"));
    let bot_message = bot.send_message(ChatId(group), "I am here").await.unwrap();
    fake.push(
        bot_id,
        IncomingMessage::new(group, USER, "@alpha_bot what now? /help")
            .replying_to(bot_message.id.0),
    );
    let updates = bot.get_updates().await.unwrap();
    let UpdateKind::Message(message) = &updates[0].kind else {
        panic!("expected a message, got {:?}", updates[0].kind);
    };
    assert!(message.chat.is_supergroup());
    assert_eq!(message.chat.title(), Some("Family"));
    assert_eq!(
        message
            .from
            .as_ref()
            .and_then(|user| user.username.as_deref()),
        Some("ada")
    );
    let entities = message.entities().unwrap_or_default();
    assert_eq!(entities.len(), 2);
    assert_eq!(
        (
            entities[0].kind.clone(),
            entities[0].offset,
            entities[0].length
        ),
        (MessageEntityKind::Mention, 0, 10)
    );
    assert_eq!(entities[1].kind, MessageEntityKind::BotCommand);
    let replied = message.reply_to_message().expect("the reply is attached");
    assert_eq!(replied.id, bot_message.id);
    assert_eq!(replied.from.as_ref().map(|user| user.is_bot), Some(true));

    // Edits by the user arrive as edited_message.
    let edited = fake
        .push_edited_message(bot_id, group, message.id.0, "edited")
        .unwrap();
    let updates = bot
        .get_updates()
        .offset(edited.update_id as i32)
        .await
        .unwrap();
    assert!(
        matches!(&updates[0].kind, UpdateKind::EditedMessage(message) if message.text() == Some("edited"))
    );
}

#[tokio::test]
async fn files_go_both_ways() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let photo_bytes = b"\xFF\xD8\xFFfake-jpeg".to_vec();
    fake.push_photo(bot_id, USER, USER, photo_bytes.clone(), Some("look"));
    fake.push_document(
        bot_id,
        USER,
        USER,
        "notes.txt",
        b"hello file".to_vec(),
        None,
    );
    let updates = bot.get_updates().await.unwrap();
    let UpdateKind::Message(photo_message) = &updates[0].kind else {
        panic!("expected a message, got {:?}", updates[0].kind);
    };
    assert_eq!(photo_message.caption(), Some("look"));
    let photo = &photo_message.photo().expect("a photo")[0];
    let file = bot.get_file(photo.file.id.clone()).await.unwrap();
    let mut downloaded = Vec::new();
    bot.download_file(&file.path, &mut downloaded)
        .await
        .unwrap();
    assert_eq!(downloaded, photo_bytes);

    let UpdateKind::Message(document_message) = &updates[1].kind else {
        panic!("expected a message, got {:?}", updates[1].kind);
    };
    let document = document_message.document().expect("a document");
    assert_eq!(document.file_name.as_deref(), Some("notes.txt"));
    assert_eq!(
        document.mime_type.as_ref().map(|mime| mime.essence_str()),
        Some("text/plain")
    );
    let file = bot.get_file(document.file.id.clone()).await.unwrap();
    assert_eq!(file.meta.size, 10);

    let registered = fake.register_file(bot_id, "data.bin", vec![1, 2, 3]);
    let mut downloaded = Vec::new();
    bot.download_file(&registered.file_path, &mut downloaded)
        .await
        .unwrap();
    assert_eq!(downloaded, [1, 2, 3]);

    let sent = bot
        .send_document(
            ChatId(USER),
            InputFile::memory(b"report body".to_vec()).file_name("report.md"),
        )
        .caption("<b>Report</b>")
        .parse_mode(ParseMode::Html)
        .await
        .unwrap();
    assert_eq!(sent.caption(), Some("Report"));
    assert_eq!(
        sent.document()
            .and_then(|document| document.file_name.as_deref()),
        Some("report.md")
    );
    let recorded = fake.sent(bot_id);
    let attachment = recorded[0].attachment.as_ref().expect("an attachment");
    assert_eq!(attachment.kind, AttachmentKind::Document);
    assert_eq!(attachment.bytes, b"report body");
    bot.send_photo(ChatId(USER), InputFile::memory(photo_bytes.clone()))
        .await
        .unwrap();
    assert_eq!(
        fake.sent(bot_id)[1]
            .attachment
            .as_ref()
            .map(|attachment| attachment.kind),
        Some(AttachmentKind::Photo)
    );
}

#[tokio::test]
async fn commands_and_chat_actions_are_recorded() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    bot.set_my_commands([
        BotCommand::new("stop", "Stop the current run"),
        BotCommand::new("new", "Start over"),
    ])
    .await
    .unwrap();
    let commands = bot.get_my_commands().await.unwrap();
    assert_eq!(
        commands
            .iter()
            .map(|command| command.command.as_str())
            .collect::<Vec<_>>(),
        ["stop", "new"]
    );
    assert_eq!(fake.commands(bot_id).len(), 2);
    let error = bot
        .set_my_commands([BotCommand::new("Bad Name", "x")])
        .await
        .unwrap_err();
    assert!(matches!(error, RequestError::Api(_)), "{error:?}");

    bot.send_chat_action(ChatId(USER), ChatAction::Typing)
        .await
        .unwrap();
    let actions = fake.chat_actions(bot_id);
    assert_eq!(actions.len(), 1);
    assert_eq!(
        (actions[0].chat_id, actions[0].action.as_str()),
        (USER, "typing")
    );
    bot.delete_webhook().await.unwrap();
    assert_eq!(fake.call_count(bot_id, "deleteWebhook"), 1);
    assert_eq!(fake.call_count(bot_id, "sendChatAction"), 1);
}

#[tokio::test]
async fn flood_limits_are_counted_not_enforced() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    // A burst of PER_CHAT_BURST messages to one chat is tolerated; one more at once is one
    // violation.
    for index in 0..=PER_CHAT_BURST {
        bot.send_message(ChatId(1), format!("m{index}"))
            .await
            .unwrap();
    }
    let violations = fake.violations(bot_id);
    assert_eq!(violations.chat_per_second, 1);
    assert_eq!(violations.examples[0].chat_id, 1);
    assert_eq!(violations.examples[0].method, "sendMessage");

    // Another chat has its own bucket.
    bot.send_message(ChatId(2), "a").await.unwrap();
    bot.send_message(ChatId(2), "b").await.unwrap();
    assert_eq!(fake.violations(bot_id).chat_per_second, 1);

    // Edits are counted apart, and their spacing is reported.
    let message = bot.send_message(ChatId(3), "v1").await.unwrap();
    for version in 2..=PER_CHAT_BURST + 2 {
        bot.edit_message_text(ChatId(3), message.id, format!("v{version}"))
            .await
            .unwrap();
    }
    let violations = fake.violations(bot_id);
    assert_eq!(violations.sends(), 1);
    assert_eq!(violations.edit_chat_per_second, 1);
    assert_eq!(
        violations.edits_under_one_second,
        u64::from(PER_CHAT_BURST) + 1
    );
    assert!(
        violations
            .shortest_edit_interval
            .is_some_and(|interval| interval < Duration::from_secs(1))
    );
}

#[tokio::test]
async fn bots_are_isolated_from_each_other() {
    let (fake, alpha, alpha_bot) = fake_with_bot().await;
    let bravo = fake.add_bot(OTHER_TOKEN, "bravo_bot");
    let bravo_bot = Bot::new(OTHER_TOKEN).set_api_url(fake.api_url());
    assert_eq!(bravo_bot.get_me().await.unwrap().username(), "bravo_bot");

    fake.push_message(alpha, USER, USER, "for alpha");
    assert!(bravo_bot.get_updates().await.unwrap().is_empty());
    assert_eq!(alpha_bot.get_updates().await.unwrap().len(), 1);

    fake.conflict_next(alpha, 1);
    fake.revoke_token(alpha);
    bravo_bot.get_updates().await.unwrap();
    for index in 0..=PER_CHAT_BURST {
        bravo_bot
            .send_message(ChatId(USER), format!("from bravo {index}"))
            .await
            .unwrap();
    }
    assert!(fake.sent(alpha).is_empty());
    assert_eq!(fake.sent(bravo).len(), PER_CHAT_BURST as usize + 1);
    assert_eq!(fake.violations(alpha).total(), 0);
    assert_eq!(fake.violations(bravo).chat_per_second, 1);
    assert_eq!(fake.call_count(alpha, "sendMessage"), 0);
    assert!(alpha_bot.get_me().await.is_err());
}

#[tokio::test]
async fn the_wire_accepts_any_method_case_forms_and_never_answers_5xx() {
    let (fake, bot_id, _bot) = fake_with_bot().await;
    for method in ["getMe", "getme", "GETME", "GetMe"] {
        let (status, body) = raw_call(&fake, TOKEN, method, json!({})).await;
        assert_eq!(status, 200, "{method}");
        assert_eq!(body["result"]["username"], "alpha_bot");
    }
    assert_eq!(fake.call_count(bot_id, "getMe"), 4);

    let (status, body) = raw_call(&fake, TOKEN, "noSuchMethod", json!({})).await;
    assert_eq!(
        (status, body["description"].as_str()),
        (404, Some("Not Found"))
    );

    // A form-encoded body with the keyboard as a JSON string, as curl users send it.
    let response = reqwest::Client::new()
        .post(format!("{}/bot{TOKEN}/sendMessage", fake.base_url()))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("chat_id=5&text=hi%20there&reply_markup=%7B%22inline_keyboard%22%3A%5B%5B%7B%22text%22%3A%22ok%22%2C%22callback_data%22%3A%22k%22%7D%5D%5D%7D")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let sent = fake.sent(bot_id);
    assert_eq!(sent[0].text, "hi there");
    assert_eq!(sent[0].callback_data(), ["k"]);

    let (status, _) = raw_call(
        &fake,
        TOKEN,
        "sendMessage",
        json!({"chat_id": 5, "text": "x", "parse_mode": "Wrong"}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = raw_call(&fake, TOKEN, "sendMessage", json!({"text": "no chat"})).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn wait_for_sent_sees_messages_and_edits_as_they_happen() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let sender = bot.clone();
    tokio::spawn(async move {
        // Deliberate gaps: the message and its edit happen while the waiter below already waits.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let message = sender.send_message(ChatId(USER), "thinking").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        sender
            .edit_message_text(ChatId(USER), message.id, "done")
            .await
            .unwrap();
    });
    let found = fake
        .wait_for_sent(
            bot_id,
            |message| message.text == "done",
            Duration::from_secs(5),
        )
        .await
        .expect("the edit arrives");
    assert_eq!(found.original_text, "thinking");
    let missing = fake
        .wait_for_sent(
            bot_id,
            |message| message.text == "never",
            Duration::from_millis(200),
        )
        .await;
    assert!(missing.is_none());
    assert!(
        fake.wait_for_calls(bot_id, "editMessageText", 1, Duration::from_secs(1))
            .await
    );
}

#[tokio::test]
async fn stop_cuts_waiting_polls_and_refuses_new_connections() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let polling = bot.clone();
    let waiting = tokio::spawn(async move { polling.get_updates().timeout(10).await });
    assert!(fake.wait_for_poll(bot_id, Duration::from_secs(5)).await);
    let started = Instant::now();
    fake.stop().await;
    let error = waiting.await.unwrap().unwrap_err();
    assert!(matches!(error, RequestError::Network(_)), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(
        bot.get_me().await.unwrap_err(),
        RequestError::Network(_)
    ));
}

#[tokio::test]
async fn a_long_formatted_answer_is_accepted_by_telegram_chunk_by_chunk() {
    let (fake, bot_id, bot) = fake_with_bot().await;
    let mut markdown =
        String::from("# Plan\n\nHere is what I found, with **details** & `code`:\n\n");
    for index in 0..60 {
        markdown.push_str(&format!(
            "{index}. Step *{index}* — see [docs](https://example.com/{index}) 😀 and more words to fill the line.\n"
        ));
    }
    markdown.push_str("\n```rust\n");
    for index in 0..150 {
        markdown.push_str(&format!(
            "let value_{index} = compute({index}) < limit && ready;\n"
        ));
    }
    markdown.push_str("```\n\n> A closing quote with <angle brackets> & ampersands.\n");
    let html = markdown_to_html(&markdown);
    let chunks = split_html(&html, TELEGRAM_MESSAGE_LIMIT);
    assert!(chunks.len() >= 2, "{} chunks", chunks.len());
    for chunk in &chunks {
        bot.send_message(ChatId(USER), chunk.as_str())
            .parse_mode(ParseMode::Html)
            .await
            .unwrap();
    }
    let sent = fake.sent(bot_id);
    assert_eq!(sent.len(), chunks.len());
    let delivered: String = sent
        .iter()
        .map(|message| message.visible_text.as_str())
        .collect();
    assert_eq!(delivered, plain_text(&html));
}

#[tokio::test]
async fn drafts_are_recorded_checked_and_can_be_refused() {
    let (fake, bot_id, _bot) = fake_with_bot().await;
    let (status, body) = raw_call(
        &fake,
        TOKEN,
        "sendMessageDraft",
        json!({"chat_id": USER, "draft_id": 7, "text": "<b>Hal</b>f written", "parse_mode": "HTML"}),
    )
    .await;
    assert_eq!((status, &body["result"]), (200, &json!(true)), "{body}");
    let drafts = fake.drafts(bot_id);
    assert_eq!(drafts.len(), 1);
    assert_eq!(
        (drafts[0].chat_id, drafts[0].draft_id, drafts[0].thread_id),
        (USER, 7, None)
    );
    assert_eq!(drafts[0].visible_text, "Half written");
    assert!(fake.sent(bot_id).is_empty(), "a draft posts no message");

    for (body, expected) in [
        (
            json!({"chat_id": USER, "draft_id": 0, "text": "x"}),
            "non-zero",
        ),
        (
            json!({"chat_id": -100, "draft_id": 1, "text": "x"}),
            "private chats",
        ),
    ] {
        let (status, answer) = raw_call(&fake, TOKEN, "sendMessageDraft", body).await;
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["description"].as_str().unwrap().contains(expected),
            "{answer}"
        );
    }

    fake.refuse_drafts(bot_id, true);
    let (status, answer) = raw_call(
        &fake,
        TOKEN,
        "sendMessageDraft",
        json!({"chat_id": USER, "draft_id": 7, "text": "more"}),
    )
    .await;
    assert_eq!((status, &answer["description"]), (404, &json!("Not Found")));
    assert_eq!(fake.drafts(bot_id).len(), 1);
    assert_eq!(fake.call_count(bot_id, "sendMessageDraft"), 4);
}

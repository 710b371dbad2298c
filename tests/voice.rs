//! Voice notes in, end to end: the real daemon in-process, the fake Bot API sending voice updates
//! as Telegram does, the fake transcription server parsing the real multipart body, and the
//! scripted model. What is shown: a note is transcribed and answered (and quoted back with
//! `echo_transcripts`); without a provider the user gets the hint once and the agent still gets
//! the note; a note too long or unreadable gets a clear sentence and still reaches the agent; a
//! provider failure is retried by the sweep and answered once.

use std::time::Duration;

use clawvisor::secrets::Secret;
use clawvisor::testkit::fake_telegram::SentMessage;
use clawvisor::testkit::fake_transcription::{FakeTranscription, TranscriptionFault};
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml, telegram_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use clawvisor::testkit::world::token_variable;
use clawvisor::voice::{Audio, NO_PROVIDER_HINT, Transcriber, TranscriptionError};

const USER: i64 = 42;
const KEY: &str = "sk-whisper-test-key-0042";
const HEARD: &str = "what is the weather tomorrow";

/// The `[providers.whisper]` table for the fake (no retries inside one attempt: the sweep's
/// retry is what is tested).
fn whisper_provider(fake: &FakeTranscription) -> String {
    format!(
        "[providers.whisper]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"WHISPER_TEST_KEY\"\ntranscription_model = \"whisper-1\"\nmax_retries = 0\ntimeout = \"10s\"\n",
        fake.base_url()
    )
}

/// Agent `alpha` with a bot; `provider` is appended to the daemon's config.
async fn world(agent_extra: &str, provider: &str) -> World {
    World::builder(
        Script::new()
            .rule(Rule::text("Sunny, 21 degrees.").when_last_user_contains(HEARD))
            .rule(Rule::text("Noted.")),
    )
    .config_extra(provider)
    .env("WHISPER_TEST_KEY", KEY)
    .agent_with_bot(
        "alpha",
        agent_extra,
        "100:AAH-voice-test-token-alpha-0000",
        &[USER],
        &[],
    )
    .start()
    .await
}

fn voice_bytes(seed: u8) -> Vec<u8> {
    // An Ogg page header, then noise: the bytes only have to arrive intact.
    let mut bytes = b"OggS\0\x02".to_vec();
    bytes.extend((0..3000u32).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    bytes
}

async fn wait_for_text(w: &World, text: &str, timeout: Duration) -> SentMessage {
    let bot = w.bot("alpha");
    w.fake
        .wait_for_sent(bot, |m| m.visible_text.contains(text), timeout)
        .await
        .unwrap_or_else(|| {
            panic!(
                "the bot sent `{text}`; it sent {:?}",
                w.fake
                    .sent(bot)
                    .iter()
                    .map(|m| m.visible_text.clone())
                    .collect::<Vec<_>>()
            )
        })
}

fn sent_count(w: &World, text: &str) -> usize {
    w.fake
        .sent(w.bot("alpha"))
        .iter()
        .filter(|m| m.visible_text.contains(text))
        .count()
}

/// The user messages of every request the model got.
fn user_texts(w: &World) -> Vec<String> {
    w.llm
        .requests()
        .iter()
        .flat_map(|request| {
            request["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|m| m["role"] == "user")
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

/// The stored user messages' texts and attachment data, oldest first.
async fn stored_user_messages(w: &World) -> Vec<(String, String)> {
    w.store()
        .read(|conn| {
            let mut statement = conn.prepare(
                "SELECT content, COALESCE(data, '') FROM session_events WHERE kind = 'user' ORDER BY id",
            )?;
            let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

async fn wait_settled(w: &World) {
    w.harness.wait_settled(Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_answered_and_quoted_back() {
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    let w = world("echo_transcripts = true", &whisper_provider(&transcription)).await;
    let bytes = voice_bytes(1);
    let pushed = w
        .fake
        .push_voice(w.bot("alpha"), USER, USER, bytes.clone(), 7, None);

    let answer = wait_for_text(&w, "Sunny, 21 degrees.", Duration::from_secs(30)).await;
    let quote = wait_for_text(
        &w,
        &format!("🎙 \u{201C}{HEARD}\u{201D}"),
        Duration::from_secs(10),
    )
    .await;
    assert!(
        quote.sent_at <= answer.sent_at,
        "the quote comes before the answer"
    );

    // The server got the real multipart request: the file as sent, its name, the model, the key.
    let requests = transcription.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let request = &requests[0];
    assert_eq!(request.file_bytes, bytes);
    assert_eq!(
        request.file_name,
        format!("voice-{}.ogg", pushed.message_id)
    );
    assert_eq!(request.content_type, "audio/ogg");
    assert_eq!(request.model, "whisper-1");
    assert_eq!(request.response_format.as_deref(), Some("json"));
    assert_eq!(
        request.authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );

    // The model read the transcript as what the user said, and where the audio is.
    let users = user_texts(&w);
    let spoken = users
        .iter()
        .find(|text| text.contains(HEARD))
        .unwrap_or_else(|| panic!("the model saw the transcript: {users:?}"));
    assert!(
        spoken.starts_with(&format!("[voice note, 0:07] {HEARD}")),
        "{spoken}"
    );
    assert!(spoken.contains("[audio saved to inbox/"), "{spoken}");

    // The audio stays in the workspace and on the stored message as a voice attachment.
    let inbox = w.harness.dir.path().join("data/workspaces/alpha/inbox");
    let files: Vec<_> = std::fs::read_dir(&inbox)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(std::fs::read(&files[0]).unwrap(), bytes);
    let stored = stored_user_messages(&w).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(stored[0].1.contains("\"voice\""), "{stored:?}");

    wait_settled(&w).await;
    assert_eq!(sent_count(&w, "🎙"), 1, "quoted once");
    assert_eq!(sent_count(&w, "Sunny, 21 degrees."), 1, "answered once");
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_transcription_provider_the_user_gets_the_hint_once_and_nothing_is_lost() {
    let w = world("", "").await;
    let bytes = voice_bytes(2);
    w.fake.push_voice(
        w.bot("alpha"),
        USER,
        USER,
        bytes.clone(),
        12,
        Some("listen"),
    );

    // Sent as Markdown: the key's name shows as code, without its backticks.
    let hint = NO_PROVIDER_HINT.replace('`', "");
    wait_for_text(&w, &hint, Duration::from_secs(30)).await;
    wait_for_text(&w, "Noted.", Duration::from_secs(30)).await;
    wait_settled(&w).await;
    assert_eq!(sent_count(&w, &hint), 1, "the hint is sent once");

    // The agent got the message: the caption, that it cannot hear the note, and where it is.
    let stored = stored_user_messages(&w).await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    let text = &stored[0].0;
    assert!(
        text.starts_with("listen\n[voice note, 0:12, saved to inbox/"),
        "{text}"
    );
    assert!(text.contains("you cannot hear it"), "{text}");
    assert!(stored[0].1.contains("\"voice\""), "{stored:?}");
    let inbox = w.harness.dir.path().join("data/workspaces/alpha/inbox");
    let files: Vec<_> = std::fs::read_dir(&inbox)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        std::fs::read(&files[0]).unwrap(),
        bytes,
        "the audio is kept"
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_long_or_unreadable_notes_are_explained_and_still_reach_the_agent() {
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    let w = world(
        "",
        &format!(
            "{}[transcription]\nmax_duration = \"5m\"\n",
            whisper_provider(&transcription)
        ),
    )
    .await;
    let bot = w.bot("alpha");

    // Too long: never sent to the provider; the user hears the limit.
    w.fake
        .push_voice(bot, USER, USER, voice_bytes(3), 3725, None);
    wait_for_text(
        &w,
        "That voice note is 1:02:05 long; I can only transcribe notes up to 5:00.",
        Duration::from_secs(30),
    )
    .await;
    wait_settled(&w).await;
    assert!(
        transcription.requests().is_empty(),
        "a note over the limit is not uploaded"
    );

    // Unreadable: the provider's 400 is told as such.
    transcription.fail_next(&[TranscriptionFault::Unreadable]);
    w.fake.push_voice(bot, USER, USER, voice_bytes(4), 5, None);
    wait_for_text(
        &w,
        "I couldn't make out that voice note",
        Duration::from_secs(30),
    )
    .await;
    wait_settled(&w).await;

    let stored = stored_user_messages(&w).await;
    assert_eq!(stored.len(), 2, "both notes reached the agent: {stored:?}");
    assert!(
        stored[0]
            .0
            .contains("[voice note, 1:02:05, saved to inbox/")
            && stored[0].0.contains("longer than the 5:00 limit"),
        "{}",
        stored[0].0
    );
    assert!(
        stored[1].0.contains("could not be transcribed") && stored[1].0.contains("HTTP 400"),
        "{}",
        stored[1].0
    );
    assert!(
        !stored[1].0.contains(KEY) && !stored[1].0.contains("127.0.0.1"),
        "{}",
        stored[1].0
    );
    w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_failure_is_retried_by_the_sweep_and_answered_once() {
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    transcription.fail_next(&[TranscriptionFault::ServerError]);
    let w = world("", &whisper_provider(&transcription)).await;
    w.fake
        .push_voice(w.bot("alpha"), USER, USER, voice_bytes(5), 4, None);

    // The first attempt fails; the update stays pending with the reason, and nobody is told.
    assert!(
        transcription
            .wait_for_requests(1, Duration::from_secs(30))
            .await
    );
    wait_until(
        Duration::from_secs(10),
        "the update waits for a retry",
        || async {
            let note: Option<String> = w
                .store()
                .read(|conn| {
                    Ok(conn.query_row(
                        "SELECT note FROM inbound_updates WHERE user_id = 42",
                        [],
                        |r| r.get(0),
                    )?)
                })
                .await
                .unwrap();
            match note {
                Some(note) if note.contains("will retry") && note.contains("HTTP 500") => Ok(()),
                other => Err(format!("note {other:?}")),
            }
        },
    )
    .await;
    assert!(
        w.fake
            .sent(w.bot("alpha"))
            .iter()
            .all(|m| !m.visible_text.contains("couldn't"))
    );

    // The sweep (every 30 s, for updates older than 20 s) transcribes it again and it is answered.
    wait_for_text(&w, "Sunny, 21 degrees.", Duration::from_secs(90)).await;
    wait_settled(&w).await;
    assert_eq!(transcription.requests().len(), 2);
    assert_eq!(sent_count(&w, "Sunny, 21 degrees."), 1, "answered once");
    assert_eq!(
        user_texts(&w)
            .iter()
            .filter(|text| text.contains(HEARD))
            .count(),
        1,
        "the model got the note once"
    );
    assert_eq!(stored_user_messages(&w).await.len(), 1);
    assert_eq!(sent_count(&w, "🎙"), 0, "no quote without echo_transcripts");
    w.harness.stop().await;
}

#[tokio::test]
async fn the_client_reads_transcripts_and_its_errors_name_neither_key_nor_url() {
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    let key = "sk-client-test-secret-7777";
    let client = Transcriber::new(
        "whisper",
        &format!("{}/", transcription.base_url()),
        "whisper-1",
        Some(Secret::new(key)),
        Duration::from_secs(10),
        0,
    );
    let audio = Audio {
        bytes: voice_bytes(9),
        file_name: "voice-3.ogg".into(),
        mime: "audio/ogg".into(),
    };
    transcription.set_transcript(&audio.bytes, "  the exact words \n");
    assert_eq!(client.transcribe(&audio).await.unwrap(), "the exact words");

    transcription.fail_next(&[TranscriptionFault::EchoAuthorization]);
    let error = client.transcribe(&audio).await.unwrap_err();
    assert!(
        matches!(error, TranscriptionError::Http { status: 401, .. }),
        "{error:?}"
    );
    assert!(!error.is_transient());
    let text = error.to_string();
    assert!(
        text.contains("Incorrect API key") && text.contains("api_key_env"),
        "{text}"
    );
    assert!(!text.contains(key) && !text.contains("127.0.0.1"), "{text}");

    transcription.fail_next(&[TranscriptionFault::ServerError]);
    let error = client.transcribe(&audio).await.unwrap_err();
    assert!(error.is_transient(), "{error:?}");

    // Nobody listens on port 9: a connection error, transient, without the address.
    let unreachable = Transcriber::new(
        "whisper",
        "http://127.0.0.1:9/v1",
        "whisper-1",
        Some(Secret::new(key)),
        Duration::from_secs(5),
        0,
    );
    let error = unreachable.transcribe(&audio).await.unwrap_err();
    assert!(error.is_transient(), "{error:?}");
    let text = error.to_string();
    assert!(!text.contains(key) && !text.contains("127.0.0.1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_stopped_mid_transcription_transcribes_and_answers_once_after_restart() {
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    transcription.fail_next(&[TranscriptionFault::Stall(Duration::from_secs(60))]);
    let provider = whisper_provider(&transcription);
    let w = world("", &provider).await;
    let bot = w.bot("alpha");
    let token = w.bots[0].token.clone();
    w.fake.push_voice(bot, USER, USER, voice_bytes(6), 9, None);
    // The daemon stops while the server still works on the note.
    assert!(
        transcription
            .wait_for_requests(1, Duration::from_secs(30))
            .await
    );
    let World {
        fake, llm, harness, ..
    } = w;
    let dir = harness.stop().await;
    assert!(
        fake.sent(bot).is_empty(),
        "nothing was said before the stop"
    );

    let mut options = HarnessOptions::new(llm.base_url());
    let variable = token_variable("alpha");
    options.agents = vec![agent_toml(
        "alpha",
        &telegram_toml(&variable, &fake.base_url(), &[USER], &[]),
    )];
    options.config_extra = provider;
    options.env.insert(variable, token);
    options.env.insert("WHISPER_TEST_KEY".into(), KEY.into());
    let harness = Harness::start_in(dir, options).await.unwrap();

    // The stored update is taken up at boot: transcribed again, answered once.
    fake.wait_for_sent(
        bot,
        |m| m.visible_text.contains("Sunny, 21 degrees."),
        Duration::from_secs(30),
    )
    .await
    .expect("answered after the restart");
    harness.wait_settled(Duration::from_secs(30)).await;
    assert_eq!(transcription.requests().len(), 2);
    let answers = fake
        .sent(bot)
        .iter()
        .filter(|m| m.visible_text.contains("Sunny"))
        .count();
    assert_eq!(answers, 1, "answered once");
    let heard = llm
        .requests()
        .iter()
        .filter(|request| request.to_string().contains(HEARD))
        .count();
    assert_eq!(heard, 1, "the model got the note once");
    harness.stop().await;
}

/// `[telegram]` with a short `stale_grace`: a restart a few seconds after a note would call it
/// stale, unless it is still being heard.
const SHORT_GRACE: &str =
    "[telegram]\nboot_stagger = \"50ms\"\npoll_timeout = \"2s\"\nstale_grace = \"3s\"\n";

/// Waits until the voice note's update row is pending with a note containing `reason`.
async fn wait_for_retry_note(w: &World, reason: &str) {
    wait_until(
        Duration::from_secs(30),
        "the voice note waits for a retry",
        || async {
            let note: Option<String> = w
                .store()
                .read(|conn| {
                    Ok(conn
                        .query_row(
                            "SELECT note FROM inbound_updates WHERE user_id = 42",
                            [],
                            |r| r.get(0),
                        )
                        .unwrap_or(None))
                })
                .await
                .unwrap();
            match note {
                Some(note) if note.contains("will retry") && note.contains(reason) => Ok(()),
                other => Err(format!("note {other:?}")),
            }
        },
    )
    .await;
}

/// Stops `w`, lets more than `stale_grace` pass since the note was sent, and starts the daemon
/// again on the same directory; the note must then be answered once. Returns every request the
/// model received, as one text.
async fn restart_later_and_expect_one_answer(w: World, provider: &str) -> String {
    let token = w.bots[0].token.clone();
    let bot = w.bot("alpha");
    let World {
        fake, llm, harness, ..
    } = w;
    let dir = harness.stop().await;
    // Not waiting for a state: time has to pass for the note to be older than `stale_grace`.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut options = HarnessOptions::new(llm.base_url());
    let variable = token_variable("alpha");
    options.agents = vec![agent_toml(
        "alpha",
        &telegram_toml(&variable, &fake.base_url(), &[USER], &[]),
    )];
    options.config_extra = format!("{SHORT_GRACE}{provider}");
    options.env.insert(variable, token);
    options.env.insert("WHISPER_TEST_KEY".into(), KEY.into());
    let harness = Harness::start_in(dir, options).await.unwrap();
    fake.wait_for_sent(
        bot,
        |m| m.visible_text.contains("Sunny, 21 degrees."),
        Duration::from_secs(30),
    )
    .await
    .expect("the note is answered after the restart, not dropped as stale");
    harness.wait_settled(Duration::from_secs(30)).await;
    let sent = fake.sent(bot);
    assert_eq!(
        sent.iter()
            .filter(|m| m.visible_text.contains("Sunny"))
            .count(),
        1,
        "answered once"
    );
    assert!(
        !sent.iter().any(|m| m.visible_text.contains("couldn't")),
        "nobody was told of a failure: {sent:?}"
    );
    harness.stop().await;
    serde_json::to_string(&llm.requests()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_waiting_for_a_transcription_retry_is_not_stale_after_a_restart() {
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    transcription.fail_next(&[TranscriptionFault::ServerError]);
    let provider = whisper_provider(&transcription);
    let w = world("", &format!("{SHORT_GRACE}{provider}")).await;
    w.fake
        .push_voice(w.bot("alpha"), USER, USER, voice_bytes(7), 4, None);
    wait_for_retry_note(&w, "HTTP 500").await;
    let _ = restart_later_and_expect_one_answer(w, &provider).await;
    assert_eq!(transcription.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_failing_for_now_is_retried_not_told_as_lost() {
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    let provider = whisper_provider(&transcription);
    let w = world("", &format!("{SHORT_GRACE}{provider}")).await;
    let bot = w.bot("alpha");
    w.fake.server_error_next(bot, "getFile", 1);
    w.fake.push_voice(bot, USER, USER, voice_bytes(8), 4, None);
    wait_for_retry_note(&w, "download failed").await;
    assert!(transcription.requests().is_empty());
    let _ = restart_later_and_expect_one_answer(w, &provider).await;
    assert_eq!(transcription.requests().len(), 1);
}

/// In a group, the conversation before an addressed voice note reaches the agent with it, also
/// when the note is heard only on a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_voice_note_heard_on_a_retry_still_brings_its_context() {
    const GROUP: i64 = -4_200;
    let transcription = FakeTranscription::start(HEARD).await.unwrap();
    transcription.fail_next(&[TranscriptionFault::ServerError]);
    let provider = whisper_provider(&transcription);
    let w = world("", &format!("{SHORT_GRACE}{provider}")).await;
    let bot = w.bot("alpha");
    w.fake
        .push_message(bot, GROUP, USER, "dinner at the harbour tonight?");
    w.fake
        .push_voice(bot, GROUP, USER, voice_bytes(9), 4, Some("@alpha_bot"));
    wait_for_retry_note_in(&w, GROUP, "HTTP 500").await;
    let seen = restart_later_and_expect_one_answer(w, &provider).await;
    assert!(
        seen.contains("dinner at the harbour tonight?") && seen.contains(HEARD),
        "the model got the note with its context: {seen}"
    );
}

/// Like [`wait_for_retry_note`], for the voice note in `chat`.
async fn wait_for_retry_note_in(w: &World, chat: i64, reason: &str) {
    wait_until(
        Duration::from_secs(30),
        "the group voice note waits for a retry",
        || async {
            let notes: Vec<Option<String>> = w
                .store()
                .read(move |conn| {
                    let mut statement =
                        conn.prepare("SELECT note FROM inbound_updates WHERE chat_id = ?1")?;
                    let rows = statement.query_map([chat], |r| r.get(0))?;
                    Ok(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .unwrap();
            notes
                .iter()
                .any(|note| {
                    note.as_deref()
                        .is_some_and(|note| note.contains("will retry") && note.contains(reason))
                })
                .then_some(())
                .ok_or_else(|| format!("notes {notes:?}"))
        },
    )
    .await;
}

//! Files and voice out (#18): `send_file` uploads a workspace file to the run's Telegram chat
//! (photos as photos, the rest as documents) through the outbox, and spoken replies go out with
//! `sendVoice` — shown against the fake Bot API, a fake speech server speaking real Ogg/Opus,
//! the scripted model and the real daemon (in-process, and the real binary for SIGKILL).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::testkit::fake_speech::FakeSpeech;
use clawvisor::testkit::fake_telegram::{AttachmentKind, BotId, SentMessage};
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const TOKEN: &str = "555:AAH-files-out-test-token-0123456789";
const USER: i64 = 42;
const WAIT: Duration = Duration::from_secs(30);

/// A PNG's signature and the start of its header: enough for the content check.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x02\0\0\0 a cat";
const PDF: &[u8] = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\ntrailer << >>\n%%EOF\n";

/// The model of these tests: each request names a file to send; after the tool it says so.
fn send_file_script() -> Script {
    Script::new()
        .rule(Rule::text("There you go.").when_after_tool_result("send_file"))
        .rule(
            Rule::tool_call(
                "send_file",
                r#"{"path": "pictures/cat.png", "caption": "The **cat**"}"#,
            )
            .when_last_user_contains("photo"),
        )
        .rule(
            Rule::tool_call("send_file", r#"{"path": "report.pdf"}"#)
                .when_last_user_contains("pdf"),
        )
        .rule(
            Rule::tool_call("send_file", r#"{"path": "huge.bin"}"#).when_last_user_contains("huge"),
        )
        .rule(
            Rule::tool_call("send_file", r#"{"path": "broken.png"}"#)
                .when_last_user_contains("broken"),
        )
        .rule(
            Rule::tool_call("send_file", r#"{"path": "/etc/hostname"}"#)
                .when_last_user_contains("hostname"),
        )
        .rule(Rule::echo())
}

fn workspace(dir: &Path) -> PathBuf {
    let workspace = dir.join("data/workspaces/ada");
    std::fs::create_dir_all(workspace.join("pictures")).unwrap();
    workspace
}

fn spool_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join("data/outbox-files"))
        .map(|entries| {
            entries
                .filter_map(|entry| Some(entry.ok()?.path()))
                .collect()
        })
        .unwrap_or_default()
}

fn uploads(sent: &[SentMessage], method: &str) -> Vec<SentMessage> {
    sent.iter()
        .filter(|m| m.method == method)
        .cloned()
        .collect()
}

/// Every request the model received, as one text (tool results included).
fn model_saw(llm: &ScriptedLlm) -> String {
    serde_json::to_string(&llm.requests()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_file_sends_a_photo_as_a_photo_and_a_pdf_as_a_document() {
    let world = World::builder(send_file_script())
        .agent_with_bot("ada", "tools = [\"send_file\"]", TOKEN, &[USER], &[USER])
        .start()
        .await;
    let bot = world.bot("ada");
    let dir = world.harness.dir.path().to_path_buf();
    let workspace = workspace(&dir);
    std::fs::write(workspace.join("pictures/cat.png"), PNG).unwrap();
    std::fs::write(workspace.join("report.pdf"), PDF).unwrap();

    world
        .fake
        .push_message(bot, USER, USER, "send me the photo please");
    let photo = world
        .fake
        .wait_for_sent(bot, |m| m.method == "sendPhoto", WAIT)
        .await
        .expect("the photo was sent with sendPhoto");
    let attachment = photo
        .attachment
        .clone()
        .expect("sendPhoto carries the file");
    assert_eq!(attachment.kind, AttachmentKind::Photo);
    assert_eq!(
        attachment.bytes, PNG,
        "the photo's bytes are the workspace file's"
    );
    assert_eq!(photo.chat_id, USER);
    assert_eq!(
        photo.visible_text, "The cat",
        "the caption is formatted like a message"
    );
    assert_eq!(photo.parse_mode.as_deref(), Some("HTML"));

    world.fake.push_message(bot, USER, USER, "and the pdf");
    let document = world
        .fake
        .wait_for_sent(bot, |m| m.method == "sendDocument", WAIT)
        .await
        .expect("the PDF was sent with sendDocument");
    let attachment = document
        .attachment
        .clone()
        .expect("sendDocument carries the file");
    assert_eq!(attachment.kind, AttachmentKind::Document);
    assert_eq!(attachment.bytes, PDF);
    assert_eq!(attachment.file_name.as_deref(), Some("report.pdf"));

    world.harness.wait_settled(WAIT).await;
    let sent = world.fake.sent(bot);
    assert_eq!(uploads(&sent, "sendPhoto").len(), 1, "one photo");
    assert_eq!(uploads(&sent, "sendDocument").len(), 1, "one document");
    assert_eq!(
        sent.iter()
            .filter(|m| m.visible_text == "There you go.")
            .count(),
        2,
        "each run still answered"
    );
    let (files, delivered): (i64, i64) = world
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*), COUNT(delivered_ms) FROM outbox WHERE file_path IS NOT NULL",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(
        (files, delivered),
        (2, 2),
        "both files went through the outbox"
    );
    assert!(
        spool_files(&dir).is_empty(),
        "the spool copies are removed once delivered: {:?}",
        spool_files(&dir)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_big_outside_the_workspace_or_outside_telegram_sends_nothing_and_says_why() {
    let world = World::builder(send_file_script())
        .agent_with_bot("ada", "tools = [\"send_file\"]", TOKEN, &[USER], &[USER])
        .start()
        .await;
    let bot = world.bot("ada");
    let dir = world.harness.dir.path().to_path_buf();
    let workspace = workspace(&dir);
    // 60 MB without using the disk: a sparse file.
    std::fs::File::create(workspace.join("huge.bin"))
        .unwrap()
        .set_len(60 * 1024 * 1024)
        .unwrap();
    std::fs::write(workspace.join("report.pdf"), PDF).unwrap();

    world
        .fake
        .push_message(bot, USER, USER, "send the huge file");
    wait_until(WAIT, "the model to see the size error", || async {
        model_saw(&world.llm).contains("60.0 MB")
    })
    .await;
    let seen = model_saw(&world.llm);
    assert!(
        seen.contains("50.0 MB"),
        "the error names the limit: {seen}"
    );

    world
        .fake
        .push_message(bot, USER, USER, "send /etc/hostname");
    wait_until(WAIT, "the model to see the confinement refusal", || async {
        model_saw(&world.llm).contains("outside the workspace")
    })
    .await;

    // Studio cannot carry a file: the call says so and where the file is.
    let reply = world
        .harness
        .ask("ada", &ChatKey::studio("files"), "the pdf, please")
        .await
        .unwrap();
    assert_eq!(reply.text, "There you go.");
    let seen = model_saw(&world.llm);
    assert!(
        seen.contains("cannot carry files") && seen.contains("report.pdf"),
        "{seen}"
    );

    world.harness.wait_settled(WAIT).await;
    for method in ["sendDocument", "sendPhoto", "sendVoice"] {
        assert_eq!(
            world.fake.call_count(bot, method),
            0,
            "{method} was never called"
        );
    }
    let queued: i64 = world
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM outbox WHERE file_path IS NOT NULL",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(queued, 0, "nothing was queued");
    assert!(spool_files(&dir).is_empty(), "nothing was copied");
}

/// The daemon is killed while Telegram holds the `sendDocument` (done but not answered, or not
/// even done): after the restart the document is there once or twice, never zero times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_the_outbox_row_and_telegrams_answer_sends_the_file_at_least_once() {
    for carried_out in [true, false] {
        let dir = ScratchDir::new("clawvisor-files-kill").unwrap();
        let staged = World::builder(send_file_script())
            .agent_with_bot("ada", "tools = [\"send_file\"]", TOKEN, &[USER], &[USER])
            .config_extra(
                "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"5m\"",
            )
            .stage(dir.path())
            .await;
        let bot: BotId = staged.bot("ada");
        let workspace = workspace(dir.path());
        std::fs::write(workspace.join("report.pdf"), PDF).unwrap();
        if carried_out {
            staged.fake.hold_answers(bot, "sendDocument", 1);
        } else {
            staged.fake.hold_requests(bot, "sendDocument", 1);
        }
        let daemon =
            DaemonProcess::start(BINARY, dir.path(), &staged.env).expect("the daemon starts");
        staged.fake.push_message(bot, USER, USER, "the pdf please");
        assert!(
            staged
                .fake
                .wait_for_calls(bot, "sendDocument", 1, WAIT)
                .await,
            "the daemon asked Telegram to send the document"
        );
        daemon.kill();
        // The workspace file goes: what is delivered is the copy taken when it was sent.
        std::fs::remove_file(workspace.join("report.pdf")).unwrap();
        let daemon =
            DaemonProcess::start(BINARY, dir.path(), &staged.env).expect("the daemon restarts");
        let db = dir.path().join("data/clawvisor.db");
        wait_until(WAIT, "the file row to be delivered after the restart", || async {
            let conn = rusqlite::Connection::open(&db).ok()?;
            conn.query_row(
                "SELECT COUNT(*) FROM outbox WHERE file_path IS NOT NULL AND delivered_ms IS NOT NULL AND last_error IS NULL",
                [],
                |row| row.get::<_, i64>(0),
            )
            .ok()
            .filter(|delivered| *delivered == 1)
        })
        .await;
        daemon.terminate(Duration::from_secs(30)).unwrap();
        let documents: Vec<SentMessage> = uploads(&staged.fake.sent(bot), "sendDocument")
            .into_iter()
            .filter(|m| m.attachment.as_ref().is_some_and(|a| a.bytes == PDF))
            .collect();
        println!(
            "held {} Telegram carried it out: delivered {} time(s)",
            if carried_out { "after" } else { "before" },
            documents.len()
        );
        assert!(
            (1..=2).contains(&documents.len()),
            "held {}: the document arrived {} times",
            if carried_out {
                "after Telegram did it"
            } else {
                "before Telegram did it"
            },
            documents.len()
        );
        if !carried_out {
            assert_eq!(
                documents.len(),
                1,
                "a request Telegram never carried out is sent once"
            );
        }
        assert!(
            spool_files(dir.path()).is_empty(),
            "the spool copy is gone once delivered"
        );
    }
}

/// A file row whose spool copy is gone is given up at once, recorded, and the chat told in one
/// sentence; a picture Telegram cannot decode goes again as a document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_cannot_be_sent_is_not_retried_forever_and_the_user_is_told() {
    let dir = ScratchDir::new("clawvisor-files-refused").unwrap();
    let staged = World::builder(send_file_script())
        .agent_with_bot("ada", "tools = [\"send_file\"]", TOKEN, &[USER], &[USER])
        .config_extra(
            "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"5m\"",
        )
        .stage(dir.path())
        .await;
    let bot = staged.bot("ada");
    let workspace = workspace(dir.path());
    std::fs::write(workspace.join("report.pdf"), PDF).unwrap();
    // A PNG signature without its header chunk: it passes for a picture, Telegram cannot decode it.
    let broken = b"\x89PNG\r\n\x1a\nthis is no picture".to_vec();
    std::fs::write(workspace.join("broken.png"), &broken).unwrap();
    staged.fake.hold_requests(bot, "sendDocument", 1);
    let daemon = DaemonProcess::start(BINARY, dir.path(), &staged.env).expect("the daemon starts");
    staged.fake.push_message(bot, USER, USER, "the pdf please");
    assert!(
        staged
            .fake
            .wait_for_calls(bot, "sendDocument", 1, WAIT)
            .await
    );
    daemon.kill();
    for copy in spool_files(dir.path()) {
        std::fs::remove_file(copy).unwrap();
    }
    let daemon =
        DaemonProcess::start(BINARY, dir.path(), &staged.env).expect("the daemon restarts");
    let told = staged
        .fake
        .wait_for_sent(
            bot,
            |m| {
                m.visible_text
                    .starts_with("I could not send you report.pdf")
            },
            WAIT,
        )
        .await
        .expect("the chat is told the file could not be sent");
    assert!(told.visible_text.contains("gone"), "{}", told.visible_text);

    staged
        .fake
        .push_message(bot, USER, USER, "the broken picture");
    let document = staged
        .fake
        .wait_for_sent(
            bot,
            |m| {
                m.method == "sendDocument"
                    && m.attachment.as_ref().is_some_and(|a| a.bytes == broken)
            },
            WAIT,
        )
        .await
        .unwrap_or_else(|| {
            panic!(
                "the refused photo went again as a document; calls {:?}, sent {:#?}",
                staged.fake.calls(bot),
                staged.fake.sent(bot)
            )
        });
    assert_eq!(
        document.attachment.and_then(|a| a.file_name).as_deref(),
        Some("broken.png")
    );
    staged
        .fake
        .wait_for_sent(
            bot,
            |m| m.visible_text == "There you go." && m.message_id > document.message_id,
            WAIT,
        )
        .await
        .expect("the run answered after the file");
    daemon.terminate(Duration::from_secs(30)).unwrap();
    assert_eq!(
        staged.fake.call_count(bot, "sendPhoto"),
        1,
        "the photo was tried once"
    );
    assert_eq!(
        staged.fake.call_count(bot, "sendDocument"),
        2,
        "held PDF, then the picture; no retries"
    );
    let conn = rusqlite::Connection::open(dir.path().join("data/clawvisor.db")).unwrap();
    let outcomes: Vec<(String, Option<String>, bool)> = conn
        .prepare("SELECT file_name, last_error, delivered_ms IS NOT NULL FROM outbox WHERE file_path IS NOT NULL ORDER BY id")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(outcomes.len(), 2);
    assert_eq!(outcomes[0].0, "report.pdf");
    assert!(
        outcomes[0].1.as_deref().is_some_and(|e| e.contains("gone")),
        "{outcomes:?}"
    );
    assert!(outcomes[0].2, "given up: not pending any more");
    assert_eq!(outcomes[1], ("broken.png".to_string(), None, true));
    assert!(spool_files(dir.path()).is_empty());
}

/// A voice note gets a voice answer whose sound came from the speech server; a text message
/// gets text; when the speech server fails the answer is text, not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_voice_replies_when_spoken_to_a_voice_note_is_answered_with_a_voice_message() {
    let speech = FakeSpeech::start().await.unwrap();
    let script = Script::new()
        .rule(
            Rule::text("Sunny, twenty degrees.")
                .when_last_user_contains("voice-")
                .when_system_contains("read aloud")
                .times(2),
        )
        .rule(
            Rule::text("The forecast is at https://example.com/weather.")
                .when_last_user_contains("voice-"),
        )
        .rule(Rule::text("Written answer."));
    let world = speaking_world(script, &speech).await;
    let bot = world.bot("ada");
    let note = FakeSpeech::audio_for("what is the weather");

    world
        .fake
        .push_voice(bot, USER, USER, note.clone(), 3, None);
    let voice = world
        .fake
        .wait_for_sent(bot, |m| m.method == "sendVoice", WAIT)
        .await
        .expect("the answer to a voice note is a voice message");
    let spoken = FakeSpeech::audio_for("Sunny, twenty degrees.");
    assert_eq!(
        voice.attachment.as_ref().map(|a| a.bytes.clone()),
        Some(spoken),
        "the voice message is the speech server's audio of the answer"
    );
    assert!(
        world
            .fake
            .chat_actions(bot)
            .iter()
            .any(|action| action.chat_id == USER && action.action == "record_voice"),
        "the chat sees \"recording a voice message\" while the speech is made"
    );
    let requests = speech.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].input, "Sunny, twenty degrees.");
    assert_eq!(requests[0].model, "tts-1");
    assert_eq!(requests[0].voice, "nova");
    assert_eq!(requests[0].response_format, "opus");
    assert_eq!(
        requests[0].authorization.as_deref(),
        Some("Bearer sk-speech-test-0123456789")
    );
    world.harness.wait_settled(WAIT).await;
    assert!(
        !world
            .fake
            .sent(bot)
            .iter()
            .any(|m| m.method == "sendMessage" && m.visible_text.contains("Sunny")),
        "a short spoken answer is not also written"
    );

    world.fake.push_message(bot, USER, USER, "and in writing?");
    world
        .fake
        .wait_for_sent(bot, |m| m.visible_text == "Written answer.", WAIT)
        .await
        .expect("a text message gets a text answer");
    world.harness.wait_settled(WAIT).await;
    assert_eq!(
        world.fake.call_count(bot, "sendVoice"),
        1,
        "no voice for a text message"
    );
    assert_eq!(speech.requests().len(), 1);

    speech.fail_next(503, 1);
    world.fake.push_voice(bot, USER, USER, note, 3, None);
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.method == "sendMessage" && m.visible_text == "Sunny, twenty degrees.",
            WAIT,
        )
        .await
        .expect("when speech fails, the answer is sent as text");
    world.harness.wait_settled(WAIT).await;
    assert_eq!(
        world.fake.call_count(bot, "sendVoice"),
        1,
        "no second voice message"
    );
    assert_eq!(
        speech.requests().len(),
        2,
        "speech was tried once for the second voice note"
    );

    // A link cannot be heard well: the voice message comes with the text.
    let linked = "The forecast is at https://example.com/weather.";
    world
        .fake
        .push_voice(bot, USER, USER, FakeSpeech::audio_for("forecast?"), 3, None);
    let written = world
        .fake
        .wait_for_sent(
            bot,
            |m| m.method == "sendMessage" && m.visible_text == linked,
            WAIT,
        )
        .await
        .expect("an answer with a link is also written");
    let voices = uploads(&world.fake.sent(bot), "sendVoice");
    assert_eq!(voices.len(), 2, "and spoken");
    assert!(
        voices[1].message_id < written.message_id,
        "the voice comes first"
    );
    assert_eq!(
        voices[1].attachment.as_ref().map(|a| a.bytes.clone()),
        Some(FakeSpeech::audio_for(linked))
    );
}

#[test]
fn voice_replies_without_a_speech_provider_is_a_config_error_naming_the_key() {
    use clawvisor::config;
    use clawvisor::testkit::harness::{agent_toml, config_toml};
    let plain = config::parse_file(&config_toml("http://127.0.0.1:9/v1", ""), "test.toml").unwrap();
    let error = config::parse_agent(
        &agent_toml("ada", "voice_replies = \"always\""),
        "ada.toml",
        &plain,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("voice_replies") && error.contains("speech_model"),
        "{error}"
    );
    let bad_value = config::parse_agent(
        &agent_toml("ada", "voice_replies = \"sometimes\""),
        "ada.toml",
        &plain,
    )
    .unwrap_err()
    .to_string();
    assert!(bad_value.contains("voice_replies"), "{bad_value}");

    let with_speech = config::parse_file(
        &config_toml(
            "http://127.0.0.1:9/v1",
            "[providers.speech]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nspeech_model = \"tts-1\"\n",
        ),
        "test.toml",
    )
    .unwrap();
    let spec = config::parse_agent(
        &agent_toml("ada", "voice_replies = \"when_spoken_to\""),
        "ada.toml",
        &with_speech,
    )
    .unwrap();
    assert_eq!(spec.voice_replies, config::VoiceReplies::WhenSpokenTo);
    // The provider's key is checked with the whole config.
    let dir = ScratchDir::new("clawvisor-speech-config").unwrap();
    std::fs::create_dir_all(dir.path().join("actors")).unwrap();
    std::fs::write(
        dir.path().join("clawvisor.toml"),
        config_toml(
            "http://127.0.0.1:9/v1",
            "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\nspeech_model = \"tts-1\"\n",
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("actors/ada.toml"), agent_toml("ada", "")).unwrap();
    let overrides = config::Overrides {
        config: Some(dir.path().join("clawvisor.toml")),
        ..config::Overrides::default()
    };
    let anthropic_speech = config::load_in(&overrides, Default::default(), dir.path())
        .expect_err("speech on an Anthropic provider is refused")
        .to_string();
    assert!(
        anthropic_speech.contains("[providers.claude].speech_model"),
        "{anthropic_speech}"
    );
    assert_eq!(
        with_speech.providers["speech"].speech_voice, "alloy",
        "the default voice"
    );
}

/// A spoken reply with a link goes out as a voice message and a text. When Telegram accepted the
/// voice but failed the text, the retry (here: at the next boot) sends only the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_of_a_spoken_replys_text_does_not_speak_it_again() {
    use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml, telegram_toml};
    use clawvisor::testkit::world::token_variable;

    let speech = FakeSpeech::start().await.unwrap();
    let linked = "The forecast is at https://example.com/weather.";
    let script = Script::new().rule(Rule::text(linked).when_last_user_contains("voice-"));
    let world = speaking_world(script, &speech).await;
    let bot = world.bot("ada");
    // The voice goes through; the text after it meets 502s (the sender's own two retries too).
    world.fake.server_error_next(bot, "sendMessage", 2);
    world
        .fake
        .push_voice(bot, USER, USER, FakeSpeech::audio_for("forecast?"), 3, None);
    wait_until(WAIT, "the reply's first attempt to be recorded", || async {
        world
            .store()
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT COUNT(*) FROM outbox WHERE attempts >= 1 AND delivered_ms IS NULL",
                    [],
                    |row| row.get::<_, i64>(0),
                )?)
            })
            .await
            .is_ok_and(|count| count == 1)
            .then_some(())
            .ok_or_else(|| {
                format!(
                    "{:?}",
                    world
                        .fake
                        .sent(bot)
                        .iter()
                        .map(|m| (m.method, m.visible_text.clone()))
                        .collect::<Vec<_>>()
                )
            })
    })
    .await;
    assert_eq!(world.fake.call_count(bot, "sendVoice"), 1);
    assert!(
        !world
            .fake
            .sent(bot)
            .iter()
            .any(|m| m.visible_text == linked),
        "the text did not go through yet"
    );

    let World {
        fake, llm, harness, ..
    } = world;
    let dir = harness.stop().await;
    let variable = token_variable("ada");
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        &format!(
            "voice_replies = \"when_spoken_to\"\n{}",
            telegram_toml(&variable, &fake.base_url(), &[USER], &[USER])
        ),
    )];
    options.config_extra = speech_provider(&speech);
    options.env.insert(variable, TOKEN.to_string());
    options
        .env
        .insert("SPEECH_KEY".into(), "sk-speech-test-0123456789".into());
    let harness = Harness::start_in(dir, options).await.unwrap();
    let found = fake
        .wait_for_sent(
            bot,
            |m| m.method == "sendMessage" && m.visible_text == linked,
            WAIT,
        )
        .await;
    let rows: Vec<String> = harness
        .store()
        .read(|conn| {
            let mut statement =
                conn.prepare("SELECT id, attempts, delivered_ms, speak, last_error FROM outbox")?;
            let rows = statement.query_map([], |row| {
                Ok(format!(
                    "{:?} {:?} {:?} {:?} {:?}",
                    row.get::<_, i64>(0)?,
                    row.get::<_, i64>(1)?,
                    row.get::<_, Option<i64>>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, Option<String>>(4)?
                ))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap();
    found.unwrap_or_else(|| {
        panic!(
            "the text is sent after the restart; rows {rows:?} calls {:?} sent: {:?}",
            fake.calls(bot),
            fake.sent(bot)
                .iter()
                .map(|m| (m.method, m.visible_text.clone()))
                .collect::<Vec<_>>()
        )
    });
    harness.wait_settled(WAIT).await;
    assert_eq!(
        fake.call_count(bot, "sendVoice"),
        1,
        "the voice message was not sent again"
    );
    assert_eq!(speech.requests().len(), 1, "nor spoken again");
    harness.stop().await;
}

/// A 5xx answer to an upload is Telegram's front end failing, not a refusal of the file: the
/// upload is tried again and the file arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_on_an_upload_is_retried_and_the_file_arrives_once() {
    let world = World::builder(send_file_script())
        .agent_with_bot("ada", "tools = [\"send_file\"]", TOKEN, &[USER], &[USER])
        .start()
        .await;
    let bot = world.bot("ada");
    let workspace = workspace(world.harness.dir.path());
    std::fs::write(workspace.join("report.pdf"), PDF).unwrap();
    world.fake.server_error_next(bot, "sendDocument", 1);
    world.fake.push_message(bot, USER, USER, "the pdf please");
    world
        .fake
        .wait_for_sent(bot, |m| m.method == "sendDocument", WAIT)
        .await
        .expect("the PDF arrives after the server error");
    world.harness.wait_settled(WAIT).await;
    let sent = world.fake.sent(bot);
    assert_eq!(uploads(&sent, "sendDocument").len(), 1, "once");
    assert_eq!(world.fake.call_count(bot, "sendDocument"), 2);
    assert!(
        !sent.iter().any(|m| m.visible_text.contains("refused")),
        "no word of a refusal: {sent:?}"
    );
}

/// Agent `ada` with a bot, answering voice notes by voice through `speech` (provider `speech`,
/// voice `nova`).
async fn speaking_world(script: Script, speech: &FakeSpeech) -> World {
    World::builder(script)
        .agent_with_bot(
            "ada",
            "voice_replies = \"when_spoken_to\"",
            TOKEN,
            &[USER],
            &[USER],
        )
        .config_extra(&speech_provider(speech))
        .env("SPEECH_KEY", "sk-speech-test-0123456789")
        .start()
        .await
}

/// The `[providers.speech]` table for `speech` (its key in `SPEECH_KEY`).
fn speech_provider(speech: &FakeSpeech) -> String {
    format!(
        "[providers.speech]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"SPEECH_KEY\"\nspeech_model = \"tts-1\"\nspeech_voice = \"nova\"\n",
        speech.base_url()
    )
}

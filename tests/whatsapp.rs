//! WhatsApp through the channel seam, end to end: the fake Graph API delivers signed webhooks to
//! the real daemon (in-process, real SQLite) and records what the daemon sends back. The People
//! page's WhatsApp block is clicked through in real Chromium; its screenshots
//! (`whatsapp-people-*.png`, `phone-whatsapp-people-*.png` at 390×844) are in
//! `<target>/tmp/studio-screenshots/`.

mod browser;

use std::time::Duration;

use clawvisor::testkit::fake_transcription::FakeTranscription;
use clawvisor::testkit::fake_whatsapp::FakeWhatsApp;
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait::wait_until;

const PHONE_ID: &str = "1098765432";
const TOKEN: &str = "EAAG-fake-whatsapp-access-token-0001";
const APP_SECRET: &str = "fake-app-secret-for-signatures";
const VERIFY: &str = "verify-me-please";
const OWNER: &str = "4915100000001";
const STRANGER: &str = "4917200000009";
const WAIT: Duration = Duration::from_secs(20);

struct Setup {
    fake: FakeWhatsApp,
    llm: ScriptedLlm,
    harness: Harness,
    hook: String,
    base: String,
    http: reqwest::Client,
}

async fn start(script: Script, extra: &str, whatsapp_extra: &str) -> Setup {
    start_with(script, extra, whatsapp_extra, "", &[]).await
}

/// [`start`] with TOML appended to the daemon's config and extra environment.
async fn start_with(
    script: Script,
    extra: &str,
    whatsapp_extra: &str,
    config_extra: &str,
    env: &[(&str, &str)],
) -> Setup {
    let fake = FakeWhatsApp::start(PHONE_ID, TOKEN, APP_SECRET).await;
    let llm = ScriptedLlm::start(script)
        .await
        .expect("the scripted model starts");
    let table = format!(
        "[whatsapp]\nphone_number_id = \"{PHONE_ID}\"\naccess_token_env = \"WA_TOKEN\"\napp_secret_env = \"WA_APP_SECRET\"\nverify_token_env = \"WA_VERIFY\"\napi_url = \"{}\"\n{whatsapp_extra}\n",
        fake.api_url()
    );
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", &format!("{extra}\n{table}"))];
    for (key, value) in [
        ("WA_TOKEN", TOKEN),
        ("WA_APP_SECRET", APP_SECRET),
        ("WA_VERIFY", VERIFY),
    ]
    .iter()
    .chain(env)
    {
        options.env.insert(key.to_string(), value.to_string());
    }
    options.config_extra = config_extra.to_string();
    let harness = Harness::start(options).await.expect("the daemon starts");
    let (base, http) = harness.studio_http().await;
    let hook = format!("{base}/hooks/whatsapp");
    Setup {
        fake,
        llm,
        harness,
        hook,
        base,
        http,
    }
}

async fn count(harness: &Harness, sql: &'static str) -> i64 {
    harness
        .store()
        .read(move |conn| Ok(conn.query_row(sql, [], |row| row.get::<_, i64>(0))?))
        .await
        .expect("a count reads")
}

const ALLOWED: &str = "allow_users = [\"+49 151 00000001\"]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_answers_only_the_right_verify_token_and_stores_only_signed_bodies() {
    let setup = start(Script::new(), "", ALLOWED).await;
    let check = |token: &str| {
        format!(
            "{}?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444",
            setup.hook
        )
    };
    let plain = reqwest::Client::new();
    let right = plain.get(check(VERIFY)).send().await.expect("GET answers");
    assert_eq!(right.status(), 200);
    assert_eq!(right.text().await.expect("a body"), "1158201444");
    let wrong = plain.get(check("guess")).send().await.expect("GET answers");
    assert_eq!(wrong.status(), 403);

    let body = setup.fake.delivery(
        OWNER,
        "Olivia",
        FakeWhatsApp::text_message(OWNER, "wamid.sig1", "hello"),
    );
    assert_eq!(
        setup.fake.post_signed(&setup.hook, &body, Some("")).await,
        401,
        "no signature"
    );
    assert_eq!(
        setup
            .fake
            .post_signed(&setup.hook, &body, Some("not-the-secret"))
            .await,
        401
    );
    let mut tampered = body.clone();
    let at = tampered.len() - 10;
    tampered[at] = b' ';
    let signed_then_changed = {
        let header = clawvisor::whatsapp::webhook::sign(APP_SECRET.as_bytes(), &body);
        plain
            .post(&setup.hook)
            .header("x-hub-signature-256", header)
            .body(tampered)
            .send()
            .await
            .expect("POST answers")
            .status()
    };
    assert_eq!(
        signed_then_changed, 401,
        "the signature covers the raw body"
    );
    let malformed = br#"{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"1098765432"},"messages":[{"id":"wamid.ok","from":"4915100000001","type":"text","text":{"body":"a"}},{"from":"4915100000001","type":"text"}]}}]}]}"#;
    assert_eq!(
        setup.fake.post_signed(&setup.hook, malformed, None).await,
        400
    );
    assert_eq!(
        count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound").await,
        0,
        "nothing of a refused body is stored"
    );
    // Studio's API stays behind its own guard; the hook is the only way in without a session.
    let api = plain
        .get(format!("{}/api/v1/agents", setup.base))
        .send()
        .await
        .expect("answers");
    assert_ne!(api.status(), 200);
    let _ = &setup.http;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_answered_once_read_and_a_stranger_never_reaches_the_model() {
    let script = Script::new().rule(Rule::echo());
    let setup = start(script, "", ALLOWED).await;
    let message = FakeWhatsApp::text_message(OWNER, "wamid.in1", "hello there");
    assert_eq!(
        setup
            .fake
            .deliver(&setup.hook, OWNER, message.clone())
            .await,
        200
    );
    wait_until(WAIT, "the reply reaches WhatsApp", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text.contains("hello there"))
    })
    .await;
    // Meta delivers the same message again: answered 200, stored once, answered once.
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, message).await, 200);
    wait_until(WAIT, "the daemon settles", || async {
        count(
            &setup.harness,
            "SELECT COUNT(*) FROM channel_inbound WHERE status IN ('pending','dispatched')",
        )
        .await
            == 0
            && count(
                &setup.harness,
                "SELECT COUNT(*) FROM outbox WHERE delivered_ms IS NULL",
            )
            .await
                == 0
    })
    .await;
    assert_eq!(
        count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound").await,
        1
    );
    assert_eq!(
        setup.fake.texts_to(OWNER).len(),
        1,
        "{:?}",
        setup.fake.sent()
    );
    wait_until(WAIT, "the message is marked read", || async {
        setup.fake.reads().contains(&"wamid.in1".to_string())
    })
    .await;

    let requests_before = setup.llm.request_count();
    let stranger = FakeWhatsApp::text_message(STRANGER, "wamid.in2", "let me in");
    assert_eq!(
        setup.fake.deliver(&setup.hook, STRANGER, stranger).await,
        200
    );
    wait_until(WAIT, "the stranger's message is ignored", || async {
        count(
            &setup.harness,
            "SELECT COUNT(*) FROM channel_inbound WHERE message_id = 'wamid.in2' AND status = 'ignored'",
        )
        .await
            == 1
    })
    .await;
    assert_eq!(
        setup.llm.request_count(),
        requests_before,
        "a stranger never reaches the model"
    );
    let told = setup.fake.texts_to(STRANGER);
    assert!(
        told.len() == 1 && told[0].contains("approve code"),
        "a stranger gets one pairing reply: {told:?}"
    );
}

/// The pairing code in a stranger's reply: `… approve code ABCD-EFGH (…`.
fn pairing_code(text: &str) -> String {
    let after = text
        .split("approve code ")
        .nth(1)
        .unwrap_or_else(|| panic!("no pairing code in {text:?}"));
    after.chars().take(9).collect()
}

/// The first text to `to` that contains `part`, waiting for it.
async fn wait_text(fake: &FakeWhatsApp, to: &str, part: &str) -> String {
    wait_until(WAIT, &format!("a text to {to} with {part:?}"), || async {
        fake.texts_to(to)
            .into_iter()
            .find(|text| text.contains(part))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_get_one_pairing_code_and_only_an_approver_lets_them_in_or_turns_them_down() {
    const TALKER: &str = "4915100000002";
    const EVE: &str = "4917200000008";
    let setup = start(
        Script::new().rule(Rule::echo()),
        "",
        "allow_users = [\"+49 151 00000001\", \"+49 151 00000002\"]\napprovers = [\"+49 151 00000001\"]",
    )
    .await;
    let deliver = |from: &'static str, id: &'static str, text: String| {
        let (fake, hook) = (&setup.fake, &setup.hook);
        async move {
            let message = FakeWhatsApp::text_message(from, id, &text);
            assert_eq!(fake.deliver(hook, from, message).await, 200);
        }
    };
    deliver(STRANGER, "wamid.p1", "said before pairing".into()).await;
    let code = pairing_code(&wait_text(&setup.fake, STRANGER, "approve code").await);
    // The approver has not written in 24 hours: WhatsApp would refuse the note, so it is held
    // (never dropped) and goes out when they write.
    wait_until(WAIT, "the note to the approver is held", || async {
        count(
            &setup.harness,
            "SELECT COUNT(*) FROM outbox WHERE chat = 'wa:4915100000001' AND held_ms IS NOT NULL",
        )
        .await
            == 1
    })
    .await;
    deliver(OWNER, "wamid.p0", "good morning".into()).await;
    let notice = wait_text(&setup.fake, OWNER, "Someone new").await;
    assert!(
        notice.contains(&format!("reply \"pair {code}\"")),
        "{notice}"
    );
    assert!(
        setup.fake.texts_to(TALKER).is_empty(),
        "only approvers are told"
    );
    // No reply storm: the second message gets nothing.
    deliver(STRANGER, "wamid.p2", "hello??".into()).await;
    wait_until(WAIT, "both messages are ignored", || async {
        count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound WHERE sender = '4917200000009' AND status = 'ignored'").await == 2
    })
    .await;
    // Someone who may talk but not approve is refused.
    deliver(TALKER, "wamid.p3", format!("/pair {code}")).await;
    wait_text(&setup.fake, TALKER, "Only my approvers can pair").await;
    assert_eq!(setup.fake.texts_to(STRANGER).len(), 1, "one reply only");
    let asked = serde_json::to_string(&setup.llm.requests()).expect("JSON");
    assert!(!asked.contains("said before pairing") && !asked.contains("hello??"));

    deliver(OWNER, "wamid.p4", format!("pair {code}")).await;
    wait_text(&setup.fake, OWNER, "Paired").await;
    wait_text(&setup.fake, STRANGER, "You're approved").await;
    deliver(STRANGER, "wamid.p5", "may I talk now".into()).await;
    wait_text(&setup.fake, STRANGER, "echo: may I talk now").await;
    let asked = serde_json::to_string(&setup.llm.requests()).expect("JSON");
    assert!(!asked.contains("said before pairing") && !asked.contains("hello??"));

    // Eve is turned down: never answered while her request stands.
    deliver(EVE, "wamid.e1", "me too".into()).await;
    let eves = pairing_code(&wait_text(&setup.fake, EVE, "approve code").await);
    deliver(OWNER, "wamid.e2", format!("deny {eves}")).await;
    wait_text(&setup.fake, OWNER, "Denied").await;
    deliver(EVE, "wamid.e3", "please?".into()).await;
    deliver(OWNER, "wamid.e4", "are you there".into()).await;
    wait_text(&setup.fake, OWNER, "echo: are you there").await;
    assert_eq!(
        count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound WHERE message_id = 'wamid.e3' AND status = 'ignored'").await,
        1
    );
    assert_eq!(setup.fake.texts_to(EVE).len(), 1, "only her code");
    assert_eq!(
        count(&setup.harness, "SELECT COUNT(*) FROM audit_log WHERE action IN ('people.paired', 'people.pairing_denied') AND actor = 'wa:4915100000001'").await,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_is_split_and_rate_errors_are_paced_not_lost() {
    let long = format!("{} end", "word ".repeat(1200));
    let script = Script::new().rule(Rule::text(long.clone()));
    let setup = start(script, "", ALLOWED).await;
    setup.fake.fail_next(400, 131056);
    setup.fake.fail_next(429, 130429);
    let message = FakeWhatsApp::text_message(OWNER, "wamid.long", "tell me a lot");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, message).await, 200);
    wait_until(Duration::from_secs(40), "both parts are sent", || async {
        setup.fake.texts_to(OWNER).len() == 2
    })
    .await;
    let texts = setup.fake.texts_to(OWNER);
    assert!(texts.iter().all(|text| text.chars().count() <= 4096));
    assert!(texts[1].ends_with("end"));
    assert_eq!(setup.fake.refused(), vec![131056, 130429]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_button_decides_exactly_its_request_and_only_for_an_approver() {
    let script = Script::new()
        .rule(Rule::text("The file tool answered.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "notes.txt", "content": "hello", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("write"),
        );
    let setup = start(
        script,
        "tools = [\"write_file\"]\nautonomy = \"require_approval\"\napproval_ttl = \"5m\"",
        ALLOWED,
    )
    .await;
    let message = FakeWhatsApp::text_message(OWNER, "wamid.w1", "please write the notes");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, message).await, 200);
    let prompt = wait_until(WAIT, "the approval prompt with buttons", || async {
        setup
            .fake
            .sent()
            .into_iter()
            .find(|body| body["type"] == "interactive")
    })
    .await;
    let buttons = prompt["interactive"]["action"]["buttons"]
        .as_array()
        .expect("buttons")
        .clone();
    assert!(buttons.len() <= 3);
    assert!(buttons.iter().all(|b| {
        b["reply"]["title"]
            .as_str()
            .expect("a title")
            .chars()
            .count()
            <= 20
    }));
    let approve = buttons[0]["reply"]["id"]
        .as_str()
        .expect("an id")
        .to_string();
    assert!(approve.starts_with("ap:y:"));
    // A stranger pressing it decides nothing (they never get past the screen).
    let forged = FakeWhatsApp::button_message(STRANGER, "wamid.b0", &approve, "Approve once");
    assert_eq!(setup.fake.deliver(&setup.hook, STRANGER, forged).await, 200);
    let pressed = FakeWhatsApp::button_message(OWNER, "wamid.b1", &approve, "Approve once");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, pressed).await, 200);
    wait_until(
        WAIT,
        "the approved write ran and the answer came",
        || async {
            setup
                .fake
                .texts_to(OWNER)
                .iter()
                .any(|text| text.contains("The file tool answered."))
        },
    )
    .await;
    assert_eq!(
        count(&setup.harness, "SELECT COUNT(*) FROM approvals WHERE status IN ('approved','consumed') AND decided_by LIKE 'wa:4915100000001%'").await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_a_message_is_held_and_reported_then_sent_when_they_write() {
    let script = Script::new().rule(Rule::echo());
    let setup = start(script, "", ALLOWED).await;
    let message = FakeWhatsApp::text_message(OWNER, "wamid.h1", "first");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, message).await, 200);
    wait_until(WAIT, "the first reply", || async {
        setup.fake.texts_to(OWNER).len() == 1
    })
    .await;
    // Two days later, a scheduled message: the window is closed on both sides.
    let old = clawvisor::clock::now_ms() - 48 * 3_600_000;
    setup.fake.set_last_inbound(OWNER, old);
    setup
        .harness
        .store()
        .write(move |conn| {
            conn.execute("UPDATE channel_windows SET last_inbound_ms = ?1", [old])?;
            clawvisor::store::outbox::enqueue_reply(
                conn,
                "ada",
                "wa:4915100000001",
                None,
                "your reminder",
                &[],
                old,
            )?;
            Ok(())
        })
        .await
        .expect("a queued reminder");
    wait_until(
        Duration::from_secs(40),
        "the reminder is held with its reason",
        || async {
            count(
                &setup.harness,
                "SELECT COUNT(*) FROM outbox WHERE held_reason = 'outside_window'",
            )
            .await
                == 1
        },
    )
    .await;
    assert_eq!(
        setup.fake.texts_to(OWNER).len(),
        1,
        "nothing went outside the window"
    );
    let again = FakeWhatsApp::text_message(OWNER, "wamid.h2", "I am back");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, again).await, 200);
    wait_until(WAIT, "the held reminder goes once they wrote", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text == "your reminder")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_and_a_file_goes_out_as_an_uploaded_document() {
    const HEARD: &str = "send me the report please";
    let transcription = FakeTranscription::start(HEARD)
        .await
        .expect("the fake starts");
    let whisper = format!(
        "[providers.whisper]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"WHISPER_TEST_KEY\"\ntranscription_model = \"whisper-1\"\nmax_retries = 0\ntimeout = \"10s\"\n",
        transcription.base_url()
    );
    let script = Script::new()
        .rule(Rule::text("There you go.").when_after_tool_result("send_file"))
        .rule(
            Rule::tool_call(
                "send_file",
                r#"{"path": "report.txt", "caption": "The report"}"#,
            )
            .when_last_user_contains(HEARD),
        );
    let setup = start_with(
        script,
        "tools = [\"send_file\"]",
        ALLOWED,
        &whisper,
        &[("WHISPER_TEST_KEY", "sk-whisper-test-key-0042")],
    )
    .await;
    let workspace = setup.harness.dir.path().join("data/workspaces/ada");
    std::fs::create_dir_all(&workspace).expect("the workspace");
    std::fs::write(workspace.join("report.txt"), "quarterly numbers").expect("the report");
    let mut audio = b"OggS\0\x02".to_vec();
    audio.extend((0..2000u32).map(|i| (i as u8).wrapping_mul(7)));
    let media = setup.fake.add_media(audio.clone(), "audio/ogg");
    let voice = FakeWhatsApp::voice_message(OWNER, "wamid.v1", &media);
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, voice).await, 200);
    let document = wait_until(WAIT, "the report goes out as a document", || async {
        setup
            .fake
            .sent()
            .into_iter()
            .find(|body| body["type"] == "document")
    })
    .await;
    assert_eq!(
        transcription.requests().len(),
        1,
        "the note was transcribed once"
    );
    assert_eq!(document["document"]["filename"], "report.txt");
    assert_eq!(document["document"]["caption"], "The report");
    let uploaded = setup
        .fake
        .media(document["document"]["id"].as_str().expect("a media id"))
        .expect("the upload is stored");
    assert_eq!(uploaded.0, b"quarterly numbers");
    let saved = std::fs::read_dir(workspace.join("inbox"))
        .expect("an inbox")
        .filter_map(|entry| entry.ok())
        .map(|entry| std::fs::read(entry.path()).expect("readable"))
        .collect::<Vec<_>>();
    assert_eq!(saved, vec![audio], "the voice note is kept in the inbox");
    wait_until(WAIT, "the answer follows", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text == "There you go.")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_that_names_nobody_is_claimed_with_its_code_guesses_are_limited_and_only_then_answers()
 {
    let setup = start(Script::new().rule(Rule::echo()), "", "").await;
    let code = wait_until(WAIT, "the claim code", || async {
        setup
            .harness
            .store()
            .read(|conn| clawvisor::store::channels::claim(conn, "ada", "wa"))
            .await
            .ok()
            .flatten()
            .map(|claim| claim.code)
    })
    .await;
    let requests_before = setup.llm.request_count();
    let hello = FakeWhatsApp::text_message(OWNER, "wamid.c1", "hello?");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, hello).await, 200);
    wait_until(WAIT, "the stranger is told how to claim", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text.contains("claim code"))
    })
    .await;
    // Someone guessing: five wrong codes, then not even the right one is checked for a while.
    let wrong = format!(
        "{}{}",
        if code.starts_with('A') { 'B' } else { 'A' },
        &code[1..]
    );
    for attempt in 1..=5 {
        let guess = FakeWhatsApp::text_message(STRANGER, &format!("wamid.g{attempt}"), &wrong);
        assert_eq!(setup.fake.deliver(&setup.hook, STRANGER, guess).await, 200);
        wait_until(WAIT, "the guess is answered", || async {
            setup.fake.texts_to(STRANGER).len() == attempt
        })
        .await;
    }
    let told = setup.fake.texts_to(STRANGER);
    assert!(told[0].contains("try 4 more times"), "{told:?}");
    assert!(told[4].contains("After 5 wrong codes"), "{told:?}");
    let right_too_late = FakeWhatsApp::text_message(STRANGER, "wamid.g6", &code);
    assert_eq!(
        setup
            .fake
            .deliver(&setup.hook, STRANGER, right_too_late)
            .await,
        200
    );
    wait_until(WAIT, "the limited guess is stored and not checked", || async {
        count(
            &setup.harness,
            "SELECT COUNT(*) FROM channel_inbound WHERE message_id = 'wamid.g6' AND status = 'ignored'",
        )
        .await
            == 1
    })
    .await;
    assert_eq!(setup.fake.texts_to(STRANGER).len(), 5, "not answered");
    assert_eq!(
        count(&setup.harness, "SELECT COUNT(*) FROM channel_people").await,
        0,
        "the right code from a limited sender claims nothing"
    );
    assert_eq!(
        count(
            &setup.harness,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'people.claim_rate_limited'"
        )
        .await,
        1
    );

    let claim = FakeWhatsApp::text_message(OWNER, "wamid.c2", &format!("claim {code}"));
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, claim).await, 200);
    wait_until(WAIT, "the owner is welcomed", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text.contains("You own ada now"))
    })
    .await;
    assert_eq!(
        setup.llm.request_count(),
        requests_before,
        "nothing reached the model before the claim"
    );
    let again = FakeWhatsApp::text_message(OWNER, "wamid.c3", "now talk");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, again).await, 200);
    wait_until(WAIT, "the owner is answered", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text.contains("now talk"))
    })
    .await;
    assert_eq!(
        count(&setup.harness, "SELECT COUNT(*) FROM audit_log WHERE action = 'people.claimed' AND subject = 'wa:4915100000001'").await,
        1
    );
    let audit_has_code = count(&setup.harness, "SELECT COUNT(*) FROM audit_log WHERE details LIKE '%' || (SELECT code FROM channel_claims) || '%'").await;
    assert_eq!(audit_has_code, 0, "the code never reaches the audit log");
}

/// Meta's side of a burst across SIGKILLs of the real binary: every delivery is retried (to the
/// daemon's current address) until it is answered 200, as Meta retries for days.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_daemon_during_a_burst_loses_nothing_and_repeats_at_most_one_reply_per_kill() {
    use clawvisor::testkit::harness::{ScratchDir, config_toml};
    use clawvisor::testkit::process::{DaemonProcess, write_config};
    const MESSAGES: usize = 30;
    const KILLS: usize = 2;
    const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
    let users: Vec<String> = (0..MESSAGES).map(|i| format!("49151000{i:05}")).collect();
    let fake = FakeWhatsApp::start(PHONE_ID, TOKEN, APP_SECRET).await;
    let llm =
        ScriptedLlm::start(Script::new().rule(Rule::echo().delay(Duration::from_millis(150))))
            .await
            .expect("the scripted model starts");
    let allow = users
        .iter()
        .map(|user| format!("\"+{user}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let table = format!(
        "[whatsapp]\nphone_number_id = \"{PHONE_ID}\"\naccess_token_env = \"WA_TOKEN\"\napp_secret_env = \"WA_APP_SECRET\"\nverify_token_env = \"WA_VERIFY\"\napi_url = \"{}\"\nallow_users = [{allow}]\n",
        fake.api_url()
    );
    let dir = ScratchDir::new("clawvisor-wa-crash").expect("a scratch dir");
    write_config(
        dir.path(),
        &config_toml(&llm.base_url(), ""),
        &[agent_toml("ada", &table)],
    )
    .expect("the config is written");
    let env: std::collections::BTreeMap<String, String> = [
        ("WA_TOKEN", TOKEN),
        ("WA_APP_SECRET", APP_SECRET),
        ("WA_VERIFY", VERIFY),
        ("TZ", "UTC"),
    ]
    .iter()
    .map(|(key, value)| (key.to_string(), value.to_string()))
    .collect();
    let start = || DaemonProcess::start(BINARY, dir.path(), &env).expect("the daemon starts");
    let hook_of = |daemon: &DaemonProcess| {
        format!(
            "http://{}/hooks/whatsapp",
            daemon.studio.clone().expect("Studio's address")
        )
    };
    let mut daemon = start();
    let mut unanswered: Vec<(String, Vec<u8>)> = Vec::new();
    let mut kills = 0;
    for (i, user) in users.iter().enumerate() {
        let message = FakeWhatsApp::text_message(
            user,
            &format!("wamid.burst{i}"),
            &format!("message number {i}"),
        );
        let body = fake.delivery(user, "Burst", message);
        if fake.post_signed(&hook_of(&daemon), &body, None).await != 200 {
            unanswered.push((user.clone(), body));
        }
        if kills < KILLS && i > 0 && i % (MESSAGES / (KILLS + 1)) == 0 {
            daemon.kill();
            kills += 1;
            daemon = start();
        }
        // Meta retries what was not answered 200, now at the daemon's current address.
        let hook = hook_of(&daemon);
        let mut still = Vec::new();
        for (user, body) in unanswered.drain(..) {
            if fake.post_signed(&hook, &body, None).await != 200 {
                still.push((user, body));
            }
        }
        unanswered = still;
    }
    let pending = std::sync::Arc::new(tokio::sync::Mutex::new(unanswered));
    let hook = hook_of(&daemon);
    wait_until(
        Duration::from_secs(30),
        "Meta's retries are all answered 200",
        || {
            let (pending, hook, fake) = (pending.clone(), hook.clone(), &fake);
            async move {
                let mut pending = pending.lock().await;
                let mut still = Vec::new();
                for (user, body) in pending.drain(..) {
                    if fake.post_signed(&hook, &body, None).await != 200 {
                        still.push((user, body));
                    }
                }
                *pending = still;
                pending.is_empty()
            }
        },
    )
    .await;
    let answered = |i: usize| {
        fake.texts_to(&users[i])
            .iter()
            .filter(|text| **text == format!("echo: message number {i}"))
            .count()
    };
    wait_until(
        Duration::from_secs(90),
        "every message answered after the kills",
        || async {
            let missing: Vec<usize> = (0..MESSAGES).filter(|i| answered(*i) == 0).collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("unanswered: {missing:?}"))
            }
        },
    )
    .await;
    let duplicates: usize = (0..MESSAGES).map(|i| answered(i).saturating_sub(1)).sum();
    println!("{MESSAGES} messages, {KILLS} kills, {duplicates} duplicate replies");
    assert!(
        duplicates <= KILLS,
        "{duplicates} duplicates for {KILLS} kills"
    );
    daemon.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_token_and_phone_number_id_and_never_prints_a_secret() {
    use clawvisor::testkit::harness::{ScratchDir, config_toml};
    use clawvisor::testkit::process::write_config;
    let fake = FakeWhatsApp::start(PHONE_ID, TOKEN, APP_SECRET).await;
    let table = |id: &str, token_env: &str| {
        format!(
            "[whatsapp]\nphone_number_id = \"{id}\"\naccess_token_env = \"{token_env}\"\napp_secret_env = \"WA_APP_SECRET\"\nverify_token_env = \"WA_VERIFY\"\napi_url = \"{}\"\nallow_users = [\"+{OWNER}\"]\n",
            fake.api_url()
        )
    };
    let dir = ScratchDir::new("clawvisor-wa-doctor").expect("a scratch dir");
    let agents = [
        agent_toml("ada", &table(PHONE_ID, "WA_TOKEN")),
        agent_toml("bob", &table("555000", "WA_WRONG_TOKEN")),
    ];
    write_config(
        dir.path(),
        &config_toml("http://127.0.0.1:9/v1", ""),
        &agents,
    )
    .expect("the config is written");
    let path = dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
            .args([
                "--config",
                path.join("clawvisor.toml").to_str().expect("a path"),
                "doctor",
            ])
            .env("WA_TOKEN", TOKEN)
            .env("WA_WRONG_TOKEN", "EAAG-a-revoked-token-0000000000")
            .env("WA_APP_SECRET", APP_SECRET)
            .env("WA_VERIFY", VERIFY)
            .output()
            .expect("doctor runs")
    })
    .await
    .expect("doctor ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "Fake Business +1 555-000-1111 (phone number id 1098765432) serves agent `ada`"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("whatsapp (bob)") && stdout.contains("WA_WRONG_TOKEN"),
        "{stdout}"
    );
    for secret in [TOKEN, APP_SECRET, VERIFY, "EAAG-a-revoked-token-0000000000"] {
        assert!(!stdout.contains(secret), "a secret printed: {stdout}");
    }
    assert!(!output.status.success(), "a failing check fails doctor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_the_whatsapp_table_applies_it_to_the_running_account() {
    const NEW: &str = "4915100000002";
    let setup = start(Script::new().rule(Rule::echo()), "", ALLOWED).await;
    let file = setup.harness.dir.path().join("actors/agent0.toml");
    let text = std::fs::read_to_string(&file).expect("the agent file");
    std::fs::write(&file, text.replace("+49 151 00000001", "+49 151 00000002")).expect("written");
    let report: serde_json::Value = setup
        .http
        .post(format!("{}/api/v1/reload", setup.base))
        .send()
        .await
        .expect("reload answers")
        .json()
        .await
        .expect("a JSON report");
    assert_eq!(
        report["channel_accounts"]["restarted"],
        serde_json::json!(["ada's WhatsApp account"]),
        "{report}"
    );
    assert_eq!(report["needs_restart"], serde_json::json!([]), "{report}");
    // The new number is answered by the new account; the old one is a stranger now.
    let message = FakeWhatsApp::text_message(NEW, "wamid.r1", "I am new here");
    assert_eq!(setup.fake.deliver(&setup.hook, NEW, message).await, 200);
    wait_text(&setup.fake, NEW, "echo: I am new here").await;
    let message = FakeWhatsApp::text_message(OWNER, "wamid.r2", "still here?");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, message).await, 200);
    wait_text(&setup.fake, OWNER, "approve code").await;
    assert!(
        !setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text.contains("still here?")),
        "the removed number no longer reaches the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_people_page_shows_the_whatsapp_claim_code_then_the_owner_and_what_is_held() {
    use browser::Browser;
    let setup = start(Script::new().rule(Rule::echo()), "", "").await;
    let browser = Browser::launch().await;
    let link = clawvisor::studio::access::login_link(setup.harness.store(), &setup.base, "cli")
        .await
        .expect("a login link");
    browser.client.goto(&link).await.expect("Studio opens");
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
    // The Overview's supervision tree shows the account under the channels, running.
    browser
        .wait_until(
            "the WhatsApp account in the tree, under the channels",
            "document.querySelector('[data-actor=\"channels\"] [data-actor=\"channel:wa:ada\"][data-status=\"running\"]')",
        )
        .await;
    browser
        .js("document.querySelector('[data-tree]').open = true; document.querySelector('[data-actor=\"channel:wa:ada\"]').scrollIntoView(); return true")
        .await;
    browser.screenshot("whatsapp-overview-tree").await;
    // The account is listed with the bots' peers, in words.
    browser
        .wait_until(
            "the Overview lists the WhatsApp account as connected",
            "document.querySelector('[data-channel-account=\"wa:ada\"][data-status=\"running\"]')?.textContent.includes('connected')",
        )
        .await;
    assert_eq!(
        browser
            .js("return document.querySelectorAll('[data-bot^=\"channel:\"]').length")
            .await
            .as_i64(),
        Some(0),
        "the account is not listed as a Telegram bot"
    );
    let show_account = "document.querySelector('[data-channel-account=\"wa:ada\"]').scrollIntoView({block: 'center'}); return true";
    browser.js(show_account).await;
    browser.screenshot("whatsapp-overview-accounts").await;
    browser
        .client
        .set_window_size(390, 844)
        .await
        .expect("a phone viewport");
    browser.assert_no_sideways_scroll("overview").await;
    browser.js(show_account).await;
    browser.screenshot("phone-whatsapp-overview-accounts").await;
    browser
        .client
        .set_window_size(1280, 900)
        .await
        .expect("a desktop viewport");
    browser.open("people").await;
    browser
        .wait_until(
            "the WhatsApp claim code is shown",
            "document.querySelector('[data-wa-claim-code]')",
        )
        .await;
    let code = browser
        .js("return document.querySelector('[data-wa-claim-code]').textContent")
        .await
        .as_str()
        .expect("the code's text")
        .to_string();
    browser.screenshot("whatsapp-people-unclaimed").await;
    browser
        .phone_screenshot("whatsapp-people-unclaimed", "people")
        .await;

    // The owner sends the code from their phone: the page updates by itself.
    let claim = FakeWhatsApp::text_message(OWNER, "wamid.p1", &code);
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, claim).await, 200);
    browser
        .wait_until(
            "the page shows the owner",
            "document.querySelector('[data-wa-claim=\"claimed\"]')?.textContent.includes('Olivia')",
        )
        .await;
    // A reminder for someone outside the 24-hour window is held and shown.
    setup
        .harness
        .store()
        .write(|conn| {
            let id = clawvisor::store::outbox::enqueue_reply(
                conn,
                "ada",
                "wa:4917200000009",
                None,
                "your reminder",
                &[],
                1,
            )?;
            clawvisor::store::outbox::hold(conn, id, "outside_window", clawvisor::clock::now_ms())?;
            Ok(())
        })
        .await
        .expect("a held reminder");
    browser.client.refresh().await.expect("the page reloads");
    browser
        .wait_for("[data-page=\"people\"][data-loaded=\"true\"]")
        .await;
    browser
        .wait_until(
            "the held message is shown",
            "document.querySelector('[data-wa-held=\"1\"]')",
        )
        .await;
    browser.screenshot("whatsapp-people-claimed-held").await;
    browser
        .client
        .set_window_size(390, 844)
        .await
        .expect("a phone viewport");
    browser.assert_no_sideways_scroll("people").await;
    browser
        .screenshot("phone-whatsapp-people-claimed-held")
        .await;
    browser.close().await;
}

/// Studio's Chat lists the agent's WhatsApp conversation; the operator's message there reaches
/// the agent as the operator's, and the answer goes to the person's WhatsApp and shows in Studio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_continues_a_whatsapp_conversation_from_studio_chat() {
    use browser::Browser;
    let setup = start(Script::new().rule(Rule::echo()), "", ALLOWED).await;
    let first = FakeWhatsApp::text_message(OWNER, "wamid.c1", "hello from the garden");
    assert_eq!(setup.fake.deliver(&setup.hook, OWNER, first).await, 200);
    wait_until(WAIT, "the first answer reaches WhatsApp", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text.contains("hello from the garden"))
    })
    .await;

    let browser = Browser::launch().await;
    let link = clawvisor::studio::access::login_link(setup.harness.store(), &setup.base, "cli")
        .await
        .expect("a login link");
    browser.client.goto(&link).await.expect("Studio opens");
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
    browser.open("chat").await;
    let option = format!("#chat-conversation option[value=\"wa:{OWNER}\"]");
    browser.wait_for(&option).await;
    let label = browser
        .js(&format!(
            "return document.querySelector('{}').textContent",
            option.replace('\'', "\\'")
        ))
        .await;
    assert_eq!(label.as_str(), Some(format!("WhatsApp +{OWNER}").as_str()));
    browser
        .wait_for("#chat-conversation")
        .await
        .select_by_value(&format!("wa:{OWNER}"))
        .await
        .expect("the WhatsApp conversation is chosen");
    browser
        .wait_until(
            "the WhatsApp transcript is shown",
            "[...document.querySelectorAll('.chat-log .msg')].some((m) => m.textContent.includes('hello from the garden'))",
        )
        .await;
    browser
        .wait_until(
            "the page says where the words go",
            "document.getElementById('chat-where').textContent.includes('WhatsApp chat')",
        )
        .await;
    browser
        .type_into("#chat-input", "operator here: is the gate closed?")
        .await;
    browser.click("#chat-send").await;
    browser
        .wait_until(
            "the answer shows in Studio",
            "[...document.querySelectorAll('.msg.assistant[data-done=\"true\"]')].some((m) => m.textContent.includes('is the gate closed'))",
        )
        .await;
    wait_until(WAIT, "the answer reaches the person's WhatsApp", || async {
        setup
            .fake
            .texts_to(OWNER)
            .iter()
            .any(|text| text.contains("is the gate closed"))
    })
    .await;
    let audited = count(
        &setup.harness,
        "SELECT COUNT(*) FROM audit_log WHERE action = 'chat.operator_message' AND subject = 'wa:4915100000001'",
    )
    .await;
    assert_eq!(audited, 1, "the operator's message is audited");
    browser
        .js("document.getElementById('toasts')?.replaceChildren(); return 1")
        .await;
    browser.screenshot("whatsapp-chat").await;
    browser
        .client
        .set_window_size(390, 844)
        .await
        .expect("a phone viewport");
    browser.assert_no_sideways_scroll("chat").await;
    browser.screenshot("phone-whatsapp-chat").await;
    browser.close().await;
}

/// `/readyz` waits for the WhatsApp account as for a bot: ready once Meta accepted its token,
/// 503 naming the account and why while the token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_whatsapp_account_and_names_it_while_its_token_is_refused() {
    let readyz = |setup: &Setup| {
        let url = format!("{}/readyz", setup.base);
        async move {
            let response = reqwest::get(url).await.expect("/readyz answers");
            let status = response.status().as_u16();
            (status, response.text().await.unwrap_or_default())
        }
    };
    let good = start(Script::new(), "", ALLOWED).await;
    wait_until(WAIT, "/readyz says ready", || async {
        readyz(&good).await.0 == 200
    })
    .await;

    let refused = start_with(
        Script::new(),
        "",
        ALLOWED,
        "",
        &[("WA_TOKEN", "EAAG-a-token-meta-does-not-know")],
    )
    .await;
    let (status, body) = wait_until(WAIT, "/readyz names the account", || async {
        let (status, body) = readyz(&refused).await;
        body.contains("channel:wa:ada").then_some((status, body))
    })
    .await;
    assert_eq!(status, 503, "{body}");
    assert!(
        !body.contains("EAAG-a-token-meta-does-not-know"),
        "the token never shows: {body}"
    );
}

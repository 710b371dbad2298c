//! Signal's protocol layer against the fake signal-cli over loopback HTTP (issue #31): the event
//! stream read into typed messages (texts, groups, mentions, replies, voice notes), what waits on
//! "Signal's servers" while no stream is open, a dropped stream and refused connections
//! reconnected with the gap recorded, the JSON-RPC methods (send with attachments, to a group,
//! typing, receipts, reactions, getAttachment, receive) in single- and multi-account mode, and
//! the errors a person reads.

mod browser;

use std::time::Duration;

use clawvisor::signal::inbound::{OwnAccount, Received, SignalInbound};
use clawvisor::signal::link::{self, GapLog, LinkEvent, LinkSettings};
use clawvisor::signal::rpc::{
    OutgoingAttachment, OutgoingMessage, Recipient, SignalError, SignalRpc,
};
use clawvisor::testkit::fake_signal::{FakeSignal, SignalPerson};
use tokio::sync::{mpsc, watch};

const OURS: &str = "+4915100000000";
const WAIT: Duration = Duration::from_secs(15);

fn own() -> OwnAccount {
    OwnAccount {
        number: OURS.into(),
        uuid: Some(SignalPerson::new(OURS, "").uuid),
    }
}

fn ana() -> SignalPerson {
    SignalPerson::new("+4917200000001", "Ana")
}

/// A link on `fake` with a fast backoff; the stop sender ends it when dropped.
fn start_link(
    fake: &FakeSignal,
    multi_account: bool,
) -> (mpsc::Receiver<LinkEvent>, watch::Sender<bool>) {
    let mut settings = LinkSettings::new(&fake.base_url(), own());
    settings.multi_account = multi_account;
    settings.backoff_min = Duration::from_millis(50);
    settings.backoff_max = Duration::from_millis(400);
    let (sink, events) = mpsc::channel(64);
    let (stop, stop_watch) = watch::channel(false);
    tokio::spawn(link::run_event_stream(settings, sink, stop_watch));
    (events, stop)
}

/// The next event, waiting for it (never a fixed sleep).
async fn next(events: &mut mpsc::Receiver<LinkEvent>, what: &str) -> LinkEvent {
    match tokio::time::timeout(WAIT, events.recv()).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("the link ended while waiting for {what}"),
        Err(_) => panic!("waited {WAIT:?} for {what}, in vain"),
    }
}

async fn next_message(events: &mut mpsc::Receiver<LinkEvent>, what: &str) -> SignalInbound {
    loop {
        match next(events, what).await {
            LinkEvent::Received(Received::Message(message)) => return *message,
            LinkEvent::Received(Received::Ignored { .. }) | LinkEvent::Connected { .. } => {}
            other => panic!("expected {what}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_stream_delivers_texts_groups_mentions_replies_and_voice_notes() {
    let fake = FakeSignal::start(OURS).await;
    let (mut events, _stop) = start_link(&fake, false);
    assert!(matches!(
        next(&mut events, "the connection").await,
        LinkEvent::Connected { gap: None, .. }
    ));

    let sent_at = fake.push_text(&ana(), "hello there");
    let direct = next_message(&mut events, "the direct text").await;
    assert_eq!(
        (direct.text.as_str(), direct.timestamp, direct.source()),
        ("hello there", sent_at, "+4917200000001")
    );
    assert_eq!(direct.account, OURS);
    assert!(direct.addressed_to(&own()));
    assert_eq!(
        direct.dedupe_key(),
        format!("{OURS}/{}/{sent_at}", ana().uuid)
    );

    fake.push_group_text(&ana(), "R3JvdXAx", "dinner at 7", &[]);
    let chatter = next_message(&mut events, "the group chatter").await;
    assert_eq!(
        chatter.group.as_ref().map(|group| group.id.as_str()),
        Some("R3JvdXAx")
    );
    assert!(!chatter.addressed_to(&own()), "group chatter is not for us");

    fake.push_group_text(&ana(), "R3JvdXAx", "what's for dinner?", &[OURS]);
    let mention = next_message(&mut events, "the mention").await;
    assert!(mention.addressed_to(&own()));
    assert_eq!(
        mention.text, "what's for dinner?",
        "our own mention is taken out of the text"
    );

    let account = fake.account();
    fake.push_message(&account, &ana(), serde_json::json!({
        "message": "yes please",
        "groupInfo": {"groupId": "R3JvdXAx", "groupName": "Home", "revision": 1, "type": "DELIVER"},
        "quote": {"id": 77, "author": OURS, "authorNumber": OURS, "authorUuid": own().uuid, "text": "Tea?", "attachments": []}
    }));
    let reply = next_message(&mut events, "the reply").await;
    assert!(
        reply.addressed_to(&own()),
        "a reply to us in a group is for us"
    );

    fake.push_envelope(
        &account,
        serde_json::json!({"sourceNumber": "+4917200000001", "timestamp": 9,
        "typingMessage": {"action": "STARTED", "timestamp": 9}}),
    );
    assert_eq!(
        next(&mut events, "the typing notice").await,
        LinkEvent::Received(Received::Ignored {
            account: OURS.into(),
            what: "a typing notice".into()
        })
    );

    let audio = b"OggS fake voice".to_vec();
    let (_, attachment_id) = fake.push_voice_note(&ana(), &audio);
    let voice = next_message(&mut events, "the voice note").await;
    assert_eq!(voice.attachments.len(), 1);
    assert!(voice.attachments[0].voice_note);
    let rpc = SignalRpc::new(&fake.base_url(), None);
    let bytes = rpc
        .get_attachment(
            &voice.attachments[0].id,
            &Recipient::Person(voice.source().to_string()),
        )
        .await
        .expect("getAttachment");
    assert_eq!(
        (bytes, voice.attachments[0].id.clone()),
        (audio, attachment_id)
    );
}

#[tokio::test]
async fn what_arrives_while_no_stream_is_open_waits_and_comes_in_order() {
    let fake = FakeSignal::start(OURS).await;
    let first = fake.push_text(&ana(), "one");
    let second = fake.push_text(&ana(), "two");
    assert_eq!(
        fake.waiting(OURS),
        2,
        "manual mode: nothing is taken while nobody listens"
    );
    let (mut events, _stop) = start_link(&fake, false);
    assert_eq!(
        next_message(&mut events, "the first").await.timestamp,
        first
    );
    assert_eq!(
        next_message(&mut events, "the second").await.timestamp,
        second
    );
    assert_eq!(fake.waiting(OURS), 0);
}

#[tokio::test]
async fn a_dropped_stream_reconnects_and_its_gap_is_recorded_with_nothing_lost() {
    let fake = FakeSignal::start(OURS).await;
    let (mut events, _stop) = start_link(&fake, false);
    let mut gaps = GapLog::default();
    let connected = next(&mut events, "the connection").await;
    gaps.observe(&connected);

    fake.drop_streams();
    let dropped = next(&mut events, "the drop").await;
    gaps.observe(&dropped);
    let LinkEvent::Dropped { cause, .. } = &dropped else {
        panic!("expected a drop, got {dropped:?}")
    };
    assert!(cause.contains("closed the event stream"), "{cause}");
    let pushed_in_the_gap = fake.push_text(&ana(), "sent while the stream was away");
    let back = next(&mut events, "the reconnection").await;
    gaps.observe(&back);
    let LinkEvent::Connected { gap: Some(gap), .. } = &back else {
        panic!("expected a reconnection with its gap, got {back:?}")
    };
    assert!(
        gap.restored_at_ms
            .is_some_and(|restored| restored >= gap.dropped_at_ms)
    );
    assert_eq!(
        next_message(&mut events, "the message of the gap")
            .await
            .timestamp,
        pushed_in_the_gap
    );

    // Now refuse connections for a while: several attempts fail, one gap records them all.
    fake.refuse_for(Duration::from_millis(900));
    let pushed_while_refused = fake.push_text(&ana(), "sent while refused");
    let mut refusals = Vec::new();
    let restored = loop {
        let event = next(&mut events, "the end of the refusal").await;
        gaps.observe(&event);
        match event {
            LinkEvent::Dropped { cause, .. } => refusals.push(cause),
            LinkEvent::Connected { gap: Some(gap), .. } => break gap,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(
        refusals.len() >= 2,
        "the stream dropped, then connections were refused: {refusals:?}"
    );
    assert!(
        refusals
            .iter()
            .skip(1)
            .all(|cause| cause.contains("nothing answers at that address")),
        "a refused connection says what to check: {refusals:?}"
    );
    assert_eq!(restored.failed_attempts as usize, refusals.len() - 1);
    assert_eq!(
        next_message(&mut events, "the message sent while refused")
            .await
            .timestamp,
        pushed_while_refused
    );
    let recorded: Vec<_> = gaps.gaps().collect();
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(recorded.iter().all(|gap| gap.restored_at_ms.is_some()));
    assert!(fake.stream_connects() >= 3);
}

#[tokio::test]
async fn unreadable_events_are_reported_and_the_next_ones_still_arrive() {
    let fake = FakeSignal::start(OURS).await;
    let (mut events, _stop) = start_link(&fake, false);
    next(&mut events, "the connection").await;
    fake.push_raw_stream_bytes(b"event:receive\ndata:{\"envelope\":{\"timestamp\":\"soon\"}}\n\n");
    let LinkEvent::Unreadable(why) = next(&mut events, "the unreadable event").await else {
        panic!("expected an unreadable event")
    };
    assert!(why.contains("envelope.timestamp"), "names the field: {why}");
    let after = fake.push_text(&ana(), "still here");
    assert_eq!(
        next_message(&mut events, "the next message")
            .await
            .timestamp,
        after
    );
}

#[tokio::test]
async fn sends_carry_attachments_groups_quotes_typing_receipts_and_reactions() {
    let fake = FakeSignal::start(OURS).await;
    let rpc = SignalRpc::new(&fake.base_url(), None);
    let to_ana = Recipient::Person(ana().number.clone());
    let outcome = rpc
        .send(&OutgoingMessage {
            to: to_ana.clone(),
            text: "here is the report".into(),
            attachments: vec![OutgoingAttachment {
                file_name: "report.pdf".into(),
                mime: "application/pdf".into(),
                bytes: b"%PDF-1.7 body".to_vec(),
            }],
            voice_note: false,
            quote: Some((42, ana().number.clone())),
        })
        .await
        .expect("send");
    assert!(outcome.timestamp > 0 && outcome.all_succeeded());
    rpc.send(&OutgoingMessage {
        to: Recipient::Group("R3JvdXAx".into()),
        text: String::new(),
        attachments: vec![OutgoingAttachment {
            file_name: "answer.ogg".into(),
            mime: "audio/ogg".into(),
            bytes: vec![1, 2, 3],
        }],
        voice_note: true,
        quote: None,
    })
    .await
    .expect("group voice note");
    rpc.send_typing(&to_ana, false).await.expect("typing");
    rpc.send_read_receipt(&ana().number, &[41, 42])
        .await
        .expect("receipt");
    rpc.send_reaction(&to_ana, "👍", &ana().number, 42, false)
        .await
        .expect("reaction");

    let sent = fake.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].recipients, vec![ana().number.clone()]);
    assert_eq!(sent[0].timestamp, outcome.timestamp);
    assert_eq!(sent[0].quote, Some((42, ana().number.clone())));
    assert_eq!(
        sent[0].attachments[0].file_name.as_deref(),
        Some("report.pdf")
    );
    assert_eq!(sent[0].attachments[0].bytes, b"%PDF-1.7 body");
    assert_eq!(
        (sent[1].group_id.as_deref(), sent[1].voice_note),
        (Some("R3JvdXAx"), true)
    );
    let methods: Vec<String> = fake.calls().into_iter().map(|call| call.method).collect();
    assert_eq!(
        methods,
        ["send", "send", "sendTyping", "sendReceipt", "sendReaction"]
    );
    let receipt = &fake.calls()[3].params;
    assert_eq!(receipt["targetTimestamp"], serde_json::json!([41, 42]));
    assert_eq!(receipt["type"], "read");

    fake.rate_limit_next_sends(1);
    let limited = rpc
        .send(&OutgoingMessage {
            to: to_ana,
            text: "again".into(),
            attachments: vec![],
            voice_note: false,
            quote: None,
        })
        .await
        .expect_err("rate limited");
    assert_eq!(
        limited,
        SignalError::RateLimited {
            method: "send".into(),
            retry_after: Duration::from_secs(3)
        }
    );
    assert_eq!(
        fake.sent().len(),
        2,
        "a rate-limited send was not delivered"
    );
}

#[tokio::test]
async fn multi_account_mode_names_the_account_in_every_call_and_stream() {
    let other = "+4915100000099";
    let fake = FakeSignal::start_multi(&[OURS, other]).await;
    let unnamed = SignalRpc::new(&fake.base_url(), None);
    let error = unnamed
        .send_typing(&Recipient::Person(ana().number), false)
        .await
        .expect_err("no account");
    assert!(
        matches!(&error, SignalError::Rpc { code: -32602, .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("signal-cli refused sendTyping: Method requires account parameter"),
        "{error}"
    );

    let named = SignalRpc::new(&fake.base_url(), Some(OURS.into()));
    named
        .send_typing(&Recipient::Person(ana().number), false)
        .await
        .expect("named account");
    assert_eq!(
        fake.calls().last().map(|call| call.account.clone()),
        Some(OURS.to_string())
    );

    let (mut events, _stop) = start_link(&fake, true);
    next(&mut events, "the connection").await;
    fake.push_message(
        other,
        &ana(),
        serde_json::json!({"message": "for the other account"}),
    );
    let ours = fake.push_message(OURS, &ana(), serde_json::json!({"message": "for us"}));
    let message = next_message(&mut events, "our account's message").await;
    assert_eq!((message.timestamp, message.account.as_str()), (ours, OURS));
    assert_eq!(
        fake.waiting(other),
        1,
        "the other account's message waits for its own stream"
    );
}

#[tokio::test]
async fn receive_pulls_in_manual_mode_and_refuses_while_a_stream_is_open() {
    let fake = FakeSignal::start(OURS).await;
    let rpc = SignalRpc::new(&fake.base_url(), None);
    let first = fake.push_text(&ana(), "one");
    fake.push_text(&ana(), "two");
    let batch = rpc
        .receive(Duration::from_secs(1), 1, &own())
        .await
        .expect("receive");
    assert!(
        matches!(&batch[..], [Ok(Received::Message(message))] if message.timestamp == first),
        "{batch:?}"
    );
    assert_eq!(fake.waiting(OURS), 1, "maxMessages is honoured");

    let (sink, mut events) = mpsc::channel(8);
    let (stop, stop_watch) = watch::channel(false);
    let mut settings = LinkSettings::new(&fake.base_url(), own());
    settings.backoff_min = Duration::from_millis(50);
    tokio::spawn(link::run_pull(
        settings,
        Duration::from_millis(300),
        10,
        sink,
        stop_watch,
    ));
    assert_eq!(
        next_message(&mut events, "the pulled message").await.text,
        "two"
    );
    let later = fake.push_text(&ana(), "three");
    assert_eq!(
        next_message(&mut events, "a message pulled while waiting")
            .await
            .timestamp,
        later
    );
    stop.send(true).expect("the pull loop listens");

    let (_events, _stop) = start_link(&fake, false);
    clawvisor::testkit::wait_until(WAIT, "an open event stream", || async {
        fake.open_streams() == 1
    })
    .await;
    let refused = rpc
        .receive(Duration::from_millis(100), 1, &own())
        .await
        .expect_err("already receiving");
    assert!(
        refused.to_string().contains("already being received"),
        "{refused}"
    );
}

#[tokio::test]
async fn an_unreachable_daemon_is_named_with_what_to_check() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let address = closed.local_addr().expect("address");
    drop(closed);
    let rpc = SignalRpc::new(&format!("http://{address}"), None);
    let error = rpc
        .send_typing(&Recipient::Person(ana().number), false)
        .await
        .expect_err("nobody there");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "clawvisor could not reach signal-cli at http://{address}"
        )),
        "{text}"
    );
    assert!(text.contains("nothing answers at that address"), "{text}");
    assert!(text.contains("signal-cli daemon --http"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// The real daemon (in-process, real SQLite) with a `[signal]` account on the fake signal-cli:
// messages stored on receipt, screened through the channel seam, answered by JSON-RPC `send`.
// ---------------------------------------------------------------------------------------------

mod daemon {
    use std::time::Duration;

    use clawvisor::testkit::fake_signal::{FakeSignal, SentSignal, SignalPerson};
    use clawvisor::testkit::fake_transcription::FakeTranscription;
    use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
    use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
    use clawvisor::testkit::wait::wait_until;

    use super::{OURS, ana};

    const WAIT: Duration = Duration::from_secs(20);
    const ALLOW_ANA: &str = "allow_users = [\"+4917200000001\"]";

    pub struct Setup {
        pub fake: FakeSignal,
        pub llm: ScriptedLlm,
        pub harness: Harness,
    }

    /// The `[signal]` table of agent `ada` on `fake`.
    pub fn signal_table(fake: &FakeSignal, signal_extra: &str) -> String {
        format!(
            "[signal]\naccount = \"{OURS}\"\nrpc_url = \"{}\"\n{signal_extra}\n",
            fake.base_url()
        )
    }

    pub async fn start(
        script: Script,
        agent_extra: &str,
        signal_extra: &str,
        config_extra: &str,
        env: &[(&str, &str)],
    ) -> Setup {
        let fake = FakeSignal::start(OURS).await;
        let llm = ScriptedLlm::start(script)
            .await
            .expect("the scripted model starts");
        let mut options = HarnessOptions::new(llm.base_url());
        options.agents = vec![agent_toml(
            "ada",
            &format!("{agent_extra}\n{}", signal_table(&fake, signal_extra)),
        )];
        for (key, value) in env {
            options.env.insert(key.to_string(), value.to_string());
        }
        options.config_extra = config_extra.to_string();
        let harness = Harness::start(options).await.expect("the daemon starts");
        wait_until(
            WAIT,
            "the account opens signal-cli's event stream",
            || async { fake.open_streams() == 1 },
        )
        .await;
        Setup { fake, llm, harness }
    }

    pub async fn count(harness: &Harness, sql: &'static str) -> i64 {
        harness
            .store()
            .read(move |conn| Ok(conn.query_row(sql, [], |row| row.get::<_, i64>(0))?))
            .await
            .expect("a count reads")
    }

    /// Texts sent to `number` directly.
    pub fn texts_to(fake: &FakeSignal, number: &str) -> Vec<String> {
        fake.sent()
            .into_iter()
            .filter(|sent| sent.recipients.iter().any(|r| r == number))
            .map(|sent| sent.text)
            .collect()
    }

    async fn wait_text(fake: &FakeSignal, number: &str, part: &str) -> String {
        wait_until(
            WAIT,
            &format!("a text to {number} with {part:?}"),
            || async {
                texts_to(fake, number)
                    .into_iter()
                    .find(|text| text.contains(part))
            },
        )
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_is_stored_answered_by_json_rpc_read_and_typed_and_a_stranger_gets_only_a_code()
     {
        let setup = start(Script::new().rule(Rule::echo()), "", ALLOW_ANA, "", &[]).await;
        let sent_at = setup.fake.push_text(&ana(), "hello there");
        wait_text(&setup.fake, "+4917200000001", "hello there").await;
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
            count(
                &setup.harness,
                "SELECT COUNT(*) FROM channel_inbound WHERE channel = 'sg' AND chat = 'sg:+4917200000001' AND status = 'processed'"
            )
            .await,
            1
        );
        assert_eq!(texts_to(&setup.fake, "+4917200000001").len(), 1);
        wait_until(WAIT, "a read receipt for the message", || async {
            setup.fake.calls().iter().any(|call| {
                call.method == "sendReceipt"
                    && call.params["targetTimestamp"] == serde_json::json!([sent_at])
            })
        })
        .await;
        assert!(
            setup
                .fake
                .calls()
                .iter()
                .any(|call| call.method == "sendTyping"),
            "typing is shown while the run works: {:?}",
            setup.fake.calls()
        );

        let requests_before = setup.llm.request_count();
        let stranger = SignalPerson::new("+4917200000009", "Mallory");
        setup.fake.push_text(&stranger, "let me in");
        wait_until(WAIT, "the stranger's message is stored and ignored", || async {
            count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound WHERE sender = '+4917200000009' AND status = 'ignored'").await == 1
        })
        .await;
        assert_eq!(
            setup.llm.request_count(),
            requests_before,
            "a stranger never reaches the model"
        );
        let told = texts_to(&setup.fake, "+4917200000009");
        assert!(
            told.len() == 1 && told[0].contains("approve code"),
            "a stranger gets one pairing reply: {told:?}"
        );
    }

    /// The pairing code in a stranger's reply: `… approve code ABCD-EFGH (…`.
    pub fn pairing_code(text: &str) -> String {
        let after = text
            .split("approve code ")
            .nth(1)
            .unwrap_or_else(|| panic!("no pairing code in {text:?}"));
        after.chars().take(9).collect()
    }

    const BOB: &str = "+4917200000002";
    /// Ana approves; Bob may talk but not approve.
    const ANA_APPROVES_BOB_TALKS: &str =
        "allow_users = [\"+4917200000001\", \"+4917200000002\"]\napprovers = [\"+4917200000001\"]";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stranger_gets_one_pairing_code_and_talks_only_once_an_approver_pairs_them() {
        let setup = start(
            Script::new().rule(Rule::echo()),
            "",
            ANA_APPROVES_BOB_TALKS,
            "",
            &[],
        )
        .await;
        let mallory = SignalPerson::new("+4917200000009", "Mallory");
        setup.fake.push_text(&mallory, "said before pairing");
        let reply = wait_text(&setup.fake, &mallory.number, "approve code").await;
        let code = pairing_code(&reply);
        assert!(reply.contains(&format!("pair {code}")), "{reply}");
        let notice = wait_text(&setup.fake, "+4917200000001", "Someone new").await;
        assert!(
            notice.contains("Mallory") && notice.contains(&format!("reply \"pair {code}\"")),
            "{notice}"
        );
        // No reply storm: a second message gets nothing while the code stands.
        setup.fake.push_text(&mallory, "hello??");
        wait_until(WAIT, "both of Mallory's messages are ignored", || async {
            count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound WHERE sender = '+4917200000009' AND status = 'ignored'").await == 2
        })
        .await;
        // Bob may talk, not approve: his `pair` is refused and lets nobody in.
        setup
            .fake
            .push_text(&SignalPerson::new(BOB, "Bob"), &format!("pair {code}"));
        wait_text(&setup.fake, BOB, "Only my approvers can pair").await;
        assert_eq!(
            count(
                &setup.harness,
                "SELECT COUNT(*) FROM channel_people WHERE user = '+4917200000009'"
            )
            .await,
            0
        );
        assert_eq!(
            texts_to(&setup.fake, &mallory.number).len(),
            1,
            "one reply only"
        );
        assert_eq!(setup.llm.request_count(), 0, "nothing reached the model");

        setup
            .fake
            .push_text(&ana(), &format!("pair {}", code.to_lowercase()));
        wait_text(&setup.fake, "+4917200000001", "Paired Mallory").await;
        wait_text(&setup.fake, &mallory.number, "You're approved, Mallory").await;
        setup.fake.push_text(&mallory, "now may I talk");
        wait_text(&setup.fake, &mallory.number, "echo: now may I talk").await;
        let asked = serde_json::to_string(&setup.llm.requests()).expect("JSON");
        assert!(
            !asked.contains("said before pairing") && !asked.contains("hello??"),
            "what a stranger said before pairing never reaches the model"
        );
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM audit_log WHERE action = 'people.paired' AND subject = 'sg:+4917200000009' AND actor = 'sg:+4917200000001'").await,
            1
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_denied_stranger_is_never_answered_and_a_group_gets_no_code() {
        const GROUP: &str = "R3JvdXBPZkFuYQ==";
        let setup = start(Script::new().rule(Rule::echo()), "", ALLOW_ANA, "", &[]).await;
        let eve = SignalPerson::new("+4917200000008", "Eve");
        // In a group, a stranger who addresses the agent gets nothing there and nothing private:
        // no code is posted where the whole group reads it (as on Telegram).
        setup
            .fake
            .push_group_text(&eve, GROUP, "hey bot, let me in", &[OURS]);
        wait_until(WAIT, "the group message is ignored", || async {
            count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound WHERE sender = '+4917200000008' AND status = 'ignored' AND note LIKE 'a stranger in a group%'").await == 1
        })
        .await;
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM channel_pairings").await,
            0
        );
        // Directly, she gets her code; Ana turns her down.
        setup.fake.push_text(&eve, "let me in");
        let code = pairing_code(&wait_text(&setup.fake, &eve.number, "approve code").await);
        setup.fake.push_text(&ana(), &format!("deny {code}"));
        wait_text(&setup.fake, "+4917200000001", "Denied Eve").await;
        setup.fake.push_text(&eve, "please?");
        setup.fake.push_text(&ana(), "and now you");
        wait_text(&setup.fake, "+4917200000001", "echo: and now you").await;
        wait_until(WAIT, "Eve's messages are all ignored", || async {
            count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound WHERE sender = '+4917200000008' AND status = 'ignored'").await == 3
        })
        .await;
        let sent_to_eve: Vec<SentSignal> = setup
            .fake
            .sent()
            .into_iter()
            .filter(|sent| {
                sent.recipients.iter().any(|r| r == &eve.number) || sent.group_id.is_some()
            })
            .collect();
        assert_eq!(sent_to_eve.len(), 1, "only her one code: {sent_to_eve:?}");
        // The code decides nothing more, in Studio either.
        setup.fake.push_text(&ana(), &format!("pair {code}"));
        wait_text(&setup.fake, "+4917200000001", "That code is unknown").await;
        let asked = serde_json::to_string(&setup.llm.requests()).expect("JSON");
        assert!(!asked.contains("let me in") && !asked.contains("please?"));
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM audit_log WHERE action = 'people.pairing_denied' AND subject = 'sg:+4917200000008'").await,
            1
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_account_that_names_nobody_is_claimed_with_its_code_and_only_then_answers() {
        let setup = start(Script::new().rule(Rule::echo()), "", "", "", &[]).await;
        let code = wait_until(WAIT, "the claim code", || async {
            setup
                .harness
                .store()
                .read(|conn| clawvisor::store::channels::claim(conn, "ada", "sg"))
                .await
                .ok()
                .flatten()
                .map(|claim| claim.code)
        })
        .await;
        let requests_before = setup.llm.request_count();
        setup.fake.push_text(&ana(), "hello?");
        wait_text(&setup.fake, "+4917200000001", "claim code").await;
        setup.fake.push_text(&ana(), &format!("claim {code}"));
        wait_text(&setup.fake, "+4917200000001", "You own ada now").await;
        assert_eq!(
            setup.llm.request_count(),
            requests_before,
            "nothing reached the model before the claim"
        );
        setup.fake.push_text(&ana(), "now talk");
        wait_text(&setup.fake, "+4917200000001", "now talk").await;
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM audit_log WHERE action = 'people.claimed' AND subject = 'sg:+4917200000001'").await,
            1
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_a_group_the_agent_answers_only_when_it_is_mentioned() {
        const GROUP: &str = "R3JvdXBPZkFuYQ==";
        let setup = start(Script::new().rule(Rule::echo()), "", ALLOW_ANA, "", &[]).await;
        setup
            .fake
            .push_group_text(&ana(), GROUP, "dinner at 7", &[]);
        wait_until(WAIT, "the chatter is stored and ignored", || async {
            count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound WHERE status = 'ignored' AND note LIKE '%not addressed%'").await == 1
        })
        .await;
        assert_eq!(
            setup.llm.request_count(),
            0,
            "chatter never reaches the model"
        );
        setup
            .fake
            .push_group_text(&ana(), GROUP, "what is for dinner?", &[OURS]);
        let answer: SentSignal = wait_until(WAIT, "the answer in the group", || async {
            setup
                .fake
                .sent()
                .into_iter()
                .find(|sent| sent.group_id.as_deref() == Some(GROUP))
        })
        .await;
        assert!(answer.text.contains("what is for dinner?"), "{answer:?}");
        assert!(
            !answer.text.contains('\u{FFFC}'),
            "our mention is taken out"
        );
        assert_eq!(setup.llm.request_count(), 1);
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(DISTINCT chat) FROM channel_inbound WHERE chat = 'sg:R3JvdXBPZkFuYQ=='").await,
            1
        );
    }

    /// `POST /api/v1/reload` after the agent file was rewritten by `edit`: the report.
    async fn reload_with(setup: &Setup, edit: impl Fn(&str) -> String) -> serde_json::Value {
        let file = setup.harness.dir.path().join("actors/agent0.toml");
        let text = std::fs::read_to_string(&file).expect("the agent file");
        let edited = edit(&text);
        assert_ne!(edited, text, "the edit changes the file");
        std::fs::write(&file, edited).expect("written");
        let (base, http) = setup.harness.studio_http().await;
        http.post(format!("{base}/api/v1/reload"))
            .send()
            .await
            .expect("reload answers")
            .json()
            .await
            .expect("a JSON report")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reload_removes_adds_and_changes_a_signal_account_on_the_running_daemon() {
        let setup = start(Script::new().rule(Rule::echo()), "", ALLOW_ANA, "", &[]).await;
        let table = signal_table(&setup.fake, ALLOW_ANA);
        let report = reload_with(&setup, |text| text.replace(&table, "")).await;
        assert_eq!(
            report["channel_accounts"]["removed"],
            serde_json::json!(["ada's Signal account"]),
            "{report}"
        );
        wait_until(WAIT, "the removed account closes its stream", || async {
            setup.fake.open_streams() == 0
        })
        .await;
        // Written while the account is gone: it waits on Signal's servers, nothing is lost.
        setup.fake.push_text(&ana(), "while you were away");

        let report = reload_with(&setup, |text| format!("{text}\n{table}")).await;
        assert_eq!(
            report["channel_accounts"]["added"],
            serde_json::json!(["ada's Signal account"]),
            "{report}"
        );
        wait_text(&setup.fake, "+4917200000001", "echo: while you were away").await;

        let both = "allow_users = [\"+4917200000001\", \"+4917200000002\"]";
        let report = reload_with(&setup, |text| text.replace(ALLOW_ANA, both)).await;
        assert_eq!(
            report["channel_accounts"]["restarted"],
            serde_json::json!(["ada's Signal account"]),
            "{report}"
        );
        assert_eq!(report["needs_restart"], serde_json::json!([]), "{report}");
        wait_until(WAIT, "the restarted account opens one stream", || async {
            setup.fake.open_streams() == 1
        })
        .await;
        setup
            .fake
            .push_text(&SignalPerson::new("+4917200000002", "Bob"), "am I in now?");
        wait_text(&setup.fake, "+4917200000002", "echo: am I in now?").await;
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound").await,
            2,
            "each message stored once"
        );
    }

    /// The request id in a text prompt: `Reply "yes <id>" …`.
    fn prompt_id(text: &str) -> String {
        let after = text
            .split("Reply \"yes ")
            .nth(1)
            .unwrap_or_else(|| panic!("no reply instruction in {text:?}"));
        after.split('"').next().unwrap_or_default().to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_text_approval_runs_exactly_its_action_once_and_no_runs_nothing() {
        let script = Script::new()
            .rule(Rule::text("The file tool answered.").when_after_tool_result("write_file"))
            .rule(
                Rule::tool_call(
                    "write_file",
                    r#"{"path": "notes.txt", "content": "hello", "mode": "append"}"#,
                )
                .when_last_user_contains("write"),
            )
            .rule(Rule::echo());
        let setup = start(
            script,
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"\napproval_ttl = \"5m\"",
            ALLOW_ANA,
            "",
            &[],
        )
        .await;
        let notes = setup
            .harness
            .dir
            .path()
            .join("data/workspaces/ada/notes.txt");
        setup.fake.push_text(&ana(), "please write the notes");
        let first = wait_text(&setup.fake, "+4917200000001", "Approval needed").await;
        let first_id = prompt_id(&first);
        assert!(
            first.contains(&format!(
                "Reply \"yes {first_id}\" to allow it or \"no {first_id}\" to refuse"
            )),
            "{first}"
        );
        // A reply that does not match decides nothing: it is an ordinary message, answered
        // once the waiting run is over.
        setup.fake.push_text(&ana(), "yes");
        setup.fake.push_text(&ana(), &format!("no {first_id}"));
        wait_until(WAIT, "the first request is denied", || async {
            count(&setup.harness, "SELECT COUNT(*) FROM approvals WHERE status = 'denied' AND decided_by LIKE 'sg:+4917200000001%'").await == 1
        })
        .await;
        wait_text(&setup.fake, "+4917200000001", "The file tool answered.").await;
        wait_text(&setup.fake, "+4917200000001", "echo: yes").await;
        assert!(!notes.exists(), "a denied write ran nothing");

        setup.fake.push_text(&ana(), "write them after all");
        let second = wait_until(WAIT, "a second prompt", || async {
            texts_to(&setup.fake, "+4917200000001")
                .into_iter()
                .filter(|text| text.contains("Approval needed"))
                .nth(1)
        })
        .await;
        let second_id = prompt_id(&second);
        assert_ne!(first_id, second_id);
        setup.fake.push_text(&ana(), &format!("YES {second_id}"));
        wait_until(WAIT, "the approved write ran", || async { notes.exists() }).await;
        // The same reply again decides nothing more: the request is no longer pending.
        setup.fake.push_text(&ana(), &format!("yes {second_id}"));
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
            std::fs::read_to_string(&notes).expect("the notes"),
            "hello",
            "written exactly once"
        );
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM approvals WHERE status IN ('approved','consumed') AND decided_by LIKE 'sg:+4917200000001%'").await,
            1
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_voice_note_is_transcribed_and_a_file_goes_out_as_an_attachment() {
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
        let setup = start(
            script,
            "tools = [\"send_file\"]",
            ALLOW_ANA,
            &whisper,
            &[("WHISPER_TEST_KEY", "sk-whisper-test-key-0042")],
        )
        .await;
        let workspace = setup.harness.dir.path().join("data/workspaces/ada");
        std::fs::create_dir_all(&workspace).expect("the workspace");
        std::fs::write(workspace.join("report.txt"), "quarterly numbers").expect("the report");
        let mut audio = b"OggS\0\x02".to_vec();
        audio.extend((0..2000u32).map(|i| (i as u8).wrapping_mul(7)));
        setup.fake.push_voice_note(&ana(), &audio);
        let document = wait_until(WAIT, "the report goes out as an attachment", || async {
            setup
                .fake
                .sent()
                .into_iter()
                .find(|sent| !sent.attachments.is_empty())
        })
        .await;
        assert_eq!(
            transcription.requests().len(),
            1,
            "the note was transcribed once"
        );
        assert_eq!(document.text, "The report");
        assert_eq!(
            document.attachments[0].file_name.as_deref(),
            Some("report.txt")
        );
        assert_eq!(document.attachments[0].bytes, b"quarterly numbers");
        let saved = std::fs::read_dir(workspace.join("inbox"))
            .expect("an inbox")
            .filter_map(|entry| entry.ok())
            .map(|entry| std::fs::read(entry.path()).expect("readable"))
            .collect::<Vec<_>>();
        assert_eq!(saved, vec![audio], "the voice note is kept in the inbox");
        wait_text(&setup.fake, "+4917200000001", "There you go.").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_stream_reconnects_and_what_was_sent_in_the_gap_arrives_with_the_gap_shown() {
        let setup = start(Script::new().rule(Rule::echo()), "", ALLOW_ANA, "", &[]).await;
        setup.fake.push_text(&ana(), "before the drop");
        wait_text(&setup.fake, "+4917200000001", "before the drop").await;
        setup.fake.refuse_for(Duration::from_millis(1500));
        wait_until(WAIT, "the stream is gone", || async {
            setup.fake.open_streams() == 0
        })
        .await;
        for i in 0..3 {
            setup.fake.push_text(&ana(), &format!("in the gap {i}"));
        }
        // Messages that arrive together are answered in one run: the last one is echoed, and
        // each reached the model.
        wait_text(&setup.fake, "+4917200000001", "in the gap 2").await;
        let asked = serde_json::to_string(&setup.llm.requests()).expect("JSON");
        for i in 0..3 {
            assert!(
                asked.contains(&format!("in the gap {i}")),
                "gap message {i} reached the model"
            );
        }
        assert!(setup.fake.stream_connects() >= 2);
        assert_eq!(setup.fake.waiting(OURS), 0);
        wait_until(WAIT, "the gap is recorded in plain words", || async {
            count(&setup.harness, "SELECT COUNT(*) FROM runtime_events WHERE subject = 'channel:sg:ada' AND detail LIKE 'Signal''s message stream is back after%'").await >= 1
                && count(&setup.harness, "SELECT COUNT(*) FROM runtime_events WHERE subject = 'channel:sg:ada' AND detail LIKE 'Signal''s message stream dropped%'").await >= 1
        })
        .await;
        wait_until(WAIT, "the daemon settles", || async {
            count(
                &setup.harness,
                "SELECT COUNT(*) FROM channel_inbound WHERE status IN ('pending','dispatched')",
            )
            .await
                == 0
        })
        .await;
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM channel_inbound").await,
            4,
            "none lost, none twice"
        );
    }

    /// signal-cli's side of a burst across SIGKILLs of the real binary. Each batch is pushed, and
    /// the daemon is killed once the batch is stored and a few replies are out, while the rest
    /// are still being made and sent; the next batch is pushed while it is down (it waits on "Signal's servers", as in
    /// `--receive-mode=manual`) and arrives when it is back. 0 lost, at most one duplicate reply
    /// per kill. (Not covered, because no client can cover it: a message signal-cli already
    /// wrote to the stream when the process died, before it was committed — README "Signal".)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn killing_the_daemon_during_a_burst_loses_nothing_and_repeats_at_most_one_reply_per_kill()
     {
        use clawvisor::testkit::harness::{ScratchDir, config_toml};
        use clawvisor::testkit::process::{DaemonProcess, write_config};
        const BATCH: usize = 10;
        const KILLS: usize = 2;
        const MESSAGES: usize = BATCH * (KILLS + 1);
        const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
        let users: Vec<SignalPerson> = (0..MESSAGES)
            .map(|i| SignalPerson::new(&format!("+49151000{i:05}"), "Burst"))
            .collect();
        let fake = FakeSignal::start(OURS).await;
        let llm =
            ScriptedLlm::start(Script::new().rule(Rule::echo().delay(Duration::from_millis(150))))
                .await
                .expect("the scripted model starts");
        let allow = users
            .iter()
            .map(|user| format!("\"{}\"", user.number))
            .collect::<Vec<_>>()
            .join(", ");
        let table = signal_table(&fake, &format!("allow_users = [{allow}]"));
        let dir = ScratchDir::new("clawvisor-sg-crash").expect("a scratch dir");
        write_config(
            dir.path(),
            &config_toml(&llm.base_url(), ""),
            &[agent_toml("ada", &table)],
        )
        .expect("the config is written");
        let env: std::collections::BTreeMap<String, String> =
            [("TZ".to_string(), "UTC".to_string())].into();
        let db = dir.path().join("data/clawvisor.db");
        let stored = || {
            rusqlite::Connection::open(&db)
                .and_then(|conn| {
                    conn.query_row("SELECT COUNT(*) FROM channel_inbound", [], |row| {
                        row.get::<_, i64>(0)
                    })
                })
                .unwrap_or(0) as usize
        };
        let start = || async {
            let daemon = DaemonProcess::start(BINARY, dir.path(), &env).expect("the daemon starts");
            wait_until(WAIT, "the event stream opens", || async {
                fake.open_streams() == 1
            })
            .await;
            daemon
        };
        let answered = |i: usize| {
            texts_to(&fake, &users[i].number)
                .iter()
                .filter(|text| **text == format!("echo: message number {i}"))
                .count()
        };
        let mut daemon = Some(start().await);
        for batch in 0..=KILLS {
            for (i, user) in users.iter().enumerate().skip(batch * BATCH).take(BATCH) {
                fake.push_text(user, &format!("message number {i}"));
            }
            if daemon.is_none() {
                daemon = Some(start().await);
            }
            let pushed = (batch + 1) * BATCH;
            wait_until(WAIT, "the batch is stored", || async { stored() == pushed }).await;
            if batch < KILLS {
                // Mid-burst: some replies are out, the rest are being made.
                let before = (0..pushed).filter(|i| answered(*i) > 0).count();
                wait_until(WAIT, "a few more replies are out", || async {
                    (0..pushed).filter(|i| answered(*i) > 0).count() >= (before + 3).min(pushed)
                })
                .await;
                let unanswered = (0..pushed).filter(|i| answered(*i) == 0).count();
                println!(
                    "kill {}: {unanswered} of {pushed} messages not answered yet",
                    batch + 1
                );
                if let Some(running) = daemon.take() {
                    running.kill();
                }
                wait_until(WAIT, "signal-cli sees the stream gone", || async {
                    fake.open_streams() == 0
                })
                .await;
            }
        }
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
        assert_eq!(stored(), MESSAGES, "each message stored once");
        if let Some(running) = daemon {
            running.kill();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn doctor_says_whether_each_accounts_signal_cli_answers() {
        use clawvisor::testkit::harness::{ScratchDir, config_toml};
        use clawvisor::testkit::process::write_config;
        let fake = FakeSignal::start(OURS).await;
        let gone = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            format!("http://{}", listener.local_addr().expect("an address"))
        };
        let dir = ScratchDir::new("clawvisor-sg-doctor").expect("a scratch dir");
        let agents = [
            agent_toml("ada", &signal_table(&fake, ALLOW_ANA)),
            agent_toml(
                "bob",
                &format!("[signal]\naccount = \"+4915100000002\"\nrpc_url = \"{gone}\"\n"),
            ),
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
                .output()
                .expect("doctor runs")
        })
        .await
        .expect("doctor ends");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(&format!(
                "signal-cli at {} answers; {OURS} serves agent `ada`",
                fake.base_url()
            )),
            "{stdout}"
        );
        let bob = stdout
            .lines()
            .find(|line| line.contains("signal (bob)"))
            .unwrap_or_else(|| panic!("no line for bob: {stdout}"));
        assert!(
            bob.contains("could not reach signal-cli")
                && bob.contains("systemctl start signal-cli"),
            "{bob}"
        );
        assert!(!output.status.success(), "a failing check fails doctor");
    }

    /// The People page's Signal block: the claim code, a dropped stream said in words, then the
    /// owner and the stream back. Screenshots `signal-people-*.png` and `phone-signal-people-*.png`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_people_page_shows_the_signal_claim_code_a_dropped_stream_and_the_owner() {
        use super::browser::Browser;
        let setup = start(Script::new().rule(Rule::echo()), "", "", "", &[]).await;
        let (base, _) = setup.harness.studio_http().await;
        let browser = Browser::launch().await;
        let link = clawvisor::studio::access::login_link(setup.harness.store(), &base, "cli")
            .await
            .expect("a login link");
        browser.client.goto(&link).await.expect("Studio opens");
        browser
            .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
            .await;
        browser.open("people").await;
        browser
            .wait_until(
                "the Signal claim code is shown",
                "document.querySelector('[data-sg-claim-code]')",
            )
            .await;
        let code = browser
            .js("return document.querySelector('[data-sg-claim-code]').textContent")
            .await
            .as_str()
            .expect("the code's text")
            .to_string();
        browser.screenshot("signal-people-unclaimed").await;
        browser
            .phone_screenshot("signal-people-unclaimed", "people")
            .await;

        // signal-cli goes away for a while: the page says so in words, by itself.
        setup.fake.refuse_for(Duration::from_secs(4));
        browser
            .wait_until(
                "the dropped stream is shown",
                "document.querySelector('[data-sg-stream=\"dropped\"]')",
            )
            .await;
        browser.screenshot("signal-people-dropped").await;
        browser
            .phone_screenshot("signal-people-dropped", "people")
            .await;

        // The owner sends the code meanwhile: it waits on Signal's servers and arrives later.
        setup.fake.push_text(&ana(), &code);
        browser
            .wait_until(
                "the owner and the stream back are shown",
                "document.querySelector('[data-sg-claim=\"claimed\"]')?.textContent.includes('Ana') && document.querySelector('[data-sg-stream=\"ok\"]')?.textContent.includes('back after')",
            )
            .await;
        browser.screenshot("signal-people-claimed").await;
        browser
            .phone_screenshot("signal-people-claimed", "people")
            .await;
        browser.close().await;
    }

    /// The People page's Signal block lists a stranger's pairing request; the operator approves
    /// it by clicking, the person is told and their next message is answered. Screenshots
    /// `signal-pairing-*.png` and `phone-signal-pairing-*.png`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_operator_approves_a_signal_pairing_request_on_the_people_page() {
        use super::browser::Browser;
        let setup = start(Script::new().rule(Rule::echo()), "", ALLOW_ANA, "", &[]).await;
        let mallory = SignalPerson::new("+4917200000009", "Mallory");
        setup.fake.push_text(&mallory, "hello, may I talk to you?");
        let code = pairing_code(&wait_text(&setup.fake, &mallory.number, "approve code").await);
        let (base, _) = setup.harness.studio_http().await;
        let browser = Browser::launch().await;
        let link = clawvisor::studio::access::login_link(setup.harness.store(), &base, "cli")
            .await
            .expect("a login link");
        browser.client.goto(&link).await.expect("Studio opens");
        browser
            .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
            .await;
        browser.open("people").await;
        browser
            .wait_until(
                "the pending request is listed with its code",
                &format!(
                    "document.querySelector('[data-sg-pairing]')?.textContent.includes('{code}')"
                ),
            )
            .await;
        browser.screenshot("signal-pairing-pending").await;
        browser
            .phone_screenshot("signal-pairing-pending", "people")
            .await;
        browser
            .click("[data-sg-pairing] button[data-action=\"approve\"]")
            .await;
        browser
            .wait_until(
                "Mallory is listed as allowed and the request is gone",
                "document.querySelector('[data-sg-person=\"+4917200000009\"]') && !document.querySelector('[data-sg-pairing]')",
            )
            .await;
        browser.screenshot("signal-pairing-approved").await;
        browser
            .phone_screenshot("signal-pairing-approved", "people")
            .await;
        wait_text(&setup.fake, &mallory.number, "You're approved, Mallory").await;
        setup.fake.push_text(&mallory, "thank you");
        wait_text(&setup.fake, &mallory.number, "echo: thank you").await;
        assert_eq!(
            count(&setup.harness, "SELECT COUNT(*) FROM audit_log WHERE action = 'people.paired' AND actor = 'operator (studio)' AND subject = 'sg:+4917200000009'").await,
            1
        );
        browser.close().await;
    }
}

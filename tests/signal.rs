//! Signal's protocol layer against the fake signal-cli over loopback HTTP (issue #31): the event
//! stream read into typed messages (texts, groups, mentions, replies, voice notes), what waits on
//! "Signal's servers" while no stream is open, a dropped stream and refused connections
//! reconnected with the gap recorded, the JSON-RPC methods (send with attachments, to a group,
//! typing, receipts, reactions, getAttachment, receive) in single- and multi-account mode, and
//! the errors a person reads.

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

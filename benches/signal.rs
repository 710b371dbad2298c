//! The Signal edge's costs: decoding one signal-cli event (SSE framing + the `receive` object into
//! a typed message), a JSON-RPC `send` round trip against the fake signal-cli (with and without a
//! 100 KiB attachment), the delay from a message pushed to it being read off the event stream by
//! the link, and until the account's edge has stored it (`store_inbound` committed in a real
//! SQLite file). Prints median and p99 besides criterion's figures. And the idle resident set of
//! the daemon (the real binary, after `serve` released its unused pages; the highest of 5 s of
//! readings) with and without one Signal account linked to the fake signal-cli, for the target of
//! + ≤ 1 MiB per channel account.

mod support;

use std::time::{Duration, Instant};

use clawvisor::signal::inbound::OwnAccount;
use clawvisor::signal::link::{self, LinkEvent, LinkSettings, read_event};
use clawvisor::signal::rpc::{OutgoingAttachment, OutgoingMessage, Recipient, SignalRpc};
use clawvisor::signal::sse::SseDecoder;
use clawvisor::testkit::fake_signal::{FakeSignal, SignalPerson};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::sync::{mpsc, watch};

const OURS: &str = "+4915100000000";

fn own() -> OwnAccount {
    OwnAccount {
        number: OURS.into(),
        uuid: Some(SignalPerson::new(OURS, "").uuid),
    }
}

/// A group message with a mention, a quote and a voice note, as signal-cli frames it.
fn group_event() -> Vec<u8> {
    let object = serde_json::json!({
        "account": OURS,
        "envelope": {
            "source": "+4917200000001", "sourceNumber": "+4917200000001",
            "sourceUuid": "00000000-0000-4000-8000-004917200001", "sourceName": "Ana",
            "sourceDevice": 1, "timestamp": 1700000000123_i64,
            "serverReceivedTimestamp": 1700000000200_i64, "serverDeliveredTimestamp": 1700000000300_i64,
            "dataMessage": {
                "timestamp": 1700000000123_i64, "message": "\u{FFFC} could you summarise what we decided about the trip?",
                "expiresInSeconds": 0, "viewOnce": false,
                "mentions": [{"name": OURS, "number": OURS, "uuid": own().uuid, "start": 0, "length": 1}],
                "quote": {"id": 1700000000001_i64, "author": OURS, "authorNumber": OURS, "authorUuid": own().uuid,
                          "text": "Shall I book the train?", "attachments": []},
                "attachments": [{"contentType": "audio/aac", "filename": null, "id": "v.aac", "size": 5120,
                                 "width": null, "height": null, "caption": null, "uploadTimestamp": 1}],
                "groupInfo": {"groupId": "R3JvdXAx", "groupName": "Home", "revision": 3, "type": "DELIVER"}
            }
        }
    });
    format!("event:receive\ndata:{object}\n\n").into_bytes()
}

fn decoding(c: &mut Criterion) {
    let bytes = group_event();
    let own = own();
    let decode = || {
        let mut decoder = SseDecoder::default();
        let events = decoder.push(&bytes);
        let event = events
            .into_iter()
            .next()
            .expect("one event")
            .expect("valid");
        match read_event(event, &own) {
            Some(LinkEvent::Received(received)) => received,
            other => panic!("not a message: {other:?}"),
        }
    };
    c.bench_function("signal_decode_group_event", |b| b.iter(decode));
    let mut samples = Vec::with_capacity(20_000);
    for _ in 0..20_000 {
        let start = Instant::now();
        std::hint::black_box(decode());
        samples.push(start.elapsed());
    }
    support::report(
        &format!(
            "signal: decode one event ({} bytes: SSE + receive object)",
            bytes.len()
        ),
        &mut samples,
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

fn round_trips(c: &mut Criterion) {
    let rt = runtime();
    let (fake, rpc) = rt.block_on(async {
        let fake = FakeSignal::start(OURS).await;
        let rpc = SignalRpc::new(&fake.base_url(), None);
        (fake, rpc)
    });
    let text = OutgoingMessage {
        to: Recipient::Person("+4917200000001".into()),
        text: "Booked: the 9:04 to Hamburg, seats 41 and 42.".into(),
        attachments: Vec::new(),
        voice_note: false,
        quote: None,
    };
    let with_file = OutgoingMessage {
        attachments: vec![OutgoingAttachment {
            file_name: "tickets.pdf".into(),
            mime: "application/pdf".into(),
            bytes: vec![7u8; 100 * 1024],
        }],
        ..text.clone()
    };
    c.bench_function("signal_rpc_send_round_trip", |b| {
        b.to_async(&rt)
            .iter(|| async { rpc.send(&text).await.expect("the fake accepts it") })
    });
    let (sends, files, stream, stored) = rt.block_on(async {
        let mut sends = Vec::with_capacity(2_000);
        for _ in 0..2_000 {
            let start = Instant::now();
            rpc.send(&text).await.expect("the fake accepts it");
            sends.push(start.elapsed());
        }
        let mut files = Vec::with_capacity(300);
        for _ in 0..300 {
            let start = Instant::now();
            rpc.send(&with_file).await.expect("the fake accepts it");
            files.push(start.elapsed());
        }
        let (sink, mut events) = mpsc::channel(16);
        let (_stop, stop_watch) = watch::channel(false);
        tokio::spawn(link::run_event_stream(
            LinkSettings::new(&fake.base_url(), own()),
            sink,
            stop_watch,
        ));
        assert!(matches!(
            events.recv().await,
            Some(LinkEvent::Connected { .. })
        ));
        let ana = SignalPerson::new("+4917200000001", "Ana");
        let mut stream = Vec::with_capacity(2_000);
        for _ in 0..2_000 {
            let start = Instant::now();
            fake.push_text(&ana, "ping");
            let event = tokio::time::timeout(Duration::from_secs(5), events.recv()).await;
            assert!(matches!(event, Ok(Some(LinkEvent::Received(_)))));
            stream.push(start.elapsed());
        }
        (
            sends,
            files,
            stream,
            stored_on_receipt(&runtime_dir()).await,
        )
    });
    support::report(
        "signal: JSON-RPC send round trip (fake signal-cli)",
        &mut sends.clone(),
    );
    support::report(
        "signal: JSON-RPC send with a 100 KiB attachment",
        &mut files.clone(),
    );
    support::report(
        "signal: pushed -> read off the event stream by the link",
        &mut stream.clone(),
    );
    support::report(
        "signal: pushed -> stored by the account's edge (store_inbound committed)",
        &mut stored.clone(),
    );
    println!(
        "signal: {} sends recorded, RSS {} KiB",
        fake.sent().len(),
        support::rss_kib()
    );
}

fn runtime_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a scratch directory")
}

/// The daemon's inbound edge for one account (`signal::edge`, the link plus `store_inbound` in
/// a real SQLite file): from a message pushed to the fake signal-cli until its row is committed.
async fn stored_on_receipt(dir: &tempfile::TempDir) -> Vec<Duration> {
    use clawvisor::channel::EdgeContext;
    use clawvisor::store::{Store, StoreOptions};
    let fake = FakeSignal::start(OURS).await;
    let store = Store::open(&dir.path().join("bench.db"), StoreOptions::default())
        .expect("the store opens");
    let cancel = tokio_util::sync::CancellationToken::new();
    let context = EdgeContext {
        store: store.clone(),
        events: clawvisor::events::EventBus::new(),
        registry: clawvisor::registry::Registry::new(),
        agent: "ada".into(),
        cancel: cancel.clone(),
    };
    tokio::spawn(clawvisor::signal::edge::run(
        LinkSettings::new(&fake.base_url(), own()),
        context,
    ));
    while fake.open_streams() == 0 {
        tokio::task::yield_now().await;
    }
    let count = || {
        store.read(|conn| {
            Ok(
                conn.query_row("SELECT COUNT(*) FROM channel_inbound", [], |row| {
                    row.get::<_, i64>(0)
                })?,
            )
        })
    };
    let ana = SignalPerson::new("+4917200000001", "Ana");
    let mut samples = Vec::with_capacity(500);
    for stored in 1..=500_i64 {
        let start = Instant::now();
        fake.push_text(&ana, "ping");
        while count().await.unwrap_or(0) < stored {
            tokio::task::yield_now().await;
        }
        samples.push(start.elapsed());
    }
    cancel.cancel();
    samples
}

/// The highest VmRSS (KiB) over 5 s of the real daemon, once `serve` released its unused pages.
async fn idle_rss(with_signal: bool) -> u64 {
    use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml};
    use clawvisor::testkit::process::{DaemonProcess, write_config};
    use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
    let fake = FakeSignal::start(OURS).await;
    let llm = ScriptedLlm::start(Script::new().rule(Rule::echo()))
        .await
        .expect("the model");
    let dir = ScratchDir::new("clawvisor-sg-rss").expect("a scratch dir");
    let table = if with_signal {
        format!(
            "[signal]\naccount = \"{OURS}\"\nrpc_url = \"{}\"\nallow_users = [\"+4917200000001\"]\n",
            fake.base_url()
        )
    } else {
        String::new()
    };
    write_config(
        dir.path(),
        &config_toml(&llm.base_url(), ""),
        &[agent_toml("ada", &table)],
    )
    .expect("the config");
    let env: std::collections::BTreeMap<String, String> = [("TZ".to_string(), "UTC".to_string())]
        .into_iter()
        .collect();
    let daemon = DaemonProcess::start(env!("CARGO_BIN_EXE_clawvisor"), dir.path(), &env)
        .expect("the daemon starts");
    tokio::time::sleep(clawvisor::resident::RELEASE_AFTER_START + Duration::from_secs(1)).await;
    if with_signal {
        assert!(
            fake.open_streams() > 0,
            "the account reads signal-cli's events"
        );
    }
    let mut highest = 0;
    for _ in 0..10 {
        highest = highest.max(daemon.status_kib("VmRSS").unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    daemon.kill();
    highest
}

/// Prints the daemon's idle VmRSS without and with one Signal account (not a criterion group).
fn idle_memory(_: &mut Criterion) {
    let runtime = runtime();
    let (without, with) = runtime.block_on(async { (idle_rss(false).await, idle_rss(true).await) });
    println!(
        "idle VmRSS: {without} KiB without Signal, {with} KiB with one account: {:+} KiB",
        with as i64 - without as i64
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = decoding, round_trips, idle_memory
}
criterion_main!(benches);

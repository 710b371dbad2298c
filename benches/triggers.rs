//! Issue 32: a webhook trigger's intake — a signed `POST /hooks/trigger/{name}` received,
//! authenticated, stored with its audit row (a synced commit) and answered 202 — over real
//! loopback HTTP against the in-process daemon; p50/p99 over sequential deliveries, each with its
//! own delivery id. The runs the deliveries start fail fast (the model address refuses), so they
//! add the background work a busy trigger would.

mod support;

use std::time::{Duration, Instant};

use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use criterion::{Criterion, criterion_group, criterion_main};

const DELIVERIES: usize = 500;
const SECRET: &str = "bench-trigger-secret-0123456789";

fn triggers(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (harness, url) = rt.block_on(async {
        let mut options = HarnessOptions::new("http://127.0.0.1:9/v1");
        options.agents = vec![agent_toml("ada", "")];
        options.config_extra =
            "[[triggers]]\nname = \"bench\"\nagent = \"ada\"\nprompt = \"Event: {{body}}\"\n\
             deliver_to = \"none\"\nper_minute = 1000000\n"
                .into();
        options
            .env
            .insert("TRIGGER_BENCH_SECRET".into(), SECRET.into());
        let harness = Harness::start(options).await.expect("daemon");
        let addr = harness
            .daemon()
            .studio_addr(Duration::from_secs(10))
            .await
            .expect("studio");
        (harness, format!("http://{addr}/hooks/trigger/bench"))
    });
    let http = reqwest::Client::new();
    let post = |n: usize| {
        let body = format!("{{\"event\":\"motion\",\"n\":{n},\"camera\":\"front door\"}}");
        let signature = clawvisor::triggers::sign(body.as_bytes(), SECRET.as_bytes());
        http.post(&url)
            .header("x-signature-256", signature)
            .header(
                "x-delivery-id",
                format!("bench-{n}-{}", clawvisor::clock::now_ms()),
            )
            .header("content-type", "application/json")
            .body(body)
    };
    rt.block_on(async {
        let mut samples = Vec::with_capacity(DELIVERIES);
        for n in 0..DELIVERIES {
            let started = Instant::now();
            let response = post(n).send().await.expect("the hook answers");
            assert_eq!(response.status(), 202);
            samples.push(started.elapsed());
        }
        support::report(
            "triggers: signed delivery received → stored (synced, audited) → 202",
            &mut samples,
        );
    });
    let mut n = DELIVERIES;
    c.bench_function("triggers/intake_202", |b| {
        b.to_async(&rt).iter(|| {
            n += 1;
            let request = post(n);
            async move { request.send().await.unwrap().status() }
        })
    });
    rt.block_on(harness.stop());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = triggers
}
criterion_main!(benches);

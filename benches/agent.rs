//! Issue 3: the message path Agent → Session → Run → reply with an instant scripted model.
//! Prints the per-turn latency and the model call alone (their difference is the daemon's
//! overhead), throughput across 100 concurrent sessions, and memory per idle session.

mod support;

use std::time::{Duration, Instant};

use clawvisor::domain::ChatKey;
use clawvisor::domain::StartOptions;
use clawvisor::testkit::harness::{Harness, HarnessOptions};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use criterion::{Criterion, criterion_group, criterion_main};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn start(synchronous: &str) -> (ScriptedLlm, Harness) {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::echo()))
        .await
        .unwrap();
    llm.record_requests(false);
    let mut options = HarnessOptions::new(llm.base_url());
    options.start = StartOptions {
        studio: false,
        channels: false,
        scheduler: false,
    };
    options.config_extra = format!("[store]\nsynchronous = \"{synchronous}\"\n");
    let harness = Harness::start(options).await.unwrap();
    (llm, harness)
}

/// One model call straight to the scripted server (what the daemon adds is on top of this).
async fn model_call(client: &reqwest::Client, url: &str) -> Duration {
    let started = Instant::now();
    let body = serde_json::json!({"model": "scripted-model", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    let _ = client
        .post(format!("{url}/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    started.elapsed()
}

fn turns(c: &mut Criterion) {
    let rt = runtime();
    for synchronous in ["full", "normal"] {
        let (llm, harness) = rt.block_on(start(synchronous));
        let chat = ChatKey::cli("bench");
        c.bench_function(&format!("turn_latency_synchronous_{synchronous}"), |b| {
            b.to_async(&rt)
                .iter(|| async { harness.ask("ada", &chat, "hello").await.unwrap() })
        });
        let (mut turns, mut calls) = rt.block_on(async {
            let client = reqwest::Client::new();
            let mut turns = Vec::new();
            let mut calls = Vec::new();
            for _ in 0..500 {
                let started = Instant::now();
                harness.ask("ada", &chat, "hello").await.unwrap();
                turns.push(started.elapsed());
                calls.push(model_call(&client, &llm.base_url()).await);
            }
            (turns, calls)
        });
        let (turn_p50, turn_p99) = support::report(
            &format!("turn end to end (synchronous={synchronous})"),
            &mut turns,
        );
        let (call_p50, call_p99) =
            support::report("model call alone (scripted, streamed)", &mut calls);
        println!(
            "overhead per turn (synchronous={synchronous}): p50 {:?}  p99 {:?}  (target: p99 under 5 ms)",
            turn_p50.saturating_sub(call_p50),
            turn_p99.saturating_sub(call_p99)
        );

        // Throughput: 100 sessions, each sending its next message when the previous is answered.
        let (completed, elapsed) = rt.block_on(async {
            let started = Instant::now();
            let mut tasks = Vec::new();
            for session in 0..100 {
                let chat = ChatKey::cli(&format!("throughput-{synchronous}-{session}"));
                let harness = &harness;
                tasks.push(async move {
                    let mut done = 0;
                    while started.elapsed() < Duration::from_secs(5) {
                        harness.ask("ada", &chat, "hello").await.unwrap();
                        done += 1;
                    }
                    done
                });
            }
            let done: u64 = futures::future::join_all(tasks).await.into_iter().sum();
            (done, started.elapsed())
        });
        println!(
            "throughput (synchronous={synchronous}): {:.0} turns/s across 100 sessions ({completed} turns in {elapsed:.1?}; target over 1,000/s)",
            completed as f64 / elapsed.as_secs_f64()
        );
        rt.block_on(harness.stop());
    }

    // Memory per idle session: 1,000 conversations answered once each, then left alone.
    let (_llm, harness) = rt.block_on(start("normal"));
    let before = support::rss_kib();
    rt.block_on(async {
        for session in 0..1_000 {
            harness
                .ask("ada", &ChatKey::cli(&format!("idle-{session}")), "hello")
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    });
    let after = support::rss_kib();
    println!(
        "memory per idle session: {:.1} KiB (RSS {} KiB → {} KiB over 1,000 sessions; target under 50 KB)",
        (after.saturating_sub(before)) as f64 / 1_000.0,
        before,
        after
    );
    rt.block_on(harness.stop());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = turns
}
criterion_main!(benches);

//! The LLM client and the scripted OpenAI-compatible server together on loopback: latency of one
//! call (complete and streamed), throughput at a concurrency of 64 with the memory it costs, and
//! the SSE parser alone. The figures bound what the agent loop's own overhead can be measured
//! against, and show the scripted server is fast enough for throughput benchmarks of the runtime.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use clawvisor::config::{Dur, ProviderConfig, ProviderKind};
use clawvisor::llm::sse::{SseEvent, SseParser};
use clawvisor::llm::{ChatMessage, ChatRequest, Provider};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const CONCURRENCY: usize = 64;
const THROUGHPUT_CALLS: usize = 5_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "bench".into(),
        messages: vec![
            ChatMessage::system("You are a benchmark. Answer with the scripted text."),
            ChatMessage::user("Tell me something of about two hundred characters."),
        ],
        tools: Vec::new(),
        temperature: None,
        max_tokens: None,
    }
}

async fn one_call(provider: &Provider, streaming: bool) {
    if streaming {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        provider.chat(&request(), Some(&sender)).await.unwrap();
        while receiver.try_recv().is_ok() {}
    } else {
        provider.chat(&request(), None).await.unwrap();
    }
}

fn calls(c: &mut Criterion) {
    let rt = runtime();
    let answer = "All work and no play makes a benchmark a dull boy. ".repeat(4);
    let (server, provider) = rt.block_on(async {
        let server = ScriptedLlm::start(Script::new().rule(Rule::text(answer.clone())))
            .await
            .unwrap();
        server.record_requests(false);
        let config = ProviderConfig {
            kind: ProviderKind::Openai,
            base_url: server.base_url(),
            api_key_env: String::new(),
            timeout: Dur::secs(10),
            max_retries: 0,
            embeddings_model: String::new(),
            transcription_model: String::new(),
            speech_model: String::new(),
            speech_voice: String::new(),
            free: false,
        };
        let provider = Arc::new(Provider::from_config("bench", &config));
        (server, provider)
    });

    let mut group = c.benchmark_group("llm_call");
    for (label, streaming) in [("complete", false), ("streamed_26_chunks", true)] {
        group.bench_function(label, |b| {
            b.to_async(&rt).iter(|| one_call(&provider, streaming))
        });
    }
    group.finish();

    for (label, streaming) in [("complete", false), ("streamed", true)] {
        let mut samples = rt.block_on(async {
            let mut samples = Vec::with_capacity(2_000);
            for _ in 0..2_000 {
                let start = Instant::now();
                one_call(&provider, streaming).await;
                samples.push(start.elapsed());
            }
            samples
        });
        support::report(
            &format!("llm: one {label} call, client + scripted server on loopback"),
            &mut samples,
        );

        let rss_before = support::rss_kib();
        let elapsed = rt.block_on(async {
            let start = Instant::now();
            let tasks: Vec<_> = (0..CONCURRENCY)
                .map(|_| {
                    let provider = provider.clone();
                    tokio::spawn(async move {
                        for _ in 0..THROUGHPUT_CALLS / CONCURRENCY {
                            one_call(&provider, streaming).await;
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
            start.elapsed()
        });
        let done = (THROUGHPUT_CALLS / CONCURRENCY) * CONCURRENCY;
        println!(
            "llm: {label} throughput {:.0} calls/s at concurrency {CONCURRENCY} ({done} calls in {elapsed:?}); RSS {} KiB -> {} KiB",
            done as f64 / elapsed.as_secs_f64(),
            rss_before,
            support::rss_kib()
        );
    }
    println!(
        "llm: scripted server answered {} requests",
        server.request_count()
    );
}

/// A realistic OpenAI stream: 1,000 content chunks of about 180 bytes each.
fn openai_stream() -> Vec<u8> {
    let mut stream = String::new();
    for index in 0..1_000 {
        stream.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word{index} \"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    stream.push_str("data: [DONE]\n\n");
    stream.into_bytes()
}

fn sse(c: &mut Criterion) {
    let stream = openai_stream();
    let mut group = c.benchmark_group("sse_parse");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.bench_function("openai_stream_in_1400_byte_pieces", |b| {
        let mut events: Vec<SseEvent> = Vec::with_capacity(1_100);
        b.iter(|| {
            let mut parser = SseParser::new();
            events.clear();
            for piece in stream.chunks(1_400) {
                parser.feed(piece, &mut events).unwrap();
            }
            parser.finish(&mut events).unwrap();
            assert_eq!(events.len(), 1_001);
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = calls, sse
}
criterion_main!(benches);

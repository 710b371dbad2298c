//! The cost of redaction: every log line, every tool output and every recorded call goes through
//! `secrets::redact`, with the second line (case, reversal, rot13, separators, halves, base64 and
//! compressed runs) included. Cases: a log line, a 16 KB tool output of ordinary text (the
//! dispatcher's default output limit), the same with a 4 KB base64 blob in it, and a 16 KB output
//! holding a secret split by separators. Ten secrets are registered, as with ten bots' tokens.
//! Prints median and p99; target: a 16 KB output well under a millisecond.

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use base64::Engine as _;
use clawvisor::secrets::{redact, register};
use criterion::{Criterion, criterion_group, criterion_main};

fn cases() -> Vec<(&'static str, String)> {
    let paragraph = "The build finished at 10:42 (exit 0); /usr/lib/x86_64-linux-gnu/libssl.so.3 \
                     was found and the tests passed. Next, deploy to staging and watch the logs.\n";
    let output = paragraph.repeat(16 * 1024 / paragraph.len());
    let blob = base64::engine::general_purpose::STANDARD.encode(vec![0x5au8; 3 * 1024]);
    let spaced: Vec<String> = "Qm4Xs8Lp2Vt7Nw3Rc9Kd5Hf1"
        .chars()
        .map(String::from)
        .collect();
    vec![
        (
            "log line",
            "INFO telegram: sent 3 messages to chat 12345 in 42 ms (bot @helper_bot)".to_string(),
        ),
        ("16 KB ordinary output", output.clone()),
        ("16 KB with a 4 KB base64 blob", format!("{output}{blob}\n")),
        (
            "16 KB with a spaced secret",
            format!("{output}{}\n", spaced.join(" ")),
        ),
    ]
}

fn redaction(c: &mut Criterion) {
    for bot in 0..9 {
        register(&format!(
            "12345678{bot}:AAH{bot}x9Lq2Wm7Zr4Tp8Vn3Kb6Hc1Jd5Fs0Gy"
        ));
    }
    register("Qm4Xs8Lp2Vt7Nw3Rc9Kd5Hf1");
    let cases = cases();
    let mut group = c.benchmark_group("redact");
    for (name, text) in &cases {
        group.bench_function(*name, |b| b.iter(|| redact(black_box(text)).len()));
    }
    group.finish();
    for (name, text) in &cases {
        let mut samples: Vec<Duration> = (0..2_000)
            .map(|_| {
                let start = Instant::now();
                black_box(redact(black_box(text)).len());
                start.elapsed()
            })
            .collect();
        support::report(name, &mut samples);
    }
    println!("redact: target well under 1 ms for a 16 KB output");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = redaction
}
criterion_main!(benches);

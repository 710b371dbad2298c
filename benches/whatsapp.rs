//! Issue #31, WhatsApp: the webhook's latency (received → signature checked → stored in SQLite,
//! synced → 200), as Meta's client sees it over loopback, p50 and p99 of 1,000 signed deliveries
//! to a real daemon in-process; and the idle resident set of the daemon with and without one
//! WhatsApp account (the real binary, after `serve` released its unused pages; the highest of 5 s
//! of readings), for the target of + ≤ 1 MiB per channel account.
//!
//! The deliveries come from a number the agent does not know, so each is stored and screened but
//! starts no model run: what is timed is the webhook's path alone. Run:
//! `cargo bench --bench whatsapp` (prints the figures; BENCHMARKS.md records them).

use std::time::{Duration, Instant};

use clawvisor::testkit::fake_whatsapp::FakeWhatsApp;
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};

const PHONE_ID: &str = "1098765432";
const TOKEN: &str = "EAAG-bench-whatsapp-access-token-01";
const APP_SECRET: &str = "bench-app-secret";
const DELIVERIES: usize = 1_000;

fn table(api_url: &str) -> String {
    format!(
        "[whatsapp]\nphone_number_id = \"{PHONE_ID}\"\naccess_token_env = \"WA_TOKEN\"\napp_secret_env = \"WA_APP_SECRET\"\nverify_token_env = \"WA_VERIFY\"\napi_url = \"{api_url}\"\nallow_users = [\"+4915100000001\"]\n"
    )
}

fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("WA_TOKEN", TOKEN),
        ("WA_APP_SECRET", APP_SECRET),
        ("WA_VERIFY", "bench-verify"),
        ("TZ", "UTC"),
    ]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn webhook_latency() {
    let fake = FakeWhatsApp::start(PHONE_ID, TOKEN, APP_SECRET).await;
    let llm = ScriptedLlm::start(Script::new().rule(Rule::echo()))
        .await
        .expect("the model");
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", &table(&fake.api_url()))];
    for (key, value) in env() {
        options.env.insert(key.into(), value.into());
    }
    let harness = Harness::start(options).await.expect("the daemon starts");
    let (base, _) = harness.studio_http().await;
    let hook = format!("{base}/hooks/whatsapp");
    let mut times = Vec::with_capacity(DELIVERIES);
    for i in 0..DELIVERIES {
        let message =
            FakeWhatsApp::text_message("4917200000009", &format!("wamid.bench{i}"), "hello");
        let body = fake.delivery("4917200000009", "Stranger", message);
        let started = Instant::now();
        let status = fake.post_signed(&hook, &body, None).await;
        times.push(started.elapsed());
        assert_eq!(status, 200);
    }
    times.sort();
    println!(
        "webhook received → stored → 200: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({DELIVERIES} signed deliveries, in-process daemon, loopback)",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
    );
    harness.stop().await;
}

/// The highest VmRSS (KiB) over 5 s, once `serve` released its unused pages.
async fn idle_rss(with_whatsapp: bool) -> u64 {
    let fake = FakeWhatsApp::start(PHONE_ID, TOKEN, APP_SECRET).await;
    let llm = ScriptedLlm::start(Script::new().rule(Rule::echo()))
        .await
        .expect("the model");
    let dir = ScratchDir::new("clawvisor-wa-rss").expect("a scratch dir");
    let extra = if with_whatsapp {
        table(&fake.api_url())
    } else {
        String::new()
    };
    write_config(
        dir.path(),
        &config_toml(&llm.base_url(), ""),
        &[agent_toml("ada", &extra)],
    )
    .expect("the config");
    let env = env()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let daemon = DaemonProcess::start(env!("CARGO_BIN_EXE_clawvisor"), dir.path(), &env)
        .expect("the daemon starts");
    tokio::time::sleep(clawvisor::resident::RELEASE_AFTER_START + Duration::from_secs(1)).await;
    let mut highest = 0;
    for _ in 0..10 {
        highest = highest.max(daemon.status_kib("VmRSS").unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    daemon.kill();
    highest
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        webhook_latency().await;
        let without = idle_rss(false).await;
        let with = idle_rss(true).await;
        println!(
            "idle VmRSS: {without} KiB without WhatsApp, {with} KiB with one account: {:+} KiB",
            with as i64 - without as i64
        );
    });
}

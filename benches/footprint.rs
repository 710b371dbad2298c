//! Issue 11: what the daemon costs on a home server, measured on the real binary (the bench
//! profile's build of `clawvisor`): its size, cold start to `/readyz` with 10 bots, and resident
//! memory idle with 10 bots, then with 1,000 live sessions (100 chats per bot answered through the
//! fake Bot API and the scripted model).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use criterion::{Criterion, criterion_group, criterion_main};

const BOTS: usize = 10;
const CHATS_PER_BOT: i64 = 100;
const COLD_STARTS: usize = 5;
const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");

fn rss_kib(pid: u32) -> u64 {
    support::rss_kib_of(&pid.to_string())
}

async fn ready(base: &str) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(response) = http.get(format!("{base}/readyz")).send().await
            && response.status().is_success()
        {
            return;
        }
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn footprint(_c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let size = std::fs::metadata(BINARY).map(|m| m.len()).unwrap_or(0);
        println!(
            "footprint: binary size {:.1} MiB ({BINARY})",
            size as f64 / 1_048_576.0
        );

        let telegram = FakeTelegram::start().await;
        let llm = ScriptedLlm::start(Script::new().rule(Rule::text("Noted.")))
            .await
            .expect("model");
        let dir = ScratchDir::new("clawvisor-footprint").expect("dir");
        let mut env = BTreeMap::new();
        let mut agents = Vec::new();
        let mut bots = Vec::new();
        for i in 0..BOTS {
            let token = format!("{}:AAH-footprint-token-{i:04}", 7000 + i);
            bots.push(telegram.add_bot(&token, &format!("bot{i}")));
            env.insert(format!("BOT{i}_TOKEN"), token);
            agents.push(agent_toml(
                &format!("agent{i}"),
                &format!(
                    "[telegram]\ntoken_env = \"BOT{i}_TOKEN\"\napi_url = \"{}\"\nallow_users = [42]\n",
                    telegram.base_url()
                ),
            ));
        }
        let config = config_toml(
            &llm.base_url(),
            "[sessions]\nidle_stop = \"1h\"\n[store]\nsynchronous = \"normal\"\n",
        );
        write_config(dir.path(), &config, &agents).expect("config");

        let mut starts = Vec::new();
        let mut process: Option<DaemonProcess> = None;
        for _ in 0..COLD_STARTS {
            if let Some(previous) = process.take() {
                let _ = previous.terminate(Duration::from_secs(10));
            }
            let started = Instant::now();
            let daemon = DaemonProcess::start(BINARY, dir.path(), &env).expect("daemon");
            let base = format!("http://{}", daemon.studio.clone().expect("studio address"));
            ready(&base).await;
            starts.push(started.elapsed());
            process = Some(daemon);
        }
        support::report(
            &format!("footprint: cold start to /readyz with {BOTS} bots (process spawn included)"),
            &mut starts,
        );
        let daemon = process.expect("running");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let idle = rss_kib(daemon.pid());
        println!(
            "footprint: idle RSS with {BOTS} bots polling: {:.1} MiB",
            idle as f64 / 1024.0
        );

        let started = Instant::now();
        for (index, bot) in bots.iter().enumerate() {
            for chat in 0..CHATS_PER_BOT {
                telegram.push_message(*bot, 10_000 + index as i64 * 1_000 + chat, 42, "remember the milk");
            }
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline
            && bots
                .iter()
                .any(|bot| telegram.sent(*bot).len() < CHATS_PER_BOT as usize)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let answered: usize = bots.iter().map(|bot| telegram.sent(*bot).len()).sum();
        println!(
            "footprint: {answered} of {} messages answered in {:?}",
            BOTS as i64 * CHATS_PER_BOT,
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        let loaded = rss_kib(daemon.pid());
        println!(
            "footprint: RSS with {BOTS} bots and {} live sessions: {:.1} MiB ({:.1} KiB per session over idle)",
            BOTS as i64 * CHATS_PER_BOT,
            loaded as f64 / 1024.0,
            loaded.saturating_sub(idle) as f64 / (BOTS as f64 * CHATS_PER_BOT as f64)
        );
        let _ = daemon.terminate(Duration::from_secs(10));
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = footprint
}
criterion_main!(benches);

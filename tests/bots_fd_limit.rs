//! Too few file descriptors for all bots (issue #30, "No half-started bot"): the real binary with
//! ten bots on the fake Bot API, started under an `RLIMIT_NOFILE` that leaves room for only some
//! of them to reach Telegram, one message waiting for each bot.
//!
//! Checked while the limit is tight: the bots that cannot get online are shown failing —
//! `/readyz` answers 503 naming them and the cause in plain words ("too many open files — raise
//! LimitNOFILE"), Studio's overview says `failing` — and they confirm nothing to Telegram (their
//! message is still queued in the fake). Then the limit of the running process is raised
//! (`prlimit(2)`, as `prlimit --pid` does): every message is answered exactly once, `/readyz`
//! says ready, and the daemon was never restarted (same process, one "clawvisor is up").
//!
//! Needs no root: only the soft limit is lowered, and a process may raise its own soft limit up
//! to the hard one — here the test raises it for the daemon, its child, of the same user.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use clawvisor::testkit::fake_telegram::{BotId, FakeTelegram};
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::process::DaemonProcess;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::world::{Staged, World};
use clawvisor::testkit::{poll_until, wait_until};
use serde_json::Value;

/// Prints a figure straight to stderr (libtest captures `println!` of passing tests).
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
const BOTS: usize = 10;
const USER: i64 = 42;
/// The soft limit the daemon starts under: enough to boot and run a few bots, not all ten. The
/// daemon holds about 20 descriptors before its first bot, each online bot one more, and a bot
/// goes online only with more than `FD_RESERVE` (8) left: some 4 bots fit (BENCHMARKS.md, "Under
/// pressure, issue #30", bots).
const TIGHT: u64 = 34;
/// The soft limit after the operator raised it.
const RAISED: u64 = 1024;

fn agent_name(bot: usize) -> String {
    format!("agent{bot}")
}

/// Sets the soft `RLIMIT_NOFILE` of `pid` (0: this process), keeping the hard limit.
fn set_soft_nofile(pid: libc::pid_t, soft: u64) -> std::io::Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `prlimit` reads nothing when its new-limit pointer is null and writes only into
    // `limit`, which lives across the call.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    limit.rlim_cur = soft.min(limit.rlim_max);
    // SAFETY: `limit` is a valid rlimit; the old-limit pointer is null, so nothing is written.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The daemon's command on `dir`, to start with a soft limit of `TIGHT` open files.
fn tight_command(dir: &std::path::Path, env: &BTreeMap<String, String>) -> std::process::Command {
    let mut command = std::process::Command::new(BINARY);
    command
        .args([
            "--config",
            &dir.join("clawvisor.toml").display().to_string(),
        ])
        .args(["--log-format", "json", "serve"])
        .env("RUST_LOG", "info")
        .env("TZ", "UTC")
        .envs(env);
    // SAFETY: between fork and exec this calls only `prlimit`, which is async-signal-safe, and
    // allocates nothing.
    unsafe {
        command.pre_exec(|| set_soft_nofile(0, TIGHT));
    }
    command
}

/// How many descriptors `pid` has open.
fn open_fds(pid: libc::pid_t) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// `GET path` on Studio: the status and the body.
async fn get(http: &reqwest::Client, base: &str, path: &str, token: &str) -> (u16, String) {
    match http
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
    {
        Ok(answer) => (
            answer.status().as_u16(),
            answer.text().await.unwrap_or_default(),
        ),
        Err(error) => (0, error.to_string()),
    }
}

/// Each bot's status in Studio's overview (agent → status).
async fn bot_statuses(http: &reqwest::Client, base: &str, token: &str) -> BTreeMap<String, String> {
    let (_, body) = get(http, base, "/api/v1/overview", token).await;
    let overview: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    overview["bots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|bot| {
            Some((
                bot["agent"].as_str()?.to_string(),
                bot["status"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// The echo replies to each bot's message (bot index → how many).
fn answers(fake: &FakeTelegram, bots: &[BotId]) -> Vec<usize> {
    bots.iter()
        .enumerate()
        .map(|(index, bot)| {
            let asked = format!("hello {}", agent_name(index));
            fake.sent(*bot)
                .iter()
                .filter(|message| message.chat_id == USER && message.visible_text.contains(&asked))
                .count()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bots_without_file_descriptors_fail_visibly_confirm_nothing_and_answer_once_raised() {
    let started = Instant::now();
    let dir = ScratchDir::new("clawvisor-fd-limit").unwrap();
    let mut builder = World::builder(Script::new().rule(Rule::echo())).config_extra(
        "[telegram]\nboot_stagger = \"50ms\"\npoll_timeout = \"2s\"\nstale_grace = \"2m\"\n\
         degraded_retry = \"1s\"",
    );
    for bot in 0..BOTS {
        let name = agent_name(bot);
        builder = builder.agent_with_bot(
            &name,
            "",
            &format!("{}:AAH-fd-limit-token-{name}-0123456789", 700 + bot),
            &[USER],
            &[],
        );
    }
    // The model must outlive the daemon: dropping it stops its server.
    let Staged {
        fake,
        llm: _model,
        bots,
        env,
    } = builder.stage(dir.path()).await;
    let bots: Vec<BotId> = bots.iter().map(|bot| bot.id).collect();
    for (index, bot) in bots.iter().enumerate() {
        fake.push_message(*bot, USER, USER, &format!("hello {}", agent_name(index)));
    }

    let command = tight_command(dir.path(), &env);
    let mut daemon = tokio::task::spawn_blocking(move || DaemonProcess::spawn(command))
        .await
        .unwrap()
        .expect("the daemon boots under the tight limit");
    let pid = daemon.pid() as libc::pid_t;
    let base = format!(
        "http://{}",
        daemon.studio.clone().expect("Studio's address")
    );
    let token = std::fs::read_to_string(dir.path().join("data/studio.token"))
        .expect("the local Studio token")
        .trim()
        .to_string();
    // Bounded: a daemon out of file descriptors cannot accept a connection, and a probe that
    // hangs would hang the test.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();

    // Tight: some bots cannot get online. They are shown failing, with the cause, and confirm
    // nothing: their message is still queued at the fake Bot API.
    let failing = poll_until(Duration::from_secs(20), || {
        let (http, base, token, fake, bots) = (&http, &base, &token, &fake, &bots);
        async move {
            let (status, readyz) = get(http, base, "/readyz", "").await;
            let statuses = bot_statuses(http, base, token).await;
            let failing: Vec<usize> = (0..BOTS)
                .filter(|index| {
                    let agent = agent_name(*index);
                    readyz.contains(&format!("bot:{agent} "))
                        && statuses.get(&agent).map(String::as_str) == Some("failing")
                })
                .collect();
            let seen = format!("readyz {status} {readyz:?}; overview {statuses:?}");
            // Some bots fit and are online; the others fail visibly.
            if status != 503 || failing.is_empty() || failing.len() == BOTS {
                return Err(seen);
            }
            if !readyz.contains("too many open files") || !readyz.contains("LimitNOFILE") {
                return Err(format!("the cause is not named: {seen}"));
            }
            let confirmed: Vec<usize> = failing
                .iter()
                .copied()
                .filter(|index| fake.updates_pending(bots[*index]) == 0)
                .collect();
            if !confirmed.is_empty() {
                return Err(format!(
                    "failing bots {confirmed:?} confirmed updates; {seen}"
                ));
            }
            Ok((failing, readyz))
        }
    })
    .await;
    let (failing, readyz) = failing.unwrap_or_else(|seen| {
        daemon.drain();
        panic!(
            "bots shown failing for lack of file descriptors, confirming nothing, in vain: {seen}\nthe daemon's log:\n{}",
            daemon.log.join("\n")
        )
    });
    report!(
        "fd limit {TIGHT}: {} of {BOTS} bots failing after {:?} with {} descriptors open: {failing:?}; readyz: {}",
        failing.len(),
        started.elapsed(),
        open_fds(pid),
        readyz.trim()
    );
    assert!(
        failing.len() < BOTS,
        "the bots that fit are online: {failing:?}"
    );

    // The operator raises the limit of the running daemon: no restart.
    set_soft_nofile(pid, RAISED).expect("raise the daemon's open-files limit");
    let raised = Instant::now();
    wait_until(
        Duration::from_secs(25),
        "every bot's message answered after the limit was raised",
        || {
            let counts = answers(&fake, &bots);
            async move {
                if counts.iter().all(|count| *count >= 1) {
                    Ok(())
                } else {
                    Err(format!("answers per bot: {counts:?}"))
                }
            }
        },
    )
    .await;
    report!(
        "all {BOTS} messages answered {:?} after the limit was raised; {} descriptors open",
        raised.elapsed(),
        open_fds(pid)
    );
    wait_until(Duration::from_secs(10), "/readyz to say ready", || {
        let (http, base) = (&http, &base);
        async move {
            let (status, body) = get(http, base, "/readyz", "").await;
            if status == 200 {
                Ok(())
            } else {
                Err(format!("{status} {body}"))
            }
        }
    })
    .await;
    let counts = answers(&fake, &bots);
    assert!(
        counts.iter().all(|count| *count == 1),
        "each message answered exactly once: {counts:?}"
    );
    for bot in &bots {
        assert_eq!(
            fake.updates_pending(*bot),
            0,
            "every update confirmed in the end"
        );
    }
    // Never restarted: the same process, up once.
    daemon.drain();
    let ups = daemon
        .log
        .iter()
        .filter(|line| line.contains("clawvisor is up"))
        .count();
    assert_eq!(ups, 1, "the daemon came up once");
    assert_eq!(daemon.pid() as libc::pid_t, pid);
    let (exit, log) =
        tokio::task::spawn_blocking(move || daemon.terminate(Duration::from_secs(20)))
            .await
            .unwrap()
            .expect("the daemon stops");
    assert!(exit.success(), "clean stop: {exit:?}");
    let starts_failed = log
        .iter()
        .filter(|line| line.contains("telegram bot failed to start"))
        .count();
    report!(
        "{starts_failed} failed bot starts logged; whole case {:?}",
        started.elapsed()
    );
    assert!(starts_failed >= failing.len());
}

//! Issue #32, browser: Chromium's cold start → first snapshot (a JavaScript page of the testkit's
//! site), a snapshot's size and time on a 1 MB page, and the resident memory with the browser
//! closed and open (this process stands in for the daemon; Chromium's own processes are summed
//! separately, from `/proc`). Prints its figures; BENCHMARKS.md ("#32: browser") keeps them.

use std::path::Path;
use std::time::{Duration, Instant};

use clawvisor::browser::{Action, BrowserSession, BrowserSetup};
use clawvisor::testkit::test_site::TestSite;
use criterion::{Criterion, criterion_group, criterion_main};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

fn setup(profile: &Path) -> BrowserSetup {
    BrowserSetup {
        agent: "bench".into(),
        chromium: None,
        idle_timeout: Duration::from_secs(300),
        profile_dir: profile.to_path_buf(),
        protected: Vec::new(),
        snapshot_max_chars: 200_000,
        page_timeout: Duration::from_secs(30),
        logins: Vec::new(),
        // The test site is on loopback.
        requests: clawvisor::browser::guard::GuardRules {
            policy: clawvisor::tool::address::AddressPolicy::AllowPrivate,
            allow_private: Vec::new(),
        },
    }
}

/// Resident set of process `pid` in KiB (`VmRSS`), 0 when it is gone.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Proportional set size of process `pid` in KiB (`Pss` of `smaps_rollup`: shared pages split
/// between the processes sharing them, so a sum over Chromium's processes counts each once).
fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Pss:"))
                .and_then(|line| line.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The summed proportional set of every process whose command line names `profile` (Chromium's).
fn chromium_rss_kib(profile: &Path) -> u64 {
    let needle = profile.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).contains(&needle))
        })
        .map(pss_kib)
        .sum()
}

fn bench(criterion: &mut Criterion) {
    let runtime = runtime();
    let site = runtime.block_on(TestSite::start()).expect("the test site");
    let profile = tempfile::tempdir().expect("a profile");
    let own = std::process::id();

    let closed_kib = rss_kib(own);
    let (cold, mut session) = runtime.block_on(async {
        let started = Instant::now();
        let mut session = BrowserSession::start(&setup(profile.path()))
            .await
            .expect("chromium");
        session
            .act(Action::Open {
                url: site.url("/js"),
                new_tab: false,
            })
            .await
            .expect("open");
        (started.elapsed(), session)
    });
    let (big_time, big_chars) = runtime.block_on(async {
        session
            .act(Action::Open {
                url: site.url("/big"),
                new_tab: false,
            })
            .await
            .expect("open big");
        let started = Instant::now();
        let (_, snapshot) = session.snapshot().await.expect("snapshot");
        (started.elapsed(), snapshot.text.chars().count())
    });
    let open_own_kib = rss_kib(own);
    let open_chromium_kib = chromium_rss_kib(profile.path());
    eprintln!(
        "browser: cold start to first snapshot {:.0} ms; 1 MB page snapshot {:.0} ms, {big_chars} characters; \
         RSS closed {:.1} MiB, open {:.1} MiB (this process) + {:.1} MiB (Chromium's processes, PSS)",
        cold.as_secs_f64() * 1000.0,
        big_time.as_secs_f64() * 1000.0,
        closed_kib as f64 / 1024.0,
        open_own_kib as f64 / 1024.0,
        open_chromium_kib as f64 / 1024.0,
    );

    let mut group = criterion.benchmark_group("browser");
    group.sample_size(10);
    group.bench_function("snapshot_1mb_page", |bencher| {
        bencher.iter(|| runtime.block_on(session.snapshot()).expect("snapshot"))
    });
    group.bench_function("snapshot_small_js_page", |bencher| {
        runtime
            .block_on(session.act(Action::Open {
                url: site.url("/js"),
                new_tab: false,
            }))
            .expect("open");
        bencher.iter(|| runtime.block_on(session.snapshot()).expect("snapshot"))
    });
    group.finish();
    runtime.block_on(session.stop());
    let after_kib = rss_kib(own);
    eprintln!(
        "browser: after closing, this process {:.1} MiB, Chromium's processes {:.1} MiB",
        after_kib as f64 / 1024.0,
        chromium_rss_kib(profile.path()) as f64 / 1024.0
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);

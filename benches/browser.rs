//! Issue #32, browser: Chromium's cold start → first snapshot (a JavaScript page of the testkit's
//! site), a snapshot's size and time on a 1 MB page, and the resident memory with the browser
//! closed and open (this process stands in for the daemon; Chromium's own processes are summed
//! separately, from `/proc`). Prints its figures; BENCHMARKS.md ("#32: browser") keeps them.
//!
//! The egress proxy's overhead (`browser::proxy`): the same page fetched by a plain HTTP client
//! directly and through a proxy started as the browser starts its own (p50 of 40 each, a fresh
//! connection per request as a page's first request to a host has), and a page load in
//! Chromium (open `/js` and `/big`, p50 of 10), which now always goes through the proxy.

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

    proxy_overhead(&runtime, &site);
    let loads = |path: &str, session: &mut BrowserSession| {
        let mut times: Vec<Duration> = (0..10)
            .map(|_| {
                let started = Instant::now();
                runtime
                    .block_on(session.act(Action::Open {
                        url: site.url(path),
                        new_tab: false,
                    }))
                    .expect("open");
                started.elapsed()
            })
            .collect();
        times.sort();
        times[times.len() / 2]
    };
    let (small, big) = (loads("/js", &mut session), loads("/big", &mut session));
    eprintln!(
        "browser: page load through the proxy (open, wait for load, snapshot) p50: /js {:.1} ms, /big {:.1} ms",
        small.as_secs_f64() * 1000.0,
        big.as_secs_f64() * 1000.0
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

/// p50 of 40 fetches of `path`, each on a fresh client (a fresh connection).
fn fetch_p50(runtime: &tokio::runtime::Runtime, url: &str, proxy: Option<&str>) -> Duration {
    let mut times: Vec<Duration> = (0..40)
        .map(|_| {
            let builder = reqwest::Client::builder();
            let client = match proxy {
                Some(proxy) => builder.proxy(reqwest::Proxy::all(proxy).expect("a proxy URL")),
                None => builder.no_proxy(),
            }
            .build()
            .expect("a client");
            let started = Instant::now();
            runtime.block_on(async {
                let response = client.get(url).send().await.expect("fetched");
                assert!(response.status().is_success(), "{}", response.status());
                response.bytes().await.expect("the body");
            });
            started.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// The proxy alone: direct vs through it, for a small and a 1 MB page.
fn proxy_overhead(runtime: &tokio::runtime::Runtime, site: &TestSite) {
    use clawvisor::browser::guard::{GuardRules, RefusalLog};
    use clawvisor::browser::proxy::EgressProxy;
    let rules = GuardRules {
        policy: clawvisor::tool::address::AddressPolicy::AllowPrivate,
        allow_private: Vec::new(),
    };
    let proxy = runtime
        .block_on(EgressProxy::start(rules, RefusalLog::default()))
        .expect("the proxy");
    for path in ["/js", "/big"] {
        let url = site.url(path);
        let direct = fetch_p50(runtime, &url, None);
        let proxied = fetch_p50(runtime, &url, Some(&proxy.url()));
        eprintln!(
            "browser proxy: {path} direct p50 {:.2} ms, through the proxy p50 {:.2} ms",
            direct.as_secs_f64() * 1000.0,
            proxied.as_secs_f64() * 1000.0
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

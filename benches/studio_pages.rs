//! Issue 28: Studio with a full house — 10 agents with a bot each, 1,000 runs (5,000 steps, 4,000
//! transcript events, 1,000 audit rows, 2,000 cost rows), 10,000 memories and 20 schedules in
//! the real daemon's SQLite file (`studio_pages/house.rs`), Studio on loopback.
//!
//! Measured: each page's data load — the API requests the page makes when it opens, issued as the
//! page issues them and timed together (`studio_pages/pages.rs`), with the daemon's local access
//! token as scripts do; then, in the real headless Chromium logged in with a one-time link, first
//! contentful paint and the Overview's data drawn on a fresh load, and each page opened from the
//! menu until it says its data is drawn (`studio_pages/chromium.rs`), with screenshots of every
//! page at desktop and phone size. The target is ≤ 300 ms per page on loopback.
//!
//! Without Chromium the bench says so and measures the API part only. Figures are printed, never
//! asserted; `BENCHMARKS.md` ("Studio with a full house") holds a run's.

#[path = "../tests/browser/mod.rs"]
mod browser;
#[path = "studio_pages/chromium.rs"]
mod chromium;
#[path = "studio_pages/house.rs"]
mod house;
#[path = "studio_pages/pages.rs"]
mod pages;

use std::time::Duration;

use pages::{Fetch, Picks, View};
use serde_json::Value;

/// Timed data loads per view.
const SAMPLES: usize = 100;
/// The target for a page on loopback.
const TARGET_MS: f64 = 300.0;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(bench());
}

async fn bench() {
    let world = house::start().await;
    let (base, http) = world.harness.studio_http().await;
    house::seed(&world, &base, &http).await;
    let database = world
        .harness
        .dir
        .path()
        .join("data")
        .join(clawvisor::config::DATABASE_FILE);
    let size = std::fs::metadata(&database).map_or(0, |meta| meta.len());
    println!(
        "studio_pages: {} agents with a bot each, {} runs, {} memories, 20 schedules; \
         database {:.1} MiB (+ WAL)",
        house::AGENTS.len(),
        house::RUNS,
        house::MEMORIES,
        size as f64 / 1_048_576.0
    );

    let console = pages::console_pages();
    let picks = picks(&http, &base).await;
    let views = pages::views(&picks);
    for page in &console {
        if !views.iter().any(|view| view.page && &view.name == page) {
            println!(
                "studio_pages: page `{page}` of studio/app.js has no request list in \
                 benches/studio_pages/pages.rs: its data load is NOT measured (add it)"
            );
        }
    }
    let mut api = Vec::new();
    for view in views {
        if view.page && !console.contains(&view.name) {
            println!(
                "studio_pages: `{}` is not in this build's PAGES; skipped",
                view.name
            );
            continue;
        }
        let times = pages::time(&http, &base, &view.plan, SAMPLES)
            .await
            .unwrap_or_else(|error| panic!("{}: {error}", view.name));
        let (median, p95) = median_p95(times.iter().map(Duration::as_secs_f64).map(|s| s * 1e3));
        println!(
            "studio_pages: data load {:<34} median {median:7.2} ms  p95 {p95:7.2} ms  ({SAMPLES} samples; {})",
            view.name,
            describe(&view.plan)
        );
        api.push((view, median, p95));
    }

    let browser = match chromium::missing() {
        Some(why) => {
            println!("studio_pages: {why}");
            None
        }
        None => {
            let login = clawvisor::studio::access::login_link(world.store(), &base, "cli")
                .await
                .expect("a login link");
            Some(chromium::measure(&base, &login, &console).await)
        }
    };
    summary(&api, browser.as_ref());
    world.harness.stop().await;
}

/// The first agent the pages pick (the list's first), the operator's Studio conversation with
/// it, a run from the middle of the house and the first job.
async fn picks(http: &reqwest::Client, base: &str) -> Picks {
    let get = |path: String| async move {
        http.get(format!("{base}{path}"))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .unwrap_or_else(|error| panic!("GET {path}: {error}"))
            .json::<Value>()
            .await
            .unwrap_or_else(|error| panic!("GET {path}: {error}"))
    };
    let agents = get("/api/v1/agents".into()).await;
    let agent = agents["agents"][0]["name"]
        .as_str()
        .expect("the house has agents")
        .to_string();
    let sessions = get(format!("/api/v1/sessions?agent={agent}")).await;
    let chat_session = sessions["sessions"]
        .as_array()
        .and_then(|sessions| {
            sessions
                .iter()
                .find(|session| session["chat"] == "studio:operator")
        })
        .and_then(|session| session["id"].as_i64())
        .expect("the operator's Studio conversation is in the house");
    let jobs = get("/api/v1/schedules".into()).await;
    let job = jobs["jobs"][0]["id"].as_i64().expect("the house has jobs");
    Picks {
        agent,
        chat_session,
        run: house::RUNS / 2,
        job,
    }
}

/// Median and 95th percentile of milliseconds.
fn median_p95(samples: impl Iterator<Item = f64>) -> (f64, f64) {
    let mut samples: Vec<f64> = samples.collect();
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.95))
}

/// A plan in short: `a + b` started together, `a → b` one after the other, paths without
/// `/api/v1/` and query.
fn describe(plan: &Fetch) -> String {
    match plan {
        Fetch::Get(path) => {
            let path = path.trim_start_matches("/api/v1/");
            path.split('?').next().unwrap_or(path).to_string()
        }
        Fetch::Together(plans) => group(plans, " + "),
        Fetch::InTurn(plans) => group(plans, " → "),
    }
}

fn group(plans: &[Fetch], joint: &str) -> String {
    let parts: Vec<String> = plans
        .iter()
        .map(|plan| match plan {
            Fetch::Get(_) => describe(plan),
            _ => format!("({})", describe(plan)),
        })
        .collect();
    parts.join(joint)
}

/// The Markdown table for BENCHMARKS.md.
fn summary(api: &[(View, f64, f64)], browser: Option<&chromium::Figures>) {
    println!(
        "\n| view | requests | data load, median / p95 | opened in Chromium, median / p95 | ≤ {TARGET_MS} ms |"
    );
    println!("|---|---|---|---|---|");
    for (view, median, p95) in api {
        let opened = browser
            .and_then(|figures| figures.opened.iter().find(|(page, _)| *page == view.name))
            .map(|(_, times)| median_p95(times.iter().copied()));
        let opened_text = opened.map_or("—".to_string(), |(median, p95)| {
            format!("{median:.0} / {p95:.0} ms")
        });
        let worst = opened.map_or(*p95, |(_, opened_p95)| opened_p95.max(*p95));
        println!(
            "| {} | {} | {median:.2} / {p95:.2} ms | {opened_text} | {} |",
            view.name,
            describe(&view.plan),
            if worst <= TARGET_MS { "met" } else { "MISSED" }
        );
    }
    if let Some(figures) = browser {
        let (paint, paint_p95) = median_p95(figures.first_contentful_paint.iter().copied());
        let (loaded, loaded_p95) = median_p95(figures.overview_loaded.iter().copied());
        println!(
            "\nfresh load ({} loads): first contentful paint median {paint:.0} ms, p95 {paint_p95:.0} ms; \
             Overview's data drawn median {loaded:.0} ms, p95 {loaded_p95:.0} ms",
            figures.first_contentful_paint.len()
        );
        println!(
            "screenshots: house-<page>.png and phone-house-<page>.png in {}/studio-screenshots",
            env!("CARGO_TARGET_TMPDIR")
        );
    }
}

//! Studio's Logs and Audit pages in a real headless Chromium against the real daemon on loopback,
//! clicked through as an operator would: the Logs page lists what the daemon wrote (its plain
//! message first, where it came from on request), adds a line the daemon writes live (a reload's
//! report) without a page reload, never shows the bot's token, narrows to errors with the level
//! filter (new errors still arriving live) and to one word with the search; the Audit page says
//! what it is for, shows the chain intact and filters its entries by agent, by who and by time,
//! with the filter kept in the address, a new matching entry arriving live and others not. Desktop
//! and phone (390×844) screenshots go to `<target>/tmp/studio-screenshots/` (`logs*.png`,
//! `audit*.png`, `phone-logs*.png`, `phone-audit*.png`).

mod browser;

use std::time::Duration;

use browser::Browser;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use fantoccini::Locator;
use serde_json::{Value, json};

const TOKEN: &str = "7272:AAH-logs-browser-token-0001";

struct Console {
    world: World,
    base: String,
    http: reqwest::Client,
}

async fn console() -> Console {
    let _ = clawvisor::logging::init("debug", clawvisor::config::LogFormat::Text);
    let world = World::builder(Script::new().rule(Rule::text("hi")))
        .agent_with_bot("ada", "", TOKEN, &[], &[])
        .agent("bob", "")
        .start()
        .await;
    let (base, http) = world.harness.studio_http().await;
    Console { world, base, http }
}

async fn log_in(browser: &Browser, console: &Console) {
    let link =
        clawvisor::studio::access::login_link(console.world.harness.store(), &console.base, "cli")
            .await
            .unwrap();
    browser.client.goto(&link).await.unwrap();
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
}

/// Appends an audit row and announces it, as the daemon's writers do.
async fn audit(console: &Console, actor: &str, action: &str, subject: &str, details: Value) -> i64 {
    let (owned_actor, owned_action, owned_subject) =
        (actor.to_string(), action.to_string(), subject.to_string());
    let id = console
        .world
        .store()
        .write(move |conn| {
            clawvisor::audit::append(conn, &owned_actor, &owned_action, &owned_subject, &details)
        })
        .await
        .unwrap();
    clawvisor::audit::announce(&console.world.harness.daemon().events, action, subject);
    id
}

/// The ids of the audit entries on the page, top to bottom.
async fn entries_shown(browser: &Browser) -> Vec<i64> {
    let ids = browser
        .client
        .execute(
            "return [...document.querySelectorAll('#audit-entries [data-entry]')].map((row) => Number(row.dataset.entry));",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(ids).unwrap()
}

async fn wait_for_entries(browser: &Browser, what: &str, expected: &[i64]) {
    wait_until(Duration::from_secs(20), what, || async {
        let shown = entries_shown(browser).await;
        if shown == expected {
            Ok(())
        } else {
            Err(format!("{shown:?}, not {expected:?}"))
        }
    })
    .await;
}

async fn select(browser: &Browser, css: &str, value: &str) {
    browser
        .wait_for(css)
        .await
        .select_by_value(value)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logs_page_tails_filters_and_searches_and_the_audit_page_filters() {
    let console = console().await;
    let browser = Browser::launch().await;
    log_in(&browser, &console).await;
    let marker = format!("{:x}", rand::random::<u64>());

    // The page says what it is for, lists the daemon's own lines (plain message first) and is live.
    browser.open("logs").await;
    let lead = browser
        .wait_for("[data-page=\"logs\"] .lead")
        .await
        .text()
        .await
        .unwrap();
    assert!(lead.starts_with("What the daemon has been doing"), "{lead}");
    browser
        .wait_until(
            "the daemon's boot line is listed",
            "[...document.querySelectorAll('.log-line .log-message')].some((m) => m.textContent.startsWith('studio listening on http://'))",
        )
        .await;
    browser
        .wait_for("[data-page=\"logs\"][data-tail=\"open\"]")
        .await;
    browser
        .client
        .execute("window.__no_reload = 1; return 1;", vec![])
        .await
        .unwrap();

    // A line the daemon writes (a reload's report) appears on top without a reload.
    let report: Value = console
        .http
        .post(format!("{}/api/v1/reload", console.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let summary = report["summary"].as_str().unwrap().to_string();
    browser
        .wait_until(
            "the reload's line arrives live",
            &format!("[...document.querySelectorAll('.log-line .log-message')].some((m) => m.textContent === {})", json!(summary)),
        )
        .await;

    // The bot's token never reaches the page.
    tracing::warn!(target: "clawvisor::telegram::poller",
        "poll failed {marker}: error sending request for url (https://api.telegram.org/bot{TOKEN}/getUpdates)");
    tracing::error!("disk {marker} is full: free some space in the data directory");
    browser
        .wait_until(
            "the warning arrives live, redacted",
            &format!("[...document.querySelectorAll('.log-line[data-level=\"warn\"] .log-message')].some((m) => m.textContent.includes('poll failed {marker}') && m.textContent.includes('/bot***/getUpdates'))"),
        )
        .await;
    browser
        .wait_until("still no reload", "window.__no_reload === 1")
        .await;
    let html = browser.client.source().await.unwrap();
    assert!(!html.contains(TOKEN), "the token is on the page");
    browser.screenshot("logs").await;

    // Where a line came from, on request.
    browser
        .client
        .execute(
            &format!("[...document.querySelectorAll('.log-line')].find((l) => l.textContent.includes('poll failed {marker}')).id = 'the-warning'; return 1;"),
            vec![],
        )
        .await
        .unwrap();
    browser
        .wait_for("#the-warning details.log-more summary")
        .await
        .click()
        .await
        .unwrap();
    let details = browser
        .wait_for("#the-warning details.log-more[open]")
        .await;
    assert!(
        details
            .text()
            .await
            .unwrap()
            .contains("clawvisor::telegram::poller")
    );
    browser.screenshot("logs-details").await;

    // Errors only: every line shown is an error, and a new error still arrives live (a warning
    // does not).
    select(&browser, "#logs-level", "error").await;
    browser
        .wait_for("[data-page=\"logs\"][data-loaded=\"true\"][data-tail=\"open\"]")
        .await;
    browser
        .wait_until(
            "only errors are listed",
            &format!("document.querySelector('.log-line') && [...document.querySelectorAll('.log-line')].every((l) => l.dataset.level === 'error') && document.querySelector('#logs-lines').textContent.includes('disk {marker} is full')"),
        )
        .await;
    tracing::warn!("a warning {marker} the filter hides");
    tracing::error!("second error {marker}: the model provider refused the key");
    browser
        .wait_until(
            "the new error arrives live",
            &format!("[...document.querySelectorAll('.log-line .log-message')].some((m) => m.textContent.startsWith('second error {marker}'))"),
        )
        .await;
    let listed = browser.wait_for("#logs-lines").await.text().await.unwrap();
    assert!(!listed.contains("the filter hides"), "{listed}");
    assert!(
        browser
            .client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with("#/logs?level=error")
    );
    browser.screenshot("logs-errors").await;

    // Search: back to every normal line, then one word.
    select(&browser, "#logs-level", "info").await;
    browser
        .wait_for("[data-page=\"logs\"][data-loaded=\"true\"]")
        .await;
    browser
        .wait_for("#logs-q")
        .await
        .send_keys(&marker)
        .await
        .unwrap();
    browser
        .wait_until(
            "only lines with the word are listed",
            &format!("document.querySelectorAll('.log-line').length === 4 && [...document.querySelectorAll('.log-line')].every((l) => l.textContent.includes('{marker}'))"),
        )
        .await;
    browser.screenshot("logs-search").await;

    // A phone: the page fits the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("logs").await;
    browser.wait_for(".log-line").await;
    browser.assert_no_sideways_scroll("logs").await;
    browser.screenshot("phone-logs").await;
    browser
        .wait_for(".log-line details.log-more summary")
        .await
        .click()
        .await
        .unwrap();
    browser.assert_no_sideways_scroll("logs with details").await;
    browser.screenshot("phone-logs-details").await;
    browser.client.set_window_size(1280, 900).await.unwrap();

    // Audit: entries by and about both agents.
    let settings = audit(
        &console,
        "operator",
        "agent.settings_changed",
        "agent:ada",
        json!({"paused": {"from": false, "to": true}}),
    )
    .await;
    let ada_tool = audit(
        &console,
        "agent:ada",
        "tool.executed",
        "run:1",
        json!({"tool": "write_file"}),
    )
    .await;
    let bob_tool = audit(
        &console,
        "agent:bob",
        "tool.executed",
        "run:2",
        json!({"tool": "web_fetch"}),
    )
    .await;
    let claimed = audit(
        &console,
        "telegram:42",
        "people.claimed",
        "telegram:42",
        json!({"agent": "bob", "name": "Sam"}),
    )
    .await;
    browser.open("audit").await;
    let lead = browser
        .wait_for("[data-page=\"audit\"] .lead")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        lead.starts_with("A sealed record of who did what"),
        "{lead}"
    );
    assert!(lead.contains("clawvisor audit verify"), "{lead}");
    browser.wait_for("[data-chain=\"intact\"]").await;
    // Dates are asked for only when the operator chooses "Between…".
    assert!(
        !browser
            .wait_for("#audit-since")
            .await
            .is_displayed()
            .await
            .unwrap()
    );
    let all = entries_shown(&browser).await;
    assert_eq!(all[..4], [claimed, bob_tool, ada_tool, settings], "{all:?}");
    let row = browser
        .wait_for(&format!("[data-entry=\"{settings}\"]"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        row.contains("Operator")
            && row.contains("changed an agent’s settings")
            && row.contains("agent ada"),
        "{row}"
    );
    browser.screenshot("audit").await;

    // By agent: bob's tool call and his owner's claim; the address keeps the filter.
    select(&browser, "#audit-agent", "bob").await;
    wait_for_entries(&browser, "bob's entries", &[claimed, bob_tool]).await;
    assert!(
        browser
            .client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .ends_with("#/audit?agent=bob")
    );
    // A new entry about bob arrives live; one about ada does not.
    browser
        .client
        .execute("window.__no_reload = 2; return 1;", vec![])
        .await
        .unwrap();
    let ada_later = audit(
        &console,
        "agent:ada",
        "tool.executed",
        "run:3",
        json!({"tool": "write_file"}),
    )
    .await;
    let bob_later = audit(
        &console,
        "operator",
        "job.created",
        "job:9",
        json!({"agent": "bob", "name": "digest"}),
    )
    .await;
    wait_for_entries(
        &browser,
        "bob's new entry on top",
        &[bob_later, claimed, bob_tool],
    )
    .await;
    browser
        .wait_until("no reload happened", "window.__no_reload === 2")
        .await;
    browser.screenshot("audit-filtered").await;

    // By who and by time together: the operator, in the last hour.
    select(&browser, "#audit-agent", "").await;
    select(&browser, "#audit-actor", "operator").await;
    select(&browser, "#audit-when", "hour").await;
    wait_until(
        Duration::from_secs(20),
        "the operator's entries of the last hour",
        || async {
            let shown = entries_shown(&browser).await;
            let wanted = shown.contains(&bob_later) && shown.contains(&settings);
            let others = [ada_tool, bob_tool, claimed, ada_later]
                .iter()
                .any(|id| shown.contains(id));
            if wanted && !others {
                Ok(())
            } else {
                Err(format!("{shown:?}"))
            }
        },
    )
    .await;
    // Opened from its address, a filtered view comes back the same.
    let url = browser.client.current_url().await.unwrap();
    assert!(
        url.as_str().contains("actor=operator") && url.as_str().contains("when=hour"),
        "{url}"
    );
    browser.client.goto(url.as_str()).await.unwrap();
    browser.client.refresh().await.unwrap();
    browser
        .wait_for("[data-page=\"audit\"][data-loaded=\"true\"]")
        .await;
    let actor = browser
        .wait_for("#audit-actor")
        .await
        .prop("value")
        .await
        .unwrap();
    assert_eq!(actor.as_deref(), Some("operator"));

    select(&browser, "#audit-when", "custom").await;
    assert!(
        browser
            .wait_for("#audit-since")
            .await
            .is_displayed()
            .await
            .unwrap()
    );
    assert!(
        browser
            .wait_for("#audit-until")
            .await
            .is_displayed()
            .await
            .unwrap()
    );

    // Nothing matches: the page says so and offers to clear the filters.
    select(&browser, "#audit-actor", "telegram:42").await;
    select(&browser, "#audit-action", "tool.executed").await;
    let nothing = browser
        .wait_for("#audit-entries .empty")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        nothing.starts_with("No entry matches these filters"),
        "{nothing}"
    );
    browser
        .wait_for("#audit-entries .empty button")
        .await
        .click()
        .await
        .unwrap();
    wait_until(Duration::from_secs(20), "every entry again", || async {
        let shown = entries_shown(&browser).await;
        [settings, ada_tool, bob_tool, claimed, ada_later, bob_later]
            .iter()
            .all(|id| shown.contains(id))
    })
    .await;

    // A phone: the filters wrap, the page fits the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("audit").await;
    browser.wait_for("[data-chain=\"intact\"]").await;
    browser.assert_no_sideways_scroll("audit").await;
    browser.screenshot("phone-audit").await;
    select(&browser, "#audit-agent", "bob").await;
    wait_for_entries(
        &browser,
        "bob's entries on a phone",
        &[bob_later, claimed, bob_tool],
    )
    .await;
    browser.assert_no_sideways_scroll("audit filtered").await;
    browser
        .client
        .execute(
            "document.querySelector('#audit-shown').scrollIntoView(); return 1;",
            vec![],
        )
        .await
        .unwrap();
    browser.screenshot("phone-audit-filtered").await;

    browser.close().await;
    console.world.harness.stop().await;
}

/// The Logs page never shows a secret registered with the daemon, even in a line that was
/// written before it was registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logs_page_hides_a_secret_registered_after_its_line() {
    let console = console().await;
    let browser = Browser::launch().await;
    log_in(&browser, &console).await;
    let late = format!(
        "sk-proj-{:x}{:x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    tracing::info!("provider check with key {late} answered 200");
    clawvisor::secrets::register(&late);
    browser.open("logs").await;
    let line = browser
        .client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::XPath(
            "//div[contains(@class, 'log-message')][contains(., 'provider check with key')]",
        ))
        .await
        .unwrap();
    assert_eq!(
        line.text().await.unwrap(),
        "provider check with key *** answered 200"
    );
    assert!(!browser.client.source().await.unwrap().contains(&late));
    browser.close().await;
    console.world.harness.stop().await;
}

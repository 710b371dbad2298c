//! Studio's Audit page when the chain no longer verifies, in a real headless Chromium against the
//! real daemon: an entry edited in the database file behind the daemon's back turns the check red,
//! the card leads with what happened in plain words and what to do next (restore, or re-key on the
//! server), and the technical finding is there on request. Desktop and phone (390×844) screenshots
//! go to `<target>/tmp/studio-screenshots/` (`audit-broken*.png`, `phone-audit-broken.png`).

mod browser;

use browser::Browser;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::world::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_page_says_plainly_that_the_log_was_changed_and_what_to_do() {
    let world = World::builder(Script::new().rule(Rule::text("hi")))
        .agent("ada", "")
        .start()
        .await;
    let id = world
        .store()
        .write(|conn| {
            clawvisor::audit::append(
                conn,
                "operator",
                "policy.changed",
                "rule:1",
                &serde_json::json!({"n": 1}),
            )
        })
        .await
        .unwrap();
    let (base, _) = world.harness.studio_http().await;
    let link = clawvisor::studio::access::login_link(world.harness.store(), &base, "cli")
        .await
        .unwrap();
    let browser = Browser::launch().await;
    browser.client.goto(&link).await.unwrap();
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
    browser.open("audit").await;
    browser.wait_for("[data-chain=\"intact\"]").await;

    // Someone with the database file edits an entry (the append-only triggers out of the way).
    let tampered = rusqlite::Connection::open(world.store().path()).unwrap();
    tampered
        .execute_batch("DROP TRIGGER audit_log_no_update;")
        .unwrap();
    tampered
        .execute(
            "UPDATE audit_log SET details = '{\"n\":2}' WHERE id = ?1",
            [id],
        )
        .unwrap();
    drop(tampered);

    // The operator comes back to the page.
    browser.open("overview").await;
    browser.open("audit").await;
    let card = browser.wait_for("[data-chain=\"broken\"]").await;
    let said = card.text().await.unwrap();
    assert!(
        said.contains("The audit log was changed outside clawvisor"),
        "{said}"
    );
    assert!(
        said.contains("restore it from your latest backup"),
        "{said}"
    );
    assert!(said.contains("clawvisor audit rekey --confirm"), "{said}");
    // The technical finding is behind "What the check found".
    let problem = browser.wait_for("[data-chain=\"broken\"] .problem").await;
    assert!(!problem.is_displayed().await.unwrap());
    browser.screenshot("audit-broken").await;
    browser.click("[data-chain=\"broken\"] summary").await;
    let found = problem.text().await.unwrap();
    assert!(found.starts_with(&format!("entry {id}:")), "{found}");
    assert!(found.contains("does not match its MAC"), "{found}");
    browser.screenshot("audit-broken-details").await;

    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("overview").await;
    browser.open("audit").await;
    browser.wait_for("[data-chain=\"broken\"]").await;
    browser.assert_no_sideways_scroll("audit broken").await;
    browser.screenshot("phone-audit-broken").await;
    browser.close().await;
}

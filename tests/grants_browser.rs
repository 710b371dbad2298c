//! Grants that lapse when something writes in the workspace (issue #29, class 3), clicked through
//! in a real headless Chromium against the real daemon (scripted model, real shell tool), as an
//! operator would:
//!
//! - the approval card offers "Allow exactly this for 30 min (until something writes in the
//!   workspace)" and says what that means; the operator clicks it and the command runs;
//! - the model then plants a file with `write_file` (no approval needed): the Approvals page shows
//!   the grant under "Lapsed grants" with the reason, without a reload;
//! - the same command asks again: a new card;
//! - desktop and phone (390×844) screenshots, none wider than the screen. Screenshots:
//!   `<target>/tmp/studio-screenshots/grants-*.png`, `phone-grants-*.png`.

mod browser;

use std::time::Duration;

use browser::Browser;
use clawvisor::domain::ChatKey;
use clawvisor::testkit::harness::wait_reply;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::world::World;

const WAIT: Duration = Duration::from_secs(30);

fn script() -> Script {
    Script::new()
        .rule(Rule::text("Refused.").when_last_tool_result_contains("Not run"))
        .rule(Rule::text("Ran it.").when_after_tool_result("shell"))
        .rule(Rule::text("Planted.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "tool.sh", "content": "echo planted > pwned.txt\n", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("plant"),
        )
        .rule(
            Rule::tool_call("shell", r#"{"command": "sh tool.sh"}"#)
                .when_last_user_contains("run the tool"),
        )
}

/// A screenshot without the passing messages in the corner, with `css` scrolled into view.
async fn shot(browser: &Browser, name: &str, css: &str) {
    let script = format!(
        "document.getElementById('toasts')?.replaceChildren(); document.querySelector('{css}')?.scrollIntoView({{block: 'center'}}); return 1;"
    );
    browser.js(&script).await;
    browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1]; requestAnimationFrame(() => requestAnimationFrame(() => done(1)));",
            vec![],
        )
        .await
        .unwrap();
    browser.screenshot(name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_grant_is_shown_with_its_reason_and_the_command_asks_again() {
    let world = World::builder(script())
        .agent(
            "ada",
            "tools = [\"shell\", \"write_file\"]\nallow_shell = true\nautonomy = \"trust_first\"\napproval_ttl = \"10m\"\n",
        )
        .start()
        .await;
    let workspace = world.harness.dir.path().join("data/workspaces/ada");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("tool.sh"), "echo original\n").unwrap();
    let chat = ChatKey::cli("op");
    let mut outputs = world.harness.listen(&chat).await.unwrap();
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;
    browser.open("approvals").await;

    // The request: the card offers the grant in the one wording and says when it lapses.
    world.harness.send("ada", &chat, "run the tool").unwrap();
    let card = browser.wait_for("[data-approval]").await;
    let text = card.text().await.unwrap();
    for said in [
        "Allow exactly this for 30 min (until the workspace changes)",
        "sh tool.sh",
        "the grant lapses and the same action asks again",
    ] {
        assert!(
            text.contains(said),
            "`{said}` missing from the card: {text}"
        );
    }
    shot(&browser, "grants-approval-card", "[data-approval]").await;
    browser
        .click("[data-approval] button[data-action=\"approve-30\"]")
        .await;
    assert_eq!(
        wait_reply(&mut outputs, WAIT).await.unwrap().text,
        "Ran it."
    );
    browser.wait_for("[data-grant-status=\"live\"]").await;
    shot(&browser, "grants-live", "[data-grant-status=\"live\"]").await;

    // The model plants a file; the open page shows the grant lapsed, with the reason.
    world.harness.send("ada", &chat, "plant it").unwrap();
    assert_eq!(
        wait_reply(&mut outputs, WAIT).await.unwrap().text,
        "Planted."
    );
    let lapsed = browser.wait_for("[data-grant-status=\"lapsed\"]").await;
    let text = lapsed.text().await.unwrap();
    assert!(
        text.contains("Something wrote in the workspace after it was given")
            && text.contains("write_file in run"),
        "{text}"
    );
    browser
        .wait_until(
            "no grant is listed as applying",
            "!document.querySelector('[data-grant-status=\"live\"]')",
        )
        .await;
    browser.assert_no_sideways_scroll("approvals").await;
    shot(&browser, "grants-lapsed", "[data-grant-status=\"lapsed\"]").await;

    // The same command asks again.
    world.harness.send("ada", &chat, "run the tool").unwrap();
    let card = browser.wait_for("[data-approval]").await;
    assert!(card.text().await.unwrap().contains("sh tool.sh"));
    assert!(!workspace.join("pwned.txt").exists());

    // On a phone.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.client.refresh().await.unwrap();
    browser
        .wait_for("[data-page=\"approvals\"][data-loaded=\"true\"]")
        .await;
    browser.wait_for("[data-grant-status=\"lapsed\"]").await;
    browser.assert_no_sideways_scroll("approvals (phone)").await;
    shot(&browser, "phone-grants-asks-again", "[data-approval]").await;
    shot(
        &browser,
        "phone-grants-lapsed",
        "[data-grant-status=\"lapsed\"]",
    )
    .await;
    browser
        .click("[data-approval] button[data-action=\"deny\"]")
        .await;
    assert_eq!(
        wait_reply(&mut outputs, WAIT).await.unwrap().text,
        "Refused."
    );
    assert!(!workspace.join("pwned.txt").exists());
    browser.close().await;
    world.harness.stop().await;
}

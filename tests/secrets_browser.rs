//! Studio's Keys & tokens page in a real headless Chromium against the real daemon: an operator
//! sees that agent ada's bot token is not set, sets it (the bot comes online on the fake Bot API),
//! replaces it with another bot's token (the new bot comes online), and deletes it after
//! confirming (the bot stops); the value never appears in the page. Then on a phone-sized
//! viewport (390×844) the page fits the screen. Screenshots: `secrets*.png` and
//! `phone-secrets*.png` in `<target>/tmp/studio-screenshots/`.

mod browser;

use std::time::Duration;

use browser::Browser;
use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml, telegram_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use fantoccini::Locator;

const WAIT: Duration = Duration::from_secs(30);
const FIRST_TOKEN: &str = "8181:AAH-first-browser-token-value-1111";
const SECOND_TOKEN: &str = "8282:AAH-second-browser-token-value-2222";
const OWNER: i64 = 1001;

/// Types `text` into the field `css` (cleared first).
async fn type_into(browser: &Browser, css: &str, text: &str) {
    let field = browser.wait_for(css).await;
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

/// Clicks the button `action` of the row of `name`; found again if the table was redrawn (a
/// change's event redraws it) between finding and clicking.
async fn click_row(browser: &Browser, name: &str, action: &str) {
    let css = format!("tr[data-secret=\"{name}\"] button[data-action=\"{action}\"]");
    wait_until(WAIT, &format!("a click on {action} of {name}"), || async {
        let button = browser.client.find(Locator::Css(&css)).await.ok()?;
        button.click().await.ok()
    })
    .await;
}

/// The page holds no trace of either token (text, attributes, input values).
async fn assert_no_token_in_page(browser: &Browser) {
    let page = browser
        .client
        .execute(
            "return document.documentElement.outerHTML + [...document.querySelectorAll('input')].map((i) => i.value).join('|');",
            vec![],
        )
        .await
        .unwrap();
    let page = page.as_str().unwrap();
    for token in [FIRST_TOKEN, SECOND_TOKEN] {
        assert!(!page.contains(token), "the page shows a token");
    }
}

/// Sets `token` for ADA_TOKEN through the form (reached from the row's `action` button) and
/// waits for the daemon's answer.
async fn save_token(browser: &Browser, action: &str, token: &str) {
    click_row(browser, "ADA_TOKEN", action).await;
    let name = browser.wait_for("#secret-name").await;
    assert_eq!(
        name.prop("value").await.unwrap().as_deref(),
        Some("ADA_TOKEN")
    );
    let value = browser.wait_for("#secret-value").await;
    assert_eq!(
        value.attr("type").await.unwrap().as_deref(),
        Some("password")
    );
    value.send_keys(token).await.unwrap();
    browser
        .wait_for("#secret-save")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("#secret-outcome [data-outcome=\"ok\"]")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sets_replaces_and_deletes_a_bot_token() {
    let fake = FakeTelegram::start().await;
    let first_bot = fake.add_bot(FIRST_TOKEN, "ada_bot");
    let second_bot = fake.add_bot(SECOND_TOKEN, "ada_new_bot");
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("Hello.")))
        .await
        .unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        &telegram_toml("ADA_TOKEN", &fake.base_url(), &[OWNER], &[OWNER]),
    )];
    let dir = ScratchDir::new("secrets-browser").unwrap();
    let harness = Harness::start_in(dir, options).await.unwrap();
    let (base, _) = harness.studio_http().await;
    let browser = Browser::launch().await;
    let link = clawvisor::studio::access::login_link(harness.store(), &base, "cli")
        .await
        .unwrap();
    browser.client.goto(&link).await.unwrap();
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;

    // The page says what it is for; ada's token is not set.
    browser.open("secrets").await;
    let purpose = browser.wait_for("#secrets-purpose").await;
    assert!(
        purpose
            .text()
            .await
            .unwrap()
            .contains("API keys and Telegram bot tokens")
    );
    browser
        .wait_until(
            "ada's token is listed as not set, with what uses it",
            "document.querySelector('tr[data-secret=\"ADA_TOKEN\"][data-set=\"false\"]')?.textContent.match(/the Telegram bot of agent ada.*not set/)",
        )
        .await;
    browser.screenshot("secrets").await;

    // Set: the bot comes online with it.
    save_token(&browser, "set", FIRST_TOKEN).await;
    // The plain sentence first; what the reload did on request.
    browser
        .wait_until(
            "the outcome says it was saved, with the reload's report on request",
            "document.querySelector('#secret-outcome strong')?.textContent.startsWith('Saved ADA_TOKEN') && document.querySelector('#secret-outcome details')?.textContent.includes('bots: added ada')",
        )
        .await;
    browser
        .wait_until(
            "the row shows the token as set, kept by Studio, with its ending",
            "document.querySelector('tr[data-secret=\"ADA_TOKEN\"][data-set=\"true\"][data-source=\"store\"]')?.textContent.includes('…1111')",
        )
        .await;
    assert!(fake.wait_for_calls(first_bot, "getMe", 1, WAIT).await);
    assert_eq!(
        browser
            .wait_for("#secret-value")
            .await
            .prop("value")
            .await
            .unwrap()
            .as_deref(),
        Some(""),
        "the field is emptied once saved"
    );
    assert_no_token_in_page(&browser).await;
    browser.screenshot("secrets-set").await;

    // Replace: the other bot comes online.
    save_token(&browser, "set", SECOND_TOKEN).await;
    browser
        .wait_until(
            "the row shows the new token's ending",
            "document.querySelector('tr[data-secret=\"ADA_TOKEN\"]')?.textContent.includes('…2222')",
        )
        .await;
    assert!(fake.wait_for_calls(second_bot, "getMe", 1, WAIT).await);
    assert_no_token_in_page(&browser).await;
    browser.screenshot("secrets-replaced").await;

    // Delete, after confirming: the bot stops.
    click_row(&browser, "ADA_TOKEN", "delete").await;
    browser
        .wait_until(
            "the confirmation says what stops working",
            "document.querySelector('[data-confirm=\"ADA_TOKEN\"]')?.textContent.includes('will stop working until it is set again')",
        )
        .await;
    browser.screenshot("secrets-delete-confirm").await;
    click_row(&browser, "ADA_TOKEN", "confirm-delete").await;
    browser
        .wait_for("tr[data-secret=\"ADA_TOKEN\"][data-set=\"false\"]")
        .await;
    let outcome = browser
        .wait_for("#secret-outcome")
        .await
        .text()
        .await
        .unwrap();
    assert!(outcome.contains("Deleted ADA_TOKEN"), "{outcome}");
    let (_, http) = harness.studio_http().await;
    let listing = http
        .get(format!("{base}/api/v1/secrets"))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(listing["secrets"][0]["name"], "ADA_TOKEN", "{listing}");
    assert_eq!(listing["secrets"][0]["set"], false, "{listing}");
    browser.screenshot("secrets-deleted").await;

    // A refused value says what is wrong, and nothing changes.
    type_into(&browser, "#secret-name", "ADA_TOKEN").await;
    type_into(&browser, "#secret-value", "short").await;
    browser
        .wait_for("#secret-save")
        .await
        .click()
        .await
        .unwrap();
    let refused = browser
        .wait_for("#secret-outcome [data-outcome=\"refused\"]")
        .await;
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("the value has 5 characters"),
        "{}",
        refused.text().await.unwrap()
    );
    browser.screenshot("secrets-refused").await;

    // A phone: the page fits the screen, set and delete still work.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("overview").await;
    browser.open("secrets").await;
    browser.wait_for("tr[data-secret=\"ADA_TOKEN\"]").await;
    browser.assert_no_sideways_scroll("secrets").await;
    browser.screenshot("phone-secrets").await;
    save_token(&browser, "set", FIRST_TOKEN).await;
    browser
        .wait_for("tr[data-secret=\"ADA_TOKEN\"][data-set=\"true\"]")
        .await;
    browser.assert_no_sideways_scroll("secrets").await;
    browser
        .client
        .execute("window.scrollTo(0, 0); return 1;", vec![])
        .await
        .unwrap();
    browser.screenshot("phone-secrets-set").await;
    click_row(&browser, "ADA_TOKEN", "delete").await;
    browser.wait_for("[data-confirm=\"ADA_TOKEN\"]").await;
    browser.assert_no_sideways_scroll("secrets").await;
    browser.screenshot("phone-secrets-delete-confirm").await;
    let _ = browser
        .client
        .find(Locator::Css("button[data-action=\"keep\"]"))
        .await
        .unwrap()
        .click()
        .await;
    assert_no_token_in_page(&browser).await;
    browser.close().await;
    harness.stop().await;
}

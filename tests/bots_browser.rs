//! A bot that cannot get online, as the operator sees it in Studio (issue #30, "No half-started
//! bot"): in a real headless Chromium against the in-process daemon, agent `bea`'s bot is
//! restarted while the fake Bot API drops every connection of it, so it cannot reach Telegram.
//! The Overview shows it failing with what happened and what to do, asks the operator's
//! attention for it, and keeps `ada`'s bot online beside it; `/readyz` names it. Screenshots:
//! `bot-failing.png` and `phone-bot-failing.png` (390×844) in `<target>/tmp/studio-screenshots/`.

mod browser;

use std::time::Duration;

use browser::Browser;
use clawvisor::protocol::telegram::TelegramMsg;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_that_cannot_reach_telegram_is_shown_failing_with_what_to_do() {
    let world = World::builder(Script::new().rule(Rule::echo()))
        .agent_with_bot("ada", "", "6161:AAH-bots-browser-token-ada-01", &[42], &[])
        .agent_with_bot("bea", "", "6262:AAH-bots-browser-token-bea-02", &[42], &[])
        .config_extra(
            "[telegram]\nboot_stagger = \"50ms\"\npoll_timeout = \"2s\"\nstale_grace = \"2m\"\n\
             degraded_retry = \"1s\"",
        )
        .start()
        .await;
    let (base, http) = world.harness.studio_http().await;
    let readyz = || {
        let (http, url) = (http.clone(), format!("{base}/readyz"));
        async move {
            let answer = http.get(url).send().await.map_err(|e| e.to_string())?;
            let status = answer.status().as_u16();
            Ok::<_, String>((status, answer.text().await.unwrap_or_default()))
        }
    };
    wait_until(Duration::from_secs(20), "both bots online", || async {
        matches!(readyz().await, Ok((200, _)))
    })
    .await;

    // Every connection of bea's bot is dropped from now on; its restart cannot get online.
    world.fake.reset_connections(world.bot("bea"), 100_000);
    world
        .harness
        .daemon()
        .registry
        .lookup(&clawvisor::protocol::telegram::name("bea"))
        .expect("bea's bot")
        .cast(TelegramMsg::Panic(
            "browser test: the network goes away".into(),
        ))
        .unwrap();
    let waiting = wait_until(
        Duration::from_secs(20),
        "/readyz to name bea's bot",
        || async {
            match readyz().await {
                Ok((503, body))
                    if body.contains("bot:bea (")
                        && body.contains("can't reach Telegram")
                        && !body.contains("bot:ada") =>
                {
                    Ok(body)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    eprintln!("readyz: {waiting}");

    let browser = Browser::launch().await;
    let link = clawvisor::studio::access::login_link(world.harness.store(), &base, "cli")
        .await
        .unwrap();
    browser.client.goto(&link).await.unwrap();
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
    // The bot's row says failing and why; the queue asks for the operator, in a plain sentence
    // first. (Read by script: the page re-renders live, so an element found may be replaced.)
    browser
        .wait_until(
            "bea's bot shown failing, with the reason",
            "document.querySelector('[data-bot=\"bea\"]')?.textContent.includes('failing')\
             && document.querySelector('[data-bot=\"bea\"]')?.textContent.includes(\"can't reach Telegram: the connection failed\")",
        )
        .await;
    browser
        .wait_until(
            "the operator asked to look at bea's bot",
            "[...document.querySelectorAll('[data-attention=\"bot\"]')]\
             .some((item) => item.textContent.startsWith('The bot of bea is not working (failing): bot'))",
        )
        .await;
    // The health card agrees with `/readyz`: not "healthy" while a bot cannot get online.
    browser
        .wait_until(
            "the health card names bea's bot",
            "document.querySelector('[data-health-card=\"bots-failing\"]')?.textContent.includes('bea')",
        )
        .await;
    assert_eq!(
        browser
            .js("return document.querySelector('[data-bot=\"ada\"]').textContent.includes('failing')")
            .await,
        serde_json::json!(false),
        "ada's bot is not failing"
    );
    browser.screenshot("bot-failing").await;
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.assert_no_sideways_scroll("overview").await;
    browser.screenshot("phone-bot-failing").await;
    browser.close().await;
    world.harness.stop().await;
}

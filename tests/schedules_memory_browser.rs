//! The Schedules and Memory pages in a real headless Chromium against the real daemon, clicked
//! through as an operator would. Schedules: the form offers the agent's people and chats by name
//! with the owner's private chat preselected and the daemon's zone filled in; the job created
//! there is run now, its answer arrives in the owner's Telegram chat (the fake Bot API), its last
//! run links to the agent's run, and it is edited on its own page (a new time, the answer moved to
//! the family group). Memory: a fact added, found by another form of its words, and edited; a
//! household switched from full text to a local model (issue #33): the page says how search
//! works, shows its memories being re-read for the model, and "my dentist" then finds
//! "Dr. Weber's practice". Desktop and phone (390×844) screenshots of each step go to
//! `<target>/tmp/studio-screenshots/` (`schedules-*`, `memory-*`, `phone-*`).

mod browser;

use std::time::Duration;

use browser::{Browser, WAIT};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use fantoccini::Locator;
use serde_json::json;

const OWNER: i64 = 601;
const FAMILY: i64 = -500;
const DAEMON_ZONE: &str = "Pacific/Auckland";

/// Ada with a bot, claimed by Olivia, who has also talked to ada in the "Family" group.
async fn household() -> World {
    let script = Script::new()
        .rule(
            Rule::text("Time to water the plants, Olivia!")
                .delay(Duration::from_millis(300))
                .when_last_user_contains("water"),
        )
        .rule(Rule::text("Hello, family."));
    let world = World::builder(script)
        .agent_with_bot("ada", "", "4444:AAH-schedules-browser-token-01", &[], &[])
        .env("CLAWVISOR_TIMEZONE", DAEMON_ZONE)
        .start()
        .await;
    world.fake.set_user(OWNER, "Olivia", None);
    world.fake.set_chat_title(FAMILY, "Family");
    let bot = world.bot("ada");
    let code = wait_until(WAIT, "ada's claim code", || async {
        world
            .store()
            .read(|conn| clawvisor::store::people::claim(conn, "ada"))
            .await
            .unwrap()
            .map(|claim| claim.code)
    })
    .await;
    world
        .fake
        .push_message(bot, OWNER, OWNER, &format!("/start {code}"));
    wait_until(WAIT, "Olivia owns ada's bot", || async {
        world
            .store()
            .read(|conn| clawvisor::store::people::owner(conn, "ada"))
            .await
            .unwrap()
            .is_some()
    })
    .await;
    world
        .fake
        .push_message(bot, FAMILY, OWNER, "@ada_bot hello everyone");
    world
        .fake
        .wait_for_sent(bot, |sent| sent.chat_id == FAMILY, WAIT)
        .await
        .expect("ada answers in the family group");
    world
}

/// The stored job named `name`: (expression, target chat).
async fn stored_job(world: &World, name: &'static str) -> Option<(String, Option<String>)> {
    world
        .store()
        .read(move |conn| {
            use rusqlite::OptionalExtension;
            Ok(conn
                .query_row(
                    "SELECT expression, target_chat FROM jobs WHERE name = ?1",
                    [name],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?)
        })
        .await
        .unwrap()
}

/// Clicks the element `css` matches as soon as it can be clicked: a list redrawn by a live
/// event, or a toast over the button, only delays the click.
async fn click(browser: &Browser, css: &str) {
    wait_until(WAIT, &format!("`{css}` is clicked"), || async {
        match browser.client.find(Locator::Css(css)).await {
            Ok(element) => element.click().await.is_ok(),
            Err(_) => false,
        }
    })
    .await
}

/// Scrolls the element `css` matches to the top of the screen (for a screenshot of it).
async fn scroll_to(browser: &Browser, css: &str) {
    browser
        .client
        .execute(
            &format!(
                "document.querySelector('{css}').scrollIntoView({{block: 'start'}}); return 1;"
            ),
            vec![],
        )
        .await
        .unwrap();
}

async fn value_of(browser: &Browser, css: &str) -> serde_json::Value {
    browser
        .client
        .execute(
            &format!("return document.querySelector('{css}').value;"),
            vec![],
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_made_in_studio_reaches_the_owner_runs_now_links_its_run_and_is_edited() {
    let world = household().await;
    let bot = world.bot("ada");
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;

    // The form: the owner's private chat preselected by name, the family group offered, the
    // daemon's zone (not the browser's) and "run once when back" filled in.
    browser.open("schedules").await;
    browser
        .wait_for("#sched-target option[value=\"tg:-500\"]")
        .await;
    assert_eq!(value_of(&browser, "#sched-target").await, json!("tg:601"));
    let offered = browser
        .wait_for("#sched-target")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        offered.contains("Olivia — private chat (owner)") && offered.contains("Family — group"),
        "{offered}"
    );
    assert_eq!(
        value_of(&browser, "#sched-timezone").await,
        json!(DAEMON_ZONE)
    );
    assert_eq!(value_of(&browser, "#sched-missed").await, json!("run_once"));
    let purpose = browser.wait_for("#schedules-purpose").await;
    assert!(purpose.text().await.unwrap().contains("send its answer"));
    for (css, text) in [
        ("#sched-name", "plants"),
        ("#sched-prompt", "Remind me to water the plants"),
        ("#sched-expression", "0 9 * * *"),
    ] {
        browser.wait_for(css).await.send_keys(text).await.unwrap();
    }
    browser.screenshot("schedules-form").await;
    click(&browser, "#sched-create").await;
    let row = browser.wait_for("[data-job][data-status=\"active\"]").await;
    assert!(
        row.text().await.unwrap().contains("Olivia — private chat"),
        "the list says where the answer goes"
    );
    assert_eq!(
        stored_job(&world, "plants").await,
        Some(("0 9 * * *".to_string(), Some("tg:601".to_string())))
    );
    browser.screenshot("schedules-created").await;

    // Run now: the answer arrives in Olivia's Telegram chat; the list shows the run, linked.
    click(&browser, "[data-job] button[data-action=\"run\"]").await;
    world
        .fake
        .wait_for_sent(
            bot,
            |sent| sent.chat_id == OWNER && sent.visible_text.contains("water the plants"),
            WAIT,
        )
        .await
        .expect("the answer reaches the owner's chat");
    browser
        .wait_for("[data-job] [data-run-status=\"succeeded\"] a[data-run-link]")
        .await;
    browser.screenshot("schedules-ran").await;

    // Its own page: edit the time and move the answers to the family group.
    click(&browser, "[data-job] a[href^=\"#/schedules/\"]").await;
    browser
        .wait_for("[data-page=\"schedules\"][data-loaded=\"true\"] #schedule-edit")
        .await;
    browser.wait_for("#edit-target[data-loaded=\"true\"]").await;
    browser.screenshot("schedule-detail").await;
    let expression = browser.wait_for("#edit-expression").await;
    expression.clear().await.unwrap();
    expression.send_keys("30 8 * * *").await.unwrap();
    browser
        .wait_for("#edit-target")
        .await
        .select_by_value("tg:-500")
        .await
        .unwrap();
    click(&browser, "#edit-save").await;
    browser.wait_for("#edit-status .saved").await;
    wait_until(WAIT, "the edit is stored", || async {
        stored_job(&world, "plants").await
            == Some(("30 8 * * *".to_string(), Some("tg:-500".to_string())))
    })
    .await;
    browser
        .wait_until(
            "the page says where the answers now go",
            "document.querySelector('[data-job]').textContent.includes('Family — group')",
        )
        .await;
    scroll_to(&browser, "#schedule-edit").await;
    browser.screenshot("schedule-edited").await;

    // The history links to the agent's run.
    click(
        &browser,
        "[data-history][data-trigger=\"manual\"] a[data-run-link]",
    )
    .await;
    browser
        .wait_for("[data-page=\"runs\"][data-loaded=\"true\"]")
        .await;
    let url = browser.client.current_url().await.unwrap();
    assert!(
        url.fragment().unwrap_or_default().starts_with("/runs/"),
        "{url}"
    );
    browser.screenshot("schedule-run").await;

    // A phone: the list and the job's page fit the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("schedules").await;
    browser.wait_for("[data-job]").await;
    browser.assert_no_sideways_scroll("schedules").await;
    browser.screenshot("phone-schedules").await;
    click(&browser, "[data-job] a[href^=\"#/schedules/\"]").await;
    browser.wait_for("#edit-target[data-loaded=\"true\"]").await;
    browser.assert_no_sideways_scroll("schedule detail").await;
    browser.screenshot("phone-schedule-detail").await;
    scroll_to(&browser, "[data-history]").await;
    browser.screenshot("phone-schedule-history").await;
    scroll_to(&browser, "#schedule-edit").await;
    browser.screenshot("phone-schedule-edit").await;
    let errors = browser
        .client
        .execute("return document.querySelectorAll('.error').length;", vec![])
        .await
        .unwrap();
    assert_eq!(errors, json!(0), "a page shows an error");

    browser.close().await;
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_is_added_found_by_another_form_of_its_words_and_edited() {
    let world = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent("ada", "")
        .start()
        .await;
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;

    browser.open("memory").await;
    let purpose = browser.wait_for("#memory-purpose").await;
    assert!(purpose.text().await.unwrap().contains("remember"));
    browser
        .wait_for("#memory-add-owner[data-loaded=\"true\"]")
        .await
        .select_by_value("ada")
        .await
        .unwrap();
    browser
        .wait_for("#memory-add-text")
        .await
        .send_keys("Anna plants tomatoes every spring")
        .await
        .unwrap();
    click(&browser, "#memory-add").await;
    browser.wait_for("#memory-add-status .saved").await;
    browser
        .wait_until(
            "the new memory is listed",
            "document.querySelector('#memory-list [data-memory]')?.textContent.includes('Anna plants tomatoes')",
        )
        .await;
    browser.screenshot("memory-added").await;

    // Search: "planting" finds "plants".
    browser
        .wait_for("#memory-q")
        .await
        .send_keys("planting")
        .await
        .unwrap();
    click(&browser, "#memory-search").await;
    browser
        .wait_until(
            "the search finds the memory",
            "document.querySelector('#memory-results [data-memory]')?.textContent.includes('Anna plants tomatoes')",
        )
        .await;
    browser.screenshot("memory-search").await;

    // Edit: the text changes in place, the card says it was edited.
    click(
        &browser,
        "#memory-list [data-memory] button[data-action=\"edit\"]",
    )
    .await;
    let input = browser
        .wait_for("#memory-list [data-memory] form.memory-edit textarea")
        .await;
    browser.screenshot("memory-editing").await;
    input.clear().await.unwrap();
    input
        .send_keys("Anna plants basil every spring")
        .await
        .unwrap();
    click(
        &browser,
        "#memory-list [data-memory] button[data-action=\"save\"]",
    )
    .await;
    browser
        .wait_until(
            "the edited text and its mark are shown",
            "[...document.querySelectorAll('#memory-list [data-memory]')].some((c) => c.textContent.includes('Anna plants basil') && c.textContent.includes('edited'))",
        )
        .await;
    let edited_by: Option<String> = world
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT edited_by FROM memory_facts WHERE text = 'Anna plants basil every spring'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(edited_by.as_deref(), Some("operator (studio)"));
    browser.screenshot("memory-edited").await;

    // A phone: the page and the editor fit the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("memory").await;
    browser.wait_for("#memory-list [data-memory]").await;
    browser.assert_no_sideways_scroll("memory").await;
    browser.screenshot("phone-memory").await;
    click(
        &browser,
        "#memory-list [data-memory] button[data-action=\"edit\"]",
    )
    .await;
    browser
        .wait_for("#memory-list [data-memory] form.memory-edit textarea")
        .await;
    browser.assert_no_sideways_scroll("memory editor").await;
    browser.screenshot("phone-memory-edit").await;

    browser.close().await;
    world.harness.stop().await;
}

/// Memories stored in full-text mode before the switch to a local model.
const STORED_BEFORE: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_to_a_local_model_shows_the_mode_and_the_rereading_and_finds_by_meaning() {
    // Full text first: the page says search goes by words; memories pile up.
    let world = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent("ada", "")
        .start()
        .await;
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;
    browser.open("memory").await;
    browser
        .wait_until(
            "the mode says search goes by words",
            "document.querySelector('#memory-mode [data-mode=\"full_text\"]')?.textContent.includes('by their words only')",
        )
        .await;
    browser.screenshot("memory-mode-full-text").await;
    world
        .store()
        .write(|conn| {
            let now = clawvisor::clock::now_ms();
            for index in 0..STORED_BEFORE {
                let text = if index == 0 {
                    "Dr. Weber's practice cleans our teeth twice a year.".to_string()
                } else {
                    format!("Household note {index}: the spare key number {index} hangs in hook {index}.")
                };
                clawvisor::store::memory::insert(
                    conn,
                    &clawvisor::store::memory::NewFact {
                        owner: "ada".into(),
                        class: "durable".into(),
                        sensitivity: "normal".into(),
                        source: "user_said".into(),
                        chat: None,
                        text,
                        run_id: None,
                        message_id: None,
                        surprise: None,
                        embedding: None,
                    },
                    now,
                )?;
            }
            Ok(())
        })
        .await
        .unwrap();
    browser.close().await;
    let dir = world.harness.stop().await;

    // The same household with a local model: the memories are re-read, visibly.
    let model = clawvisor::testkit::test_model::minilm_dir();
    let world = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent("ada", "")
        .config_extra(&format!(
            "[memory]\nembeddings = \"local\"\nlocal_model = \"{}\"\n",
            model.display()
        ))
        .dir(dir)
        .start()
        .await;
    let browser = Browser::launch().await;
    browser.log_in(&world.harness).await;
    browser.open("memory").await;
    browser.wait_for("#memory-mode [data-mode=\"local\"]").await;
    // Whatever the re-reading shows first (running on a slow machine, done on a fast one).
    browser.screenshot("memory-mode-local-rereading").await;
    browser
        .wait_until(
            "the page says every memory was re-read",
            &format!(
                "document.querySelector('#memory-reindex[data-running=\"false\"]')?.textContent.includes('All {STORED_BEFORE} memories')"
            ),
        )
        .await;
    let line = browser.wait_for("#memory-mode-line").await;
    assert!(line.text().await.unwrap().contains("on this computer"));
    browser.screenshot("memory-mode-local").await;
    browser.type_into("#memory-q", "my dentist").await;
    click(&browser, "#memory-search").await;
    browser
        .wait_until(
            "a search by meaning finds the dentist",
            "document.querySelector('#memory-results [data-memory]')?.textContent.includes('Dr. Weber')",
        )
        .await;
    browser.screenshot("memory-local-search").await;

    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("memory").await;
    browser.wait_for("#memory-mode [data-mode=\"local\"]").await;
    browser.click("#memory-mode summary").await;
    browser
        .assert_no_sideways_scroll("memory (local mode)")
        .await;
    browser.screenshot("phone-memory-mode-local").await;
    browser.close().await;
    world.harness.stop().await;
}

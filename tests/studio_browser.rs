//! Studio in a real headless Chromium (driven through ChromeDriver) against the real daemon on
//! loopback: logging in with the one-time link, the Overview tree updating live when a bot is
//! made to crash, Chat streaming an answer from the scripted model (and showing what another
//! device said in the same conversation), an approval appearing in the inbox without a reload and
//! approving it completing the run, and a schedule created with its preview; pages refreshing live on changes made elsewhere (an agent's settings changed through
//! the API while the Agents page is open, without losing what the operator typed; a skill toggled
//! while the Skills page is open; an audit row appended while the Audit page is open); the People
//! page showing an unclaimed bot's code, then its owner once claimed, the operator approving a
//! friend's pairing request and blocking a stranger (who then gets no answer); a browser
//! approval showing the page's screenshot on the Approvals page (issue #32); and, on a
//! phone-sized viewport (390×844), no page wider than the screen. A screenshot of every page is
//! written to `<target>/tmp/studio-screenshots/` (`phone-*.png` for the phone viewport).
//!
//! The browser itself is `tests/browser/` (Chromium and ChromeDriver from Debian's packages).

mod browser;

use std::time::Duration;

use browser::{Browser, WAIT};
use clawvisor::protocol::telegram::TelegramMsg;
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::test_site::TestSite;
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World as TestWorld;
use fantoccini::Locator;
use serde_json::json;

/// The daemon: agent `ada` with a bot on the fake Telegram, a scripted model, two bundled skills
/// (`journal`, usable by ada; `runner`, which needs the shell ada lacks), Studio on loopback.
struct World {
    world: TestWorld,
    base: String,
    http: reqwest::Client,
}

impl std::ops::Deref for World {
    type Target = TestWorld;
    fn deref(&self) -> &TestWorld {
        &self.world
    }
}

impl World {
    /// A change made outside the browser (as a script or another tab would).
    async fn patch(&self, path: &str, body: serde_json::Value) {
        let response = self
            .http
            .patch(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "PATCH {path}");
    }
}

fn write_skill(root: &std::path::Path, name: &str, front_matter: &str) {
    let dir = root.join("skills").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\n{front_matter}---\nInstructions of {name}.\n"),
    )
    .unwrap();
}

async fn world() -> World {
    let script = Script::new()
        .rule(Rule::text("The note is written.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "note.txt", "content": "milk", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("note"),
        )
        .rule(
            Rule::text("Good morning! Here is a streamed answer in several small pieces.")
                .chunk_delay(Duration::from_millis(30)),
        );
    let dir = ScratchDir::new("studio-browser-daemon").unwrap();
    write_skill(
        dir.path(),
        "journal",
        "description: Keeps a dated journal.\ntools: [write_file]\nrisk: medium\nlicense: MIT\n",
    );
    write_skill(
        dir.path(),
        "runner",
        "description: Runs commands.\ntools: [shell]\n",
    );
    let world = TestWorld::builder(script)
        .agent_with_bot(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"\ndaily_budget_usd = 5.0\ndaily_token_budget = 1000000\nfallback = [{ provider = \"scripted\", model = \"house-model\" }]",
            "4242:AAH-browser-test-token-0001",
            &[],
            &[],
        )
        .dir(dir)
        .start()
        .await;
    // Scripts on the server call the API with the daemon's local access token.
    let (base, http) = world.harness.studio_http().await;
    World { world, base, http }
}

async fn log_in(browser: &Browser, world: &World) {
    let link = clawvisor::studio::access::login_link(world.harness.store(), &world.base, "cli")
        .await
        .unwrap();
    browser.client.goto(&link).await.unwrap();
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_logs_in_updates_live_chats_approves_and_schedules() {
    let world = world().await;
    let browser = Browser::launch().await;

    // Without a session the console says how to log in.
    browser.client.goto(&world.base).await.unwrap();
    let login = browser.wait_for("#login").await;
    assert!(login.text().await.unwrap().contains("studio-link"));
    browser.screenshot("login").await;

    // The one-time link logs in and lands on the Overview with the tree.
    log_in(&browser, &world).await;
    let bot = browser
        .wait_for("li[data-actor=\"bot:ada\"][data-status=\"running\"]")
        .await;
    assert_eq!(
        bot.attr("data-restarts").await.unwrap().as_deref(),
        Some("0")
    );
    browser.wait_for("#live[data-state=\"open\"]").await;
    // The model provider was asked for its model list and answered.
    browser
        .wait_for("#providers [data-provider=\"scripted\"][data-ok=\"true\"]")
        .await;
    browser.screenshot("overview").await;
    // The shell sandbox opens to one card per profile, each protection on or off.
    browser.click("details[data-sandbox] > summary").await;
    let profiles = browser
        .js("return document.querySelectorAll('details[data-sandbox][open] [data-profile]').length")
        .await;
    assert_eq!(profiles.as_i64(), Some(4), "one card per profile");
    let layers_off = browser
        .js("return document.querySelectorAll('details[data-sandbox] [data-layer] .badge.t-warn').length")
        .await;
    assert_eq!(
        layers_off.as_i64() == Some(0),
        clawvisor::sandbox::protections().complete(),
        "a protection is shown off exactly when the machine lacks it"
    );
    browser.screenshot("overview-sandbox").await;

    // A child crashes: the tree shows the restart without a reload.
    let marker = browser
        .client
        .execute("window.__no_reload = 1; return 1;", vec![])
        .await
        .unwrap();
    assert_eq!(marker, json!(1));
    world
        .harness
        .daemon()
        .registry
        .lookup(&clawvisor::protocol::telegram::name("ada"))
        .expect("the bot")
        .cast(TelegramMsg::Panic("browser test".into()))
        .unwrap();
    browser
        .wait_for("li[data-actor=\"bot:ada\"][data-restarts=\"1\"][data-status=\"running\"]")
        .await;
    browser
        .wait_until("no reload happened", "window.__no_reload === 1")
        .await;
    browser.screenshot("overview-after-crash").await;

    // Chat streams the scripted model's answer.
    browser.open("chat").await;
    browser.wait_for("#chat-agent").await;
    browser
        .wait_for("#chat-input")
        .await
        .send_keys("good morning")
        .await
        .unwrap();
    browser.wait_for("#chat-send").await.click().await.unwrap();
    browser
        .wait_until(
            "a partial answer is shown while streaming",
            "document.querySelector('.msg.assistant[data-streaming=\"true\"]') && document.querySelector('.msg.assistant').textContent.includes('Good morning')",
        )
        .await;
    let done = browser.wait_for(".msg.assistant[data-done=\"true\"]").await;
    assert!(
        done.text()
            .await
            .unwrap()
            .contains("Here is a streamed answer in several small pieces."),
        "{}",
        done.text().await.unwrap()
    );
    browser.screenshot("chat").await;
    // Said in the same conversation elsewhere (another device): shown without a reload, and the
    // answer after it too.
    world
        .harness
        .send(
            "ada",
            &clawvisor::domain::ChatKey::studio("operator"),
            "hello from my phone",
        )
        .unwrap();
    browser
        .wait_until(
            "the other device's message and its answer are shown",
            "[...document.querySelectorAll('.chat-log .msg')].map((m) => m.textContent).join('|').match(/hello from my phone.*\\|.*streamed answer/)",
        )
        .await;
    browser
        .wait_until("no reload happened", "window.__no_reload === 1")
        .await;

    // An approval requested by a run appears in the inbox without a reload; approving it
    // completes the run.
    browser.open("approvals").await;
    browser.screenshot("approvals-empty").await;
    let mut outputs = world
        .harness
        .listen(&clawvisor::domain::ChatKey::cli("op"))
        .await
        .unwrap();
    world
        .harness
        .send(
            "ada",
            &clawvisor::domain::ChatKey::cli("op"),
            "write the shopping note",
        )
        .unwrap();
    let approval = browser.wait_for("[data-approval]").await;
    assert!(
        approval.text().await.unwrap().contains("note.txt"),
        "the exact action is shown: {}",
        approval.text().await.unwrap()
    );
    browser.screenshot("approvals").await;
    approval
        .find(Locator::Css("button[data-action=\"approve\"]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let reply = clawvisor::testkit::harness::wait_reply(&mut outputs, Duration::from_secs(30))
        .await
        .expect("the run completes");
    assert_eq!(reply.text, "The note is written.");
    browser
        .wait_until(
            "the inbox empties",
            "!document.querySelector('[data-approval]')",
        )
        .await;

    // Runs: the list and one run's steps.
    browser.open("runs").await;
    browser.wait_for("[data-run]").await.click().await.unwrap();
    browser.wait_for(".step[data-kind=\"decision\"]").await;
    browser.screenshot("run-detail").await;

    // A schedule is created after its preview was shown.
    browser.open("schedules").await;
    browser.wait_for("#sched-agent option[value=\"ada\"]").await;
    browser
        .wait_for("#sched-name")
        .await
        .send_keys("standup")
        .await
        .unwrap();
    browser
        .wait_for("#sched-prompt")
        .await
        .send_keys("Ask me what I plan today")
        .await
        .unwrap();
    browser
        .wait_for("#sched-kind")
        .await
        .select_by_value("cron")
        .await
        .unwrap();
    let expression = browser.wait_for("#sched-expression").await;
    expression.clear().await.unwrap();
    expression.send_keys("0 9 * * 1-5").await.unwrap();
    browser
        .wait_for("#sched-preview-btn")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "five next fire times are previewed",
            "document.querySelectorAll('#sched-preview li').length === 5",
        )
        .await;
    browser.screenshot("schedules-preview").await;
    browser
        .wait_for("#sched-create")
        .await
        .click()
        .await
        .unwrap();
    let job = browser.wait_for("[data-job][data-status=\"active\"]").await;
    assert!(job.text().await.unwrap().contains("standup"));
    let stored: i64 = world
        .harness
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM jobs WHERE name = 'standup' AND expression = '0 9 * * 1-5'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(stored, 1);
    browser.screenshot("schedules").await;

    // Every other page loads (and is photographed).
    for page in [
        "agents", "people", "memory", "mcp", "handoffs", "audit", "costs", "skills",
    ] {
        browser.open(page).await;
        browser.screenshot(page).await;
    }
    let errors = browser
        .client
        .execute("return document.querySelectorAll('.error').length;", vec![])
        .await
        .unwrap();
    assert_eq!(errors, json!(0), "a page shows an error");

    // Agents: a change made through the API shows without a reload; an untouched card is redrawn
    // (its form too), a card being edited keeps what the operator typed.
    browser.open("agents").await;
    browser
        .client
        .execute("window.__no_reload = 2; return 1;", vec![])
        .await
        .unwrap();
    world
        .patch("/api/v1/agents/ada", json!({"model": "other-model"}))
        .await;
    browser
        .wait_until(
            "the new model is shown in the untouched card",
            "document.querySelector('[data-agent=\"ada\"] input[name=\"model\"]').value === 'other-model'",
        )
        .await;
    let model = browser
        .wait_for("[data-agent=\"ada\"] input[name=\"model\"]")
        .await;
    model.clear().await.unwrap();
    model.send_keys("typed-by-the-operator").await.unwrap();
    world
        .patch("/api/v1/agents/ada", json!({"autonomy": "supervised"}))
        .await;
    browser
        .wait_until(
            "the new autonomy is shown",
            "document.querySelector('[data-agent=\"ada\"] [data-field=\"autonomy\"]').textContent === 'supervised'",
        )
        .await;
    let typed = browser
        .client
        .execute(
            "return document.querySelector('[data-agent=\"ada\"] input[name=\"model\"]').value;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        typed,
        json!("typed-by-the-operator"),
        "the typed text was lost"
    );
    browser
        .wait_until("no reload happened", "window.__no_reload === 2")
        .await;
    browser.screenshot("agents-live").await;
    world
        .patch(
            "/api/v1/agents/ada",
            json!({"model": "scripted-model", "autonomy": "require_approval"}),
        )
        .await;

    // Time zones: a person's zone chosen elsewhere (as `/timezone` in the chat does) shows
    // without a reload; the operator changes it in the card, and a typo is refused with the
    // close match while the typed text stays.
    world
        .patch(
            "/api/v1/users/42/timezone",
            json!({"timezone": "Europe/Berlin"}),
        )
        .await;
    let zone_field = "document.querySelector('[data-user=\"42\"] input[name=\"timezone\"]')";
    browser
        .wait_until(
            "the person's zone is shown",
            &format!("{zone_field}?.value === 'Europe/Berlin'"),
        )
        .await;
    let input = browser
        .wait_for("[data-user=\"42\"] input[name=\"timezone\"]")
        .await;
    input.clear().await.unwrap();
    input.send_keys("Asia/Tokio").await.unwrap();
    browser
        .wait_for("[data-user=\"42\"] button[type=\"submit\"]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the typo is refused with a close match",
            "[...document.querySelectorAll('.toast')].some((t) => t.textContent.includes('did you mean Asia/Tokyo?'))",
        )
        .await;
    browser
        .wait_until(
            "the typed text stays",
            &format!("{zone_field}.value === 'Asia/Tokio'"),
        )
        .await;
    input.clear().await.unwrap();
    input.send_keys("Asia/Tokyo").await.unwrap();
    browser
        .wait_for("[data-user=\"42\"] button[type=\"submit\"]")
        .await
        .click()
        .await
        .unwrap();
    wait_until(WAIT, "the person's zone is stored", || async {
        let stored = world
            .world
            .harness
            .store()
            .read(|conn| clawvisor::store::timezones::user_timezone(conn, 42))
            .await
            .unwrap();
        stored.as_deref() == Some("Asia/Tokyo")
    })
    .await;
    browser.screenshot("agents-timezones").await;

    // Skills: validation status, what a skill needs, the reason beside a disabled checkbox, the
    // front-matter keys clawvisor keeps; a toggle made through the API shows without a reload.
    browser.open("skills").await;
    let runner = browser
        .wait_for("[data-skill=\"runner\"] [data-skill-agent=\"ada\"]")
        .await;
    assert!(
        runner
            .find(Locator::Css("input[data-skill-toggle]"))
            .await
            .unwrap()
            .prop("disabled")
            .await
            .unwrap()
            .as_deref()
            == Some("true"),
        "a skill ada cannot use has a disabled checkbox"
    );
    let reason = runner
        .find(Locator::Css(".skill-reason"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        reason.contains("shell"),
        "the reason is beside it: {reason}"
    );
    let journal = browser.wait_for("[data-skill=\"journal\"]").await;
    let text = journal.text().await.unwrap();
    for shown in ["license: MIT", "write_file", "medium", "valid"] {
        assert!(text.contains(shown), "`{shown}` missing from: {text}");
    }
    world
        .patch(
            "/api/v1/agents/ada/skills/journal",
            json!({"enabled": true}),
        )
        .await;
    browser
        .wait_for(
            "[data-skill=\"journal\"] [data-skill-agent=\"ada\"][data-usable=\"true\"] input[data-skill-toggle]:checked",
        )
        .await;
    browser
        .wait_until("no reload happened", "window.__no_reload === 2")
        .await;
    browser.screenshot("skills-live").await;

    // Audit: a row appended by a run shows on top without a reload.
    browser.open("audit").await;
    let newest = browser
        .client
        .execute(
            "return Number(document.querySelector('[data-entry]').dataset.entry);",
            vec![],
        )
        .await
        .unwrap()
        .as_i64()
        .unwrap();
    let chat = clawvisor::domain::ChatKey::cli("phone");
    world
        .harness
        .send("ada", &chat, "write the shopping note again")
        .unwrap();
    browser
        .wait_until(
            "the approval request is on top of the audit log",
            &format!(
                "Number(document.querySelector('[data-entry]').dataset.entry) > {newest} && document.querySelector('[data-entry]').textContent.includes('approval.requested')"
            ),
        )
        .await;
    browser
        .wait_until("no reload happened", "window.__no_reload === 2")
        .await;

    // A phone: no page is wider than the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    let width = browser
        .client
        .execute("return window.innerWidth;", vec![])
        .await
        .unwrap();
    assert!(
        width.as_i64().unwrap() <= 400,
        "the viewport is phone-sized: {width}"
    );
    browser.open("overview").await;
    browser.assert_no_sideways_scroll("overview").await;
    browser.screenshot("phone-overview").await;
    browser.click("details[data-sandbox] > summary").await;
    browser
        .wait_for("details[data-sandbox][open] [data-profile]")
        .await;
    browser.assert_no_sideways_scroll("overview").await;
    browser.screenshot("phone-overview-sandbox").await;
    browser.open("approvals").await;
    browser.wait_for("[data-approval]").await;
    browser.assert_no_sideways_scroll("approvals").await;
    browser.screenshot("phone-approvals").await;
    for page in [
        "agents",
        "people",
        "chat",
        "runs",
        "schedules",
        "memory",
        "mcp",
        "handoffs",
        "audit",
        "costs",
        "skills",
    ] {
        browser.open(page).await;
        browser.assert_no_sideways_scroll(page).await;
        browser.screenshot(&format!("phone-{page}")).await;
    }
    // Costs: ada's fallback model has no price, so it is listed as unpriced; ada's budgets show
    // as meters. Still no sideways scrolling.
    browser.open("costs").await;
    browser
        .wait_for("[data-unpriced-model=\"house-model\"]")
        .await;
    browser.wait_for("[data-budget-agent=\"ada\"] meter").await;
    browser.wait_for("#chart-tokens svg").await;
    browser.assert_no_sideways_scroll("costs").await;
    browser.screenshot("phone-costs-unpriced").await;
    browser.open("approvals").await;
    browser
        .wait_for("[data-approval] button[data-action=\"deny\"]")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_until(
            "the inbox empties",
            "!document.querySelector('[data-approval]')",
        )
        .await;

    browser.close().await;
    world.world.harness.stop().await;
}

/// The stored status of `user` for ada (`owner`, `allowed`, `blocked`), if any.
async fn person_status(world: &World, user: i64) -> Option<String> {
    world
        .harness
        .store()
        .read(move |conn| {
            Ok(clawvisor::store::people::person(conn, "ada", user)?
                .map(|person| person.status.as_str().to_string()))
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_people_page_shows_the_claim_and_pairs_a_friend_and_blocks_a_stranger() {
    const OWNER: i64 = 601;
    const FRIEND: i64 = 602;
    const STRANGER: i64 = 603;
    let world = world().await;
    for (user, name) in [(OWNER, "Olivia"), (FRIEND, "Fred"), (STRANGER, "Sam")] {
        world.fake.set_user(user, name, None);
    }
    let bot = world.bot("ada");
    let browser = Browser::launch().await;
    log_in(&browser, &world).await;

    // The unclaimed bot's code is on the People page.
    browser.open("people").await;
    let shown = browser
        .wait_for("[data-people-agent=\"ada\"] [data-claim-code]")
        .await;
    let code = shown.attr("data-claim-code").await.unwrap().unwrap();
    assert!(
        shown
            .text()
            .await
            .unwrap()
            .contains(&format!("/start {code}"))
    );
    browser.screenshot("people-unclaimed").await;
    browser
        .client
        .execute("window.__no_reload = 3; return 1;", vec![])
        .await
        .unwrap();

    // Claimed in the chat: the page shows the owner without a reload.
    world
        .fake
        .push_message(bot, OWNER, OWNER, &format!("/start {code}"));
    browser
        .wait_for("[data-people-agent=\"ada\"] [data-claim=\"claimed\"]")
        .await;
    browser
        .wait_for("[data-person=\"601\"][data-status=\"owner\"]")
        .await;

    // A friend and a stranger ask to pair; their requests show up live.
    for (user, text) in [(FRIEND, "hi, it's Fred"), (STRANGER, "let me in")] {
        world.fake.push_message(bot, user, user, text);
        world
            .fake
            .wait_for_sent(
                bot,
                |m| m.chat_id == user && m.visible_text.contains("approve code"),
                WAIT,
            )
            .await
            .expect("a pairing reply");
    }
    let request = |user: i64| {
        let world = &world;
        async move {
            let body: serde_json::Value = world
                .http
                .get(format!("{}/api/v1/people", world.base))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            body["agents"][0]["pending"]
                .as_array()
                .unwrap()
                .iter()
                .find(|request| request["user_id"] == user)
                .map(|request| request["code"].as_str().unwrap().to_string())
                .expect("a pending request")
        }
    };
    let (friend_code, stranger_code) = (request(FRIEND).await, request(STRANGER).await);
    browser
        .wait_for(&format!("[data-pairing=\"{stranger_code}\"]"))
        .await;
    browser.screenshot("people-requests").await;

    // The operator approves the friend ...
    browser
        .wait_for(&format!(
            "[data-pairing=\"{friend_code}\"] button[data-action=\"approve\"]"
        ))
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("[data-person=\"602\"][data-status=\"paired\"]")
        .await;
    assert_eq!(
        person_status(&world, FRIEND).await.as_deref(),
        Some("allowed")
    );
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == FRIEND && m.visible_text.contains("You're approved"),
            WAIT,
        )
        .await
        .expect("the friend is told");

    // ... and blocks the stranger, who from then on gets no answer at all.
    browser
        .wait_for(&format!(
            "[data-pairing=\"{stranger_code}\"] button[data-action=\"block\"]"
        ))
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("[data-person=\"603\"][data-status=\"blocked\"]")
        .await;
    assert_eq!(
        person_status(&world, STRANGER).await.as_deref(),
        Some("blocked")
    );
    let told = world
        .fake
        .sent(bot)
        .iter()
        .filter(|m| m.chat_id == STRANGER)
        .count();
    let pushed = world.fake.push_message(bot, STRANGER, STRANGER, "hello??");
    wait_until(WAIT, "the blocked stranger's message stored as ignored", || async {
        let update_id = pushed.update_id;
        world
            .harness
            .store()
            .read(move |conn| {
                Ok(conn.query_row(
                    "SELECT COUNT(*) FROM inbound_updates WHERE update_id = ?1 AND status = 'ignored' AND note LIKE 'blocked%'",
                    [update_id],
                    |row| row.get::<_, i64>(0),
                )?)
            })
            .await
            .unwrap()
            == 1
    })
    .await;
    assert_eq!(
        world
            .fake
            .sent(bot)
            .iter()
            .filter(|m| m.chat_id == STRANGER)
            .count(),
        told,
        "a blocked person hears nothing"
    );
    browser
        .wait_until("no reload happened", "window.__no_reload === 3")
        .await;
    browser.screenshot("people").await;

    // On a phone the page fits the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("people").await;
    browser.wait_for("[data-person=\"603\"]").await;
    browser.assert_no_sideways_scroll("people").await;
    browser.screenshot("phone-people").await;
    let errors = browser
        .client
        .execute("return document.querySelectorAll('.error').length;", vec![])
        .await
        .unwrap();
    assert_eq!(errors, json!(0), "the page shows an error");

    browser.close().await;
    world.world.harness.stop().await;
}

/// The Telegram user who owns the browser agent of the screenshot test.
const OWNER: i64 = 42;

/// Issue #32: a browser approval keeps the page's screenshot; the Approvals page shows it (the
/// picture opens full size), served by an authenticated route named by the approval's id only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approvals_page_shows_the_screenshot_of_a_browser_approval() {
    let site = TestSite::start().await.expect("site");
    let script = Script::new()
        .rule(
            Rule::text("Your tea is ordered.")
                .when_last_tool_result_contains("Your order is placed"),
        )
        .rule(
            Rule::tool_call("browser", json!({"action": "click", "ref": 2}).to_string())
                .when_last_tool_result_contains("Buy now"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                json!({"action": "open", "url": site.url("/order")}).to_string(),
            )
            .when_last_user_contains("buy tea"),
        );
    let world = TestWorld::builder(script)
        .agent_with_bot(
            "ada",
            "tools = [\"browser\"]\n",
            "777:AAH-browser-test-token-abcdef",
            &[OWNER],
            &[OWNER],
        )
        .config_extra("[tools]\nweb_fetch_allow_private = true\n")
        .start()
        .await;
    let bot = world.bot("ada");
    world.fake.push_message(
        bot,
        OWNER,
        OWNER,
        &format!("buy tea for me at {}", site.url("/order")),
    );
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.callback_data().iter().any(|d| d.starts_with("ap:")),
            Duration::from_secs(60),
        )
        .await
        .expect("the order asks first");

    // The API: the pending approval names its screenshot's route, which serves the PNG to an
    // authenticated client only; an id that is not an approval's shape names nothing.
    let (base, http) = world.harness.studio_http().await;
    let listed: serde_json::Value = http
        .get(format!("{base}/api/v1/approvals?status=pending"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    let approval = &listed["approvals"][0];
    let id = approval["id"].as_str().expect("an id").to_string();
    // The first line says in plain words what will happen, not which tool is used.
    let summary = approval["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("wants to click “Buy now” on 127.0.0.1 (page “Shop”)"),
        "{summary}"
    );
    let route = format!("/api/v1/approvals/{id}/screenshot");
    assert_eq!(approval["screenshot"].as_str(), Some(route.as_str()));
    let shot = http
        .get(format!("{base}{route}"))
        .send()
        .await
        .expect("screenshot");
    assert_eq!(shot.status(), 200);
    assert!(shot.bytes().await.expect("bytes").starts_with(b"\x89PNG"));
    let anonymous = reqwest::get(format!("{base}{route}")).await.expect("get");
    assert_eq!(anonymous.status(), 401, "only a logged-in operator sees it");
    let sideways = http
        .get(format!(
            "{base}/api/v1/approvals/..%2F..%2Fclawvisor.db/screenshot"
        ))
        .send()
        .await
        .expect("get");
    assert_eq!(sideways.status(), 404);

    // The console: the card shows the picture, which opens full size.
    let console = Browser::launch().await;
    let link = clawvisor::studio::access::login_link(world.harness.store(), &base, "cli")
        .await
        .expect("a login link");
    console.client.goto(&link).await.expect("log in");
    console
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
    for (name, phone) in [
        ("approvals-browser-screenshot", false),
        ("phone-approvals-browser-screenshot", true),
    ] {
        if phone {
            console
                .client
                .set_window_size(390, 844)
                .await
                .expect("phone size");
            console.client.refresh().await.expect("reload");
            console.wait_for("[data-page][data-loaded=\"true\"]").await;
        }
        console.open("approvals").await;
        let figure = format!("[data-approval=\"{id}\"] [data-screenshot=\"{id}\"]");
        console.wait_for(&format!("{figure} img")).await;
        console
            .wait_until(
                "the screenshot is shown",
                &format!("(() => {{ const img = document.querySelector('{figure} img'); return !!img && img.complete && img.naturalWidth > 100; }})()"),
            )
            .await;
        let href = console
            .js(&format!(
                "return document.querySelector('{figure} a').getAttribute('href');"
            ))
            .await;
        assert_eq!(href.as_str(), Some(route.as_str()));
        console
            .js(&format!(
                "document.querySelector('[data-approval=\"{id}\"]').scrollIntoView();"
            ))
            .await;
        let first_line = console
            .js(&format!(
                "return document.querySelector('[data-approval=\"{id}\"] .approval-summary').textContent;"
            ))
            .await;
        assert!(
            first_line
                .as_str()
                .is_some_and(|line| line.contains("click “Buy now” on 127.0.0.1 (page “Shop”)")),
            "{first_line}"
        );
        console.screenshot(name).await;
        console.assert_no_sideways_scroll("approvals").await;
    }
    console
        .click(&format!(
            "[data-approval=\"{id}\"] [data-action=\"approve\"]"
        ))
        .await;
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.visible_text.contains("Your tea is ordered."),
            Duration::from_secs(60),
        )
        .await
        .expect("the order is placed once approved");
    assert_eq!(site.orders().len(), 1, "ordered exactly once");
    console.close().await;
}

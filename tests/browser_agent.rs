//! The `browser` tool through a real daemon (scripted model, fake Bot API, real Chromium, the
//! testkit's local site): a login whose credentials the model never sees, approved with a
//! screenshot of the page; an order whose submit waits for approval; a download into `inbox/`;
//! audit rows; the idle close (Chromium's processes gone) and a crash (restarted on next use).
//! Studio's approvals page with a browser approval's screenshot: `tests/studio_browser.rs`.

use std::time::Duration;

use clawvisor::protocol::browser::Browser;
use clawvisor::testkit::fake_telegram::{AttachmentKind, SentMessage};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::test_site::{self, TestSite};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;

const OWNER: i64 = 42;

fn browser_call(arguments: serde_json::Value) -> String {
    arguments.to_string()
}

fn script(site: &TestSite) -> Script {
    Script::new()
        .rule(
            Rule::text("You are signed in; your balance is 42 euros.")
                .when_last_tool_result_contains("balance is 42"),
        )
        .rule(
            Rule::text("Your tea is ordered.")
                .when_last_tool_result_contains("Your order is placed"),
        )
        .rule(
            Rule::text("The report is in your inbox.").when_last_tool_result_contains("Downloaded"),
        )
        .rule(
            Rule::text("The browser failed.")
                .when_last_tool_result_contains("stopped unexpectedly"),
        )
        .rule(Rule::text("Done browsing.").when_last_tool_result_contains("Test site"))
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(serde_json::json!({"action": "login", "site": "127.0.0.1"})),
            )
            .when_last_tool_result_contains("Password"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(serde_json::json!({"action": "click", "ref": 2})),
            )
            .when_last_tool_result_contains("Buy now"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(serde_json::json!({"action": "click", "ref": 1})),
            )
            .when_last_tool_result_contains("Monthly visitors"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(serde_json::json!({"action": "open", "url": site.url("/login")})),
            )
            .when_last_user_contains("sign in"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(serde_json::json!({"action": "open", "url": site.url("/order")})),
            )
            .when_last_user_contains("buy tea"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(serde_json::json!({"action": "open", "url": site.url("/download")})),
            )
            .when_last_user_contains("the monthly report"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(
                    serde_json::json!({"action": "wait_for", "text": "never shown", "timeout": 60}),
                ),
            )
            .when_last_user_contains("wait"),
        )
        .rule(
            Rule::tool_call(
                "browser",
                browser_call(serde_json::json!({"action": "open", "url": site.url("/")})),
            )
            .when_last_user_contains("home"),
        )
}

async fn world(site: &TestSite, idle: &str) -> World {
    World::builder(script(site))
        .agent_with_bot("ada", "tools = [\"browser\"]\n", "777:AAH-browser-test-token-abcdef", &[OWNER], &[OWNER])
        .config_extra(&format!(
            "[tools]\nweb_fetch_allow_private = true\n[browser]\nidle_timeout = \"{idle}\"\n\
             [[browser.logins]]\nsite = \"127.0.0.1\"\nusername = \"{}\"\npassword_env = \"SITE_PASSWORD\"\n",
            test_site::USERNAME
        ))
        .env("SITE_PASSWORD", test_site::PASSWORD)
        .studio(false)
        .start()
        .await
}

async fn sent_containing(world: &World, needle: &str) -> SentMessage {
    let bot = world.bot("ada");
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains(needle),
            Duration::from_secs(60),
        )
        .await
        .unwrap_or_else(|| panic!("a message containing `{needle}`"))
}

/// Presses Approve on the newest approval request after message `after`; answers the request.
async fn approve_next(world: &World, after: i32) -> SentMessage {
    let bot = world.bot("ada");
    let request = world
        .fake
        .wait_for_sent(
            bot,
            |m| m.message_id > after && m.callback_data().iter().any(|d| d.starts_with("ap:")),
            Duration::from_secs(60),
        )
        .await
        .expect("an approval request with buttons");
    let id = request
        .callback_data()
        .iter()
        .find_map(|d| d.strip_prefix("ap:"))
        .expect("an id")
        .to_string();
    world
        .fake
        .push_callback(bot, OWNER, OWNER, request.message_id, &format!("ap:{id}"));
    request
}

fn photos_before(world: &World, message_id: i32) -> usize {
    world
        .fake
        .sent(world.bot("ada"))
        .iter()
        .filter(|m| m.message_id < message_id)
        .filter(|m| {
            m.attachment
                .as_ref()
                .is_some_and(|a| a.kind == AttachmentKind::Photo && a.bytes.starts_with(b"\x89PNG"))
        })
        .count()
}

async fn audit_count(world: &World, action: &'static str) -> i64 {
    world
        .store()
        .read(move |conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM audit_log WHERE action = ?1",
                [action],
                |r| r.get(0),
            )?)
        })
        .await
        .expect("audit count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_order_and_download_through_the_daemon_with_approvals_and_no_credentials_in_the_model()
 {
    let site = TestSite::start().await.expect("site");
    let world = world(&site, "5m").await;
    let bot = world.bot("ada");

    // A login: L2, asked with the page's screenshot; the tool fills the stored credentials.
    world
        .fake
        .push_message(bot, OWNER, OWNER, "please sign in to the site");
    let request = approve_next(&world, 0).await;
    assert!(
        request.visible_text.contains("log in to 127.0.0.1"),
        "{}",
        request.visible_text
    );
    assert!(
        request.visible_text.contains("Sign in"),
        "the page's title is shown: {}",
        request.visible_text
    );
    assert!(
        photos_before(&world, request.message_id) >= 1,
        "a screenshot of the page comes with the request"
    );
    sent_containing(&world, "balance is 42 euros").await;

    // An order: the submit button asks first, and nothing is bought while it waits.
    // The address is the user's own (the run read a logged-in page: an address nobody gave
    // would ask first, by the egress rule).
    world.fake.push_message(
        bot,
        OWNER,
        OWNER,
        &format!("buy tea for me at {}", site.url("/order")),
    );
    let last = world
        .fake
        .sent(bot)
        .last()
        .map(|m| m.message_id)
        .unwrap_or(0);
    let bot_request = world
        .fake
        .wait_for_sent(
            bot,
            |m| m.message_id > last && m.callback_data().iter().any(|d| d.starts_with("ap:")),
            Duration::from_secs(60),
        )
        .await
        .expect("the order asks first");
    assert!(
        bot_request
            .visible_text
            .contains("wants to click “Buy now” on 127.0.0.1 (page “Shop”)"),
        "the first line says what will happen, with the button's label and the page: {}",
        bot_request.visible_text
    );
    assert!(
        site.orders().is_empty(),
        "nothing is ordered before the approval"
    );
    assert!(photos_before(&world, bot_request.message_id) >= 2);
    let id = bot_request
        .callback_data()
        .iter()
        .find_map(|d| d.strip_prefix("ap:"))
        .expect("id")
        .to_string();
    world.fake.push_callback(
        bot,
        OWNER,
        OWNER,
        bot_request.message_id,
        &format!("ap:{id}"),
    );
    sent_containing(&world, "Your tea is ordered.").await;
    assert_eq!(site.orders().len(), 1, "ordered exactly once");

    // A download: a plain link click (no approval), the file lands in the workspace's inbox.
    world.fake.push_message(
        bot,
        OWNER,
        OWNER,
        &format!("get the monthly report from {}", site.url("/download")),
    );
    sent_containing(&world, "The report is in your inbox.").await;
    let inbox = world
        .harness
        .dir
        .path()
        .join("data/workspaces/ada/inbox/report.csv");
    assert_eq!(
        std::fs::read_to_string(&inbox).expect("the download is in inbox/"),
        test_site::REPORT_CSV
    );

    // The model never saw the credentials: not in any request it was sent.
    for request in world.llm.requests() {
        let text = request.to_string();
        assert!(
            !text.contains(test_site::PASSWORD),
            "the password reached the model"
        );
        assert!(
            !text.contains(test_site::USERNAME),
            "the user name reached the model"
        );
    }
    assert_eq!(audit_count(&world, "browser.login").await, 1);
    assert_eq!(audit_count(&world, "browser.click").await, 2);
    // The profile is under the data directory, never in the workspace.
    assert!(
        world
            .harness
            .dir
            .path()
            .join("data/browser/ada/chromium")
            .is_dir()
    );
    assert!(
        !world
            .harness
            .dir
            .path()
            .join("data/workspaces/ada/chromium")
            .exists()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_closes_when_idle_and_restarts_after_a_crash() {
    let site = TestSite::start().await.expect("site");
    let world = world(&site, "2s").await;
    let bot = world.bot("ada");
    let browser = Browser::new(&world.harness.daemon().registry, "ada");
    let status = wait_until(
        Duration::from_secs(20),
        "the browser actor runs",
        || async { browser.status().await.ok() },
    )
    .await;
    assert!(!status.open, "Chromium starts on first use only");

    world.fake.push_message(bot, OWNER, OWNER, "go home");
    sent_containing(&world, "Done browsing.").await;
    let pid = browser
        .status()
        .await
        .expect("status")
        .pid
        .expect("Chromium runs") as i32;
    let alive = |pid: i32| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    wait_until(
        Duration::from_secs(20),
        "the idle browser closes",
        || async {
            let status = browser.status().await.ok()?;
            (!status.open && status.idle_closes == 1 && !alive(pid)).then_some(())
        },
    )
    .await;

    // A crash in the middle of an action: the run gets a clear error at once.
    world
        .fake
        .push_message(bot, OWNER, OWNER, "wait for the news");
    let pid = wait_until(
        Duration::from_secs(30),
        "Chromium runs the wait",
        || async {
            let status = browser.status().await.ok()?;
            status.pid.filter(|_| status.open && status.actions >= 2)
        },
    )
    .await as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill Chromium");
    sent_containing(&world, "The browser failed.").await;
    let status = browser.status().await.expect("status");
    assert_eq!(status.crashes, 1);
    assert!(!status.open);

    // The next action starts a fresh Chromium.
    let before = world.fake.sent(bot).len();
    let last_id = world
        .fake
        .sent(bot)
        .last()
        .map(|m| m.message_id)
        .unwrap_or(0);
    // (The run has read a page, which is private data: the address must be the user's own, or
    // it would ask first by the egress rule.)
    world.fake.push_message(
        bot,
        OWNER,
        OWNER,
        &format!("go home again: {}", site.url("/")),
    );
    let answered = world
        .fake
        .wait_for_sent(
            bot,
            |m| m.message_id > last_id && m.visible_text.contains("Done browsing."),
            Duration::from_secs(60),
        )
        .await;
    let texts: Vec<String> = world
        .fake
        .sent(bot)
        .iter()
        .skip(before)
        .map(|m| m.visible_text.clone())
        .collect();
    assert!(answered.is_some(), "the second answer: {texts:?}");
    assert_eq!(browser.status().await.expect("status").starts, 3);
    let metrics =
        clawvisor::studio::browser_metrics::metrics(&world.harness.daemon().studio_state()).await;
    assert!(
        metrics.contains("clawvisor_browser_crashes_total{agent=\"ada\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("clawvisor_browser_idle_closes_total{agent=\"ada\"} 1"),
        "{metrics}"
    );
}

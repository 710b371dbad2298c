//! Studio in a real headless Chromium (driven through ChromeDriver) against the real daemon on
//! loopback: logging in with the one-time link, the Overview tree updating live when a bot is
//! made to crash, Chat streaming an answer from the scripted model, an approval appearing in the
//! inbox without a reload and approving it completing the run, and a schedule created with its
//! preview. A screenshot of every page is written to `<target>/tmp/studio-screenshots/`.
//!
//! Chromium and ChromeDriver come from Debian's `chromium` and `chromium-driver` packages;
//! `.ci/run` installs them, and so does this test when it runs as root and they are missing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clawvisor::actors::telegram_bot::TelegramMsg;
use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const WAIT: Duration = Duration::from_secs(20);

/// Installs Debian's Chromium and ChromeDriver when they are missing (as root only).
fn ensure_chromium() {
    if std::path::Path::new(CHROMIUM).exists() && std::path::Path::new(CHROMEDRIVER).exists() {
        return;
    }
    let status = Command::new("apt-get")
        .args(["install", "-y", "-q", "chromium", "chromium-driver"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status();
    assert!(
        status.is_ok_and(|status| status.success()),
        "Chromium is needed for the browser tests: run `apt-get install chromium chromium-driver` (as root)"
    );
}

/// A ChromeDriver process and a browser session; both end when this is dropped or closed.
struct Browser {
    client: Client,
    driver: Child,
    _profile: ScratchDir,
    shots: PathBuf,
}

impl Browser {
    async fn launch() -> Browser {
        ensure_chromium();
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = ScratchDir::new("studio-browser").unwrap();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + WAIT;
        let client = loop {
            // ChromeDriver is plain HTTP on loopback: no TLS connector needed.
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(error) if tokio::time::Instant::now() > deadline => {
                    panic!("no browser session through chromedriver: {error}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("studio-screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        Browser {
            client,
            driver,
            _profile: profile,
            shots,
        }
    }

    /// The first element matching `css`, waiting for it to appear.
    async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(WAIT)
            .every(Duration::from_millis(50))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("`{css}` never appeared: {error}"))
    }

    /// Waits until `script` (a JavaScript expression) is true.
    async fn wait_until(&self, what: &str, script: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let value = self
                .client
                .execute(&format!("return Boolean({script});"), vec![])
                .await
                .unwrap();
            if value == json!(true) {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Opens a page of the console by its hash route and waits until its data has loaded.
    async fn open(&self, page: &str) {
        self.client
            .find(Locator::Css(&format!("a[data-nav=\"{page}\"]")))
            .await
            .unwrap_or_else(|_| panic!("no nav link to {page}"))
            .click()
            .await
            .unwrap();
        self.wait_for(&format!("[data-page=\"{page}\"][data-loaded=\"true\"]"))
            .await;
    }

    async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The daemon: agent `ada` with a bot on the fake Telegram, a scripted model, Studio on loopback.
struct World {
    harness: Harness,
    _llm: ScriptedLlm,
    _telegram: FakeTelegram,
    base: String,
}

async fn world() -> World {
    let telegram = FakeTelegram::start().await;
    let token = "4242:AAH-browser-test-token-0001";
    telegram.add_bot(token, "ada_bot");
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
    let llm = ScriptedLlm::start(script).await.expect("model");
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        &format!(
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"\n[telegram]\ntoken_env = \"ADA_TOKEN\"\napi_url = \"{}\"\n",
            telegram.base_url()
        ),
    )];
    options.env = BTreeMap::from([("ADA_TOKEN".to_string(), token.to_string())]);
    let harness = Harness::start(options).await.expect("daemon");
    let addr = harness
        .daemon()
        .studio_addr(Duration::from_secs(10))
        .await
        .expect("studio bound");
    World {
        harness,
        _llm: llm,
        _telegram: telegram,
        base: format!("http://{addr}"),
    }
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
    browser.screenshot("overview").await;

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
        .lookup::<TelegramMsg>("bot:ada")
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
        "agents", "memory", "mcp", "handoffs", "audit", "costs", "skills",
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

    browser.close().await;
    world.harness.stop().await;
}

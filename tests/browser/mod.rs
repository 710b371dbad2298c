//! A real headless Chromium driven through ChromeDriver, for Studio's browser tests: each test file
//! that clicks through the console declares `mod browser;` and launches one with
//! [`Browser::launch`]. Screenshots go to `<target>/tmp/studio-screenshots/` (`phone-*.png` for the
//! phone viewport, by the tests' convention).
//!
//! Chromium and ChromeDriver come from Debian's `chromium` and `chromium-driver` packages;
//! `.ci/run` installs them, and so does [`ensure_chromium`] when it runs as root and they are
//! missing.

#![allow(dead_code)] // Each test file uses the part of it it needs.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clawvisor::testkit::harness::{Harness, ScratchDir};
use clawvisor::testkit::wait_until;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const WAIT: Duration = Duration::from_secs(20);

/// Installs Debian's Chromium and ChromeDriver when they are missing (as root only). The tests of
/// this file run in parallel and apt holds a lock: one installs, the others wait for it.
pub fn ensure_chromium() {
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|poison| poison.into_inner());
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
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: ScratchDir,
    shots: PathBuf,
}

impl Browser {
    pub async fn launch() -> Browser {
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
        let client = wait_until(WAIT, "a browser session through chromedriver", || async {
            // ChromeDriver is plain HTTP on loopback: no TLS connector needed.
            ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
        })
        .await;
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
    pub async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(WAIT)
            .every(Duration::from_millis(50))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|error| panic!("`{css}` never appeared: {error}"))
    }

    /// Waits until `script` (a JavaScript expression) is true.
    pub async fn wait_until(&self, what: &str, script: &str) {
        wait_until(WAIT, what, || async {
            let value = self
                .client
                .execute(&format!("return Boolean({script});"), vec![])
                .await
                .unwrap();
            value == json!(true)
        })
        .await
    }

    /// Opens a page of the console by its hash route and waits until its data has loaded.
    pub async fn open(&self, page: &str) {
        let link = self
            .client
            .find(Locator::Css(&format!("a[data-nav=\"{page}\"]")))
            .await
            .unwrap_or_else(|_| panic!("no nav link to {page}"));
        // On a phone only the most used pages are in the bar; the others are behind "All pages".
        if !link.is_displayed().await.unwrap_or(true) {
            self.client
                .find(Locator::Css("#nav-more"))
                .await
                .expect("the phone's page menu")
                .click()
                .await
                .unwrap();
        }
        link.click()
            .await
            .unwrap_or_else(|error| panic!("cannot click the nav link to {page}: {error}"));
        self.wait_for(&format!("[data-page=\"{page}\"][data-loaded=\"true\"]"))
            .await;
    }

    /// Fails when the page is wider than the viewport (it would scroll sideways) or content sticks
    /// out of a card.
    pub async fn assert_no_sideways_scroll(&self, page: &str) {
        let sizes = self
            .client
            .execute(
                "return [document.documentElement.scrollWidth, window.innerWidth];",
                vec![],
            )
            .await
            .unwrap();
        let (scroll, inner) = (sizes[0].as_i64().unwrap(), sizes[1].as_i64().unwrap());
        if scroll > inner {
            let culprits = self
                .client
                .execute(
                    "return [...document.querySelectorAll('body *')].filter((n) => n.getBoundingClientRect().right > window.innerWidth + 0.5).slice(0, 8).map((n) => n.tagName + '.' + n.className + ' ' + Math.round(n.getBoundingClientRect().right));",
                    vec![],
                )
                .await
                .unwrap();
            panic!("{page}: {scroll} px wide on a {inner} px screen; too wide: {culprits}");
        }
        // Nor does anything stick out of its card (squeezed content that still fits the screen).
        let squeezed = self
            .client
            .execute(
                "return [...document.querySelectorAll('.card')].filter((c) => c.scrollWidth > c.clientWidth + 1).map((c) => c.outerHTML.slice(0, 120));",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(
            squeezed,
            json!([]),
            "{page}: content sticks out of these cards"
        );
    }

    /// Clicks the element `css` matches as soon as it can be: scrolled into view first, found
    /// again when a live redraw replaced it, and tried again while a toast covers it.
    pub async fn click(&self, css: &str) {
        wait_until(WAIT, &format!("`{css}` is clicked"), || async {
            let _ = self
                .client
                .execute(
                    &format!(
                        "document.querySelector({css:?})?.scrollIntoView({{block: 'center'}}); return 1;"
                    ),
                    vec![],
                )
                .await;
            match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.click().await.is_ok(),
                Err(_) => false,
            }
        })
        .await
    }

    /// Replaces the text of the field `css` matches with `text`, as typed.
    pub async fn type_into(&self, css: &str, text: &str) {
        let field = self.wait_for(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// Runs `script` in the page and answers its value.
    pub async fn js(&self, script: &str) -> serde_json::Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    /// Logs in to `harness`'s Studio through a one-time login link, as `clawvisor studio-link`
    /// gives an operator, and waits for the Overview.
    pub async fn log_in(&self, harness: &Harness) {
        let (base, _) = harness.studio_http().await;
        let link = clawvisor::studio::access::login_link(harness.store(), &base, "cli")
            .await
            .unwrap();
        self.client.goto(&link).await.unwrap();
        self.wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
            .await;
    }

    /// Saves `phone-<name>` at a phone's size (390×844), after checking that `page` does not
    /// scroll sideways there, then returns to the desktop size the browser started with.
    pub async fn phone_screenshot(&self, name: &str, page: &str) {
        self.client.set_window_size(390, 844).await.unwrap();
        self.assert_no_sideways_scroll(page).await;
        self.screenshot(&format!("phone-{name}")).await;
        self.client.set_window_size(1280, 900).await.unwrap();
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

/// ChromeDriver (and the browser it started) ends with the test, also when an assertion fails
/// before `close`: a dropped `Child` is not killed by itself.
impl Drop for Browser {
    fn drop(&mut self) {
        // The Chromium processes it started would outlive it: they are found by their profile
        // folder, which is this browser's alone.
        let _ = Command::new("pkill")
            .args(["-KILL", "-f", &self._profile.path().display().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

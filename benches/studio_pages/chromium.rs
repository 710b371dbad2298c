//! Studio in the real headless Chromium (the browser tests' driver, `tests/browser/mod.rs`):
//! first paint and the Overview's data on a fresh load, each page opened from the menu, and a
//! screenshot of every page with the full house at desktop and phone size.
//!
//! A fresh load is Studio's address opened in a new tab (the login cookie kept), the previous tab
//! closed. Not the same tab again: a Studio page the tab navigated away from keeps its
//! live-events connection (`/api/v1/events`) open, so after five loads in one tab Chromium's six
//! connections per host are all taken and the sixth load's requests wait until Studio's 20 s
//! timeout (BENCHMARKS.md, "Studio with a full house"). Studio sends its files with
//! `Cache-Control: no-cache` and no validator, so every load fetches them again, as an operator's
//! does. The time the Overview's `[data-loaded="true"]` appears is taken inside the page by a
//! script Chromium runs at the start of the tab's documents (DevTools protocol
//! `Page.addScriptToEvaluateOnNewDocument`, through ChromeDriver), so it is measured from the
//! navigation's start on the page's own clock, like `first-contentful-paint`.

use axum::http::Method;
use fantoccini::wd::WebDriverCompatibleCommand;
use serde_json::{Value, json};

use crate::browser::{self, Browser};

/// Fresh loads for the first-paint figures.
pub const LOADS: usize = 15;
/// Times each page is opened from the menu.
pub const OPENS: usize = 10;

/// What the browser measured, in milliseconds.
pub struct Figures {
    pub first_contentful_paint: Vec<f64>,
    pub overview_loaded: Vec<f64>,
    /// Per page of `PAGES`: menu click → the page's `[data-loaded="true"]`.
    pub opened: Vec<(String, Vec<f64>)>,
}

/// A DevTools protocol command through ChromeDriver's `goog/cdp/execute`.
#[derive(Debug)]
struct DevTools {
    command: &'static str,
    params: Value,
}

impl WebDriverCompatibleCommand for DevTools {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/goog/cdp/execute",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (Method, Option<String>) {
        let body = json!({"cmd": self.command, "params": self.params});
        (Method::POST, Some(body.to_string()))
    }
}

/// Notes (on `window.__overviewLoadedAt`) when the Overview first says its data is drawn.
const MARK_OVERVIEW_LOADED: &str = r#"
(() => {
  const loaded = () => document.querySelector('[data-page="overview"][data-loaded="true"]');
  const watch = new MutationObserver(() => {
    if (loaded()) { window.__overviewLoadedAt = performance.now(); watch.disconnect(); }
  });
  watch.observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-loaded'] });
})();
"#;

/// Opens a page by its hash, as the menu's link does, and answers the milliseconds until the page
/// says its data is drawn.
const OPEN_PAGE: &str = r#"
const [page, done] = arguments;
const started = performance.now();
const loaded = () => document.querySelector(`#page [data-page="${page}"][data-loaded="true"]`);
const watch = new MutationObserver(() => {
  if (loaded()) { watch.disconnect(); done(performance.now() - started); }
});
watch.observe(document.getElementById('page'), { subtree: true, childList: true, attributes: true, attributeFilter: ['data-loaded'] });
location.hash = `#/${page}`;
"#;

/// Why the browser part cannot run here, if it cannot.
pub fn missing() -> Option<String> {
    [browser::CHROMIUM, browser::CHROMEDRIVER]
        .iter()
        .find(|path| !std::path::Path::new(path).exists())
        .map(|path| {
            format!(
                "{path} is not installed, so first paint and the in-browser figures were not \
                 measured (install Debian's `chromium` and `chromium-driver`); the API figures \
                 above stand on their own"
            )
        })
}

/// Runs the browser part against Studio at `base`, logged in with `login`, for `pages`.
pub async fn measure(base: &str, login: &str, pages: &[String]) -> Figures {
    let browser = Browser::launch().await;
    browser
        .client
        .goto(login)
        .await
        .expect("the login link opens");
    browser
        .wait_for("[data-page=\"overview\"][data-loaded=\"true\"]")
        .await;
    let (first_contentful_paint, overview_loaded) = fresh_loads(&browser, base).await;
    let opened = open_each(&browser, pages).await;
    screenshots(&browser, pages).await;
    browser.close().await;
    Figures {
        first_contentful_paint,
        overview_loaded,
        opened,
    }
}

/// `LOADS` fresh loads of Studio, each in a new tab: first contentful paint and the Overview's
/// data drawn.
async fn fresh_loads(browser: &Browser, base: &str) -> (Vec<f64>, Vec<f64>) {
    let (mut paints, mut loaded) = (Vec::new(), Vec::new());
    for _ in 0..LOADS {
        let client = &browser.client;
        let tab = client.new_window(true).await.expect("a new tab");
        client
            .close_window()
            .await
            .expect("the previous tab closes");
        client
            .switch_to_window(tab.handle)
            .await
            .expect("the new tab");
        client
            .issue_cmd(DevTools {
                command: "Page.addScriptToEvaluateOnNewDocument",
                params: json!({"source": MARK_OVERVIEW_LOADED}),
            })
            .await
            .expect("ChromeDriver runs DevTools commands");
        client
            .goto(&format!("{base}/#/overview"))
            .await
            .expect("Studio opens");
        let figures = clawvisor::testkit::wait_until(
            browser::WAIT,
            "the Overview's data drawn and the first paint reported",
            || async {
                let seen = client
                    .execute(
                        "return [performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null, \
                         window.__overviewLoadedAt ?? null, document.getElementById('page')?.innerText?.slice(0, 200)];",
                        vec![],
                    )
                    .await
                    .map_err(|error| error.to_string())?;
                if seen[0].is_number() && seen[1].is_number() {
                    Ok(seen)
                } else {
                    Err(seen.to_string())
                }
            },
        )
        .await;
        paints.push(figures[0].as_f64().expect("a paint time"));
        loaded.push(figures[1].as_f64().expect("a load time"));
    }
    (paints, loaded)
}

/// Each page opened `OPENS` times from the menu, in turn (so that each opening is a change of
/// page), on a desktop window, after one round that is not counted (it loads each page's
/// script).
async fn open_each(browser: &Browser, pages: &[String]) -> Vec<(String, Vec<f64>)> {
    let mut opened: Vec<(String, Vec<f64>)> = pages
        .iter()
        .map(|page| (page.clone(), Vec::new()))
        .collect();
    // From the last page, so that opening the first is a change of page.
    open(browser, pages.last().expect("the console has pages")).await;
    for round in 0..=OPENS {
        for (page, times) in &mut opened {
            let answer = browser
                .client
                .execute_async(OPEN_PAGE, vec![json!(page)])
                .await
                .unwrap_or_else(|error| panic!("the {page} page did not load: {error}"));
            if round > 0 {
                times.push(answer.as_f64().expect("milliseconds"));
            }
        }
    }
    opened
}

/// Every page with the full house, desktop (1280×900) then phone (390×844):
/// `house-<page>.png`, `phone-house-<page>.png`.
async fn screenshots(browser: &Browser, pages: &[String]) {
    for (width, height, prefix) in [(1280, 900, "house"), (390, 844, "phone-house")] {
        browser
            .client
            .set_window_size(width, height)
            .await
            .expect("the window is resized");
        for page in pages {
            // From another page, so that the menu's link is a change of page.
            let other = if page == "overview" {
                "agents"
            } else {
                "overview"
            };
            open(browser, other).await;
            open(browser, page).await;
            browser.screenshot(&format!("{prefix}-{page}")).await;
        }
    }
}

/// Opens `page` from the menu, or by its address when the menu has no link to it (Setup is
/// reached from the Overview).
async fn open(browser: &Browser, page: &str) {
    let linked = browser
        .client
        .execute(
            &format!("return !!document.querySelector('a[data-nav=\"{page}\"]');"),
            vec![],
        )
        .await
        .expect("the page answers");
    if linked == json!(true) {
        browser.open(page).await;
        return;
    }
    browser
        .client
        .execute(&format!("location.hash = '#/{page}'; return 1;"), vec![])
        .await
        .expect("the page answers");
    browser
        .wait_for(&format!("[data-page=\"{page}\"][data-loaded=\"true\"]"))
        .await;
}

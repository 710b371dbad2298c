//! One running browser and its tabs: the actions of the `browser` tool on real pages.
//!
//! Elements are found through the last snapshot's references, kept in an isolated world
//! (`Page.createIsolatedWorld`): the page's scripts share the DOM with it but not its variables,
//! so a page cannot renumber or swap what `[3]` means. A navigation destroys that world; a
//! reference used after one is refused with "take a new snapshot" rather than guessed.
//!
//! Clicks and keys are real input events (`Input.dispatch*`), typed text is inserted as a person
//! would type it (`Input.insertText`). After an action that may load a page, the session waits
//! for the load (at most `page_timeout`) or for a download to finish, and returns the new
//! snapshot, so one call both acts and shows the result.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::cdp::{Cdp, CdpEvent};
use super::launch::{self, Chromium};
use super::{Action, BrowserError, BrowserSetup, Download, Outcome, PageInfo, RefInfo, Snapshot};

/// The snapshot script (`snapshot.js`): a function of the size limit returning JSON.
const SNAPSHOT_JS: &str = include_str!("snapshot.js");
/// One DevTools command's bound (a page load has its own, `page_timeout`).
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long after a click or key the session looks for a navigation or download to begin.
const SETTLE: Duration = Duration::from_millis(400);
/// Longest wait for a download to finish.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// One tab the session is attached to.
struct Tab {
    target: String,
    session: String,
    /// The isolated world of the last snapshot (its references live there).
    world: Option<i64>,
}

/// A running Chromium with its tabs. Dropping it kills Chromium.
pub struct BrowserSession {
    chromium: Chromium,
    tabs: Vec<Tab>,
    current: usize,
    downloads: PathBuf,
    setup: BrowserSetup,
}

impl BrowserSession {
    /// Starts Chromium (confined, `launch`), attaches to its first tab and routes downloads to
    /// the profile's `downloads/`.
    pub async fn start(setup: &BrowserSetup) -> Result<BrowserSession, BrowserError> {
        let chromium_path = launch::find_chromium(setup.chromium.as_deref())
            .map_err(|error| BrowserError::Start(error.to_string()))?;
        let chromium = launch::launch(&chromium_path, &setup.profile_dir, &setup.protected)
            .await
            .map_err(|error| BrowserError::Start(error.to_string()))?;
        let downloads = setup.profile_dir.join("downloads");
        std::fs::create_dir_all(&downloads)
            .map_err(|error| BrowserError::Start(format!("cannot create {}: {error}", downloads.display())))?;
        let mut session = BrowserSession {
            chromium,
            tabs: Vec::new(),
            current: 0,
            downloads,
            setup: setup.clone(),
        };
        if let Err(error) = session.initialise().await {
            let said = session.chromium.said.lines().join(" / ");
            session.stop().await;
            return Err(BrowserError::Start(format!(
                "Chromium started but failed at once ({error}); it said: {said}"
            )));
        }
        Ok(session)
    }

    /// Routes downloads to the profile and attaches to the first tab.
    async fn initialise(&mut self) -> Result<(), BrowserError> {
        self.browser_call(
            "Browser.setDownloadBehavior",
            json!({"behavior": "allowAndName", "downloadPath": self.downloads, "eventsEnabled": true}),
        )
        .await?;
        let targets = self.browser_call("Target.getTargets", json!({})).await?;
        let first = page_targets(&targets).into_iter().next();
        let target = match first {
            Some((target, _, _)) => target,
            None => self.create_target().await?,
        };
        let tab = self.attach(&target).await?;
        self.tabs.push(tab);
        Ok(())
    }

    /// How Chromium is confined ("under Landlock in its own namespaces").
    pub fn confined(&self) -> &str {
        &self.chromium.confined
    }

    /// Chromium's process id (the outer waiter's under namespaces).
    pub fn pid(&self) -> Option<u32> {
        self.chromium.child.id()
    }

    /// Whether Chromium is gone (its pipe closed).
    pub fn is_closed(&self) -> bool {
        self.chromium.cdp.is_closed()
    }

    /// Resolves when Chromium's pipe closes.
    pub async fn closed(&self) {
        self.chromium.cdp.closed().await
    }

    /// Asks Chromium to close, then kills what is left of it.
    pub async fn stop(mut self) {
        let _ = self
            .browser_call("Browser.close", json!({}))
            .await;
        let exited = tokio::time::timeout(Duration::from_secs(3), self.chromium.child.wait()).await;
        if exited.is_err() {
            kill_group(self.chromium.child.id());
            let _ = self.chromium.child.kill().await;
        }
    }

    /// Runs one action.
    pub async fn act(&mut self, action: Action) -> Result<Outcome, BrowserError> {
        match action {
            Action::Open { url, new_tab } => self.open(&url, new_tab).await,
            Action::Snapshot => self.snapshot_outcome("").await,
            Action::Click { reference } => self.click(reference).await,
            Action::Type { reference, text, submit } => self.type_text(reference, &text, submit).await,
            Action::Select { reference, value } => self.select(reference, &value).await,
            Action::Press { key } => self.press_and_settle(&key).await,
            Action::Scroll { down } => self.scroll(down).await,
            Action::Back => self.back().await,
            Action::WaitFor { text, reference, timeout } => self.wait_for(text, reference, timeout).await,
            Action::Screenshot => self.capture(false).await,
            Action::Pdf => self.capture(true).await,
            Action::Tabs { switch_to } => self.tabs(switch_to).await,
            Action::Close { tab } => self.close(tab).await,
            Action::Login { site } => self.login(&site).await,
        }
    }

    fn cdp(&self) -> &Cdp {
        &self.chromium.cdp
    }

    fn tab(&self) -> Result<&Tab, BrowserError> {
        self.tabs
            .get(self.current)
            .ok_or_else(|| BrowserError::Page("no tab is open; use open with a URL".into()))
    }

    async fn browser_call(&self, method: &str, params: Value) -> Result<Value, BrowserError> {
        Ok(self.cdp().call(None, method, params, CALL_TIMEOUT).await?)
    }

    async fn page_call(&self, method: &str, params: Value) -> Result<Value, BrowserError> {
        let session = self.tab()?.session.clone();
        Ok(self.cdp().call(Some(&session), method, params, CALL_TIMEOUT).await?)
    }

    async fn create_target(&self) -> Result<String, BrowserError> {
        let created = self
            .browser_call("Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        text_field(&created, "targetId")
            .ok_or_else(|| BrowserError::Page("Chromium opened no tab".into()))
    }

    async fn attach(&self, target: &str) -> Result<Tab, BrowserError> {
        let attached = self
            .browser_call("Target.attachToTarget", json!({"targetId": target, "flatten": true}))
            .await?;
        let session = text_field(&attached, "sessionId")
            .ok_or_else(|| BrowserError::Page("Chromium did not attach to the tab".into()))?;
        self.cdp()
            .call(Some(&session), "Page.enable", json!({}), CALL_TIMEOUT)
            .await?;
        Ok(Tab {
            target: target.to_string(),
            session,
            world: None,
        })
    }

    /// Evaluates `expression` in the page's main world (never for references).
    async fn evaluate(&self, expression: &str) -> Result<Value, BrowserError> {
        let answer = self
            .page_call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        evaluation_value(&answer)
    }

    /// Evaluates `expression` in the last snapshot's isolated world.
    async fn evaluate_in_world(&self, expression: &str) -> Result<Value, BrowserError> {
        let tab = self.tab()?;
        let Some(world) = tab.world else {
            return Err(BrowserError::Invalid(
                "there is no snapshot of this page yet; take a snapshot first and use its numbers".into(),
            ));
        };
        let session = tab.session.clone();
        let answer = self
            .cdp()
            .call(
                Some(&session),
                "Runtime.evaluate",
                json!({"expression": expression, "contextId": world, "returnByValue": true, "awaitPromise": true}),
                CALL_TIMEOUT,
            )
            .await;
        match answer {
            Ok(answer) => evaluation_value(&answer),
            Err(super::cdp::CdpError::Protocol { message, .. }) if message.contains("context") => {
                Err(BrowserError::StaleRef)
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn page_info(&self) -> PageInfo {
        match self.evaluate("JSON.stringify([location.href, document.title])").await {
            Ok(Value::String(pair)) => {
                let pair: Vec<String> = serde_json::from_str(&pair).unwrap_or_default();
                PageInfo {
                    url: pair.first().cloned().unwrap_or_default(),
                    title: pair.get(1).cloned().unwrap_or_default(),
                }
            }
            _ => PageInfo::default(),
        }
    }

    /// The page as text with numbered references, in a fresh isolated world.
    pub async fn snapshot(&mut self) -> Result<(PageInfo, Snapshot), BrowserError> {
        let target = self.tab()?.target.clone();
        let world = self
            .page_call(
                "Page.createIsolatedWorld",
                json!({"frameId": target, "worldName": "clawvisor", "grantUniveralAccess": false}),
            )
            .await?;
        let world = world
            .get("executionContextId")
            .and_then(Value::as_i64)
            .ok_or_else(|| BrowserError::Page("Chromium gave no isolated world".into()))?;
        self.tabs[self.current].world = Some(world);
        let expression = format!("({SNAPSHOT_JS})({})", self.setup.snapshot_max_chars);
        let raw = self.evaluate_in_world(&expression).await?;
        let parsed: Value = raw
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .ok_or_else(|| BrowserError::Page("the page could not be read".into()))?;
        let page = PageInfo {
            url: parsed["url"].as_str().unwrap_or_default().to_string(),
            title: parsed["title"].as_str().unwrap_or_default().to_string(),
        };
        let refs: Vec<RefInfo> = serde_json::from_value(parsed["refs"].clone()).unwrap_or_default();
        Ok((
            page,
            Snapshot {
                text: parsed["text"].as_str().unwrap_or_default().to_string(),
                cut: parsed["cut"].as_bool().unwrap_or(false),
                refs,
            },
        ))
    }

    async fn snapshot_outcome(&mut self, summary: &str) -> Result<Outcome, BrowserError> {
        let (page, snapshot) = self.snapshot().await?;
        Ok(Outcome {
            summary: summary.to_string(),
            page,
            snapshot: Some(snapshot),
            ..Outcome::default()
        })
    }

    async fn open(&mut self, url: &str, new_tab: bool) -> Result<Outcome, BrowserError> {
        if new_tab || self.tabs.is_empty() {
            let target = self.create_target().await?;
            let tab = self.attach(&target).await?;
            self.tabs.push(tab);
            self.current = self.tabs.len() - 1;
        }
        let events = self.cdp().subscribe();
        let navigated = self.page_call("Page.navigate", json!({"url": url})).await?;
        if let Some(error) = navigated.get("errorText").and_then(Value::as_str).filter(|text| !text.is_empty()) {
            return Err(BrowserError::Page(format!("the page could not be opened: {error}")));
        }
        let downloads = self.settle(events, true).await?;
        let mut outcome = self.snapshot_outcome("Opened the page.").await?;
        outcome.downloads = downloads;
        Ok(outcome)
    }

    /// After an action: waits for a navigation it started (when `expect_load`, or when one begins
    /// within [`SETTLE`]) to load, and for any download it started to finish.
    async fn settle(
        &self,
        mut events: broadcast::Receiver<CdpEvent>,
        expect_load: bool,
    ) -> Result<Vec<Download>, BrowserError> {
        let session = self.tab()?.session.clone();
        let started = Instant::now();
        let mut loading = expect_load;
        let mut pending: Vec<(String, String)> = Vec::new();
        let mut finished = Vec::new();
        loop {
            let limit = if !pending.is_empty() {
                started + DOWNLOAD_TIMEOUT
            } else if loading {
                started + self.setup.page_timeout
            } else {
                started + SETTLE
            };
            let event = tokio::select! {
                event = events.recv() => event,
                () = tokio::time::sleep_until(limit) => break,
                () = self.cdp().closed() => return Err(BrowserError::Crashed),
            };
            let Ok(event) = event else {
                continue;
            };
            let ours = event.session.as_deref() == Some(session.as_str());
            match event.method.as_str() {
                "Page.frameStartedLoading" | "Page.frameRequestedNavigation" if ours => loading = true,
                "Page.loadEventFired" if ours => {
                    loading = false;
                    if pending.is_empty() {
                        break;
                    }
                }
                "Browser.downloadWillBegin" => {
                    let guid = event.params["guid"].as_str().unwrap_or_default().to_string();
                    let name = event.params["suggestedFilename"].as_str().unwrap_or("download").to_string();
                    pending.push((guid, name));
                    loading = false;
                }
                "Browser.downloadProgress" => {
                    let guid = event.params["guid"].as_str().unwrap_or_default();
                    let state = event.params["state"].as_str().unwrap_or_default();
                    if let Some(index) = pending.iter().position(|(known, _)| known == guid) {
                        if state == "completed" {
                            let (guid, name) = pending.remove(index);
                            finished.push(Download { path: self.downloads.join(&guid), name });
                        } else if state == "canceled" {
                            pending.remove(index);
                        }
                    }
                    if pending.is_empty() && !loading {
                        break;
                    }
                }
                _ => {}
            }
        }
        if loading && pending.is_empty() {
            return Err(BrowserError::Page(format!(
                "the page did not finish loading within {} s",
                self.setup.page_timeout.as_secs()
            )));
        }
        Ok(finished)
    }

    /// The centre of element `reference` (scrolled into view), or why it cannot be used.
    async fn locate(&self, reference: u32) -> Result<(f64, f64), BrowserError> {
        let expression = format!(
            "(() => {{ const el = (globalThis.__clawvisorRefs || [])[{index}];
              if (!el) return 'unknown'; if (!el.isConnected) return 'stale';
              el.scrollIntoView({{block: 'center', inline: 'center'}});
              const r = el.getBoundingClientRect();
              return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
            index = reference.saturating_sub(1)
        );
        match self.evaluate_in_world(&expression).await? {
            Value::Array(point) if point.len() == 2 => Ok((
                point[0].as_f64().unwrap_or(0.0),
                point[1].as_f64().unwrap_or(0.0),
            )),
            Value::String(word) if word == "stale" => Err(BrowserError::StaleRef),
            _ => Err(BrowserError::UnknownRef(reference)),
        }
    }

    async fn click(&mut self, reference: u32) -> Result<Outcome, BrowserError> {
        let (x, y) = self.locate(reference).await?;
        let events = self.cdp().subscribe();
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            self.page_call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
            )
            .await?;
        }
        let downloads = self.settle(events, false).await?;
        let mut outcome = self.snapshot_outcome(&format!("Clicked [{reference}].")).await?;
        outcome.downloads = downloads;
        Ok(outcome)
    }

    /// Focuses element `reference` and selects what it holds (typing replaces it).
    async fn focus(&self, reference: u32) -> Result<(), BrowserError> {
        self.locate(reference).await?;
        let expression = format!(
            "(() => {{ const el = globalThis.__clawvisorRefs[{index}]; el.focus();
              if (typeof el.select === 'function') el.select();
              else {{ const range = document.createRange(); range.selectNodeContents(el);
                      const selection = getSelection(); selection.removeAllRanges(); selection.addRange(range); }}
              return document.activeElement === el; }})()",
            index = reference.saturating_sub(1)
        );
        match self.evaluate_in_world(&expression).await? {
            Value::Bool(true) => Ok(()),
            _ => Err(BrowserError::Page(format!("element [{reference}] cannot take text"))),
        }
    }

    async fn type_text(&mut self, reference: u32, text: &str, submit: bool) -> Result<Outcome, BrowserError> {
        self.focus(reference).await?;
        self.page_call("Input.insertText", json!({"text": text})).await?;
        if submit {
            return self.press_and_settle("Enter").await;
        }
        self.snapshot_outcome(&format!("Typed into [{reference}].")).await
    }

    async fn select(&mut self, reference: u32, value: &str) -> Result<Outcome, BrowserError> {
        self.locate(reference).await?;
        let expression = format!(
            "(() => {{ const el = globalThis.__clawvisorRefs[{index}];
              if (!el.options) return null; const wanted = {value}.toLowerCase();
              const option = Array.from(el.options).find((o) => o.value.toLowerCase() === wanted || o.label.toLowerCase() === wanted || o.text.trim().toLowerCase() === wanted);
              if (!option) return Array.from(el.options).map((o) => o.label || o.text).join(' | ');
              el.value = option.value; option.selected = true;
              el.dispatchEvent(new Event('input', {{bubbles: true}}));
              el.dispatchEvent(new Event('change', {{bubbles: true}}));
              return true; }})()",
            index = reference.saturating_sub(1),
            value = Value::String(value.to_string())
        );
        match self.evaluate_in_world(&expression).await? {
            Value::Bool(true) => self.snapshot_outcome(&format!("Selected {value:?} in [{reference}].")).await,
            Value::String(options) => Err(BrowserError::Invalid(format!(
                "[{reference}] has no option {value:?}; its options are: {options}"
            ))),
            _ => Err(BrowserError::Invalid(format!("[{reference}] is not a list to select from"))),
        }
    }

    async fn press(&self, key: &str) -> Result<(), BrowserError> {
        let (key, code, text) = key_event(key)
            .ok_or_else(|| BrowserError::Invalid(format!(
                "unknown key {key:?}; use Enter, Tab, Escape, Backspace, Space, ArrowUp, ArrowDown, ArrowLeft, ArrowRight, PageUp, PageDown, Home or End"
            )))?;
        let mut down = json!({"type": "keyDown", "key": key, "code": key, "windowsVirtualKeyCode": code});
        if let Some(text) = text {
            down["text"] = json!(text);
        }
        self.page_call("Input.dispatchKeyEvent", down).await?;
        self.page_call(
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": key, "code": key, "windowsVirtualKeyCode": code}),
        )
        .await?;
        Ok(())
    }

    async fn press_and_settle(&mut self, key: &str) -> Result<Outcome, BrowserError> {
        let events = self.cdp().subscribe();
        self.press(key).await?;
        let downloads = self.settle(events, false).await?;
        let mut outcome = self.snapshot_outcome(&format!("Pressed {key}.")).await?;
        outcome.downloads = downloads;
        Ok(outcome)
    }

    async fn scroll(&mut self, down: bool) -> Result<Outcome, BrowserError> {
        let sign = if down { 1 } else { -1 };
        self.evaluate(&format!("window.scrollBy(0, {sign} * window.innerHeight * 0.8); window.scrollY"))
            .await?;
        self.snapshot_outcome(if down { "Scrolled down." } else { "Scrolled up." }).await
    }

    async fn back(&mut self) -> Result<Outcome, BrowserError> {
        let history = self.page_call("Page.getNavigationHistory", json!({})).await?;
        let index = history["currentIndex"].as_u64().unwrap_or(0) as usize;
        let Some(entry) = index.checked_sub(1).and_then(|earlier| history["entries"].get(earlier)) else {
            return Err(BrowserError::Invalid("there is no earlier page in this tab".into()));
        };
        let entry_id = entry["id"].clone();
        let events = self.cdp().subscribe();
        self.page_call("Page.navigateToHistoryEntry", json!({"entryId": entry_id}))
            .await?;
        self.settle(events, true).await?;
        self.snapshot_outcome("Went back.").await
    }

    async fn wait_for(
        &mut self,
        text: Option<String>,
        reference: Option<u32>,
        timeout: Duration,
    ) -> Result<Outcome, BrowserError> {
        let deadline = Instant::now() + timeout;
        let (expression, what) = match (&text, reference) {
            (Some(text), _) => (
                format!("document.body ? document.body.innerText.includes({}) : false", Value::String(text.clone())),
                format!("the text {text:?}"),
            ),
            (None, Some(reference)) => (
                format!(
                    "(() => {{ const el = (globalThis.__clawvisorRefs || [])[{}]; if (!el || !el.isConnected) return false;
                      const r = el.getBoundingClientRect(); return (r.width > 0 || r.height > 0) && !el.disabled; }})()",
                    reference.saturating_sub(1)
                ),
                format!("element [{reference}]"),
            ),
            (None, None) => return Err(BrowserError::Invalid("wait_for needs `text` or `ref`".into())),
        };
        loop {
            let found = if reference.is_some() && text.is_none() {
                self.evaluate_in_world(&expression).await?
            } else {
                self.evaluate(&expression).await?
            };
            if found == Value::Bool(true) {
                return self.snapshot_outcome(&format!("Found {what}.")).await;
            }
            if Instant::now() >= deadline {
                return Err(BrowserError::Page(format!(
                    "{what} did not appear within {} s",
                    timeout.as_secs()
                )));
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
                () = self.cdp().closed() => return Err(BrowserError::Crashed),
            }
        }
    }

    /// A PNG of the visible page, or the page as a PDF.
    async fn capture(&mut self, pdf: bool) -> Result<Outcome, BrowserError> {
        let (method, params) = if pdf {
            ("Page.printToPDF", json!({"printBackground": true}))
        } else {
            ("Page.captureScreenshot", json!({"format": "png"}))
        };
        let captured = self.page_call(method, params).await?;
        let data = captured["data"].as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|error| BrowserError::Page(format!("Chromium sent an unreadable file: {error}")))?;
        Ok(Outcome {
            summary: if pdf { "Printed the page to PDF." } else { "Took a screenshot." }.into(),
            page: self.page_info().await,
            file: Some(bytes),
            ..Outcome::default()
        })
    }

    /// The open tabs (attaching to ones the page opened), after switching to `switch_to`.
    async fn tabs(&mut self, switch_to: Option<usize>) -> Result<Outcome, BrowserError> {
        let targets = self.browser_call("Target.getTargets", json!({})).await?;
        let pages = page_targets(&targets);
        self.tabs.retain(|tab| pages.iter().any(|(target, _, _)| *target == tab.target));
        for (target, _, _) in &pages {
            if !self.tabs.iter().any(|tab| &tab.target == target) {
                let tab = self.attach(target).await?;
                self.tabs.push(tab);
            }
        }
        if let Some(wanted) = switch_to {
            if wanted == 0 || wanted > self.tabs.len() {
                return Err(BrowserError::Invalid(format!("there is no tab {wanted}; there are {}", self.tabs.len())));
            }
            self.current = wanted - 1;
        }
        self.current = self.current.min(self.tabs.len().saturating_sub(1));
        let mut lines = Vec::new();
        for (index, tab) in self.tabs.iter().enumerate() {
            let (_, title, url) = pages
                .iter()
                .find(|(target, _, _)| *target == tab.target)
                .cloned()
                .unwrap_or_default();
            let mark = if index == self.current { " (current)" } else { "" };
            lines.push(format!("{}. {title} — {url}{mark}", index + 1));
        }
        Ok(Outcome {
            summary: format!("Open tabs:\n{}", lines.join("\n")),
            page: self.page_info().await,
            ..Outcome::default()
        })
    }

    async fn close(&mut self, tab: Option<usize>) -> Result<Outcome, BrowserError> {
        let index = match tab {
            Some(0) => return Err(BrowserError::Invalid("tabs are numbered from 1".into())),
            Some(number) => number - 1,
            None => self.current,
        };
        let Some(closing) = self.tabs.get(index) else {
            return Err(BrowserError::Invalid(format!("there is no tab {}", index + 1)));
        };
        let target = closing.target.clone();
        self.browser_call("Target.closeTarget", json!({"targetId": target})).await?;
        self.tabs.remove(index);
        if self.tabs.is_empty() {
            let target = self.create_target().await?;
            let tab = self.attach(&target).await?;
            self.tabs.push(tab);
        }
        self.current = self.current.min(self.tabs.len() - 1);
        Ok(Outcome {
            summary: format!("Closed tab {}.", index + 1),
            page: self.page_info().await,
            ..Outcome::default()
        })
    }

    /// Fills the `[browser.logins]` entry of `site` into this page's login form and submits it.
    async fn login(&mut self, site: &str) -> Result<Outcome, BrowserError> {
        let page = self.page_info().await;
        let host = page.host();
        let login = self
            .setup
            .logins
            .iter()
            .find(|login| super::site_covers(&login.site, site) || super::site_covers(site, &login.site))
            .cloned()
            .ok_or_else(|| BrowserError::Invalid(format!("no [browser.logins] entry is for {site:?}")))?;
        if !login.covers(&host) {
            return Err(BrowserError::Invalid(format!(
                "the current page is on {host:?}, not on {}; open the site's login page first",
                login.site
            )));
        }
        let Some(password) = login.password.as_ref() else {
            return Err(BrowserError::Invalid(format!(
                "the password for {} is not set (`{}` in the secrets store); ask the operator to set it",
                login.site, login.password_env
            )));
        };
        let events = self.cdp().subscribe();
        self.fill_login(&login.username, password.expose()).await?;
        let downloads = self.settle(events, false).await?;
        let mut outcome = self.snapshot_outcome(&format!("Logged in to {} as the configured user.", login.site)).await?;
        outcome.downloads = downloads;
        Ok(outcome)
    }

    /// Types `username` into the field before the password field (when there is one) and the
    /// password into the password field, then submits the form (or presses Enter).
    async fn fill_login(&mut self, username: &str, password: &str) -> Result<(), BrowserError> {
        let target = self.tab()?.target.clone();
        let world = self
            .page_call("Page.createIsolatedWorld", json!({"frameId": target, "worldName": "clawvisor-login"}))
            .await?;
        self.tabs[self.current].world = world.get("executionContextId").and_then(Value::as_i64);
        let mark = "(() => { const shown = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
            const password = Array.from(document.querySelectorAll('input[type=password]')).find(shown);
            if (!password) return 0;
            const scope = password.form || document;
            const fields = Array.from(scope.querySelectorAll('input')).filter((el) => shown(el) &&
              ['text', 'email', 'tel', ''].includes((el.getAttribute('type') || '').toLowerCase()));
            const before = fields.filter((el) => el.compareDocumentPosition(password) & Node.DOCUMENT_POSITION_FOLLOWING);
            const user = before.length ? before[before.length - 1] : null;
            globalThis.__clawvisorRefs = [user, password, password.form];
            return user ? 2 : 1; })()";
        let found = self.evaluate_in_world(mark).await?.as_u64().unwrap_or(0);
        if found == 0 {
            return Err(BrowserError::Page("this page has no password field to log in with".into()));
        }
        if found == 2 {
            self.focus(1).await?;
            self.page_call("Input.insertText", json!({"text": username})).await?;
        }
        self.focus(2).await?;
        self.page_call("Input.insertText", json!({"text": password})).await?;
        let submitted = self
            .evaluate_in_world("(() => { const form = globalThis.__clawvisorRefs[2]; if (!form) return false; form.requestSubmit(); return true; })()")
            .await?;
        if submitted != Value::Bool(true) {
            self.press("Enter").await?;
        }
        Ok(())
    }

    /// A PNG of the visible page, for an approval prompt.
    pub async fn screenshot(&mut self) -> Result<Vec<u8>, BrowserError> {
        Ok(self.capture(false).await?.file.unwrap_or_default())
    }
}

/// `(target id, title, url)` of every page target.
fn page_targets(targets: &Value) -> Vec<(String, String, String)> {
    targets["targetInfos"]
        .as_array()
        .map(|infos| {
            infos
                .iter()
                .filter(|info| info["type"] == "page")
                .map(|info| {
                    (
                        info["targetId"].as_str().unwrap_or_default().to_string(),
                        info["title"].as_str().unwrap_or_default().to_string(),
                        info["url"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn text_field(value: &Value, field: &str) -> Option<String> {
    value.get(field).and_then(Value::as_str).map(str::to_string)
}

/// The value of a `Runtime.evaluate` answer, or the page's exception as an error.
fn evaluation_value(answer: &Value) -> Result<Value, BrowserError> {
    if let Some(exception) = answer.get("exceptionDetails") {
        let text = exception["exception"]["description"]
            .as_str()
            .or_else(|| exception["text"].as_str())
            .unwrap_or("a script error");
        return Err(BrowserError::Page(format!("the page's script failed: {text}")));
    }
    Ok(answer["result"]["value"].clone())
}

/// DevTools' name, key code and typed text of a key a person presses.
fn key_event(key: &str) -> Option<(&'static str, i64, Option<&'static str>)> {
    let known: &[(&str, i64, Option<&str>)] = &[
        ("Enter", 13, Some("\r")),
        ("Tab", 9, None),
        ("Escape", 27, None),
        ("Backspace", 8, None),
        ("Space", 32, Some(" ")),
        ("ArrowUp", 38, None),
        ("ArrowDown", 40, None),
        ("ArrowLeft", 37, None),
        ("ArrowRight", 39, None),
        ("PageUp", 33, None),
        ("PageDown", 34, None),
        ("Home", 36, None),
        ("End", 35, None),
    ];
    known
        .iter()
        .find(|(name, _, _)| name.eq_ignore_ascii_case(key.trim()))
        .map(|(name, code, text)| (*name, *code, *text))
}

/// Kills Chromium's process group (without namespaces its helpers share its group).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}

/// Where a download named `name` would be saved in the workspace: `inbox/<name>`, numbered when
/// taken, the name reduced to safe characters.
pub fn inbox_name(inbox: &Path, name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    let cleaned = cleaned.trim_start_matches('.');
    let cleaned = if cleaned.is_empty() { "download" } else { cleaned };
    let (stem, extension) = match cleaned.rsplit_once('.') {
        Some((stem, extension)) if !stem.is_empty() => (stem.to_string(), format!(".{extension}")),
        _ => (cleaned.to_string(), String::new()),
    };
    let mut candidate = format!("{stem}{extension}");
    let mut number = 2;
    while inbox.join(&candidate).exists() {
        candidate = format!("{stem}-{number}{extension}");
        number += 1;
    }
    candidate
}

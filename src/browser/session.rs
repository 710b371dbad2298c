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

use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

mod actions;

use super::cdp::{Cdp, CdpEvent};
use super::guard::{RefusalLog, RequestGuard};
use super::launch::{self, Chromium};
use super::proxy::EgressProxy;
use super::{Action, BrowserError, BrowserSetup, Download, Outcome, PageInfo, RefInfo, Snapshot};

/// The snapshot script (`snapshot.js`): a function of the size limit returning JSON.
const SNAPSHOT_JS: &str = include_str!("snapshot.js");
/// One DevTools command's bound (a page load has its own, `page_timeout`).
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// How long after a click or key the session looks for a navigation or download to begin.
const SETTLE: Duration = Duration::from_millis(400);
/// Longest wait, after an action, for the guard's checks still running.
const GUARD_SETTLE: Duration = Duration::from_secs(5);
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
    /// Checks every request of every page (`guard`); installed by `initialise`.
    guard: Option<RequestGuard>,
    /// What the guard and the proxy refused, for the model.
    refusals: RefusalLog,
    /// Every connection Chromium makes goes through it; stopped when the session is dropped.
    _proxy: EgressProxy,
}

impl BrowserSession {
    /// Starts Chromium (confined, `launch`), attaches to its first tab and routes downloads to
    /// the profile's `downloads/`.
    pub async fn start(setup: &BrowserSetup) -> Result<BrowserSession, BrowserError> {
        let chromium_path = launch::find_chromium(setup.chromium.as_deref())
            .map_err(|error| BrowserError::Start(error.to_string()))?;
        let refusals = RefusalLog::default();
        let proxy = EgressProxy::start(setup.requests.clone(), refusals.clone())
            .await
            .map_err(|error| {
                BrowserError::Start(format!(
                    "could not start the browser's network proxy on 127.0.0.1: {error}"
                ))
            })?;
        let chromium = launch::launch(
            &chromium_path,
            &setup.profile_dir,
            &setup.protected,
            proxy.port(),
        )
        .await
        .map_err(|error| BrowserError::Start(error.to_string()))?;
        let downloads = setup.profile_dir.join("downloads");
        std::fs::create_dir_all(&downloads).map_err(|error| {
            BrowserError::Start(format!("cannot create {}: {error}", downloads.display()))
        })?;
        let mut session = BrowserSession {
            chromium,
            tabs: Vec::new(),
            current: 0,
            downloads,
            setup: setup.clone(),
            guard: None,
            refusals,
            _proxy: proxy,
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
        let rules = self.setup.requests.clone();
        self.guard = Some(RequestGuard::install(self.cdp(), rules, self.refusals.clone()).await?);
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

    /// A future that resolves when Chromium's pipe closes (for a watcher task).
    pub fn closed_signal(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let cdp = self.chromium.cdp.clone();
        async move { cdp.closed().await }
    }

    /// The last error line Chromium wrote (why it stopped, when it did).
    pub fn last_words(&self) -> String {
        self.chromium.said.last_error()
    }

    /// Asks Chromium to close, then kills what is left of it.
    pub async fn stop(mut self) {
        let _ = self.browser_call("Browser.close", json!({})).await;
        let exited = tokio::time::timeout(Duration::from_secs(3), self.chromium.child.wait()).await;
        if exited.is_err() {
            kill_group(self.chromium.child.id());
            let _ = self.chromium.child.kill().await;
        }
    }

    /// Runs one action; the model is told of any request or connection of the page the guard
    /// or the proxy refused.
    pub async fn act(&mut self, action: Action) -> Result<Outcome, BrowserError> {
        let result = self.act_unguarded(action).await;
        self.refusals.settled(GUARD_SETTLE).await;
        let refusals = self.refusals.take();
        if refusals.is_empty() {
            return result;
        }
        let refusals = refusals.join(" ");
        match result {
            Ok(mut outcome) => {
                outcome.summary = format!("{} {refusals}", outcome.summary).trim().to_string();
                Ok(outcome)
            }
            // A crash restarts the browser (the actor matches on it); any other failure — a
            // page that navigated away mid-action (`StaleRef`) included — still tells the model
            // what was refused: the sentences were taken from the log and are said only here.
            Err(BrowserError::Crashed) => Err(BrowserError::Crashed),
            Err(other) => Err(BrowserError::Page(format!("{other}. {refusals}"))),
        }
    }

    async fn act_unguarded(&mut self, action: Action) -> Result<Outcome, BrowserError> {
        match action {
            Action::Open { url, new_tab } => self.open(&url, new_tab).await,
            Action::Snapshot => self.snapshot_outcome("").await,
            Action::Click { reference } => self.click(reference).await,
            Action::Type {
                reference,
                text,
                submit,
            } => self.type_text(reference, &text, submit).await,
            Action::Select { reference, value } => self.select(reference, &value).await,
            Action::Press { key } => self.press_and_settle(&key).await,
            Action::Scroll { down } => self.scroll(down).await,
            Action::Back => self.back().await,
            Action::WaitFor {
                text,
                reference,
                timeout,
            } => self.wait_for(text, reference, timeout).await,
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
        Ok(self
            .cdp()
            .call(Some(&session), method, params, CALL_TIMEOUT)
            .await?)
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
            .browser_call(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
            )
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
                "there is no snapshot of this page yet; take a snapshot first and use its numbers"
                    .into(),
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
        match self
            .evaluate("JSON.stringify([location.href, document.title])")
            .await
        {
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
        if let Some(error) = navigated
            .get("errorText")
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
        {
            return Err(BrowserError::Page(format!(
                "the page could not be opened: {error}"
            )));
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
                "Page.frameStartedLoading" | "Page.frameRequestedNavigation" if ours => {
                    loading = true
                }
                "Page.loadEventFired" if ours => {
                    loading = false;
                    if pending.is_empty() {
                        break;
                    }
                }
                "Browser.downloadWillBegin" => {
                    let guid = event.params["guid"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let name = event.params["suggestedFilename"]
                        .as_str()
                        .unwrap_or("download")
                        .to_string();
                    pending.push((guid, name));
                    loading = false;
                }
                "Browser.downloadProgress" => {
                    let guid = event.params["guid"].as_str().unwrap_or_default();
                    let state = event.params["state"].as_str().unwrap_or_default();
                    if let Some(index) = pending.iter().position(|(known, _)| known == guid) {
                        if state == "completed" {
                            let (guid, name) = pending.remove(index);
                            finished.push(Download {
                                path: self.downloads.join(&guid),
                                name,
                            });
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
        return Err(BrowserError::Page(format!(
            "the page's script failed: {text}"
        )));
    }
    Ok(answer["result"]["value"].clone())
}

/// Kills Chromium's process group (without namespaces its helpers share its group).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|pid| i32::try_from(pid).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Where a download named `name` would be saved in the workspace: `inbox/<name>`, numbered when
/// taken, the name reduced to safe characters.
pub fn inbox_name(inbox: &Path, name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.');
    let cleaned = if cleaned.is_empty() {
        "download"
    } else {
        cleaned
    };
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

//! The actions on elements and tabs of a [`BrowserSession`] (the session's own file has starting,
//! stopping, opening, snapshots and waiting for a page to settle): `click`, `type`, `select`,
//! `press`, `scroll`, `back`, `wait_for`, screenshots and PDFs, tabs, `login`. Every element is
//! reached through the last snapshot's references in the isolated world (`locate`).

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::{BrowserSession, page_targets};
use crate::browser::{BrowserError, Outcome};

impl BrowserSession {
    /// The centre of element `reference` (scrolled into view), or why it cannot be used.
    pub(super) async fn locate(&self, reference: u32) -> Result<(f64, f64), BrowserError> {
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

    pub(super) async fn click(&mut self, reference: u32) -> Result<Outcome, BrowserError> {
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
        let mut outcome = self
            .snapshot_outcome(&format!("Clicked [{reference}]."))
            .await?;
        outcome.downloads = downloads;
        Ok(outcome)
    }

    /// Focuses element `reference` and selects what it holds (typing replaces it).
    pub(super) async fn focus(&self, reference: u32) -> Result<(), BrowserError> {
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
            _ => Err(BrowserError::Page(format!(
                "element [{reference}] cannot take text"
            ))),
        }
    }

    pub(super) async fn type_text(
        &mut self,
        reference: u32,
        text: &str,
        submit: bool,
    ) -> Result<Outcome, BrowserError> {
        self.focus(reference).await?;
        self.page_call("Input.insertText", json!({"text": text}))
            .await?;
        if submit {
            return self.press_and_settle("Enter").await;
        }
        self.snapshot_outcome(&format!("Typed into [{reference}]."))
            .await
    }

    pub(super) async fn select(
        &mut self,
        reference: u32,
        value: &str,
    ) -> Result<Outcome, BrowserError> {
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
            Value::Bool(true) => {
                self.snapshot_outcome(&format!("Selected {value:?} in [{reference}]."))
                    .await
            }
            Value::String(options) => Err(BrowserError::Invalid(format!(
                "[{reference}] has no option {value:?}; its options are: {options}"
            ))),
            _ => Err(BrowserError::Invalid(format!(
                "[{reference}] is not a list to select from"
            ))),
        }
    }

    pub(super) async fn press(&self, key: &str) -> Result<(), BrowserError> {
        let (key, code, text) = key_event(key)
            .ok_or_else(|| BrowserError::Invalid(format!(
                "unknown key {key:?}; use Enter, Tab, Escape, Backspace, Space, ArrowUp, ArrowDown, ArrowLeft, ArrowRight, PageUp, PageDown, Home or End"
            )))?;
        let mut down =
            json!({"type": "keyDown", "key": key, "code": key, "windowsVirtualKeyCode": code});
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

    pub(super) async fn press_and_settle(&mut self, key: &str) -> Result<Outcome, BrowserError> {
        let events = self.cdp().subscribe();
        self.press(key).await?;
        let downloads = self.settle(events, false).await?;
        let mut outcome = self.snapshot_outcome(&format!("Pressed {key}.")).await?;
        outcome.downloads = downloads;
        Ok(outcome)
    }

    pub(super) async fn scroll(&mut self, down: bool) -> Result<Outcome, BrowserError> {
        let sign = if down { 1 } else { -1 };
        self.evaluate(&format!(
            "window.scrollBy(0, {sign} * window.innerHeight * 0.8); window.scrollY"
        ))
        .await?;
        self.snapshot_outcome(if down {
            "Scrolled down."
        } else {
            "Scrolled up."
        })
        .await
    }

    pub(super) async fn back(&mut self) -> Result<Outcome, BrowserError> {
        let history = self
            .page_call("Page.getNavigationHistory", json!({}))
            .await?;
        let index = history["currentIndex"].as_u64().unwrap_or(0) as usize;
        let Some(entry) = index
            .checked_sub(1)
            .and_then(|earlier| history["entries"].get(earlier))
        else {
            return Err(BrowserError::Invalid(
                "there is no earlier page in this tab".into(),
            ));
        };
        let entry_id = entry["id"].clone();
        let events = self.cdp().subscribe();
        self.page_call("Page.navigateToHistoryEntry", json!({"entryId": entry_id}))
            .await?;
        self.settle(events, true).await?;
        self.snapshot_outcome("Went back.").await
    }

    pub(super) async fn wait_for(
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
    pub(super) async fn capture(&mut self, pdf: bool) -> Result<Outcome, BrowserError> {
        let (method, params) = if pdf {
            ("Page.printToPDF", json!({"printBackground": true}))
        } else {
            ("Page.captureScreenshot", json!({"format": "png"}))
        };
        let captured = self.page_call(method, params).await?;
        let data = captured["data"].as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|error| {
                BrowserError::Page(format!("Chromium sent an unreadable file: {error}"))
            })?;
        Ok(Outcome {
            summary: if pdf {
                "Printed the page to PDF."
            } else {
                "Took a screenshot."
            }
            .into(),
            page: self.page_info().await,
            file: Some(bytes),
            ..Outcome::default()
        })
    }

    /// The open tabs (attaching to ones the page opened), after switching to `switch_to`.
    pub(super) async fn tabs(&mut self, switch_to: Option<usize>) -> Result<Outcome, BrowserError> {
        let targets = self.browser_call("Target.getTargets", json!({})).await?;
        let pages = page_targets(&targets);
        self.tabs
            .retain(|tab| pages.iter().any(|(target, _, _)| *target == tab.target));
        for (target, _, _) in &pages {
            if !self.tabs.iter().any(|tab| &tab.target == target) {
                let tab = self.attach(target).await?;
                self.tabs.push(tab);
            }
        }
        if let Some(wanted) = switch_to {
            if wanted == 0 || wanted > self.tabs.len() {
                return Err(BrowserError::Invalid(format!(
                    "there is no tab {wanted}; there are {}",
                    self.tabs.len()
                )));
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
            let mark = if index == self.current {
                " (current)"
            } else {
                ""
            };
            lines.push(format!("{}. {title} — {url}{mark}", index + 1));
        }
        Ok(Outcome {
            summary: format!("Open tabs:\n{}", lines.join("\n")),
            page: self.page_info().await,
            ..Outcome::default()
        })
    }

    pub(super) async fn close(&mut self, tab: Option<usize>) -> Result<Outcome, BrowserError> {
        let index = match tab {
            Some(0) => return Err(BrowserError::Invalid("tabs are numbered from 1".into())),
            Some(number) => number - 1,
            None => self.current,
        };
        let Some(closing) = self.tabs.get(index) else {
            return Err(BrowserError::Invalid(format!(
                "there is no tab {}",
                index + 1
            )));
        };
        let target = closing.target.clone();
        self.browser_call("Target.closeTarget", json!({"targetId": target}))
            .await?;
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
    pub(super) async fn login(&mut self, site: &str) -> Result<Outcome, BrowserError> {
        let page = self.page_info().await;
        let host = page.host();
        let login = self
            .setup
            .logins
            .iter()
            .find(|login| {
                crate::browser::site_covers(&login.site, site)
                    || crate::browser::site_covers(site, &login.site)
            })
            .cloned()
            .ok_or_else(|| {
                BrowserError::Invalid(format!("no [browser.logins] entry is for {site:?}"))
            })?;
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
        let mut outcome = self
            .snapshot_outcome(&format!(
                "Logged in to {} as the configured user.",
                login.site
            ))
            .await?;
        outcome.downloads = downloads;
        Ok(outcome)
    }

    /// Types `username` into the field before the password field (when there is one) and the
    /// password into the password field, then submits the form (or presses Enter).
    pub(super) async fn fill_login(
        &mut self,
        username: &str,
        password: &str,
    ) -> Result<(), BrowserError> {
        let target = self.tab()?.target.clone();
        let world = self
            .page_call(
                "Page.createIsolatedWorld",
                json!({"frameId": target, "worldName": "clawvisor-login"}),
            )
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
            return Err(BrowserError::Page(
                "this page has no password field to log in with".into(),
            ));
        }
        if found == 2 {
            self.focus(1).await?;
            self.page_call("Input.insertText", json!({"text": username}))
                .await?;
        }
        self.focus(2).await?;
        self.page_call("Input.insertText", json!({"text": password}))
            .await?;
        let submitted = self
            .evaluate_in_world("(() => { const form = globalThis.__clawvisorRefs[2]; if (!form) return false; form.requestSubmit(); return true; })()")
            .await?;
        if submitted != Value::Bool(true) {
            self.press("Enter").await?;
        }
        Ok(())
    }
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

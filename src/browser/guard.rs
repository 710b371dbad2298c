//! The browser's request guard: every request Chromium's pages make — the page the tool opens,
//! and everything a page does by itself (a redirect, `location.href = …`, a link click, a form
//! post, a meta refresh, an iframe, an image or script) — is paused at the browser level
//! (`Fetch.enable` on the browser target, so frames in other processes are covered too) and let
//! through only if it passes the same address rule as `web_fetch` (`tool::address`): http(s) to
//! public addresses, unless `[tools] web_fetch_allow_private` or a `[browser] allow_private`
//! entry allows it. A refused request fails as `BlockedByClient`, and a sentence saying which
//! address was refused and why is kept for the model ([`RefusalLog`], shared with the proxy).
//!
//! Invariants: no paused request is forgotten (the events come through a route of their own,
//! never a lagging broadcast, and each is answered, continued or failed); other schemes (`data:`,
//! `blob:`, `file:`) never reach the network and are left to Chromium and the sandbox (Landlock
//! keeps protected files out of reach).
//!
//! What it does not see — WebSocket and WebRTC connections, and a name whose DNS answer changes
//! after this check (DNS rebinding) — the egress proxy (`super::proxy`) decides: every
//! connection goes through it and is checked at the address it uses. The guard stays as a
//! second wall with better words: it sees the whole URL and what kind of request it is (the
//! proxy sees only `host:port` of an encrypted tunnel), and it stops a refused request before
//! Chromium opens anything. Its cost is one DevTools round trip per request (BENCHMARKS.md,
//! "#32: browser", "Proxy").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::json;

use super::cdp::{Cdp, CdpEvent};
use crate::tool::address::{AddressPolicy, FetchRefusal, allowed_private_entry, check_destination};

/// One `Fetch` answer's bound.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Most refusals kept between two actions (the first ones; the rest are counted).
const MAX_KEPT: usize = 8;
/// Longest shown URL in a refusal.
const MAX_URL_CHARS: usize = 160;

/// What the guard decides with.
#[derive(Debug, Clone)]
pub struct GuardRules {
    pub policy: AddressPolicy,
    /// `[browser] allow_private`: `host` or `host:port` entries reachable even when private.
    pub allow_private: Vec<String>,
}

#[derive(Default)]
struct Refusals {
    sentences: Vec<String>,
    more: usize,
}

/// The refusals of one Chromium's requests, kept for the model (by this guard and by the
/// egress proxy, `super::proxy`), and how many checks are still running. Cheap to clone.
#[derive(Clone, Default)]
pub struct RefusalLog {
    refusals: Arc<Mutex<Refusals>>,
    in_flight: Arc<AtomicUsize>,
}

impl RefusalLog {
    /// The refusals since the last call, as sentences for the model (empty: none).
    pub fn take(&self) -> Vec<String> {
        let mut refusals = std::mem::take(&mut *self.lock());
        if refusals.more > 0 {
            refusals.sentences.push(format!(
                "{} more requests of the page were refused the same way.",
                refusals.more
            ));
        }
        refusals.sentences
    }

    /// Keeps one sentence (the first [`MAX_KEPT`] different ones; the rest are counted).
    pub fn keep(&self, sentence: String) {
        let mut refusals = self.lock();
        if refusals.sentences.contains(&sentence) {
            return;
        }
        if refusals.sentences.len() < MAX_KEPT {
            refusals.sentences.push(sentence);
        } else {
            refusals.more += 1;
        }
    }

    /// Counts a check as running until the returned value is dropped.
    pub fn checking(&self) -> CheckInFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        CheckInFlight(self.in_flight.clone())
    }

    /// Waits (at most `bound`) until no check is still running.
    pub async fn settled(&self, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        while self.in_flight.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Refusals> {
        self.refusals
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// One running check of a [`RefusalLog`]; dropping it ends the check.
pub struct CheckInFlight(Arc<AtomicUsize>);

impl Drop for CheckInFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The running guard of one Chromium. Cheap to clone.
#[derive(Clone)]
pub struct RequestGuard {
    log: RefusalLog,
}

impl RequestGuard {
    /// Routes `Fetch.requestPaused` to the guard's task and turns interception on for every
    /// target of this Chromium.
    pub async fn install(
        cdp: &Cdp,
        rules: GuardRules,
        log: RefusalLog,
    ) -> Result<RequestGuard, super::BrowserError> {
        let guard = RequestGuard { log };
        let mut paused = cdp.route("Fetch.requestPaused");
        let (task_cdp, task_guard, rules) = (cdp.clone(), guard.clone(), Arc::new(rules));
        tokio::spawn(async move {
            while let Some(event) = paused.recv().await {
                let checking = task_guard.log.checking();
                let (cdp, guard, rules) = (task_cdp.clone(), task_guard.clone(), rules.clone());
                tokio::spawn(async move {
                    guard.decide(&cdp, &rules, event).await;
                    drop(checking);
                });
            }
        });
        cdp.call(
            None,
            "Fetch.enable",
            json!({"patterns": [{"urlPattern": "*", "requestStage": "Request"}]}),
            ANSWER_TIMEOUT,
        )
        .await?;
        Ok(guard)
    }

    /// Continues or fails one paused request.
    async fn decide(&self, cdp: &Cdp, rules: &GuardRules, event: CdpEvent) {
        let Some(request_id) = event.params["requestId"].as_str().map(str::to_string) else {
            return;
        };
        let raw_url = event.params["request"]["url"].as_str().unwrap_or_default();
        let verdict = match url::Url::parse(raw_url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {
                if allowed_private_entry(&url, &rules.allow_private) {
                    Ok(())
                } else {
                    check_destination(&url, rules.policy).await
                }
            }
            Ok(_) => Ok(()),
            Err(_) => Err(FetchRefusal::NoHost),
        };
        let session = event.session.as_deref();
        let answer = match verdict {
            Ok(()) => {
                cdp.call(
                    session,
                    "Fetch.continueRequest",
                    json!({"requestId": request_id}),
                    ANSWER_TIMEOUT,
                )
                .await
            }
            Err(refusal) => {
                let resource = event.params["resourceType"].as_str().unwrap_or("Other");
                self.log.keep(refusal_sentence(raw_url, resource, &refusal));
                tracing::info!(url = %crate::secrets::redact(raw_url), %refusal, "the browser refused a page's request");
                cdp.call(
                    session,
                    "Fetch.failRequest",
                    json!({"requestId": request_id, "errorReason": "BlockedByClient"}),
                    ANSWER_TIMEOUT,
                )
                .await
            }
        };
        if let Err(error) = answer {
            tracing::debug!(%error, "a paused request could not be answered (its page is gone)");
        }
    }
}

/// "The page tried to open http://10.0.0.1/ (a page or frame); the browser refused it: …".
fn refusal_sentence(url: &str, resource: &str, refusal: &FetchRefusal) -> String {
    let shown = crate::secrets::redact(url);
    let shown: String = if shown.chars().count() > MAX_URL_CHARS {
        shown
            .chars()
            .take(MAX_URL_CHARS)
            .chain("…".chars())
            .collect()
    } else {
        shown.into_owned()
    };
    let what = match resource {
        "Document" => {
            "a page or frame to open (a redirect, link, form, refresh or script)".to_string()
        }
        other => format!("a {} for the page", other.to_ascii_lowercase()),
    };
    let why = refusal_reason(refusal);
    format!("The page asked for {shown} ({what}); the browser refused it: {why}.")
}

/// Why the browser refused a destination, in words for the model and the operator.
pub fn refusal_reason(refusal: &FetchRefusal) -> String {
    match refusal {
        FetchRefusal::ForbiddenAddress {
            host,
            address,
            kind,
        } => format!(
            "{host} is {kind} address ({address}), and the browser only reaches public \
             addresses, like web_fetch (the operator can allow private ones with [tools] \
             web_fetch_allow_private, or one host with [browser] allow_private)"
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_address_and_why() {
        let refusal = FetchRefusal::ForbiddenAddress {
            host: "10.0.0.1".into(),
            address: "10.0.0.1".parse().expect("an address"),
            kind: "a private",
        };
        let sentence = refusal_sentence("http://10.0.0.1/admin", "Document", &refusal);
        assert!(sentence.contains("http://10.0.0.1/admin"), "{sentence}");
        assert!(sentence.contains("a private address"), "{sentence}");
    }
}

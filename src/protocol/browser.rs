//! The browser service: one per agent that lists the `browser` tool, served by
//! `actors/browser.rs` (a headless Chromium started on first use, closed when idle). The actions
//! and their outcomes are `crate::browser`'s.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::browser::{Action, BrowserError, Outcome};
use crate::registry::Registry;

/// Where agent `agent`'s browser is registered: `browser:<agent>`.
pub fn name(agent: &str) -> ServiceName<BrowserMsg> {
    ServiceName::new(format!("browser:{agent}"))
}

/// What the browser is doing, for `/metrics`, Studio and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrowserStatus {
    /// Chromium is running.
    pub open: bool,
    /// Chromium's process id (the outer one under namespaces).
    pub pid: Option<u32>,
    /// How it is confined ("under Landlock in its own namespaces").
    pub confined: String,
    /// Chromium starts, stops for idleness and unexpected exits since the actor started.
    pub starts: u64,
    pub idle_closes: u64,
    pub crashes: u64,
    /// Actions run, and of those failed.
    pub actions: u64,
    pub failures: u64,
}

/// What others may ask of a browser.
pub enum BrowserMsg {
    /// Runs one action, starting Chromium first when it is not running.
    Act(Action, RpcReplyPort<Result<Outcome, BrowserError>>),
    /// A PNG of the current page for an approval prompt; `None` when no browser is open (none
    /// is started for it).
    Screenshot(RpcReplyPort<Option<Vec<u8>>>),
    Status(RpcReplyPort<BrowserStatus>),
}

/// One agent's browser, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Browser {
    registry: Registry,
    agent: String,
}

impl Browser {
    pub fn new(registry: &Registry, agent: &str) -> Browser {
        Browser {
            registry: registry.clone(),
            agent: agent.to_string(),
        }
    }

    /// Runs `action`, waiting at most `timeout` (a page load, a download) for the answer.
    pub async fn act(&self, action: Action, timeout: Duration) -> Result<Outcome, BrowserError> {
        super::ask(&self.registry, &name(&self.agent), Some(timeout), |reply| {
            BrowserMsg::Act(action, reply)
        })
        .await
        .map_err(|error| match error {
            CallError::NotRunning { .. } => BrowserError::Start(
                "this agent's browser is not running (it restarts after a failure); try again in a moment".into(),
            ),
            CallError::NoAnswer { .. } => BrowserError::Page(format!(
                "the browser did not answer within {} s; the page may be stuck — try snapshot, or open it again",
                timeout.as_secs()
            )),
        })?
    }

    /// A screenshot of the current page, if a browser is open (never starts one).
    pub async fn screenshot(&self) -> Option<Vec<u8>> {
        super::ask(
            &self.registry,
            &name(&self.agent),
            Some(Duration::from_secs(15)),
            BrowserMsg::Screenshot,
        )
        .await
        .ok()
        .flatten()
    }

    pub async fn status(&self) -> Result<BrowserStatus, CallError> {
        super::ask(
            &self.registry,
            &name(&self.agent),
            Some(Duration::from_secs(5)),
            BrowserMsg::Status,
        )
        .await
    }
}

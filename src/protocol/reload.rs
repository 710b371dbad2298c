//! The reload service: re-reads the config and agent files, validates them whole and applies the
//! difference through the supervision tree. SIGHUP, `clawvisor reload` (through Studio's
//! `POST /api/v1/reload`) and Studio's button all come here. Served by `actors/reloader.rs`.
//!
//! One reload runs at a time (the actor's mailbox orders them); each answers with a
//! [`ReloadReport`]: what was added, removed or restarted, which settings need a restart, or why
//! nothing changed. Callers wait [`TIMEOUT`] (120 s) for it; Studio's route then answers 504
//! ("outcome unknown"), and `clawvisor reload` and Studio's page wait 150 s, past that.

use std::time::Duration;

use ractor::RpcReplyPort;
use serde::{Deserialize, Serialize};

use super::{CallError, ServiceName};
use crate::registry::Registry;

/// Where the reloader is registered.
pub const NAME: ServiceName<ReloadMsg> = ServiceName::fixed("reloader");

/// How long a caller waits for a reload's report: agents stop within their shutdown budget, links
/// and bots restart. A reload still running then goes on and is reported in the log, Studio's
/// events and the audit log; the caller only knows that its outcome is unknown. Clients of
/// `POST /api/v1/reload` (the CLI, Studio's page) wait longer than this, so that they get the
/// report or the route's own "outcome unknown" answer rather than their own timeout.
pub const TIMEOUT: Duration = Duration::from_secs(120);

pub enum ReloadMsg {
    /// Re-read the files and apply them; `trigger` says who asked (`sighup`, `studio`, `cli`).
    Reload {
        trigger: String,
        reply: RpcReplyPort<ReloadReport>,
    },
}

/// What changed in one kind of child (agents, bots, MCP servers, services).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub restarted: Vec<String>,
    /// Kept running, with a new set of agents (MCP servers whose agents alone changed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retargeted: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.restarted.is_empty()
            && self.retargeted.is_empty()
    }

    fn describe(&self, kind: &str) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        for (verb, names) in [
            ("added", &self.added),
            ("removed", &self.removed),
            ("restarted", &self.restarted),
            ("retargeted", &self.retargeted),
        ] {
            if !names.is_empty() {
                parts.push(format!("{verb} {}", names.join(", ")));
            }
        }
        Some(format!("{kind}: {}", parts.join("; ")))
    }
}

/// The outcome of one reload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadReport {
    /// True when the files were applied whole. False when they were refused (then nothing
    /// changed and `error` says why) or applied in part (`partial`).
    pub ok: bool,
    /// Some steps failed (a supervisor did not answer): `warnings` names each; the rest was
    /// applied, and the next reload tries the failed steps again.
    #[serde(default)]
    pub partial: bool,
    /// Why the files were refused: the file, the key and what is expected.
    pub error: Option<String>,
    pub agents: Changes,
    pub bots: Changes,
    pub mcp_servers: Changes,
    /// Root services whose slice of the agent files changed (approvals, memory, ...), restarted.
    pub services: Changes,
    /// Settings that changed in the files but only apply at the next start (`studio.bind`).
    pub needs_restart: Vec<String>,
    /// Things worth telling the operator that did not stop the reload.
    pub warnings: Vec<String>,
}

impl ReloadReport {
    /// A refused reload: nothing changed.
    pub fn refused(error: impl Into<String>) -> Self {
        Self {
            ok: false,
            error: Some(error.into()),
            ..Self::default()
        }
    }

    /// True when the reload changed nothing running.
    pub fn unchanged(&self) -> bool {
        self.agents.is_empty()
            && self.bots.is_empty()
            && self.mcp_servers.is_empty()
            && self.services.is_empty()
    }

    /// One paragraph for a log line, an event, the CLI.
    pub fn summary(&self) -> String {
        if let Some(error) = &self.error {
            return format!("reload refused, nothing changed: {error}");
        }
        let mut lines: Vec<String> = [
            self.agents.describe("agents"),
            self.bots.describe("bots"),
            self.mcp_servers.describe("MCP servers"),
            self.services.describe("services"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if lines.is_empty() {
            lines.push("nothing to change".into());
        }
        if !self.needs_restart.is_empty() {
            lines.push(format!(
                "needs a restart: {}",
                self.needs_restart.join(", ")
            ));
        }
        for warning in &self.warnings {
            lines.push(format!("warning: {warning}"));
        }
        if self.partial {
            return format!(
                "reloaded in part (the next reload retries the rest): {}",
                lines.join("; ")
            );
        }
        format!("reloaded: {}", lines.join("; "))
    }
}

/// The reloader, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Reloader {
    registry: Registry,
}

impl Reloader {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    /// Re-reads the files and applies them; the report says what happened.
    pub async fn reload(&self, trigger: &str) -> Result<ReloadReport, CallError> {
        let trigger = trigger.to_string();
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ReloadMsg::Reload { trigger, reply }
        })
        .await
    }
}

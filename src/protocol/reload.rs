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
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CallError, ServiceName};
use crate::config::edit::Setting;
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
    /// Change the files (Studio's agent editor and setup wizard): validated whole like a reload
    /// before anything is written, written atomically, audited as `by`'s, then applied by a
    /// reload.
    Edit {
        edit: FileEdit,
        by: String,
        reply: RpcReplyPort<EditOutcome>,
    },
}

/// A change to the files an operator also edits by hand.
#[derive(Debug, Clone, PartialEq)]
pub enum FileEdit {
    /// A new agent file, `<agents dir>/<name>.toml`.
    CreateAgent {
        name: String,
        settings: Vec<(String, Setting)>,
    },
    /// Keys of an existing agent's file set or taken out; the rest of the file stays.
    UpdateAgent {
        name: String,
        settings: Vec<(String, Setting)>,
    },
    /// A new agent with `from`'s settings (and no bot: one bot serves one agent).
    DuplicateAgent { from: String, name: String },
    /// The agent's file removed; with `remove_data`, its workspace too (transcripts, runs and
    /// the audit log stay).
    DeleteAgent { name: String, remove_data: bool },
    /// `[providers.<name>]` of the daemon's config set (added or changed).
    SetProvider {
        name: String,
        kind: String,
        base_url: String,
        api_key_env: String,
        free: bool,
    },
    /// A `[[nodes]]` entry added to the daemon's config (issue #34; paired before).
    AddNode {
        name: String,
        url: String,
        agents: Vec<String>,
    },
    /// The `[[nodes]]` entry named `name` taken out.
    RemoveNode { name: String },
}

/// What became of a [`FileEdit`].
#[derive(Debug, Clone, PartialEq)]
pub enum EditOutcome {
    /// Written, then applied: the file and the reload's report.
    Applied {
        path: String,
        report: Box<ReloadReport>,
    },
    /// Refused before anything was written; the text names the file and the key to fix.
    Refused(String),
    /// Valid, but the file cannot be written (read-only files or directory): the text to put
    /// there by hand, and why it could not be written.
    NotWritable {
        path: String,
        reason: String,
        text: Option<String>,
    },
}

/// What changed in one kind of child (agents, bots, MCP servers, services).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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

/// The outcome of one reload (Studio answers it as serialized here, with its `summary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
    /// WhatsApp and Signal accounts (`ada's Signal account`).
    #[serde(default)]
    pub channel_accounts: Changes,
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
            && self.channel_accounts.is_empty()
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
            self.channel_accounts.describe("channel accounts"),
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

    /// Changes the files as `edit` says, as `by`, and applies them (see [`ReloadMsg::Edit`]).
    pub async fn edit(&self, edit: FileEdit, by: &str) -> Result<EditOutcome, CallError> {
        let by = by.to_string();
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ReloadMsg::Edit { edit, by, reply }
        })
        .await
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

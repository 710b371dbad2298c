//! Tools an agent can call: the `Tool` trait and the built-in tools.
//!
//! Architecture Invariant: no tool runs without a policy decision. Tools are only ever invoked by
//! the agent loop's dispatcher after `policy::gate` allowed the call (or a recorded approval did).
//! A tool never decides its own permission; it only describes its effect and the risk of a call.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::domain::ChatKey;
use crate::llm::ToolSpec;
use crate::policy::Assessment;
use crate::registry::Registry;
use crate::store::Store;

/// What a tool can do to the world, independent of one call's arguments. Autonomy modes use it:
/// `require_approval` lets `ReadOnly` tools run freely and asks for the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    ReadOnly,
    Write,
    Destructive,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::ReadOnly => "read_only",
            Effect::Write => "write",
            Effect::Destructive => "destructive",
        }
    }
}

/// The result of a tool call, as text for the model. `is_error` results are fed back to the model
/// as errors (it may retry differently); they are not failures of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: true,
        }
    }
}

/// Limits and switches for the built-in tools, from `[tools]` in the config and the agent file.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSettings {
    /// `web_fetch` may reach private, loopback and link-local addresses (off by default).
    pub web_fetch_allow_private: bool,
    pub web_fetch_max_bytes: u64,
    pub web_fetch_timeout: Duration,
    /// The agent may use `shell` at all.
    pub shell_enabled: bool,
    pub shell_timeout: Duration,
    pub shell_max_output: usize,
    /// Largest file `read_file` returns (bigger files are truncated with a note).
    pub read_max_bytes: u64,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            web_fetch_allow_private: false,
            web_fetch_max_bytes: 2 * 1024 * 1024,
            web_fetch_timeout: Duration::from_secs(20),
            shell_enabled: false,
            shell_timeout: Duration::from_secs(60),
            shell_max_output: 64 * 1024,
            read_max_bytes: 1024 * 1024,
        }
    }
}

/// Everything a tool call may use. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    pub agent: String,
    pub chat: ChatKey,
    pub run_id: i64,
    /// The agent's workspace: file tools are confined to it, `shell` runs in it.
    pub workspace: PathBuf,
    pub settings: Arc<ToolSettings>,
    pub registry: Registry,
    pub store: Store,
    /// Cancelled when the run is cancelled (`/stop`, shutdown, deadline).
    pub cancel: CancellationToken,
}

/// Errors that stop a call before it produced a result. They are reported to the model as tool
/// errors, with this text.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("refused: {0}")]
    Refused(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("cancelled")]
    Cancelled,
    #[error("{0}")]
    Failed(String),
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

pub trait Tool: Send + Sync {
    /// The name the model calls it by (`read_file`, `server__tool` for MCP tools).
    fn name(&self) -> &str;

    /// Name, description and JSON Schema of the arguments.
    fn spec(&self) -> ToolSpec;

    fn effect(&self) -> Effect;

    /// The risk of this particular call (arguments matter: shell commands, paths, hosts).
    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment;

    /// The exact action, as shown in an approval request ("shell: rm notes.txt").
    fn describe_call(&self, args: &Value) -> String;

    /// What a scoped grant is keyed on (a path, a host, a command's program).
    fn target(&self, args: &Value) -> String;

    /// How long one call may take before it is abandoned.
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
}

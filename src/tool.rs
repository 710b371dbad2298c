//! The tool contract: what a tool is ([`Tool`]), what a call may use ([`ToolContext`]), what it
//! returns ([`ToolOutput`], [`ToolError`]) and how its JSON arguments are checked ([`Args`]). What
//! a tool does to the world is the policy's `Effect`.
//!
//! The contract sits below the policy gate, the protocols and the tools themselves (`tools/`, the
//! MCP tools, the memory, schedule and handoff tools), so that each of them can name a tool
//! without importing the others.
//!
//! Architecture Invariant: no tool runs without a policy decision. Tools are only ever invoked by
//! the agent loop's dispatcher after `policy::gate` allowed the call (or a recorded approval did).
//! A tool never decides its own permission; it only describes its effect and the risk of a call.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::domain::ChatKey;
use crate::llm::ToolSpec;
use crate::policy::{Assessment, Effect};
use crate::registry::Registry;
use crate::store::Store;

pub mod address;
pub mod egress;

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
    /// Hosts `web_fetch` may always reach, even carrying text the run has not been given
    /// (`[tools] web_fetch_allow` and the agent file's `web_fetch_allow`; see `egress`).
    pub web_fetch_allow: Vec<String>,
    /// `[browser] allow_private`: private hosts (`host`, `host:port`) the browser may open
    /// although `web_fetch_allow_private` is off (`tool::address::allowed_private_entry`).
    pub browser_allow_private: Vec<String>,
    pub web_fetch_max_bytes: u64,
    pub web_fetch_timeout: Duration,
    /// The agent may use `shell` at all.
    pub shell_enabled: bool,
    pub shell_timeout: Duration,
    pub shell_max_output: usize,
    /// Largest file `read_file` returns (bigger files are truncated with a note).
    pub read_max_bytes: u64,
    /// Paths `shell` commands can never reach (Landlock): the data directory, the database and
    /// the config's directory. See `sandbox::protected_paths`.
    pub protected_paths: Vec<PathBuf>,
    /// More directories the shell's sandbox grants exactly like the workspace (read in L0,
    /// written in L1): a node's `[node] roots` after the first. Empty for agents.
    pub extra_roots: Vec<PathBuf>,
}

/// The `[tools]` defaults, with `shell` off and no protected paths.
impl Default for ToolSettings {
    fn default() -> Self {
        Self::from_tools(&crate::config::ToolsConfig::default(), false, Vec::new())
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
    /// The run's time zone (`agent::zone`): times without an offset are read in it.
    pub timezone: chrono_tz::Tz,
    /// What the run has read (private data, public text): `web_fetch` asks first when its URL
    /// could carry private data out. One per run, owned by it.
    pub egress: Arc<egress::RunEgress>,
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

/// What [`Tool::show_before_approval`] returns: done once the human has been shown it, with the
/// image it showed (a PNG), which is kept with the approval request for Studio.
pub type ShowFuture<'a> = Pin<Box<dyn Future<Output = Option<Vec<u8>>> + Send + 'a>>;

pub trait Tool: Send + Sync {
    /// The name the model calls it by (`read_file`, `server__tool` for MCP tools).
    fn name(&self) -> &str;

    /// Name, description and JSON Schema of the arguments.
    fn spec(&self) -> ToolSpec;

    fn effect(&self) -> Effect;

    /// The effect of this particular call, as the policy gate judges it. Most tools have one
    /// effect whatever the arguments; `send_message` to the run's own chat is a read.
    fn effect_for(&self, _args: &Value, _ctx: &ToolContext) -> Effect {
        self.effect()
    }

    /// The risk of this particular call (arguments matter: shell commands, paths, hosts).
    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment;

    /// The paired node (`[[nodes]] name`) this tool runs on, if it runs on another machine;
    /// the daemon's audit row of a call records it.
    fn node(&self) -> Option<&str> {
        None
    }

    /// Whether this call could write into the agent's workspace. When it runs, the workspace
    /// generation moves on and the grants given before lapse (`crate::store::workspace`), so a
    /// file written without a decision never changes what a grant lets run. By default: a writing
    /// or destructive call whose reach writes anywhere. Tools whose writes never land in the
    /// workspace (messages, memory, scheduled tasks) say no.
    fn may_write_workspace(&self, _args: &Value, effect: Effect, assessment: &Assessment) -> bool {
        matches!(effect, Effect::Write | Effect::Destructive)
            && assessment.reach.writes != crate::policy::Writes::Nothing
    }

    /// The exact action, as shown in an approval request ("shell: rm notes.txt").
    fn describe_call(&self, args: &Value) -> String;

    /// What a scoped grant is keyed on (a path, a host, a command's program).
    fn target(&self, args: &Value) -> String;

    /// Called once before a person is asked to approve this call: a tool may show them what the
    /// call is about (the browser sends a screenshot of the page to the chat) and return that
    /// image, which the approval request keeps (Studio shows it). Best effort, and nothing by
    /// default; the approval prompt itself is unchanged.
    fn show_before_approval<'a>(
        &'a self,
        _args: &'a Value,
        _ctx: &'a ToolContext,
    ) -> ShowFuture<'a> {
        Box::pin(async { None })
    }

    /// How long one call may take before it is abandoned.
    fn timeout(&self) -> Duration {
        Duration::from_secs(30)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
}

/// The arguments of one call, checked against the fields the tool declares.
///
/// The model sees the tool's JSON Schema, but nothing forces it to follow it: every accessor
/// reports a missing or mistyped field as `ToolError::InvalidArguments` naming the tool and the
/// field, so the model can correct itself.
pub struct Args<'a> {
    tool: &'a str,
    fields: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Checks that `args` is an object whose keys are all in `allowed` (an unknown key is most
    /// often a misspelt one, and saying so beats silently ignoring it).
    pub fn parse(tool: &'a str, args: &'a Value, allowed: &[&str]) -> Result<Args<'a>, ToolError> {
        let fields = match args {
            Value::Object(fields) => fields,
            // A call without arguments arrives as `null` from some providers.
            Value::Null => {
                static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
                EMPTY.get_or_init(Map::new)
            }
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "{tool}: arguments must be a JSON object, got {}",
                    json_type_name(other)
                )));
            }
        };
        if let Some(unknown) = fields.keys().find(|key| !allowed.contains(&key.as_str())) {
            return Err(ToolError::InvalidArguments(format!(
                "{tool}: unknown field `{unknown}` (expected: {})",
                allowed.join(", ")
            )));
        }
        Ok(Args { tool, fields })
    }

    /// A string field that must be present.
    pub fn required_str(&self, field: &str) -> Result<&'a str, ToolError> {
        match self.fields.get(field) {
            Some(Value::String(text)) => Ok(text),
            None | Some(Value::Null) => Err(self.invalid(field, "is required (a string)")),
            Some(other) => Err(self.wrong_type(field, "a string", other)),
        }
    }

    /// A string field that may be absent (or `null`).
    pub fn optional_str(&self, field: &str) -> Result<Option<&'a str>, ToolError> {
        match self.fields.get(field) {
            Some(Value::String(text)) => Ok(Some(text)),
            None | Some(Value::Null) => Ok(None),
            Some(other) => Err(self.wrong_type(field, "a string", other)),
        }
    }

    /// A non-negative integer field that may be absent. Integral floats (`3.0`) are accepted
    /// because some models write every number that way.
    pub fn optional_u64(&self, field: &str) -> Result<Option<u64>, ToolError> {
        match self.fields.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(number)) => {
                if let Some(value) = number.as_u64() {
                    return Ok(Some(value));
                }
                match number.as_f64() {
                    Some(value) if value >= 0.0 && value.fract() == 0.0 && value < 9.0e15 => {
                        Ok(Some(value as u64))
                    }
                    _ => Err(self.invalid(field, "must be a non-negative integer")),
                }
            }
            Some(other) => Err(self.wrong_type(field, "a non-negative integer", other)),
        }
    }

    /// A string field restricted to `choices`, with a default when absent.
    pub fn choice(
        &self,
        field: &str,
        choices: &[&'static str],
        default: &'static str,
    ) -> Result<&'static str, ToolError> {
        let Some(given) = self.optional_str(field)? else {
            return Ok(default);
        };
        choices
            .iter()
            .find(|choice| **choice == given)
            .copied()
            .ok_or_else(|| {
                self.invalid(
                    field,
                    &format!("must be one of {} (got {given:?})", choices.join(", ")),
                )
            })
    }

    fn invalid(&self, field: &str, problem: &str) -> ToolError {
        ToolError::InvalidArguments(format!("{}: `{field}` {problem}", self.tool))
    }

    fn wrong_type(&self, field: &str, expected: &str, got: &Value) -> ToolError {
        self.invalid(
            field,
            &format!("must be {expected}, got {}", json_type_name(got)),
        )
    }
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Cuts `text` to at most `max_bytes` bytes on a character boundary. Returns the kept part and
/// whether anything was cut.
pub fn truncate_on_char_boundary(text: &str, max_bytes: usize) -> (&str, bool) {
    if text.len() <= max_bytes {
        return (text, false);
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// Runs blocking work (file system calls) on tokio's blocking pool, giving up when the run is
/// cancelled. The blocking work itself cannot be interrupted; it is bounded by the caller.
pub(crate) async fn run_blocking<T, F>(ctx: &ToolContext, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    let handle = tokio::task::spawn_blocking(work);
    tokio::select! {
        joined = handle => match joined {
            Ok(result) => result,
            Err(join_error) => Err(ToolError::Failed(format!("the tool's worker failed: {join_error}"))),
        },
        () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
    }
}

impl ToolSettings {
    /// Tool limits for one agent from `[tools]` (`allow_shell` comes from its file).
    pub fn from_config(config: &crate::config::Config, allow_shell: bool) -> ToolSettings {
        ToolSettings {
            browser_allow_private: config.browser.allow_private.clone(),
            ..Self::from_tools(&config.tools, allow_shell, vec![config.data_dir.clone()])
        }
    }

    /// A node's settings (`clawvisor node serve`): the shell on, `[tools]`' limits, the node's
    /// data directory and config protected, its roots after the first granted like the first.
    pub fn for_node(
        tools: &crate::config::ToolsConfig,
        protected_paths: Vec<PathBuf>,
        extra_roots: Vec<PathBuf>,
    ) -> Self {
        ToolSettings {
            extra_roots,
            ..Self::from_tools(tools, true, protected_paths)
        }
    }

    fn from_tools(
        tools: &crate::config::ToolsConfig,
        allow_shell: bool,
        protected_paths: Vec<PathBuf>,
    ) -> ToolSettings {
        ToolSettings {
            web_fetch_allow_private: tools.web_fetch_allow_private,
            web_fetch_allow: tools.web_fetch_allow.clone(),
            browser_allow_private: Vec::new(),
            web_fetch_max_bytes: tools.web_fetch_max_bytes,
            web_fetch_timeout: tools.web_fetch_timeout.0,
            shell_enabled: allow_shell,
            shell_timeout: tools.shell_timeout.0,
            shell_max_output: tools.shell_max_output as usize,
            read_max_bytes: tools.read_max_bytes,
            protected_paths,
            extra_roots: Vec::new(),
        }
    }
}

//! `[mcp]` and `[[mcp.servers]]`: the MCP servers whose tools agents may use, how each is
//! reached (stdio child process or streamable HTTP) and how far its tools are trusted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Dur;

/// `[mcp]`: the MCP servers whose tools agents may use (`[[mcp.servers]]`, one link each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    pub servers: Vec<McpServerConfig>,
    /// How long a link waits for its server to answer `initialize` and list its tools.
    pub connect_timeout: Dur,
    /// How often a live link pings its server (health, latency, a dead HTTP server noticed).
    pub ping_every: Dur,
    /// A server that exhausted its restart budget is tried again after this long.
    pub degraded_retry: Dur,
    /// How long a run waits for the servers that give its agent tools to publish them (after a
    /// boot or a reload) before it runs without the missing ones, telling the model which. At
    /// most 10 minutes. (`/readyz` has no bound: it waits until each is published or failed.)
    pub startup_wait: Dur,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            connect_timeout: Dur::secs(30),
            ping_every: Dur::secs(30),
            degraded_retry: Dur::secs(300),
            startup_wait: Dur::secs(20),
        }
    }
}

/// How an MCP server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpTransportKind {
    /// A child process speaking JSON-RPC on stdin/stdout (in its own process group).
    Stdio,
    /// Streamable HTTP at `url`.
    Http,
}

/// How far a server's tools are trusted (the policy gate's MCP rules, `policy::mcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpTrustConfig {
    Trusted,
    Untrusted,
    /// Only tools that declare themselves read-only may run.
    ReadOnly,
}

impl McpTrustConfig {
    pub fn as_str(self) -> &'static str {
        match self {
            McpTrustConfig::Trusted => "trusted",
            McpTrustConfig::Untrusted => "untrusted",
            McpTrustConfig::ReadOnly => "read_only",
        }
    }
}

/// One `[[mcp.servers]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// `[a-z0-9_-]`, unique; tools are named `<name>__<tool>`.
    pub name: String,
    pub transport: McpTransportKind,
    /// stdio: the program and its arguments.
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: literal environment variables. The child gets only these, `env_from`, and
    /// PATH, HOME, LANG, USER, TMPDIR — never the daemon's own secrets.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: child variable = daemon environment variable holding a secret.
    #[serde(default)]
    pub env_from: BTreeMap<String, String>,
    /// stdio: working directory (relative to the config file's directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// http: the endpoint (`http://127.0.0.1:8000/mcp`).
    #[serde(default)]
    pub url: String,
    /// http: literal headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// http: header = environment variable holding its (secret) value.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    #[serde(default = "default_mcp_trust")]
    pub trust: McpTrustConfig,
    /// Agents that get this server's tools (`"*"`: every agent; empty: none, unless an agent's
    /// own file lists `mcp:<name>` or `<name>__<tool>`).
    #[serde(default)]
    pub agents: Vec<String>,
    /// Per-call timeout.
    #[serde(default = "default_mcp_timeout")]
    pub timeout: Dur,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Set only on the link of a `[[nodes]]` entry (issue #34; never read from a file): the
    /// daemon's data directory, where the node's pin and the daemon's keys are (`crate::node`).
    #[serde(skip)]
    pub node: Option<PathBuf>,
}

fn default_mcp_trust() -> McpTrustConfig {
    McpTrustConfig::Untrusted
}

fn default_mcp_timeout() -> Dur {
    Dur::secs(60)
}

fn default_true() -> bool {
    true
}

impl McpServerConfig {
    /// Every environment variable this server reads a secret from.
    pub fn secret_vars(&self) -> impl Iterator<Item = &str> {
        self.env_from
            .values()
            .chain(self.headers_env.values())
            .map(String::as_str)
    }
}

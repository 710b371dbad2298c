//! A short-lived session with one MCP server outside the daemon's links: `clawvisor mcp` while
//! the daemon is stopped, and `doctor`.
//!
//! It connects the way a link does (a stdio server as a child in its own process group with the
//! cleared environment, or streamable HTTP with its secret headers), initializes and lists the
//! tools within one deadline, calls tools with the server's timeout, and is closed by
//! [`DirectSession::close`] — or by being dropped: the rmcp session is cancelled and the child's
//! whole process group killed ([`ServerProcess`]'s `Drop`; the child also dies with this process
//! through `PR_SET_PDEATHSIG`). Nothing is recorded in `mcp_processes`: the process never
//! outlives this one, so the daemon's boot-time reaper has nothing to find.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use super::ToolInfo;
use super::client::{self, Service};
use super::process::ServerProcess;
use crate::config::{McpServerConfig, McpTransportKind};
use crate::protocol::mcp::McpError;
use crate::secrets::Secret;
use crate::tool::ToolOutput;

/// Lines of a stdio server's stderr kept to explain a failed start.
const STDERR_TAIL: usize = 5;

/// A connected server and its tools.
pub struct DirectSession {
    service: Service,
    /// Dropped last: kills the child's process group.
    process: Option<ServerProcess>,
    pub tools: Vec<ToolInfo>,
    /// The server's per-call timeout.
    call_timeout: Duration,
    pub latency: Duration,
}

impl DirectSession {
    /// Connects, initializes and lists every tool, all within `timeout`.
    pub async fn connect(
        server: &McpServerConfig,
        secrets: &BTreeMap<String, Secret>,
        timeout: Duration,
    ) -> Result<DirectSession, McpError> {
        let started = Instant::now();
        let (service, process, stderr) = match server.transport {
            McpTransportKind::Stdio => {
                let (process, mut pipes) = super::process::spawn(server, secrets)?;
                let tail = pipes.stderr.take().map(drain_stderr);
                match client::handshake_stdio(pipes, timeout).await {
                    Ok(service) => (service, Some(process), tail),
                    Err(error) => {
                        // Let the dying server's last words arrive before they explain it.
                        drop(process);
                        return Err(with_stderr(error, tail).await);
                    }
                }
            }
            McpTransportKind::Http => (
                client::handshake_http(server, secrets, timeout).await?,
                None,
                None,
            ),
        };
        let remaining = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(100));
        let tools = match client::list_tools(service.peer(), &server.name, remaining).await {
            Ok(tools) => tools,
            Err(error) => {
                drop(process);
                return Err(with_stderr(error, stderr).await);
            }
        };
        Ok(DirectSession {
            service,
            process,
            tools,
            call_timeout: server.timeout.0,
            latency: started.elapsed(),
        })
    }

    /// A tool by the server's own name, or by its namespaced `<server>__<tool>` name.
    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools
            .iter()
            .find(|tool| tool.remote_name == name)
            .or_else(|| self.tools.iter().find(|tool| tool.name == name))
    }

    /// Calls `tool` with `arguments`, checked against its input schema first.
    pub async fn call(&self, tool: &ToolInfo, arguments: Value) -> Result<ToolOutput, McpError> {
        super::schema::validate(&tool.input_schema, &arguments).map_err(|problem| {
            McpError::Call(format!("the arguments do not fit the tool: {problem}"))
        })?;
        client::call(
            self.service.peer(),
            &tool.remote_name,
            arguments,
            self.call_timeout,
        )
        .await
    }

    /// Ends the session and kills a stdio server's process group.
    pub async fn close(self) {
        let DirectSession {
            service, process, ..
        } = self;
        let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
        drop(process);
    }
}

/// Reads a server's stderr (so that it never blocks on a full pipe), keeping the last lines.
fn drain_stderr(stderr: tokio::process::ChildStderr) -> StderrTail {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let kept = tail.clone();
    let reader = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let line: String = line.chars().take(300).collect();
            if let Ok(mut tail) = kept.lock() {
                if tail.len() == STDERR_TAIL {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        }
    });
    StderrTail { tail, reader }
}

/// The last lines of a server's stderr, and the task reading them.
struct StderrTail {
    tail: Arc<Mutex<VecDeque<String>>>,
    reader: tokio::task::JoinHandle<()>,
}

/// The error with the server's last stderr lines (redacted), when it printed any.
async fn with_stderr(error: McpError, stderr: Option<StderrTail>) -> McpError {
    let Some(StderrTail { tail, reader }) = stderr else {
        return error;
    };
    // The pipe closes once the killed server's group is gone; then the reader has every line.
    let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
    let lines: Vec<String> = tail
        .lock()
        .map(|tail| tail.iter().cloned().collect())
        .unwrap_or_default();
    if lines.is_empty() {
        return error;
    }
    let output = crate::secrets::redact(&lines.join(" | ")).into_owned();
    match error {
        McpError::Protocol(text) => {
            McpError::Protocol(format!("{text}; its last output: {output}"))
        }
        McpError::Connect(text) => McpError::Connect(format!("{text}; its last output: {output}")),
        other => McpError::Call(format!("{other}; its last output: {output}")),
    }
}

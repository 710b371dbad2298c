//! Connecting a link: start the stdio server (recorded in `mcp_processes` for the boot-time
//! reaper) or reach the HTTP endpoint, `initialize`, list the tools; and watch a stdio server's
//! process to explain its death with the last lines of its stderr.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ractor::ActorRef;
use tokio::io::AsyncBufReadExt;

use super::{LinkMsg, McpLinkArgs, Recorded, STDERR_TAIL};
use crate::config::McpTransportKind;
use crate::mcp::process::ServerProcess;
use crate::mcp::{Connection, client};
use crate::protocol::mcp::McpError;

/// Connects, initializes and lists the tools, all within `connect_timeout`.
pub(super) async fn connect(
    args: &McpLinkArgs,
    link: &ActorRef<LinkMsg>,
    recorded: &Recorded,
) -> Result<Connection, (McpError, Option<ServerProcess>)> {
    let started = Instant::now();
    let timeout = args.connect_timeout;
    let server = &args.server;
    let (service, process) = match server.transport {
        McpTransportKind::Stdio => {
            let (mut process, mut pipes) =
                crate::mcp::process::spawn(server, &args.secrets).map_err(|error| (error, None))?;
            let row = process.row(&server.name);
            if let Ok(mut tokens) = recorded.lock() {
                tokens.push(row.token.clone());
            }
            let inserted = args
                .store
                .write(move |conn| crate::store::mcp::insert(conn, &row))
                .await;
            if let Err(error) = inserted {
                tracing::warn!(server = %server.name, %error, "could not record the MCP server's process");
            }
            if let Some(child) = process.take_child() {
                let stderr = pipes.stderr.take();
                let name = server.name.clone();
                let link = link.clone();
                tokio::spawn(watch_process(name, child, stderr, link));
            }
            match client::handshake_stdio(pipes, timeout).await {
                Ok(service) => (service, Some(process)),
                Err(error) => return Err((error, Some(process))),
            }
        }
        // A `[[nodes]]` entry: the pinned mutual-TLS client (issue #34).
        McpTransportKind::Http if server.node.is_some() => {
            let data_dir = server.node.clone().unwrap_or_default();
            (
                crate::node::link_handshake(server, &data_dir, timeout)
                    .await
                    .map_err(|error| (error, None))?,
                None,
            )
        }
        McpTransportKind::Http => (
            client::handshake_http(server, &args.secrets, timeout)
                .await
                .map_err(|error| (error, None))?,
            None,
        ),
    };
    let remaining = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(100));
    let tools = match client::list_tools(service.peer(), &server.name, remaining).await {
        Ok(tools) => tools,
        Err(error) => return Err((error, process)),
    };
    Ok(Connection {
        service,
        process,
        tools,
        latency: started.elapsed(),
    })
}

/// Waits for a stdio server to exit, keeping the last lines of its stderr to explain why.
async fn watch_process(
    server: String,
    mut child: tokio::process::Child,
    stderr: Option<tokio::process::ChildStderr>,
    link: ActorRef<LinkMsg>,
) {
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut lines = stderr.map(|stderr| tokio::io::BufReader::new(stderr).lines());
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            line = async {
                match lines.as_mut() {
                    Some(lines) => lines.next_line().await,
                    None => std::future::pending().await,
                }
            } => match line {
                Ok(Some(line)) => {
                    let line: String = line.chars().take(500).collect();
                    tracing::debug!(server = %server, line = %line, "MCP server stderr");
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
                _ => lines = None,
            },
        }
    };
    let status = match status {
        Ok(status) => status.to_string(),
        Err(error) => format!("unknown status ({error})"),
    };
    let mut reason = format!("the server process exited ({status})");
    if !tail.is_empty() {
        reason.push_str("; its last output: ");
        reason.push_str(&tail.into_iter().collect::<Vec<_>>().join(" | "));
    }
    let _ = link.cast(LinkMsg::Down(reason));
}

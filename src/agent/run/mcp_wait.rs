//! A run's MCP servers, before it lists its tools: right after a boot or a reload a server may
//! still be starting, and a run that went ahead without its tools would have the model told
//! "There is no tool named `time__get_current_time`". So the run waits — bounded by
//! `[mcp] startup_wait` (20 s by default), and cut short by `/stop` — until every server that
//! gives its agent tools is published (the agent holds its tools) or has failed visibly; the MCP
//! supervisor answers as soon as that is so, without polling.
//!
//! The run's tools are a snapshot its session took when it started the run; when a server's
//! tools arrived (or left) since, the run takes the agent's current set instead. "Published"
//! is about the agent's actor the link last confirmed: an agent that restarted a moment ago (a
//! reload replaced it, or it crashed) and resumed this run holds none of the tools yet, so the
//! run asks each published server's link to hand them to the agent's current actor first
//! (`Mcp::ensure_published`; the agent's ordered mailbox then gives them to the run). Servers that
//! are still not published are named to the model in the prompt (the `mcp_unavailable` layer)
//! and again by the dispatcher if the model calls one of their tools anyway — with their state
//! only, never a server's own error text, which is not to be trusted in a prompt — and the run
//! records one `note` step (`mcp_wait`: how long it waited, which servers are unavailable, their
//! last errors).

use std::time::Instant;

use serde_json::json;

use super::RunCtx;
use crate::protocol::CallError;
use crate::protocol::agent::Agent;
use crate::protocol::mcp::{Mcp, McpHealth};
use crate::store::runs::NewStep;

/// A server that gives the agent tools but was not published when the run went ahead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableServer {
    pub server: String,
    /// Why, in words for the model (its state, how long the run waited).
    pub reason: String,
    /// The server's last error, for the run's record (Studio) only.
    pub last_error: Option<String>,
}

/// Waits for the agent's MCP servers (see the module docs) and brings `ctx`'s tools up to date.
pub(super) async fn wait_for_servers(ctx: &mut RunCtx) {
    let started = Instant::now();
    let mcp = Mcp::new(&ctx.runtime.registry);
    let answer = tokio::select! {
        answer = mcp.settled(Some(ctx.agent())) => answer,
        _ = ctx.cancel.cancelled() => return,
    };
    let servers = match answer {
        Ok(servers) => servers,
        // A daemon without the MCP service (a test's partial tree) has no servers to wait for.
        Err(CallError::NotRunning { .. }) => return,
        Err(error) => {
            tracing::warn!(run_id = ctx.run_id, %error,
                "could not ask whether the agent's MCP servers are up; running with the tools it has");
            return;
        }
    };
    let waited_ms = started.elapsed().as_millis() as u64;
    for server in servers.iter().filter(|server| server.is_published()) {
        if holds_tools_of(ctx, &server.server) {
            continue;
        }
        if let Err(error) = mcp.ensure_published(&server.server, ctx.agent()).await {
            tracing::warn!(run_id = ctx.run_id, server = %server.server, %error,
                "could not have the MCP server's tools handed to the agent");
        }
    }
    let stale = servers
        .iter()
        .any(|server| server.is_published() != holds_tools_of(ctx, &server.server));
    if stale {
        match Agent::new(&ctx.runtime.registry, ctx.agent()).tools().await {
            Ok(tools) => ctx.settings.tools = tools,
            Err(error) => tracing::warn!(run_id = ctx.run_id, %error,
                "could not take the agent's current tools; running with the ones it started with"),
        }
    }
    ctx.mcp_unavailable = servers
        .iter()
        .filter(|server| !server.is_published())
        .map(|server| unavailable(server, waited_ms))
        .collect();
    if stale || !ctx.mcp_unavailable.is_empty() {
        let unavailable: Vec<_> = ctx
            .mcp_unavailable
            .iter()
            .map(|server| {
                json!({"server": server.server, "reason": server.reason, "last_error": server.last_error})
            })
            .collect();
        ctx.record_step(NewStep {
            kind: "note",
            name: Some("mcp_wait".into()),
            detail: json!({"waited_ms": waited_ms, "unavailable": unavailable}),
            ..NewStep::default()
        })
        .await;
    }
}

/// Whether the run's tools include any of `server`'s.
fn holds_tools_of(ctx: &RunCtx, server: &str) -> bool {
    let prefix = format!("{server}__");
    ctx.settings
        .tools
        .iter()
        .any(|tool| tool.name().starts_with(&prefix))
}

fn unavailable(server: &McpHealth, waited_ms: u64) -> UnavailableServer {
    let mut reason = server.unavailable_reason();
    if server.is_pending() {
        reason = format!("{reason}; waited {:.1} s for it", waited_ms as f64 / 1000.0);
    }
    UnavailableServer {
        server: server.server.clone(),
        reason,
        last_error: server.last_error.clone(),
    }
}

/// The prompt's words about the servers that are unavailable in this run, if any.
pub(super) fn unavailable_layer(ctx: &RunCtx) -> Option<String> {
    if ctx.mcp_unavailable.is_empty() {
        return None;
    }
    let lines: Vec<String> = ctx
        .mcp_unavailable
        .iter()
        .map(|server| {
            format!(
                "- MCP server `{}` (tools `{}__…`): {}",
                server.server, server.server, server.reason
            )
        })
        .collect();
    Some(format!(
        "These tool servers are not available in this run, so none of their tools can be called:\n{}\n\
         If the request needs one of them, say plainly which is unavailable and that it may work again shortly; \
         never pretend to have used it.",
        lines.join("\n")
    ))
}

impl RunCtx {
    /// What the model is told when it calls `tool` of a server that is unavailable in this run
    /// (instead of "There is no tool named …"); `None` for any other name.
    pub fn unavailable_tool_message(&self, tool: &str) -> Option<String> {
        let server = self
            .mcp_unavailable
            .iter()
            .find(|server| tool.starts_with(&format!("{}__", server.server)))?;
        Some(format!(
            "`{tool}` was not run: its MCP server `{}` is not available in this run ({}). \
             Tell the user it is unavailable right now; it may work again in a little while.",
            server.server, server.reason
        ))
    }
}

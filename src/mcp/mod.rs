//! MCP (Model Context Protocol) client side: connecting to servers and turning their tools into
//! agent tools. Built on rmcp, the official Rust SDK; only this module and the link actor know
//! rmcp types.
//!
//! - [`client`]: connect over stdio or streamable HTTP, initialize within a deadline, list every
//!   tool (following cursors), call a tool with a timeout.
//! - [`direct`]: a short-lived session outside the daemon's links (`clawvisor mcp`, `doctor`).
//! - [`process`]: stdio servers as child processes in their own process group that never outlive
//!   their link or the daemon; the boot-time reaper.
//! - [`schema`]: arguments checked against a tool's input schema before they are sent.
//! - [`tool`]: [`tool::McpTool`], the `Tool` an agent sees as `<server>__<tool>`; it calls the
//!   server through the link actor `mcp:<server>` by message.
//!
//! Architecture Invariant: a tool result from a server is data — it is rendered as plain text
//! (content blocks, structured content) and handed to the agent loop, which wraps it as a tool
//! result; nothing in it is ever interpreted as an instruction or a command here.
//! Architecture Invariant: no `McpError` text contains a secret: header values and `env_from`
//! values never enter error texts, and texts from servers pass the redactor.

pub mod client;
pub mod direct;
pub mod process;
pub mod schema;
pub mod tool;

use std::time::Duration;

use serde_json::Value;

use crate::policy::McpToolHints;
use crate::protocol::mcp::McpError;
use crate::tool::ToolOutput;

/// Longest description of a tool kept (servers can send anything).
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;
/// Most tools one server may publish.
pub const MAX_TOOLS: usize = 256;
/// Longest tool name providers accept (OpenAI: 64).
pub const MAX_TOOL_NAME: usize = 64;

/// One tool of a server, as plain data (what crosses the link ↔ agent boundary).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The name agents call it by: `<server>__<tool>` (sanitized, at most 64 characters).
    pub name: String,
    /// The name the server knows it by.
    pub remote_name: String,
    pub description: String,
    pub input_schema: Value,
    pub hints: McpToolHints,
    /// What a paired node says of the tool (its `_meta` key [`NODE_META_KEY`]: the node's roots,
    /// its own level for a forwarded tool); `None` from other servers.
    pub node_meta: Option<Value>,
}

/// The `_meta` key under which a node describes its tools to its daemon (`crate::node`).
pub const NODE_META_KEY: &str = "clawvisor/node";

/// The namespaced name of `tool` on `server`: characters providers refuse become `_`, and the
/// name is cut to [`MAX_TOOL_NAME`].
pub fn namespaced(server: &str, tool: &str) -> String {
    let mut name = format!("{server}__");
    for character in tool.chars() {
        if character.is_ascii_alphanumeric() || character == '_' || character == '-' {
            name.push(character);
        } else {
            name.push('_');
        }
    }
    name.truncate(MAX_TOOL_NAME);
    name
}

/// Turns the server's tool list into [`ToolInfo`]s: namespaced, deduplicated, bounded.
pub fn tool_infos(server: &str, tools: Vec<rmcp::model::Tool>) -> Vec<ToolInfo> {
    let mut infos: Vec<ToolInfo> = Vec::new();
    for tool in tools {
        if infos.len() >= MAX_TOOLS {
            tracing::warn!(
                server,
                "the server lists more than {MAX_TOOLS} tools; the rest are ignored"
            );
            break;
        }
        let remote_name = tool.name.to_string();
        if remote_name.is_empty() {
            continue;
        }
        let name = namespaced(server, &remote_name);
        if infos.iter().any(|info| info.name == name) {
            tracing::warn!(server, tool = %remote_name, "two tools share the name {name}; the second is ignored");
            continue;
        }
        let description: String = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or("")
            .chars()
            .take(MAX_DESCRIPTION_CHARS)
            .collect();
        let mut input_schema = Value::Object((*tool.input_schema).clone());
        if input_schema.get("type").is_none() {
            input_schema["type"] = Value::String("object".into());
        }
        let hints = tool
            .annotations
            .as_ref()
            .map(|annotations| McpToolHints {
                read_only: annotations.read_only_hint,
                destructive: annotations.destructive_hint,
                idempotent: annotations.idempotent_hint,
                open_world: annotations.open_world_hint,
            })
            .unwrap_or_default();
        let node_meta = tool
            .meta
            .as_ref()
            .and_then(|meta| meta.0.get(NODE_META_KEY))
            .cloned();
        infos.push(ToolInfo {
            name,
            remote_name,
            description,
            input_schema,
            hints,
            node_meta,
        });
    }
    infos
}

/// Renders a tool result as text for the model: text blocks as they are, other blocks described,
/// structured content as JSON when there is no text. `isError` results stay errors.
pub fn render_result(result: &rmcp::model::CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        if let Some(text) = block.as_text() {
            parts.push(text.text.clone());
            continue;
        }
        let value = serde_json::to_value(block).unwrap_or(Value::Null);
        parts.push(describe_block(&value));
    }
    if let Some(structured) = &result.structured_content
        && (parts.is_empty() || parts.iter().all(|part| part.trim().is_empty()))
    {
        parts = vec![structured.to_string()];
    }
    let text = if parts.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        parts.join("\n")
    };
    let text = crate::secrets::redact(&text).into_owned();
    if result.is_error == Some(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    }
}

fn describe_block(block: &Value) -> String {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("content");
    let mime = block
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("unknown type");
    match kind {
        "image" | "audio" => {
            let size = block
                .get("data")
                .and_then(Value::as_str)
                .map_or(0, |data| data.len() * 3 / 4);
            format!("[{kind}: {mime}, about {size} bytes, not shown]")
        }
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("?");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[resource {uri}: binary, not shown]"),
            }
        }
        "resource_link" => {
            let uri = block.get("uri").and_then(Value::as_str).unwrap_or("?");
            format!("[resource link: {uri}]")
        }
        other => format!("[{other} content, not shown]"),
    }
}

/// The text of an rmcp service error, for the model and the logs (no secrets, no URLs with them).
pub fn describe_service_error(error: &rmcp::ServiceError) -> McpError {
    use rmcp::ServiceError;
    match error {
        ServiceError::McpError(data) => McpError::Call(format!(
            "the server answered with an error: {}",
            crate::secrets::redact(&data.message)
        )),
        ServiceError::TransportClosed => McpError::Closed,
        ServiceError::Timeout { timeout } => McpError::Timeout {
            what: "the call",
            after: *timeout,
        },
        ServiceError::UnexpectedResponse => {
            McpError::Protocol("an unexpected answer to the request".into())
        }
        other => {
            McpError::Call(crate::secrets::redact(&strip_urls(&other.to_string())).into_owned())
        }
    }
}

/// Removes URLs (which may carry tokens in their query) from an error text.
pub fn strip_urls(text: &str) -> String {
    text.split(' ')
        .map(|word| if word.contains("://") { "<url>" } else { word })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the connect task hands over.
pub struct Connection {
    pub service: client::Service,
    pub process: Option<process::ServerProcess>,
    pub tools: Vec<ToolInfo>,
    pub latency: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_namespaced_and_sanitized() {
        assert_eq!(namespaced("gh", "search_issues"), "gh__search_issues");
        assert_eq!(namespaced("gh", "a.b/c d"), "gh__a_b_c_d");
        assert_eq!(namespaced("gh", &"x".repeat(100)).len(), MAX_TOOL_NAME);
    }

    #[test]
    fn results_render_as_text() {
        let result =
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text("hello")]);
        assert_eq!(render_result(&result), ToolOutput::ok("hello"));
        let result =
            rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text("bad")]);
        assert_eq!(render_result(&result), ToolOutput::error("bad"));
    }
}

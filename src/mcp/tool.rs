//! `<server>__<tool>`: one MCP tool as an agent sees it.
//!
//! The tool holds plain data only (its description, its server's name and trust); a call goes to
//! the link `mcp:<server>` by name (`protocol::mcp::Link`), so a link that restarted serves the
//! next call without the agent noticing, and a link that is down answers "not connected" at
//! once. Arguments are checked against the input schema before anything is sent. When the run is
//! cancelled (the future is dropped), the link is told to cancel the call, which sends
//! `notifications/cancelled` to the server.
//!
//! Policy: `assess` is `policy::mcp::classify_mcp` (the server's trust and the tool's
//! read-only / destructive hints); `effect` follows the hints (not declared → a write).

use std::time::Duration;

use serde_json::Value;

use super::ToolInfo;
use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, McpTrust};
use crate::protocol::mcp::McpError;
use crate::registry::Registry;
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture};

/// Extra time the agent loop grants beyond the link's own timeout, so that the link's clearer
/// timeout message (and its cancellation notice to the server) wins.
const TIMEOUT_SLACK: Duration = Duration::from_secs(5);

/// Longest argument text shown in an approval request.
const MAX_SHOWN_ARGUMENTS: usize = 300;

pub struct McpTool {
    pub server: String,
    pub info: ToolInfo,
    pub trust: McpTrust,
    pub timeout: Duration,
    pub registry: Registry,
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.info.name.clone(),
            description: format!(
                "[MCP server `{}`] {}",
                self.server,
                if self.info.description.is_empty() {
                    &self.info.remote_name
                } else {
                    &self.info.description
                }
            ),
            parameters: self.info.input_schema.clone(),
        }
    }

    fn effect(&self) -> Effect {
        let hints = &self.info.hints;
        if hints.destructive == Some(true) {
            Effect::Destructive
        } else if hints.read_only == Some(true) {
            Effect::ReadOnly
        } else {
            Effect::Write
        }
    }

    fn may_write_workspace(&self, _args: &Value, effect: Effect, assessment: &Assessment) -> bool {
        // An untrusted server's read-only hint is its own claim, not believed: any of its calls
        // may have written where it can reach, the agent's workspace included.
        self.trust == McpTrust::Untrusted
            || (matches!(effect, Effect::Write | Effect::Destructive)
                && assessment.reach.writes != crate::policy::Writes::Nothing)
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        let mut assessment = crate::policy::mcp::classify_mcp(self.trust, &self.info.hints);
        assessment.reasons.push(format!(
            "MCP tool `{}` of server `{}`",
            self.info.remote_name, self.server
        ));
        assessment
    }

    fn describe_call(&self, args: &Value) -> String {
        let shown = args.to_string();
        let (kept, cut) = crate::tool::truncate_on_char_boundary(&shown, MAX_SHOWN_ARGUMENTS);
        format!(
            "{} (MCP server {}): {kept}{}",
            self.info.remote_name,
            self.server,
            if cut { "…" } else { "" }
        )
    }

    fn target(&self, _args: &Value) -> String {
        self.info.name.clone()
    }

    fn timeout(&self) -> Duration {
        self.timeout + TIMEOUT_SLACK
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = if args.is_null() {
                Value::Object(Default::default())
            } else {
                args
            };
            super::schema::validate(&self.info.input_schema, &args).map_err(|problem| {
                ToolError::InvalidArguments(format!("{}: {problem}", self.info.name))
            })?;
            let link = crate::protocol::mcp::Link::new(&self.registry, &self.server);
            match link.call(self.info.remote_name.clone(), args).await {
                Ok(output) => Ok(output),
                Err(McpError::Timeout { after, .. }) => Err(ToolError::Failed(format!(
                    "{}: the MCP server did not answer within {after:?}; the call was cancelled",
                    self.info.name
                ))),
                Err(error) => Err(ToolError::Failed(format!("{}: {error}", self.info.name))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::McpToolHints;

    fn tool(trust: McpTrust, read_only: bool) -> McpTool {
        McpTool {
            server: "files".into(),
            info: ToolInfo {
                name: "files__put".into(),
                remote_name: "put".into(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
                hints: McpToolHints {
                    read_only: Some(read_only),
                    ..McpToolHints::default()
                },
                node_meta: None,
            },
            trust,
            timeout: Duration::from_secs(5),
            registry: Registry::default(),
        }
    }

    fn may_write(tool: &McpTool) -> bool {
        let assessment = crate::policy::mcp::classify_mcp(tool.trust, &tool.info.hints);
        tool.may_write_workspace(&Value::Null, tool.effect(), &assessment)
    }

    #[test]
    fn a_call_may_write_the_workspace_unless_a_believed_hint_says_it_only_reads() {
        assert!(!may_write(&tool(McpTrust::Trusted, true)));
        assert!(may_write(&tool(McpTrust::Trusted, false)));
        assert!(
            may_write(&tool(McpTrust::Untrusted, true)),
            "an untrusted server's read-only hint is not believed"
        );
        assert!(!may_write(&tool(McpTrust::ReadOnly, true)));
    }
}

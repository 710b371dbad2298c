//! `<node>__shell`, `<node>__read_file`, …: one of a node's tools as an agent sees it.
//!
//! The daemon judges the call with its own tool of the same name (the same classifier, the
//! same path rules, against a stand-in root since the node's paths are the node's), so the
//! policy gate and the approval desk treat it exactly like the local tool; the prompt names the
//! machine ("on nas: `du -sh /srv/photos`"). The call runs only after the gate allowed it or a
//! person approved it (`crate::tool`'s invariant); then, for an action above L0, this tool mints
//! the approval token the node requires (`token::mint`, signed with the daemon's key) and sends
//! the call through the node's link `mcp:<node>` (`protocol::mcp::Link`), so a lost node answers
//! with an error at once, not a hang. `Tool::node` names the machine, so the daemon's audit row
//! of the call records which node ran it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::handler::{TOKEN_ARGUMENT, profile_for};
use super::token::{self, TokenPayload};
use crate::llm::ToolSpec;
use crate::policy::{Assessment, Effect, RiskLevel};
use crate::protocol::mcp::McpError;
use crate::registry::Registry;
use crate::tool::{Tool, ToolContext, ToolError, ToolFuture, ToolSettings};

/// The root the daemon assesses a node's paths against (lexically; never opened).
const NODE_ROOT_STAND_IN: &str = "/clawvisor-node-root";
/// Extra time beyond the node's own timeout, so the link's clearer timeout message wins.
const TIMEOUT_SLACK: Duration = Duration::from_secs(5);

/// One node tool.
pub struct NodeTool {
    /// The node's name (`[[nodes]] name`).
    pub node: String,
    /// `<node>__<tool>`.
    pub name: String,
    /// The daemon's own tool of that name: spec, classifier, prompt text.
    pub local: Arc<dyn Tool>,
    pub data_dir: PathBuf,
    pub timeout: Duration,
    pub registry: Registry,
}

impl NodeTool {
    /// The node's tools that the daemon knows how to judge (`handler::node_tools`); others a
    /// node might list are not offered.
    pub fn for_remote(
        node: &str,
        remote_name: &str,
        name: &str,
        data_dir: PathBuf,
        timeout: Duration,
        registry: Registry,
    ) -> Option<NodeTool> {
        let local = super::handler::node_tools()
            .into_iter()
            .find(|tool| tool.name() == remote_name)?;
        Some(NodeTool {
            node: node.to_string(),
            name: name.to_string(),
            local,
            data_dir,
            timeout,
            registry,
        })
    }

    /// `ctx` as the node's tool sees it: the stand-in root, the shell allowed (the node's
    /// `[[nodes]] agents` decides who may use it).
    fn node_context(&self, ctx: &ToolContext) -> ToolContext {
        let mut settings: ToolSettings = (*ctx.settings).clone();
        settings.shell_enabled = true;
        ToolContext {
            workspace: PathBuf::from(NODE_ROOT_STAND_IN),
            settings: Arc::new(settings),
            ..ctx.clone()
        }
    }

    fn token_for(&self, args: &Value, assessment: &Assessment) -> Result<String, ToolError> {
        let keys = super::client::daemon_keys(&self.data_dir)
            .map_err(|error| ToolError::Failed(format!("{}: {error}", self.name)))?;
        let remote = self.local.name();
        let payload = TokenPayload {
            node: self.node.clone(),
            tool: remote.to_string(),
            action_hash: token::action_hash(remote, args),
            level: assessment.level.as_str().to_string(),
            profile: profile_for(remote, assessment),
            expires_ms: crate::clock::now_ms() + token::TOKEN_LIFETIME_MS,
            nonce: token::new_nonce(),
        };
        Ok(token::mint(&keys.token_key, &payload))
    }
}

impl Tool for NodeTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn spec(&self) -> ToolSpec {
        let local = self.local.spec();
        ToolSpec {
            name: self.name.clone(),
            description: format!(
                "On the machine `{}` (a paired node; paths are relative to its workspace): {}",
                self.node, local.description
            ),
            parameters: local.parameters,
        }
    }

    fn effect(&self) -> Effect {
        self.local.effect()
    }

    fn effect_for(&self, args: &Value, ctx: &ToolContext) -> Effect {
        self.local.effect_for(args, &self.node_context(ctx))
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        let mut assessment = self.local.assess(args, &self.node_context(ctx));
        assessment
            .reasons
            .push(format!("runs on the node `{}`", self.node));
        assessment
    }

    fn node(&self) -> Option<&str> {
        Some(&self.node)
    }

    /// A node writes on its own machine, never in the agent's workspace.
    fn may_write_workspace(
        &self,
        _args: &Value,
        _effect: Effect,
        _assessment: &Assessment,
    ) -> bool {
        false
    }

    fn describe_call(&self, args: &Value) -> String {
        let local = self.local.describe_call(args);
        match local.strip_prefix("shell: ") {
            Some(rest) => {
                let (command, profile) = rest.split_once('\n').unwrap_or((rest, ""));
                let profile = profile
                    .lines()
                    .filter(|line| !line.starts_with("not enforced on this machine"))
                    .collect::<Vec<_>>()
                    .join("\n");
                format!("on {}: `{command}`\n{profile}", self.node)
                    .trim_end()
                    .to_string()
            }
            None => format!("on {}: {local}", self.node),
        }
    }

    fn target(&self, args: &Value) -> String {
        format!("{}:{}", self.node, self.local.target(args))
    }

    fn timeout(&self) -> Duration {
        self.timeout + TIMEOUT_SLACK
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let args = if args.is_null() {
                Value::Object(Default::default())
            } else {
                args
            };
            let assessment = self.local.assess(&args, &self.node_context(ctx));
            let mut sent = args.clone();
            if assessment.level > RiskLevel::L0 {
                let token = self.token_for(&args, &assessment)?;
                if let Value::Object(fields) = &mut sent {
                    fields.insert(TOKEN_ARGUMENT.to_string(), Value::String(token));
                }
            }
            let link = crate::protocol::mcp::Link::new(&self.registry, &self.node);
            match link.call(self.local.name().to_string(), sent).await {
                Ok(output) => Ok(output),
                Err(McpError::Timeout { after, .. }) => Err(ToolError::Failed(format!(
                    "{}: the node `{}` did not answer within {after:?}; the call was cancelled",
                    self.name, self.node
                ))),
                Err(error) => Err(ToolError::Failed(format!(
                    "{}: the node `{}` could not run it: {error}",
                    self.name, self.node
                ))),
            }
        })
    }
}

//! `<node>__shell`, `<node>__read_file`, …: one of a node's tools as an agent sees it.
//!
//! The daemon judges the call with its own tool of the same name (the same classifier, the
//! same path rules, lexically against the node's roots as its tool list names them — the root an
//! absolute path lies in, else the first; a stand-in root for a node that names none), so the
//! policy gate and the approval desk treat it exactly like the local tool; the prompt names the
//! machine and the node's real path ("on nas: `du -sh /srv/photos`", "on nas: read_file:
//! /srv/photos/a.jpg"). A tool of the node's own MCP servers is judged as an MCP tool, at
//! least at the level the node states. The call runs only after the gate allowed it or a
//! person approved it (`crate::tool`'s invariant); then, for an action above L0, this tool mints
//! the approval token the node requires (`token::mint`, signed with the daemon's key) and sends
//! the call through the node's link `mcp:<node>` (`protocol::mcp::Link`), so a lost node answers
//! with an error at once, not a hang. `Tool::node` names the machine, so the daemon's audit row
//! of the call records which node ran it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::handler::{TOKEN_ARGUMENT, profile_for};
use super::token::{self, TokenPayload};
use crate::llm::ToolSpec;
use crate::mcp::ToolInfo;
use crate::mcp::tool::McpTool;
use crate::policy::{Assessment, Effect, McpTrust, Reach, RiskLevel};
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
    /// The node's roots as its tool list names them (empty: unknown, the stand-in is used).
    pub roots: Vec<PathBuf>,
    /// The name the node knows the tool by (`shell`, `<server>__<tool>`).
    pub remote: String,
    /// A forwarded tool's level as the node states it: the daemon rates it at least that high.
    pub stated_level: Option<RiskLevel>,
}

impl NodeTool {
    /// A node's tool the daemon knows how to judge: one of `handler::node_tools`, or a tool of
    /// the node's own MCP servers that the node describes (`forwarded`); others are not offered.
    pub fn for_remote(
        node: &str,
        info: &ToolInfo,
        data_dir: PathBuf,
        timeout: Duration,
        registry: Registry,
    ) -> Option<NodeTool> {
        let builtin = super::handler::node_tools()
            .into_iter()
            .find(|tool| tool.name() == info.remote_name);
        let (local, stated_level) = match builtin {
            Some(local) => (local, None),
            None => forwarded(info, timeout, &registry)?,
        };
        let roots = info
            .node_meta
            .as_ref()
            .and_then(|meta| meta.get("roots"))
            .and_then(Value::as_array)
            .map(|roots| {
                roots
                    .iter()
                    .filter_map(Value::as_str)
                    .map(PathBuf::from)
                    .filter(|root| root.is_absolute())
                    .collect()
            })
            .unwrap_or_default();
        Some(NodeTool {
            node: node.to_string(),
            name: info.name.clone(),
            local,
            data_dir,
            timeout,
            registry,
            roots,
            remote: info.remote_name.clone(),
            stated_level,
        })
    }

    /// The node root this call works in (see `handler::root_for`), or the stand-in.
    fn root_for(&self, args: &Value) -> PathBuf {
        super::handler::root_for(&self.roots, &self.remote, args)
            .cloned()
            .unwrap_or_else(|| PathBuf::from(NODE_ROOT_STAND_IN))
    }

    /// `ctx` as the node's tool sees it for `args`: the node's root, the shell allowed (the
    /// node's `[[nodes]] agents` decides who may use it).
    fn node_context(&self, ctx: &ToolContext, args: &Value) -> ToolContext {
        let mut settings: ToolSettings = (*ctx.settings).clone();
        settings.shell_enabled = true;
        ToolContext {
            workspace: self.root_for(args),
            settings: Arc::new(settings),
            ..ctx.clone()
        }
    }

    /// A file tool's absolute `path` that lies in none of several known roots (the refusal
    /// names them all).
    fn path_outside_every_root<'a>(&self, args: &'a Value) -> Option<&'a str> {
        let path = args.get("path").and_then(Value::as_str)?;
        let outside = self.roots.len() > 1
            && self.remote != "shell"
            && Path::new(path).is_absolute()
            && !self
                .roots
                .iter()
                .any(|root| crate::tools::workspace::check_path_lexically(root, path).is_ok());
        outside.then_some(path)
    }

    /// `args` with a relative `path` made the node's real path (for the prompt only: the node
    /// is sent what the model wrote).
    fn with_real_path(&self, args: &Value) -> Value {
        let Some(first) = self.roots.first() else {
            return args.clone();
        };
        if self.local.name() == "shell" {
            return args.clone();
        }
        let mut shown = args.clone();
        if let Value::Object(fields) = &mut shown {
            let real = match fields.get("path") {
                Some(Value::String(path)) if !Path::new(path).is_absolute() => first.join(path),
                None if self.local.name() == "list_dir" => first.clone(),
                _ => return shown,
            };
            fields.insert(
                "path".to_string(),
                Value::String(real.display().to_string()),
            );
        }
        shown
    }

    fn token_for(&self, args: &Value, assessment: &Assessment) -> Result<String, ToolError> {
        let keys = super::client::daemon_keys(&self.data_dir)
            .map_err(|error| ToolError::Failed(format!("{}: {error}", self.name)))?;
        let remote = self.remote.as_str();
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
        if self.stated_level.is_some() {
            return ToolSpec {
                name: self.name.clone(),
                description: format!("On the machine `{}`: {}", self.node, local.description),
                parameters: local.parameters,
            };
        }
        ToolSpec {
            name: self.name.clone(),
            description: match self.roots.as_slice() {
                [] => format!(
                    "On the machine `{}` (a paired node; paths are relative to its workspace): {}",
                    self.node, local.description
                ),
                [only] => format!(
                    "On the machine `{}` (a paired node; its folder: {}; paths are relative to \
                     it): {}",
                    self.node,
                    only.display(),
                    local.description
                ),
                [first, ..] => format!(
                    "On the machine `{}` (a paired node; its folders: {}; a relative path is in \
                     {}, use an absolute path for the others): {}",
                    self.node,
                    self.roots
                        .iter()
                        .map(|root| root.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    first.display(),
                    local.description
                ),
            },
            parameters: local.parameters,
        }
    }

    fn effect(&self) -> Effect {
        self.local.effect()
    }

    fn effect_for(&self, args: &Value, ctx: &ToolContext) -> Effect {
        self.local.effect_for(args, &self.node_context(ctx, args))
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        let mut assessment = self.local.assess(args, &self.node_context(ctx, args));
        if let Some(stated) = self.stated_level
            && stated > assessment.level
        {
            assessment.level = stated;
            assessment.reach = assessment.reach.union(Reach::for_level(stated));
            assessment.reasons.push(format!(
                "the node `{}` rates it {}",
                self.node,
                stated.as_str()
            ));
        }
        if let Some(path) = self.path_outside_every_root(args) {
            assessment.reasons.push(format!(
                "`{path}` is in none of the node's folders ({})",
                self.roots
                    .iter()
                    .map(|root| root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
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
        let local = self.local.describe_call(&self.with_real_path(args));
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
            let assessment = self.assess(&args, ctx);
            let mut sent = args.clone();
            if assessment.level > RiskLevel::L0 {
                let token = self.token_for(&args, &assessment)?;
                if let Value::Object(fields) = &mut sent {
                    fields.insert(TOKEN_ARGUMENT.to_string(), Value::String(token));
                }
            }
            let link = crate::protocol::mcp::Link::new(&self.registry, &self.node);
            match link.call(self.remote.clone(), sent).await {
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

/// A tool of one of the node's own MCP servers (`upstream`), judged as an MCP tool with the
/// hints the node relays (the paired node is trusted as a `trusted` server is) and raised to the
/// level the node states; a tool the node does not describe is not offered.
fn forwarded(
    info: &ToolInfo,
    timeout: Duration,
    registry: &Registry,
) -> Option<(Arc<dyn Tool>, Option<RiskLevel>)> {
    let meta = info.node_meta.as_ref()?;
    let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_string);
    // Without a level it can read, the daemon's rule for an untrusted server: every call asks.
    let stated = text("level")
        .and_then(|level| level.parse::<RiskLevel>().ok())
        .unwrap_or(RiskLevel::L2);
    let local = McpTool {
        server: text("server")?,
        info: ToolInfo {
            remote_name: text("tool")?,
            node_meta: None,
            ..info.clone()
        },
        trust: McpTrust::Trusted,
        timeout,
        registry: registry.clone(),
    };
    Some((Arc::new(local), Some(stated)))
}

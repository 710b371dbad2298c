//! The node's MCP server: `shell`, `read_file`, `write_file` and `list_dir`, the daemon's own
//! implementations (`crate::tools`), under the same classifier and kernel sandbox profiles as
//! the daemon's shell.
//!
//! Roots (`[node] roots`): a file tool's call works in the root its absolute `path` lies in, else
//! in the first (relative paths), with the workspace's own checks (`..`, symlinks, `/proc`)
//! against that root; a path outside every root is refused. The shell runs in the first root and
//! its sandbox grants the others exactly like it (`ToolSettings::extra_roots`). The tool list
//! names the roots in each tool's `_meta` (`mcp::NODE_META_KEY`), so that the daemon judges a
//! path against the root it lies in and its prompt shows the node's real path.
//!
//! Invariant: an action the node rates above L0 runs only with a valid approval token
//! (`token::verify`), and only after the token's nonce and an audit row are committed to the
//! node's own SQLite (`node_actions`, `audit_log`) in one transaction: a replay, also after a
//! restart, finds the nonce and is refused. An L0 action (it only reads) runs without a token;
//! its audit row is written beside it, not waited for (a crash may lose the row of a read in
//! flight; an action above L0 is never run before its row is committed).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

use super::token::{self, Expected, TokenRefusal};
use crate::domain::ChatKey;
use crate::policy::RiskLevel;
use crate::registry::Registry;
use crate::store::Store;
use crate::tool::{Tool, ToolContext, ToolSettings};

/// The argument that carries the approval token (removed before the action is hashed or run).
pub const TOKEN_ARGUMENT: &str = "approval_token";

/// What every call on this node shares.
pub struct NodeTools {
    pub data_dir: PathBuf,
    /// `[node] roots` (at least one): file tools use any, the shell runs in the first.
    pub roots: Vec<PathBuf>,
    pub settings: Arc<ToolSettings>,
    pub store: Store,
    pub tools: Vec<Arc<dyn Tool>>,
    /// The node's own MCP servers' tools, forwarded (`upstream`).
    pub upstream: super::upstream::Upstreams,
}

/// The tools a node offers (the daemon's implementations).
pub fn node_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(crate::tools::shell::ShellTool),
        Arc::new(crate::tools::files::ReadFileTool),
        Arc::new(crate::tools::files::WriteFileTool),
        Arc::new(crate::tools::files::ListDirTool),
    ]
}

/// The root a call of `tool` works in: the root an absolute `path` argument lies in
/// (lexically, `..` resolved), else the first; the shell always in the first. `None` when no
/// root is known.
pub fn root_for<'a>(roots: &'a [PathBuf], tool: &str, arguments: &Value) -> Option<&'a PathBuf> {
    let first = roots.first()?;
    let path = arguments.get("path").and_then(Value::as_str);
    match path {
        Some(path) if tool != "shell" && Path::new(path).is_absolute() => roots
            .iter()
            .find(|root| crate::tools::workspace::check_path_lexically(root, path).is_ok())
            .or(Some(first)),
        _ => Some(first),
    }
}

/// A node tool's `_meta`: what the daemon needs to judge its calls as the node does.
pub fn tool_meta(fields: Value) -> rmcp::model::MetaObject {
    let mut meta = serde_json::Map::new();
    meta.insert(crate::mcp::NODE_META_KEY.to_string(), fields);
    rmcp::model::MetaObject(meta)
}

/// The sandbox profile a token must name for `tool`: the shell's reach in words, nothing for the
/// file tools (their confinement is the workspace root, not a profile).
pub fn profile_for(tool: &str, assessment: &crate::policy::Assessment) -> String {
    if tool == "shell" {
        assessment.reach.describe()
    } else {
        String::new()
    }
}

/// One MCP session's handler (rmcp makes one per session; they share [`NodeTools`]).
#[derive(Clone)]
pub struct NodeHandler {
    pub shared: Arc<NodeTools>,
}

impl NodeHandler {
    fn context(
        &self,
        cancel: tokio_util::sync::CancellationToken,
        workspace: PathBuf,
    ) -> ToolContext {
        ToolContext {
            agent: "node".to_string(),
            chat: ChatKey::cli("node"),
            run_id: 0,
            workspace,
            settings: self.shared.settings.clone(),
            registry: Registry::new(),
            store: self.shared.store.clone(),
            cancel,
            timezone: chrono_tz::UTC,
            egress: Default::default(),
        }
    }

    /// Checks the token of an action rated `level` and records it; `Ok(None)` for an L0 action.
    async fn admit(
        &self,
        tool: &str,
        arguments: &Value,
        token: Option<String>,
        assessment: &crate::policy::Assessment,
    ) -> Result<Option<String>, String> {
        let level = assessment.level;
        let hash = token::action_hash(tool, arguments);
        let pin = super::pairing::daemon_pin(&self.shared.data_dir)?
            .ok_or("this node is not paired with a daemon")?;
        let nonce = if level == RiskLevel::L0 {
            None
        } else {
            let token = token.ok_or(TokenRefusal::Missing.to_string())?;
            let profile = profile_for(tool, assessment);
            let expected = Expected {
                node: &pin.node_name,
                tool,
                action_hash: &hash,
                level: level.as_str(),
                profile: &profile,
            };
            let payload = token::verify(
                &token,
                &pin.token_public_key,
                &expected,
                crate::clock::now_ms(),
            )
            .map_err(|refusal| refusal.to_string())?;
            Some(payload.nonce)
        };
        let (tool_name, level_name) = (tool.to_string(), level.as_str().to_string());
        let details = json!({"tool": tool, "arguments": arguments, "level": level.as_str(),
            "action_hash": hash, "nonce": nonce});
        if nonce.is_none() {
            // An L0 action (it only reads): audited beside the call, not waited for, so a read
            // costs no synced commit (BENCHMARKS.md, "#34"); a crash may lose the row of a read
            // that was in flight.
            let store = self.shared.store.clone();
            tokio::spawn(async move {
                let written = store
                    .write(move |conn| {
                        crate::audit::append(conn, "daemon", "node.tool.run", &tool_name, &details)
                    })
                    .await;
                if let Err(error) = written {
                    tracing::warn!(%error, "could not audit a node action");
                }
            });
            return Ok(None);
        }
        let recorded_nonce = nonce.clone();
        let admitted = self
            .shared
            .store
            .write(move |conn| {
                if let Some(nonce) = &recorded_nonce {
                    let inserted = conn.execute(
                        "INSERT OR IGNORE INTO node_actions (nonce, tool, action_hash, level, accepted_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                        rusqlite::params![nonce, tool_name, hash, level_name, crate::clock::now_ms()],
                    )?;
                    if inserted == 0 {
                        return Ok(false);
                    }
                }
                crate::audit::append(conn, "daemon", "node.tool.run", &tool_name, &details)?;
                Ok(true)
            })
            .await
            .map_err(|error| format!("the node could not record the action: {error}"))?;
        if !admitted {
            return Err(TokenRefusal::Replayed.to_string());
        }
        Ok(nonce)
    }

    async fn finish(&self, nonce: Option<String>, ok: bool) {
        let Some(nonce) = nonce else { return };
        let outcome = if ok { "ok" } else { "error" };
        let written = self
            .shared
            .store
            .write(move |conn| {
                conn.execute(
                    "UPDATE node_actions SET finished_ms = ?1, outcome = ?2 WHERE nonce = ?3",
                    rusqlite::params![crate::clock::now_ms(), outcome, nonce],
                )?;
                Ok(())
            })
            .await;
        if let Err(error) = written {
            tracing::warn!(%error, "could not record a node action's outcome");
        }
    }
}

impl ServerHandler for NodeHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let roots: Vec<String> = self
            .shared
            .roots
            .iter()
            .map(|root| root.display().to_string())
            .collect();
        let tools = self
            .shared
            .tools
            .iter()
            .map(|tool| {
                let spec = tool.spec();
                let schema = match spec.parameters {
                    Value::Object(fields) => fields,
                    _ => serde_json::Map::new(),
                };
                rmcp::model::Tool::new(spec.name, spec.description, schema)
                    .with_meta(tool_meta(json!({ "roots": roots })))
            })
            .chain(self.shared.upstream.tools().iter().map(forwarded_tool))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let mut fields = request.arguments.unwrap_or_default();
        let token = match fields.remove(TOKEN_ARGUMENT) {
            Some(Value::String(token)) => Some(token),
            _ => None,
        };
        let arguments = Value::Object(fields);
        let Some(tool) = self
            .shared
            .tools
            .iter()
            .find(|tool| tool.name() == request.name)
            .cloned()
        else {
            return Ok(match self.shared.upstream.find(&request.name) {
                Some(forwarded) => self.forward(forwarded, arguments, token).await,
                None => error_result(format!(
                    "this node has no tool `{}` (now: its MCP server may be down)",
                    request.name
                )),
            });
        };
        let workspace = root_for(&self.shared.roots, tool.name(), &arguments)
            .cloned()
            .unwrap_or_default();
        let ctx = self.context(context.ct.clone(), workspace);
        let assessment = tool.assess(&arguments, &ctx);
        let nonce = match self
            .admit(tool.name(), &arguments, token, &assessment)
            .await
        {
            Ok(nonce) => nonce,
            Err(refusal) => {
                tracing::info!(tool = %tool.name(), %refusal, "refused a node action");
                return Ok(error_result(format!("the node refused: {refusal}")));
            }
        };
        let result = tool.call(arguments, &ctx).await;
        let ok = matches!(&result, Ok(output) if !output.is_error);
        self.finish(nonce, ok).await;
        Ok(match result {
            Ok(output) if output.is_error => error_result(output.text),
            Ok(output) => CallToolResult::success(vec![ContentBlock::text(output.text)]).into(),
            Err(error) => error_result(error.to_string()),
        })
    }
}

impl NodeHandler {
    /// A call to one of the node's MCP servers: rated and admitted like the node's own tools,
    /// then forwarded.
    async fn forward(
        &self,
        tool: super::upstream::UpstreamTool,
        arguments: Value,
        token: Option<String>,
    ) -> rmcp::model::CallToolResponse {
        let assessment = tool.assess();
        let nonce = match self
            .admit(&tool.info.name, &arguments, token, &assessment)
            .await
        {
            Ok(nonce) => nonce,
            Err(refusal) => {
                tracing::info!(tool = %tool.info.name, %refusal, "refused a node action");
                return error_result(format!("the node refused: {refusal}"));
            }
        };
        let result = tool.call(arguments).await;
        self.finish(nonce, matches!(&result, Ok(output) if !output.is_error))
            .await;
        match result {
            Ok(output) if output.is_error => error_result(output.text),
            Ok(output) => CallToolResult::success(vec![ContentBlock::text(output.text)]).into(),
            Err(error) => error_result(error),
        }
    }
}

/// A forwarded tool as the node lists it: the server's description and hints, the node's level
/// and the server's names in `_meta`.
fn forwarded_tool(tool: &super::upstream::UpstreamTool) -> rmcp::model::Tool {
    let schema = match &tool.info.input_schema {
        Value::Object(fields) => fields.clone(),
        _ => serde_json::Map::new(),
    };
    let mut annotations = rmcp::model::ToolAnnotations::new();
    if let Some(read_only) = tool.info.hints.read_only {
        annotations = annotations.read_only(read_only);
    }
    if let Some(destructive) = tool.info.hints.destructive {
        annotations = annotations.destructive(destructive);
    }
    let meta = json!({
        "level": tool.assess().level.as_str(),
        "server": tool.server,
        "tool": tool.info.remote_name,
    });
    rmcp::model::Tool::new(
        tool.info.name.clone(),
        tool.info.description.clone(),
        schema,
    )
    .with_annotations(annotations)
    .with_meta(tool_meta(meta))
}

fn error_result(text: String) -> rmcp::model::CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

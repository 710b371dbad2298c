//! Tool nodes in Studio (issue #34): `GET /api/v1/nodes` (each paired machine's link state,
//! latency, version and the protections its kernel enforces), `POST /api/v1/nodes` (pair with a
//! code `clawvisor node pair` printed there, then add the `[[nodes]]` entry through the
//! reloader: validated, audited as `node.added`, applied), `DELETE /api/v1/nodes/{name}` (tell
//! the node, forget its pin, take the entry out: `node.removed`), and the nodes' `/metrics`.
//!
//! A node's link is an MCP link (`crate::node`), so its state is the MCP supervisor's; version
//! and protections are asked of the node itself over the pinned link (2 s at most, all at once).

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, integer, nullable, object, string};
use super::{ApiError, StudioState, json_body};
use crate::protocol::reload::{EditOutcome, FileEdit, Reloader};

const OPERATOR: &str = "operator (studio)";

/// A link state in words for the first layer.
fn state_words(state: &str) -> &'static str {
    match state {
        "up" => "connected",
        "connecting" => "connecting",
        "restarting" | "down" => "not reachable — retrying",
        "degraded" => "not reachable for a while — retried every few minutes",
        "disabled" => "turned off in the config",
        _ => "unknown",
    }
}

/// `GET /api/v1/nodes`
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let entries = state.files.get().nodes.clone();
    let data_dir = state.secrets.get().data_dir.clone();
    let health = super::overview::mcp_health(&state).await;
    let rows = entries.iter().map(|entry| {
        let link = health
            .iter()
            .find(|server| server.server == entry.name)
            .cloned();
        let data_dir = data_dir.clone();
        async move {
            let link_state = link.as_ref().map_or("connecting", |link| link.state);
            let pin = crate::node::client::node_pin(&data_dir, &entry.name).ok();
            let asked = if link_state == "up" {
                tokio::time::timeout(
                    Duration::from_secs(2),
                    crate::node::client::health(&data_dir, &entry.name, &entry.url),
                )
                .await
                .ok()
                .and_then(Result::ok)
            } else {
                None
            };
            let (node, _) = asked.unwrap_or_default();
            json!({
                "name": entry.name, "url": entry.url, "agents": entry.agents,
                "state": link_state, "state_words": state_words(link_state),
                "last_error": link.as_ref().and_then(|link| link.last_error.clone()),
                "restarts": link.as_ref().map_or(0, |link| link.restarts),
                "latency_ms": link.as_ref().and_then(|link| link.last_latency_ms),
                "tools": link.as_ref().map(|link| link.tools.clone()).unwrap_or_default(),
                "paired": pin.is_some(),
                "fingerprint": pin.map(|pin| pin.fingerprint),
                "version": node.get("version").cloned(),
                "protections": node.get("protections").cloned(),
                "protections_complete": node.get("complete").cloned(),
                "roots": node.get("roots").cloned(),
                "mcp_servers": node.get("mcp_servers").cloned(),
            })
        }
    });
    let nodes = futures::future::join_all(rows).await;
    let agent_names: Vec<String> = state.files.get().agents.keys().cloned().collect();
    Ok(Json(json!({ "nodes": nodes, "agent_names": agent_names })))
}

/// What `GET /api/v1/nodes` answers.
pub fn list_schema() -> Value {
    let node = object([
        ("name", string()),
        ("url", string()),
        ("agents", array(string())),
        (
            "state",
            described(
                "`connecting`, `up`, `down`, `restarting`, `degraded` or `disabled`",
                string(),
            ),
        ),
        ("state_words", string()),
        ("last_error", nullable(string())),
        ("restarts", integer()),
        ("latency_ms", nullable(integer())),
        ("tools", array(string())),
        ("paired", boolean()),
        ("fingerprint", nullable(string())),
        ("version", nullable(string())),
        (
            "protections",
            described("the node's kernel protections in words", nullable(string())),
        ),
        ("protections_complete", nullable(boolean())),
        (
            "roots",
            described(
                "how many folders (`[node] roots`) it lends",
                nullable(integer()),
            ),
        ),
        (
            "mcp_servers",
            described(
                "how many of its own MCP servers are connected",
                nullable(integer()),
            ),
        ),
    ]);
    object([
        ("nodes", array(node)),
        (
            "agent_names",
            described("the agents a node's tools may be given to", array(string())),
        ),
    ])
}

/// A node to pair and add.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddBody {
    /// The node's name (`a-z`, `0-9`, `_`, `-`); its tools are `<name>__shell` etc.
    name: String,
    /// Where it listens: `https://nas.lan:7443`.
    url: String,
    /// The one-time code `clawvisor node pair` printed on the node.
    code: String,
    /// Agents that get its tools.
    #[serde(default)]
    agents: Vec<String>,
}

/// `POST /api/v1/nodes`
pub async fn add(
    State(state): State<StudioState>,
    body: Result<Json<AddBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match json_body(body) {
        Ok(body) => body,
        Err(error) => return error.into_response(),
    };
    if let Err(error) = check_add(&state, &body) {
        return error.into_response();
    }
    let data_dir = state.secrets.get().data_dir.clone();
    let url = body.url.trim().trim_end_matches('/').to_string();
    let pin = match crate::node::client::pair(&data_dir, &body.name, &url, body.code.trim()).await {
        Ok(pin) => pin,
        Err(error) => {
            return ApiError::bad_request(format!("`code`: {error}")).into_response();
        }
    };
    let edit = FileEdit::AddNode {
        name: body.name.clone(),
        url,
        agents: body.agents.clone(),
    };
    applied(
        &state,
        edit,
        json!({ "node": body.name, "fingerprint": pin.fingerprint }),
    )
    .await
}

fn check_add(state: &StudioState, body: &AddBody) -> Result<(), ApiError> {
    if !crate::config::valid_node_name(&body.name) {
        return Err(ApiError::bad_request(
            "`name`: use 1 to 32 characters of a-z, 0-9, `_` and `-` (for example `nas`)",
        ));
    }
    let files = state.files.get();
    if files.nodes.iter().any(|node| node.name == body.name) {
        return Err(ApiError::conflict(format!(
            "`name`: a node named `{}` exists already; remove it first or choose another name",
            body.name
        )));
    }
    if !matches!(url::Url::parse(body.url.trim()), Ok(url) if url.scheme() == "https") {
        return Err(ApiError::bad_request(
            "`url`: give the node's https:// address, for example https://nas.lan:7443",
        ));
    }
    if let Some(agent) = body
        .agents
        .iter()
        .find(|agent| *agent != "*" && !files.agents.contains_key(*agent))
    {
        return Err(ApiError::bad_request(format!(
            "`agents`: there is no agent named `{agent}`"
        )));
    }
    Ok(())
}

/// `DELETE /api/v1/nodes/{name}`
pub async fn remove(State(state): State<StudioState>, Path(name): Path<String>) -> Response {
    let Some(entry) = state
        .files
        .get()
        .nodes
        .iter()
        .find(|node| node.name == name)
        .cloned()
    else {
        return ApiError::not_found(format!("there is no node named `{name}`")).into_response();
    };
    let data_dir = state.secrets.get().data_dir.clone();
    let told = crate::node::client::tell_revoked(&data_dir, &name, &entry.url).await;
    if let Err(error) = crate::node::client::forget_node(&data_dir, &name) {
        return ApiError::conflict(error).into_response();
    }
    let edit = FileEdit::RemoveNode { name: name.clone() };
    applied(
        &state,
        edit,
        json!({ "node": name, "node_told": told.is_ok() }),
    )
    .await
}

/// Applies a node edit through the reloader and answers with `extra` and the reload's summary.
async fn applied(state: &StudioState, edit: FileEdit, extra: Value) -> Response {
    match Reloader::new(&state.registry).edit(edit, OPERATOR).await {
        Ok(EditOutcome::Applied { path, report }) => {
            let mut answer = extra;
            answer["file"] = json!(path);
            answer["reload"] = json!(report.summary());
            answer["reload_ok"] = json!(report.ok);
            Json(answer).into_response()
        }
        Ok(EditOutcome::Refused(reason)) => ApiError::bad_request(reason).into_response(),
        Ok(EditOutcome::NotWritable { path, reason, text }) => super::error::unwritable(
            format!(
                "The node is paired, but {path} cannot be written ({reason}). Put this text in that file yourself, then reload."
            ),
            path,
            text,
        ),
        Err(_) => ApiError::unavailable("the reloader").into_response(),
    }
}

/// What `POST /api/v1/nodes` and `DELETE /api/v1/nodes/{name}` answer.
pub fn change_schema() -> Value {
    object([
        ("node", string()),
        ("file", described("the config file written", string())),
        ("reload", string()),
        ("reload_ok", boolean()),
    ])
}

/// The names of the `[[nodes]]` entries in the config as it is now.
pub fn node_names(state: &StudioState) -> Vec<String> {
    state
        .files
        .get()
        .nodes
        .iter()
        .map(|node| node.name.clone())
        .collect()
}

/// The nodes' lines of `/metrics`: up, round trip and restarts per node.
pub async fn metrics(state: &StudioState) -> String {
    let names = node_names(state);
    if names.is_empty() {
        return String::new();
    }
    let health = super::overview::mcp_health(state).await;
    let mut up = String::from(
        "# HELP clawvisor_node_up Whether the node's link is connected (1) or not (0).\n# TYPE clawvisor_node_up gauge\n",
    );
    let mut latency = String::from(
        "# HELP clawvisor_node_latency_ms The last health ping's round trip to the node.\n# TYPE clawvisor_node_latency_ms gauge\n",
    );
    let mut restarts = String::from(
        "# HELP clawvisor_node_link_restarts The node link's restarts since the daemon started.\n# TYPE clawvisor_node_link_restarts counter\n",
    );
    for name in names {
        let link = health.iter().find(|server| server.server == name);
        let is_up = link.is_some_and(|link| link.state == "up");
        up.push_str(&format!(
            "clawvisor_node_up{{node=\"{name}\"}} {}\n",
            u8::from(is_up)
        ));
        if let Some(ms) = link.and_then(|link| link.last_latency_ms) {
            latency.push_str(&format!(
                "clawvisor_node_latency_ms{{node=\"{name}\"}} {ms}\n"
            ));
        }
        restarts.push_str(&format!(
            "clawvisor_node_link_restarts{{node=\"{name}\"}} {}\n",
            link.map_or(0, |link| link.restarts)
        ));
    }
    up + &latency + &restarts
}

//! MCP server links: `GET /api/v1/mcp` (each server's state, latency, restarts, last error,
//! trust and the tools it publishes), asked of the MCP supervisor; and
//! `POST /api/v1/mcp/{server}/tools/{tool}/call`, the operator calling a tool through the
//! server's live link (`clawvisor mcp call`).
//!
//! The operator is trusted, so an operator's call passes no policy gate; it is audited as the
//! operator's (`mcp.tool_called`, with its arguments and outcome, secrets redacted and the
//! arguments cut short). What the tool answers is untrusted text: it is returned as a string,
//! never interpreted.

use std::time::Instant;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, integer, nullable, object, string};
use super::{ApiError, StudioState, json_body};
use crate::protocol::mcp::{Link, McpError, McpHealth};
use crate::tool::ToolOutput;

/// Who the audit log names for a call made through the API.
const OPERATOR: &str = "operator (studio)";
/// Longest argument text kept in the audit row.
const MAX_AUDITED_ARGUMENTS: usize = 2_000;

/// `GET /api/v1/mcp`
pub async fn servers(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let servers = super::overview::mcp_health(&state).await;
    Ok(Json(json!({
        "servers": servers.iter().map(|server| json!({
            "server": server.server, "transport": server.transport, "trust": server.trust,
            "state": server.state, "last_error": server.last_error, "restarts": server.restarts,
            "last_latency_ms": server.last_latency_ms, "tools": server.tools,
        })).collect::<Vec<_>>(),
    })))
}

/// What `GET /api/v1/mcp` answers.
pub fn servers_schema() -> Value {
    let server = object([
        ("server", string()),
        ("transport", string()),
        ("trust", string()),
        (
            "state",
            described(
                "`connecting`, `up`, `down`, `restarting`, `degraded` or `disabled`",
                string(),
            ),
        ),
        ("last_error", nullable(string())),
        ("restarts", integer()),
        ("last_latency_ms", nullable(integer())),
        ("tools", array(string())),
    ]);
    object([("servers", array(server))])
}

/// A tool call made by the operator.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallBody {
    /// The tool's arguments: a JSON object (absent: none).
    #[serde(default)]
    arguments: Value,
}

/// `POST /api/v1/mcp/{server}/tools/{tool}/call`: calls `tool` (the server's own name) with
/// `arguments`; answers `{"is_error", "text", "latency_ms"}` once the server answered (a tool's
/// own error included), 502 when the call failed on the way (timeout, closed connection).
pub async fn call_tool(
    State(state): State<StudioState>,
    Path((server, tool)): Path<(String, String)>,
    body: Result<Json<CallBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let arguments = object_arguments(json_body(body)?.arguments)?;
    let servers = super::overview::mcp_health(&state).await;
    let (link, health) = live_link(&state, &servers, &server)?;
    check_published(health, &server, &tool)?;
    let audited = audited_arguments(&arguments);
    let started = Instant::now();
    let outcome = link.call(tool.clone(), arguments).await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let subject = format!("mcp:{server}/{tool}");
    let details =
        json!({"arguments": audited, "outcome": outcome_text(&outcome), "latency_ms": latency_ms});
    record_call(&state, &subject, details).await?;
    match outcome {
        Ok(output) => Ok(Json(json!({
            "is_error": output.is_error, "text": output.text, "latency_ms": latency_ms,
        }))),
        Err(error @ (McpError::NotConnected | McpError::Closed)) => Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("MCP server `{server}`: {error}"),
        )),
        Err(error) => Err(ApiError(
            StatusCode::BAD_GATEWAY,
            format!("MCP server `{server}`, tool `{tool}`: {error}"),
        )),
    }
}

/// What `POST /api/v1/mcp/{server}/tools/{tool}/call` answers once the server answered (502 when
/// the call failed on the way).
pub fn call_schema() -> Value {
    object([
        (
            "is_error",
            described("the tool itself reported an error", boolean()),
        ),
        ("text", string()),
        ("latency_ms", integer()),
    ])
}

/// The call's arguments as a JSON object (none given: an empty one), or why they are not one.
fn object_arguments(arguments: Value) -> Result<Value, ApiError> {
    match arguments {
        Value::Null => Ok(Value::Object(Default::default())),
        object @ Value::Object(_) => Ok(object),
        _ => Err(ApiError::bad_request(
            "`arguments` must be a JSON object, like {\"text\": \"hi\"}",
        )),
    }
}

/// The live link to `server` and its health, or why it cannot take a call (unknown, disabled,
/// not up).
fn live_link<'a>(
    state: &StudioState,
    servers: &'a [McpHealth],
    server: &str,
) -> Result<(Link, &'a McpHealth), ApiError> {
    let Some(health) = servers.iter().find(|health| health.server == server) else {
        let names: Vec<&str> = servers
            .iter()
            .map(|health| health.server.as_str())
            .collect();
        return Err(ApiError::not_found(format!(
            "no MCP server is named `{server}` (configured: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    };
    if health.state == "disabled" {
        return Err(ApiError::conflict(format!(
            "MCP server `{server}` is disabled in the config (`enabled = false`)"
        )));
    }
    let link = Link::new(&state.registry, server);
    let (true, "up") = (link.is_running(), health.state) else {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "MCP server `{server}` is {}{}; try again once it is up",
                health.state,
                health
                    .last_error
                    .as_deref()
                    .map(|error| format!(" ({error})"))
                    .unwrap_or_default()
            ),
        ));
    };
    Ok((link, health))
}

/// Fails with the server's tools (by their own names) when it does not publish `tool`.
fn check_published(health: &McpHealth, server: &str, tool: &str) -> Result<(), ApiError> {
    let published = crate::mcp::namespaced(server, tool);
    if health.tools.contains(&published) {
        return Ok(());
    }
    let prefix = format!("{server}__");
    let names: Vec<&str> = health
        .tools
        .iter()
        .map(|name| name.strip_prefix(&prefix).unwrap_or(name))
        .collect();
    Err(ApiError::not_found(format!(
        "MCP server `{server}` has no tool `{tool}` (its tools: {})",
        names.join(", ")
    )))
}

/// The arguments as the audit row keeps them: secrets redacted, cut to
/// [`MAX_AUDITED_ARGUMENTS`].
fn audited_arguments(arguments: &Value) -> String {
    // The operator may have typed a key into the arguments; the audit log never holds one.
    let mut redacted_arguments = arguments.clone();
    crate::secrets::redact_json(&mut redacted_arguments);
    let shown = redacted_arguments.to_string();
    let (audited, _) = crate::tool::truncate_on_char_boundary(&shown, MAX_AUDITED_ARGUMENTS);
    audited.to_string()
}

/// The call's outcome in the audit row's words, an error's text redacted.
fn outcome_text(outcome: &Result<ToolOutput, McpError>) -> String {
    match outcome {
        Ok(output) if output.is_error => "tool error".to_string(),
        Ok(_) => "ok".to_string(),
        Err(error) => crate::secrets::redact(&error.to_string()).into_owned(),
    }
}

/// Appends the `mcp.tool_called` audit row as the operator's, then announces it.
async fn record_call(state: &StudioState, subject: &str, details: Value) -> Result<(), ApiError> {
    let audited_subject = subject.to_string();
    state
        .store
        .write(move |conn| {
            crate::audit::append(
                conn,
                OPERATOR,
                "mcp.tool_called",
                &audited_subject,
                &details,
            )
            .map(|_| ())
        })
        .await?;
    crate::audit::announce(&state.events, "mcp.tool_called", subject);
    Ok(())
}

//! The rmcp client wrapper: connect (stdio pipes or streamable HTTP), initialize within a
//! deadline, list every tool, call one tool with a timeout, ping.
//!
//! Every function here is bounded in time; none panics on what a server sends. Errors are
//! [`McpError`]s whose texts carry no secret (header values never enter them; URLs are cut out).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest, Implementation,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;

use super::process::ServerPipes;
use super::{ToolInfo, describe_service_error, strip_urls, tool_infos};
use crate::config::McpServerConfig;
use crate::protocol::mcp::McpError;
use crate::secrets::Secret;
use crate::tool::ToolOutput;

/// A live session with a server (the rmcp service task runs until it is closed or cancelled).
pub type Service = RunningService<RoleClient, ClientConfig>;

/// Longest error text kept from a failed handshake (rmcp prints whole messages in some).
const MAX_ERROR_CHARS: usize = 300;

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("clawvisor", env!("CARGO_PKG_VERSION")),
    )
}

fn short(text: &str) -> String {
    let text = crate::secrets::redact(&strip_urls(text)).into_owned();
    if text.chars().count() <= MAX_ERROR_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_ERROR_CHARS).collect();
    cut.push('…');
    cut
}

/// Initializes a session over a spawned server's stdin/stdout.
pub async fn handshake_stdio(pipes: ServerPipes, timeout: Duration) -> Result<Service, McpError> {
    let transport = (pipes.stdout, pipes.stdin);
    match tokio::time::timeout(timeout, client_info().serve(transport)).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(error)) => Err(McpError::Protocol(short(&error.to_string()))),
        Err(_) => Err(McpError::Timeout {
            what: "initialize",
            after: timeout,
        }),
    }
}

/// Connects to a streamable HTTP server and initializes a session. Headers (with their secret
/// values from the environment) are sent with every request.
pub async fn handshake_http(
    server: &McpServerConfig,
    secrets: &BTreeMap<String, Secret>,
    timeout: Duration,
) -> Result<Service, McpError> {
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &server.headers {
        insert_header(&mut headers, name, value, false)?;
    }
    for (name, var) in &server.headers_env {
        let Some(secret) = secrets.get(var) else {
            return Err(McpError::Connect(format!(
                "environment variable {var} (for header {name}) is not set"
            )));
        };
        insert_header(&mut headers, name, secret.expose(), true)?;
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(timeout)
        .build()
        .map_err(|error| McpError::Connect(short(&error.to_string())))?;
    handshake_with(client, &server.url, timeout).await
}

/// Initializes a session at `url` over `client` (a node's link brings its own mutual-TLS
/// client, `crate::node::link_handshake`).
pub async fn handshake_with(
    client: reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<Service, McpError> {
    let config =
        StreamableHttpClientTransportConfig::with_uri(url).control_request_timeout(timeout);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    match tokio::time::timeout(timeout, client_info().serve(transport)).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(error)) => Err(McpError::Connect(short(&error.to_string()))),
        Err(_) => Err(McpError::Timeout {
            what: "initialize",
            after: timeout,
        }),
    }
}

fn insert_header(
    headers: &mut reqwest::header::HeaderMap,
    name: &str,
    value: &str,
    sensitive: bool,
) -> Result<(), McpError> {
    let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| McpError::Connect(format!("`{name}` is not a valid header name")))?;
    let mut value = reqwest::header::HeaderValue::from_str(value)
        // The value is never shown: it may be a secret.
        .map_err(|_| {
            McpError::Connect(format!("the value of header {name} is not valid in HTTP"))
        })?;
    value.set_sensitive(sensitive);
    headers.insert(header, value);
    Ok(())
}

/// Lists every tool of the server (following cursors), namespaced for `server`.
pub async fn list_tools(
    peer: &Peer<RoleClient>,
    server: &str,
    timeout: Duration,
) -> Result<Vec<ToolInfo>, McpError> {
    match tokio::time::timeout(timeout, peer.list_all_tools()).await {
        Ok(Ok(tools)) => Ok(tool_infos(server, tools)),
        Ok(Err(error)) => Err(describe_service_error(&error)),
        Err(_) => Err(McpError::Timeout {
            what: "tools/list",
            after: timeout,
        }),
    }
}

/// Calls one tool. A timeout drops the request, which sends `notifications/cancelled`.
pub async fn call(
    peer: &Peer<RoleClient>,
    remote_name: &str,
    arguments: Value,
    timeout: Duration,
) -> Result<ToolOutput, McpError> {
    let mut params = CallToolRequestParams::new(remote_name.to_string());
    match arguments {
        Value::Object(fields) => params = params.with_arguments(fields),
        Value::Null => {}
        _ => {
            return Err(McpError::Call(
                "the arguments must be a JSON object".to_string(),
            ));
        }
    }
    match tokio::time::timeout(timeout, peer.call_tool(params)).await {
        Ok(Ok(result)) => Ok(super::render_result(&result)),
        Ok(Err(error)) => Err(describe_service_error(&error)),
        Err(_) => Err(McpError::Timeout {
            what: "the call",
            after: timeout,
        }),
    }
}

/// Pings the server; any answer (even "method not found") proves it alive. Returns the round trip.
pub async fn ping(peer: &Peer<RoleClient>, timeout: Duration) -> Result<Duration, McpError> {
    let started = Instant::now();
    let request = ClientRequest::PingRequest(Default::default());
    match tokio::time::timeout(timeout, peer.send_request(request)).await {
        Ok(Ok(_)) | Ok(Err(rmcp::ServiceError::McpError(_))) => Ok(started.elapsed()),
        Ok(Err(error)) => Err(describe_service_error(&error)),
        Err(_) => Err(McpError::Timeout {
            what: "ping",
            after: timeout,
        }),
    }
}

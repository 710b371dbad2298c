//! `clawvisor mcp list | tools <server> | call <server> <tool> <json>`: the configured MCP
//! servers from the terminal.
//!
//! - `list`: the daemon's view (`GET /api/v1/mcp`: state, tools) while it runs; the config while
//!   it is stopped.
//! - `tools`: asks the server itself in a short session of its own (`mcp::direct`), so that
//!   descriptions and argument schemas are shown whether or not the daemon runs.
//! - `call`: the arguments must be a JSON object. While the daemon runs, the call goes through its
//!   live link (`POST /api/v1/mcp/{server}/tools/{tool}/call`, audited as the operator's); while
//!   it is stopped, through a short session that is closed (the stdio child's group killed)
//!   before the command exits. The tool's answer is untrusted text: printed as it is (capped),
//!   never interpreted. A tool error, or a call that failed on the way, exits 1.
//!
//! `doctor` uses [`check_server`] to connect to each enabled server and list its tools.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};

use super::McpCommand;
use super::daemon_link::{self, Daemon};
use crate::config::{LoadedConfig, McpServerConfig, McpTransportKind};
use crate::mcp::direct::DirectSession;
use crate::protocol::mcp::McpError;

/// The most bytes of a tool's answer printed.
const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// Extra time the API call gets beyond the server's own call timeout.
const CALL_SLACK: Duration = Duration::from_secs(10);
/// Exit code of a command line the command cannot use (bad JSON).
const EXIT_USAGE: u8 = 2;

pub(super) async fn run(loaded: &LoadedConfig, command: McpCommand) -> ExitCode {
    match command {
        McpCommand::List => list(loaded).await,
        McpCommand::Tools { server } => tools(loaded, &server).await,
        McpCommand::Call {
            server,
            tool,
            arguments,
        } => call(loaded, &server, &tool, &arguments).await,
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::FAILURE
}

fn transport(server: &McpServerConfig) -> &'static str {
    match server.transport {
        McpTransportKind::Stdio => "stdio",
        McpTransportKind::Http => "http",
    }
}

/// The configured server named `name`, or what the names are.
fn configured<'a>(loaded: &'a LoadedConfig, name: &str) -> Result<&'a McpServerConfig, String> {
    let servers = &loaded.config.mcp.servers;
    servers
        .iter()
        .find(|server| server.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = servers.iter().map(|server| server.name.as_str()).collect();
            if names.is_empty() {
                format!(
                    "no MCP server is named `{name}`: the config has none ([[mcp.servers]] adds one)"
                )
            } else {
                format!(
                    "no MCP server is named `{name}` (configured: {})",
                    names.join(", ")
                )
            }
        })
}

async fn list(loaded: &LoadedConfig) -> ExitCode {
    let servers = &loaded.config.mcp.servers;
    if servers.is_empty() {
        println!("no MCP servers are configured ([[mcp.servers]] in the config adds one)");
        return ExitCode::SUCCESS;
    }
    let daemon = match daemon_link::find(loaded).await {
        Ok(daemon) => daemon,
        Err(error) => return fail(&error.to_string()),
    };
    match daemon {
        Daemon::Running(api) => {
            let answer = match api.get("/api/v1/mcp").await {
                Ok(answer) => answer,
                Err(error) => return fail(&error.to_string()),
            };
            let empty = Vec::new();
            let health = answer["servers"].as_array().unwrap_or(&empty);
            for server in servers {
                let found = health
                    .iter()
                    .find(|entry| entry["server"].as_str() == Some(server.name.as_str()));
                let Some(entry) = found else {
                    println!(
                        "{}  {}  {}  not loaded by the running daemon (changed since it started?)",
                        server.name,
                        transport(server),
                        enabled_word(server)
                    );
                    continue;
                };
                let tools = entry["tools"].as_array().map_or(0, Vec::len);
                let mut line = format!(
                    "{}  {}  {}  {}  {tools} tool(s)  trust {}",
                    server.name,
                    transport(server),
                    enabled_word(server),
                    entry["state"].as_str().unwrap_or("unknown"),
                    entry["trust"].as_str().unwrap_or("?"),
                );
                if let Some(error) = entry["last_error"].as_str() {
                    line.push_str(&format!("  last error: {error}"));
                }
                println!("{line}");
            }
        }
        Daemon::Stopped => {
            for server in servers {
                println!(
                    "{}  {}  {}  daemon stopped (`clawvisor mcp tools {}` or `clawvisor doctor` connects)  trust {}",
                    server.name,
                    transport(server),
                    enabled_word(server),
                    server.name,
                    server.trust.as_str()
                );
            }
        }
    }
    ExitCode::SUCCESS
}

fn enabled_word(server: &McpServerConfig) -> &'static str {
    if server.enabled {
        "enabled"
    } else {
        "disabled"
    }
}

async fn connect(loaded: &LoadedConfig, server: &McpServerConfig) -> Result<DirectSession, String> {
    DirectSession::connect(server, &loaded.secrets, loaded.config.mcp.connect_timeout.0)
        .await
        .map_err(|error| {
            format!(
                "MCP server `{}`: {error}; {}",
                server.name,
                fix(server, &error)
            )
        })
}

/// What to do about a server that cannot be reached.
fn fix(server: &McpServerConfig, error: &McpError) -> String {
    match (error, server.transport) {
        (McpError::Spawn(_), _) => format!(
            "check `command` (and `args`, `env_from`) of the [[mcp.servers]] entry `{}`",
            server.name
        ),
        (McpError::Timeout { .. }, _) => {
            "the server did not answer in time: check that it runs, or raise [mcp] connect_timeout"
                .to_string()
        }
        (_, McpTransportKind::Http) => format!(
            "check `url` and `headers_env` of the [[mcp.servers]] entry `{}` and that the server runs",
            server.name
        ),
        (_, McpTransportKind::Stdio) => format!(
            "check that `command` of the [[mcp.servers]] entry `{}` starts an MCP server speaking on stdin/stdout",
            server.name
        ),
    }
}

async fn tools(loaded: &LoadedConfig, name: &str) -> ExitCode {
    let server = match configured(loaded, name) {
        Ok(server) => server,
        Err(message) => return fail(&message),
    };
    let session = match connect(loaded, server).await {
        Ok(session) => session,
        Err(message) => return fail(&message),
    };
    println!("{}: {} tool(s)", server.name, session.tools.len());
    for tool in &session.tools {
        println!("{}", tool.remote_name);
        if !tool.description.trim().is_empty() {
            println!("    {}", one_line(&tool.description));
        }
        for argument in schema_summary(&tool.input_schema) {
            println!("    - {argument}");
        }
    }
    session.close().await;
    ExitCode::SUCCESS
}

/// A description on one line (servers may send anything, newlines included).
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `name: type (required) — description` for each property of an input schema.
fn schema_summary(schema: &Value) -> Vec<String> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return vec!["(no arguments)".to_string()];
    };
    if properties.is_empty() {
        return vec!["(no arguments)".to_string()];
    }
    properties
        .iter()
        .map(|(name, property)| {
            let kind = match &property["type"] {
                Value::String(kind) => kind.clone(),
                Value::Array(kinds) => kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("|"),
                _ => "any".to_string(),
            };
            let mut line = format!("{name}: {kind}");
            if required.contains(&name.as_str()) {
                line.push_str(" (required)");
            }
            if let Some(description) = property["description"].as_str() {
                line.push_str(" — ");
                line.push_str(&one_line(description));
            }
            line
        })
        .collect()
}

/// The arguments as a JSON object, or what is wrong with them.
fn parse_arguments(text: &str) -> Result<Value, String> {
    let value: Value = serde_json::from_str(text).map_err(|error| {
        format!(
            "the arguments are not valid JSON ({error}); give one object, like '{{\"text\": \"hi\"}}'"
        )
    })?;
    if !value.is_object() {
        return Err(format!(
            "the arguments must be a JSON object, like '{{\"text\": \"hi\"}}', not {}",
            match value {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "null",
            }
        ));
    }
    Ok(value)
}

async fn call(loaded: &LoadedConfig, name: &str, tool: &str, arguments: &str) -> ExitCode {
    let arguments = match parse_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let server = match configured(loaded, name) {
        Ok(server) => server,
        Err(message) => return fail(&message),
    };
    if !server.enabled {
        return fail(&format!(
            "MCP server `{name}` is disabled in the config (`enabled = false`)"
        ));
    }
    let daemon = match daemon_link::find(loaded).await {
        Ok(daemon) => daemon,
        Err(error) => return fail(&error.to_string()),
    };
    let (is_error, text) = match daemon {
        Daemon::Running(api) => {
            let path = format!(
                "/api/v1/mcp/{}/tools/{}/call",
                daemon_link::segment(name),
                daemon_link::segment(tool)
            );
            let timeout = server.timeout.0 + CALL_SLACK;
            match api
                .post_with_timeout(&path, json!({"arguments": arguments}), timeout)
                .await
            {
                Ok(answer) => (
                    answer["is_error"].as_bool().unwrap_or(true),
                    answer["text"].as_str().unwrap_or_default().to_string(),
                ),
                Err(error) => return fail(&error.to_string()),
            }
        }
        Daemon::Stopped => {
            let session = match connect(loaded, server).await {
                Ok(session) => session,
                Err(message) => return fail(&message),
            };
            let outcome = match session.tool(tool).cloned() {
                Some(info) => session
                    .call(&info, arguments)
                    .await
                    .map_err(|error| format!("MCP server `{name}`, tool `{tool}`: {error}")),
                None => {
                    let names: Vec<&str> = session
                        .tools
                        .iter()
                        .map(|tool| tool.remote_name.as_str())
                        .collect();
                    Err(format!(
                        "MCP server `{name}` has no tool `{tool}` (its tools: {})",
                        names.join(", ")
                    ))
                }
            };
            session.close().await;
            match outcome {
                Ok(output) => (output.is_error, output.text),
                Err(message) => return fail(&message),
            }
        }
    };
    print_output(&text);
    if is_error {
        eprintln!("the tool answered with an error");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints a tool's answer as plain text, cut at [`MAX_OUTPUT_BYTES`].
fn print_output(text: &str) {
    let (kept, cut) = crate::tool::truncate_on_char_boundary(text, MAX_OUTPUT_BYTES);
    println!("{kept}");
    if cut {
        eprintln!(
            "(the answer was cut: {} of {} bytes shown)",
            kept.len(),
            text.len()
        );
    }
}

/// `doctor`'s check of one server: disabled, or connected with its tools, or its error and what
/// to fix. The text never holds a secret (`McpError` texts carry none).
pub(super) async fn check_server(
    loaded: &LoadedConfig,
    server: &McpServerConfig,
) -> (bool, String) {
    if !server.enabled {
        return (true, format!("{}: disabled", transport(server)));
    }
    match connect(loaded, server).await {
        Ok(session) => {
            let names: Vec<&str> = session
                .tools
                .iter()
                .map(|tool| tool.remote_name.as_str())
                .collect();
            let detail = format!(
                "{}, {} tool(s): {} ({} ms)",
                transport(server),
                names.len(),
                names.join(", "),
                session.latency.as_millis()
            );
            session.close().await;
            (true, detail)
        }
        Err(message) => (false, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_one_json_object() {
        assert_eq!(
            parse_arguments(r#"{"text": "hi"}"#).unwrap(),
            json!({"text": "hi"})
        );
        let error = parse_arguments("{text: hi}").unwrap_err();
        assert!(error.contains("not valid JSON"), "{error}");
        let error = parse_arguments("[1, 2]").unwrap_err();
        assert!(error.contains("not an array"), "{error}");
    }

    #[test]
    fn a_schema_reads_as_one_line_per_argument() {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text\nto send"}},
            "required": ["text"],
        });
        assert_eq!(
            schema_summary(&schema),
            ["text: string (required) — The text to send"]
        );
        assert_eq!(
            schema_summary(&json!({"type": "object"})),
            ["(no arguments)"]
        );
    }
}

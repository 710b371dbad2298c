//! How an operator command reaches the daemon: through Studio's API while it runs, or the
//! database and the config directly while it is stopped — decided in one place for every
//! command (`jobs`, `mcp`, `reload`).
//!
//! Why it matters: the scheduler and the MCP links keep state in memory. A job written into the
//! database behind a running scheduler's back would not fire until the next boot, and a pause
//! would not be seen; so while a daemon runs, every change goes through it (the API, which hands
//! it to the owning actor), and the database is written directly only when no daemon runs.
//!
//! Deciding: `daemon_boots` holds a row per boot with its process id, and a clean stop records
//! `stopped_ms`. A boot without a stop whose process is alive and has the database open means a
//! daemon runs (`store::running_boot`; only a `serve` boot counts: `clawvisor chat` records a
//! `local` one, runs no Studio and no scheduler, and the files are worked on beside it);
//! otherwise (no database, clean stops, or a crashed daemon's row whose process is gone or is now
//! another program) it is stopped. While it runs, the command calls Studio at the configured
//! address (`studio.bind`, or `--studio-bind`) with the local token (`<data_dir>/studio.token`,
//! `studio::access::local_token`).
//!
//! Architecture Invariant: no command writes a job behind a running daemon's back: a running
//! daemon whose API cannot be reached is an error that says so, never a fallback to the database.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::config::LoadedConfig;
use crate::secrets::Secret;
use crate::studio::access::TokenFileError;

/// How long one API call may take (an MCP call adds the server's own timeout).
const API_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the daemon of this data directory stands.
pub(super) enum Daemon {
    /// A daemon runs: talk to it through its API.
    Running(Api),
    /// No daemon runs on this data directory.
    Stopped,
}

/// Why the command cannot reach the daemon, or what the daemon refused.
#[derive(Debug, thiserror::Error)]
pub(super) enum LinkError {
    #[error(
        "a daemon (pid {pid}) runs on this data directory, but its Studio port is chosen at boot (`studio.bind` ends in `:0`): pass `--studio-bind <address>` with the address of its log line `studio listening on …`"
    )]
    UnknownPort { pid: u32 },
    #[error(
        "a daemon (pid {pid}) runs on this data directory, but its API cannot be used: {source}"
    )]
    Token { pid: u32, source: TokenFileError },
    #[error("cannot read the database {path} to see whether a daemon runs: {reason}")]
    Database { path: String, reason: String },
    #[error(
        "a daemon (pid {pid}) runs on this data directory, but Studio at {base} does not answer ({reason}); it may still be starting: try again, or look at its log"
    )]
    Unreachable {
        pid: u32,
        base: String,
        reason: String,
    },
    /// The API answered with an error; `message` is its own text (what to fix).
    #[error("{message} (HTTP {status})")]
    Refused { status: u16, message: String },
    #[error("the daemon's answer could not be read: {0}")]
    BadAnswer(String),
}

impl LinkError {
    /// The HTTP status of a refusal (404: no such job or server).
    pub(super) fn status(&self) -> Option<u16> {
        match self {
            LinkError::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// Finds out whether a daemon runs on the configured data directory.
pub(super) async fn find(loaded: &LoadedConfig) -> Result<Daemon, LinkError> {
    let path = loaded.config.db_path();
    if !path.exists() {
        return Ok(Daemon::Stopped);
    }
    let shown = path.display().to_string();
    let running = tokio::task::spawn_blocking(move || crate::store::running_boot(&path))
        .await
        .map_err(|_| LinkError::Database {
            path: shown.clone(),
            reason: "reading it panicked".into(),
        })?
        .map_err(|error| LinkError::Database {
            path: shown,
            reason: error.to_string(),
        })?;
    // A `clawvisor chat` runs no Studio and no scheduler: the files are worked on beside it.
    let Some(pid) = running
        .filter(|boot| boot.kind == crate::store::events::BootKind::Serve)
        .map(|boot| boot.pid)
    else {
        return Ok(Daemon::Stopped);
    };
    let bind = loaded.config.studio_addr();
    if bind.port() == 0 {
        return Err(LinkError::UnknownPort { pid });
    }
    let token = crate::studio::access::local_token(&loaded.config.data_dir)
        .map_err(|source| LinkError::Token { pid, source })?;
    // The command runs on the server: it calls the bound address, never `public_url` (which may be
    // a proxy in front of it).
    let base = crate::studio::access::base_url("", bind);
    let client = reqwest::Client::builder()
        .timeout(API_TIMEOUT)
        .build()
        .map_err(|error| LinkError::Unreachable {
            pid,
            base: base.clone(),
            reason: error.to_string(),
        })?;
    Ok(Daemon::Running(Api {
        client,
        base,
        token,
        pid,
    }))
}

/// The running daemon's API, called with the local token.
pub(super) struct Api {
    client: reqwest::Client,
    base: String,
    token: Secret,
    pub(super) pid: u32,
}

impl Api {
    pub(super) async fn get(&self, path: &str) -> Result<Value, LinkError> {
        self.call(Method::GET, path, None, None).await
    }

    pub(super) async fn post(&self, path: &str, body: Value) -> Result<Value, LinkError> {
        self.call(Method::POST, path, Some(body), None).await
    }

    /// A POST that may take longer than usual (an MCP call with the server's own timeout).
    pub(super) async fn post_with_timeout(
        &self,
        path: &str,
        body: Value,
        timeout: Duration,
    ) -> Result<Value, LinkError> {
        self.call(Method::POST, path, Some(body), Some(timeout))
            .await
    }

    pub(super) async fn delete(&self, path: &str) -> Result<Value, LinkError> {
        self.call(Method::DELETE, path, None, None).await
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        timeout: Option<Duration>,
    ) -> Result<Value, LinkError> {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose());
        if let Some(body) = body {
            request = request.json(&body);
        }
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        let response = request
            .send()
            .await
            .map_err(|error| LinkError::Unreachable {
                pid: self.pid,
                base: self.base.clone(),
                // reqwest's text names the URL, which holds no secret (the token is a header).
                reason: error.to_string(),
            })?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|error| LinkError::BadAnswer(error.to_string()))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            return Ok(value);
        }
        let message = value
            .pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string());
        Err(LinkError::Refused {
            status: status.as_u16(),
            message,
        })
    }
}

/// Path segments are names from the command line: anything but `[A-Za-z0-9_-.]` is escaped.
pub(super) fn segment(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.') {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

//! The semantic checks of a config that types alone cannot express, each error naming the file,
//! the key and what is expected.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use super::{
    Config, ConfigError, McpConfig, McpServerConfig, McpTransportKind, ProviderKind,
    SchedulerConfig, SupervisionConfig, TelegramConfig,
};

/// Semantic checks that types alone cannot express.
pub(super) fn validate(config: &Config, origin: &str) -> Result<(), ConfigError> {
    // Off loopback Studio also needs its token; that is checked once the secrets are read.
    config.studio.bind.parse::<SocketAddr>().map_err(|_| {
        ConfigError::key(
            origin,
            "[studio].bind",
            format!(
                "invalid socket address `{}` (expected host:port such as 127.0.0.1:7070)",
                config.studio.bind
            ),
        )
    })?;
    for (key, entries) in [
        ("[studio].tls_proxies", &config.studio.tls_proxies),
        ("[studio].plain_http_peers", &config.studio.plain_http_peers),
    ] {
        for entry in entries {
            super::tls_proxy_network(entry)
                .map_err(|problem| ConfigError::key(origin, key, problem))?;
        }
    }
    for entry in &config.tools.web_fetch_allow {
        super::check_web_fetch_host(entry)
            .map_err(|problem| ConfigError::key(origin, "[tools].web_fetch_allow", problem))?;
    }
    if config.store.hold_free > config.store.min_free {
        return Err(ConfigError::key(
            origin,
            "[store].hold_free",
            format!(
                "must not be larger than [store].min_free ({}): the daemon warns before it holds writes, not after",
                config.store.min_free
            ),
        ));
    }
    validate_memory(config, origin)?;
    super::memory::validate_embeddings(config, origin)?;
    validate_transcription(config, origin)?;
    validate_supervision(&config.supervision, origin)?;
    validate_telegram(&config.telegram, origin)?;
    validate_providers(config, origin)?;
    validate_scheduler(&config.scheduler, origin)?;
    validate_mcp(&config.mcp, origin)?;
    let mcp_names = config
        .mcp
        .servers
        .iter()
        .map(|server| server.name.as_str())
        .collect();
    super::nodes::validate(&config.nodes, &config.node, &mcp_names, origin)?;
    config.web_search.validate(&config.mcp, origin)?;
    config.browser.validate(origin)?;
    config.backup.validate(origin)?;
    validate_pricing(config, origin)
}

/// `[memory]`: the surprise threshold is a fraction; the embeddings provider exists and serves
/// embeddings.
fn validate_memory(config: &Config, origin: &str) -> Result<(), ConfigError> {
    let memory = &config.memory;
    if !(0.0..=1.0).contains(&memory.surprise_threshold) {
        return Err(ConfigError::key(
            origin,
            "[memory].surprise_threshold",
            format!("must be between 0 and 1, not {}", memory.surprise_threshold),
        ));
    }
    if !memory.embeddings_provider.is_empty() {
        match config.providers.get(&memory.embeddings_provider) {
            None => {
                return Err(ConfigError::key(
                    origin,
                    "[memory].embeddings_provider",
                    format!(
                        "provider `{}` is not defined under [providers]",
                        memory.embeddings_provider
                    ),
                ));
            }
            Some(provider) if provider.embeddings_model.trim().is_empty() => {
                return Err(ConfigError::key(
                    origin,
                    "[memory].embeddings_provider",
                    format!(
                        "provider `{}` has no `embeddings_model`; set one in [providers.{}]",
                        memory.embeddings_provider, memory.embeddings_provider
                    ),
                ));
            }
            Some(provider) if provider.kind == ProviderKind::Anthropic => {
                return Err(ConfigError::key(
                    origin,
                    "[memory].embeddings_provider",
                    "Anthropic serves no embeddings; use an OpenAI-compatible or Gemini provider",
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// `[supervision]`: at least one restart, and the backoff's factor, jitter and bounds in range.
fn validate_supervision(supervision: &SupervisionConfig, origin: &str) -> Result<(), ConfigError> {
    if supervision.max_restarts == 0 {
        return Err(ConfigError::key(
            origin,
            "[supervision].max_restarts",
            "must be at least 1",
        ));
    }
    if !(1.0..=10.0).contains(&supervision.backoff_factor) {
        return Err(ConfigError::key(
            origin,
            "[supervision].backoff_factor",
            format!(
                "{} is out of range (expected 1.0 to 10.0)",
                supervision.backoff_factor
            ),
        ));
    }
    if !(0.0..0.9).contains(&supervision.jitter) {
        return Err(ConfigError::key(
            origin,
            "[supervision].jitter",
            format!(
                "{} is out of range (expected 0.0 to 0.9)",
                supervision.jitter
            ),
        ));
    }
    if supervision.backoff_min.0 > supervision.backoff_max.0 {
        return Err(ConfigError::key(
            origin,
            "[supervision].backoff_min",
            "is larger than [supervision].backoff_max",
        ));
    }
    Ok(())
}

/// `[telegram]`: the long-poll timeout and the streaming thresholds within what Telegram allows.
fn validate_telegram(telegram: &TelegramConfig, origin: &str) -> Result<(), ConfigError> {
    let poll = telegram.poll_timeout.0;
    if poll.as_secs() > 50 || poll.is_zero() {
        return Err(ConfigError::key(
            origin,
            "[telegram].poll_timeout",
            format!(
                "{} is out of range (expected 1s to 50s)",
                telegram.poll_timeout
            ),
        ));
    }
    if telegram.stream_after.0 > std::time::Duration::from_secs(60) {
        return Err(ConfigError::key(
            origin,
            "[telegram].stream_after",
            format!(
                "{} is out of range (expected 0s to 60s; a streamed answer is shown after this long)",
                telegram.stream_after
            ),
        ));
    }
    if telegram.stream_min_chars > 4096 {
        return Err(ConfigError::key(
            origin,
            "[telegram].stream_min_chars",
            format!(
                "{} is out of range (expected 0 to 4096, Telegram's message length)",
                telegram.stream_min_chars
            ),
        ));
    }
    Ok(())
}

/// Every provider: an http(s) `base_url`, and a `speech_model` only on an OpenAI-compatible one.
fn validate_providers(config: &Config, origin: &str) -> Result<(), ConfigError> {
    for (name, provider) in &config.providers {
        let key = format!("[providers.{name}].base_url");
        let url = reqwest::Url::parse(&provider.base_url).map_err(|error| {
            ConfigError::key(
                origin,
                &key,
                format!("invalid URL `{}`: {error}", provider.base_url),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ConfigError::key(
                origin,
                &key,
                "must be an http:// or https:// URL",
            ));
        }
        if !provider.speech_model.trim().is_empty() && provider.kind != ProviderKind::Openai {
            return Err(ConfigError::key(
                origin,
                format!("[providers.{name}].speech_model"),
                "spoken replies need an OpenAI-compatible provider (kind = \"openai\", `POST /audio/speech`)",
            ));
        }
    }
    Ok(())
}

/// `[scheduler]`: the sleep, interval, job count and retry list within range.
fn validate_scheduler(scheduler: &SchedulerConfig, origin: &str) -> Result<(), ConfigError> {
    if scheduler.max_sleep.0 < Duration::from_secs(1)
        || scheduler.max_sleep.0 > Duration::from_secs(3600)
    {
        return Err(ConfigError::key(
            origin,
            "[scheduler].max_sleep",
            format!(
                "{} is out of range (expected 1s to 1h)",
                scheduler.max_sleep
            ),
        ));
    }
    if scheduler.min_interval.0 < Duration::from_secs(1) {
        return Err(ConfigError::key(
            origin,
            "[scheduler].min_interval",
            "must be at least 1s",
        ));
    }
    if scheduler.max_jobs_per_agent == 0 {
        return Err(ConfigError::key(
            origin,
            "[scheduler].max_jobs_per_agent",
            "must be at least 1",
        ));
    }
    if scheduler.retry_backoff.len() > 20 {
        return Err(ConfigError::key(
            origin,
            "[scheduler].retry_backoff",
            "lists more than 20 retries",
        ));
    }
    Ok(())
}

/// `[pricing]`: every price finite and not negative.
fn validate_pricing(config: &Config, origin: &str) -> Result<(), ConfigError> {
    for (model, price) in &config.pricing {
        if price.input_per_mtok < 0.0
            || price.output_per_mtok < 0.0
            || !price.input_per_mtok.is_finite()
            || !price.output_per_mtok.is_finite()
        {
            return Err(ConfigError::key(
                origin,
                format!("[pricing.\"{model}\"]"),
                "prices must be finite and not negative",
            ));
        }
    }
    Ok(())
}

/// `[mcp]` and every `[[mcp.servers]]` entry (named by its index, like `[mcp.servers.0].name`).
fn validate_mcp(mcp: &McpConfig, origin: &str) -> Result<(), ConfigError> {
    if mcp.connect_timeout.0 < Duration::from_millis(100) {
        return Err(ConfigError::key(
            origin,
            "[mcp].connect_timeout",
            "must be at least 100ms",
        ));
    }
    if mcp.ping_every.0 < Duration::from_millis(100) {
        return Err(ConfigError::key(
            origin,
            "[mcp].ping_every",
            "must be at least 100ms",
        ));
    }
    let mut seen = BTreeSet::new();
    for (index, server) in mcp.servers.iter().enumerate() {
        let key = |field: &str| format!("[mcp.servers.{index}].{field}");
        validate_mcp_server_name(&server.name, &mut seen, origin, &key)?;
        match server.transport {
            McpTransportKind::Stdio => validate_stdio_server(server, origin, &key)?,
            McpTransportKind::Http => validate_http_server(server, origin, &key)?,
        }
        if server.timeout.0 < Duration::from_millis(100)
            || server.timeout.0 > Duration::from_secs(3600)
        {
            return Err(ConfigError::key(
                origin,
                key("timeout"),
                format!("{} is out of range (expected 100ms to 1h)", server.timeout),
            ));
        }
    }
    Ok(())
}

/// A server's name: short, of `a-z0-9_-`, without the `__` that separates server and tool names,
/// and not used by an earlier entry (`seen` holds theirs).
fn validate_mcp_server_name<'a>(
    name: &'a str,
    seen: &mut BTreeSet<&'a str>,
    origin: &str,
    key: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    if name.is_empty()
        || name.len() > 32
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(ConfigError::key(
            origin,
            key("name"),
            format!("`{name}` must be 1 to 32 characters of a-z, 0-9, `_` and `-`"),
        ));
    }
    if name.contains("__") {
        return Err(ConfigError::key(
            origin,
            key("name"),
            format!("`{name}` must not contain `__` (it separates server and tool names)"),
        ));
    }
    if !seen.insert(name) {
        return Err(ConfigError::key(
            origin,
            key("name"),
            format!("`{name}` is used by another [[mcp.servers]] entry"),
        ));
    }
    Ok(())
}

/// A stdio server has a program to run and none of the HTTP transport's keys.
fn validate_stdio_server(
    server: &McpServerConfig,
    origin: &str,
    key: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    if server.command.trim().is_empty() {
        return Err(ConfigError::key(
            origin,
            key("command"),
            "a stdio server needs the program to run",
        ));
    }
    if !server.url.is_empty() || !server.headers.is_empty() || !server.headers_env.is_empty() {
        return Err(ConfigError::key(
            origin,
            key("url"),
            "`url`, `headers` and `headers_env` belong to transport = \"http\"",
        ));
    }
    Ok(())
}

/// An HTTP server has an http(s) URL, valid header names, and none of the stdio transport's keys.
fn validate_http_server(
    server: &McpServerConfig,
    origin: &str,
    key: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    let url = reqwest::Url::parse(&server.url).map_err(|error| {
        ConfigError::key(
            origin,
            key("url"),
            format!("invalid URL `{}`: {error}", server.url),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::key(
            origin,
            key("url"),
            "must be an http:// or https:// URL",
        ));
    }
    if !server.command.is_empty()
        || !server.args.is_empty()
        || !server.env.is_empty()
        || !server.env_from.is_empty()
        || server.cwd.is_some()
    {
        return Err(ConfigError::key(
            origin,
            key("command"),
            "`command`, `args`, `env`, `env_from` and `cwd` belong to transport = \"stdio\"",
        ));
    }
    for header in server.headers.keys().chain(server.headers_env.keys()) {
        if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(ConfigError::key(
                origin,
                key("headers"),
                format!("`{header}` is not a valid HTTP header name"),
            ));
        }
    }
    Ok(())
}

/// A `transcription_model` only on OpenAI-compatible providers; `[transcription].provider` names
/// one that has it; the longest voice note is at least a second.
fn validate_transcription(config: &Config, origin: &str) -> Result<(), ConfigError> {
    for (name, provider) in &config.providers {
        let model = &provider.transcription_model;
        if model.is_empty() {
            continue;
        }
        if model.trim().is_empty() || model.trim() != model {
            return Err(ConfigError::key(
                origin,
                format!("[providers.{name}].transcription_model"),
                format!(
                    "`{model}` has surrounding spaces; write the model name alone, e.g. \"whisper-1\""
                ),
            ));
        }
        if provider.kind != ProviderKind::Openai {
            return Err(ConfigError::key(
                origin,
                format!("[providers.{name}].transcription_model"),
                "transcription uses the OpenAI-compatible /audio/transcriptions endpoint; set it on a provider with kind = \"openai\" (OpenAI, Groq, faster-whisper, whisper.cpp)",
            ));
        }
    }
    let transcription = &config.transcription;
    if !transcription.provider.is_empty() {
        match config.providers.get(&transcription.provider) {
            None => {
                return Err(ConfigError::key(
                    origin,
                    "[transcription].provider",
                    format!(
                        "provider `{}` is not defined under [providers]",
                        transcription.provider
                    ),
                ));
            }
            Some(provider) if provider.transcription_model.is_empty() => {
                return Err(ConfigError::key(
                    origin,
                    "[transcription].provider",
                    format!(
                        "provider `{0}` has no `transcription_model`; set one in [providers.{0}] (e.g. \"whisper-1\")",
                        transcription.provider
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    if transcription.max_duration.0 < std::time::Duration::from_secs(1) {
        return Err(ConfigError::key(
            origin,
            "[transcription].max_duration",
            "must be at least 1s (it is the longest voice note that is transcribed)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn bad_transcription_configs_are_refused_at_load() {
        for (toml, expected) in [
            (
                "[providers.x]\nkind = \"anthropic\"\nbase_url = \"http://h\"\ntranscription_model = \"whisper-1\"\n",
                "kind = \"openai\"",
            ),
            (
                "[transcription]\nprovider = \"nope\"\n",
                "[transcription].provider",
            ),
            (
                "[providers.x]\nkind = \"openai\"\nbase_url = \"http://h\"\n[transcription]\nprovider = \"x\"\n",
                "has no `transcription_model`",
            ),
            (
                "[transcription]\nmax_duration = \"0s\"\n",
                "[transcription].max_duration",
            ),
        ] {
            let config = crate::config::parse_file(toml, "test.toml").unwrap();
            let error = super::validate(&config, "test.toml")
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{toml}: {error}");
        }
    }
}

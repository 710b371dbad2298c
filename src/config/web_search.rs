//! `[web_search]`: where the `web_search` tool looks things up. Without a backend the tool is
//! absent (an agent that lists it is told at boot, and `clawvisor doctor` says how to add one).

use serde::{Deserialize, Serialize};

use super::{ConfigError, Dur, McpConfig};

/// The search service behind `web_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebSearchBackend {
    /// A self-hosted SearXNG instance's JSON API (`format=json` enabled in its settings).
    Searxng,
    /// The Brave Search API (a subscription token in `api_key_env`).
    Brave,
    /// A tool of a configured MCP server (`mcp_tool = "server__tool"`).
    Mcp,
}

impl WebSearchBackend {
    pub fn label(self) -> &'static str {
        match self {
            WebSearchBackend::Searxng => "SearXNG",
            WebSearchBackend::Brave => "Brave Search",
            WebSearchBackend::Mcp => "MCP",
        }
    }
}

/// The Brave Search API's address, used when `url` is empty.
pub const BRAVE_API_URL: &str = "https://api.search.brave.com";
/// Most results one search may return.
pub const MAX_RESULTS_CEILING: u32 = 10;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSearchConfig {
    /// `searxng`, `brave` or `mcp`; absent: no web search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<WebSearchBackend>,
    /// SearXNG: its base URL (`http://searxng.lan:8080`). Brave: the API's base URL (default
    /// `https://api.search.brave.com`).
    pub url: String,
    /// Brave: the environment variable holding the subscription token.
    pub api_key_env: String,
    /// MCP: the search tool, `<server>__<tool>` of a `[[mcp.servers]]` entry.
    pub mcp_tool: String,
    /// MCP: the argument the query is passed in.
    pub mcp_query_argument: String,
    /// Results returned per search (1 to 10).
    pub max_results: u32,
    /// One search's time limit.
    pub timeout: Dur,
}

impl Default for WebSearchConfig {
    fn default() -> Self {
        Self {
            backend: None,
            url: String::new(),
            api_key_env: String::new(),
            mcp_tool: String::new(),
            mcp_query_argument: "query".into(),
            max_results: 5,
            timeout: Dur::secs(15),
        }
    }
}

impl WebSearchConfig {
    /// The MCP server and its tool's own name, for `mcp_tool = "server__tool"`.
    pub fn mcp_target(&self) -> Option<(&str, &str)> {
        self.mcp_tool
            .split_once("__")
            .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
    }

    /// Every environment variable this section reads a secret from.
    pub fn secret_vars(&self) -> impl Iterator<Item = &str> {
        (self.backend == Some(WebSearchBackend::Brave))
            .then_some(self.api_key_env.as_str())
            .into_iter()
    }

    pub(super) fn validate(&self, mcp: &McpConfig, origin: &str) -> Result<(), ConfigError> {
        let error = |key: &str, message: String| {
            Err(ConfigError::key(
                origin,
                format!("[web_search].{key}"),
                message,
            ))
        };
        if !(1..=MAX_RESULTS_CEILING).contains(&self.max_results) {
            return error(
                "max_results",
                format!(
                    "must be 1 to {MAX_RESULTS_CEILING}, got {}",
                    self.max_results
                ),
            );
        }
        if self.timeout.0.is_zero() || self.timeout.0 > std::time::Duration::from_secs(120) {
            return error("timeout", "must be between 1s and 120s".into());
        }
        let url_ok = |url: &str| {
            reqwest::Url::parse(url)
                .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
        };
        match self.backend {
            None => Ok(()),
            Some(WebSearchBackend::Searxng) if !url_ok(&self.url) => error(
                "url",
                format!(
                    "the SearXNG backend needs the instance's http(s) base URL (like \"http://searxng.lan:8080\"), got {:?}",
                    self.url
                ),
            ),
            Some(WebSearchBackend::Brave) if self.api_key_env.trim().is_empty() => error(
                "api_key_env",
                "the Brave backend needs the environment variable holding its subscription token (like \"BRAVE_API_KEY\")".into(),
            ),
            Some(WebSearchBackend::Brave) if !self.url.is_empty() && !url_ok(&self.url) => error(
                "url",
                format!("not an http(s) URL: {:?} (leave it empty for {BRAVE_API_URL})", self.url),
            ),
            Some(WebSearchBackend::Mcp) => match self.mcp_target() {
                None => error(
                    "mcp_tool",
                    format!(
                        "the MCP backend needs the search tool as \"<server>__<tool>\", got {:?}",
                        self.mcp_tool
                    ),
                ),
                Some((server, _)) if !mcp.servers.iter().any(|entry| entry.name == server) => {
                    error(
                        "mcp_tool",
                        format!("there is no [[mcp.servers]] entry named `{server}`"),
                    )
                }
                Some(_) if self.mcp_query_argument.trim().is_empty() => error(
                    "mcp_query_argument",
                    "must name the argument the query goes in".into(),
                ),
                Some(_) => Ok(()),
            },
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse_file;

    fn error(text: &str) -> String {
        match parse_file(text, "test.toml") {
            Ok(config) => config
                .web_search
                .validate(&config.mcp, "test.toml")
                .unwrap_err()
                .to_string(),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn each_backend_names_what_it_is_missing() {
        let missing_url = error("[web_search]\nbackend = \"searxng\"\n");
        assert!(
            missing_url.contains("[web_search].url") && missing_url.contains("SearXNG"),
            "{missing_url}"
        );
        let missing_key = error("[web_search]\nbackend = \"brave\"\n");
        assert!(
            missing_key.contains("[web_search].api_key_env"),
            "{missing_key}"
        );
        let bad_tool = error("[web_search]\nbackend = \"mcp\"\nmcp_tool = \"search\"\n");
        assert!(bad_tool.contains("<server>__<tool>"), "{bad_tool}");
        let no_server = error("[web_search]\nbackend = \"mcp\"\nmcp_tool = \"brave__search\"\n");
        assert!(
            no_server.contains("no [[mcp.servers]] entry named `brave`"),
            "{no_server}"
        );
        let too_many = error(
            "[web_search]\nbackend = \"searxng\"\nurl = \"http://s.lan\"\nmax_results = 50\n",
        );
        assert!(
            too_many.contains("max_results") && too_many.contains("1 to 10"),
            "{too_many}"
        );
        let unknown = error("[web_search]\nbackend = \"google\"\n");
        assert!(unknown.contains("google"), "{unknown}");
        let fine = parse_file(
            "[web_search]\nbackend = \"searxng\"\nurl = \"http://searxng.lan:8080\"\n",
            "t",
        )
        .expect("a SearXNG backend on the LAN is fine");
        assert_eq!(fine.web_search.max_results, 5);
        assert!(fine.web_search.validate(&fine.mcp, "t").is_ok());
        assert!(parse_file("", "t").unwrap().web_search.backend.is_none());
    }
}

//! `web_search`: look something up on the web and get a short list of results (title, URL,
//! snippet), which the agent can then open with `web_fetch`.
//!
//! The backend is the operator's choice in `[web_search]`: a self-hosted SearXNG (its JSON API),
//! the Brave Search API, or a search tool of a configured MCP server. Without one the tool is
//! absent. The backend's address is the operator's, so unlike `web_fetch` it may be on the LAN.
//!
//! Risk: L1 (run and notify), like `web_fetch`: the search changes nothing, but the query is data
//! leaving the machine. Through an MCP server the server's trust applies too (an untrusted
//! server's tool asks first, whatever it claims). Results are the web's words: they reach the
//! model as data (the transcript wraps every tool output), cut to a bounded size, with markup
//! removed from snippets.
//!
//! Every failure is a tool error that says what happened and what to do: a rate limit (with the
//! backend's `Retry-After`), a refused key, an answer that is not the backend's JSON, no answer
//! within the time limit.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, RETRY_AFTER};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::{
    BRAVE_API_URL, LoadedConfig, MAX_RESULTS_CEILING, WebSearchBackend, WebSearchConfig,
};
use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, McpToolHints, McpTrust, RiskLevel};
use crate::secrets::{Secret, redact};
use crate::tool::{
    Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, truncate_on_char_boundary,
};

const FIELDS: &[&str] = &["query", "count"];
/// Longest query sent (search engines ignore more anyway).
pub const MAX_QUERY_CHARS: usize = 400;
const MAX_TITLE_BYTES: usize = 200;
const MAX_SNIPPET_BYTES: usize = 400;
/// Most text an MCP backend's answer may put before the model.
const MAX_MCP_TEXT_BYTES: usize = 16 * 1024;
/// Most bytes read from a backend's answer.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// The dispatcher's bound exceeds the search's own, so the clearer message wins.
const DISPATCHER_GRACE: Duration = Duration::from_secs(5);
const USER_AGENT: &str = concat!("clawvisor/", env!("CARGO_PKG_VERSION"), " (web_search)");

/// Where the queries go.
enum Backend {
    Searxng {
        url: reqwest::Url,
    },
    Brave {
        url: reqwest::Url,
        key: Option<Secret>,
        key_env: String,
    },
    Mcp {
        server: String,
        tool: String,
        query_argument: String,
        trust: McpTrust,
    },
}

pub struct WebSearchTool {
    backend: Backend,
    max_results: usize,
    timeout: Duration,
    client: reqwest::Client,
}

/// One result, as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

impl WebSearchTool {
    /// The tool for `[web_search]`, or `None` when no backend is configured (the tool is absent).
    pub fn from_config(loaded: &LoadedConfig) -> Option<Arc<dyn Tool>> {
        WebSearchTool::build(loaded).map(|tool| Arc::new(tool) as Arc<dyn Tool>)
    }

    /// Asks the backend one search, for `clawvisor doctor`: how many results came back, or what
    /// went wrong. An MCP backend is not asked (its server runs only inside the daemon).
    pub async fn probe(&self) -> Result<Option<usize>, String> {
        match &self.backend {
            Backend::Mcp { .. } => Ok(None),
            _ => self
                .search_http("clawvisor", 1)
                .await
                .map(|results| Some(results.len()))
                .map_err(|error| error.to_string()),
        }
    }

    /// The backend's name as the model and the operator see it.
    pub fn backend_label(&self) -> String {
        self.label()
    }

    pub fn build(loaded: &LoadedConfig) -> Option<WebSearchTool> {
        let settings = &loaded.config.web_search;
        let backend = match settings.backend? {
            WebSearchBackend::Searxng => Backend::Searxng {
                url: reqwest::Url::parse(&settings.url).ok()?,
            },
            WebSearchBackend::Brave => Backend::Brave {
                url: reqwest::Url::parse(if settings.url.is_empty() {
                    BRAVE_API_URL
                } else {
                    &settings.url
                })
                .ok()?,
                key: loaded.secret(&settings.api_key_env).cloned(),
                key_env: settings.api_key_env.clone(),
            },
            WebSearchBackend::Mcp => {
                let (server, tool) = settings.mcp_target()?;
                let trust = loaded
                    .config
                    .mcp
                    .servers
                    .iter()
                    .find(|entry| entry.name == server)
                    .map(|entry| McpTrust::from(entry.trust))?;
                Backend::Mcp {
                    server: server.to_string(),
                    tool: tool.to_string(),
                    query_argument: settings.mcp_query_argument.clone(),
                    trust,
                }
            }
        };
        Some(WebSearchTool::new(backend, settings))
    }

    fn new(backend: Backend, settings: &WebSearchConfig) -> WebSearchTool {
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(settings.timeout.0)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            // The builder fails only when TLS cannot initialise; rustls always can.
            .unwrap_or_default();
        WebSearchTool {
            backend,
            max_results: settings.max_results.clamp(1, MAX_RESULTS_CEILING) as usize,
            timeout: settings.timeout.0,
            client,
        }
    }

    fn label(&self) -> String {
        match &self.backend {
            Backend::Searxng { .. } => WebSearchBackend::Searxng.label().to_string(),
            Backend::Brave { .. } => WebSearchBackend::Brave.label().to_string(),
            Backend::Mcp { server, .. } => format!("MCP server {server}"),
        }
    }

    async fn search(
        &self,
        query: &str,
        count: usize,
        ctx: &ToolContext,
    ) -> Result<String, ToolError> {
        match &self.backend {
            Backend::Searxng { .. } | Backend::Brave { .. } => {
                let results = self.search_http(query, count).await?;
                Ok(render(query, &self.label(), &results, count))
            }
            Backend::Mcp {
                server,
                tool,
                query_argument,
                ..
            } => {
                let link = crate::protocol::mcp::Link::new(&ctx.registry, server);
                if !link.is_running() {
                    return Err(ToolError::Failed(format!(
                        "web search is unavailable: the MCP server `{server}` is not connected"
                    )));
                }
                let mut arguments = serde_json::Map::new();
                arguments.insert(query_argument.clone(), Value::String(query.to_string()));
                let output = tokio::time::timeout(
                    self.timeout,
                    link.call(tool.clone(), Value::Object(arguments)),
                )
                .await
                .map_err(|_| no_answer(&self.label(), self.timeout))?
                .map_err(|error| {
                    ToolError::Failed(format!("the search tool {server}__{tool} failed: {error}"))
                })?;
                if output.is_error {
                    return Err(ToolError::Failed(format!(
                        "the search tool {server}__{tool} answered with an error: {}",
                        output.text
                    )));
                }
                let (kept, cut) = truncate_on_char_boundary(&output.text, MAX_MCP_TEXT_BYTES);
                Ok(format!(
                    "Results for {query:?} ({}):\n{kept}{}",
                    self.label(),
                    if cut { "\n[cut]" } else { "" }
                ))
            }
        }
    }

    /// One search at an HTTP backend (SearXNG, Brave).
    async fn search_http(&self, query: &str, count: usize) -> Result<Vec<SearchResult>, ToolError> {
        match &self.backend {
            Backend::Searxng { url } => {
                let mut endpoint = url.clone();
                endpoint
                    .path_segments_mut()
                    .map_err(|()| ToolError::Failed("the SearXNG URL cannot take a path".into()))?
                    .pop_if_empty()
                    .push("search");
                endpoint
                    .query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("format", "json");
                let body = self.get(self.client.get(endpoint), "SearXNG").await?;
                parse_searxng(&body)
            }
            Backend::Brave { url, key, key_env } => {
                let Some(key) = key else {
                    return Err(ToolError::Failed(format!(
                        "web search is not ready: the Brave Search token variable {key_env} is not set in the daemon's environment"
                    )));
                };
                let mut endpoint = url.clone();
                endpoint
                    .path_segments_mut()
                    .map_err(|()| ToolError::Failed("the Brave URL cannot take a path".into()))?
                    .pop_if_empty()
                    .extend(["res", "v1", "web", "search"]);
                endpoint
                    .query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("count", &count.to_string());
                let request = self
                    .client
                    .get(endpoint)
                    .header(ACCEPT, "application/json")
                    .header("X-Subscription-Token", key.expose());
                let body = self.get(request, "Brave Search").await?;
                parse_brave(&body)
            }
            Backend::Mcp { .. } => Ok(Vec::new()),
        }
    }

    /// Sends a request and reads a successful answer's body, turning every failure into a
    /// sentence naming the backend (never its key; the URL is the operator's and stays out too).
    async fn get(
        &self,
        request: reqwest::RequestBuilder,
        backend: &str,
    ) -> Result<Vec<u8>, ToolError> {
        let response = request.send().await.map_err(|error| {
            if error.is_timeout() {
                no_answer(backend, self.timeout)
            } else {
                ToolError::Failed(format!(
                    "cannot reach {backend}: {}",
                    redact(&error.without_url().to_string())
                ))
            }
        })?;
        let status = response.status();
        if !status.is_success() {
            return Err(ToolError::Failed(status_message(
                backend,
                status,
                response.headers().get(RETRY_AFTER),
            )));
        }
        let mut body = Vec::new();
        let mut response = response;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > MAX_BODY_BYTES {
                        return Err(ToolError::Failed(format!(
                            "{backend} answered more than {} MB; refusing to read it",
                            MAX_BODY_BYTES / 1024 / 1024
                        )));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(body),
                Err(error) if error.is_timeout() => return Err(no_answer(backend, self.timeout)),
                Err(error) => {
                    return Err(ToolError::Failed(format!(
                        "{backend}'s answer broke off: {}",
                        redact(&error.without_url().to_string())
                    )));
                }
            }
        }
    }
}

fn no_answer(backend: &str, timeout: Duration) -> ToolError {
    ToolError::Failed(format!(
        "{backend} did not answer within {} s; try again later or with a simpler query",
        timeout.as_secs()
    ))
}

fn status_message(
    backend: &str,
    status: StatusCode,
    retry_after: Option<&reqwest::header::HeaderValue>,
) -> String {
    match status {
        StatusCode::TOO_MANY_REQUESTS => {
            let wait = retry_after
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.trim().parse::<u64>().ok())
                .map_or("a minute".to_string(), |secs| format!("{secs} s"));
            format!(
                "{backend} is rate limiting searches (HTTP 429): wait {wait} before searching again"
            )
        }
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN if backend == "SearXNG" => format!(
            "SearXNG refused the search (HTTP {}): its JSON API must be enabled (`formats: [html, json]` under `search` in its settings.yml)",
            status.as_u16()
        ),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => format!(
            "{backend} refused the subscription token (HTTP {}): check the token in the daemon's environment",
            status.as_u16()
        ),
        status => format!(
            "{backend} answered HTTP {}; try again later",
            status.as_u16()
        ),
    }
}

#[derive(Deserialize)]
struct SearxngAnswer {
    #[serde(default)]
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    content: String,
}

/// Reads SearXNG's `/search?format=json` answer.
pub fn parse_searxng(body: &[u8]) -> Result<Vec<SearchResult>, ToolError> {
    let answer: SearxngAnswer = serde_json::from_slice(body).map_err(|error| {
        ToolError::Failed(format!(
            "SearXNG's answer is not its JSON format ({error}); is `url` the SearXNG instance?"
        ))
    })?;
    Ok(answer
        .results
        .into_iter()
        .map(|result| SearchResult {
            title: result.title,
            url: result.url,
            snippet: result.content,
        })
        .collect())
}

#[derive(Deserialize)]
struct BraveAnswer {
    #[serde(default)]
    web: Option<BraveWeb>,
}

#[derive(Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<BraveResult>,
}

#[derive(Deserialize)]
struct BraveResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    description: String,
}

/// Reads the Brave Search API's `/res/v1/web/search` answer.
pub fn parse_brave(body: &[u8]) -> Result<Vec<SearchResult>, ToolError> {
    let answer: BraveAnswer = serde_json::from_slice(body).map_err(|error| {
        ToolError::Failed(format!(
            "Brave Search's answer is not its JSON format ({error})"
        ))
    })?;
    Ok(answer
        .web
        .map(|web| web.results)
        .unwrap_or_default()
        .into_iter()
        .map(|result| SearchResult {
            title: result.title,
            url: result.url,
            snippet: result.description,
        })
        .collect())
}

/// One line of plain text: markup removed, whitespace collapsed, cut to `max` bytes.
fn plain(text: &str, max: usize) -> String {
    let text = if text.contains('<') {
        super::web_fetch::html_to_text(text)
    } else {
        text.to_string()
    };
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (kept, cut) = truncate_on_char_boundary(&collapsed, max);
    if cut {
        format!("{kept}…")
    } else {
        kept.to_string()
    }
}

/// The results the model gets: numbered, each its title, URL and snippet; results without an
/// http(s) URL are left out.
pub fn render(query: &str, backend: &str, results: &[SearchResult], count: usize) -> String {
    let usable: Vec<&SearchResult> = results
        .iter()
        .filter(|result| {
            reqwest::Url::parse(result.url.trim())
                .is_ok_and(|url| matches!(url.scheme(), "http" | "https"))
        })
        .take(count)
        .collect();
    if usable.is_empty() {
        return format!("No results for {query:?} ({backend}).");
    }
    let mut text = format!(
        "Results for {query:?} ({backend}, {} shown). Open one with web_fetch for details.\n",
        usable.len()
    );
    for (index, result) in usable.iter().enumerate() {
        let title = plain(&result.title, MAX_TITLE_BYTES);
        text.push_str(&format!(
            "\n{}. {}\n   {}\n",
            index + 1,
            if title.is_empty() {
                "(untitled)"
            } else {
                &title
            },
            result.url.trim()
        ));
        let snippet = plain(&result.snippet, MAX_SNIPPET_BYTES);
        if !snippet.is_empty() {
            text.push_str(&format!("   {snippet}\n"));
        }
    }
    text
}

fn query_argument(args: &Value) -> Option<&str> {
    args.get("query").and_then(Value::as_str)
}

impl Tool for WebSearchTool {
    fn name(&self) -> &str {
        "web_search"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_search".to_string(),
            description: format!(
                "Search the web ({}) and get the top results: title, URL and a snippet each. Use it \
                 for current facts (news, opening hours, prices); open a result with web_fetch to \
                 read it.",
                self.label()
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "What to search for, as you would type it into a search engine."
                    },
                    "count": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.max_results,
                        "description": format!("How many results (default and most: {}).", self.max_results)
                    }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        let egress = Assessment::new(
            RiskLevel::L1,
            format!(
                "network egress: the query goes to {} (the query itself carries data out)",
                self.label()
            ),
        );
        match &self.backend {
            Backend::Mcp { trust, .. } => {
                let hints = McpToolHints {
                    read_only: Some(true),
                    ..McpToolHints::default()
                };
                let server = crate::policy::mcp::classify_mcp(*trust, &hints);
                if server.level > egress.level {
                    server
                } else {
                    egress
                }
            }
            _ => egress,
        }
    }

    fn describe_call(&self, args: &Value) -> String {
        match query_argument(args) {
            Some(query) => format!("web_search: {:?} ({})", redact(query), self.label()),
            None => "web_search: (invalid arguments)".to_string(),
        }
    }

    fn target(&self, args: &Value) -> String {
        query_argument(args)
            .unwrap_or_default()
            .trim()
            .to_lowercase()
    }

    fn timeout(&self) -> Duration {
        self.timeout + DISPATCHER_GRACE
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("web_search", &args, FIELDS)?;
            let query = parsed.required_str("query")?.trim();
            if query.is_empty() {
                return Err(ToolError::InvalidArguments(
                    "web_search: `query` is empty".into(),
                ));
            }
            if query.chars().count() > MAX_QUERY_CHARS {
                return Err(ToolError::InvalidArguments(format!(
                    "web_search: `query` is longer than {MAX_QUERY_CHARS} characters; shorten it"
                )));
            }
            let count = match parsed.optional_u64("count")? {
                None => self.max_results,
                Some(count) if (1..=self.max_results as u64).contains(&count) => count as usize,
                Some(count) => {
                    return Err(ToolError::InvalidArguments(format!(
                        "web_search: `count` must be 1 to {}, got {count}",
                        self.max_results
                    )));
                }
            };
            tokio::select! {
                result = self.search(query, count, ctx) => result.map(ToolOutput::ok),
                () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_plain_numbered_and_bounded() {
        let results = vec![
            SearchResult {
                title: "<b>Bakery</b> hours".into(),
                url: "https://bakery.example/hours".into(),
                snippet: "Open <strong>7–18</strong>\n daily".into(),
            },
            SearchResult {
                title: "no link".into(),
                url: "javascript:alert(1)".into(),
                snippet: String::new(),
            },
            SearchResult {
                title: "x".repeat(1000),
                url: "http://b.example/".into(),
                snippet: String::new(),
            },
        ];
        let text = render("bakery hours", "SearXNG", &results, 5);
        assert!(
            text.contains("1. Bakery hours\n   https://bakery.example/hours\n   Open 7–18 daily"),
            "{text}"
        );
        assert!(!text.contains("javascript:"), "{text}");
        assert!(text.contains("2. xxx"), "{text}");
        assert!(text.len() < 1000, "{}", text.len());
        assert!(render("q", "SearXNG", &results[1..2], 5).starts_with("No results"));
        assert_eq!(
            render("q", "SearXNG", &results, 1).matches("\n1. ").count(),
            1
        );
    }

    #[test]
    fn answers_that_are_not_the_backends_format_are_named() {
        let error = parse_searxng(b"<html>nginx</html>")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not its JSON format"), "{error}");
        let error = parse_brave(b"{\"web\": 5}").unwrap_err().to_string();
        assert!(error.contains("Brave Search's answer"), "{error}");
        assert!(parse_brave(b"{\"type\":\"search\"}").unwrap().is_empty());
    }

    #[test]
    fn status_errors_say_what_to_do() {
        let limited = status_message(
            "Brave Search",
            StatusCode::TOO_MANY_REQUESTS,
            Some(&reqwest::header::HeaderValue::from_static("7")),
        );
        assert!(limited.contains("wait 7 s"), "{limited}");
        let json_off = status_message("SearXNG", StatusCode::FORBIDDEN, None);
        assert!(json_off.contains("settings.yml"), "{json_off}");
    }
}

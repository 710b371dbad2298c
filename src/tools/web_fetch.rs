//! `web_fetch`: GET one http(s) URL and return its status, content type and readable text.
//!
//! Server-side request forgery is the danger: a model (or a page it read) asking the daemon to
//! fetch `http://169.254.169.254/` (cloud credentials), a router's admin page, or Studio on
//! loopback. Unless `settings.web_fetch_allow_private`:
//!
//! - only `http` and `https` URLs are fetched;
//! - a literal IP host is checked before any connection ([`check_url`]);
//! - a host name is resolved by our own resolver ([`VettingResolver`]), which refuses the name if
//!   any of its addresses is not public, and hands reqwest only the addresses it checked. reqwest
//!   connects to exactly those, so there is no gap for DNS rebinding between check and connect;
//! - redirects are followed by hand (at most [`MAX_REDIRECTS`]), each target checked the same way;
//! - proxies from the environment are ignored (a proxy would resolve the name instead of us).
//!
//! The body is streamed and reading stops at `settings.web_fetch_max_bytes`; the whole call is
//! bounded by `settings.web_fetch_timeout`. No content decoding (gzip etc.) is requested, so a
//! small compressed body cannot expand into a huge one.
//!
//! Risk: L1 (run and notify). The fetch itself changes nothing (`ReadOnly`), but the URL is data
//! leaving the machine: a model could put what it read into a query string. That is worth a
//! notification, not an approval for every page — until the run has read private data (a
//! workspace file, memory, a tool's output, an inbound file). From then on a URL carrying text
//! that the user did not write and no fetched public page showed is L2: it asks first, and the
//! prompt shows the URL decoded (`tool::egress`, the lethal-trifecta rule). Hosts in the agent's
//! `web_fetch_allow` stay L1 always; following a link the user or a fetched page gave stays L1. A URL carrying one of the daemon's secrets (raw
//! or encoded, in any part, redirect targets included) is refused outright: the dispatcher already
//! refuses such calls for every tool, and this check keeps `web_fetch` safe on its own.

use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{CONTENT_TYPE, HeaderValue, LOCATION};
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, RiskLevel};
use crate::secrets::redact;
use crate::tool::egress::{decoded_url, host_allowed};
use crate::tool::{
    Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, ToolSettings,
    truncate_on_char_boundary,
};

mod html_text;

pub use html_text::html_to_text;

pub use crate::tool::address::{
    AddressPolicy, FetchRefusal, MAX_REDIRECTS, check_destination, check_url, non_public_kind,
    parse_and_check_url, resolve_checked,
};
/// No call runs longer than this, whatever `settings.web_fetch_timeout` says.
pub const WEB_FETCH_TIMEOUT_CEILING: Duration = Duration::from_secs(5 * 60);
/// The dispatcher's bound exceeds the ceiling by this much, so the call's own timeout fires first.
const DISPATCHER_GRACE: Duration = Duration::from_secs(10);
/// Most text returned to the model, after HTML is reduced (the body limit is in the settings).
pub const MAX_RETURNED_TEXT_BYTES: usize = 100 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("clawvisor/", env!("CARGO_PKG_VERSION"), " (web_fetch)");

/// The resolver reqwest uses: resolves with the system resolver, refuses the name when any of its
/// addresses is not public (unless allowed), and returns only checked addresses, which are the
/// ones reqwest then connects to.
#[derive(Debug, Clone, Copy)]
pub struct VettingResolver {
    policy: AddressPolicy,
}

impl Resolve for VettingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let policy = self.policy;
        Box::pin(async move {
            let addresses = resolve_checked(&host, policy).await?;
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

/// `web_fetch`. Holds one HTTP client per address policy (connection pools are reused across
/// calls; a pooled connection went to an address that was checked when it was opened).
pub struct WebFetchTool {
    public_only_client: OnceCell<reqwest::Client>,
    allow_private_client: OnceCell<reqwest::Client>,
}

impl Default for WebFetchTool {
    fn default() -> Self {
        Self::new()
    }
}

impl WebFetchTool {
    pub fn new() -> WebFetchTool {
        WebFetchTool {
            public_only_client: OnceCell::new(),
            allow_private_client: OnceCell::new(),
        }
    }

    async fn client(&self, policy: AddressPolicy) -> Result<&reqwest::Client, ToolError> {
        let cell = match policy {
            AddressPolicy::PublicOnly => &self.public_only_client,
            AddressPolicy::AllowPrivate => &self.allow_private_client,
        };
        cell.get_or_try_init(|| async move {
            reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .referer(false)
                .dns_resolver(Arc::new(VettingResolver { policy }))
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(USER_AGENT)
                .build()
                .map_err(|error| {
                    ToolError::Failed(format!("could not set up the HTTP client: {error}"))
                })
        })
        .await
    }

    /// GETs `url` (following checked redirects), reads its body up to the limit and returns a
    /// summary of the response with its text.
    async fn fetch(&self, url: Url, settings: &ToolSettings) -> Result<ToolOutput, ToolError> {
        let policy = AddressPolicy::from_settings(settings);
        let client = self.client(policy).await?;
        let original = url.clone();
        let reached = follow_redirects(client, url, policy).await?;
        let status = reached.response.status();
        let content_type = content_type_of(&reached.response);
        let max_bytes = usize::try_from(settings.web_fetch_max_bytes).unwrap_or(usize::MAX);
        let body = read_body(reached.response, &reached.url, max_bytes).await?;
        let summary = ResponseSummary {
            original: &original,
            url: &reached.url,
            redirects: reached.redirects,
            status,
            content_type: &content_type,
            body_cut_at: body.truncated.then_some(max_bytes),
        };
        let lines = summary.lines();
        let text = reduce_to_text(content_type, body.bytes).await?;
        Ok(tool_output(lines, &text, status))
    }
}

/// The response that ended a chain of redirects, the URL it came from and how many redirects
/// led there.
struct Reached {
    response: reqwest::Response,
    url: Url,
    redirects: usize,
}

/// Sends the GET for `url` and follows redirects by hand (at most [`MAX_REDIRECTS`]), checking
/// every target with [`check_url`] before it is requested.
async fn follow_redirects(
    client: &reqwest::Client,
    url: Url,
    policy: AddressPolicy,
) -> Result<Reached, ToolError> {
    let mut url = url;
    let mut redirects = 0;
    loop {
        let response = send_get(client, &url).await?;
        let Some(location) = redirect_location(&response) else {
            return Ok(Reached {
                response,
                url,
                redirects,
            });
        };
        let next = redirect_target(&url, location)?;
        redirects += 1;
        if redirects > MAX_REDIRECTS {
            return Err(ToolError::Refused(
                FetchRefusal::TooManyRedirects {
                    url: shown_url(&next),
                }
                .to_string(),
            ));
        }
        check_url(&next, policy).map_err(|refusal| {
            ToolError::Refused(format!(
                "{} redirected to {}: {refusal}",
                shown_url(&url),
                shown_url(&next)
            ))
        })?;
        url = next;
    }
}

/// Sends one GET for `url`, asking for text first.
async fn send_get(client: &reqwest::Client, url: &Url) -> Result<reqwest::Response, ToolError> {
    client
        .get(url.clone())
        .header(
            reqwest::header::ACCEPT,
            "text/html,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5",
        )
        .send()
        .await
        .map_err(|error| request_error(error, url))
}

/// The `Location` header of a redirect response; `None` when the response is not a redirect
/// (or a redirect without a target), so it is the answer.
fn redirect_location(response: &reqwest::Response) -> Option<&HeaderValue> {
    response
        .status()
        .is_redirection()
        .then(|| response.headers().get(LOCATION))
        .flatten()
}

/// The absolute URL a redirect from `url` points to.
fn redirect_target(url: &Url, location: &HeaderValue) -> Result<Url, ToolError> {
    let location = location.to_str().map_err(|_| {
        ToolError::Failed(format!(
            "{} redirected with a Location header that is not text",
            shown_url(url)
        ))
    })?;
    url.join(location).map_err(|error| {
        ToolError::Failed(format!(
            "{} redirected to an invalid URL ({error})",
            shown_url(url)
        ))
    })
}

/// The response's `Content-Type` header as text (empty when missing or not text).
fn content_type_of(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// A response body, read up to a limit.
struct Body {
    bytes: Vec<u8>,
    /// The body went on past the limit and was cut there.
    truncated: bool,
}

/// Streams the body of `response`, stopping at `max_bytes`.
async fn read_body(
    mut response: reqwest::Response,
    url: &Url,
    max_bytes: usize,
) -> Result<Body, ToolError> {
    let mut bytes = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| request_error(error, url))?
    {
        let room = max_bytes - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            truncated = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    // Dropping the response here closes the connection if the body was cut short.
    drop(response);
    Ok(Body { bytes, truncated })
}

/// What the output says about the response before its text.
struct ResponseSummary<'a> {
    original: &'a Url,
    url: &'a Url,
    redirects: usize,
    status: StatusCode,
    content_type: &'a str,
    /// The limit the body was cut at, when it was.
    body_cut_at: Option<usize>,
}

impl ResponseSummary<'_> {
    /// The summary's lines: the URL, where it was redirected from, the status, the content type
    /// and whether the body was cut.
    fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!("URL: {}", shown_url(self.url))];
        if self.url != self.original {
            lines.push(format!(
                "Redirected from: {} ({} redirect{})",
                shown_url(self.original),
                self.redirects,
                if self.redirects == 1 { "" } else { "s" }
            ));
        }
        lines.push(format!("Status: {}", self.status));
        lines.push(format!(
            "Content-Type: {}",
            if self.content_type.is_empty() {
                "(none)"
            } else {
                self.content_type
            }
        ));
        if let Some(max_bytes) = self.body_cut_at {
            lines.push(format!(
                "[the body was cut at {max_bytes} bytes (web_fetch_max_bytes)]"
            ));
        }
        lines
    }
}

/// The body as text for the model ([`body_text`]), computed on the blocking pool.
async fn reduce_to_text(content_type: String, body: Vec<u8>) -> Result<String, ToolError> {
    // Reducing a large page takes milliseconds of CPU (about 1 ms per 100 KB): not on an
    // async worker.
    tokio::task::spawn_blocking(move || body_text(&content_type, &body))
        .await
        .map_err(|error| ToolError::Failed(format!("reducing the page to text failed: {error}")))
}

/// The tool's output: the summary lines, then the text (cut at [`MAX_RETURNED_TEXT_BYTES`]); an
/// error output when the server answered with a client or server error.
fn tool_output(lines: Vec<String>, text: &str, status: StatusCode) -> ToolOutput {
    let (kept, text_truncated) = truncate_on_char_boundary(text, MAX_RETURNED_TEXT_BYTES);
    let mut output = lines.join("\n");
    output.push_str("\n\n");
    output.push_str(kept);
    if text_truncated {
        output.push_str(&format!(
            "\n\n[text truncated: showing {} of {} bytes]",
            kept.len(),
            text.len()
        ));
    }
    if status.is_client_error() || status.is_server_error() {
        ToolOutput::error(output)
    } else {
        ToolOutput::ok(output)
    }
}

/// The body as text for the model: HTML reduced to readable text, other text as is (lossy UTF-8),
/// binary content summarized.
fn body_text(content_type: &str, body: &[u8]) -> String {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if body.is_empty() {
        return "(empty body)".to_string();
    }
    let sniff = &body[..body.len().min(1024)];
    let is_html = mime == "text/html" || mime == "application/xhtml+xml";
    let is_text = mime.starts_with("text/")
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || matches!(
            mime.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-yaml"
        )
        || (mime.is_empty() && !sniff.contains(&0));
    if is_html {
        html_to_text(&String::from_utf8_lossy(body))
    } else if is_text {
        String::from_utf8_lossy(body).into_owned()
    } else {
        format!(
            "(binary content, {}, {} bytes: not shown)",
            if mime.is_empty() {
                "unknown type"
            } else {
                &mime
            },
            body.len()
        )
    }
}

/// A URL for messages: secrets redacted.
fn shown_url(url: &Url) -> String {
    redact(url.as_str()).into_owned()
}

/// Turns a reqwest error into a tool error: our resolver's refusal stays a refusal; other errors
/// are described without the URL (it may hold a key) and redacted.
fn request_error(error: reqwest::Error, url: &Url) -> ToolError {
    if let Some(refusal) = find_refusal(&error) {
        return ToolError::Refused(refusal.to_string());
    }
    let error = error.without_url();
    let mut description = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(current) = source {
        description.push_str(": ");
        description.push_str(&current.to_string());
        source = current.source();
    }
    let host = url.host_str().unwrap_or("the server");
    ToolError::Failed(redact(&format!("could not fetch from {host}: {description}")).into_owned())
}

/// The risk of fetching a checked `url` in this run — the lethal-trifecta rule: a host in
/// `web_fetch_allow`, a run that has read no private data, or a URL made only of what the user
/// wrote or public pages showed is L1 (runs, the URL itself is data leaving: notified); a URL
/// carrying anything else after the run read private data is L2 (asks first).
pub(crate) fn egress_assessment(url: &Url, ctx: &ToolContext) -> Assessment {
    let host = url.host_str().unwrap_or("?");
    if host_allowed(url, &ctx.settings.web_fetch_allow) {
        return Assessment::new(
            RiskLevel::L1,
            format!(
                "network egress to {host}, a host this agent may always reach (web_fetch_allow)"
            ),
        );
    }
    let sources = ctx.egress.private_sources();
    let novel = if sources.is_empty() {
        Vec::new()
    } else {
        ctx.egress.novel_words(url)
    };
    if novel.is_empty() {
        return Assessment::new(
            RiskLevel::L1,
            format!("network egress to {host} (the URL itself carries data out)"),
        );
    }
    // The longest words first: they are the likeliest to be data rather than an address's parts.
    let mut longest_first = novel.clone();
    longest_first.sort_by_key(|word| std::cmp::Reverse(word.chars().count()));
    let shown: Vec<String> = longest_first
        .iter()
        .take(6)
        .map(|word| format!("\"{}\"", redact(word)))
        .collect();
    let more = if novel.len() > shown.len() {
        format!(" and {} more", novel.len() - shown.len())
    } else {
        String::new()
    };
    Assessment::new(
        RiskLevel::L2,
        format!(
            "this run has read private data ({}) and this address carries text that is not in \
             the user's messages or in pages fetched in this run ({}{more}), so it could send that \
             data to {host}; full address: {}",
            sources.join(", "),
            shown.join(", "),
            redact(&decoded_url(url)),
        ),
    )
}

/// Our resolver's refusal somewhere in the error chain (reqwest wraps it as the source of its
/// DNS error).
fn find_refusal(error: &reqwest::Error) -> Option<&FetchRefusal> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(refusal) = current.downcast_ref::<FetchRefusal>() {
            return Some(refusal);
        }
        source = current.source();
    }
    None
}

const WEB_FETCH_FIELDS: &[&str] = &["url"];

fn url_argument(args: &Value) -> Option<&str> {
    Args::parse("web_fetch", args, WEB_FETCH_FIELDS)
        .ok()
        .and_then(|parsed| parsed.optional_str("url").ok().flatten())
}

impl Tool for WebFetchTool {
    fn name(&self) -> &str {
        "web_fetch"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_fetch".to_string(),
            description: "Fetch a web page or document over http(s) with GET and return its \
                          status, content type and text (HTML is reduced to readable text). Long \
                          pages are truncated. Private and local network addresses are refused."
                .to_string(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {
                        "type": "string",
                        "description": "An absolute http:// or https:// URL."
                    }
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        let Some(text) = url_argument(args) else {
            return Assessment::new(RiskLevel::L1, "invalid arguments; the call will fail");
        };
        match parse_and_check_url(text, AddressPolicy::from_settings(&ctx.settings)) {
            Ok(url) => egress_assessment(&url, ctx),
            Err(refusal) => Assessment::new(RiskLevel::L3, refusal.to_string()),
        }
    }

    /// The URL as a person reads it (decoded, see `tool::egress::decoded_url`), and as sent when
    /// that differs.
    fn describe_call(&self, args: &Value) -> String {
        let Some(text) = url_argument(args) else {
            return "web_fetch: (invalid arguments)".to_string();
        };
        match Url::parse(text.trim()) {
            Ok(url) => {
                let decoded = decoded_url(&url);
                if decoded == url.as_str() {
                    format!("web_fetch: GET {}", redact(&decoded))
                } else {
                    format!(
                        "web_fetch: GET {} (as sent: {})",
                        redact(&decoded),
                        redact(url.as_str())
                    )
                }
            }
            Err(_) => format!("web_fetch: GET {}", redact(text)),
        }
    }

    /// The host (lowercase), so that a grant covers one site.
    fn target(&self, args: &Value) -> String {
        url_argument(args)
            .and_then(|text| Url::parse(text.trim()).ok())
            .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
            .unwrap_or_default()
    }

    fn timeout(&self) -> Duration {
        WEB_FETCH_TIMEOUT_CEILING + DISPATCHER_GRACE
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("web_fetch", &args, WEB_FETCH_FIELDS)?;
            let text = parsed.required_str("url")?;
            let policy = AddressPolicy::from_settings(&ctx.settings);
            let url = parse_and_check_url(text, policy).map_err(|refusal| match refusal {
                FetchRefusal::InvalidUrl { .. } => {
                    ToolError::InvalidArguments(format!("web_fetch: `url`: {refusal}"))
                }
                other => ToolError::Refused(other.to_string()),
            })?;
            let limit = ctx
                .settings
                .web_fetch_timeout
                .min(WEB_FETCH_TIMEOUT_CEILING);
            tokio::select! {
                fetched = tokio::time::timeout(limit, self.fetch(url, &ctx.settings)) => match fetched {
                    Ok(result) => result,
                    Err(_) => Err(ToolError::Timeout(limit)),
                },
                () = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
            }
        })
    }
}

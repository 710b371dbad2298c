//! `browser`: a real (headless Chromium) browser for the agent — pages that need JavaScript, a
//! login, a form. One call is one action: `open`, `snapshot`, `click`, `type`, `select`, `press`,
//! `scroll`, `back`, `wait_for`, `screenshot`, `pdf`, `tabs`, `close`, `login`. The browser runs
//! in the agent's browser actor (`protocol::browser`); this file is the tool's face: arguments,
//! risk, output.
//!
//! Risk, as a person would judge it (`assess`):
//! - `open` follows `web_fetch`'s rules: the URL is checked the same way (scheme, private
//!   addresses unless `web_fetch_allow_private` or a `[browser] allow_private` entry, a secret in
//!   it refused) and judged by the private-data egress rule (`tool::egress`): L1, or L2 once the
//!   run read private data and the URL carries text nobody gave it. What a page loads or follows
//!   by itself (redirects, links, frames, scripts) passes the same address rule in the browser's
//!   request guard (`browser::guard`).
//! - Reading (`snapshot`, `scroll`, `wait_for`, `tabs`, `back`, `close`, a screenshot sent to
//!   the chat) is L0; a file saved in the workspace (`pdf`, a kept `screenshot`) is L1.
//! - `type` (typing into a field), `press Enter` (may submit), `click` on a button that submits
//!   a form or whose words buy, pay, send or delete, and `login` are L2: the approval prompt says
//!   the page's host and title and the element's label, and a screenshot of the page is sent to
//!   the chat just before it (`approval_photo`). Approving a `login` "for a while" is the
//!   per-site login grant: a grant covers exactly that action, `login` to that site.
//! - Credentials never pass through the model: `login <site>` makes the browser fill the
//!   `[[browser.logins]]` entry itself; the password is a registered secret (redacted
//!   everywhere, a call carrying it refused) and the output never shows it.
//!
//! The risk of a `click` is judged from the last snapshot's description of that element (kept
//! per agent here): the browser refuses a reference the page has since replaced.
//!
//! Output: the page's text is untrusted content, labelled so (`browser::UNTRUSTED_NOTE`). A
//! browser tool output is private data for the egress rule (a page behind a login is).

mod output;

pub use output::{save_in_workspace, send_photo};

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use crate::browser::words::quote;
use crate::browser::{Action, PageInfo, RefInfo};
use crate::llm::ToolSpec;
use crate::policy::{Assessment, Effect, RiskLevel};
use crate::protocol::browser::Browser;
use crate::tool::address::allowed_private_entry;
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};
use crate::tools::web_fetch::{self, AddressPolicy, FetchRefusal};

/// The tool's name, as an agent file lists it.
pub const NAME: &str = "browser";

const FIELDS: &[&str] = &[
    "action",
    "url",
    "ref",
    "text",
    "value",
    "key",
    "direction",
    "submit",
    "timeout",
    "new_tab",
    "tab",
    "site",
    "send",
    "caption",
];

const ACTIONS: &[&str] = &[
    "open",
    "snapshot",
    "click",
    "type",
    "select",
    "press",
    "scroll",
    "back",
    "wait_for",
    "screenshot",
    "pdf",
    "tabs",
    "close",
    "login",
];

/// Words on a button or link that commit something (buy, send, delete): clicking asks first.
const COMMITTING_WORDS: &[&str] = &[
    "buy",
    "order",
    "pay",
    "checkout",
    "check out",
    "purchase",
    "subscribe",
    "confirm",
    "delete",
    "remove",
    "send",
    "submit",
    "sign up",
    "register",
    "book",
    "transfer",
    "donate",
    "publish",
    "post",
    "place",
    "unsubscribe",
    "cancel",
    "kaufen",
    "bestellen",
    "zahlen",
];

/// Longest wait a `wait_for` may ask for.
const MAX_WAIT: Duration = Duration::from_secs(60);

/// The page the agent's browser showed last, as the risk check reads it.
#[derive(Debug, Default, Clone)]
struct LastPage {
    page: PageInfo,
    refs: Vec<RefInfo>,
}

/// The `browser` tool of one agent (it remembers that agent's last page).
#[derive(Default)]
pub struct BrowserTool {
    last: Mutex<LastPage>,
}

impl BrowserTool {
    pub fn new() -> BrowserTool {
        BrowserTool::default()
    }

    fn last(&self) -> LastPage {
        self.last
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    fn remember(&self, page: &PageInfo, refs: Option<&Vec<RefInfo>>) {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if last.page.url != page.url {
            last.refs.clear();
        }
        last.page = page.clone();
        if let Some(refs) = refs {
            last.refs = refs.clone();
        }
    }
}

/// A call's arguments, checked.
pub(crate) fn parse_action(args: &Value) -> Result<Action, ToolError> {
    let parsed = Args::parse(NAME, args, FIELDS)?;
    let reference = |parsed: &Args<'_>| -> Result<u32, ToolError> {
        parsed
            .optional_u64("ref")?
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n > 0)
            .ok_or_else(|| ToolError::InvalidArguments("browser: `ref` is required: the number of an element in the last snapshot, like 3".into()))
    };
    let flag = |field: &str| args.get(field).and_then(Value::as_bool).unwrap_or(false);
    let action = match parsed.choice("action", ACTIONS, "snapshot")? {
        "open" => Action::Open {
            url: parsed.required_str("url")?.trim().to_string(),
            new_tab: flag("new_tab"),
        },
        "click" => Action::Click {
            reference: reference(&parsed)?,
        },
        "type" => Action::Type {
            reference: reference(&parsed)?,
            text: parsed.required_str("text")?.to_string(),
            submit: flag("submit"),
        },
        "select" => Action::Select {
            reference: reference(&parsed)?,
            value: parsed.required_str("value")?.to_string(),
        },
        "press" => Action::Press {
            key: parsed.required_str("key")?.to_string(),
        },
        "scroll" => Action::Scroll {
            down: parsed.choice("direction", &["down", "up"], "down")? == "down",
        },
        "back" => Action::Back,
        "wait_for" => {
            let text = parsed.optional_str("text")?.map(str::to_string);
            let reference = parsed
                .optional_u64("ref")?
                .and_then(|n| u32::try_from(n).ok());
            if text.is_none() && reference.is_none() {
                return Err(ToolError::InvalidArguments(
                    "browser: wait_for needs `text` (words to wait for) or `ref`".into(),
                ));
            }
            let seconds = parsed.optional_u64("timeout")?.unwrap_or(10);
            Action::WaitFor {
                text,
                reference,
                timeout: Duration::from_secs(seconds).min(MAX_WAIT),
            }
        }
        "screenshot" => Action::Screenshot,
        "pdf" => Action::Pdf,
        "tabs" => Action::Tabs {
            switch_to: parsed.optional_u64("tab")?.map(|n| n as usize),
        },
        "close" => Action::Close {
            tab: parsed.optional_u64("tab")?.map(|n| n as usize),
        },
        "login" => Action::Login {
            site: parsed.required_str("site")?.trim().to_string(),
        },
        _ => Action::Snapshot,
    };
    Ok(action)
}

/// `open`'s URL checked as `web_fetch` checks one; a private host named by `[browser]
/// allow_private` passes (the browser's request guard lets it through the same way).
fn open_check(url: &str, ctx: &ToolContext) -> Result<url::Url, FetchRefusal> {
    let named = url::Url::parse(url.trim())
        .is_ok_and(|parsed| allowed_private_entry(&parsed, &ctx.settings.browser_allow_private));
    let policy = if named {
        AddressPolicy::AllowPrivate
    } else {
        AddressPolicy::from_settings(&ctx.settings)
    };
    web_fetch::parse_and_check_url(url, policy)
}

/// Whether `label` reads like a button that commits something.
fn commits(label: &str) -> bool {
    let label = label.to_lowercase();
    COMMITTING_WORDS.iter().any(|word| {
        label
            .split(|c: char| !c.is_alphanumeric() && c != ' ')
            .any(|part| part.trim() == *word || part.trim().starts_with(&format!("{word} ")))
            || label == *word
    })
}

/// "on example.com (Shop)": where the action happens, as a person reads it.
fn on_page(page: &PageInfo) -> String {
    let host = page.host();
    let host = if host.is_empty() {
        "the current page".to_string()
    } else {
        host
    };
    if page.title.trim().is_empty() {
        format!("on {host}")
    } else {
        format!("on {host} (page {})", quote(&page.title))
    }
}

impl BrowserTool {
    fn assess_action(&self, action: &Action, ctx: &ToolContext) -> Assessment {
        let last = self.last();
        let element = |reference: u32| last.refs.iter().find(|info| info.n == reference).cloned();
        match action {
            Action::Open { url, .. } => match open_check(url, ctx) {
                Ok(url) => web_fetch::egress_assessment(&url, ctx),
                Err(refusal) => Assessment::new(RiskLevel::L3, refusal.to_string()),
            },
            Action::Type { reference, .. } => {
                let what = match element(*reference) {
                    Some(info) if info.password => "entering a password".to_string(),
                    Some(info) => format!("typing into the field \"{}\"", info.label),
                    None => format!("typing into element [{reference}]"),
                };
                Assessment::new(RiskLevel::L2, format!("{what} {}", on_page(&last.page)))
            }
            Action::Click { reference } => match element(*reference) {
                Some(info)
                    if info.submits
                        || (info.role == "button" && commits(&info.label))
                        || (info.role == "link" && commits(&info.label)) =>
                {
                    let kind = if info.submits {
                        "a button that submits a form"
                    } else {
                        "a button that may buy, send or delete"
                    };
                    Assessment::new(
                        RiskLevel::L2,
                        format!(
                            "clicking \"{}\" ({kind}) {}",
                            info.label,
                            on_page(&last.page)
                        ),
                    )
                }
                Some(info) => Assessment::new(
                    RiskLevel::L1,
                    format!(
                        "clicking the {} \"{}\" {}",
                        info.role,
                        info.label,
                        on_page(&last.page)
                    ),
                ),
                None => Assessment::new(
                    RiskLevel::L1,
                    format!(
                        "element [{reference}] is not in the last snapshot; the call will fail"
                    ),
                ),
            },
            Action::Press { key } if key.trim().eq_ignore_ascii_case("enter") => Assessment::new(
                RiskLevel::L2,
                format!(
                    "pressing Enter, which may submit a form, {}",
                    on_page(&last.page)
                ),
            ),
            Action::Press { .. } | Action::Select { .. } => Assessment::new(
                RiskLevel::L1,
                format!("changing the page {}", on_page(&last.page)),
            ),
            Action::Login { site } => Assessment::new(
                RiskLevel::L2,
                format!(
                    "logging in to {site} with its stored password {}",
                    on_page(&last.page)
                ),
            ),
            Action::Pdf => {
                Assessment::new(RiskLevel::L1, "saves the page as a PDF in the workspace")
            }
            Action::Screenshot => Assessment::new(
                RiskLevel::L1,
                "saves a screenshot (in the workspace, or sent to this chat)",
            ),
            _ => Assessment::new(
                RiskLevel::L0,
                "reads the page already open in the agent's browser",
            ),
        }
    }
}

impl Tool for BrowserTool {
    fn name(&self) -> &str {
        NAME
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.to_string(),
            description: "Use a real web browser (for pages that need JavaScript, a login or a form). \
                One action per call. `open` a URL, then read the `snapshot`: the page as text where \
                links, buttons and fields have numbers like [3]; act on them with `click`, `type` \
                (`submit: true` presses Enter after), `select`, `press` (Enter, Tab, Escape, ...), \
                `scroll`, `back`, `wait_for` (text to appear). `screenshot` (`send: true` sends it to \
                this chat as a photo, else it is saved in the workspace), `pdf` saves the page, \
                `tabs` lists (and `tab` switches), `close` closes a tab. `login` with a `site` fills \
                the stored user name and password into the page's login form (you never see them). \
                Downloads are saved in inbox/. Typing, submitting, buying and logging in ask the user first.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ACTIONS},
                    "url": {"type": "string", "description": "open: an absolute http(s) URL"},
                    "ref": {"type": "integer", "description": "click, type, select, wait_for: an element's number from the last snapshot"},
                    "text": {"type": "string", "description": "type: the text to type; wait_for: words to wait for"},
                    "submit": {"type": "boolean", "description": "type: press Enter after typing"},
                    "value": {"type": "string", "description": "select: the option's label or value"},
                    "key": {"type": "string", "description": "press: Enter, Tab, Escape, Backspace, Space, ArrowDown, PageDown, ..."},
                    "direction": {"type": "string", "enum": ["down", "up"]},
                    "timeout": {"type": "integer", "description": "wait_for: seconds (default 10, at most 60)"},
                    "new_tab": {"type": "boolean", "description": "open: in a new tab"},
                    "tab": {"type": "integer", "description": "tabs: switch to this tab; close: close this tab (numbers from tabs)"},
                    "site": {"type": "string", "description": "login: the site, like example.com"},
                    "send": {"type": "boolean", "description": "screenshot: send it to this chat as a photo"},
                    "caption": {"type": "string", "description": "screenshot with send: the photo's caption"}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::Write
    }

    /// Reading, following a link and moving around a page change nothing outside the browser
    /// (read-only); typing, logging in, a click or key the risk check rates L2 and saving a file
    /// are writes.
    fn effect_for(&self, args: &Value, ctx: &ToolContext) -> Effect {
        let Ok(action) = parse_action(args) else {
            return Effect::Write;
        };
        match action {
            Action::Type { .. } | Action::Login { .. } | Action::Pdf => Effect::Write,
            Action::Screenshot if !args.get("send").and_then(Value::as_bool).unwrap_or(false) => {
                Effect::Write
            }
            Action::Click { .. } | Action::Press { .. } | Action::Select { .. }
                if self.assess_action(&action, ctx).level >= RiskLevel::L2 =>
            {
                Effect::Write
            }
            _ => Effect::ReadOnly,
        }
    }

    fn assess(&self, args: &Value, ctx: &ToolContext) -> Assessment {
        match parse_action(args) {
            Ok(action) => self.assess_action(&action, ctx),
            Err(_) => Assessment::new(RiskLevel::L1, "invalid arguments; the call will fail"),
        }
    }

    fn may_write_workspace(&self, args: &Value, _effect: Effect, _assessment: &Assessment) -> bool {
        match parse_action(args) {
            Ok(Action::Pdf) => true,
            Ok(Action::Screenshot) => !args.get("send").and_then(Value::as_bool).unwrap_or(false),
            _ => false,
        }
    }

    fn describe_call(&self, args: &Value) -> String {
        let Ok(action) = parse_action(args) else {
            return "browser: (invalid arguments)".into();
        };
        let last = self.last();
        let label = |reference: &u32| {
            last.refs
                .iter()
                .find(|info| info.n == *reference)
                .map(|info| format!("[{reference}] {}", quote(&info.label)))
                .unwrap_or_else(|| format!("[{reference}]"))
        };
        let place = on_page(&last.page);
        // The wording `browser::words::plain_activity` reads back for the approval's first line.
        let described = match &action {
            Action::Open { url, .. } => format!("open {}", crate::secrets::redact(url)),
            Action::Click { reference } => format!("click {} {place}", label(reference)),
            Action::Type {
                reference,
                text,
                submit,
            } => format!(
                "type {} into {} {place}{}",
                quote(&crate::secrets::redact(text)),
                label(reference),
                if *submit { ", then press Enter" } else { "" }
            ),
            Action::Select { reference, value } => {
                format!("select {} in {} {place}", quote(value), label(reference))
            }
            Action::Press { key } => format!("press {} {place}", quote(key)),
            Action::Login { site } => {
                format!(
                    "log in to {} with the stored user name and password {place}",
                    quote(site)
                )
            }
            other => format!("{} {place}", other.name()),
        };
        format!("browser: {described}")
    }

    /// The site, so that a grant names where it applies.
    fn target(&self, args: &Value) -> String {
        match parse_action(args) {
            Ok(Action::Open { url, .. }) => crate::config::site_host(&url),
            Ok(Action::Login { site }) => crate::config::site_host(&site),
            _ => self.last().page.host(),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(300)
    }

    /// A screenshot of the page the action is on, sent to the chat with what is asked and kept
    /// with the approval request (Studio's approvals page shows it).
    fn show_before_approval<'a>(
        &'a self,
        args: &'a Value,
        ctx: &'a ToolContext,
    ) -> crate::tool::ShowFuture<'a> {
        Box::pin(async move {
            let png = Browser::new(&ctx.registry, &ctx.agent).screenshot().await?;
            let caption = format!(
                "The page of the next approval request — {}",
                self.describe_call(args)
            );
            if let Err(error) = output::send_photo(ctx, png.clone(), &caption).await {
                tracing::debug!(agent = %ctx.agent, %error, "the approval's screenshot was not sent");
            }
            Some(png)
        })
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let action = parse_action(&args)?;
            if let Action::Open { url, .. } = &action {
                open_check(url, ctx).map_err(|refusal| match refusal {
                    FetchRefusal::InvalidUrl { .. } => {
                        ToolError::InvalidArguments(format!("browser: `url`: {refusal}"))
                    }
                    other => ToolError::Refused(other.to_string()),
                })?;
            }
            let name = action.name();
            let before = self.last();
            let browser = Browser::new(&ctx.registry, &ctx.agent);
            let outcome = tokio::select! {
                outcome = browser.act(action.clone(), Duration::from_secs(280)) => outcome,
                () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            };
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(error) => return Ok(ToolOutput::error(format!("browser {name}: {error}"))),
            };
            self.remember(
                &outcome.page,
                outcome.snapshot.as_ref().map(|snapshot| &snapshot.refs),
            );
            output::finish(&action, &args, outcome, &before.page, ctx).await
        })
    }
}

//! What one run has read, for the lethal-trifecta rule on egress: once a run has read private
//! data (a workspace file, memory, any tool's or MCP server's output, an inbound file or photo),
//! a `web_fetch` whose URL carries text that is not in the user's messages or in public content
//! fetched in this run asks first. Following a link the model was given stays as it was.
//!
//! [`RunEgress`] is the run's ledger: created with the run's `ToolContext`, kept in memory,
//! dropped with the run (a resumed run rebuilds it from its stored conversation before anything
//! is dispatched). It holds whether the run has read private data (and from where), the words of
//! the public text (user messages, fetched pages, search results) and the links found in it.
//!
//! The judgement ([`RunEgress::novel_words`]) works on the decoded URL ([`decoded_url`]:
//! percent-decoding, punycode hosts in Unicode, user info and port included): a URL that appears
//! in the public text is known; otherwise every word (run of letters and digits, compared without
//! case) of it must appear as a word of the public text. A word made of private text, an encoding
//! of it (base64, hex) or a new combination of known words is novel. This bounds what the model
//! can send without a human's look; it is not a proof against a model that spells data out in
//! words taken from a page it fetched — that page is public content by the rule.
//!
//! Invariant: the ledger only grows within a run (nothing makes a run public again), and it is
//! never shared between runs.

use std::collections::HashSet;
use std::sync::Mutex;

use url::Url;

use crate::llm::{ChatMessage, Role};

/// Tools whose output is public content (what anyone could fetch), not private data.
pub const PUBLIC_OUTPUT_TOOLS: &[&str] = &["web_fetch", "web_search"];
/// The most private sources remembered to name in a prompt.
const MAX_SOURCES: usize = 4;

/// The egress ledger of one run. Cheap to share (`Arc`); every method takes `&self`.
#[derive(Debug, Default)]
pub struct RunEgress {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Where the run read private data (first few, deduplicated); empty: it has not.
    private_sources: Vec<String>,
    /// Lowercased words of the public text.
    known_words: HashSet<String>,
    /// Links found in the public text, without their fragment.
    known_urls: HashSet<String>,
    /// How many messages of the conversation were observed.
    observed: usize,
}

impl RunEgress {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a thread panicked holding it; the sets are still valid.
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Records that the run read private data from `source` ("read_file", "recalled memories").
    pub fn mark_private(&self, source: &str) {
        let mut state = self.state();
        if state.private_sources.len() < MAX_SOURCES
            && !state.private_sources.iter().any(|known| known == source)
        {
            state.private_sources.push(source.to_string());
        }
    }

    /// Where the run read private data; empty when it has not.
    pub fn private_sources(&self) -> Vec<String> {
        self.state().private_sources.clone()
    }

    /// Adds public text (a user's message, a fetched page): its words and its links.
    pub fn add_public(&self, text: &str) {
        let mut state = self.state();
        for link in links(text) {
            state.known_words.extend(words(&decoded_url(&link)));
            state.known_urls.insert(without_fragment(&link));
        }
        state.known_words.extend(words(text));
    }

    /// Takes in the messages of `conversation` not observed yet: user messages are public (an
    /// image in one is private), results of [`PUBLIC_OUTPUT_TOOLS`] are public, any other tool
    /// result is private. A recap (a summary of earlier turns) counts as private.
    pub fn observe(&self, conversation: &[ChatMessage], has_recap: bool) {
        if has_recap {
            self.mark_private("the summary of earlier messages");
        }
        let start = {
            let state = self.state();
            // A shorter conversation was reloaded (compaction): read it all again.
            if state.observed > conversation.len() {
                0
            } else {
                state.observed
            }
        };
        for message in &conversation[start..] {
            match message.role {
                Role::User => {
                    if !message.images.is_empty() {
                        self.mark_private("an image the user sent");
                    }
                    self.add_public(&message.content);
                }
                Role::Tool => {
                    let tool = message.name.as_deref().unwrap_or("a tool");
                    if PUBLIC_OUTPUT_TOOLS.contains(&tool) {
                        self.add_public(&message.content);
                    } else {
                        self.mark_private(tool);
                    }
                }
                Role::System | Role::Assistant => {}
            }
        }
        self.state().observed = conversation.len();
    }

    /// The words of `url` (decoded) that are not in the public text, in order, without repeats;
    /// empty when the URL itself was given or every word of it was.
    pub fn novel_words(&self, url: &Url) -> Vec<String> {
        let state = self.state();
        if state.known_urls.contains(&without_fragment(url)) {
            return Vec::new();
        }
        let decoded = decoded_url(url);
        let after_scheme = decoded
            .split_once("://")
            .map_or(decoded.as_str(), |(_, rest)| rest);
        let mut novel: Vec<String> = Vec::new();
        for word in words(after_scheme) {
            if !state.known_words.contains(&word) && !novel.contains(&word) {
                novel.push(word);
            }
        }
        novel
    }
}

/// The lowercased words (maximal runs of Unicode letters and digits) of `text`.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
}

/// The http(s) links written in `text`.
fn links(text: &str) -> Vec<Url> {
    let mut found = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(offset) = lower[from..].find("http") {
        let start = from + offset;
        let rest = &text[start..];
        let end = rest
            .find(|character: char| {
                character.is_whitespace() || "\"'<>()[]{}`|\\^".contains(character)
            })
            .unwrap_or(rest.len());
        let candidate = rest[..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
        if let Ok(url) = Url::parse(candidate)
            && matches!(url.scheme(), "http" | "https")
        {
            found.push(url);
        }
        from = start + 4;
    }
    found
}

fn without_fragment(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.as_str().to_string()
}

/// `url` as a person reads it: the host in Unicode (punycode decoded), user info, path, query and
/// fragment percent-decoded (`+` in the query as a space), control and direction-changing
/// characters shown as `\u{..}` escapes so the text cannot disguise itself.
pub fn decoded_url(url: &Url) -> String {
    let mut out = format!("{}://", url.scheme());
    let user = decode(url.username());
    if !user.is_empty() || url.password().is_some() {
        out.push_str(&user);
        if let Some(password) = url.password() {
            out.push(':');
            out.push_str(&decode(password));
        }
        out.push('@');
    }
    match url.host() {
        Some(url::Host::Domain(domain)) => out.push_str(&idna::domain_to_unicode(domain).0),
        Some(_) => out.push_str(url.host_str().unwrap_or_default()),
        None => {}
    }
    if let Some(port) = url.port() {
        out.push_str(&format!(":{port}"));
    }
    out.push_str(&decode(url.path()));
    if let Some(query) = url.query() {
        out.push('?');
        out.push_str(&decode(&query.replace('+', " ")));
    }
    if let Some(fragment) = url.fragment() {
        out.push('#');
        out.push_str(&decode(fragment));
    }
    shown_safely(&out)
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// Control characters, bidirectional overrides and invisible characters as `\u{..}` escapes.
fn shown_safely(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        let invisible = character.is_control()
            || matches!(character, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}');
        if invisible {
            out.push_str(&format!("\\u{{{:x}}}", character as u32));
        } else {
            out.push(character);
        }
    }
    out
}

/// Whether `url`'s host is one of `allowed`: an entry is a host name (`docs.rs`, any case, in
/// Unicode or punycode) matched exactly, or `*.example.com` for its subdomains.
pub fn host_allowed(url: &Url, allowed: &[String]) -> bool {
    let Some(host) = url.host_str().map(str::to_ascii_lowercase) else {
        return false;
    };
    let host = host.trim_matches(['[', ']']);
    allowed.iter().any(|entry| {
        let entry = entry.trim().to_lowercase();
        let (wildcard, name) = match entry.strip_prefix("*.") {
            Some(name) => (true, name),
            None => (false, entry.as_str()),
        };
        let ascii = idna::domain_to_ascii(name).unwrap_or_else(|_| name.to_string());
        let ascii = ascii.trim_matches(['[', ']']);
        if wildcard {
            host.strip_suffix(ascii)
                .is_some_and(|prefix| prefix.ends_with('.'))
        } else {
            host == ascii
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn a_url_is_shown_decoded() {
        assert_eq!(
            decoded_url(&url(
                "https://xn--bcher-kva.example/a%20b?q=caf%C3%A9+au+lait#x%2Fy"
            )),
            "https://bücher.example/a b?q=café au lait#x/y"
        );
        assert_eq!(
            decoded_url(&url("http://us%65r:p%40ss@127.0.0.1:8080/%E2%80%AEtxt")),
            "http://user:p@ss@127.0.0.1:8080/\\u{202e}txt"
        );
    }

    #[test]
    fn a_given_link_is_known_and_new_words_are_not() {
        let ledger = RunEgress::default();
        ledger.add_public("Please read https://docs.rs/serde/latest/serde/#derive, thanks.");
        assert!(
            ledger
                .novel_words(&url("https://docs.rs/serde/latest/serde/"))
                .is_empty()
        );
        assert!(
            ledger
                .novel_words(&url("https://docs.rs/serde/latest/serde/#other"))
                .is_empty()
        );
        assert!(ledger.novel_words(&url("https://docs.rs/serde")).is_empty());
        assert_eq!(
            ledger.novel_words(&url("https://docs.rs/serde?k=hunter2%20Secret")),
            vec!["k", "hunter2", "secret"]
        );
        assert_eq!(
            ledger.novel_words(&url("https://hunter2.docs.rs/")),
            vec!["hunter2"]
        );
    }

    #[test]
    fn tool_results_are_private_unless_public_tools_gave_them() {
        let ledger = RunEgress::default();
        let fetch = crate::llm::ToolCall {
            id: "1".into(),
            name: "web_fetch".into(),
            arguments: "{}".into(),
        };
        let read = crate::llm::ToolCall {
            name: "read_file".into(),
            ..fetch.clone()
        };
        let mut conversation = vec![
            ChatMessage::user("hi"),
            ChatMessage::tool_result(&fetch, "a page about kittens"),
        ];
        ledger.observe(&conversation, false);
        assert!(ledger.private_sources().is_empty());
        assert!(
            ledger
                .novel_words(&url("https://kittens.example/"))
                .contains(&"example".into())
        );
        conversation.push(ChatMessage::tool_result(&read, "the password is hunter2"));
        ledger.observe(&conversation, false);
        assert_eq!(ledger.private_sources(), vec!["read_file"]);
        assert_eq!(
            ledger.novel_words(&url("https://kittens.hunter2/")),
            vec!["hunter2"]
        );
    }

    #[test]
    fn allowed_hosts_match_exactly_or_by_wildcard() {
        let allowed = vec![
            "Docs.rs".to_string(),
            "*.example.com".into(),
            "bücher.example".into(),
        ];
        assert!(host_allowed(&url("https://docs.rs/x"), &allowed));
        assert!(!host_allowed(&url("https://evil.docs.rs/x"), &allowed));
        assert!(host_allowed(&url("https://a.example.com/"), &allowed));
        assert!(!host_allowed(&url("https://example.com/"), &allowed));
        assert!(!host_allowed(&url("https://badexample.com/"), &allowed));
        assert!(host_allowed(
            &url("https://xn--bcher-kva.example/"),
            &allowed
        ));
        let check = crate::config::check_web_fetch_host;
        assert!(check("docs.rs").is_ok() && check("*.example.com").is_ok());
        assert!(check("https://docs.rs/").is_err() && check("").is_err());
        assert!(check("docs.rs:443").is_err() && check("a b").is_err());
    }
}

//! Markdown (as models write it, parsed by pulldown-cmark) → Telegram's HTML subset.

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Link schemes Telegram opens; anything else is shown as plain text.
const ALLOWED_LINK_SCHEMES: &[&str] = &["http://", "https://", "tg://"];

/// Converts Markdown into Telegram HTML.
///
/// Bold (`**x**`, `__x__`), italic (`*x*`, `_x_`), strikethrough (`~~x~~`), inline code and
/// fenced code blocks (with the language as `<pre><code class="language-x">`), links to http,
/// https and tg URLs, and blockquotes become tags; headings become a bold line; list items keep
/// a `•` or `N.` marker as text; a single `~x~` stays literal; raw HTML in the Markdown is
/// shown as text.
pub fn markdown_to_html(markdown: &str) -> String {
    // Subscript is enabled only so that a single `~x~` is not read as strikethrough
    // ("~5 min to ~10 min"); it is rendered back as the literal tildes.
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_SUBSCRIPT;
    let mut renderer = Renderer::default();
    for event in Parser::new_ext(markdown, options) {
        renderer.event(event);
    }
    renderer.finish()
}

/// Escapes text for Telegram HTML: `&`, `<` and `>`.
pub fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    push_escaped(&mut escaped, text);
    escaped
}

fn push_escaped(out: &mut String, text: &str) {
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(character),
        }
    }
}

fn push_escaped_attribute(out: &mut String, text: &str) {
    for character in text.chars() {
        match character {
            '"' => out.push_str("&quot;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(character),
        }
    }
}

/// Maps pulldown-cmark events to Telegram HTML.
#[derive(Default)]
struct Renderer {
    out: String,
    /// For every open Markdown element, the text that closes it (often empty).
    closers: Vec<&'static str>,
    /// For every open list, the number of its next item (`None` for bullets).
    lists: Vec<Option<u64>>,
    /// Telegram refuses nested blockquotes, so only the outermost one becomes a tag.
    blockquote_depth: usize,
    /// Nothing visible was written since the last block started, so no separator is due.
    at_block_start: bool,
}

impl Renderer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                self.out.push_str("<code>");
                push_escaped(&mut self.out, &code);
                self.out.push_str("</code>");
                self.at_block_start = false;
            }
            // Raw HTML is not trusted as markup: it is shown as written.
            Event::Html(html) | Event::InlineHtml(html) => self.text(&html),
            // Not enabled in the options; shown as text if they ever appear.
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::FootnoteReference(label) => self.text(&format!("[^{label}]")),
            Event::SoftBreak | Event::HardBreak => {
                self.out.push('\n');
            }
            Event::Rule => {
                self.block_break();
                self.out.push_str("———");
                self.at_block_start = false;
            }
            Event::TaskListMarker(checked) => {
                self.out.push_str(if checked { "[x] " } else { "[ ] " });
            }
        }
    }

    fn text(&mut self, text: &str) {
        push_escaped(&mut self.out, text);
        if !text.is_empty() {
            self.at_block_start = false;
        }
    }

    /// Separates a new block from what came before: a blank line, or a line break inside lists.
    fn block_break(&mut self) {
        if self.out.is_empty() || self.at_block_start {
            return;
        }
        let separator = if self.lists.is_empty() { "\n\n" } else { "\n" };
        while self.out.ends_with(' ') {
            self.out.pop();
        }
        let existing = self.out.len() - self.out.trim_end_matches('\n').len();
        if existing < separator.len() {
            self.out.push_str(&separator[existing..]);
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let closer = match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.open_block("", ""),
            Tag::Heading { .. } => self.open_block("<b>", "</b>"),
            Tag::BlockQuote(_) => self.start_blockquote(),
            Tag::CodeBlock(kind) => self.start_code_block(kind),
            Tag::List(first_number) => self.start_list(first_number),
            Tag::Item => self.start_item(),
            Tag::Emphasis => self.open_inline("<i>", "</i>"),
            Tag::Strong => self.open_inline("<b>", "</b>"),
            Tag::Strikethrough => self.open_inline("<s>", "</s>"),
            Tag::Subscript => self.open_inline("~", "~"),
            Tag::Superscript => self.open_inline("^", "^"),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => self.start_link(&dest_url),
            // Not enabled in the options: their content is kept as text.
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Table(_)
            | Tag::TableHead
            | Tag::TableRow
            | Tag::TableCell
            | Tag::MetadataBlock(_) => {
                self.block_break();
                ""
            }
        };
        self.closers.push(closer);
    }

    /// Starts a block that opens with `opener`; returns the text that closes it.
    fn open_block(&mut self, opener: &str, closer: &'static str) -> &'static str {
        self.block_break();
        self.out.push_str(opener);
        self.at_block_start = true;
        closer
    }

    /// Opens an inline element with `opener`; returns the text that closes it.
    fn open_inline(&mut self, opener: &str, closer: &'static str) -> &'static str {
        self.out.push_str(opener);
        closer
    }

    /// Starts a blockquote; only the outermost one becomes a tag.
    fn start_blockquote(&mut self) -> &'static str {
        self.block_break();
        self.blockquote_depth += 1;
        self.at_block_start = true;
        if self.blockquote_depth == 1 {
            self.out.push_str("<blockquote>");
            "</blockquote>"
        } else {
            ""
        }
    }

    /// Starts a code block, with its language when the fence names a plain one.
    fn start_code_block(&mut self, kind: CodeBlockKind<'_>) -> &'static str {
        self.block_break();
        self.at_block_start = true;
        let language = match kind {
            CodeBlockKind::Fenced(info) => code_language(&info),
            CodeBlockKind::Indented => None,
        };
        match language {
            Some(language) => {
                self.out.push_str("<pre><code class=\"language-");
                self.out.push_str(&language);
                self.out.push_str("\">");
                "</code></pre>"
            }
            None => {
                self.out.push_str("<pre>");
                "</pre>"
            }
        }
    }

    /// Starts a list, numbered from `first_number` or bulleted (`None`).
    fn start_list(&mut self, first_number: Option<u64>) -> &'static str {
        self.block_break();
        self.lists.push(first_number);
        self.at_block_start = true;
        ""
    }

    /// Starts a list item on its own line, indented by the list's depth, with its `•` or `N.`
    /// marker.
    fn start_item(&mut self) -> &'static str {
        if !self.out.is_empty() && !self.out.ends_with('\n') && !self.at_block_start {
            self.out.push('\n');
        }
        let depth = self.lists.len().saturating_sub(1);
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        match self.lists.last_mut() {
            Some(Some(number)) => {
                self.out.push_str(&format!("{number}. "));
                *number += 1;
            }
            _ => self.out.push_str("• "),
        }
        self.at_block_start = true;
        ""
    }

    /// Opens a link (or an image, shown as a link) when Telegram can open its target; otherwise
    /// its text stays plain.
    fn start_link(&mut self, dest_url: &str) -> &'static str {
        if is_allowed_link(dest_url) {
            self.out.push_str("<a href=\"");
            push_escaped_attribute(&mut self.out, dest_url);
            self.out.push_str("\">");
            "</a>"
        } else {
            ""
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            // The fence's last line break is not part of the code.
            TagEnd::CodeBlock if self.out.ends_with('\n') => {
                self.out.pop();
            }
            TagEnd::BlockQuote(_) => {
                self.blockquote_depth = self.blockquote_depth.saturating_sub(1);
                while self.out.ends_with('\n') {
                    self.out.pop();
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            _ => {}
        }
        // pulldown-cmark pairs every end with its start, so the stack is never empty here;
        // an empty closer keeps the output balanced if it ever were.
        let closer = self.closers.pop().unwrap_or("");
        self.out.push_str(closer);
        if matches!(
            tag,
            TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::CodeBlock
                | TagEnd::BlockQuote(_)
                | TagEnd::HtmlBlock
                | TagEnd::List(_)
                | TagEnd::Item
        ) {
            self.at_block_start = false;
        }
    }

    fn finish(mut self) -> String {
        // Close anything left open; pulldown-cmark always ends what it starts, so this is a
        // safety net for the balance invariant rather than a path taken.
        while let Some(closer) = self.closers.pop() {
            self.out.push_str(closer);
        }
        let trimmed_len = self.out.trim_end().len();
        self.out.truncate(trimmed_len);
        self.out
    }
}

/// The language of a fenced code block's info string, kept only if it is a plain name.
fn code_language(info: &str) -> Option<String> {
    let word = info.split_whitespace().next()?;
    let word = word.split(',').next().unwrap_or(word);
    let plain = !word.is_empty()
        && word.len() <= 32
        && word
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || "+-#._".contains(character));
    plain.then(|| word.to_ascii_lowercase())
}

fn is_allowed_link(url: &str) -> bool {
    let lowercase = url.trim().to_ascii_lowercase();
    ALLOWED_LINK_SCHEMES
        .iter()
        .any(|scheme| lowercase.starts_with(scheme) && lowercase.len() > scheme.len())
}

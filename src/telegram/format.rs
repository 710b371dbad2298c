//! Turning a model's Markdown into Telegram HTML, and cutting it into messages Telegram accepts.
//!
//! Pure functions, no I/O:
//! - [`markdown_to_html`]: Markdown as LLMs write it → Telegram's `parse_mode=HTML` subset
//!   (`b`, `i`, `s`, `code`, `pre`, `a`, `blockquote`); everything else is escaped text.
//! - [`split_html`]: Telegram HTML → chunks whose *visible* text (tags removed, `&amp;` counted
//!   once) is at most `limit` UTF-16 code units, cut at a paragraph, else a line, else a sentence,
//!   else a word, else anywhere, each chunk valid on its own (tags open at a cut are closed at the
//!   end of the chunk and reopened at the start of the next).
//! - [`plain_text`]: the visible text, for the fallback when Telegram rejects the entities.
//!
//! Why pulldown-cmark instead of a hand-written converter: models write CommonMark with all its
//! corner cases (nested emphasis, code spans with backticks inside, `snake_case_names` that must
//! not turn italic, escaped `\*`, lists with continuation lines, fences with info strings).
//! pulldown-cmark parses exactly CommonMark, is maintained (the parser behind rustdoc and mdBook),
//! has no dependencies beyond three tiny crates (built without its HTML renderer), and emits
//! balanced start/end events. We map those events to Telegram tags with a stack, so the output
//! is balanced by construction, and malformed Markdown (an unclosed `**`) stays literal text,
//! because CommonMark itself treats it so.
//!
//! Invariants:
//! - [`markdown_to_html`] never emits an unbalanced tag, a tag Telegram does not support, or an
//!   unescaped `<`, `>` or `&` outside a tag.
//! - Every chunk of [`split_html`] is non-blank and at most `limit` UTF-16 units of visible text;
//!   a cut never falls inside an entity reference (`&amp;`) or a character (so never between the
//!   halves of a surrogate pair), and a forced cut avoids splitting an emoji sequence.
//! - Concatenating the chunks' visible texts gives back the input's visible text, except that a
//!   chunk that would hold only whitespace is dropped (Telegram refuses blank messages).

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Telegram's limit on one message's visible text, in UTF-16 code units.
pub const TELEGRAM_MESSAGE_LIMIT: usize = 4096;

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
            Tag::Paragraph | Tag::HtmlBlock => {
                self.block_break();
                self.at_block_start = true;
                ""
            }
            Tag::Heading { .. } => {
                self.block_break();
                self.out.push_str("<b>");
                self.at_block_start = true;
                "</b>"
            }
            Tag::BlockQuote(_) => {
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
            Tag::CodeBlock(kind) => {
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
            Tag::List(first_number) => {
                self.block_break();
                self.lists.push(first_number);
                self.at_block_start = true;
                ""
            }
            Tag::Item => {
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
            Tag::Emphasis => {
                self.out.push_str("<i>");
                "</i>"
            }
            Tag::Strong => {
                self.out.push_str("<b>");
                "</b>"
            }
            Tag::Strikethrough => {
                self.out.push_str("<s>");
                "</s>"
            }
            Tag::Subscript => {
                self.out.push('~');
                "~"
            }
            Tag::Superscript => {
                self.out.push('^');
                "^"
            }
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                if is_allowed_link(&dest_url) {
                    self.out.push_str("<a href=\"");
                    push_escaped_attribute(&mut self.out, &dest_url);
                    self.out.push_str("\">");
                    "</a>"
                } else {
                    ""
                }
            }
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

/// One piece of Telegram HTML.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token<'a> {
    /// `<name ...>`, kept verbatim so it can be reopened in the next chunk.
    Open { raw: &'a str, name: &'a str },
    /// `</name>`.
    Close { raw: &'a str, name: &'a str },
    /// One visible character: a character, or an entity reference such as `&amp;`.
    Visible { raw: &'a str, character: char },
}

/// Cuts Telegram HTML into tokens. Lenient: a `<` that starts no tag is a visible character.
fn tokenize(html: &str) -> Vec<Token<'_>> {
    let mut tokens = Vec::with_capacity(html.len());
    let mut index = 0;
    while index < html.len() {
        let rest = &html[index..];
        if rest.starts_with('<')
            && let Some((token, length)) = parse_tag(rest)
        {
            tokens.push(token);
            index += length;
            continue;
        }
        if rest.starts_with('&')
            && let Some((character, length)) = decode_reference(rest)
        {
            tokens.push(Token::Visible {
                raw: &rest[..length],
                character,
            });
            index += length;
            continue;
        }
        // `index` only ever advances by whole characters, so `rest` starts with one.
        let Some(character) = rest.chars().next() else {
            break;
        };
        let length = character.len_utf8();
        tokens.push(Token::Visible {
            raw: &rest[..length],
            character,
        });
        index += length;
    }
    tokens
}

/// Parses the tag at the start of `text` (which starts with `<`); `None` if it is not a tag.
fn parse_tag(text: &str) -> Option<(Token<'_>, usize)> {
    let bytes = text.as_bytes();
    let closing = bytes.get(1) == Some(&b'/');
    let name_start = if closing { 2 } else { 1 };
    let name_length = bytes[name_start..]
        .iter()
        .take_while(|byte| byte.is_ascii_alphanumeric() || **byte == b'-')
        .count();
    if name_length == 0 && !closing {
        return None;
    }
    let name = &text[name_start..name_start + name_length];
    // Find the `>` that ends the tag, skipping quoted attribute values.
    let mut quote: Option<u8> = None;
    let mut end = None;
    for (offset, &byte) in bytes.iter().enumerate().skip(name_start + name_length) {
        match quote {
            Some(open) if byte == open => quote = None,
            Some(_) => {}
            None if byte == b'"' || byte == b'\'' => quote = Some(byte),
            None if byte == b'>' => {
                end = Some(offset + 1);
                break;
            }
            None if byte == b'<' => return None,
            None => {}
        }
    }
    let end = end?;
    let raw = &text[..end];
    let token = if closing {
        Token::Close { raw, name }
    } else {
        Token::Open { raw, name }
    };
    Some((token, end))
}

/// Decodes `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&#NNN;`, `&#xHH;` at the start of `text`, as
/// Telegram does; `None` when the `&` is literal.
fn decode_reference(text: &str) -> Option<(char, usize)> {
    let body_end = text[1..].find(';')? + 1;
    if body_end > 11 {
        return None;
    }
    let body = &text[1..body_end];
    let character = match body {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let number = body.strip_prefix('#')?;
            let value = match number.strip_prefix(['x', 'X']) {
                Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    u32::from_str_radix(hex, 16).ok()?
                }
                None if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) => {
                    number.parse().ok()?
                }
                _ => return None,
            };
            if value == 0 {
                return None;
            }
            char::from_u32(value)?
        }
    };
    Some((character, body_end + 1))
}

/// The visible text of Telegram HTML: tags removed, entity references decoded.
pub fn plain_text(html: &str) -> String {
    tokenize(html)
        .into_iter()
        .filter_map(|token| match token {
            Token::Visible { character, .. } => Some(character),
            _ => None,
        })
        .collect()
}

/// The length Telegram checks against its limits: UTF-16 units of the visible text.
pub fn visible_len_utf16(html: &str) -> usize {
    tokenize(html)
        .into_iter()
        .map(|token| match token {
            Token::Visible { character, .. } => character.len_utf16(),
            _ => 0,
        })
        .sum()
}

/// How good a place to cut is; later variants are better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum CutQuality {
    Anywhere,
    Word,
    Sentence,
    Line,
    Paragraph,
}

/// Splits Telegram HTML into chunks of at most `limit` UTF-16 units of visible text each (see
/// the module doc for where it cuts and what it guarantees). `limit` values below 2 are taken
/// as 2, the size of the largest character. Blank input gives no chunks.
pub fn split_html(html: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(2);
    let tokens = tokenize(html);
    let mut chunks = Vec::new();
    // Tags open where the current chunk starts, outermost first.
    let mut open: Vec<Token<'_>> = Vec::new();
    let mut start = 0;
    while start < tokens.len() {
        let cut = find_cut(&tokens, start, limit);
        let mut chunk = String::new();
        for tag in &open {
            if let Token::Open { raw, .. } = tag {
                chunk.push_str(raw);
            }
        }
        let mut visible = String::new();
        for token in &tokens[start..cut] {
            match *token {
                Token::Open { raw, .. } => {
                    chunk.push_str(raw);
                    open.push(*token);
                }
                Token::Close { raw, name } => {
                    chunk.push_str(raw);
                    close_tag(&mut open, name);
                }
                Token::Visible { raw, character } => {
                    chunk.push_str(raw);
                    visible.push(character);
                }
            }
        }
        // Close what is still open (nothing, at the end of valid input); the next chunk
        // reopens it.
        for tag in open.iter().rev() {
            if let Token::Open { name, .. } = tag {
                chunk.push_str("</");
                chunk.push_str(name);
                chunk.push('>');
            }
        }
        if !visible.trim().is_empty() {
            chunks.push(chunk);
        }
        start = cut;
    }
    chunks
}

/// Pops `name` (and anything opened inside it and left open) from the open-tag stack; a close
/// tag with no matching open tag is ignored. `</>` closes the innermost tag, as in Telegram.
fn close_tag(open: &mut Vec<Token<'_>>, name: &str) {
    let position = open.iter().rposition(|tag| match tag {
        Token::Open {
            name: open_name, ..
        } => name.is_empty() || open_name.eq_ignore_ascii_case(name),
        _ => false,
    });
    if let Some(position) = position {
        open.truncate(position);
    }
}

/// Where the chunk starting at token `start` ends (exclusive).
fn find_cut(tokens: &[Token<'_>], start: usize, limit: usize) -> usize {
    // The window: tokens from `start` whose visible text fits in `limit`.
    let mut used = 0;
    let mut end = start;
    while end < tokens.len() {
        if let Token::Visible { character, .. } = tokens[end] {
            if used + character.len_utf16() > limit {
                break;
            }
            used += character.len_utf16();
        }
        end += 1;
    }
    if end == tokens.len() {
        return end;
    }
    // The best cut is after the last visible character of the best quality in the window.
    let mut best: Option<(CutQuality, usize)> = None;
    let mut safe_anywhere: Option<usize> = None;
    let mut previous: Option<char> = None;
    let mut visible_indices =
        (start..end).filter(|&index| matches!(tokens[index], Token::Visible { .. }));
    let mut current = visible_indices.next();
    while let Some(index) = current {
        let next = visible_indices.next();
        let Token::Visible { character, .. } = tokens[index] else {
            current = next;
            continue;
        };
        let next_character = next
            .or_else(|| next_visible(tokens, end))
            .and_then(|next_index| match tokens[next_index] {
                Token::Visible { character, .. } => Some(character),
                _ => None,
            });
        let quality = if character == '\n' && previous == Some('\n') {
            CutQuality::Paragraph
        } else if character == '\n' {
            CutQuality::Line
        } else if (character.is_whitespace() && previous.is_some_and(ends_sentence))
            || matches!(character, '。' | '！' | '？')
        {
            CutQuality::Sentence
        } else if character.is_whitespace() {
            CutQuality::Word
        } else {
            CutQuality::Anywhere
        };
        if quality > CutQuality::Anywhere
            && best.is_none_or(|(best_quality, _)| quality >= best_quality)
        {
            best = Some((quality, index));
        }
        if !joins_previous(next_character) && character != '\u{200D}' {
            safe_anywhere = Some(index);
        }
        previous = Some(character);
        current = next;
    }
    let last_visible = (start..end)
        .rev()
        .find(|&index| matches!(tokens[index], Token::Visible { .. }));
    let cut_after = best
        .map(|(_, index)| index)
        .or(safe_anywhere)
        .or(last_visible);
    let Some(cut_after) = cut_after else {
        // No visible character fits at all; cannot happen with `limit >= 2`, but progress
        // is guaranteed by taking one token.
        return start + 1;
    };
    // Close tags right after the cut belong to this chunk: they hold nothing visible.
    let mut cut = cut_after + 1;
    while cut < tokens.len() && matches!(tokens[cut], Token::Close { .. }) {
        cut += 1;
    }
    cut
}

fn next_visible(tokens: &[Token<'_>], from: usize) -> Option<usize> {
    (from..tokens.len()).find(|&index| matches!(tokens[index], Token::Visible { .. }))
}

fn ends_sentence(character: char) -> bool {
    matches!(character, '.' | '!' | '?' | '…')
}

/// Whether `next` must stay with the character before it: combining marks, joiners, variation
/// selectors, emoji modifiers and tags, so that a forced cut does not break an emoji or accent.
fn joins_previous(next: Option<char>) -> bool {
    let Some(next) = next else {
        return false;
    };
    matches!(next as u32,
        0x0300..=0x036F
        | 0x1AB0..=0x1AFF
        | 0x1DC0..=0x1DFF
        | 0x20D0..=0x20FF
        | 0x200D
        | 0xFE00..=0xFE0F
        | 0xFE20..=0xFE2F
        | 0x1F3FB..=0x1F3FF
        | 0xE0020..=0xE007F
        | 0xE0100..=0xE01EF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::fake_telegram::parse_html;

    /// Checks `html` the way Telegram would, with the fake server's independent parser.
    fn assert_telegram_accepts(html: &str) -> String {
        match parse_html(html) {
            Ok(parsed) => parsed.text,
            Err(error) => panic!("Telegram would refuse {html:?}: {error}"),
        }
    }

    #[test]
    fn markdown_becomes_telegram_html() {
        let cases = [
            ("plain text", "plain text"),
            ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
            ("*it* and _it_", "<i>it</i> and <i>it</i>"),
            ("***both***", "<i><b>both</b></i>"),
            ("~~gone~~", "<s>gone</s>"),
            ("about ~5 min to ~10 min", "about ~5 min to ~10 min"),
            ("use `a < b` here", "use <code>a &lt; b</code> here"),
            ("``code with ` tick``", "<code>code with ` tick</code>"),
            (
                "```rust\nfn main() {}\n```",
                "<pre><code class=\"language-rust\">fn main() {}</code></pre>",
            ),
            ("```\nno language\n```", "<pre>no language</pre>"),
            (
                "```weird lang!\nx\n```",
                "<pre><code class=\"language-weird\">x</code></pre>",
            ),
            ("    indented code", "<pre>indented code</pre>"),
            (
                "[site](https://example.com/a?b=1&c=2)",
                "<a href=\"https://example.com/a?b=1&amp;c=2\">site</a>",
            ),
            (
                "[tg](tg://resolve?domain=x)",
                "<a href=\"tg://resolve?domain=x\">tg</a>",
            ),
            ("[js](javascript:alert(1)) [rel](./file.md)", "js rel"),
            (
                "<https://example.org>",
                "<a href=\"https://example.org\">https://example.org</a>",
            ),
            ("# Title\ntext", "<b>Title</b>\n\ntext"),
            ("### Small *title*", "<b>Small <i>title</i></b>"),
            ("- a\n- b\n  - nested", "• a\n• b\n  • nested"),
            ("3. three\n4. four", "3. three\n4. four"),
            (
                "> quoted\n> still",
                "<blockquote>quoted\nstill</blockquote>",
            ),
            (
                "> outer\n>> inner",
                "<blockquote>outer\n\ninner</blockquote>",
            ),
            ("para one\n\npara two", "para one\n\npara two"),
            ("line one\nline two", "line one\nline two"),
            ("a & b < c > d", "a &amp; b &lt; c &gt; d"),
            ("<b>not markup</b>", "&lt;b&gt;not markup&lt;/b&gt;"),
            ("snake_case_name stays", "snake_case_name stays"),
            ("escaped \\*stars\\*", "escaped *stars*"),
            ("before\n\n---\n\nafter", "before\n\n———\n\nafter"),
            (
                "![diagram](https://example.com/d.png)",
                "<a href=\"https://example.com/d.png\">diagram</a>",
            ),
        ];
        for (markdown, expected) in cases {
            let html = markdown_to_html(markdown);
            assert_eq!(html, expected, "markdown: {markdown:?}");
            assert_telegram_accepts(&html);
        }
    }

    #[test]
    fn malformed_markdown_stays_literal_and_balanced() {
        let cases = [
            ("**unclosed bold", "**unclosed bold"),
            ("*unclosed italic", "*unclosed italic"),
            ("`unclosed code", "`unclosed code"),
            ("[text](", "[text]("),
            ("~~half", "~~half"),
            // CommonMark's delimiter rules pair these as nested emphasis; what matters is balance.
            (
                "**bold *mixed** close*",
                "<i><i>bold <i>mixed</i></i> close</i>",
            ),
            ("<b>unbalanced", "&lt;b&gt;unbalanced"),
            ("&amp; stays an ampersand", "&amp; stays an ampersand"),
        ];
        for (markdown, expected) in cases {
            let html = markdown_to_html(markdown);
            assert_eq!(html, expected, "markdown: {markdown:?}");
            assert_telegram_accepts(&html);
        }
        // An unclosed fence runs to the end, as CommonMark says, and is still one closed block.
        let html = markdown_to_html("text\n\n```python\nprint(1)\n");
        assert_eq!(
            html,
            "text\n\n<pre><code class=\"language-python\">print(1)</code></pre>"
        );
        assert_telegram_accepts(&html);
    }

    #[test]
    fn plain_text_strips_tags_and_decodes_references() {
        assert_eq!(
            plain_text(
                "<b>a</b> &amp; <a href=\"https://x.y/?q=1&amp;r=2\">l&lt;i&gt;nk</a> &#128512;&#x41; &unknown; & x"
            ),
            "a & l<i>nk 😀A &unknown; & x"
        );
        assert_eq!(visible_len_utf16("<i>😀</i>&amp;"), 3);
        assert_eq!(escape_html("<a & b>"), "&lt;a &amp; b&gt;");
    }

    /// Splits and checks every promise of [`split_html`]; returns the chunks.
    fn split_checked(html: &str, limit: usize) -> Vec<String> {
        let chunks = split_html(html, limit);
        let mut joined = String::new();
        for chunk in &chunks {
            let visible = assert_telegram_accepts(chunk);
            let units = visible.encode_utf16().count();
            assert!(
                units <= limit,
                "chunk of {units} units over {limit}: {chunk:?}"
            );
            assert!(!visible.trim().is_empty(), "blank chunk {chunk:?}");
            assert_eq!(visible, plain_text(chunk));
            joined.push_str(&visible);
        }
        let original = plain_text(html);
        let without_whitespace =
            |text: &str| -> String { text.chars().filter(|c| !c.is_whitespace()).collect() };
        assert_eq!(without_whitespace(&joined), without_whitespace(&original));
        chunks
    }

    #[test]
    fn split_prefers_paragraphs_then_lines_then_sentences_then_words() {
        let cases: [(&str, usize, &[&str]); 6] = [
            ("short", 10, &["short"]),
            ("aaaa\nbbbb\n\ncccc", 12, &["aaaa\nbbbb\n\n", "cccc"]),
            ("aaaa\nbbbb cccc", 12, &["aaaa\n", "bbbb cccc"]),
            (
                "One two. Three four five",
                16,
                &["One two. ", "Three four five"],
            ),
            ("one two three", 10, &["one two ", "three"]),
            ("abcdefghij", 4, &["abcd", "efgh", "ij"]),
        ];
        for (html, limit, expected) in cases {
            assert_eq!(
                split_checked(html, limit),
                expected,
                "input {html:?} limit {limit}"
            );
        }
    }

    #[test]
    fn split_closes_and_reopens_tags_at_the_cut() {
        let html = "<b>bold words <i>and italic</i> here</b>";
        let chunks = split_checked(html, 14);
        assert_eq!(
            chunks,
            [
                "<b>bold words </b>",
                "<b><i>and italic</i> </b>",
                "<b>here</b>",
            ]
        );
        let code = "<pre><code class=\"language-rust\">line one\nline two\nline three</code></pre>";
        let chunks = split_checked(code, 18);
        assert_eq!(
            chunks,
            [
                "<pre><code class=\"language-rust\">line one\nline two\n</code></pre>",
                "<pre><code class=\"language-rust\">line three</code></pre>",
            ]
        );
    }

    #[test]
    fn split_never_cuts_inside_a_reference_a_character_or_an_emoji_sequence() {
        let ampersands = "&amp;".repeat(5000);
        let chunks = split_checked(&ampersands, TELEGRAM_MESSAGE_LIMIT);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0], "&amp;".repeat(4096));

        // 😀 is two UTF-16 units: an odd limit leaves one unit unused rather than half an emoji.
        let emoji = "😀".repeat(3000);
        let chunks = split_checked(&emoji, 4095);
        assert_eq!(chunks[0].encode_utf16().count(), 4094);
        assert_eq!(chunks.concat(), emoji);

        // A family emoji is five characters joined by ZWJ; a forced cut keeps each whole.
        let family = "👨\u{200D}👩\u{200D}👧".repeat(600);
        for chunk in split_checked(&family, 100) {
            assert!(
                chunk.starts_with('👨') && chunk.ends_with('👧'),
                "{chunk:?}"
            );
        }
    }

    /// A long answer the way a model writes one: prose, lists, and code blocks.
    fn long_answer_markdown() -> String {
        let mut markdown = String::from("# Report\n\n");
        let mut section = 0;
        while markdown.chars().count() < 10_000 {
            section += 1;
            markdown.push_str(&format!(
                "## Section {section}\n\nThis paragraph explains **step {section}** with `inline code` and a \
                 [link](https://example.com/{section}). It has several sentences. Each one adds detail! \
                 Does it end? Yes 😀 & more.\n\n- first point\n- second point with *emphasis*\n\n\
                 ```rust\nfn step_{section}() {{\n    let total = (0..{section}).sum::<u32>();\n    \
                 println!(\"{{total}} < {{}}\", 1 << 3);\n}}\n```\n\n"
            ));
        }
        markdown.push_str("```python\n");
        for line in 0..120 {
            markdown.push_str(&format!(
                "print('line {line} of a very long code block that must be split')\n"
            ));
        }
        markdown.push_str("```\n");
        markdown
    }

    #[test]
    fn a_ten_thousand_character_answer_splits_into_valid_chunks_that_add_up() {
        let html = markdown_to_html(&long_answer_markdown());
        let original_visible = assert_telegram_accepts(&html);
        assert!(original_visible.chars().count() > 10_000);
        let chunks = split_checked(&html, TELEGRAM_MESSAGE_LIMIT);
        assert!(chunks.len() >= 3, "{} chunks", chunks.len());
        // Nothing was dropped: the visible texts add up exactly.
        let joined: String = chunks.iter().map(|chunk| plain_text(chunk)).collect();
        assert_eq!(joined, original_visible);
        // The long python block was cut, and both halves are code blocks of their own.
        let python_chunks: Vec<&String> = chunks
            .iter()
            .filter(|chunk| chunk.contains("<code class=\"language-python\">"))
            .collect();
        assert!(python_chunks.len() >= 2);
        for chunk in python_chunks {
            assert!(chunk.ends_with("</code></pre>"), "{chunk}");
        }
    }

    /// xorshift64*: a deterministic generator, so a failing case can be replayed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, bound: usize) -> usize {
            (self.next() % bound as u64) as usize
        }
    }

    /// Random valid Telegram HTML: nested tags with attributes, references, emoji, breaks.
    fn random_html(rng: &mut Rng, depth: usize) -> String {
        let texts = [
            "word ",
            "two words. ",
            "\n",
            "\n\n",
            "&amp;",
            "&lt;x&gt;",
            "&#128512;",
            "😀",
            "é",
            "👩\u{200D}💻",
            "a",
            "Sentence! ",
            "   ",
            "中文。",
        ];
        let mut html = String::new();
        for _ in 0..rng.below(8) {
            if depth < 3 && rng.below(3) == 0 {
                let inner = random_html(rng, depth + 1);
                let (open, close) = match rng.below(6) {
                    0 => ("<b>", "</b>"),
                    1 => ("<i>", "</i>"),
                    2 => ("<a href=\"https://e.com/?a=1&amp;b=2\">", "</a>"),
                    3 => ("<s>", "</s>"),
                    4 => ("<u>", "</u>"),
                    _ => ("<tg-spoiler>", "</tg-spoiler>"),
                };
                html.push_str(open);
                html.push_str(&inner);
                html.push_str(close);
            } else if depth == 0 && rng.below(6) == 0 {
                let code: String = (0..rng.below(30))
                    .map(|_| texts[rng.below(texts.len())])
                    .collect();
                html.push_str("<pre><code class=\"language-rust\">");
                html.push_str(&code);
                html.push_str("</code></pre>");
            } else {
                html.push_str(texts[rng.below(texts.len())]);
            }
        }
        html
    }

    #[test]
    fn random_html_splits_into_valid_chunks_at_any_limit() {
        let mut rng = Rng(0xB0BA_FE77_1234_5678);
        for round in 0..400 {
            let html = random_html(&mut rng, 0);
            if let Err(error) = parse_html(&html) {
                panic!("round {round}: generator made invalid HTML {html:?}: {error}");
            }
            split_checked(&html, 2 + rng.below(40));
        }
    }

    #[test]
    fn random_markdown_never_panics_and_always_yields_valid_chunks() {
        let pieces = [
            "*",
            "**",
            "_",
            "__",
            "~",
            "~~",
            "`",
            "```",
            "```rust\n",
            "[",
            "]",
            "(",
            ")",
            "(https://e.com)",
            "<",
            ">",
            "&",
            "&amp;",
            "&#128512;",
            "#",
            "# ",
            "> ",
            "- ",
            "1. ",
            "\n",
            "\n\n",
            " ",
            "word",
            "Sentence. ",
            "😀",
            "👨\u{200D}👩",
            "é",
            "\u{0301}",
            "<b>",
            "</i>",
            "\\",
            "|",
            "    ",
            "\t",
            "ü",
            "中文。",
            "!",
            "?",
        ];
        let mut rng = Rng(0x5EED_CAFE_F00D_1234);
        for round in 0..400 {
            let length = rng.below(120);
            let markdown: String = (0..length)
                .map(|_| pieces[rng.below(pieces.len())])
                .collect();
            let html = markdown_to_html(&markdown);
            if let Err(error) = parse_html(&html) {
                panic!("round {round}: {markdown:?} gave {html:?}: {error}");
            }
            let limit = 2 + rng.below(60);
            split_checked(&html, limit);
        }
    }
}

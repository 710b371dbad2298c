//! Telegram's `parse_mode=HTML` entity parser, as the fake Bot API server applies it.
//!
//! It follows the rules of Telegram's own parser (tdlib's `parse_html`): only `<` and `&` are
//! special in text; `&lt;`, `&gt;`, `&amp;`, `&quot;` and numeric references are decoded, any other
//! `&` stays literal; tags must be supported and properly nested; `</>` closes the innermost tag.
//! The error texts for those cases are Telegram's. The fake is deliberately a little stricter than
//! Telegram on nesting (nothing inside `code`, only `code` inside `pre`, no blockquote inside a
//! blockquote), because Telegram silently drops such entities and a formatter that produces them
//! has a bug worth seeing.
//!
//! This parser is written independently of `crate::telegram::format` on purpose: the tests use it
//! to check the formatter's output, which would prove nothing if both shared one tokenizer.
//!
//! Offsets and lengths are counted in UTF-16 code units, like Telegram's.

/// The visible text of a message after entity parsing, and its entities.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedHtml {
    pub text: String,
    pub entities: Vec<HtmlEntity>,
}

impl ParsedHtml {
    /// The length Telegram checks against its limits: UTF-16 code units of the visible text.
    pub fn utf16_len(&self) -> usize {
        self.text.encode_utf16().count()
    }
}

/// One formatting entity, shaped like the Bot API's `MessageEntity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtmlEntity {
    /// The Bot API type name: `bold`, `italic`, `underline`, `strikethrough`, `spoiler`, `code`,
    /// `pre`, `text_link`, `blockquote`, `expandable_blockquote`, `custom_emoji`.
    pub kind: &'static str,
    pub offset: usize,
    pub length: usize,
    /// For `text_link`.
    pub url: Option<String>,
    /// For `pre` with a `<code class="language-x">` inside.
    pub language: Option<String>,
    /// For `custom_emoji`.
    pub custom_emoji_id: Option<String>,
}

impl HtmlEntity {
    /// The entity as Bot API JSON.
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        object.insert("type".into(), self.kind.into());
        object.insert("offset".into(), self.offset.into());
        object.insert("length".into(), self.length.into());
        if let Some(url) = &self.url {
            object.insert("url".into(), url.as_str().into());
        }
        if let Some(language) = &self.language {
            object.insert("language".into(), language.as_str().into());
        }
        if let Some(id) = &self.custom_emoji_id {
            object.insert("custom_emoji_id".into(), id.as_str().into());
        }
        serde_json::Value::Object(object)
    }
}

const SUPPORTED_TAGS: &[&str] = &[
    "a",
    "b",
    "strong",
    "i",
    "em",
    "s",
    "strike",
    "del",
    "u",
    "ins",
    "tg-spoiler",
    "tg-emoji",
    "span",
    "pre",
    "code",
    "blockquote",
];

/// A start tag waiting for its end tag.
struct OpenTag {
    name: String,
    /// Where the entity starts in the visible text, in UTF-16 units.
    start: usize,
    /// `href` for `a`, the language for `code`, the emoji id for `tg-emoji`.
    argument: String,
    expandable: bool,
}

/// Parses `source` as Telegram HTML. The error is the part of Telegram's description after
/// "Bad Request: can't parse entities: ".
pub fn parse_html(source: &str) -> Result<ParsedHtml, String> {
    let bytes = source.as_bytes();
    let mut parser = Parser {
        text: String::with_capacity(source.len()),
        utf16_len: 0,
        entities: Vec::new(),
    };
    let mut stack: Vec<OpenTag> = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'&' => {
                if let Some((decoded, consumed)) = decode_reference(&source[index..]) {
                    parser.push_char(decoded);
                    index += consumed;
                } else {
                    parser.push_char('&');
                    index += 1;
                }
            }
            b'<' => {
                index = if bytes.get(index + 1) == Some(&b'/') {
                    parser.end_tag(source, index, &mut stack)?
                } else {
                    parser.start_tag(source, index, &mut stack)?
                };
            }
            _ => {
                // Copy the run of ordinary text up to the next special byte in one go; both
                // special bytes are ASCII, so the slice ends on a character boundary.
                let run_end = bytes[index..]
                    .iter()
                    .position(|&byte| byte == b'&' || byte == b'<')
                    .map_or(bytes.len(), |relative| index + relative);
                parser.push_str(&source[index..run_end]);
                index = run_end;
            }
        }
    }
    if let Some(open) = stack.last() {
        return Err(format!(
            "Can't find end tag corresponding to start tag \"{}\"",
            open.name
        ));
    }
    let mut entities = parser.entities;
    entities.sort_by(|left, right| {
        left.offset
            .cmp(&right.offset)
            .then(right.length.cmp(&left.length))
    });
    Ok(ParsedHtml {
        text: parser.text,
        entities,
    })
}

struct Parser {
    text: String,
    utf16_len: usize,
    entities: Vec<HtmlEntity>,
}

impl Parser {
    fn push_char(&mut self, character: char) {
        self.text.push(character);
        self.utf16_len += character.len_utf16();
    }

    fn push_str(&mut self, run: &str) {
        self.text.push_str(run);
        self.utf16_len += run.encode_utf16().count();
    }

    /// Parses `<name attr="value" ...>` starting at `begin`; returns the index after `>`.
    fn start_tag(
        &mut self,
        source: &str,
        begin: usize,
        stack: &mut Vec<OpenTag>,
    ) -> Result<usize, String> {
        let mut scanner = TagScanner {
            source,
            bytes: source.as_bytes(),
            begin,
            index: begin + 1,
        };
        let name = scanner.tag_name()?;
        if !SUPPORTED_TAGS.contains(&name.as_str()) {
            return Err(format!(
                "Unsupported start tag \"{name}\" at byte offset {begin}"
            ));
        }
        let attributes = scanner.attributes(&name)?;
        attributes.check_required(&name, begin)?;
        check_nesting(&name, stack, begin)?;
        stack.push(OpenTag {
            name,
            start: self.utf16_len,
            argument: attributes.argument,
            expandable: attributes.expandable,
        });
        Ok(scanner.index)
    }

    /// Parses `</name>` starting at `begin`; returns the index after `>`.
    fn end_tag(
        &mut self,
        source: &str,
        begin: usize,
        stack: &mut Vec<OpenTag>,
    ) -> Result<usize, String> {
        let bytes = source.as_bytes();
        if stack.is_empty() {
            return Err(format!("Unexpected end tag at byte offset {begin}"));
        }
        let mut index = begin + 2;
        let name_start = index;
        while index < bytes.len() && !is_space(bytes[index]) && bytes[index] != b'>' {
            index += 1;
        }
        let end_name = source[name_start..index].to_ascii_lowercase();
        while index < bytes.len() && is_space(bytes[index]) {
            index += 1;
        }
        if index >= bytes.len() || bytes[index] != b'>' {
            return Err(format!("Unclosed end tag at byte offset {begin}"));
        }
        index += 1;
        // Checked non-empty above.
        let Some(open) = stack.pop() else {
            return Err(format!("Unexpected end tag at byte offset {begin}"));
        };
        if !end_name.is_empty() && end_name != open.name {
            return Err(format!(
                "Unmatched end tag at byte offset {begin}, expected \"</{}>\", found \"</{end_name}>\"",
                open.name
            ));
        }
        let length = self.utf16_len - open.start;
        if open.name == "code"
            && let Some(parent) = stack.last_mut()
            && parent.name == "pre"
        {
            // `<pre><code class="language-x">` is one `pre` entity with a language.
            if !open.argument.is_empty() {
                parent.argument = open.argument;
            }
            return Ok(index);
        }
        if length == 0 {
            return Ok(index);
        }
        let mut entity = HtmlEntity {
            kind: "bold",
            offset: open.start,
            length,
            url: None,
            language: None,
            custom_emoji_id: None,
        };
        entity.kind = match open.name.as_str() {
            "b" | "strong" => "bold",
            "i" | "em" => "italic",
            "u" | "ins" => "underline",
            "s" | "strike" | "del" => "strikethrough",
            "tg-spoiler" | "span" => "spoiler",
            "code" => "code",
            "pre" => {
                if !open.argument.is_empty() {
                    entity.language = Some(open.argument);
                }
                "pre"
            }
            "blockquote" if open.expandable => "expandable_blockquote",
            "blockquote" => "blockquote",
            "tg-emoji" => {
                entity.custom_emoji_id = Some(open.argument);
                "custom_emoji"
            }
            "a" => match normalize_url(&open.argument) {
                Some(url) => {
                    entity.url = Some(url);
                    "text_link"
                }
                // Telegram drops a link it cannot parse and keeps the text.
                None => return Ok(index),
            },
            _ => return Ok(index),
        };
        self.entities.push(entity);
        Ok(index)
    }
}

/// Reads one start tag from `index` on, the way Telegram's parser does; `begin` is where its `<`
/// is, for the error messages.
struct TagScanner<'a> {
    source: &'a str,
    bytes: &'a [u8],
    begin: usize,
    index: usize,
}

impl TagScanner<'_> {
    /// The error for a tag the source ends inside of.
    fn unclosed(&self) -> String {
        format!("Unclosed start tag at byte offset {}", self.begin)
    }

    /// Skips whitespace; an error when the source ends first.
    fn skip_spaces(&mut self) -> Result<(), String> {
        while self.index < self.bytes.len() && is_space(self.bytes[self.index]) {
            self.index += 1;
        }
        if self.index >= self.bytes.len() {
            return Err(self.unclosed());
        }
        Ok(())
    }

    /// The tag's name (lowercase), which ends at whitespace or `>`.
    fn tag_name(&mut self) -> Result<String, String> {
        let name_start = self.index;
        while self.index < self.bytes.len()
            && !is_space(self.bytes[self.index])
            && self.bytes[self.index] != b'>'
        {
            self.index += 1;
        }
        if self.index >= self.bytes.len() {
            return Err(self.unclosed());
        }
        Ok(self.source[name_start..self.index].to_ascii_lowercase())
    }

    /// Reads the attributes of the tag `name` up to and including its `>`.
    fn attributes(&mut self, name: &str) -> Result<TagAttributes, String> {
        let mut attributes = TagAttributes::default();
        loop {
            self.skip_spaces()?;
            if self.bytes[self.index] == b'>' {
                self.index += 1;
                return Ok(attributes);
            }
            let attribute = self.attribute_name(name)?;
            self.skip_spaces()?;
            if self.bytes[self.index] != b'=' {
                // `<blockquote expandable>` is the one attribute Telegram takes without a value.
                if name == "blockquote" && attribute == "expandable" {
                    attributes.expandable = true;
                    continue;
                }
                return Err(format!(
                    "Expected equal sign in declaration of an attribute of the tag \"{name}\" at byte offset {}",
                    self.begin
                ));
            }
            self.index += 1;
            self.skip_spaces()?;
            let value = self.attribute_value()?;
            attributes.take(name, &attribute, value);
        }
    }

    /// An attribute's name (lowercase), which ends at whitespace, `=` or `>`.
    fn attribute_name(&mut self, name: &str) -> Result<String, String> {
        let attribute_start = self.index;
        while self.index < self.bytes.len()
            && !is_space(self.bytes[self.index])
            && self.bytes[self.index] != b'='
            && self.bytes[self.index] != b'>'
        {
            self.index += 1;
        }
        let attribute = self.source[attribute_start..self.index].to_ascii_lowercase();
        if attribute.is_empty() {
            return Err(format!(
                "Empty attribute name in the tag \"{name}\" at byte offset {}",
                self.begin
            ));
        }
        Ok(attribute)
    }

    /// An attribute's value: quoted (with character references decoded) or a bare name token.
    fn attribute_value(&mut self) -> Result<String, String> {
        let quote = self.bytes[self.index];
        if quote == b'"' || quote == b'\'' {
            self.quoted_value(quote)
        } else {
            self.token_value()
        }
    }

    /// The value between the `quote` at `index` and the next one, references decoded.
    fn quoted_value(&mut self, quote: u8) -> Result<String, String> {
        let mut value = String::new();
        self.index += 1;
        while self.index < self.bytes.len() && self.bytes[self.index] != quote {
            if self.bytes[self.index] == b'&'
                && let Some((decoded, consumed)) = decode_reference(&self.source[self.index..])
            {
                value.push(decoded);
                self.index += consumed;
                continue;
            }
            // Copy one whole character; `index` is always on a character boundary
            // because it only ever advances by whole characters or ASCII bytes.
            let Some(character) = self.source[self.index..].chars().next() else {
                break;
            };
            value.push(character);
            self.index += character.len_utf8();
        }
        if self.index >= self.bytes.len() {
            return Err(self.unclosed());
        }
        self.index += 1;
        Ok(value)
    }

    /// An unquoted value (lowercase): letters, digits, `.` and `-`, ended by whitespace or `>`.
    fn token_value(&mut self) -> Result<String, String> {
        let token_start = self.index;
        while self.index < self.bytes.len()
            && (self.bytes[self.index].is_ascii_alphanumeric()
                || self.bytes[self.index] == b'.'
                || self.bytes[self.index] == b'-')
        {
            self.index += 1;
        }
        let value = self.source[token_start..self.index].to_ascii_lowercase();
        if self.index >= self.bytes.len() {
            return Err(self.unclosed());
        }
        if !is_space(self.bytes[self.index]) && self.bytes[self.index] != b'>' {
            return Err(format!(
                "Unexpected end of name token at byte offset {}",
                self.index
            ));
        }
        Ok(value)
    }
}

/// What a start tag's attributes say, as far as Telegram reads them.
#[derive(Default)]
struct TagAttributes {
    /// `href` for `a`, the language for `code`, the emoji id for `tg-emoji`.
    argument: String,
    /// A `span` has `class="tg-spoiler"`.
    span_class_ok: bool,
    /// A `blockquote` has `expandable`.
    expandable: bool,
}

impl TagAttributes {
    /// Takes in one attribute of the tag `name`; attributes Telegram ignores are ignored.
    fn take(&mut self, name: &str, attribute: &str, value: String) {
        match (name, attribute) {
            ("a", "href") => self.argument = value,
            ("code", "class") => {
                if let Some(language) = value.strip_prefix("language-") {
                    self.argument = language.to_string();
                }
            }
            ("span", "class") => self.span_class_ok = value == "tg-spoiler",
            ("tg-emoji", "emoji-id") => self.argument = value,
            _ => {}
        }
    }

    /// Refuses a `span` that is not a spoiler and a `tg-emoji` without its id.
    fn check_required(&self, name: &str, begin: usize) -> Result<(), String> {
        if name == "span" && !self.span_class_ok {
            return Err(format!(
                "Tag \"span\" must have class \"tg-spoiler\" at byte offset {begin}"
            ));
        }
        if name == "tg-emoji" && self.argument.is_empty() {
            return Err(format!(
                "Tag \"tg-emoji\" must have attribute \"emoji-id\" at byte offset {begin}"
            ));
        }
        Ok(())
    }
}

/// Refuses the tag `name` where it may not open: inside `code`, inside `pre` (unless it is
/// `code`), or inside another blockquote or pre.
fn check_nesting(name: &str, stack: &[OpenTag], begin: usize) -> Result<(), String> {
    if let Some(parent) = stack.last() {
        if parent.name == "code" {
            return Err(format!(
                "Can't use tag \"{name}\" inside a \"code\" entity at byte offset {begin}"
            ));
        }
        if parent.name == "pre" && name != "code" {
            return Err(format!(
                "Can't use tag \"{name}\" inside a \"pre\" entity at byte offset {begin}"
            ));
        }
    }
    if name == "blockquote" && stack.iter().any(|open| open.name == "blockquote") {
        return Err(format!(
            "Blockquote entities can't be nested, at byte offset {begin}"
        ));
    }
    if name == "pre" && stack.iter().any(|open| open.name == "pre") {
        return Err(format!(
            "Pre entities can't be nested, at byte offset {begin}"
        ));
    }
    Ok(())
}

/// What Telegram accepts as a link target, completed the way Telegram completes it.
fn normalize_url(href: &str) -> Option<String> {
    let href = href.trim();
    if href.is_empty() {
        return None;
    }
    let with_scheme = if href.contains("://") || href.starts_with("tg:") {
        href.to_string()
    } else {
        format!("http://{href}")
    };
    let url = reqwest::Url::parse(&with_scheme).ok()?;
    match url.scheme() {
        "http" | "https" | "tg" | "ton" => Some(url.to_string()),
        _ => None,
    }
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' | b'\x0b')
}

/// Decodes `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&#NNN;` and `&#xHH;` at the start of `text`;
/// returns the character and the bytes consumed, or `None` when `&` is literal.
pub(crate) fn decode_reference(text: &str) -> Option<(char, usize)> {
    let rest = text.strip_prefix('&')?;
    let semicolon = rest.find(';')?;
    // Telegram's references are short; a far-away `;` belongs to something else.
    if semicolon > 10 {
        return None;
    }
    let name = &rest[..semicolon];
    let decoded = match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "quot" => '"',
        _ => {
            let number = name.strip_prefix('#')?;
            let value = if let Some(hex) = number
                .strip_prefix('x')
                .or_else(|| number.strip_prefix('X'))
            {
                if hex.is_empty() || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                    return None;
                }
                u32::from_str_radix(hex, 16).ok()?
            } else {
                if number.is_empty() || !number.bytes().all(|byte| byte.is_ascii_digit()) {
                    return None;
                }
                number.parse::<u32>().ok()?
            };
            if value == 0 {
                return None;
            }
            char::from_u32(value)?
        }
    };
    Some((decoded, 1 + semicolon + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entity(kind: &'static str, offset: usize, length: usize) -> HtmlEntity {
        HtmlEntity {
            kind,
            offset,
            length,
            url: None,
            language: None,
            custom_emoji_id: None,
        }
    }

    #[test]
    fn accepted_markup_becomes_text_and_entities() {
        let parsed = parse_html("a <b>bold</b> &amp; <i>it &lt;x&gt;</i> & more").unwrap();
        assert_eq!(parsed.text, "a bold & it <x> & more");
        assert_eq!(
            parsed.entities,
            vec![entity("bold", 2, 4), entity("italic", 9, 6)]
        );

        let parsed =
            parse_html("<pre><code class=\"language-rust\">fn main() {}</code></pre>").unwrap();
        assert_eq!(parsed.text, "fn main() {}");
        assert_eq!(parsed.entities[0].kind, "pre");
        assert_eq!(parsed.entities[0].language.as_deref(), Some("rust"));

        let parsed = parse_html("😀<b>x</b>").unwrap();
        assert_eq!(parsed.entities, vec![entity("bold", 2, 1)]);

        let parsed = parse_html("<a href=\"https://example.com/?a=1&amp;b=2\">l</a>").unwrap();
        assert_eq!(
            parsed.entities[0].url.as_deref(),
            Some("https://example.com/?a=1&b=2")
        );
        assert_eq!(parse_html("&#128512;&#x41;").unwrap().text, "😀A");
        assert_eq!(parse_html("<b>x</>").unwrap().text, "x");
        assert_eq!(
            parse_html("<blockquote expandable>q</blockquote>")
                .unwrap()
                .entities[0]
                .kind,
            "expandable_blockquote"
        );
    }

    #[test]
    fn malformed_markup_is_rejected_with_telegrams_wording() {
        let cases = [
            (
                "<b>x",
                "Can't find end tag corresponding to start tag \"b\"",
            ),
            ("x</b>", "Unexpected end tag at byte offset 1"),
            (
                "<b>x</i>",
                "Unmatched end tag at byte offset 4, expected \"</b>\", found \"</i>\"",
            ),
            ("<br>", "Unsupported start tag \"br\" at byte offset 0"),
            ("a < b", "Unsupported start tag \"\" at byte offset 2"),
            ("<b", "Unclosed start tag at byte offset 0"),
            (
                "<span>x</span>",
                "Tag \"span\" must have class \"tg-spoiler\" at byte offset 0",
            ),
            (
                "<code><b>x</b></code>",
                "Can't use tag \"b\" inside a \"code\" entity at byte offset 6",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_html(input).unwrap_err(), expected, "input: {input}");
        }
    }
}

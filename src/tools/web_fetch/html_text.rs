//! Reducing an HTML page to the readable text `web_fetch` returns: no DOM, just a scan that drops
//! comments, scripts, styles and tags, breaks lines at block elements and decodes common entities.

/// Tags after which a line break belongs in the text.
const BLOCK_TAGS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "title",
    "tr",
    "ul",
];
/// Elements whose content is not text for a reader.
const SKIPPED_ELEMENTS: &[&str] = &["script", "style", "noscript", "template", "svg", "head"];

/// Reduces HTML to readable text: drops comments, scripts, styles and tags, turns block elements
/// into line breaks, decodes common entities and collapses whitespace. Deliberately simple (no DOM);
/// never panics on malformed input. The `<title>` is kept as the first line.
pub fn html_to_text(html: &str) -> String {
    // ASCII lowercasing keeps every byte offset, so positions found in `lower` index `html`.
    let lower = html.to_ascii_lowercase();
    let mut raw = String::with_capacity(html.len() / 2);
    if let Some(title) = element_text(html, &lower, "title") {
        raw.push_str(&title);
        raw.push('\n');
    }
    let mut position = 0;
    while position < html.len() {
        let Some(offset) = lower[position..].find('<') else {
            decode_entities_into(&mut raw, &html[position..]);
            break;
        };
        decode_entities_into(&mut raw, &html[position..position + offset]);
        position += offset;
        let rest = &lower[position..];
        if rest.starts_with("<!--") {
            position = match rest.find("-->") {
                Some(end) => position + end + 3,
                None => html.len(),
            };
            continue;
        }
        let name = tag_name(rest);
        let closing = rest.starts_with("</");
        if !closing && SKIPPED_ELEMENTS.contains(&name) {
            position = end_of_skipped_element(&lower, position, name);
            continue;
        }
        let Some(close) = rest.find('>') else {
            // An unterminated tag at the end: drop it.
            break;
        };
        if BLOCK_TAGS.contains(&name) {
            raw.push('\n');
        } else if matches!(name, "td" | "th") {
            raw.push(' ');
        }
        position += close + 1;
    }
    collapse_whitespace(&raw)
}

/// The position just after the end tag of the element `name` that starts at `position`, or the
/// end of the document. `</head>` may be omitted in HTML, so a head also ends where `<body` starts.
fn end_of_skipped_element(lower: &str, position: usize, name: &str) -> usize {
    let rest = &lower[position..];
    let end_tag = rest.find(&format!("</{name}")).map(|end| {
        let after = position + end;
        match lower[after..].find('>') {
            Some(close) => after + close + 1,
            None => lower.len(),
        }
    });
    let body_start = (name == "head")
        .then(|| rest.find("<body").map(|start| position + start))
        .flatten();
    match (end_tag, body_start) {
        (Some(end), Some(body)) => end.min(body),
        (Some(end), None) => end,
        (None, Some(body)) => body,
        (None, None) => lower.len(),
    }
}

/// The text inside the first `<name>…</name>`, decoded and collapsed.
fn element_text(html: &str, lower: &str, name: &str) -> Option<String> {
    let open = lower.find(&format!("<{name}"))?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find(&format!("</{name}"))?;
    let text = collapse_whitespace(&decode_entities(&html[start..end]));
    (!text.is_empty()).then_some(text)
}

/// The lowercase tag name at the start of `tag` (`<div class=…>` → `div`, `</p>` → `p`).
fn tag_name(tag: &str) -> &str {
    let body = tag.trim_start_matches('<').trim_start_matches('/');
    let end = body
        .find(|character: char| !character.is_ascii_alphanumeric())
        .unwrap_or(body.len());
    &body[..end]
}

fn decode_entities(text: &str) -> String {
    let mut decoded = String::with_capacity(text.len());
    decode_entities_into(&mut decoded, text);
    decoded
}

/// Appends `text` to `decoded` with character references replaced.
fn decode_entities_into(decoded: &mut String, text: &str) {
    let mut rest = text;
    while let Some(ampersand) = rest.find('&') {
        decoded.push_str(&rest[..ampersand]);
        rest = &rest[ampersand..];
        // Entities are short; `;` is ASCII, so its index is a character boundary.
        let entity_end = rest.bytes().take(12).position(|byte| byte == b';');
        let replacement = entity_end.and_then(|end| decode_entity(&rest[1..end]));
        match (replacement, entity_end) {
            (Some(character), Some(end)) => {
                decoded.push(character);
                rest = &rest[end + 1..];
            }
            _ => {
                decoded.push('&');
                rest = &rest[1..];
            }
        }
    }
    decoded.push_str(rest);
}

fn decode_entity(entity: &str) -> Option<char> {
    if let Some(number) = entity.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match entity {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        "laquo" => '«',
        "raquo" => '»',
        "rsquo" => '’',
        "lsquo" => '‘',
        "rdquo" => '”',
        "ldquo" => '“',
        _ => return None,
    })
}

/// One space between words, one line per block, no blank lines (block tags open and close with
/// a line break, so blank lines would carry no information).
fn collapse_whitespace(text: &str) -> String {
    let mut output = String::with_capacity(text.len());
    for line in text.lines() {
        let mut words = line.split_whitespace().peekable();
        if words.peek().is_none() {
            continue;
        }
        if !output.is_empty() {
            output.push('\n');
        }
        for (index, word) in words.enumerate() {
            if index > 0 {
                output.push(' ');
            }
            output.push_str(word);
        }
    }
    output
}

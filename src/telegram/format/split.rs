//! Reading Telegram HTML as tokens, and cutting it into messages within Telegram's limit.

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

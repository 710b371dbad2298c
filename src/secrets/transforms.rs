//! Redaction's second line: the common transforms a secret can be put through to slip past a
//! match on its value and its encodings — another case, reversed, rot13, separators between its
//! characters, split in two, gzip/deflate/zlib (or plain bytes) wrapped in base64.
//!
//! This is a second line, not the guard. What keeps a secret away from a tool is that the tool
//! never sees it (the sandbox, the scrubbed environment, the non-dumpable daemon); these matches
//! only catch the forms a careless or lazy exfiltration would use. Anything that encodes a secret
//! with a key, a cipher, or splits it into three or more pieces is beyond them, by design.
//!
//! How each form is found:
//!
//! - case: both automatons match ASCII case-insensitively;
//! - reversed, rot13, rot13 reversed: extra patterns in the automatons;
//! - separators: the "squeezed" view of a text keeps only its ASCII letters and digits (with each
//!   one's byte offset in the original); the squeezed forms of every secret are matched in it, and
//!   a match is mapped back to the original span, separators included;
//! - split in two: a secret whose squeezed form has at least `2 * MIN_HALF_LEN` characters and
//!   looks generated (it mixes two of lowercase, uppercase and digits) also has each of its halves
//!   as a pattern — any split into two pieces leaves one half whole in one of them;
//! - base64 of anything (compressed or not): every run of base64 characters (wrapped lines
//!   allowed, as `base64` wraps at 76) of at least [`MIN_BASE64_RUN`] characters is decoded,
//!   inflated when it is gzip, zlib or raw deflate (at most [`MAX_INFLATED_BYTES`] of output), and
//!   the result searched with every form above (one level deeper at most); a hit redacts the
//!   whole run.
//!
//! Invariant: every pass is linear in the text (automaton scans), apart from the bounded inflate
//! of base64 runs; a text without a hit is returned untouched.

use std::io::Read;
use std::ops::Range;

use aho_corasick::AhoCorasick;
use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// A half of a secret is a pattern only when it has at least this many letters and digits
/// (some 70 bits for a random token): shorter halves could occur in ordinary text.
pub const MIN_HALF_LEN: usize = 12;
/// Base64 runs shorter than this are not decoded (they hold at most 11 bytes).
pub const MIN_BASE64_RUN: usize = 16;
/// The most output one base64 run is inflated to (a zip bomb stops here).
pub const MAX_INFLATED_BYTES: u64 = 256 * 1024;
/// Decoded base64 is searched for base64 runs once more, no deeper.
const MAX_DEPTH: usize = 2;

/// `text` with ASCII letters rot13-shifted; everything else kept.
pub fn rot13(text: &str) -> String {
    text.chars()
        .map(|character| match character {
            'a'..='z' => (((character as u8 - b'a') + 13) % 26 + b'a') as char,
            'A'..='Z' => (((character as u8 - b'A') + 13) % 26 + b'A') as char,
            other => other,
        })
        .collect()
}

/// `text` reversed, character by character.
pub fn reversed(text: &str) -> String {
    text.chars().rev().collect()
}

/// The ASCII letters and digits of `text`, in order.
pub fn squeeze(text: &str) -> String {
    text.chars()
        .filter(|character| character.is_ascii_alphanumeric())
        .collect()
}

/// The extra patterns of the plain automaton: the secret reversed, rot13 and rot13 reversed.
pub fn plain_transforms(secret: &str) -> Vec<String> {
    let rotated = rot13(secret);
    vec![reversed(secret), reversed(&rotated), rotated]
}

/// The patterns of the squeezed automaton: the secret's letters and digits (with their reversed
/// and rot13 forms), and each half of them when the secret is long enough.
pub fn squeezed_forms(secret: &str, min_len: usize) -> Vec<String> {
    let squeezed = squeeze(secret);
    if squeezed.len() < min_len {
        return Vec::new();
    }
    let mut pieces = vec![squeezed.clone()];
    if squeezed.len() >= 2 * MIN_HALF_LEN && looks_random(&squeezed) {
        // ASCII only, so any byte index is a character boundary.
        let middle = squeezed.len() / 2;
        pieces.push(squeezed[..middle].to_string());
        pieces.push(squeezed[middle..].to_string());
    }
    let mut forms = Vec::with_capacity(pieces.len() * 4);
    for piece in pieces {
        forms.extend(plain_transforms(&piece));
        forms.push(piece);
    }
    forms
}

/// Whether `text` mixes at least two of lowercase letters, uppercase letters and digits, as
/// generated keys do. A secret made of words ("fake-brave-subscription-token") has halves that
/// ordinary text holds ("subscription token"), so only its whole forms are patterns.
fn looks_random(text: &str) -> bool {
    let classes = [
        text.bytes().any(|byte| byte.is_ascii_lowercase()),
        text.bytes().any(|byte| byte.is_ascii_uppercase()),
        text.bytes().any(|byte| byte.is_ascii_digit()),
    ];
    classes.iter().filter(|present| **present).count() >= 2
}

/// The two automatons a text is searched with.
pub struct Matchers<'a> {
    /// The value, its encodings and [`plain_transforms`], matched in the text as it is.
    pub plain: &'a AhoCorasick,
    /// The [`squeezed_forms`], matched in the squeezed view; `None` when no secret has any.
    pub squeezed: Option<&'a AhoCorasick>,
}

impl Matchers<'_> {
    /// The byte ranges of `text` that hold a secret, in any form this module knows, sorted and
    /// merged. `depth` counts the base64 levels already decoded.
    pub fn spans(&self, text: &[u8], depth: usize) -> Vec<Range<usize>> {
        let mut spans: Vec<Range<usize>> = self
            .plain
            .find_iter(text)
            .map(|found| found.range())
            .collect();
        spans.extend(self.squeezed_spans(text));
        if depth < MAX_DEPTH {
            spans.extend(
                base64_runs(text)
                    .into_iter()
                    .filter(|run| self.run_hides_secret(&text[run.clone()], depth)),
            );
        }
        merge(spans)
    }

    /// Whether `text` holds a secret in any form this module knows.
    pub fn any(&self, text: &[u8], depth: usize) -> bool {
        self.plain.is_match(text)
            || !self.squeezed_spans(text).is_empty()
            || (depth < MAX_DEPTH
                && base64_runs(text)
                    .into_iter()
                    .any(|run| self.run_hides_secret(&text[run], depth)))
    }

    fn squeezed_spans(&self, text: &[u8]) -> Vec<Range<usize>> {
        let Some(automaton) = self.squeezed else {
            return Vec::new();
        };
        let mut squeezed = Vec::new();
        let mut origin = Vec::new();
        for (offset, &byte) in text.iter().enumerate() {
            if byte.is_ascii_alphanumeric() {
                squeezed.push(byte);
                origin.push(offset);
            }
        }
        automaton
            .find_iter(&squeezed)
            .map(|found| origin[found.start()]..origin[found.end() - 1] + 1)
            .collect()
    }

    /// Whether a base64 run decodes (and perhaps inflates) to bytes holding a secret.
    fn run_hides_secret(&self, run: &[u8], depth: usize) -> bool {
        let Some(decoded) = decode_base64(run) else {
            return false;
        };
        if self.any(&decoded, depth + 1) {
            return true;
        }
        inflate(&decoded).is_some_and(|inflated| self.any(&inflated, depth + 1))
    }
}

/// Sorted, with overlapping or touching ranges joined.
fn merge(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.sort_by_key(|span| span.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => merged.push(span),
        }
    }
    merged
}

/// `text` with each of `spans` (sorted, disjoint, on character boundaries) replaced by `with`.
pub fn replace_spans(text: &str, spans: &[Range<usize>], with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut position = 0;
    for span in spans {
        out.push_str(&text[position..span.start]);
        out.push_str(with);
        position = span.end;
    }
    out.push_str(&text[position..]);
    out
}

fn is_base64_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'/' | b'-' | b'_' | b'=')
}

/// The runs of base64 characters of at least [`MIN_BASE64_RUN`] characters. A run may span
/// lines the way `base64` wraps them: lines of one length (a multiple of 4) and a last shorter
/// one, with nothing but line breaks between them — so a word on the line before ("base64") is
/// not taken into the run and does not shift its alignment.
fn base64_runs(text: &[u8]) -> Vec<Range<usize>> {
    let segments = base64_segments(text);
    let mut runs = Vec::new();
    let mut index = 0;
    while index < segments.len() {
        let width = segments[index].len();
        let mut end = index + 1;
        if width.is_multiple_of(4) {
            let adjacent = |before: &Range<usize>, after: &Range<usize>| {
                text[before.end..after.start]
                    .iter()
                    .all(|byte| matches!(byte, b'\n' | b'\r'))
            };
            while end < segments.len()
                && adjacent(&segments[end - 1], &segments[end])
                && segments[end].len() == width
            {
                end += 1;
            }
            if end < segments.len()
                && adjacent(&segments[end - 1], &segments[end])
                && segments[end].len() < width
            {
                end += 1;
            }
        }
        let characters: usize = segments[index..end].iter().map(Range::len).sum();
        if characters >= MIN_BASE64_RUN {
            runs.push(segments[index].start..segments[end - 1].end);
        }
        index = end;
    }
    runs
}

/// The maximal runs of base64 characters of `text`.
fn base64_segments(text: &[u8]) -> Vec<Range<usize>> {
    let mut segments = Vec::new();
    let mut index = 0;
    while index < text.len() {
        if !is_base64_byte(text[index]) {
            index += 1;
            continue;
        }
        let start = index;
        while index < text.len() && is_base64_byte(text[index]) {
            index += 1;
        }
        segments.push(start..index);
    }
    segments
}

/// Decodes a base64 run in either alphabet, padded or not, line breaks ignored; a last partial
/// group is dropped. `None` when it is not base64 at all.
fn decode_base64(run: &[u8]) -> Option<Vec<u8>> {
    let mut characters: Vec<u8> = run
        .iter()
        .copied()
        .filter(|byte| !matches!(byte, b'\n' | b'\r' | b'='))
        .collect();
    if characters.len() % 4 == 1 {
        characters.pop();
    }
    let url_safe = characters.iter().any(|byte| matches!(byte, b'-' | b'_'));
    let config = GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone);
    let alphabet = if url_safe {
        &base64::alphabet::URL_SAFE
    } else {
        &base64::alphabet::STANDARD
    };
    GeneralPurpose::new(alphabet, config)
        .decode(&characters)
        .ok()
}

/// The inflated bytes of gzip, zlib or raw deflate data (at most [`MAX_INFLATED_BYTES`]; what was
/// inflated before an error counts too). `None` when nothing inflates.
fn inflate(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let limit = MAX_INFLATED_BYTES;
    // A stream that fails part way still yields what it inflated before the error.
    let _ = match bytes {
        [0x1f, 0x8b, ..] => flate2::read::GzDecoder::new(bytes)
            .take(limit)
            .read_to_end(&mut out),
        [first, second, ..]
            if first & 0x0f == 8 && (u16::from(*first) << 8 | u16::from(*second)) % 31 == 0 =>
        {
            flate2::read::ZlibDecoder::new(bytes)
                .take(limit)
                .read_to_end(&mut out)
        }
        _ => flate2::read::DeflateDecoder::new(bytes)
            .take(limit)
            .read_to_end(&mut out),
    };
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rot13_and_reversal_are_their_own_inverse() {
        assert_eq!(rot13("Hello, World 42"), "Uryyb, Jbeyq 42");
        assert_eq!(rot13(&rot13("AbcXyz")), "AbcXyz");
        assert_eq!(reversed("abc"), "cba");
        assert_eq!(squeeze("a-b.c d_e\n1"), "abcde1");
    }

    #[test]
    fn halves_are_patterns_only_for_long_secrets() {
        assert_eq!(squeezed_forms("short123", 8).len(), 4);
        assert_eq!(squeezed_forms("tiny", 8).len(), 0);
        assert_eq!(squeezed_forms("abcdefghijklmNOPQRSTUVWXYZ", 8).len(), 12);
        // Words: their halves ("scriptiontoken") are in ordinary text.
        assert_eq!(squeezed_forms("fake-brave-subscription-token", 8).len(), 4);
    }

    #[test]
    fn base64_runs_span_wrapped_lines_and_skip_short_words() {
        let text = b"see base64\nQUJDREVGR0hJSktMTU5PUFFS\nU1RVVldYWVo= and abc";
        let runs = base64_runs(text);
        assert_eq!(runs.len(), 1);
        assert!(text[runs[0].clone()].starts_with(b"QUJD"));
        let decoded = decode_base64(&text[runs[0].clone()]).unwrap();
        assert_eq!(decoded, b"ABCDEFGHIJKLMNOPQRSTUVWXYZ");
    }
}

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
//!
//! The rendering lives in `render.rs`, the reading and cutting of the HTML in `split.rs`; their
//! public functions are re-exported here, which is the path every caller uses.

mod render;
mod split;

pub use render::{escape_html, markdown_to_html};
pub use split::{plain_text, split_html, visible_len_utf16};

/// Telegram's limit on one message's visible text, in UTF-16 code units.
pub const TELEGRAM_MESSAGE_LIMIT: usize = 4096;

#[cfg(test)]
mod tests;

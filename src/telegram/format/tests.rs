//! Unit tests of the rendering and the splitting, checked with the fake Telegram's own parser.

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

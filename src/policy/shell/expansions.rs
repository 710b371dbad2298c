//! Which parameter and brace expansions the lexer models; anything else is L3.

/// Whether `${…}` (the raw text from `$` on; anything after the closing brace is ignored) is one
/// of the forms the classifier models: `${name}`, `${#name}`, and `${name}` with `-`, `+`, `?`,
/// `=`-free defaults or `#`/`%` trimming whose word holds no further expansion or subscript.
/// Everything else (`${x@P}` prompt expansion, `${!x}` indirection, `${a[i]}` subscripts and
/// `${x:offset}` arithmetic, `${x/…}`, `${x^}`, assignments with `=`) is not modelled.
pub(super) fn parameter_expansion_is_modelled(raw: &str) -> bool {
    let Some(inner) = raw.strip_prefix("${") else {
        return false;
    };
    let Some(end) = inner.find('}') else {
        return false;
    };
    let inner = &inner[..end];
    let inner = inner
        .strip_prefix('#')
        .filter(|rest| !rest.is_empty())
        .unwrap_or(inner);
    let name_length = if inner.starts_with(|c: char| c.is_ascii_digit() || "@*#?$-".contains(c)) {
        1
    } else {
        inner
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(inner.len())
    };
    if name_length == 0 {
        return false;
    }
    let operator_and_word = &inner[name_length..];
    if operator_and_word.is_empty() {
        return true;
    }
    let word = [":-", ":+", ":?", "-", "+", "?", "##", "#", "%%", "%"]
        .iter()
        .find_map(|operator| operator_and_word.strip_prefix(operator));
    word.is_some_and(|word| !word.contains(['$', '[', '`', '{', '\\']))
}

/// Whether the text from an unquoted `{` is a brace sequence expression (`{1..5}`, `{a..z..2}`):
/// it runs to a `}` before any blank, quote or operator and holds `..`.
pub(super) fn starts_brace_sequence(characters: &[char]) -> bool {
    let body: String = characters
        .iter()
        .skip(1)
        .take_while(|&&c| !" \t\n;&|<>(){}'\"$`\\".contains(c))
        .collect();
    characters.get(body.chars().count() + 1) == Some(&'}') && body.contains("..")
}

//! Whole-command patterns: fork bombs and brace expansion.

use super::*;

// ---------------------------------------------------------------------------------------------
// Whole-command patterns.
// ---------------------------------------------------------------------------------------------

/// A function that pipes into itself in the background: `:(){ :|:& };:`, `bomb(){ bomb|bomb& }`.
pub(super) fn looks_like_fork_bomb(command: &str) -> bool {
    let compact: String = command.chars().filter(|c| !c.is_whitespace()).collect();
    let is_boundary = |c: char| matches!(c, ';' | '&' | '|' | '(' | ')' | '{' | '}');
    let mut definitions: Vec<String> = Vec::new();
    for (at, _) in compact.match_indices("(){") {
        let before = &compact[..at];
        let name_start = before.rfind(is_boundary).map_or(0, |boundary| boundary + 1);
        let name = &before[name_start..];
        let name = name
            .strip_prefix("function")
            .filter(|rest| !rest.is_empty())
            .unwrap_or(name);
        if !name.is_empty() {
            definitions.push(name.to_string());
        }
    }
    for (at, _) in compact.match_indices("function") {
        // Only the keyword at the start of a command, not `grep -c function …`.
        if compact[..at]
            .chars()
            .next_back()
            .is_some_and(|c| !is_boundary(c))
        {
            continue;
        }
        let after = &compact[at + "function".len()..];
        let name_end = after.find(is_boundary).unwrap_or(after.len());
        if name_end > 0 {
            definitions.push(after[..name_end].to_string());
        }
    }
    definitions
        .iter()
        .any(|name| compact.contains(&format!("{name}|{name}")))
}

/// Expands `{a,b}` in the words that hold an unquoted brace group; None when it grows too large.
pub(super) fn expand_braces_in(words: &[Word]) -> Option<Vec<Word>> {
    let mut expanded = Vec::with_capacity(words.len());
    for word in words {
        if !word.has_brace_expansion() {
            expanded.push(word.clone());
            continue;
        }
        for text in expand_braces(&word.text)? {
            expanded.push(Word {
                text,
                ..word.clone()
            });
        }
        if expanded.len() > MAX_BRACE_EXPANSION_WORDS + words.len() {
            return None;
        }
    }
    Some(expanded)
}

pub(super) fn expand_braces(text: &str) -> Option<Vec<String>> {
    let mut done = Vec::new();
    let mut pending = vec![text.to_string()];
    let mut steps = 0;
    while let Some(current) = pending.pop() {
        steps += 1;
        if steps > 4 * MAX_BRACE_EXPANSION_WORDS {
            return None;
        }
        let Some((open, close)) = first_brace_group(&current) else {
            done.push(current);
            continue;
        };
        let prefix = &current[..open];
        let suffix = &current[close + 1..];
        let body = &current[open + 1..close];
        let mut alternatives = Vec::new();
        let mut depth = 0usize;
        let mut start = 0;
        for (offset, character) in body.char_indices() {
            match character {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    alternatives.push(&body[start..offset]);
                    start = offset + 1;
                }
                _ => {}
            }
        }
        alternatives.push(&body[start..]);
        // Pushed in reverse so that the stack pops them in order.
        for alternative in alternatives.iter().rev() {
            pending.push(format!("{prefix}{alternative}{suffix}"));
        }
        if done.len() + pending.len() > MAX_BRACE_EXPANSION_WORDS {
            return None;
        }
    }
    Some(done)
}

/// The outermost `{…,…}` group that opens first, as byte offsets of its braces.
pub(super) fn first_brace_group(text: &str) -> Option<(usize, usize)> {
    let mut open_braces: Vec<(usize, bool)> = Vec::new();
    let mut best: Option<(usize, usize)> = None;
    for (offset, character) in text.char_indices() {
        match character {
            '{' => open_braces.push((offset, false)),
            ',' => {
                if let Some(innermost) = open_braces.last_mut() {
                    innermost.1 = true;
                }
            }
            '}' => {
                if let Some((open, has_comma)) = open_braces.pop()
                    && has_comma
                    && best.is_none_or(|(best_open, _)| open < best_open)
                {
                    best = Some((open, offset));
                }
            }
            _ => {}
        }
    }
    best
}

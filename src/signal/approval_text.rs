//! Approvals as text, for channels without buttons (Signal): the prompt says exactly what to
//! reply — `yes 7f3a` or `no 7f3a` — and a reply decides only when it is exactly that.
//!
//! The code is the start of the SHA-256 of the approval id, in lower-case hex: four characters,
//! or as many more as it takes to differ from every other open approval's code
//! ([`short_code`]). The code is fixed when the prompt is posted (store it with the approval);
//! a later approval never takes a code an open one has, so a reply names at most one.
//!
//! Parsing ([`parse_reply`]) is strict: the whole message must be `yes <code>` or `no <code>`;
//! letter case, surrounding whitespace and the amount of whitespace between the two words do
//! not matter. Anything else — `yes`, `ok 7f3a`, `yes 7f3a please`, `yes 7f3` — decides nothing
//! and is an ordinary message. Who may decide is the approval desk's rule, not this module's.
//!
//! Invariants: pure (no I/O, no clock); never panics on any text.

use sha2::{Digest, Sha256};

/// A code has at least this many hex characters.
pub const MIN_CODE_LEN: usize = 4;
/// A code has at most this many (the whole hash).
pub const MAX_CODE_LEN: usize = 64;

/// A reply that names a code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDecision {
    pub approve: bool,
    /// The code, lower case.
    pub code: String,
}

/// The full hex hash an approval's codes are prefixes of.
fn code_source(approval_id: &str) -> String {
    hex::encode(Sha256::digest(approval_id.as_bytes()))
}

/// The shortest prefix (at least [`MIN_CODE_LEN`]) of the approval's hash that equals none of
/// `open_codes` (the codes of the other approvals still open in the same chat or account).
pub fn short_code<'a>(approval_id: &str, open_codes: impl IntoIterator<Item = &'a str>) -> String {
    let source = code_source(approval_id);
    let taken: Vec<String> = open_codes
        .into_iter()
        .map(str::to_ascii_lowercase)
        .collect();
    for len in MIN_CODE_LEN..=MAX_CODE_LEN {
        let candidate = &source[..len];
        if !taken.iter().any(|code| code == candidate) {
            return candidate.to_string();
        }
    }
    // Only an open approval with the same id has the whole hash; it is the same approval.
    source
}

/// The line a prompt ends with: exactly what to reply, for either answer.
pub fn reply_instructions(code: &str) -> String {
    format!("To allow it, reply: yes {code}\nTo refuse it, reply: no {code}")
}

/// Reads a reply strictly; `None` unless it is exactly `yes <code>` or `no <code>`.
pub fn parse_reply(text: &str) -> Option<TextDecision> {
    let mut words = text.split_whitespace();
    let answer = words.next()?;
    let code = words.next()?;
    if words.next().is_some() {
        return None;
    }
    let approve = if answer.eq_ignore_ascii_case("yes") {
        true
    } else if answer.eq_ignore_ascii_case("no") {
        false
    } else {
        return None;
    };
    let well_formed = (MIN_CODE_LEN..=MAX_CODE_LEN).contains(&code.len())
        && code.bytes().all(|byte| byte.is_ascii_hexdigit());
    well_formed.then(|| TextDecision {
        approve,
        code: code.to_ascii_lowercase(),
    })
}

/// The open approval a reply decides, and how: `open` pairs each open approval's id with the
/// code its prompt showed. `None` when the reply is not a decision or names no open approval.
pub fn decide<'a>(
    reply: &str,
    open: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<(&'a str, bool)> {
    let decision = parse_reply(reply)?;
    let mut matching = open
        .into_iter()
        .filter(|(_, code)| code.eq_ignore_ascii_case(&decision.code));
    let (id, _) = matching.next()?;
    // Codes are unique among open approvals; two matches would be a bug elsewhere: decide none.
    if matching.next().is_some() {
        return None;
    }
    Some((id, decision.approve))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_prompt_says_exactly_what_to_reply_and_that_reply_decides() {
        let code = short_code("appr-1", []);
        assert_eq!(code.len(), MIN_CODE_LEN);
        let prompt = reply_instructions(&code);
        assert!(prompt.contains(&format!("yes {code}")) && prompt.contains(&format!("no {code}")));
        let open = [("appr-1", code.as_str())];
        assert_eq!(decide(&format!("yes {code}"), open), Some(("appr-1", true)));
        assert_eq!(
            decide(&format!("  NO   {}\n", code.to_uppercase()), open),
            Some(("appr-1", false))
        );
    }

    #[test]
    fn near_misses_decide_nothing() {
        let code = short_code("appr-1", []);
        let open = [("appr-1", code.as_str())];
        for reply in [
            "yes".to_string(),
            format!("yes {code} please"),
            format!("ok {code}"),
            format!("yes{code}"),
            format!("yes {}", &code[..3]),
            format!("yes {code}0"),
            format!("yes, {code}"),
            format!("y {code}"),
            format!("yes {code}."),
            String::new(),
        ] {
            assert_eq!(decide(&reply, open), None, "{reply:?}");
        }
    }

    #[test]
    fn a_colliding_prefix_gets_a_longer_code() {
        let first = short_code("a", []);
        // Pretend another open approval already holds exactly this approval's 4-character code.
        let second = short_code("a", [first.as_str()]);
        assert_eq!(second.len(), MIN_CODE_LEN + 1);
        assert!(second.starts_with(&first));
        let open = [("other", first.as_str()), ("a", second.as_str())];
        assert_eq!(decide(&format!("yes {first}"), open), Some(("other", true)));
        assert_eq!(decide(&format!("no {second}"), open), Some(("a", false)));
    }

    proptest! {
        #[test]
        fn codes_of_open_approvals_never_collide(ids in proptest::collection::hash_set("[a-z0-9-]{1,12}", 1..60)) {
            let mut open: Vec<(String, String)> = Vec::new();
            for id in ids {
                let code = short_code(&id, open.iter().map(|(_, code)| code.as_str()));
                prop_assert!(open.iter().all(|(_, other)| other != &code));
                open.push((id, code));
            }
            for (id, code) in &open {
                let pairs = open.iter().map(|(id, code)| (id.as_str(), code.as_str()));
                prop_assert_eq!(decide(&format!("yes {code}"), pairs), Some((id.as_str(), true)));
            }
        }

        #[test]
        fn any_text_decides_at_most_what_it_names(text in "\\PC{0,40}") {
            let code = short_code("x", []);
            let open = [("x", code.as_str())];
            if let Some((_, approve)) = decide(&text, open) {
                let words: Vec<&str> = text.split_whitespace().collect();
                prop_assert_eq!(words.len(), 2);
                prop_assert!(words[1].eq_ignore_ascii_case(&code));
                prop_assert_eq!(approve, words[0].eq_ignore_ascii_case("yes"));
            }
        }

        #[test]
        fn case_and_whitespace_do_not_matter(upper in any::<bool>(), before in "[ \t\n]{0,3}", between in "[ \t]{1,3}", after in "[ \t\n]{0,3}") {
            let code = short_code("y", []);
            let shown = if upper { code.to_uppercase() } else { code.clone() };
            let reply = format!("{before}Yes{between}{shown}{after}");
            prop_assert_eq!(decide(&reply, [("y", code.as_str())]), Some(("y", true)));
        }
    }
}

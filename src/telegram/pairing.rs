//! Pairing codes for unknown Telegram users (and bots' claim codes, `people`): 8 characters from
//! an alphabet without look-alikes (no 0/O, no 1/I), shown as `ABCD-EFGH`; a pairing code is
//! valid for an hour.

use rand::Rng;

const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
pub const VALIDITY_MS: i64 = 3_600_000;

/// A fresh code, without the dash (as stored).
pub fn new_code() -> String {
    let mut rng = rand::rng();
    (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Whether `text` is shaped like a code as stored: 8 characters of the alphabet.
pub fn is_code(text: &str) -> bool {
    text.len() == 8 && text.bytes().all(|byte| ALPHABET.contains(&byte))
}

/// `ABCDEFGH` → `ABCD-EFGH`.
pub fn display(code: &str) -> String {
    if code.len() == 8 {
        format!("{}-{}", &code[..4], &code[4..])
    } else {
        code.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_avoid_ambiguous_characters_and_display_with_a_dash() {
        for _ in 0..500 {
            let code = new_code();
            assert_eq!(code.len(), 8);
            assert!(!code.contains(['0', 'O', '1', 'I']), "{code}");
            assert_eq!(
                crate::store::telegram::normalize_code(&display(&code).to_lowercase()),
                code
            );
        }
    }
}

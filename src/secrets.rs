//! Secrets (bot tokens, API keys) and the redactor that keeps them out of logs, errors and Studio.
//!
//! Every secret the daemon reads from the environment is registered here once. [`redact`] replaces
//! each registered value with `***`; the tracing writer (src/logging.rs) runs every log line
//! through it, and error texts that leave a boundary (LLM errors, Telegram errors, Studio) do too.
//! A bot token also appears inside Telegram URLs (`/bot<TOKEN>/getMe`), so redacting by value is
//! the only way to be sure.

use std::borrow::Cow;
use std::sync::{OnceLock, RwLock};

/// Secrets shorter than this are not registered: redacting "abc" everywhere would mangle text.
const MIN_SECRET_LEN: usize = 8;

fn registry() -> &'static RwLock<Vec<String>> {
    static SECRETS: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    SECRETS.get_or_init(|| RwLock::new(Vec::new()))
}

/// Remembers a secret value so that it is redacted from now on.
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    // A poisoned lock only means another thread panicked while holding it; the list is still valid.
    let mut secrets = registry()
        .write()
        .unwrap_or_else(|poison| poison.into_inner());
    if !secrets.iter().any(|known| known == secret) {
        secrets.push(secret.to_string());
        // Longest first, so that a secret containing another is replaced whole.
        secrets.sort_by_key(|known| std::cmp::Reverse(known.len()));
    }
}

/// Returns `text` with every registered secret replaced by `***`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let secrets = registry()
        .read()
        .unwrap_or_else(|poison| poison.into_inner());
    if !secrets.iter().any(|secret| text.contains(secret.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut owned = text.to_string();
    for secret in secrets.iter() {
        if owned.contains(secret.as_str()) {
            owned = owned.replace(secret.as_str(), "***");
        }
    }
    Cow::Owned(owned)
}

/// A secret value read from the environment. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Reads `var` from the environment and registers the value for redaction.
    pub fn from_env(var: &str) -> Option<Secret> {
        let value = std::env::var(var).ok()?;
        let value = value.trim().to_string();
        if value.is_empty() {
            return None;
        }
        register(&value);
        Some(Secret(value))
    }

    /// Wraps a literal value (tests, tokens handed over by the caller) and registers it.
    pub fn new(value: impl Into<String>) -> Secret {
        let value = value.into();
        register(&value);
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_redacted_everywhere_in_a_text() {
        let token = Secret::new("123456:AAEsecret-token-value");
        let text = format!(
            "error sending request for url (https://api.telegram.org/bot{}/GetUpdates) twice {}",
            token.expose(),
            token.expose()
        );
        let redacted = redact(&text);
        assert!(!redacted.contains(token.expose()));
        assert_eq!(redacted.matches("***").count(), 2);
        assert_eq!(format!("{token:?}"), "Secret(***)");
    }

    #[test]
    fn short_values_are_not_treated_as_secrets() {
        register("abc");
        assert_eq!(redact("abc def"), "abc def");
    }
}

//! How a webhook delivery proves itself and is told apart: the signature or bearer secret, the
//! delivery id, and the per-trigger rate window. Pure functions over bytes and clocks, so that the
//! fuzz target and the unit tests reach them without a daemon.
//!
//! Invariants: a secret is compared in constant time (`hmac`'s `verify_slice`, `subtle` for a
//! bearer token); an empty secret authenticates nothing; a delivery id is at most
//! [`MAX_DELIVERY_ID`] printable ASCII characters, else the body's SHA-256 stands for it.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The longest delivery id taken from a header; a longer one is replaced by the body's hash.
pub const MAX_DELIVERY_ID: usize = 128;

/// Whether the request carries the trigger's secret: `X-Signature-256: sha256=<hex>` (HMAC-SHA256
/// of the raw body, GitHub style; `X-Hub-Signature-256` is read the same) or `Authorization:
/// Bearer <secret>`. Either one that checks out is enough.
pub fn authenticate(
    signature: Option<&str>,
    authorization: Option<&str>,
    body: &[u8],
    secret: &[u8],
) -> bool {
    if secret.is_empty() {
        return false;
    }
    let signed = signature.is_some_and(|header| signature_matches(header, body, secret));
    let bearer = authorization.is_some_and(|header| bearer_matches(header, secret));
    signed || bearer
}

/// `sha256=<hex>` is the HMAC-SHA256 of `body` under `secret`.
fn signature_matches(header: &str, body: &[u8], secret: &[u8]) -> bool {
    let Some(hex_digest) = header.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Ok(given) = hex::decode(hex_digest.trim()) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// `Bearer <secret>`, compared in constant time.
fn bearer_matches(header: &str, secret: &[u8]) -> bool {
    let Some(token) = header.trim().strip_prefix("Bearer ") else {
        return false;
    };
    token.trim().as_bytes().ct_eq(secret).into()
}

/// The `X-Signature-256` value a sender computes: `sha256=` and the hex HMAC of `body`.
pub fn sign(body: &[u8], secret: &[u8]) -> String {
    // HMAC takes a key of any length, so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The delivery's id: the first usable header value (`X-Delivery-Id`, then GitHub's
/// `X-GitHub-Delivery`), else `sha256:<hex of the body>`, so an identical body counts as a
/// redelivery.
pub fn delivery_id<'a>(headers: impl IntoIterator<Item = Option<&'a str>>, body: &[u8]) -> String {
    headers
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|id| {
            !id.is_empty()
                && id.len() <= MAX_DELIVERY_ID
                && id.bytes().all(|byte| byte.is_ascii_graphic())
        })
        .map(str::to_string)
        .unwrap_or_else(|| format!("sha256:{}", hex::encode(Sha256::digest(body))))
}

/// A sliding one-minute window of accepted deliveries per trigger, in memory (a restart forgets
/// it, which only lets a minute's worth through again).
#[derive(Debug, Default)]
pub struct RateWindow {
    accepted: Mutex<HashMap<String, VecDeque<Instant>>>,
}

impl RateWindow {
    /// Counts one delivery of `trigger` at `now` if fewer than `per_minute` were accepted in the
    /// last minute; otherwise how long until one more would be.
    pub fn admit(&self, trigger: &str, per_minute: u32, now: Instant) -> Result<(), Duration> {
        const MINUTE: Duration = Duration::from_secs(60);
        // A panic while holding the lock leaves whole timestamps: the data stays usable.
        let mut accepted = self
            .accepted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let times = accepted.entry(trigger.to_string()).or_default();
        while times
            .front()
            .is_some_and(|first| now.saturating_duration_since(*first) >= MINUTE)
        {
            times.pop_front();
        }
        if times.len() >= per_minute as usize {
            let oldest = times.front().copied().unwrap_or(now);
            return Err(MINUTE.saturating_sub(now.saturating_duration_since(oldest)));
        }
        times.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_or_a_bearer_token_authenticates_and_nothing_else_does() {
        let body = br#"{"event":"ring"}"#;
        let signature = sign(body, b"s3cret");
        assert!(authenticate(Some(&signature), None, body, b"s3cret"));
        assert!(authenticate(None, Some("Bearer s3cret"), body, b"s3cret"));
        assert!(!authenticate(Some(&signature), None, b"other", b"s3cret"));
        assert!(!authenticate(Some(&signature), None, body, b"wrong"));
        assert!(!authenticate(Some("sha256=zz"), None, body, b"s3cret"));
        assert!(!authenticate(Some("sha1=00"), None, body, b"s3cret"));
        assert!(!authenticate(None, Some("Bearer s3cre"), body, b"s3cret"));
        assert!(!authenticate(None, Some("Basic s3cret"), body, b"s3cret"));
        assert!(!authenticate(None, None, body, b"s3cret"));
        assert!(!authenticate(None, Some("Bearer "), body, b""));
    }

    #[test]
    fn the_delivery_id_is_the_first_usable_header_else_the_body_hash() {
        assert_eq!(delivery_id([Some("abc-1"), Some("gh")], b"x"), "abc-1");
        assert_eq!(delivery_id([None, Some("gh-2")], b"x"), "gh-2");
        let hashed = delivery_id([Some(""), Some("has space")], b"x");
        assert!(hashed.starts_with("sha256:"), "{hashed}");
        assert_eq!(hashed, delivery_id([None, None], b"x"));
        assert_ne!(hashed, delivery_id([None, None], b"y"));
        let long = "a".repeat(MAX_DELIVERY_ID + 1);
        assert!(delivery_id([Some(long.as_str())], b"x").starts_with("sha256:"));
    }

    #[test]
    fn the_window_admits_per_minute_and_says_when_the_next_fits() {
        let window = RateWindow::default();
        let start = Instant::now();
        assert!(window.admit("bell", 2, start).is_ok());
        assert!(window.admit("bell", 2, start).is_ok());
        let wait = window.admit("bell", 2, start + Duration::from_secs(10));
        assert_eq!(wait, Err(Duration::from_secs(50)));
        assert!(window.admit("other", 2, start).is_ok());
        assert!(
            window
                .admit("bell", 2, start + Duration::from_secs(60))
                .is_ok()
        );
    }
}

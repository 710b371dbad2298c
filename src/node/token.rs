//! Approval tokens: what lets a node run an action above L0. The daemon mints one after its
//! policy allowed the call or a person approved it; the node verifies it before running.
//!
//! A token is `base64url(payload JSON) . base64url(ed25519 signature of those bytes)`. The payload
//! names the node, the tool, the action's hash (SHA-256 of the tool name and its arguments in a
//! canonical JSON form: object keys sorted, no spaces), the level and sandbox profile the daemon
//! rated it with, an expiry and a random nonce. The node checks the signature with the public key
//! it was given at pairing, then the node name, expiry, hash, that the level is at least its own
//! rating and the profile is its own, and records the nonce (`node_actions`) before running, so a
//! token runs at most once even across restarts.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{ED25519, Ed25519KeyPair, UnparsedPublicKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How long a token is valid after it is minted.
pub const TOKEN_LIFETIME_MS: i64 = 120_000;

/// What a token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenPayload {
    pub node: String,
    pub tool: String,
    pub action_hash: String,
    /// `L1`, `L2`, `L3`.
    pub level: String,
    /// The sandbox profile in words (`policy::Reach::describe`), empty for file tools.
    pub profile: String,
    pub expires_ms: i64,
    pub nonce: String,
}

/// JSON with object keys sorted and no whitespace: the same arguments hash the same on both
/// sides whatever order the model wrote them in.
pub fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|key| {
                    format!(
                        "{}:{}",
                        Value::String(key.clone()),
                        canonical_json(&fields[key])
                    )
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

/// SHA-256 (hex) of the tool's name and its canonical arguments.
pub fn action_hash(tool: &str, arguments: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update(b"\n");
    hasher.update(canonical_json(arguments).as_bytes());
    hex::encode(hasher.finalize())
}

/// A fresh random nonce (128 bits, hex).
pub fn new_nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// Signs `payload` with the daemon's token key.
pub fn mint(key: &Ed25519KeyPair, payload: &TokenPayload) -> String {
    // A struct of strings and integers always serializes.
    let bytes = serde_json::to_vec(payload).expect("a token payload is plain data");
    let signature = key.sign(&bytes);
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&bytes),
        URL_SAFE_NO_PAD.encode(signature.as_ref())
    )
}

/// Why a node refused a token, in words for the daemon's run (and its model).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error(
        "this action needs the daemon's approval token and none was sent (actions above L0 run only with one)"
    )]
    Missing,
    #[error("the approval token is not valid (malformed or not signed by this node's daemon)")]
    BadSignature,
    #[error("the approval token is for node `{0}`, not this one")]
    OtherNode(String),
    #[error("the approval token expired; ask again")]
    Expired,
    #[error("the approval token is for a different action (its hash does not match)")]
    OtherAction,
    #[error("the approval token allows {granted} but this node rates the action {needed}")]
    LevelTooLow { granted: String, needed: String },
    #[error("the approval token is for another sandbox profile than this node would use")]
    OtherProfile,
    #[error("the approval token was already used; a token runs its action once")]
    Replayed,
}

/// Checks signature, node, expiry, hash, level and profile (not the nonce: the caller records it).
pub fn verify(
    token: &str,
    public_key_hex: &str,
    expected: &Expected<'_>,
    now_ms: i64,
) -> Result<TokenPayload, TokenRefusal> {
    let (payload_part, signature_part) = token.split_once('.').ok_or(TokenRefusal::BadSignature)?;
    let payload_bytes = URL_SAFE_NO_PAD
        .decode(payload_part)
        .map_err(|_| TokenRefusal::BadSignature)?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature_part)
        .map_err(|_| TokenRefusal::BadSignature)?;
    let public_key = hex::decode(public_key_hex).map_err(|_| TokenRefusal::BadSignature)?;
    UnparsedPublicKey::new(&ED25519, &public_key)
        .verify(&payload_bytes, &signature)
        .map_err(|_| TokenRefusal::BadSignature)?;
    let payload: TokenPayload =
        serde_json::from_slice(&payload_bytes).map_err(|_| TokenRefusal::BadSignature)?;
    if payload.node != expected.node {
        return Err(TokenRefusal::OtherNode(payload.node));
    }
    if payload.expires_ms <= now_ms {
        return Err(TokenRefusal::Expired);
    }
    if payload.tool != expected.tool || payload.action_hash != expected.action_hash {
        return Err(TokenRefusal::OtherAction);
    }
    if level_rank(&payload.level) < level_rank(expected.level) {
        return Err(TokenRefusal::LevelTooLow {
            granted: payload.level,
            needed: expected.level.to_string(),
        });
    }
    if payload.profile != expected.profile {
        return Err(TokenRefusal::OtherProfile);
    }
    Ok(payload)
}

/// What the node itself computed for the call it was asked to run.
pub struct Expected<'a> {
    pub node: &'a str,
    pub tool: &'a str,
    pub action_hash: &'a str,
    pub level: &'a str,
    pub profile: &'a str,
}

fn level_rank(level: &str) -> u8 {
    match level {
        "L0" => 0,
        "L1" => 1,
        "L2" => 2,
        "L3" => 3,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Ed25519KeyPair {
        let rng = ring::rand::SystemRandom::new();
        let document = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        Ed25519KeyPair::from_pkcs8(document.as_ref()).unwrap()
    }

    proptest::proptest! {
        /// Whatever a caller sends as a token (bytes, dots, base64 of anything) is refused in
        /// words, never a panic.
        #[test]
        fn any_token_text_is_refused_without_a_panic(token in ".{0,300}", dots in "[A-Za-z0-9_.-]{0,200}") {
            let expected = Expected { node: "nas", tool: "shell", action_hash: "00", level: "L2", profile: "" };
            let key = hex::encode([7u8; 32]);
            proptest::prop_assert!(verify(&token, &key, &expected, 0).is_err());
            proptest::prop_assert!(verify(&dots, &key, &expected, 0).is_err());
        }
    }

    #[test]
    fn canonical_form_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":[1,"x"],"x":null}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":null,"y":[1,"x"]},"b":1}"#).unwrap();
        assert_eq!(action_hash("shell", &a), action_hash("shell", &b));
        assert_ne!(action_hash("shell", &a), action_hash("read_file", &a));
    }

    #[test]
    fn a_token_verifies_only_for_its_action_and_key() {
        let signer = key();
        let public = hex::encode(ring::signature::KeyPair::public_key(&signer).as_ref());
        let hash = action_hash("shell", &serde_json::json!({"command": "touch x"}));
        let payload = TokenPayload {
            node: "nas".into(),
            tool: "shell".into(),
            action_hash: hash.clone(),
            level: "L2".into(),
            profile: "p".into(),
            expires_ms: 1_000,
            nonce: new_nonce(),
        };
        let token = mint(&signer, &payload);
        let expected = Expected {
            node: "nas",
            tool: "shell",
            action_hash: &hash,
            level: "L2",
            profile: "p",
        };
        assert_eq!(verify(&token, &public, &expected, 500), Ok(payload));
        assert_eq!(
            verify(&token, &public, &expected, 1_000),
            Err(TokenRefusal::Expired)
        );
        let other = Expected {
            action_hash: "00",
            ..expected
        };
        assert_eq!(
            verify(&token, &public, &other, 500),
            Err(TokenRefusal::OtherAction)
        );
        let stranger = hex::encode(ring::signature::KeyPair::public_key(&key()).as_ref());
        assert_eq!(
            verify(&token, &stranger, &expected, 500),
            Err(TokenRefusal::BadSignature)
        );
        let mut forged = token.clone();
        forged.insert(3, 'A');
        assert_eq!(
            verify(&forged, &public, &expected, 500),
            Err(TokenRefusal::BadSignature)
        );
    }
}

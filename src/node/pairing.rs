//! Pairing: a one-time code made on the node (`clawvisor node pair`), proven by both sides over
//! the TLS channel, after which each side pins the other's certificate.
//!
//! The code is never sent. The daemon sends `HMAC(code, "daemon" ‖ daemon fp ‖ node fp ‖ token
//! key ‖ node name)` over a connection where each side sees the other's certificate; the node
//! computes the same from what *it* sees and answers `HMAC(code, "node" ‖ …)`. A machine in the
//! middle presents other certificates, so neither proof matches and nothing is pinned. A code
//! lives 10 minutes, is used once, and is void after 5 wrong proofs.
//!
//! Files: the node keeps `<data dir>/node/pair-code.json` (while a code is pending) and
//! `<data dir>/node/daemon.json` (its daemon's fingerprint and token key); the daemon keeps
//! `<data dir>/nodes/<name>/pin.json`. All 0600 (`keys::write_private`).

use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::keys::{read_json, write_json};

/// How long a pairing code is valid.
pub const CODE_LIFETIME_MS: i64 = 10 * 60 * 1000;
/// Wrong proofs after which a code is void.
pub const MAX_WRONG_PROOFS: u32 = 5;
/// The letters a code is made of (no 0/O, 1/I/L).
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// A pending code on the node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingCode {
    pub code: String,
    pub expires_ms: i64,
    #[serde(default)]
    pub wrong: u32,
}

/// The node's record of its daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonPin {
    pub fingerprint: String,
    pub token_public_key: String,
    /// The name the daemon calls this node (tokens name it).
    pub node_name: String,
    pub paired_ms: i64,
}

/// The daemon's record of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePin {
    pub fingerprint: String,
    pub url: String,
    pub paired_ms: i64,
}

/// What the daemon sends to `/pair`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairRequest {
    pub node_name: String,
    pub token_public_key: String,
    pub proof: String,
}

/// What the node answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairAnswer {
    pub proof: String,
    pub version: String,
}

/// The node's directory: `<data dir>/node`.
pub fn node_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("node")
}

/// The daemon's directory for its nodes: `<data dir>/nodes`.
pub fn nodes_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("nodes")
}

/// Where the daemon keeps one node's pin.
pub fn pin_path(data_dir: &Path, node: &str) -> PathBuf {
    nodes_dir(data_dir).join(node).join("pin.json")
}

/// Makes a new code (replacing a pending one), valid for [`CODE_LIFETIME_MS`] from `now_ms`.
pub fn make_code(data_dir: &Path, now_ms: i64) -> Result<PendingCode, String> {
    let letters: String = (0..10)
        .map(|_| {
            let index = rand::random_range(0..CODE_ALPHABET.len());
            CODE_ALPHABET[index] as char
        })
        .collect();
    let code = format!("{}-{}", &letters[..5], &letters[5..]);
    let pending = PendingCode {
        code,
        expires_ms: now_ms + CODE_LIFETIME_MS,
        wrong: 0,
    };
    write_json(&node_dir(data_dir).join("pair-code.json"), &pending)?;
    Ok(pending)
}

/// The pending code, if one is and has not expired.
pub fn pending_code(data_dir: &Path, now_ms: i64) -> Option<PendingCode> {
    read_json::<PendingCode>(&node_dir(data_dir).join("pair-code.json"))
        .ok()
        .flatten()
        .filter(|pending| pending.expires_ms > now_ms && pending.wrong < MAX_WRONG_PROOFS)
}

/// The node's daemon, if paired.
pub fn daemon_pin(data_dir: &Path) -> Result<Option<DaemonPin>, String> {
    read_json(&node_dir(data_dir).join("daemon.json"))
}

/// Forgets the daemon (a revocation): the node accepts nobody until it is paired again.
pub fn forget_daemon(data_dir: &Path) -> Result<(), String> {
    match std::fs::remove_file(node_dir(data_dir).join("daemon.json")) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(format!("cannot forget the daemon: {error}")),
    }
}

/// The proof of one side (`role` is `daemon` or `node`).
pub fn proof(
    code: &str,
    role: &str,
    daemon_fingerprint: &str,
    node_fingerprint: &str,
    request: (&str, &str),
) -> String {
    let normalized: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(normalized.as_bytes())
        .expect("HMAC accepts keys of any length");
    for part in [
        role,
        daemon_fingerprint,
        node_fingerprint,
        request.0,
        request.1,
    ] {
        mac.update(part.as_bytes());
        mac.update(b"\n");
    }
    hex::encode(mac.finalize().into_bytes())
}

/// Equal in constant time.
pub fn proofs_match(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The node's side of `/pair`: checks the daemon's proof against the pending code; on success
/// pins the daemon and consumes the code, and returns the node's proof.
pub fn accept_pairing(
    data_dir: &Path,
    request: &PairRequest,
    daemon_fingerprint: &str,
    node_fingerprint: &str,
    now_ms: i64,
) -> Result<PairAnswer, String> {
    let Some(mut pending) = pending_code(data_dir, now_ms) else {
        return Err(
            "this node has no pairing code waiting (or it expired): run `clawvisor node pair` \
             on the node and use the new code"
                .to_string(),
        );
    };
    let fields = (
        request.token_public_key.as_str(),
        request.node_name.as_str(),
    );
    let expected = proof(
        &pending.code,
        "daemon",
        daemon_fingerprint,
        node_fingerprint,
        fields,
    );
    if !proofs_match(&expected, &request.proof) {
        pending.wrong += 1;
        write_json(&node_dir(data_dir).join("pair-code.json"), &pending)?;
        return Err(
            "the pairing code does not match: check the code `clawvisor node pair` printed on \
             that computer (a code works once, for 10 minutes; if it does match, something \
             between the two machines changed the connection)"
                .to_string(),
        );
    }
    write_json(
        &node_dir(data_dir).join("daemon.json"),
        &DaemonPin {
            fingerprint: daemon_fingerprint.to_string(),
            token_public_key: request.token_public_key.clone(),
            node_name: request.node_name.clone(),
            paired_ms: now_ms,
        },
    )?;
    let _ = std::fs::remove_file(node_dir(data_dir).join("pair-code.json"));
    Ok(PairAnswer {
        proof: proof(
            &pending.code,
            "node",
            daemon_fingerprint,
            node_fingerprint,
            fields,
        ),
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

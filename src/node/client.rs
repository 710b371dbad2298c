//! The daemon's side of the wire: its keys (`<data dir>/nodes/identity.*`, `token.key`), the
//! HTTPS client that presents its certificate and accepts only a node's pinned one, pairing
//! (`nodes add`), revocation (`nodes remove`) and a node's health.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ring::signature::Ed25519KeyPair;

use super::keys::{self, Identity};
use super::pairing::{self, NodePin, PairAnswer, PairRequest};
use super::tls::{self, Acceptor};

/// The daemon's keys for its nodes.
pub struct DaemonKeys {
    pub identity: Identity,
    pub token_key: Ed25519KeyPair,
}

/// Loads (or makes, the first time) the daemon's node certificate and token key.
pub fn daemon_keys(data_dir: &Path) -> Result<DaemonKeys, String> {
    let dir = pairing::nodes_dir(data_dir);
    Ok(DaemonKeys {
        identity: keys::load_or_create_identity(&dir, "clawvisor-daemon")?,
        token_key: keys::load_or_create_token_key(&dir)?,
    })
}

/// The pin of a paired node, or a message saying how to pair it.
pub fn node_pin(data_dir: &Path, node: &str) -> Result<NodePin, String> {
    keys::read_json(&pairing::pin_path(data_dir, node))?.ok_or_else(|| {
        format!(
            "node `{node}` is not paired: run `clawvisor node pair` on it, then `clawvisor nodes \
             add {node} <url> <code>` here"
        )
    })
}

/// An HTTPS client presenting `identity` that accepts the node certificates `accept` allows.
pub fn http_client(
    identity: &Identity,
    accept: Acceptor,
    timeout: Duration,
) -> Result<reqwest::Client, String> {
    let config = tls::client_config(identity, accept)?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .connect_timeout(timeout)
        .tcp_nodelay(true)
        .build()
        .map_err(|error| format!("could not build the node client: {error}"))
}

/// A client for a paired node (its pin only).
pub fn pinned_client(
    data_dir: &Path,
    node: &str,
    timeout: Duration,
) -> Result<reqwest::Client, String> {
    let pin = node_pin(data_dir, node)?;
    let keys = daemon_keys(data_dir)?;
    http_client(&keys.identity, tls::pinned(pin.fingerprint), timeout)
}

/// `url` without a trailing slash, joined with `path`.
pub fn endpoint(url: &str, path: &str) -> String {
    format!("{}{path}", url.trim_end_matches('/'))
}

/// Pairs with the node at `url` using its one-time `code`; on success writes its pin.
pub async fn pair(data_dir: &Path, name: &str, url: &str, code: &str) -> Result<NodePin, String> {
    let keys = daemon_keys(data_dir)?;
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let recorder = seen.clone();
    // While pairing, any node certificate is accepted and remembered: the proofs below bind it.
    let accept: Acceptor = Arc::new(move |fingerprint: &str| {
        if let Ok(mut seen) = recorder.lock() {
            *seen = Some(fingerprint.to_string());
        }
        true
    });
    let client = http_client(&keys.identity, accept, Duration::from_secs(10))?;
    let token_public_key = keys::token_public_key_hex(&keys.token_key);
    let own = keys.identity.fingerprint();
    // The node's certificate is learnt at the handshake: a first request (refused or not) to
    // see it, before the proof that names it.
    let probe = client.get(endpoint(url, "/health")).send().await;
    let node_fingerprint = seen.lock().ok().and_then(|seen| seen.clone());
    let Some(node_fingerprint) = node_fingerprint else {
        return Err(match probe {
            Err(error) => format!(
                "could not reach the node at {url}: {} (is `clawvisor node serve` running there, \
                 and was `clawvisor node pair` run within the last 10 minutes?)",
                crate::cause::explain(&error)
            ),
            Ok(_) => format!("the node at {url} showed no certificate"),
        });
    };
    let fields = (token_public_key.as_str(), name);
    let request = PairRequest {
        node_name: name.to_string(),
        token_public_key: token_public_key.clone(),
        proof: pairing::proof(code, "daemon", &own, &node_fingerprint, fields),
    };
    let response = client
        .post(endpoint(url, "/pair"))
        .json(&request)
        .send()
        .await
        .map_err(|error| {
            format!(
                "pairing with {url} failed: {}",
                crate::cause::explain(&error)
            )
        })?;
    if !response.status().is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(text);
    }
    let answer: PairAnswer = response
        .json()
        .await
        .map_err(|error| format!("the node's answer was not understood: {error}"))?;
    let expected = pairing::proof(code, "node", &own, &node_fingerprint, fields);
    if !pairing::proofs_match(&expected, &answer.proof) {
        return Err(
            "the node's answer does not prove the code: the connection may have been \
             intercepted; nothing was saved"
                .to_string(),
        );
    }
    let pin = NodePin {
        fingerprint: node_fingerprint,
        url: url.to_string(),
        paired_ms: crate::clock::now_ms(),
    };
    keys::write_json(&pairing::pin_path(data_dir, name), &pin)?;
    Ok(pin)
}

/// Tells the node it is no longer paired (best effort: it may be down).
pub async fn tell_revoked(data_dir: &Path, name: &str, url: &str) -> Result<(), String> {
    let client = pinned_client(data_dir, name, Duration::from_secs(5))?;
    let response = client
        .post(endpoint(url, "/revoke"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map_err(|error| crate::cause::explain(&error))?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(format!("the node answered {}", response.status()))
    }
}

/// Forgets a node's pin (its directory under `<data dir>/nodes/`).
pub fn forget_node(data_dir: &Path, name: &str) -> Result<(), String> {
    let dir = pairing::nodes_dir(data_dir).join(name);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(format!("cannot remove {}: {error}", dir.display())),
    }
}

/// A node's `/health` answer and the round trip, through its pinned client.
pub async fn health(
    data_dir: &Path,
    name: &str,
    url: &str,
) -> Result<(serde_json::Value, Duration), String> {
    let client = pinned_client(data_dir, name, Duration::from_secs(5))?;
    let started = std::time::Instant::now();
    let response = client
        .get(endpoint(url, "/health"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map_err(|error| crate::cause::explain(&error))?;
    if !response.status().is_success() {
        return Err(format!("the node answered {}", response.status()));
    }
    let body = response
        .json()
        .await
        .map_err(|error| format!("the node's answer was not understood: {error}"))?;
    Ok((body, started.elapsed()))
}

/// What a node's `/health` says it lends: ", lends 2 folders and 1 MCP server" (nothing from a
/// node too old to say).
pub fn lends(health: &serde_json::Value) -> String {
    let (Some(roots), Some(servers)) = (health["roots"].as_u64(), health["mcp_servers"].as_u64())
    else {
        return String::new();
    };
    let plural = |count: u64, one: &str, many: &str| {
        format!("{count} {}", if count == 1 { one } else { many })
    };
    format!(
        ", lends {} and {}",
        plural(roots, "folder", "folders"),
        plural(servers, "MCP server", "MCP servers")
    )
}

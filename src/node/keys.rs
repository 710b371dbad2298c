//! The key files of both sides: a TLS identity (a self-signed certificate and its key, made with
//! rcgen on first use), its SHA-256 fingerprint, the daemon's ed25519 token key, and the small
//! JSON files that pin the other side.
//!
//! Invariant: every private key and pin is written whole (temp file, fsync, rename) with mode
//! 0600 in a directory of mode 0700; a key is never printed, logged or sent (only fingerprints
//! and the token key's public half leave the machine).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use ring::signature::{Ed25519KeyPair, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

/// A TLS identity: certificate and private key (PKCS#8), both DER.
#[derive(Clone)]
pub struct Identity {
    pub certificate: Vec<u8>,
    key: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Identity")
            .field("fingerprint", &fingerprint(&self.certificate))
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The certificate's fingerprint (what the other side pins).
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.certificate)
    }

    /// The certificate chain rustls presents (one self-signed certificate).
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        vec![CertificateDer::from(self.certificate.clone())]
    }

    /// The private key as rustls takes it.
    pub fn private_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()))
    }
}

/// SHA-256 of a DER certificate, as lowercase hex in pairs separated by `:` (how operators
/// compare them by eye).
pub fn fingerprint(certificate_der: &[u8]) -> String {
    let digest = Sha256::digest(certificate_der);
    digest
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Loads the identity in `dir` (`identity.crt`, `identity.key`), making one the first time.
pub fn load_or_create_identity(dir: &Path, name: &str) -> Result<Identity, String> {
    let certificate_path = dir.join("identity.crt");
    let key_path = dir.join("identity.key");
    if certificate_path.exists() && key_path.exists() {
        let certificate = read(&certificate_path)?;
        let key = read(&key_path)?;
        return Ok(Identity { certificate, key });
    }
    let made = rcgen::generate_simple_self_signed(vec![name.to_string()])
        .map_err(|error| format!("could not make a TLS certificate: {error}"))?;
    let identity = Identity {
        certificate: made.cert.der().to_vec(),
        key: made.signing_key.serialize_der(),
    };
    write_private(&key_path, &identity.key)?;
    write_private(&certificate_path, &identity.certificate)?;
    Ok(identity)
}

/// The daemon's ed25519 key that signs approval tokens (`<dir>/token.key`, PKCS#8), made on
/// first use.
pub fn load_or_create_token_key(dir: &Path) -> Result<Ed25519KeyPair, String> {
    let path = dir.join("token.key");
    let pkcs8 = if path.exists() {
        read(&path)?
    } else {
        let rng = ring::rand::SystemRandom::new();
        let document = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| "could not make the approval-token key".to_string())?;
        write_private(&path, document.as_ref())?;
        document.as_ref().to_vec()
    };
    Ed25519KeyPair::from_pkcs8(&pkcs8).map_err(|_| {
        format!(
            "{} is not an ed25519 key; move it aside and pair the nodes again",
            path.display()
        )
    })
}

/// The public half of the token key, hex (what a node stores to verify tokens).
pub fn token_public_key_hex(key: &Ed25519KeyPair) -> String {
    hex::encode(key.public_key().as_ref())
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
}

/// Creates `dir` (and its parents) with mode 0700.
pub fn private_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|error| format!("cannot restrict {}: {error}", dir.display()))
}

/// Writes `bytes` to `path` whole with mode 0600, in a directory of mode 0700 (the config
/// editor's atomic write: temporary file, fsync, rename).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    private_dir(&dir)?;
    crate::config::edit::write_atomically(path, bytes)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)))
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}

/// Reads a JSON file written with [`write_json`]; `None` when it does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| format!("{} is not readable: {error}", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(format!("cannot read {}: {error}", path.display())),
    }
}

/// Writes `value` as JSON with [`write_private`].
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|error| format!("cannot encode {}: {error}", path.display()))?;
    write_private(path, &bytes)
}

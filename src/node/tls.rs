//! Mutual TLS without a CA: each side presents its self-signed certificate and accepts the other's
//! only by its SHA-256 fingerprint (`keys::fingerprint`), decided by an [`Acceptor`].
//!
//! The handshake signatures are still checked (with ring's algorithms), so a peer must hold the
//! private key of the certificate it presents. Names and validity dates are not checked: the pin
//! is the whole trust decision (a node may be reached as `nas.lan` or by its address).
//!
//! Invariant: a certificate the acceptor refuses ends the handshake; nothing above TLS runs.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::keys::{Identity, fingerprint};

/// Decides whether a peer's certificate fingerprint is accepted.
pub type Acceptor = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// An acceptor of exactly `pinned`.
pub fn pinned(pinned: String) -> Acceptor {
    Arc::new(move |seen: &str| seen == pinned)
}

/// The crypto provider of every node connection: ring (rustls is built with two in the tree).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Checks certificates by fingerprint and handshake signatures with ring.
struct PinVerifier {
    accept: Acceptor,
    algorithms: WebPkiSupportedAlgorithms,
}

impl std::fmt::Debug for PinVerifier {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("PinVerifier")
    }
}

impl PinVerifier {
    fn new(accept: Acceptor) -> PinVerifier {
        PinVerifier {
            accept,
            algorithms: provider().signature_verification_algorithms,
        }
    }

    fn check(&self, end_entity: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        if (self.accept)(&fingerprint(end_entity.as_ref())) {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }
}

impl ServerCertVerifier for PinVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

impl ClientCertVerifier for PinVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The daemon's side: presents `identity`, accepts the node certificates `accept` allows.
pub fn client_config(
    identity: &Identity,
    accept: Acceptor,
) -> Result<rustls::ClientConfig, String> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS setup failed: {error}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinVerifier::new(accept)))
        .with_client_auth_cert(identity.chain(), identity.private_key())
        .map_err(|error| format!("the daemon's node certificate is unusable: {error}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The node's side: presents `identity`, requires a client certificate `accept` allows.
pub fn server_config(
    identity: &Identity,
    accept: Acceptor,
) -> Result<rustls::ServerConfig, String> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS setup failed: {error}"))?
        .with_client_cert_verifier(Arc::new(PinVerifier::new(accept)))
        .with_single_cert(identity.chain(), identity.private_key())
        .map_err(|error| format!("the node's certificate is unusable: {error}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

//! The connections' transport: TLS when the target asks for it with `sslmode=require`,
//! plaintext otherwise.
//!
//! - `sslmode=disable`: plaintext.
//! - `sslmode=prefer` (the driver's default when none is given): plaintext, as before TLS was
//!   offered — the driver tries TLS only with a TLS connector, and an encrypted default would
//!   change every existing deployment's connections (and their cost) unasked.
//! - `sslmode=require`: TLS (rustls), or no connection. As libpq's `require` does without a
//!   root certificate, the server's certificate is **not verified**: the connection is
//!   encrypted against eavesdroppers, not authenticated against an active man in the middle.
//!   `verify-ca` and `verify-full` are not offered (the driver refuses them as values).

use std::sync::Arc;

use postgres::config::SslMode;
use postgres::{Client, Config, NoTls};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Connects with `config`, over TLS exactly when its `sslmode` is `require`.
pub(super) fn connect(config: &Config) -> Result<Client, postgres::Error> {
    match config.get_ssl_mode() {
        SslMode::Require => config.connect(encrypting()),
        _ => config.connect(NoTls),
    }
}

/// A TLS connector that encrypts without checking whom it talks to (libpq's `require`), its
/// handshake signatures still checked by ring.
fn encrypting() -> MakeRustlsConnect {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
        .with_no_client_auth();
    MakeRustlsConnect::new(config)
}

/// Accepts any server certificate; checks that the handshake was signed by its key.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

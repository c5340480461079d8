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
//!
//! TLS is the feature `postgres-tls` (rustls on ring; the command line, the server and the
//! Python package have it on). Without it, a target with `sslmode=require` is refused by name
//! when a store is opened, never connected in plaintext.

use postgres::config::{Host, SslMode};
use postgres::{Client, Config, NoTls};

#[cfg(feature = "postgres-tls")]
use rustls_connector::encrypting;

/// A plain driver connection to `url` (a `postgres://` URL or a libpq string), made as the
/// store makes its own: over TLS exactly when `sslmode=require` says so. For a side connection
/// of your own next to a [`PgStore`](crate::PgStore) — e.g. the transaction
/// [`PgStore::enqueue_in`](crate::PgStore::enqueue_in) joins — that must follow the same
/// `sslmode`.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut client = leasefence::pg_connect("postgres://app@db.internal/jobs?sslmode=require")?;
/// client.batch_execute("SELECT 1")?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// The driver's, for a string it cannot parse or a connection that fails.
pub fn pg_connect(url: &str) -> Result<Client, postgres::Error> {
    connect(&url.parse::<Config>()?)
}

/// Connects with `config`, over TLS exactly when its `sslmode` is `require` — and, as libpq,
/// never over a Unix socket, which has no TLS to offer.
pub(super) fn connect(config: &Config) -> Result<Client, postgres::Error> {
    match config.get_ssl_mode() {
        SslMode::Require if !sockets_only(config) => {
            #[cfg(feature = "postgres-tls")]
            {
                if config.get_hosts().is_empty() && !config.get_hostaddrs().is_empty() {
                    // `hostaddr=` alone: the handshake needs a name; the address is one.
                    let mut named = config.clone();
                    for addr in config.get_hostaddrs() {
                        named.host(&addr.to_string());
                    }
                    return named.connect(encrypting());
                }
                config.connect(encrypting())
            }
            // Refused by `check` when a store opens; a `pg_connect` gets the driver's "no TLS".
            #[cfg(not(feature = "postgres-tls"))]
            config.connect(NoTls)
        }
        SslMode::Require => {
            // A Unix socket: libpq ignores sslmode there; the driver would still ask the
            // server for TLS, and fail on its answer.
            let mut local = config.clone();
            local.ssl_mode(SslMode::Disable);
            local.connect(NoTls)
        }
        _ => config.connect(NoTls),
    }
}

/// Whether every host of `config` is a Unix socket (which has no TLS to offer).
fn sockets_only(config: &Config) -> bool {
    let hosts = config.get_hosts();
    !hosts.is_empty() && hosts.iter().all(|h| !matches!(h, Host::Tcp(_)))
}

/// `Ok` unless `config` asks for TLS (`sslmode=require`, not over a Unix socket) and this build
/// has none: then an `InvalidArgument` naming `url`, before any connection is tried.
pub(super) fn check(config: &Config) -> crate::Result<()> {
    refuse_without_tls(config, cfg!(feature = "postgres-tls"))
}

/// `check` with this build's TLS support as an argument (so both answers are tested in one
/// build).
fn refuse_without_tls(config: &Config, tls_available: bool) -> crate::Result<()> {
    if tls_available || config.get_ssl_mode() != SslMode::Require || sockets_only(config) {
        return Ok(());
    }
    Err(crate::Error::invalid(
        "url",
        "sslmode=require asks for TLS, and this build of leasefence has none: enable the \
         feature `postgres-tls`",
    ))
}

/// The rustls side (feature `postgres-tls`).
#[cfg(feature = "postgres-tls")]
mod rustls_connector {
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};
    use tokio_postgres_rustls::MakeRustlsConnect;

    /// A TLS connector that encrypts without checking whom it talks to (libpq's `require`), its
    /// handshake signatures still checked by ring.
    pub(super) fn encrypting() -> MakeRustlsConnect {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
            .with_no_client_auth();
        // As libpq 17 sends it: a server doing direct TLS (`sslnegotiation=direct`) requires it,
        // older servers ignore it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str, tls_available: bool) -> Option<String> {
        let config: Config = url.parse().expect("a valid target");
        refuse_without_tls(&config, tls_available)
            .err()
            .map(|e| e.to_string())
    }

    #[test]
    fn a_build_without_tls_refuses_sslmode_require_over_tcp_by_name() {
        let err = refused("host=db.internal user=app sslmode=require", false)
            .expect("refused without TLS");
        assert!(err.contains("url"), "{err}");
        assert!(err.contains("postgres-tls"), "{err}");
        assert!(refused("postgres://app@db.internal/jobs?sslmode=require", false).is_some());
        // One TCP host among sockets still needs TLS.
        assert!(
            refused(
                "host=/var/run/postgresql,db.internal sslmode=require",
                false
            )
            .is_some()
        );
    }

    #[test]
    fn only_sslmode_require_over_tcp_without_tls_is_refused() {
        assert_eq!(refused("host=db.internal sslmode=require", true), None);
        assert_eq!(refused("host=db.internal sslmode=prefer", false), None);
        assert_eq!(refused("host=db.internal sslmode=disable", false), None);
        assert_eq!(refused("host=db.internal", false), None);
        assert_eq!(
            refused("host=/var/run/postgresql sslmode=require", false),
            None
        );
        assert!(sockets_only(
            &"host=/tmp,/var/run/postgresql".parse().unwrap()
        ));
        assert!(!sockets_only(&"host=/tmp,db".parse().unwrap()));
        assert!(!sockets_only(&"hostaddr=127.0.0.1".parse().unwrap()));
    }
}

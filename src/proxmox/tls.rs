//! rustls client configuration: webpki roots plus an optional PEM CA bundle, or an explicit
//! insecure mode that accepts any server certificate.
//!
//! The configuration is built with an explicit ring provider, so it never depends on the
//! process-wide default provider.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::error::Error;

/// How the client verifies the server certificate.
#[derive(Debug, Clone, Default)]
pub enum TlsVerification {
    /// Verify against the public webpki roots plus the given PEM CA bundle (if any).
    #[default]
    Verify,
    /// Verify against webpki roots plus these PEM-encoded CA certificates.
    VerifyWithCa(String),
    /// Accept any certificate. Only for test setups; the caller must opt in explicitly.
    Insecure,
}

/// Parses all certificates in a PEM bundle.
pub fn parse_pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| Error::Config(format!("invalid PEM CA bundle: {e}")))?;
    if certs.is_empty() {
        return Err(Error::Config("PEM CA bundle contains no certificate".into()));
    }
    Ok(certs)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the rustls client configuration for the given verification mode.
///
/// ALPN is restricted to HTTP/1.1: PVE speaks HTTP/1.1 only and puts its error messages
/// in the status line's reason phrase, which HTTP/2 does not have.
pub fn client_config(verification: &TlsVerification) -> Result<rustls::ClientConfig, Error> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS protocol versions: {e}")))?;
    let mut config = match verification {
        TlsVerification::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
        TlsVerification::Verify | TlsVerification::VerifyWithCa(_) => {
            let mut roots = RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            if let TlsVerification::VerifyWithCa(pem) = verification {
                for cert in parse_pem_certs(pem)? {
                    roots
                        .add(cert)
                        .map_err(|e| Error::Config(format!("CA certificate rejected: {e}")))?;
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Explains a TLS certificate failure found anywhere in an error's source chain (rustls errors
/// travel inside `std::io::Error`s, whose `source()` skips them), or `None` when the error is no
/// certificate problem. The text names the problem and the fix, e.g. "the server's certificate
/// is signed by an unknown certificate authority (invalid peer certificate: UnknownIssuer)".
pub fn describe_certificate_failure(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|i| i as &(dyn std::error::Error + 'static));
        for candidate in [Some(e), inner].into_iter().flatten() {
            if let Some(rustls::Error::InvalidCertificate(cert)) = candidate.downcast_ref::<rustls::Error>() {
                return Some(certificate_problem(cert));
            }
        }
        // An io::Error's own `source()` is its inner error's source: step into the inner error
        // itself (it may be another io::Error, as reqwest nests them).
        next = inner.or_else(|| e.source());
    }
    None
}

fn certificate_problem(e: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    let what = match e {
        C::UnknownIssuer => {
            "the server's certificate is signed by an unknown certificate authority: put the CA that signed it into the credentials Secret's `root_ca` (or --proxmox-root-cert-file)"
        }
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            "the server's certificate is not valid for the host name in the Proxmox URL"
        }
        C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired",
        C::NotValidYet | C::NotValidYetContext { .. } => "the server's certificate is not valid yet",
        C::Revoked => "the server's certificate has been revoked",
        C::BadSignature | C::BadEncoding | C::UnsupportedSignatureAlgorithmContext { .. } => {
            "the server's certificate cannot be verified"
        }
        _ => "the server's certificate was rejected",
    };
    format!(
        "TLS certificate verification failed: {what} ({})",
        rustls::Error::InvalidCertificate(e.clone())
    )
}

/// A verifier that accepts any certificate chain and host name, but still checks that the
/// handshake signatures are made with the presented key.
#[derive(Debug)]
struct AcceptAnyServerCert {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyServerCert {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_all_modes() {
        let c = client_config(&TlsVerification::Verify).unwrap();
        assert_eq!(c.alpn_protocols, vec![b"http/1.1".to_vec()]);
        client_config(&TlsVerification::Insecure).unwrap();
    }

    #[test]
    fn certificate_failures_are_found_inside_io_errors() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        // reqwest nests the handshake's io::Error in another one.
        let io = std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, tls));
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("client error (Connect)")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let msg = describe_certificate_failure(&Outer(io)).unwrap();
        assert!(msg.contains("unknown certificate authority"), "{msg}");
        assert!(msg.contains("root_ca"), "{msg}");
        assert!(msg.contains("UnknownIssuer"), "{msg}");
        let expired = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        assert!(
            describe_certificate_failure(&expired)
                .unwrap()
                .contains("has expired")
        );
        assert_eq!(
            describe_certificate_failure(&std::io::Error::other("refused")),
            None
        );
    }

    #[test]
    fn bad_pem_is_config_error() {
        let e = client_config(&TlsVerification::VerifyWithCa("garbage".into())).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        let e = parse_pem_certs("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n").unwrap_err();
        assert!(matches!(e, Error::Config(_)));
    }
}

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
    fn bad_pem_is_config_error() {
        let e = client_config(&TlsVerification::VerifyWithCa("garbage".into())).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        let e = parse_pem_certs("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n").unwrap_err();
        assert!(matches!(e, Error::Config(_)));
    }
}

//! TLS: a generated cluster CA and a server certificate signed by it (like PVE's `pve-root-ca.pem`).

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// TLS setup errors.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Certificate generation failed.
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// rustls rejected the configuration.
    #[error("TLS configuration failed: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Generated TLS material.
pub struct TlsMaterial {
    /// Server configuration for the acceptor.
    pub config: Arc<rustls::ServerConfig>,
    /// PEM of the CA certificate to trust.
    pub ca_pem: String,
}

/// Generates a CA and a server certificate for `localhost`, `127.0.0.1`, `::1` and `extra_names`.
pub fn generate(extra_names: &[String]) -> Result<TlsMaterial, TlsError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "pve-sim Cluster CA");
    ca_params
        .distinguished_name
        .push(DnType::OrganizationName, "PVE Cluster Manager CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    names.extend(extra_names.iter().cloned());
    let mut leaf_params = CertificateParams::new(names)?;
    leaf_params.distinguished_name.push(DnType::CommonName, "pve-sim");
    let leaf_key = KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer)?;

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), ca_cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        config: Arc::new(config),
        ca_pem: ca_cert.pem(),
    })
}

//! Certificate generation (rcgen, ring): a throw-away CA and a serving certificate for loopback.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

use crate::Error;

/// A PEM-encoded certificate authority plus a serving certificate it signed.
#[derive(Clone)]
pub struct Certs {
    /// CA certificate (PEM).
    pub ca_pem: String,
    /// CA private key (PEM).
    pub ca_key_pem: String,
    /// Serving certificate (PEM) valid for `127.0.0.1`, `::1` and `localhost`.
    pub serving_pem: String,
    /// Serving private key (PEM).
    pub serving_key_pem: String,
}

impl std::fmt::Debug for Certs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certs")
            .field("ca_pem", &self.ca_pem)
            .finish_non_exhaustive()
    }
}

fn cert_err(e: rcgen::Error) -> Error {
    Error::Certs(e.to_string())
}

/// Generates a fresh CA and a loopback serving certificate signed by it.
pub fn generate() -> Result<Certs, Error> {
    let ca_key = KeyPair::generate().map_err(cert_err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "testenv-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(cert_err)?;
    let ca_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(cert_err)?;
    let mut params = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "localhost".to_string(),
    ])
    .map_err(cert_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "testenv-apiserver");
    let cert = params.signed_by(&key, &issuer).map_err(cert_err)?;
    Ok(Certs {
        ca_pem,
        ca_key_pem,
        serving_pem: cert.pem(),
        serving_key_pem: key.serialize_pem(),
    })
}

/// Generates a standalone key pair in PEM (private key, public key), used for service-account signing.
pub fn key_pair_pem() -> Result<(String, String), Error> {
    let key = KeyPair::generate().map_err(cert_err)?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// Generates a random bearer token (hex, 256 bits).
pub fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32).map(|_| format!("{:02x}", rng.random::<u8>())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_pem() {
        let c = generate().unwrap();
        assert!(c.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.serving_key_pem.contains("PRIVATE KEY"));
        assert_eq!(random_token().len(), 64);
    }
}

//! TLS of the webhook server (and of the secured diagnostics server, which reuses it):
//! `--tls-min-version` and `--tls-cipher-suites` as capmox (CAPI's
//! manager flags, Go's names) accept them, mapped onto rustls; and the serving certificate, read
//! from `<cert-dir>/tls.crt` and `tls.key` and re-read when the files change (cert-manager rotates
//! them by swapping the secret volume's `..data` symlink), without a restart.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::CipherSuite;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::WebhookError;

/// The lowest TLS version the webhook server accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsVersion {
    /// TLS 1.2 (`VersionTLS12`, the default).
    #[default]
    Tls12,
    /// TLS 1.3 (`VersionTLS13`).
    Tls13,
}

/// Parses `--tls-min-version` (`VersionTLS12` or `VersionTLS13`). Go's `VersionTLS10`/`VersionTLS11`
/// are recognised and refused: rustls implements TLS 1.2 and 1.3 only.
pub fn parse_tls_version(s: &str) -> Result<TlsVersion, String> {
    match s.trim() {
        "" | "VersionTLS12" => Ok(TlsVersion::Tls12),
        "VersionTLS13" => Ok(TlsVersion::Tls13),
        v @ ("VersionTLS10" | "VersionTLS11") => Err(format!(
            "{v} is not supported: the webhook server speaks TLS 1.2 and 1.3 only (use VersionTLS12 or VersionTLS13)"
        )),
        other => Err(format!(
            "unknown TLS version {other:?} (accepted: VersionTLS12, VersionTLS13)"
        )),
    }
}

/// Go's cipher suite names (what `k8s.io/component-base/cli/flag` accepts) and the rustls suite
/// each one is, if rustls implements it. TLS 1.3 suites are listed for acceptance only: like Go,
/// their selection cannot be configured.
const GO_SUITES: &[(&str, Option<CipherSuite>)] = &[
    (
        "TLS_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS13_AES_128_GCM_SHA256),
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS13_AES_256_GCM_SHA384),
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        Some(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", None),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", None),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_RSA_WITH_RC4_128_SHA", None),
];

/// Checks one `--tls-cipher-suites` name against Go's list (clear error for unknown names).
pub fn parse_cipher_suite(s: &str) -> Result<String, String> {
    let name = s.trim();
    if GO_SUITES.iter().any(|(n, _)| *n == name) {
        return Ok(name.to_owned());
    }
    let known: Vec<&str> = GO_SUITES
        .iter()
        .filter(|(_, s)| s.is_some())
        .map(|(n, _)| *n)
        .collect();
    Err(format!(
        "unknown cipher suite {name:?} (Go/IANA names; supported: {})",
        known.join(", ")
    ))
}

/// TLS settings of the webhook server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// `--tls-min-version`.
    pub min_version: TlsVersion,
    /// `--tls-cipher-suites` (Go names, already checked by [`parse_cipher_suite`]); empty: the
    /// rustls defaults (all AEAD ECDHE suites).
    pub cipher_suites: Vec<String>,
}

impl TlsSettings {
    /// The crypto provider (ring) restricted to the configured TLS 1.2 suites. TLS 1.3 suites
    /// always stay enabled, as with Go. Go names rustls does not implement (CBC, RC4, 3DES, RSA
    /// key exchange) are skipped with a warning; none of the named TLS 1.2 suites being usable
    /// is an error, and so are cipher suites with a TLS 1.3 minimum (as in CAPI).
    pub fn provider(&self) -> Result<CryptoProvider, String> {
        let mut provider = rustls::crypto::ring::default_provider();
        if self.cipher_suites.is_empty() {
            return Ok(provider);
        }
        if self.min_version == TlsVersion::Tls13 {
            return Err("cipher suites may not be specified when --tls-min-version is 'VersionTLS13'".into());
        }
        let mut wanted = Vec::new();
        for name in &self.cipher_suites {
            match GO_SUITES.iter().find(|(n, _)| n == name) {
                Some((_, Some(suite))) => wanted.push(*suite),
                Some((_, None)) => tracing::warn!(
                    cipher_suite = %name,
                    "--tls-cipher-suites: not implemented by rustls (only AEAD suites with ECDHE are); skipped"
                ),
                None => return Err(parse_cipher_suite(name).err().unwrap_or_default()),
            }
        }
        provider
            .cipher_suites
            .retain(|s| s.version() == &rustls::version::TLS13 || wanted.contains(&s.suite()));
        if !provider
            .cipher_suites
            .iter()
            .any(|s| s.version() == &rustls::version::TLS12)
        {
            return Err(format!(
                "none of --tls-cipher-suites={} can be used for TLS 1.2",
                self.cipher_suites.join(",")
            ));
        }
        Ok(provider)
    }

    /// The protocol versions to offer.
    pub fn versions(&self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static BOTH: [&rustls::SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static ONLY_13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        match self.min_version {
            TlsVersion::Tls12 => &BOTH,
            TlsVersion::Tls13 => &ONLY_13,
        }
    }
}

/// The serving certificate, re-read from its files when they change (used by the webhook server
/// and, with `--metrics-cert-path`, the diagnostics server).
pub struct ReloadingCert {
    server: &'static str,
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    check_every: Duration,
    state: Mutex<Loaded>,
}

struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
    key: Arc<CertifiedKey>,
    checked: Instant,
    failing: bool,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, WebhookError> {
    std::fs::read(path).map_err(|source| WebhookError::ReadCert {
        path: path.to_path_buf(),
        source,
    })
}

fn parse(
    cert_path: &Path,
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, WebhookError> {
    let bad = |reason: String| WebhookError::BadCert {
        path: cert_path.to_path_buf(),
        reason,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| bad(format!("certificate PEM: {e}")))?;
    if chain.is_empty() {
        return Err(bad("no CERTIFICATE block".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| bad(format!("private key PEM: {e}")))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| bad(format!("certificate and key: {e}")))
}

impl ReloadingCert {
    /// Reads and checks the certificate and key now; later changes to the files are picked up
    /// at most `check_every` after they happen (checked on incoming connections).
    pub fn load(
        cert_path: PathBuf,
        key_path: PathBuf,
        provider: Arc<CryptoProvider>,
        check_every: Duration,
    ) -> Result<Self, WebhookError> {
        let cert_pem = read(&cert_path)?;
        let key_pem = read(&key_path)?;
        let key = Arc::new(parse(&cert_path, &cert_pem, &key_pem, &provider)?);
        Ok(Self {
            server: "webhook",
            cert_path,
            key_path,
            provider,
            check_every,
            state: Mutex::new(Loaded {
                cert_pem,
                key_pem,
                key,
                checked: Instant::now(),
                failing: false,
            }),
        })
    }

    /// Names the server in log lines (default `webhook`).
    pub fn for_server(mut self, server: &'static str) -> Self {
        self.server = server;
        self
    }

    /// The current certificate, after re-reading the files if they may have changed. A file
    /// that cannot be read or parsed (e.g. caught between the certificate and the key being
    /// replaced) keeps the previous certificate in use and is retried.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut state = match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if state.checked.elapsed() >= self.check_every {
            state.checked = Instant::now();
            let fresh = read(&self.cert_path).and_then(|c| Ok((c, read(&self.key_path)?)));
            match fresh {
                Ok((cert_pem, key_pem)) if cert_pem == state.cert_pem && key_pem == state.key_pem => {
                    state.failing = false;
                }
                Ok((cert_pem, key_pem)) => {
                    match parse(&self.cert_path, &cert_pem, &key_pem, &self.provider) {
                        Ok(key) => {
                            tracing::info!(server = self.server, cert = %self.cert_path.display(), "serving certificate reloaded");
                            state.key = Arc::new(key);
                            state.cert_pem = cert_pem;
                            state.key_pem = key_pem;
                            state.failing = false;
                        }
                        Err(e) => {
                            if !state.failing {
                                tracing::warn!(server = self.server, error = %e, "new serving certificate not usable yet; keeping the previous one");
                            }
                            state.failing = true;
                        }
                    }
                }
                Err(e) => {
                    if !state.failing {
                        tracing::warn!(server = self.server, error = %e, "cannot re-read the serving certificate; keeping the previous one");
                    }
                    state.failing = true;
                }
            }
        }
        Arc::clone(&state.key)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The rustls server configuration: versions and suites from `settings`, the certificate from
/// `cert` (e.g. a [`ReloadingCert`]), HTTP/1.1 only (as CAPI providers serve by default).
pub fn server_config(
    settings: &TlsSettings,
    cert: Arc<dyn ResolvesServerCert>,
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ServerConfig, WebhookError> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(settings.versions())
        .map_err(|e| WebhookError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_like_capi() {
        assert_eq!(parse_tls_version("VersionTLS12"), Ok(TlsVersion::Tls12));
        assert_eq!(parse_tls_version("VersionTLS13"), Ok(TlsVersion::Tls13));
        assert_eq!(parse_tls_version(""), Ok(TlsVersion::Tls12));
        assert!(
            parse_tls_version("VersionTLS10")
                .unwrap_err()
                .contains("not supported")
        );
        assert!(
            parse_tls_version("TLS1.2")
                .unwrap_err()
                .contains("unknown TLS version")
        );
    }

    #[test]
    fn cipher_suites_map_to_rustls() {
        assert!(parse_cipher_suite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305").is_ok());
        let err = parse_cipher_suite("TLS_BOGUS").unwrap_err();
        assert!(err.contains("unknown cipher suite \"TLS_BOGUS\""), "{err}");
        let only = TlsSettings {
            min_version: TlsVersion::Tls12,
            cipher_suites: vec![
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".into(),
                "TLS_RSA_WITH_AES_128_CBC_SHA".into(),
            ],
        };
        let p = only.provider().unwrap();
        let tls12: Vec<CipherSuite> = p
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS12)
            .map(|s| s.suite())
            .collect();
        assert_eq!(tls12, vec![CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]);
        assert_eq!(
            p.cipher_suites
                .iter()
                .filter(|s| s.version() == &rustls::version::TLS13)
                .count(),
            3
        );
        let unusable = TlsSettings {
            cipher_suites: vec!["TLS_RSA_WITH_RC4_128_SHA".into()],
            ..TlsSettings::default()
        };
        assert!(unusable.provider().unwrap_err().contains("none of"));
        let with13 = TlsSettings {
            min_version: TlsVersion::Tls13,
            cipher_suites: vec!["TLS_AES_128_GCM_SHA256".into()],
        };
        assert!(with13.provider().unwrap_err().contains("VersionTLS13"));
    }
}

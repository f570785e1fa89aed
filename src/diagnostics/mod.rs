//! The diagnostics server on `--diagnostics-address` (`/metrics`), secured like capmox's
//! (CAPI's manager options on controller-runtime's metrics server):
//!
//! * by default HTTPS, with every request authenticated by a `TokenReview` of its bearer token and
//!   authorized by a `SubjectAccessReview` (`get` on the non-resource URL `/metrics`; see
//!   [`auth`]). The certificate is read from `--metrics-cert-path` (`tls.crt`/`tls.key`,
//!   re-read when they change) or, when no directory is given, generated at start (self-signed
//!   for `localhost`, as controller-runtime does). `--tls-min-version` and `--tls-cipher-suites`
//!   apply, as to the webhook server;
//! * with `--insecure-diagnostics`, plain HTTP without authentication, as before.

pub mod auth;
pub mod cache;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::ResolvesServerCert;
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use auth::{DelegatingAuth, ReviewSettings, User};

use crate::health;
use crate::metrics::Metrics;
use crate::webhooks::tls::{ReloadingCert, server_config};
use crate::webhooks::{TlsSettings, WebhookError};

/// File names of the mounted certificate (controller-runtime's defaults).
pub const CERT_NAME: &str = "tls.crt";
/// See [`CERT_NAME`].
pub const KEY_NAME: &str = "tls.key";

/// How the diagnostics server is protected.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MetricsSecurity {
    /// Plain HTTP, no authentication (`--insecure-diagnostics`).
    #[default]
    Insecure,
    /// HTTPS with delegated authentication and authorization (capmox's default).
    Secure(SecureOptions),
}

/// Settings of the HTTPS diagnostics server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureOptions {
    /// `--tls-min-version` and `--tls-cipher-suites`.
    pub tls: TlsSettings,
    /// `--metrics-cert-path`: directory with `tls.crt`/`tls.key` (`None`: self-signed).
    pub cert_dir: Option<PathBuf>,
    /// How often the certificate files are checked for changes.
    pub cert_check_interval: Duration,
    /// Review caching and time limits.
    pub review: ReviewSettings,
}

impl Default for SecureOptions {
    fn default() -> Self {
        Self {
            tls: TlsSettings::default(),
            cert_dir: None,
            cert_check_interval: crate::webhooks::DEFAULT_CERT_CHECK_INTERVAL,
            review: ReviewSettings::default(),
        }
    }
}

/// Errors starting the diagnostics server.
#[derive(Debug, thiserror::Error)]
pub enum DiagnosticsError {
    /// The certificate could not be read, parsed or generated, or the TLS settings are unusable.
    #[error("diagnostics server certificate/TLS: {0}")]
    Tls(String),
    /// The address could not be bound.
    #[error("binding the diagnostics address {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
}

fn tls_err(e: impl std::fmt::Display) -> DiagnosticsError {
    DiagnosticsError::Tls(e.to_string())
}

/// A self-signed certificate for `localhost`, generated now (what controller-runtime serves when
/// no certificate directory is configured; scrapers skip verification or pin it).
pub fn self_signed(provider: &CryptoProvider) -> Result<CertifiedKey, DiagnosticsError> {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).map_err(tls_err)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    let chain = vec![CertificateDer::from(generated.cert.der().to_vec())];
    CertifiedKey::from_der(chain, key, provider).map_err(tls_err)
}

fn cert_resolver(
    opts: &SecureOptions,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ResolvesServerCert>, DiagnosticsError> {
    match &opts.cert_dir {
        Some(dir) => {
            let cert = ReloadingCert::load(
                dir.join(CERT_NAME),
                dir.join(KEY_NAME),
                Arc::clone(provider),
                opts.cert_check_interval,
            )
            .map_err(|e| match e {
                WebhookError::ReadCert { path, source } => {
                    DiagnosticsError::Tls(format!("reading {}: {source}", path.display()))
                }
                other => tls_err(other),
            })?;
            Ok(Arc::new(cert.for_server("diagnostics")))
        }
        None => Ok(Arc::new(SingleCertAndKey::from(self_signed(provider)?))),
    }
}

/// A bound diagnostics server, ready to [`serve`](MetricsServer::serve).
pub struct MetricsServer {
    listener: TcpListener,
    secure: Option<(TlsAcceptor, Arc<DelegatingAuth>)>,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.local_addr())
            .field("secure", &self.secure.is_some())
            .finish_non_exhaustive()
    }
}

impl MetricsServer {
    /// Binds `addr`; in secure mode loads or generates the certificate and reviews requests with
    /// `client`.
    pub async fn bind(
        addr: SocketAddr,
        security: &MetricsSecurity,
        client: kube::Client,
    ) -> Result<Self, DiagnosticsError> {
        let secure = match security {
            MetricsSecurity::Insecure => None,
            MetricsSecurity::Secure(opts) => {
                let provider = Arc::new(opts.tls.provider().map_err(DiagnosticsError::Tls)?);
                let resolver = cert_resolver(opts, &provider)?;
                let cfg = server_config(&opts.tls, resolver, provider).map_err(tls_err)?;
                let auth = Arc::new(DelegatingAuth::new(client, opts.review.clone()));
                Some((TlsAcceptor::from(Arc::new(cfg)), auth))
            }
        };
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| DiagnosticsError::Bind { addr, source })?;
        Ok(Self { listener, secure })
    }

    /// The bound address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Whether requests are served over HTTPS with authentication and authorization.
    pub fn is_secure(&self) -> bool {
        self.secure.is_some()
    }

    /// The reviewer of the secure server (for its counters).
    pub fn auth(&self) -> Option<Arc<DelegatingAuth>> {
        self.secure.as_ref().map(|(_, a)| Arc::clone(a))
    }

    /// Serves `/metrics` until `shutdown` completes.
    pub async fn serve(
        self,
        metrics: Arc<Metrics>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let addr = self.local_addr();
        // The 404 fallback is declared so that the authentication layer covers it too: an
        // unauthenticated caller learns nothing about which paths exist.
        let router = health::metrics_router(metrics)
            .fallback(|| async { auth::text(StatusCode::NOT_FOUND, "404 page not found") });
        match self.secure {
            None => {
                tracing::info!(
                    ?addr,
                    "serving metrics on /metrics (plain HTTP, --insecure-diagnostics)"
                );
                health::serve(self.listener, router, shutdown).await
            }
            Some((acceptor, auth)) => {
                tracing::info!(
                    ?addr,
                    "serving metrics on /metrics (HTTPS, TokenReview + SubjectAccessReview)"
                );
                let router: Router = router.layer(axum::middleware::from_fn_with_state(auth, auth::guard));
                crate::https::serve("diagnostics", self.listener, acceptor, router, shutdown).await;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_certificate_is_usable() {
        let provider = rustls::crypto::ring::default_provider();
        let key = self_signed(&provider).unwrap();
        assert_eq!(key.cert.len(), 1);
        assert!(key.keys_match().is_ok());
    }

    #[test]
    fn missing_certificate_directory_is_a_clear_error() {
        let opts = SecureOptions {
            cert_dir: Some("/nonexistent/metrics-certs".into()),
            ..SecureOptions::default()
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let err = match cert_resolver(&opts, &provider) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("no error"),
        };
        assert!(
            err.contains("/nonexistent/metrics-certs/tls.crt") && !err.contains("webhook"),
            "{err}"
        );
    }
}

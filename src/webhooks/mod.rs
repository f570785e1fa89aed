//! The webhook server: HTTPS on `--webhook-port` (default 9443) with the certificate from
//! `--webhook-cert-dir` (`tls.crt`/`tls.key`, re-read on rotation), serving capmox's eight
//! admission webhooks and `/convert` at the paths of [`capmox_api::webhook`]'s table. It runs
//! on every replica regardless of leadership, needs no Kubernetes or Proxmox client (every
//! answer is computed from the request alone), and stops with the manager.
//!
//! * [`tls`] — `--tls-min-version`, `--tls-cipher-suites`, the reloading certificate;
//! * [`convert`] — `ConversionReview`;
//! * [`review`] — `AdmissionReview` decoding and answers;
//! * [`cluster`], [`machine`], [`machine_template`] — capmox's rules per kind;
//! * [`virtual_machine`] — the ProxmoxVirtualMachine rules (and the protection of its deletion);
//! * [`field`] — field errors and the `Status` shapes of denials;
//! * [`serve`] — the accept loop.

pub mod cluster;
pub mod convert;
pub mod field;
pub mod machine;
pub mod machine_template;
pub mod review;
pub mod serve;
pub mod tls;
pub mod virtual_machine;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::response::IntoResponse;
use axum::routing::post;
use capmox_api::webhook::{ADMISSION_WEBHOOKS, CONVERSION_PATH};

pub use serve::WebhookServer;
pub use tls::{TlsSettings, TlsVersion};

/// Default `--webhook-port` (capmox's container port `webhook-server`).
pub const DEFAULT_PORT: u16 = 9443;
/// Default `--webhook-cert-dir` (controller-runtime's; capmox mounts the certificate there).
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// How often the certificate files are checked for changes (on incoming connections).
pub const DEFAULT_CERT_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// Largest request body accepted (the API server batches list conversions).
const MAX_BODY: usize = 64 << 20;

/// Errors of the webhook server.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// A certificate or key file could not be read.
    #[error("reading the webhook certificate {path}: {source}")]
    ReadCert {
        /// The file.
        path: PathBuf,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or key is not usable.
    #[error("webhook certificate {path}: {reason}")]
    BadCert {
        /// The certificate file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The TLS settings are not usable.
    #[error("webhook TLS: {0}")]
    Tls(String),
    /// The port could not be bound.
    #[error("binding the webhook server to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// How to run the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookOptions {
    /// Listening address (`--webhook-host`:`--webhook-port`; port 0 picks a free port).
    pub addr: SocketAddr,
    /// Directory holding the certificate and key (`--webhook-cert-dir`).
    pub cert_dir: PathBuf,
    /// Certificate file name in `cert_dir` (`tls.crt`).
    pub cert_name: String,
    /// Key file name in `cert_dir` (`tls.key`).
    pub key_name: String,
    /// TLS versions and cipher suites.
    pub tls: TlsSettings,
    /// How often the certificate files are checked for changes.
    pub cert_check_interval: Duration,
}

impl WebhookOptions {
    /// Options for `addr` and `cert_dir` with capmox's file names and default TLS settings.
    pub fn new(addr: SocketAddr, cert_dir: impl Into<PathBuf>) -> Self {
        Self {
            addr,
            cert_dir: cert_dir.into(),
            cert_name: "tls.crt".into(),
            key_name: "tls.key".into(),
            tls: TlsSettings::default(),
            cert_check_interval: DEFAULT_CERT_CHECK_INTERVAL,
        }
    }
}

/// The router: one POST route per admission webhook of the table, and `/convert`.
pub fn router() -> Router {
    let mut router = Router::new();
    for hook in ADMISSION_WEBHOOKS {
        router = router.route(
            &hook.path(),
            post(move |body: Bytes| async move { axum::Json(review::handle(&hook, &body)) }),
        );
    }
    router
        .route(
            capmox_api::webhook::vm::VM_VALIDATE_PATH,
            post(|body: Bytes| async move { axum::Json(virtual_machine::handle(&body)) }),
        )
        .route(
            CONVERSION_PATH,
            post(|body: Bytes| async move {
                let (code, review) = convert::handle(&body);
                (code, axum::Json(review)).into_response()
            }),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY))
}

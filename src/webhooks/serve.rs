//! The webhook server: its certificate (re-read on rotation), TLS settings and port, served by the
//! shared HTTPS accept loop ([`crate::https`]) into the axum [`router`](super::router).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::tls::{ReloadingCert, server_config};
use super::{WebhookError, WebhookOptions, router};

/// A bound webhook server with its certificate loaded, ready to [`serve`](WebhookServer::serve).
pub struct WebhookServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    addr: SocketAddr,
}

impl std::fmt::Debug for WebhookServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl WebhookServer {
    /// Loads the certificate (an error when it is missing or broken), builds the TLS
    /// configuration and binds the port.
    pub async fn bind(opts: &WebhookOptions) -> Result<Self, WebhookError> {
        let provider = Arc::new(opts.tls.provider().map_err(WebhookError::Tls)?);
        let cert = Arc::new(ReloadingCert::load(
            opts.cert_dir.join(&opts.cert_name),
            opts.cert_dir.join(&opts.key_name),
            Arc::clone(&provider),
            opts.cert_check_interval,
        )?);
        let cfg = server_config(&opts.tls, cert, provider)?;
        let listener = TcpListener::bind(opts.addr)
            .await
            .map_err(|source| WebhookError::Bind {
                addr: opts.addr,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| WebhookError::Bind {
            addr: opts.addr,
            source,
        })?;
        Ok(Self {
            listener,
            acceptor: TlsAcceptor::from(Arc::new(cfg)),
            addr,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then lets in-flight requests finish (briefly).
    /// `on_serving` runs once the accept loop runs.
    pub async fn serve(self, on_serving: impl FnOnce() + Send, shutdown: impl Future<Output = ()> + Send) {
        let WebhookServer {
            listener,
            acceptor,
            addr,
        } = self;
        tracing::info!(%addr, "serving webhooks (HTTPS)");
        on_serving();
        crate::https::serve("webhook", listener, acceptor, router(), shutdown).await;
    }
}

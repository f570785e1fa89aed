//! The accept loop of the webhook server: TLS (tokio-rustls, certificate re-read on rotation),
//! HTTP/1.1 (hyper) into the axum [`router`](super::router), graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::tls::{ReloadingCert, server_config};
use super::{WebhookError, WebhookOptions, router};

/// How long a client may take for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests get on shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

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
        let service = TowerToHyperService::new(router());
        let graceful = GracefulShutdown::new();
        tracing::info!(%addr, "serving webhooks (HTTPS)");
        on_serving();
        tokio::pin!(shutdown);
        loop {
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook server: accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let acceptor = acceptor.clone();
            let service = service.clone();
            let watcher = graceful.watcher();
            tokio::spawn(async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "webhook TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "webhook TLS handshake timed out");
                        return;
                    }
                };
                let conn =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
                if let Err(e) = watcher.watch(conn).await {
                    tracing::debug!(%peer, error = %e, "webhook connection ended with an error");
                }
            });
        }
        drop(listener);
        if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::debug!("webhook server: in-flight requests cut off at shutdown");
        }
        tracing::info!("webhook server stopped");
    }
}

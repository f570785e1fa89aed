//! The HTTPS accept loop shared by the webhook server and the secured diagnostics server:
//! TLS handshakes (tokio-rustls, bounded in time), HTTP/1.1 (hyper) into an axum router, and a
//! graceful shutdown that lets in-flight requests finish briefly.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// How long a client may take for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight requests get on shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `router` over HTTPS on `listener` until `shutdown` completes, then lets in-flight
/// requests finish (at most a few seconds). `what` names the server in logs.
pub async fn serve(
    what: &'static str,
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    shutdown: impl Future<Output = ()> + Send,
) {
    let service = TowerToHyperService::new(router);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(server = what, error = %e, "accept failed");
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
                    tracing::debug!(server = what, %peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(server = what, %peer, "TLS handshake timed out");
                    return;
                }
            };
            let conn =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(server = what, %peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::debug!(server = what, "in-flight requests cut off at shutdown");
    }
    tracing::info!(server = what, "server stopped");
}

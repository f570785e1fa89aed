//! The in-tree Kubernetes API server: HTTPS on 127.0.0.1, bearer-token authentication.

pub mod admission;
mod aggregated;
mod apply;
pub mod authn;
mod builtin_schemas;
mod conversion;
pub mod crds;
mod crud;
mod delete;
mod discovery;
mod events;
mod fieldmgr;
mod fieldval;
mod gc;
mod immutable;
mod openapi;
mod patch;
mod protobuf;
pub mod requests;
mod routes;
pub mod selectors;
pub mod status;
pub mod store;
mod table;
mod typemeta;
mod watch;
mod webhook_configs;
mod webhooks;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch as tokio_watch;
use tokio_rustls::TlsAcceptor;

use crate::Error;
use crate::certs::Certs;
use crds::Registry;
use status::ApiError;
use store::Store;

/// Response body type.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Options of the in-tree server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Number of events kept for watch resumption (older resourceVersions get 410 Expired).
    pub event_history: usize,
    /// Whether the opt-in garbage collector runs.
    pub garbage_collector: bool,
    /// Listening address (default: a free port on 127.0.0.1).
    pub bind: Option<SocketAddr>,
    /// How often a watch with `allowWatchBookmarks` gets a BOOKMARK (once the watched collection
    /// has changed since its watch window started; also 2 s before the watch's timeout), like
    /// kube-apiserver's watch cache: default one minute.
    pub bookmark_interval: std::time::Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            event_history: 10_000,
            garbage_collector: false,
            bind: None,
            bookmark_interval: std::time::Duration::from_secs(60),
        }
    }
}

/// Shared server state.
pub struct State {
    /// Objects.
    pub store: Store,
    registry: RwLock<Registry>,
    token: String,
    /// Tokens minted by TokenRequests.
    tokens: authn::Tokens,
    /// Listening address.
    pub addr: SocketAddr,
    /// Requests received, by User-Agent, verb and resource.
    pub requests: requests::RequestCounts,
    /// Interval between watch bookmarks.
    pub bookmark_interval: std::time::Duration,
}

impl State {
    /// Read access to the kind registry.
    pub fn registry(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Write access to the kind registry.
    pub fn registry_mut(&self) -> RwLockWriteGuard<'_, Registry> {
        self.registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running in-tree server; stops when dropped.
pub struct InTreeServer {
    /// Listening address.
    pub addr: SocketAddr,
    state: Arc<State>,
    shutdown: tokio_watch::Sender<bool>,
}

impl Drop for InTreeServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

impl InTreeServer {
    /// Shared state (for in-process inspection).
    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// Requests received so far, by User-Agent, verb and resource.
    pub fn request_counts(&self) -> std::collections::BTreeMap<requests::RequestKey, u64> {
        self.state.requests.snapshot()
    }
}

/// Builds a JSON response.
pub fn json_response(code: u16, v: &Value) -> Response<Body> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)).boxed_unsync())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed_unsync()))
}

/// Renders an API error as a `Status` response.
pub fn error_response(e: &ApiError) -> Response<Body> {
    json_response(e.code, &e.to_status())
}

fn tls_config(certs: &Certs) -> Result<rustls::ServerConfig, Error> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let chain: Vec<rustls::pki_types::CertificateDer<'static>> =
        rustls::pki_types::pem::PemObject::pem_slice_iter(certs.serving_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| Error::Certs(e.to_string()))?;
    let key: rustls::pki_types::PrivateKeyDer<'static> =
        rustls::pki_types::pem::PemObject::from_pem_slice(certs.serving_key_pem.as_bytes())
            .map_err(|e| Error::Certs(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| Error::Certs(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Starts the in-tree server on a free loopback port.
pub async fn start(certs: &Certs, token: &str, opts: ServerOptions) -> Result<InTreeServer, Error> {
    let bind = opts.bind.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
    let listener = TcpListener::bind(bind)
        .await
        .map_err(|e| Error::Io(format!("binding {bind}"), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Io("local_addr".into(), e))?;
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(certs)?));
    let state = Arc::new(State {
        store: Store::new(opts.event_history),
        registry: RwLock::new(Registry::new()),
        token: token.to_string(),
        tokens: authn::Tokens::default(),
        addr,
        requests: requests::RequestCounts::default(),
        bookmark_interval: opts.bookmark_interval,
    });
    crud::bootstrap(&state)?;
    webhook_configs::register(&state);
    let (shutdown, mut stop_rx) = tokio_watch::channel(false);
    if opts.garbage_collector {
        gc::spawn(state.clone(), shutdown.subscribe());
    }
    let st = state.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = stop_rx.changed() => break,
            };
            let Ok((tcp, _)) = accepted else { continue };
            let acceptor = acceptor.clone();
            let st = st.clone();
            let mut conn_stop = stop_rx.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let st = st.clone();
                    async move { Ok::<_, Infallible>(routes::handle(st, req).await) }
                });
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let conn = builder.serve_connection(TokioIo::new(tls), svc);
                tokio::select! {
                    _ = conn => {}
                    _ = conn_stop.changed() => {}
                }
            });
        }
    });
    Ok(InTreeServer {
        addr,
        state,
        shutdown,
    })
}

//! The HTTP(S) server: transport, authentication, routing, parameter handling, faults, request log.

mod faults;
mod http;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::http::{Method, Request, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use self::faults::apply_faults;
use self::http::{error_response, header, respond};
use crate::api::{self, Ctx, Route};
use crate::auth::{self, Identity};
use crate::error::ApiError;
use crate::params::{Params, parse_urlencoded, percent_decode};
use crate::scenario::Scenario;
use crate::state::gate::Passage;
use crate::state::{Cluster, SimState, StateError};
use crate::tls::{self, TlsError};
use crate::version::PveVersion;

/// Maximum size of a non-upload body (PVE: 512 KiB).
const MAX_POST: usize = 512 * 1024;
/// Maximum size of an upload body.
const MAX_UPLOAD: usize = 256 * 1024 * 1024;

/// Simulator configuration.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The cluster to simulate.
    pub scenario: Scenario,
    /// Serve HTTPS with a generated certificate (default) or plain HTTP.
    pub tls: bool,
    /// Listen address (default `127.0.0.1:0`).
    pub bind: SocketAddr,
    /// Write every request as a JSON line to this file.
    pub request_log: Option<PathBuf>,
    /// Seed for MACs, UUIDs, secrets and fault injection.
    pub seed: u64,
    /// The Proxmox VE release to play; `None`: the scenario's `version` (default 8.4) — or, when
    /// the scenario plays the default, the release named by the environment variable
    /// [`VERSION_ENV`] (how a whole test suite runs again on another release).
    pub pve_version: Option<PveVersion>,
}

/// The environment variable that picks the release a simulator plays when neither its config nor
/// its scenario pins one (`8.4` or `9.1`).
pub const VERSION_ENV: &str = "PVE_SIM_VERSION";

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            scenario: Scenario::default(),
            tls: true,
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            request_log: None,
            seed: 0x5eed,
            pve_version: None,
        }
    }
}

/// Errors starting the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Binding the listener failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// Opening the request log failed.
    #[error("cannot open request log {path}: {source}")]
    RequestLog {
        /// Path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// TLS setup failed.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The scenario is invalid.
    #[error(transparent)]
    State(#[from] StateError),
    /// The scenario has no API token to hand out.
    #[error("the scenario defines no API token")]
    NoToken,
}

struct Shared {
    state: SimState,
    log: Option<Mutex<std::fs::File>>,
}

/// A running simulator.
pub struct SimServer {
    addr: SocketAddr,
    tls: bool,
    ca_pem: Option<String>,
    token_id: String,
    token_secret: String,
    user: String,
    password: String,
    state: SimState,
    stop: watch::Sender<bool>,
    handle: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for SimServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimServer")
            .field("addr", &self.addr)
            .field("token_id", &self.token_id)
            .finish()
    }
}

impl SimServer {
    /// Builds the cluster, binds the listener and starts serving.
    pub async fn start(config: SimConfig) -> Result<Self, SimError> {
        let mut scenario = config.scenario.clone();
        if let Some(v) = config.pve_version {
            scenario.version = v;
        } else if scenario.version == PveVersion::default()
            && let Some(v) = std::env::var(VERSION_ENV).ok().and_then(|v| v.parse().ok())
        {
            scenario.version = v;
        }
        let cluster = Cluster::from_scenario(&scenario, config.seed)?;
        let (token_id, token_secret) = cluster
            .tokens
            .iter()
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
            .ok_or(SimError::NoToken)?;
        let (user, password) = cluster
            .users
            .values()
            .find(|u| u.userid == "root@pam" && u.password.is_some())
            .or_else(|| cluster.users.values().find(|u| u.password.is_some()))
            .map(|u| (u.userid.clone(), u.password.clone().unwrap_or_default()))
            .unwrap_or_default();
        let state = SimState::new(cluster);
        let log = match &config.request_log {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| SimError::RequestLog {
                        path: path.display().to_string(),
                        source,
                    })?,
            )),
            None => None,
        };
        let tls_material = if config.tls {
            Some(tls::generate(&[])?)
        } else {
            None
        };
        let listener = TcpListener::bind(config.bind)
            .await
            .map_err(|source| SimError::Bind {
                addr: config.bind,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: config.bind,
            source,
        })?;
        let shared = Arc::new(Shared {
            state: state.clone(),
            log,
        });
        let acceptor = tls_material
            .as_ref()
            .map(|m| tokio_rustls::TlsAcceptor::from(m.config.clone()));
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(crate::state::statcache::run(state.clone(), stopped.clone()));
        let handle = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = stopped.changed() => break,
                };
                let Ok((tcp, _peer)) = accepted else { continue };
                let shared = shared.clone();
                let acceptor = acceptor.clone();
                let conn_stop = stopped.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let shared = shared.clone();
                        async move { handle(shared, req).await }
                    });
                    match acceptor {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                serve(TokioIo::new(stream), service, conn_stop).await;
                            }
                        }
                        None => serve(TokioIo::new(tcp), service, conn_stop).await,
                    }
                });
            }
        });
        Ok(Self {
            addr,
            tls: config.tls,
            ca_pem: tls_material.map(|m| m.ca_pem),
            token_id,
            token_secret,
            user,
            password,
            state,
            stop,
            handle,
        })
    }

    /// Base URL without `/api2/json`, e.g. `https://127.0.0.1:8006`.
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// Bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// API token id (`user@realm!name`).
    pub fn token_id(&self) -> &str {
        &self.token_id
    }

    /// API token secret.
    pub fn token_secret(&self) -> &str {
        &self.token_secret
    }

    /// PEM of the CA that signed the server certificate (None for plain HTTP).
    pub fn ca_pem(&self) -> Option<String> {
        self.ca_pem.clone()
    }

    /// User for ticket auth.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Password for ticket auth.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// State handle.
    pub fn state(&self) -> SimState {
        self.state.clone()
    }

    /// Stops accepting connections; requests waiting at the request gate (and any later ones on
    /// open connections) are discarded (connection closed without a response).
    pub async fn shutdown(self) {
        self.state.gate().shut();
        let _ = self.stop.send(true);
        let _ = self.handle.await;
    }
}

/// Serves one connection until it ends or the server stops (then it is shut down gracefully).
async fn serve<I, S>(io: I, service: S, mut stop: watch::Receiver<bool>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming, ResBody = Full<Bytes>> + Send,
    S::Future: Send,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = http1::Builder::new().serve_connection(io, service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Everything one request produces, for the response and the request log.
struct Outcome {
    response: Response<Full<Bytes>>,
    status: u16,
    endpoint: Option<&'static str>,
    params: Map<String, Value>,
}

/// A request dropped at the gate ([`SimState::discard_blocked`]): hyper closes the connection
/// without a response.
#[derive(Debug, thiserror::Error)]
#[error("request discarded at the gate")]
pub struct Discarded;

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Discarded> {
    let method = req.method().clone();
    let raw_path = req.uri().path().to_string();
    let Some(outcome) = process(&shared, req).await else {
        tracing::debug!(method = %method, path = %raw_path, "request discarded at the gate");
        return Err(Discarded);
    };
    tracing::debug!(method = %method, path = %raw_path, status = outcome.status, "request");
    if let Some(log) = &shared.log {
        let line = json!({
            "ts": crate::tasks::now_epoch(),
            // Milliseconds since the epoch: the order and spacing of one client's requests.
            "ts_ms": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            "method": method.as_str(),
            "path": raw_path,
            "endpoint": outcome.endpoint,
            "params": crate::redact::redact(&outcome.params),
            "status": outcome.status,
        });
        if let Ok(mut f) = log.lock() {
            use std::io::Write;
            let _ = writeln!(f, "{line}");
        }
    }
    Ok(outcome.response)
}

/// Processes one request; `None` when it was discarded at the gate.
async fn process(shared: &Shared, req: Request<Incoming>) -> Option<Outcome> {
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let headers = parts.headers.clone();
    let mut params = Map::new();
    let fail = |err: ApiError, endpoint, params: Map<String, Value>| {
        Some(Outcome {
            status: err.status,
            response: error_response(&err),
            endpoint,
            params,
        })
    };

    let Some(api_path) = parts.uri.path().strip_prefix("/api2/json") else {
        return fail(ApiError::not_implemented("no such uri"), None, params);
    };
    let api_path = if api_path.is_empty() { "/" } else { api_path };
    if !api_path.starts_with('/') {
        return fail(ApiError::not_implemented("no such uri"), None, params);
    }
    // PVE unescapes the whole path, then splits it (so `%2F` separates segments too).
    let decoded = percent_decode(api_path, false);
    let seg_refs: Vec<&str> = decoded.split('/').filter(|s| !s.is_empty()).collect();
    let version = shared.state.with(|c| c.version);
    let route = api::route(method.as_str(), &seg_refs, version);
    let endpoint = route.as_ref().map(|r| r.key);
    let is_upload = endpoint == Some("POST /nodes/{node}/storage/{storage}/upload");

    // Body.
    let limit = if is_upload { MAX_UPLOAD } else { MAX_POST };
    let body = Limited::new(body, limit).collect().await;
    // The gate sits after the body is read (so hyper watches the socket and drops the request if
    // the client goes away while it waits) and before anything else happens.
    if shared.state.gate().pass().await == Passage::Discard {
        return None;
    }
    let body = match body {
        Ok(b) => b.to_bytes(),
        Err(_) => return fail(ApiError::not_implemented("for data too large"), endpoint, params),
    };
    if (method == Method::GET || method == Method::DELETE) && !body.is_empty() {
        let msg = format!("Unexpected content for method '{method}'");
        return fail(ApiError::not_implemented(msg), endpoint, params);
    }

    // Authentication (before routing, as PVE does).
    let is_login = endpoint == Some("POST /access/ticket");
    let identity = if is_login {
        None
    } else {
        match auth::authenticate(&shared.state, &headers) {
            Ok(id) => Some(id),
            Err(err) => {
                let delay = shared.state.with(|c| c.faults.auth_delay);
                if delay {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
                return fail(err, endpoint, params);
            }
        }
    };

    let Some(route) = route else {
        let msg = format!("Method '{method} {api_path}' not implemented");
        return fail(ApiError::not_implemented(msg), None, params);
    };
    shared
        .state
        .with(|c| *c.counts.entry(route.key.to_string()).or_insert(0) += 1);

    // Parameters: query, then body, then path.
    if let Some(q) = parts.uri.query() {
        parse_urlencoded(q, &mut params);
    }
    let content_type = header(&headers, "content-type").unwrap_or("").to_string();
    let mut upload = None;
    if method == Method::POST || method == Method::PUT {
        if is_upload && content_type.starts_with("multipart/form-data") {
            match api::storage::parse_upload(&body, &content_type, &mut params) {
                Ok(file) => upload = file,
                Err(err) => return fail(err, endpoint, params),
            }
        } else if content_type.starts_with("application/json") {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(obj)) => {
                    for (k, v) in obj {
                        params.entry(k).or_insert(v);
                    }
                }
                Ok(Value::Null) => {}
                Ok(_) | Err(_) if body.is_empty() => {}
                _ => return fail(ApiError::status(400, "malformed JSON body"), endpoint, params),
            }
        } else if !body.is_empty() {
            let mut form = Map::new();
            parse_urlencoded(&String::from_utf8_lossy(&body), &mut form);
            for (k, v) in form {
                params.entry(k).or_insert(v);
            }
        }
    }
    for (k, v) in &route.path_params {
        if let Some(existing) = params.get(*k)
            && crate::params::value_text(existing) != *v
        {
            let err = ApiError::status(
                400,
                "duplicate parameter (already defined in URI) with conflicting values!",
            );
            return fail(err, endpoint, params);
        }
        params.insert((*k).to_string(), Value::String(v.clone()));
    }

    // CSRF for ticket-authenticated writes (uploads are exempt).
    if let Some(Identity {
        csrf: Some(expected), ..
    }) = &identity
        && method != Method::GET
        && !is_upload
        && header(&headers, "csrfpreventiontoken") != Some(expected.as_str())
    {
        return fail(
            ApiError::unauthorized("Permission denied - invalid csrf token"),
            endpoint,
            params,
        );
    }

    // Injected endpoint faults.
    let faults = apply_faults(&shared.state, route.key).await;
    if faults.drop_before {
        return None;
    }
    if let Some(err) = faults.error {
        return fail(err, endpoint, params);
    }

    let mut logged = params.clone();
    if let Some(file) = &upload {
        logged.insert("upload".into(), json!(format!("<{} bytes>", file.data.len())));
    }
    let ok = run_route(shared, &route, identity, params, upload, version);
    if faults.drop_after {
        return None;
    }
    match ok {
        Ok(reply) => {
            let mut body = Map::new();
            body.insert("data".into(), reply.data);
            if let Some(total) = reply.total {
                body.insert("total".into(), json!(total));
            }
            Some(Outcome {
                status: 200,
                response: respond(
                    200,
                    None,
                    Bytes::from(Value::Object(body).to_string()),
                    Some("application/json;charset=UTF-8"),
                ),
                endpoint,
                params: logged,
            })
        }
        Err(err) => fail(err, endpoint, logged),
    }
}

fn run_route(
    shared: &Shared,
    route: &Route,
    identity: Option<Identity>,
    mut params: Map<String, Value>,
    upload: Option<api::storage::UploadFile>,
    version: PveVersion,
) -> Result<api::Reply, ApiError> {
    let user = identity.as_ref().map(|i| i.id.clone()).unwrap_or_default();
    // PVE checks the schema's permissions before it verifies the parameters.
    shared
        .state
        .with(|c| crate::access::checks::check_endpoint(c, &user, route.key, &params))?;
    (route.validate)(&mut params, version)?;
    let ctx = Ctx {
        state: shared.state.clone(),
        user,
        upload,
        version,
    };
    (route.handler)(&ctx, &Params(params))
}

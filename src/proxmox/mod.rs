//! Typed async client for the Proxmox VE API.
//!
//! ```no_run
//! # async fn demo() -> Result<(), capmox::proxmox::Error> {
//! use capmox::proxmox::{Client, ClientConfig, Credentials};
//! let client = Client::new(ClientConfig::new(
//!     "https://pve.example:8006",
//!     Credentials::token("capmox@pve!capi", "secret-uuid"),
//! ))?;
//! let version = client.version().await?;
//! println!("PVE {}", version.version);
//! # Ok(()) }
//! ```

pub mod auth;
pub mod endpoints;
pub mod error;
pub mod lenient;
pub mod observer;
pub mod path;
pub mod secret;
pub mod task;
pub mod tls;
pub mod types;
pub mod view;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;

pub use auth::{Credentials, Ticket};
pub use error::{Error, ErrorClass, backoff, backoff_with};
pub use observer::{NoopObserver, RequestObserver};
pub use path::ApiPath;
pub use secret::Secret;
pub use task::{TaskPollPolicy, TaskStatus, Upid};
pub use tls::TlsVerification;
pub use types::*;

/// Client settings. `Debug` hides the credentials' secrets and any user info in the URL.
#[derive(Clone)]
pub struct ClientConfig {
    /// PVE URL, e.g. `https://pve.example:8006` (a trailing `/api2/json` is accepted).
    pub url: String,
    /// How to authenticate.
    pub credentials: Credentials,
    /// Server certificate verification.
    pub tls: TlsVerification,
    /// Per-request timeout (must exceed PVE's 3 s delay on 401).
    pub request_timeout: Duration,
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// `User-Agent` header.
    pub user_agent: String,
    /// How often an idempotent GET is retried on network errors (and 595/596 proxy errors)
    /// inside one call. Other errors are returned at once; callers retry with [`backoff`].
    pub get_retries: u32,
    /// Base delay of the in-call retry backoff (doubles per attempt, capped at 5 min).
    pub retry_base: Duration,
    /// Task status polling.
    pub task_poll: TaskPollPolicy,
    /// Age after which a ticket is renewed before use (default 1 h 45 min; PVE tickets live 2 h).
    pub ticket_renew_after: Duration,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("url", &path::redact_userinfo(&self.url))
            .field("credentials", &self.credentials)
            .field("tls", &self.tls)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("user_agent", &self.user_agent)
            .field("get_retries", &self.get_retries)
            .field("retry_base", &self.retry_base)
            .field("task_poll", &self.task_poll)
            .field("ticket_renew_after", &self.ticket_renew_after)
            .finish()
    }
}

impl ClientConfig {
    /// A configuration with defaults: verified TLS, 60 s request timeout, 2 GET retries.
    pub fn new(url: impl Into<String>, credentials: Credentials) -> Self {
        Self {
            url: url.into(),
            credentials,
            tls: TlsVerification::Verify,
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            user_agent: crate::user_agent::USER_AGENT.to_owned(),
            get_retries: 2,
            retry_base: Duration::from_secs(1),
            task_poll: TaskPollPolicy::default(),
            ticket_renew_after: auth::TICKET_RENEW_AFTER,
        }
    }

    /// Adds a PEM CA bundle to the trusted roots.
    pub fn with_ca_pem(mut self, pem: impl Into<String>) -> Self {
        self.tls = TlsVerification::VerifyWithCa(pem.into());
        self
    }

    /// Disables certificate verification (explicit opt-out).
    pub fn insecure(mut self) -> Self {
        self.tls = TlsVerification::Insecure;
        self
    }

    /// Whether the server certificate is verified (`false` after [`ClientConfig::insecure`]).
    pub fn verifies_tls(&self) -> bool {
        !matches!(self.tls, TlsVerification::Insecure)
    }
}

/// A request body.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    /// No body.
    None,
    /// JSON body (POST/PUT).
    Json(serde_json::Value),
    /// Multipart upload: simple `content` field first, then the file part named `filename`.
    Upload {
        /// Content type (`iso`, `vztmpl`, `import`).
        content: String,
        /// Target file name.
        file_name: String,
        /// File bytes.
        data: Bytes,
    },
}

/// The Proxmox VE API client. Cheap to clone; clones share connections and the ticket.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: url::Url,
    config: ClientConfig,
    ticket: Mutex<Option<Ticket>>,
    observer: Arc<dyn RequestObserver>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.inner.base.as_str())
            .field("credentials", &self.inner.config.credentials)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Whether `other` is this very client (or a clone of it), not merely one with the same
    /// endpoint and user: a client rebuilt from a rotated credentials Secret is another one.
    pub fn is_same_client(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The key of what this client sees: its endpoint and user (clients rebuilt from a rotated
    /// Secret share it).
    pub fn endpoint_key(&self) -> String {
        let user = match &self.config().credentials {
            Credentials::Token { token_id, .. } => token_id.as_str(),
            Credentials::Password { username, .. } => username.as_str(),
        };
        format!("{} {user}", self.base_url())
    }

    /// Builds a client. Fails on an invalid URL, credentials or CA bundle.
    pub fn new(config: ClientConfig) -> Result<Self, Error> {
        Self::with_observer(config, Arc::new(NoopObserver))
    }

    /// Builds a client that reports every request to `observer`.
    pub fn with_observer(config: ClientConfig, observer: Arc<dyn RequestObserver>) -> Result<Self, Error> {
        let base = path::api_base(&config.url)?;
        config.credentials.validate()?;
        let tls = tls::client_config(&config.tls)?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .http1_only()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .user_agent(config.user_agent.clone())
            .build()
            .map_err(|e| Error::Config(format!("cannot build HTTP client: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                base,
                config,
                ticket: Mutex::new(None),
                observer,
            }),
        })
    }

    /// The normalised API base URL (ends with `/api2/json`).
    pub fn base_url(&self) -> &url::Url {
        &self.inner.base
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Logs in with username/password (or renews) now; a no-op for token credentials.
    pub async fn login(&self) -> Result<(), Error> {
        if matches!(self.inner.config.credentials, Credentials::Password { .. }) {
            let mut guard = self.inner.ticket.lock().await;
            let fresh = self.obtain_ticket(guard.as_ref()).await?;
            *guard = Some(fresh);
        }
        Ok(())
    }

    /// Calls `POST /access/ticket`, renewing with the current ticket if it is still valid
    /// and falling back to the password.
    async fn obtain_ticket(&self, current: Option<&Ticket>) -> Result<Ticket, Error> {
        let Credentials::Password { username, password } = &self.inner.config.credentials else {
            return Err(Error::Config(
                "ticket login needs username/password credentials".into(),
            ));
        };
        if let Some(t) = current.filter(|t| t.is_valid(Instant::now())) {
            match self.ticket_request(username, t.ticket.expose()).await {
                Ok(t) => return Ok(t),
                Err(e) => tracing::debug!(error = %e, "ticket renewal failed, logging in with the password"),
            }
        }
        self.ticket_request(username, password.expose()).await
    }

    async fn ticket_request(&self, username: &str, password: &str) -> Result<Ticket, Error> {
        let path = ApiPath::root().lit("access/ticket");
        let body = serde_json::json!({ "username": username, "password": password });
        let (status, reason, bytes) = self
            .execute(&http::Method::POST, &path, &[], &Body::Json(body), Vec::new())
            .await?;
        if !(200..300).contains(&status) {
            return Err(Error::from_response(status, reason.as_deref(), &bytes));
        }
        let data: TicketResponseEnvelope = decode(&path, &bytes)?;
        let r = data.data.ok_or_else(|| Error::Decode {
            context: path.template().into(),
            message: "no ticket in answer".into(),
        })?;
        Ok(Ticket {
            ticket: Secret::new(r.ticket),
            csrf: Secret::new(r.csrf_prevention_token.unwrap_or_default()),
            username: r.username,
            obtained: Instant::now(),
        })
    }

    async fn auth_headers(
        &self,
        method: &http::Method,
        force_renew: bool,
    ) -> Result<Vec<(http::HeaderName, http::HeaderValue)>, Error> {
        match &self.inner.config.credentials {
            Credentials::Token { token_id, secret } => Ok(vec![auth::token_header(token_id, secret)?]),
            Credentials::Password { .. } => {
                let mut guard = self.inner.ticket.lock().await;
                let renew_after = self.inner.config.ticket_renew_after;
                let stale = guard
                    .as_ref()
                    .is_none_or(|t| t.needs_renewal(Instant::now(), renew_after));
                if stale || force_renew {
                    // After a 401 the current ticket is not trusted for renewal.
                    let current = if force_renew { None } else { guard.as_ref() };
                    let fresh = self.obtain_ticket(current).await?;
                    *guard = Some(fresh);
                }
                match guard.as_ref() {
                    Some(t) => auth::ticket_headers(t, method),
                    None => Err(Error::Config("no ticket available".into())),
                }
            }
        }
    }

    /// Sends one authenticated HTTP request.
    async fn send_attempt(
        &self,
        method: &http::Method,
        path: &ApiPath,
        query: &[(String, String)],
        body: &Body,
        force_renew: bool,
    ) -> Result<(u16, Option<String>, Bytes), Error> {
        let headers = self.auth_headers(method, force_renew).await?;
        self.execute(method, path, query, body, headers).await
    }

    /// Sends one HTTP request with the given extra headers and returns (status, reason phrase,
    /// body). Reports to the observer.
    async fn execute(
        &self,
        method: &http::Method,
        path: &ApiPath,
        query: &[(String, String)],
        body: &Body,
        headers: Vec<(http::HeaderName, http::HeaderValue)>,
    ) -> Result<(u16, Option<String>, Bytes), Error> {
        let url = path::join(&self.inner.base, path)?;
        let mut req = self
            .inner
            .http
            .request(method.clone(), url)
            .header(http::header::ACCEPT, "application/json");
        if !query.is_empty() {
            req = req.query(query);
        }
        for (k, v) in headers {
            req = req.header(k, v);
        }
        req = match body {
            Body::None => req,
            Body::Json(v) => req.json(v),
            Body::Upload {
                content,
                file_name,
                data,
            } => {
                let part = reqwest::multipart::Part::bytes(data.to_vec())
                    .file_name(file_name.clone())
                    .mime_str("application/octet-stream")
                    .map_err(|e| Error::Config(format!("multipart: {e}")))?;
                let form = reqwest::multipart::Form::new()
                    .text("content", content.clone())
                    .part("filename", part);
                req.multipart(form)
            }
        };
        let start = Instant::now();
        let result = req.send().await;
        let observer = &self.inner.observer;
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                let elapsed = start.elapsed();
                observer.observe(method.as_str(), path.template(), None, elapsed);
                tracing::debug!(method = %method, endpoint = path.template(), elapsed_ms = elapsed.as_millis() as u64, error = %e, "proxmox request failed");
                return Err(e.into());
            }
        };
        let status = resp.status().as_u16();
        let reason = resp
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
        let bytes = resp.bytes().await;
        let elapsed = start.elapsed();
        observer.observe(method.as_str(), path.template(), Some(status), elapsed);
        tracing::debug!(method = %method, endpoint = path.template(), status, elapsed_ms = elapsed.as_millis() as u64, "proxmox request");
        Ok((status, reason, bytes?))
    }

    /// Sends a request with auth, retries and error mapping, and returns the raw body.
    async fn send(
        &self,
        method: http::Method,
        path: &ApiPath,
        query: &[(String, String)],
        body: Body,
    ) -> Result<Bytes, Error> {
        let mut attempt: u32 = 0;
        let mut renewed = false;
        loop {
            let res = self.send_attempt(&method, path, query, &body, false).await;
            let res = match res {
                Ok((401, _, _))
                    if !renewed && matches!(self.inner.config.credentials, Credentials::Password { .. }) =>
                {
                    renewed = true;
                    self.send_attempt(&method, path, query, &body, true).await
                }
                other => other,
            };
            match res {
                Ok((status, _, bytes)) if (200..300).contains(&status) => return Ok(bytes),
                // 595/596: the node we talked to could not reach the target node (proxy errors).
                Ok((status @ (595 | 596), _, _))
                    if method == http::Method::GET && attempt < self.inner.config.get_retries =>
                {
                    let delay = backoff_with(attempt, self.inner.config.retry_base, error::BACKOFF_CAP);
                    tracing::debug!(
                        endpoint = path.template(),
                        attempt,
                        status,
                        "retrying GET after proxy error"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Ok((status, reason, bytes)) => {
                    return Err(Error::from_response(status, reason.as_deref(), &bytes));
                }
                Err(e @ Error::Network { .. })
                    if method == http::Method::GET && attempt < self.inner.config.get_retries =>
                {
                    let delay = backoff_with(attempt, self.inner.config.retry_base, error::BACKOFF_CAP);
                    tracing::debug!(endpoint = path.template(), attempt, error = %e, "retrying GET after network error");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends a request and decodes the `data` member of the answer.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        method: http::Method,
        path: &ApiPath,
        query: &[(String, String)],
        body: Body,
    ) -> Result<T, Error> {
        let bytes = self.send(method, path, query, body).await?;
        let env: Envelope<T> = decode(path, &bytes)?;
        Ok(env.data)
    }

    /// Untyped escape hatch: sends any request (JSON body for POST/PUT, query for GET/DELETE)
    /// and returns the answer's `data` as JSON, with the same auth, retries and error mapping.
    pub async fn request_json(
        &self,
        method: http::Method,
        path: &ApiPath,
        query: &[(String, String)],
        body: Option<serde_json::Value>,
    ) -> Result<serde_json::Value, Error> {
        let body = body.map_or(Body::None, Body::Json);
        self.call(method, path, query, body).await
    }

    /// `GET` returning `data`.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        path: &ApiPath,
        query: &[(String, String)],
    ) -> Result<T, Error> {
        self.call(http::Method::GET, path, query, Body::None).await
    }

    /// `POST` with a JSON body returning `data`.
    pub(crate) async fn post<T: DeserializeOwned>(
        &self,
        path: &ApiPath,
        body: serde_json::Value,
    ) -> Result<T, Error> {
        self.call(http::Method::POST, path, &[], Body::Json(body)).await
    }

    /// `PUT` with a JSON body returning `data`.
    pub(crate) async fn put<T: DeserializeOwned>(
        &self,
        path: &ApiPath,
        body: serde_json::Value,
    ) -> Result<T, Error> {
        self.call(http::Method::PUT, path, &[], Body::Json(body)).await
    }

    /// `DELETE` with query parameters returning `data`.
    pub(crate) async fn delete<T: DeserializeOwned>(
        &self,
        path: &ApiPath,
        query: &[(String, String)],
    ) -> Result<T, Error> {
        self.call(http::Method::DELETE, path, query, Body::None).await
    }

    /// Multipart upload returning `data`.
    pub(crate) async fn upload<T: DeserializeOwned>(
        &self,
        path: &ApiPath,
        content: &str,
        file_name: &str,
        data: Bytes,
    ) -> Result<T, Error> {
        let body = Body::Upload {
            content: content.to_owned(),
            file_name: file_name.to_owned(),
            data,
        };
        self.call(http::Method::POST, path, &[], body).await
    }
}

#[derive(serde::Deserialize)]
struct Envelope<T> {
    data: T,
}

#[derive(serde::Deserialize)]
struct TicketResponseEnvelope {
    data: Option<auth::TicketResponse>,
}

/// Decodes a JSON body, mapping failures to [`Error::Decode`] with the endpoint template.
fn decode<T: DeserializeOwned>(path: &ApiPath, bytes: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Decode {
        context: path.template().to_owned(),
        message: e.to_string(),
    })
}

/// Serializes a request struct to a JSON object (dropping `null`s).
pub(crate) fn to_body<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, Error> {
    let mut v = serde_json::to_value(value).map_err(|e| Error::Invalid {
        what: "request body",
        message: e.to_string(),
    })?;
    if let serde_json::Value::Object(m) = &mut v {
        m.retain(|_, x| !x.is_null());
    }
    Ok(v)
}

/// Serializes a request struct to query pairs (dropping `null`s; bools already as 0/1).
pub(crate) fn to_query<T: serde::Serialize>(value: &T) -> Result<Vec<(String, String)>, Error> {
    let v = to_body(value)?;
    let mut out = Vec::new();
    if let serde_json::Value::Object(m) = v {
        for (k, x) in m {
            let s = match x {
                serde_json::Value::String(s) => s,
                serde_json::Value::Bool(b) => {
                    if b {
                        "1".into()
                    } else {
                        "0".into()
                    }
                }
                other => other.to_string(),
            };
            out.push((k, s));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_builds_and_debug_redacts() {
        let c = Client::new(ClientConfig::new(
            "https://pve:8006/api2/json/",
            Credentials::token("a@pve!t", "tok-secret"),
        ))
        .unwrap();
        assert_eq!(c.base_url().as_str(), "https://pve:8006/api2/json");
        let dbg = format!("{c:?} {:?}", c.config());
        assert!(!dbg.contains("tok-secret"), "{dbg}");
        let c = Client::new(
            ClientConfig::new("https://pve:8006", Credentials::password("root@pam", "pw-secret")).insecure(),
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("pw-secret"));
        assert!(Client::new(ClientConfig::new("nope", Credentials::token("a@pve!t", "x"))).is_err());
    }

    #[test]
    fn query_serialisation() {
        #[derive(serde::Serialize)]
        struct Q {
            a: Option<u32>,
            b: Option<String>,
            c: bool,
        }
        let q = to_query(&Q {
            a: Some(1),
            b: None,
            c: true,
        })
        .unwrap();
        assert_eq!(
            q,
            vec![("a".to_owned(), "1".to_owned()), ("c".to_owned(), "1".to_owned())]
        );
    }
}

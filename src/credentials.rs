//! Proxmox credentials of a ProxmoxCluster: parsing the `credentialsRef` Secret (capmox key names
//! and TLS semantics), a cache of one client per Secret version (a rotated Secret gets a new
//! client), and the objects whose credentials Proxmox refused, waiting for the Secret to change.
//!
//! The manager's global client (from `PROXMOX_URL`/`PROXMOX_TOKEN`/`PROXMOX_SECRET`) wins over any
//! Secret, as in capmox.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use crate::proxmox::{self, Client, ClientConfig, Credentials, RequestObserver};

/// Secret key with the Proxmox URL.
pub const KEY_URL: &str = "url";
/// Secret key with the API token id (`user@realm!name`).
pub const KEY_TOKEN: &str = "token";
/// Secret key with the API token secret.
pub const KEY_SECRET: &str = "secret";
/// Optional secret key: skip TLS verification (`1`, `on`, `true`, `yes`, `y`; absent ⇒ insecure).
pub const KEY_INSECURE: &str = "insecure";
/// Optional secret key: PEM CA bundle trusted in addition to the public roots.
pub const KEY_ROOT_CA: &str = "root_ca";
/// Secret key with a user name (`user@realm`) for ticket auth, instead of `token`/`secret`.
pub const KEY_USERNAME: &str = "username";
/// Secret key with the password of [`KEY_USERNAME`].
pub const KEY_PASSWORD: &str = "password";

/// Errors turning a Secret into a client.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// A required key is missing or empty.
    #[error("credentials secret {secret} has no value for key {key:?}")]
    MissingKey {
        /// `namespace/name` of the Secret.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// A value is not UTF-8.
    #[error("credentials secret {secret}: key {key:?} is not valid UTF-8")]
    NotUtf8 {
        /// `namespace/name` of the Secret.
        secret: String,
        /// The key.
        key: &'static str,
    },
    /// The client could not be built (bad URL or CA bundle).
    #[error("credentials secret {secret}: {source}")]
    Client {
        /// `namespace/name` of the Secret.
        secret: String,
        /// Underlying error.
        #[source]
        source: proxmox::Error,
    },
}

/// How a Secret authenticates: an API token, or a user name and password (ticket auth).
#[derive(Clone)]
pub enum SecretAuth {
    /// `token` and `secret`.
    Token {
        /// API token id.
        token_id: String,
        /// API token secret.
        token_secret: proxmox::Secret,
    },
    /// `username` and `password`: the client logs in and keeps a ticket.
    Password {
        /// User name with realm.
        username: String,
        /// Password.
        password: proxmox::Secret,
    },
}

impl std::fmt::Debug for SecretAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Token {
                token_id,
                token_secret,
            } => f
                .debug_struct("Token")
                .field("token_id", token_id)
                .field("token_secret", token_secret)
                .finish(),
            Self::Password { username, password } => f
                .debug_struct("Password")
                .field("username", username)
                .field("password", password)
                .finish(),
        }
    }
}

/// Credentials read from a Secret. `Debug` never shows the token secret or password (nor user
/// info in the URL).
#[derive(Clone)]
pub struct SecretCredentials {
    /// Proxmox URL.
    pub url: String,
    /// Token or user name and password.
    pub auth: SecretAuth,
    /// Skip TLS verification.
    pub insecure: bool,
    /// Extra trusted CA certificates (PEM).
    pub root_ca: Option<String>,
}

impl std::fmt::Debug for SecretCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretCredentials")
            .field("url", &crate::proxmox::path::redact_userinfo(&self.url))
            .field("auth", &self.auth)
            .field("insecure", &self.insecure)
            .field("root_ca", &self.root_ca.as_ref().map(|_| "<PEM>"))
            .finish()
    }
}

impl SecretCredentials {
    /// The client configuration for these credentials (fast connect and few retries, as the
    /// controller probes on every reconcile and backs off itself).
    pub fn client_config(&self) -> ClientConfig {
        let credentials = match &self.auth {
            SecretAuth::Token {
                token_id,
                token_secret,
            } => Credentials::token(token_id.clone(), token_secret.clone()),
            SecretAuth::Password { username, password } => {
                Credentials::password(username.clone(), password.clone())
            }
        };
        let mut cfg = ClientConfig::new(self.url.clone(), credentials);
        cfg.connect_timeout = Duration::from_secs(5);
        cfg.request_timeout = Duration::from_secs(30);
        cfg.get_retries = 1;
        cfg.retry_base = Duration::from_millis(200);
        if self.insecure {
            cfg = cfg.insecure();
        } else if let Some(pem) = &self.root_ca {
            cfg = cfg.with_ca_pem(pem.clone());
        }
        cfg
    }
}

/// capmox's reading of the `insecure` key: absent ⇒ insecure (pre-v0.7 behaviour); present ⇒
/// insecure iff its lower-cased value is one of `1`, `on`, `true`, `yes`, `y`.
pub fn insecure_from(value: Option<&str>) -> bool {
    match value {
        None => true,
        Some(v) => matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "on" | "true" | "yes" | "y"
        ),
    }
}

/// Parses the data of a credentials Secret. `secret` names it (`namespace/name`) in errors.
pub fn parse_secret_data(
    secret: &str,
    data: &BTreeMap<String, ByteString>,
) -> Result<SecretCredentials, CredentialsError> {
    let text = |key: &'static str| -> Result<Option<String>, CredentialsError> {
        match data.get(key) {
            None => Ok(None),
            Some(b) => String::from_utf8(b.0.clone())
                .map(Some)
                .map_err(|_| CredentialsError::NotUtf8 {
                    secret: secret.to_owned(),
                    key,
                }),
        }
    };
    let required = |key: &'static str| -> Result<String, CredentialsError> {
        text(key)?
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| CredentialsError::MissingKey {
                secret: secret.to_owned(),
                key,
            })
    };
    let present = |key: &'static str| -> Result<bool, CredentialsError> {
        Ok(text(key)?.is_some_and(|v| !v.trim().is_empty()))
    };
    // A token wins; `username`/`password` (ticket auth, as other Proxmox operators take them)
    // only without one.
    let auth = if !present(KEY_TOKEN)? && present(KEY_USERNAME)? {
        SecretAuth::Password {
            username: required(KEY_USERNAME)?,
            password: proxmox::Secret::new(text(KEY_PASSWORD)?.filter(|p| !p.is_empty()).ok_or_else(
                || CredentialsError::MissingKey {
                    secret: secret.to_owned(),
                    key: KEY_PASSWORD,
                },
            )?),
        }
    } else {
        SecretAuth::Token {
            token_id: required(KEY_TOKEN)?,
            token_secret: proxmox::Secret::new(required(KEY_SECRET)?),
        }
    };
    Ok(SecretCredentials {
        url: required(KEY_URL)?,
        auth,
        insecure: insecure_from(text(KEY_INSECURE)?.as_deref()),
        root_ca: text(KEY_ROOT_CA)?.filter(|s| !s.trim().is_empty()),
    })
}

/// `(namespace, name)` of a Secret or another namespaced object.
type ObjectKey = (String, String);

/// A client built from one version of a Secret.
struct CachedClient {
    uid: String,
    resource_version: String,
    client: Client,
}

/// The source of Proxmox clients for ProxmoxClusters: the global client, or one cached client per
/// credentials Secret, rebuilt only when the Secret's uid or resourceVersion changes.
pub struct ProxmoxClients {
    global: Option<Client>,
    observer: Arc<dyn RequestObserver>,
    cache: Mutex<HashMap<(String, String), CachedClient>>,
    built: AtomicU64,
    /// Objects whose credentials Proxmox refused, by credentials Secret `(namespace, name)`.
    rotation_waiters: Mutex<HashMap<ObjectKey, BTreeSet<ObjectKey>>>,
    /// The shared `/cluster/resources` lists, by [`client_key`].
    resources: Mutex<HashMap<String, Arc<ResourceList>>>,
    /// The Proxmox clusters' names, by [`client_key`].
    names: Mutex<HashMap<String, Arc<ClusterName>>>,
}

pub use crate::proxmox::view::{ClusterName, ResourceList};

/// The entry of `map` for the Proxmox cluster `client` talks to, created on first use.
fn shared_of<T: Default>(map: &Mutex<HashMap<String, Arc<T>>>, client: &Client) -> Arc<T> {
    Arc::clone(
        map.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(client_key(client))
            .or_default(),
    )
}

/// The key of what a client sees: its endpoint and user ([`Client::endpoint_key`]).
pub fn client_key(client: &Client) -> String {
    client.endpoint_key()
}

impl std::fmt::Debug for ProxmoxClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxmoxClients")
            .field("global", &self.global.is_some())
            .field("built", &self.built.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ProxmoxClients {
    /// A client source with an optional global client; `observer` is attached to every client
    /// built from a Secret.
    pub fn new(global: Option<Client>, observer: Arc<dyn RequestObserver>) -> Self {
        Self {
            global,
            observer,
            cache: Mutex::new(HashMap::new()),
            built: AtomicU64::new(0),
            rotation_waiters: Mutex::new(HashMap::new()),
            resources: Mutex::new(HashMap::new()),
            names: Mutex::new(HashMap::new()),
        }
    }

    /// The shared `/cluster/resources` list of the Proxmox cluster `client` talks to (one per
    /// endpoint and user, shared by both controllers).
    pub fn resources(&self, client: &Client) -> Arc<ResourceList> {
        shared_of(&self.resources, client)
    }

    /// The shared name of the Proxmox cluster `client` talks to (one per endpoint and user).
    pub fn cluster_name(&self, client: &Client) -> Arc<ClusterName> {
        shared_of(&self.names, client)
    }

    /// Whether the shared `/cluster/resources` list of the cluster `client` talks to was read
    /// successfully less than `age` ago (Proxmox answered then: a probe may rely on it instead of
    /// sending a request of its own).
    pub fn listed_within(&self, client: &Client, age: std::time::Duration) -> bool {
        self.resources(client)
            .peek()
            .is_some_and(|(at, _)| at.elapsed() < age)
    }

    /// The manager-wide client, when the manager was started with credentials.
    pub fn global(&self) -> Option<&Client> {
        self.global.as_ref()
    }

    /// The client for a credentials Secret, from the cache when the Secret did not change.
    pub fn for_secret(&self, secret: &Secret) -> Result<Client, CredentialsError> {
        let ns = secret.metadata.namespace.clone().unwrap_or_default();
        let name = secret.metadata.name.clone().unwrap_or_default();
        let uid = secret.metadata.uid.clone().unwrap_or_default();
        let rv = secret.metadata.resource_version.clone().unwrap_or_default();
        let key = (ns, name);
        if let Some(c) = self.lock().get(&key)
            && c.uid == uid
            && c.resource_version == rv
        {
            return Ok(c.client.clone());
        }
        let label = format!("{}/{}", key.0, key.1);
        let empty = BTreeMap::new();
        let creds = parse_secret_data(&label, secret.data.as_ref().unwrap_or(&empty))?;
        let client =
            Client::with_observer(creds.client_config(), self.observer.clone()).map_err(|source| {
                CredentialsError::Client {
                    secret: label.clone(),
                    source,
                }
            })?;
        if creds.insecure {
            tracing::warn!(
                secret = %label,
                url = %client.base_url(),
                "TLS certificate verification of this Proxmox client is disabled (the Secret's key `insecure` is absent or true, as capmox reads it); set insecure=false and root_ca to verify the server"
            );
        }
        self.built.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(
            key,
            CachedClient {
                uid,
                resource_version: rv,
                client: client.clone(),
            },
        );
        Ok(client)
    }

    /// Drops the cached client of a Secret (e.g. when it is gone).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock().remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// How many clients were built from Secrets so far (for tests and diagnostics).
    pub fn clients_built(&self) -> u64 {
        self.built.load(Ordering::Relaxed)
    }

    /// Records that Proxmox refused the credentials of Secret `secret` for `object` (both
    /// `(namespace, name)`), so that the next change of that Secret requeues the object at once
    /// instead of after its (up to 5 minute) backoff.
    pub fn wait_for_rotation(&self, secret: (String, String), object: (String, String)) {
        self.rotation_waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(secret)
            .or_default()
            .insert(object);
    }

    /// The objects waiting for a change of Secret `namespace/name` (forgotten: one that fails
    /// again registers again).
    pub fn take_rotation_waiters(&self, namespace: &str, name: &str) -> Vec<(String, String)> {
        self.rotation_waiters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&(namespace.to_owned(), name.to_owned()))
            .map(|s| s.into_iter().collect())
            .unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), CachedClient>> {
        // A poisoned cache only means another reconcile panicked mid-insert; the map is still valid.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, ByteString> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
            .collect()
    }

    #[test]
    fn insecure_semantics_match_capmox() {
        assert!(insecure_from(None));
        for v in ["1", "on", "true", "TRUE", "Yes", "y"] {
            assert!(insecure_from(Some(v)), "{v}");
        }
        for v in ["0", "false", "no", "", "off", "n"] {
            assert!(!insecure_from(Some(v)), "{v}");
        }
    }

    #[test]
    fn parses_keys_and_hides_secret() {
        let c = parse_secret_data(
            "ns/creds",
            &data(&[
                ("url", "https://pve:8006"),
                ("token", "capmox@pve!capi"),
                ("secret", "s3cr3t-value"),
                ("insecure", "false"),
                ("root_ca", "-----BEGIN CERTIFICATE-----"),
            ]),
        )
        .unwrap();
        assert_eq!(c.url, "https://pve:8006");
        let SecretAuth::Token {
            token_id,
            token_secret,
        } = &c.auth
        else {
            panic!("token credentials expected");
        };
        assert_eq!(token_id, "capmox@pve!capi");
        assert_eq!(token_secret.expose(), "s3cr3t-value");
        assert!(!c.insecure);
        assert!(c.root_ca.is_some());
        assert!(!format!("{c:?}").contains("s3cr3t-value"));
    }

    #[test]
    fn username_and_password_mean_ticket_auth() {
        let c = parse_secret_data(
            "ns/creds",
            &data(&[
                ("url", "https://pve:8006"),
                ("username", "root@pam"),
                ("password", "hunter2-secret"),
            ]),
        )
        .unwrap();
        assert!(matches!(&c.auth, SecretAuth::Password { username, .. } if username == "root@pam"));
        assert!(!format!("{c:?}").contains("hunter2-secret"));
        let e = parse_secret_data(
            "ns/creds",
            &data(&[("url", "https://pve"), ("username", "root@pam")]),
        )
        .unwrap_err();
        assert!(
            matches!(e, CredentialsError::MissingKey { key: "password", .. }),
            "{e}"
        );
    }

    #[test]
    fn missing_key_is_named() {
        let e = parse_secret_data("ns/creds", &data(&[("url", "https://pve"), ("token", "t")])).unwrap_err();
        assert!(
            matches!(e, CredentialsError::MissingKey { key: "secret", .. }),
            "{e}"
        );
        let e = parse_secret_data(
            "ns/creds",
            &data(&[("url", " "), ("token", "t"), ("secret", "s")]),
        )
        .unwrap_err();
        assert!(
            matches!(e, CredentialsError::MissingKey { key: "url", .. }),
            "{e}"
        );
    }

    #[test]
    fn cache_rebuilds_only_on_new_resource_version() {
        let clients = ProxmoxClients::new(None, Arc::new(proxmox::NoopObserver));
        let mut s = Secret {
            metadata: ObjectMeta {
                name: Some("creds".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            data: Some(data(&[
                ("url", "https://127.0.0.1:1"),
                ("token", "a@pve!b"),
                ("secret", "x"),
            ])),
            ..Default::default()
        };
        clients.for_secret(&s).unwrap();
        clients.for_secret(&s).unwrap();
        assert_eq!(clients.clients_built(), 1);
        s.metadata.resource_version = Some("2".into());
        clients.for_secret(&s).unwrap();
        assert_eq!(clients.clients_built(), 2);
        clients.forget("ns", "creds");
        clients.for_secret(&s).unwrap();
        assert_eq!(clients.clients_built(), 3);
    }

    #[test]
    fn rotation_waiters_are_taken_once_per_secret() {
        let clients = ProxmoxClients::new(None, Arc::new(proxmox::NoopObserver));
        let key = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        clients.wait_for_rotation(key("ns", "creds"), key("ns", "m1"));
        clients.wait_for_rotation(key("ns", "creds"), key("ns", "m2"));
        clients.wait_for_rotation(key("ns", "creds"), key("ns", "m1"));
        clients.wait_for_rotation(key("ns", "other"), key("ns", "m3"));
        assert_eq!(
            clients.take_rotation_waiters("ns", "creds"),
            [key("ns", "m1"), key("ns", "m2")]
        );
        assert!(clients.take_rotation_waiters("ns", "creds").is_empty());
        assert_eq!(clients.take_rotation_waiters("ns", "other"), [key("ns", "m3")]);
    }
}

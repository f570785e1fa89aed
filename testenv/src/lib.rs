//! Test control plane for integration tests and the demo.
//!
//! [`TestEnv::start`] starts either real `etcd` + `kube-apiserver` binaries (when
//! `TEST_ASSET_KUBE_APISERVER` and `TEST_ASSET_ETCD` are set, or `KUBEBUILDER_ASSETS` names a folder
//! holding both) or the in-tree API server of this crate, and hands out a [`kube::Client`] and a
//! kubeconfig file that `kubectl` can use. See the crate README for what the in-tree server implements.

pub mod audit;
pub mod certs;
pub mod crds;
pub mod kubeconfig;
pub mod real;
pub mod server;
pub mod wait;

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::config::KubeConfigOptions;

pub use server::ServerOptions;
pub use wait::{wait_for, wait_for_explained};

/// Errors of the test control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Filesystem or process I/O failed.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// Certificate generation or loading failed.
    #[error("certificates: {0}")]
    Certs(String),
    /// Building the client failed.
    #[error("kube client: {0}")]
    Kube(#[from] kube::Error),
    /// Kubeconfig handling failed.
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// A CRD file could not be parsed.
    #[error("parsing {0}: {1}")]
    Parse(String, String),
    /// The server failed to start or misbehaved.
    #[error("control plane: {0}")]
    Server(String),
    /// Waiting for a condition timed out.
    #[error("timed out: {0}")]
    Timeout(String),
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

enum Plane {
    InTree(server::InTreeServer),
    Real(Box<real::RealControlPlane>),
}

/// A running control plane with a client and a kubeconfig file.
pub struct TestEnv {
    plane: Plane,
    client: kube::Client,
    url: String,
    token: String,
    kubeconfig_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("url", &self.url)
            .field("real", &self.is_real())
            .finish_non_exhaustive()
    }
}

/// Builds a client for `url` trusting `ca_pem`, authenticating with `token`.
pub async fn client_for(url: &str, ca_pem: &str, token: &str) -> Result<kube::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = kubeconfig::build(url, ca_pem, token)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// Options for [`TestEnv::start_with`].
#[derive(Debug, Clone, Default)]
pub struct TestEnvOptions {
    /// In-tree server options (ignored in real-binary mode).
    pub server: ServerOptions,
    /// Use the in-tree server even when real binaries are configured.
    pub force_in_tree: bool,
}

impl TestEnv {
    /// Starts a control plane: real binaries when configured, the in-tree server otherwise.
    pub async fn start() -> Result<Self> {
        Self::start_with(TestEnvOptions::default()).await
    }

    /// Starts a control plane with options (e.g. the opt-in garbage collector of the in-tree server).
    pub async fn start_with(opts: TestEnvOptions) -> Result<Self> {
        let binaries = real::binaries_from_env().filter(|_| !opts.force_in_tree);
        Self::start_inner(opts, binaries).await
    }

    /// Starts real `kube-apiserver` and `etcd` binaries given explicitly (ignores the environment).
    pub async fn start_real(kube_apiserver: impl AsRef<Path>, etcd: impl AsRef<Path>) -> Result<Self> {
        let bins = (kube_apiserver.as_ref().to_path_buf(), etcd.as_ref().to_path_buf());
        Self::start_inner(TestEnvOptions::default(), Some(bins)).await
    }

    /// Starts real `kube-apiserver` and `etcd` binaries with an audit log at `audit_log`, so that
    /// [`TestEnv::request_counts`] can count requests as with the in-tree server.
    pub async fn start_real_audited(
        kube_apiserver: impl AsRef<Path>,
        etcd: impl AsRef<Path>,
        audit_log: impl AsRef<Path>,
    ) -> Result<Self> {
        let bins = (kube_apiserver.as_ref().to_path_buf(), etcd.as_ref().to_path_buf());
        let audit = Some(audit_log.as_ref().to_path_buf());
        Self::start_plane(TestEnvOptions::default(), Some(bins), audit).await
    }

    /// Requests received so far by `User-Agent`, verb and resource: the in-tree server's counters,
    /// or the audit log of a real control plane started by [`TestEnv::start_real_audited`]
    /// (`None` for a real control plane without one).
    pub fn request_counts(
        &self,
    ) -> Option<Result<std::collections::BTreeMap<server::requests::RequestKey, u64>>> {
        match &self.plane {
            Plane::InTree(s) => Some(Ok(s.request_counts())),
            Plane::Real(r) => r.audit_log().map(audit::read_counts),
        }
    }

    async fn start_inner(opts: TestEnvOptions, binaries: Option<(PathBuf, PathBuf)>) -> Result<Self> {
        Self::start_plane(opts, binaries, None).await
    }

    async fn start_plane(
        opts: TestEnvOptions,
        binaries: Option<(PathBuf, PathBuf)>,
        audit_log: Option<PathBuf>,
    ) -> Result<Self> {
        let dir = tempfile::tempdir().map_err(|e| Error::Io("creating temp dir".into(), e))?;
        let (plane, url, ca, token) = match binaries {
            Some((apiserver, etcd)) => {
                let p =
                    real::RealControlPlane::start_with_audit(&apiserver, &etcd, audit_log.as_deref()).await?;
                let (url, ca, token) = (p.url.clone(), p.ca_pem.clone(), p.token().to_string());
                (Plane::Real(Box::new(p)), url, ca, token)
            }
            None => {
                let c = certs::generate()?;
                let token = certs::random_token();
                let s = server::start(&c, &token, opts.server.clone()).await?;
                let url = format!("https://{}", s.addr);
                (Plane::InTree(s), url, c.ca_pem, token)
            }
        };
        let kubeconfig_path = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig_path, kubeconfig::render(&url, &ca, &token))
            .map_err(|e| Error::Io(format!("writing {}", kubeconfig_path.display()), e))?;
        let client = client_for(&url, &ca, &token).await?;
        Ok(Self {
            plane,
            client,
            url,
            token,
            kubeconfig_path,
            _dir: dir,
        })
    }

    /// A client for the control plane (admin).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Path of a kubeconfig file for `kubectl --kubeconfig`.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The API server URL.
    pub fn server_url(&self) -> &str {
        &self.url
    }

    /// The admin bearer token (user `testenv-admin` in `system:masters`; TokenReview knows it in
    /// both modes).
    pub fn admin_token(&self) -> &str {
        &self.token
    }

    /// The in-tree server, when running in in-tree mode.
    pub fn in_tree(&self) -> Option<&server::InTreeServer> {
        match &self.plane {
            Plane::InTree(s) => Some(s),
            Plane::Real(_) => None,
        }
    }

    /// The real control plane, when running in real-binary mode.
    pub fn real(&self) -> Option<&real::RealControlPlane> {
        match &self.plane {
            Plane::Real(r) => Some(r),
            Plane::InTree(_) => None,
        }
    }

    /// Whether real etcd + kube-apiserver binaries are running.
    pub fn is_real(&self) -> bool {
        matches!(self.plane, Plane::Real(_))
    }

    /// Installs every CRD found in a YAML file or a folder of YAML files (multi-document), and waits
    /// until each is established and served.
    pub async fn install_crds_from_path(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<Vec<CustomResourceDefinition>> {
        let list = crds::read_crds(path.as_ref())?;
        self.install_crds(list.clone()).await?;
        Ok(list)
    }

    /// Installs CRDs (creating or replacing them) and waits until established and served.
    pub async fn install_crds(&self, list: Vec<CustomResourceDefinition>) -> Result<()> {
        crds::install(&self.client, list).await
    }
}

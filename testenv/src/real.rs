//! Real-binary mode: etcd + kube-apiserver on loopback, started the way controller-runtime's envtest
//! starts them (free ports, temp dirs, generated certificates), plus a token-auth file holding a
//! `system:masters` admin token. Processes are killed and directories removed on drop.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::{Error, certs};

/// Paths to `kube-apiserver` and `etcd` from `TEST_ASSET_KUBE_APISERVER`/`TEST_ASSET_ETCD` or from
/// the `KUBEBUILDER_ASSETS` folder.
pub fn binaries_from_env() -> Option<(PathBuf, PathBuf)> {
    let a = std::env::var_os("TEST_ASSET_KUBE_APISERVER").filter(|v| !v.is_empty());
    let e = std::env::var_os("TEST_ASSET_ETCD").filter(|v| !v.is_empty());
    if let (Some(a), Some(e)) = (a, e) {
        return Some((PathBuf::from(a), PathBuf::from(e)));
    }
    let dir = PathBuf::from(std::env::var_os("KUBEBUILDER_ASSETS").filter(|v| !v.is_empty())?);
    let (a, e) = (dir.join("kube-apiserver"), dir.join("etcd"));
    (a.is_file() && e.is_file()).then_some((a, e))
}

/// A running etcd + kube-apiserver pair.
pub struct RealControlPlane {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// CA that signed the serving certificate (PEM).
    pub ca_pem: String,
    token: String,
    audit_log: Option<PathBuf>,
    etcd: Child,
    apiserver: Child,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for RealControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealControlPlane")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Drop for RealControlPlane {
    fn drop(&mut self) {
        let _ = self.apiserver.start_kill();
        let _ = self.etcd.start_kill();
    }
}

/// How often a start is tried when a port picked for it was taken before the child bound it.
pub const PORT_ATTEMPTS: u32 = 3;

/// What etcd and kube-apiserver log when a port is taken.
const PORT_TAKEN: &str = "address already in use";

fn free_port() -> Result<u16, Error> {
    let l =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::Io("finding a free port".into(), e))?;
    let port = l
        .local_addr()
        .map_err(|e| Error::Io("finding a free port".into(), e))?
        .port();
    Ok(port)
}

/// The last lines of a log file, for error messages.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn write(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| Error::Io(format!("writing {}", path.display()), e))
}

fn spawn(bin: &Path, args: &[String], log: &Path) -> Result<Child, Error> {
    let out = std::fs::File::create(log).map_err(|e| Error::Io(format!("creating {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| Error::Io(format!("creating {}", log.display()), e))?;
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Io(format!("starting {}", bin.display()), e))
}

impl RealControlPlane {
    /// Admin bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The audit log (JSON lines), when started with one.
    pub fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Starts etcd and kube-apiserver and waits until the apiserver is ready.
    pub async fn start(apiserver: &Path, etcd: &Path) -> Result<Self, Error> {
        Self::start_with_audit(apiserver, etcd, None).await
    }

    /// Like [`RealControlPlane::start`], with an audit log at `audit_log` when given: every request
    /// is logged at level `Metadata` (`ResponseComplete`, `ResponseStarted` for watches) as JSON
    /// lines, which [`crate::audit::read_counts`] turns into request counts.
    ///
    /// The ports are picked free but are only bound by the child processes later, so another
    /// process may take one in between: a start that fails with "address already in use" is tried
    /// again on new ports (up to [`PORT_ATTEMPTS`] times).
    pub async fn start_with_audit(
        apiserver: &Path,
        etcd: &Path,
        audit_log: Option<&Path>,
    ) -> Result<Self, Error> {
        let mut attempt = 1;
        loop {
            match Self::start_once(apiserver, etcd, audit_log).await {
                Err(Error::Server(message)) if attempt < PORT_ATTEMPTS && message.contains(PORT_TAKEN) => {
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(apiserver: &Path, etcd: &Path, audit_log: Option<&Path>) -> Result<Self, Error> {
        let dir = tempfile::tempdir().map_err(|e| Error::Io("creating temp dir".into(), e))?;
        let d = dir.path();
        let etcd_data = d.join("etcd");
        let cert_dir = d.join("certs");
        std::fs::create_dir_all(&cert_dir).map_err(|e| Error::Io("creating cert dir".into(), e))?;
        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);

        let certs = certs::generate()?;
        write(&cert_dir.join("apiserver.crt"), &certs.serving_pem)?;
        write(&cert_dir.join("apiserver.key"), &certs.serving_key_pem)?;
        write(&cert_dir.join("client-cert-auth-ca.crt"), &certs.ca_pem)?;
        let (sa_key, sa_pub) = certs::key_pair_pem()?;
        write(&cert_dir.join("sa-signer.key"), &sa_key)?;
        write(&cert_dir.join("sa-signer.pub"), &sa_pub)?;
        let token = certs::random_token();
        write(
            &d.join("token-auth.csv"),
            &format!("{token},testenv-admin,testenv-admin-uid,\"system:masters\"\n"),
        )?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_args = vec![
            format!("--advertise-client-urls={etcd_url}"),
            format!("--data-dir={}", etcd_data.display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync=true".to_string(),
        ];
        let etcd_child = spawn(etcd, &etcd_args, &d.join("etcd.log"))?;
        let c = |name: &str| cert_dir.join(name).display().to_string();
        let api_args = vec![
            "--advertise-address=127.0.0.1".to_string(),
            "--allow-privileged=true".to_string(),
            "--authorization-mode=RBAC".to_string(),
            "--bind-address=127.0.0.1".to_string(),
            format!("--cert-dir={}", cert_dir.display()),
            format!("--client-ca-file={}", c("client-cert-auth-ca.crt")),
            "--disable-admission-plugins=ServiceAccount".to_string(),
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={api_port}"),
            format!("--service-account-issuer=https://127.0.0.1:{api_port}/"),
            format!("--service-account-key-file={}", c("sa-signer.pub")),
            format!("--service-account-signing-key-file={}", c("sa-signer.key")),
            "--service-cluster-ip-range=10.0.0.0/24".to_string(),
            format!("--tls-cert-file={}", c("apiserver.crt")),
            format!("--tls-private-key-file={}", c("apiserver.key")),
            format!("--token-auth-file={}", d.join("token-auth.csv").display()),
        ];
        let mut api_args = api_args;
        if let Some(log) = audit_log {
            let policy = d.join("audit-policy.yaml");
            write(&policy, crate::audit::POLICY)?;
            api_args.push(format!("--audit-policy-file={}", policy.display()));
            api_args.push(format!("--audit-log-path={}", log.display()));
            api_args.push("--audit-log-format=json".to_string());
            api_args.push("--audit-log-mode=blocking".to_string());
        }
        let api_child = spawn(apiserver, &api_args, &d.join("kube-apiserver.log"))?;
        let url = format!("https://127.0.0.1:{api_port}");
        let mut plane = Self {
            url,
            ca_pem: certs.ca_pem,
            token,
            audit_log: audit_log.map(Path::to_path_buf),
            etcd: etcd_child,
            apiserver: api_child,
            _dir: dir,
        };
        plane.wait_ready().await?;
        Ok(plane)
    }

    async fn wait_ready(&mut self) -> Result<(), Error> {
        let client = crate::client_for(&self.url, &self.ca_pem, &self.token).await?;
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(Some(status)) = self.apiserver.try_wait() {
                let log = tail(&self._dir.path().join("kube-apiserver.log"));
                return Err(Error::Server(format!(
                    "kube-apiserver exited early: {status}\n{log}"
                )));
            }
            if let Ok(Some(status)) = self.etcd.try_wait() {
                let log = tail(&self._dir.path().join("etcd.log"));
                return Err(Error::Server(format!("etcd exited early: {status}\n{log}")));
            }
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| Error::Server(e.to_string()))?;
            if client.request_text(req).await.is_ok_and(|t| t.trim() == "ok") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Error::Server(
                    "kube-apiserver did not become ready within 90s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

//! The capmox manager under test: the `capmox` binary as its own OS process (so RSS and CPU time
//! read from `/proc/<pid>` are the manager's alone), or in-process (for the smoke test, without
//! RSS/CPU figures). Either way it is configured through its command line and reached through
//! its metrics endpoint.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::BenchError;

/// How the manager runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagerMode {
    /// The `capmox` binary at this path, as a child process.
    Process(PathBuf),
    /// In this process (RSS and CPU time are not measured).
    InProcess,
}

/// What the manager needs to reach Kubernetes and Proxmox.
#[derive(Debug, Clone)]
pub struct ManagerTarget {
    /// Kubeconfig of the control plane.
    pub kubeconfig: PathBuf,
    /// pve-sim URL.
    pub proxmox_url: String,
    /// API token id.
    pub proxmox_token: String,
    /// API token secret.
    pub proxmox_secret: String,
    /// PEM file of pve-sim's CA.
    pub proxmox_ca_file: PathBuf,
    /// Extra command-line arguments (e.g. `--concurrency=10`).
    pub extra_args: Vec<String>,
    /// Where the process's stderr goes.
    pub log_file: PathBuf,
}

enum Running {
    Process(Child),
    InProcess {
        stop: tokio::sync::oneshot::Sender<()>,
        task: tokio::task::JoinHandle<Result<(), capmox::manager::ManagerError>>,
    },
}

/// A running manager.
pub struct ManagerHandle {
    running: Running,
    metrics: SocketAddr,
    started: Instant,
    http: reqwest::Client,
}

fn free_port() -> Result<u16, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| BenchError::io("finding a free port", e))?;
    Ok(l.local_addr()
        .map_err(|e| BenchError::io("finding a free port", e))?
        .port())
}

fn common_args(metrics: SocketAddr, t: &ManagerTarget) -> Vec<String> {
    let mut args = vec![
        "--health-probe-bind-address=0".to_owned(),
        format!("--diagnostics-address={metrics}"),
        // The bench reads the metrics itself over plain HTTP on loopback, and plays no API
        // server that would call webhooks.
        "--insecure-diagnostics=true".to_owned(),
        "--enable-webhooks=false".to_owned(),
        "--v=0".to_owned(),
    ];
    args.extend(t.extra_args.iter().cloned());
    args
}

impl ManagerHandle {
    /// Starts the manager.
    pub async fn start(mode: &ManagerMode, t: &ManagerTarget) -> Result<Self, BenchError> {
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| BenchError::Manager(format!("building the HTTP client: {e}")))?;
        let started = Instant::now();
        let running = match mode {
            ManagerMode::Process(bin) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&t.log_file)
                    .map_err(|e| BenchError::io("opening the manager log", e))?;
                let child = Command::new(bin)
                    .args(common_args(metrics, t))
                    .env("KUBECONFIG", &t.kubeconfig)
                    .env("PROXMOX_URL", &t.proxmox_url)
                    .env("PROXMOX_TOKEN", &t.proxmox_token)
                    .env("PROXMOX_SECRET", &t.proxmox_secret)
                    .env("PROXMOX_INSECURE", "false")
                    .env("PROXMOX_ROOT_CERT_FILE", &t.proxmox_ca_file)
                    .env_remove("RUST_LOG")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::from(log))
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| BenchError::io(format!("starting {}", bin.display()), e))?;
                Running::Process(child)
            }
            ManagerMode::InProcess => in_process(metrics, t).await?,
        };
        Ok(Self {
            running,
            metrics,
            started,
            http,
        })
    }

    /// The process id (`None` in-process).
    pub fn pid(&self) -> Option<u32> {
        match &self.running {
            Running::Process(c) => c.id(),
            Running::InProcess { .. } => None,
        }
    }

    /// When the manager was started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Whether the manager has exited.
    pub fn exited(&mut self) -> bool {
        match &mut self.running {
            Running::Process(c) => !matches!(c.try_wait(), Ok(None)),
            Running::InProcess { task, .. } => task.is_finished(),
        }
    }

    /// The Prometheus text of `/metrics` (`None` while the endpoint does not answer).
    pub async fn metrics(&self) -> Option<String> {
        let resp = self
            .http
            .get(format!("http://{}/metrics", self.metrics))
            .send()
            .await
            .ok()?;
        resp.text().await.ok()
    }

    /// Reconcile passes so far per controller (`capmox_reconcile_total`).
    pub async fn reconciles(&self, controller: &str) -> Option<u64> {
        let text = self.metrics().await?;
        let prefix = format!("capmox_reconcile_total{{controller=\"{controller}\"}} ");
        Some(
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map_or(0, |v| v as u64),
        )
    }

    /// Resident memory now and at its peak (`VmRSS`, `VmHWM`), in bytes.
    pub fn memory(&self) -> Option<(u64, u64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let kb = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .map(|v| v * 1024)
        };
        Some((kb("VmRSS:")?, kb("VmHWM:")?))
    }

    /// User plus system CPU time so far, in seconds.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()?)).ok()?;
        // Fields after the command name (which may contain spaces) start at field 3.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / clock_ticks() as f64)
    }

    /// Kills the manager process with SIGKILL — no shutdown, as the OOM killer or a lost node
    /// does — and reaps it. In-process managers are aborted.
    pub async fn kill(self) -> Result<(), BenchError> {
        match self.running {
            Running::Process(mut child) => child
                .kill()
                .await
                .map_err(|e| BenchError::io("killing the manager", e)),
            Running::InProcess { task, .. } => {
                task.abort();
                Ok(())
            }
        }
    }

    /// Stops the manager gracefully (SIGTERM / shutdown signal) and waits for it.
    pub async fn stop(self) -> Result<(), BenchError> {
        match self.running {
            Running::Process(mut child) => {
                if let Some(pid) = child.id() {
                    let _ = Command::new("kill")
                        .args(["-TERM", &pid.to_string()])
                        .status()
                        .await;
                }
                match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
                    Ok(r) => {
                        r.map_err(|e| BenchError::io("waiting for the manager", e))?;
                    }
                    Err(_) => {
                        let _ = child.kill().await;
                    }
                }
            }
            Running::InProcess { stop, task } => {
                let _ = stop.send(());
                if let Ok(Ok(Err(e))) = tokio::time::timeout(Duration::from_secs(20), task).await {
                    tracing::warn!(error = %e, "the manager ended with an error");
                }
            }
        }
        Ok(())
    }
}

/// `getconf CLK_TCK`, 100 when unknown.
fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

async fn in_process(metrics: SocketAddr, t: &ManagerTarget) -> Result<Running, BenchError> {
    use clap::Parser;
    let mut args = vec!["capmox".to_owned()];
    args.extend(common_args(metrics, t));
    args.extend([
        format!("--proxmox-url={}", t.proxmox_url),
        format!("--proxmox-token={}", t.proxmox_token),
        format!("--proxmox-secret={}", t.proxmox_secret),
        "--proxmox-insecure=false".to_owned(),
        format!("--proxmox-root-cert-file={}", t.proxmox_ca_file.display()),
    ]);
    let cli = capmox::cli::Cli::try_parse_from(&args)
        .map_err(|e| BenchError::Manager(format!("manager arguments: {e}")))?;
    let options = capmox::manager::options_from_cli(&cli).map_err(|e| BenchError::Manager(e.to_string()))?;
    let client = kube_client(&t.kubeconfig, capmox::user_agent::USER_AGENT).await?;
    let manager = capmox::manager::Manager::new(client, options)
        .await
        .map_err(|e| BenchError::Manager(e.to_string()))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));
    Ok(Running::InProcess { stop, task })
}

/// A Kubernetes client for `kubeconfig` sending `user_agent`.
pub async fn kube_client(kubeconfig: &Path, user_agent: &'static str) -> Result<kube::Client, BenchError> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| BenchError::Manager(format!("reading {}: {e}", kubeconfig.display())))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| BenchError::Manager(format!("kubeconfig: {e}")))?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(user_agent),
    ));
    kube::Client::try_from(config).map_err(|e| BenchError::Manager(format!("kube client: {e}")))
}

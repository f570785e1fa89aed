//! The manager: HTTP endpoints, CRD readiness, leader election, controllers and shutdown.
//!
//! Sequence of [`Manager::run`]:
//! 1. serve `/healthz`, `/readyz` and `/metrics` (regardless of leadership);
//! 2. probe the global Proxmox client (if configured) in the background, every minute; the result
//!    is logged and shown on `/readyz` but never stops the manager (capmox exits instead; we keep
//!    running so clusters with their own credentials still work and the global API can come back);
//! 3. wait until the capmox CRDs are served (list with `limit=1`), up to a timeout;
//! 4. mark ready, start leader election (when enabled) and wait for leadership;
//! 5. run the controllers until shutdown, an unexpected controller end or lost leadership;
//! 6. stop the controllers, then release the Lease, then stop the HTTP servers.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cli::{Cli, FeatureGates, parse_bind_address};
use crate::context::{Context, ControllerSettings};
use crate::credentials::ProxmoxClients;
use crate::health::{self, HealthState, ProxmoxProbe};
use crate::leader::{LeaderConfig, LeaderElector, LeaderError, Timing, default_namespace};
use crate::metrics::Metrics;
use crate::proxmox;

/// How often the global Proxmox client is probed.
const PROXMOX_PROBE_INTERVAL: Duration = Duration::from_secs(60);
/// How long controllers get to finish in-flight reconciles on shutdown (capmox's Deployment
/// has `terminationGracePeriodSeconds: 10`; the Lease release follows).
const GRACEFUL_STOP_TIMEOUT: Duration = Duration::from_secs(7);
/// How long controllers get after an error (lost leadership, a controller ended).
const FAILED_STOP_TIMEOUT: Duration = Duration::from_secs(2);
/// Interval between CRD availability checks.
const CRD_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Manager errors (the process exits non-zero on any of them).
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// Binding an HTTP endpoint failed.
    #[error("binding the {what} address {addr}: {source}")]
    Bind {
        /// Which endpoint.
        what: &'static str,
        /// Address.
        addr: SocketAddr,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A command line value is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The global Proxmox client could not be built (bad URL, credentials or CA file).
    #[error("global Proxmox client: {0}")]
    Proxmox(String),
    /// The capmox CRDs were not served in time.
    #[error("CRD {crd} not served after {timeout:?} (last error: {last_error}); install the capmox CRDs")]
    CrdsMissing {
        /// The CRD waited for.
        crd: String,
        /// The timeout.
        timeout: Duration,
        /// The last list error.
        last_error: String,
    },
    /// Leader election failed or leadership was lost.
    #[error(transparent)]
    Leader(#[from] LeaderError),
    /// A controller stopped although no shutdown was requested.
    #[error("controller {0} stopped unexpectedly")]
    ControllerStopped(String),
    /// An HTTP server failed.
    #[error("{what} server: {source}")]
    Server {
        /// Which endpoint.
        what: &'static str,
        /// I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Everything the manager needs besides the Kubernetes client.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Watch scope and concurrency of the controllers.
    pub settings: ControllerSettings,
    /// Leader election (`None`: controllers start at once).
    pub leader_election: Option<LeaderConfig>,
    /// Health probe address (`None`: disabled; port 0: any free port).
    pub health_addr: Option<SocketAddr>,
    /// Metrics address (`None`: disabled; port 0: any free port).
    pub metrics_addr: Option<SocketAddr>,
    /// Global Proxmox client configuration (`None`: per-cluster credentials only).
    pub proxmox: Option<proxmox::ClientConfig>,
    /// How long to wait for the capmox CRDs at startup.
    pub crd_wait_timeout: Duration,
    /// Parsed feature gates (logged; `ClusterTopology` is recorded).
    pub feature_gates: FeatureGates,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            settings: ControllerSettings {
                namespace: None,
                concurrency: 1,
                ..ControllerSettings::default()
            },
            leader_election: None,
            health_addr: None,
            metrics_addr: None,
            proxmox: None,
            crd_wait_timeout: Duration::from_secs(120),
            feature_gates: FeatureGates::default(),
        }
    }
}

/// Builds [`ManagerOptions`] from the command line (reads `--proxmox-root-cert-file`).
pub fn options_from_cli(cli: &Cli) -> Result<ManagerOptions, ManagerError> {
    let health_addr = parse_bind_address(&cli.health_probe_bind_address)
        .map_err(|e| ManagerError::Config(format!("--health-probe-bind-address: {e}")))?;
    let metrics_addr = parse_bind_address(&cli.diagnostics_address)
        .map_err(|e| ManagerError::Config(format!("--diagnostics-address: {e}")))?;
    let leader_election = cli.leader_elect.then(|| {
        LeaderConfig::new(
            default_namespace(cli.leader_election_namespace.as_deref()),
            Timing {
                lease_duration: cli.leader_elect_lease_duration,
                renew_deadline: cli.leader_elect_renew_deadline,
                retry_period: cli.leader_elect_retry_period,
            },
        )
    });
    if let Some(le) = &leader_election {
        le.timing.validate().map_err(ManagerError::Config)?;
    }
    if !cli.insecure_diagnostics {
        tracing::info!(
            "metrics are served over plain HTTP without authentication (--insecure-diagnostics=false is accepted for compatibility); restrict access with a NetworkPolicy"
        );
    }
    if cli.enable_webhooks {
        tracing::info!("--enable-webhooks: admission webhooks are not served by this version");
    }
    Ok(ManagerOptions {
        settings: ControllerSettings {
            namespace: cli.namespace.clone().filter(|n| !n.is_empty()),
            concurrency: cli.concurrency,
            ..ControllerSettings::default()
        },
        leader_election,
        health_addr,
        metrics_addr,
        proxmox: global_proxmox_config(cli)?,
        crd_wait_timeout: cli.crd_wait_timeout,
        feature_gates: cli.feature_gates.clone(),
    })
}

/// The global Proxmox client configuration when URL and credentials are all set (token wins
/// over username/password), else `None`.
pub fn global_proxmox_config(cli: &Cli) -> Result<Option<proxmox::ClientConfig>, ManagerError> {
    if !cli.global_proxmox_configured() {
        if cli.proxmox_url.as_deref().is_some_and(|u| !u.is_empty()) {
            tracing::warn!(
                "PROXMOX_URL is set but credentials are incomplete; no global Proxmox client, each ProxmoxCluster needs spec.credentialsRef"
            );
        }
        return Ok(None);
    }
    let (Some(url), Some(creds)) = (cli.proxmox_url.clone(), global_credentials(cli)) else {
        return Ok(None);
    };
    let mut config = proxmox::ClientConfig::new(url, creds);
    if cli.proxmox_insecure {
        if cli.proxmox_root_cert_file.is_some() {
            tracing::warn!(
                "--proxmox-insecure is set: --proxmox-root-cert-file is ignored (capmox behaviour)"
            );
        }
        config = config.insecure();
    } else if let Some(path) = &cli.proxmox_root_cert_file {
        let pem = std::fs::read_to_string(path).map_err(|e| {
            ManagerError::Proxmox(format!(
                "reading --proxmox-root-cert-file {}: {e}",
                path.display()
            ))
        })?;
        config = config.with_ca_pem(pem);
    }
    Ok(Some(config))
}

fn global_credentials(cli: &Cli) -> Option<proxmox::Credentials> {
    let nonempty = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    let secret = |v: &Option<proxmox::Secret>| v.clone().filter(|v| !v.is_empty());
    match (nonempty(&cli.proxmox_token), secret(&cli.proxmox_secret)) {
        (Some(token), Some(s)) => Some(proxmox::Credentials::token(token, s)),
        _ => match (nonempty(&cli.proxmox_username), secret(&cli.proxmox_password)) {
            (Some(user), Some(p)) => Some(proxmox::Credentials::password(user, p)),
            _ => None,
        },
    }
}

/// A one-shot broadcast "stop" flag; [`Signal::waiter`] futures complete once it is fired.
#[derive(Debug, Clone)]
struct Signal(Arc<watch::Sender<bool>>);

impl Signal {
    fn new() -> Self {
        Self(Arc::new(watch::channel(false).0))
    }

    fn fire(&self) {
        self.0.send_replace(true);
    }

    fn waiter(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.0.subscribe();
        async move {
            // An error means the sender is gone, which only happens when the manager is done.
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }
}

/// A controller future with its name.
pub type ControllerTask = (&'static str, Pin<Box<dyn Future<Output = ()> + Send + 'static>>);

/// The controllers run by the leader. `stop` completes when they must shut down gracefully.
fn controllers(ctx: Arc<Context>, stop: &Signal) -> Vec<ControllerTask> {
    use crate::controllers::cluster;
    vec![(cluster::CONTROLLER, Box::pin(cluster::run(ctx, stop.waiter())))]
}

/// A configured manager with bound HTTP listeners, ready to [`run`](Manager::run).
pub struct Manager {
    client: kube::Client,
    options: ManagerOptions,
    metrics: Arc<Metrics>,
    health: Arc<HealthState>,
    health_listener: Option<tokio::net::TcpListener>,
    metrics_listener: Option<tokio::net::TcpListener>,
    global_proxmox: Option<proxmox::Client>,
    elector: Option<LeaderElector>,
    leadership: watch::Receiver<bool>,
    // Keeps the constant "leader" channel open when leader election is disabled.
    _always_leader: Option<watch::Sender<bool>>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("options", &self.options)
            .field("health_addr", &self.health_addr())
            .field("metrics_addr", &self.metrics_addr())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Binds the HTTP listeners, builds the global Proxmox client and the leader elector.
    pub async fn new(client: kube::Client, options: ManagerOptions) -> Result<Self, ManagerError> {
        let metrics = Arc::new(Metrics::new());
        let health = Arc::new(HealthState::default());
        let health_listener = bind_opt("health probe", options.health_addr).await?;
        let metrics_listener = bind_opt("metrics", options.metrics_addr).await?;
        let global_proxmox = match &options.proxmox {
            Some(cfg) => {
                let c = proxmox::Client::with_observer(cfg.clone(), metrics.proxmox_observer())
                    .map_err(|e| ManagerError::Proxmox(e.to_string()))?;
                health.set_proxmox(ProxmoxProbe::Pending);
                Some(c)
            }
            None => None,
        };
        let (elector, leadership, always) = match &options.leader_election {
            Some(cfg) => {
                let e = LeaderElector::new(client.clone(), cfg.clone())?;
                let rx = e.subscribe();
                (Some(e), rx, None)
            }
            None => {
                let (tx, rx) = watch::channel(true);
                (None, rx, Some(tx))
            }
        };
        Ok(Self {
            client,
            options,
            metrics,
            health,
            health_listener,
            metrics_listener,
            global_proxmox,
            elector,
            leadership,
            _always_leader: always,
        })
    }

    /// The bound health probe address.
    pub fn health_addr(&self) -> Option<SocketAddr> {
        self.health_listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The bound metrics address.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The manager's metrics.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// The probe state.
    pub fn health(&self) -> Arc<HealthState> {
        Arc::clone(&self.health)
    }

    /// Leadership: `true` while this manager may reconcile (always `true` without leader election).
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.leadership.clone()
    }

    /// The leader identity, when leader election is enabled.
    pub fn identity(&self) -> Option<&str> {
        self.elector.as_ref().map(LeaderElector::identity)
    }

    /// Runs until `shutdown` completes (returns `Ok` after a graceful stop) or a fatal error.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ManagerError> {
        let Manager {
            client,
            options,
            metrics,
            health,
            health_listener,
            metrics_listener,
            global_proxmox,
            elector,
            mut leadership,
            _always_leader,
        } = self;

        let shutdown_requested = Signal::new();
        let controllers_stop = Signal::new();
        let release = Signal::new();
        let servers_stop = Signal::new();
        {
            let s = shutdown_requested.clone();
            tokio::spawn(async move {
                shutdown.await;
                s.fire();
            });
        }

        let mut servers = JoinSet::new();
        if let Some(l) = health_listener {
            tracing::info!(addr = ?l.local_addr().ok(), "serving health probes on /healthz and /readyz");
            let router = health::health_router(Arc::clone(&health));
            let stop = servers_stop.waiter();
            servers.spawn(async move { ("health probe", health::serve(l, router, stop).await) });
        }
        if let Some(l) = metrics_listener {
            tracing::info!(addr = ?l.local_addr().ok(), "serving metrics on /metrics (plain HTTP)");
            let router = health::metrics_router(Arc::clone(&metrics));
            let stop = servers_stop.waiter();
            servers.spawn(async move { ("metrics", health::serve(l, router, stop).await) });
        }
        if let Some(c) = global_proxmox.clone() {
            let h = Arc::clone(&health);
            let stop = servers_stop.waiter();
            tokio::spawn(async move {
                tokio::select! {
                    () = probe_loop(c, h) => {},
                    () = stop => {},
                }
            });
        }

        tracing::info!(
            namespace = options.settings.namespace.as_deref().unwrap_or("<all>"),
            concurrency = options.settings.concurrency,
            leader_election = options.leader_election.is_some(),
            global_proxmox = global_proxmox.is_some(),
            feature_gates = ?options.feature_gates.0,
            cluster_topology = options.feature_gates.enabled("ClusterTopology"),
            "starting manager"
        );

        let result = async {
            let waited = tokio::select! {
                r = wait_for_crds(&client, options.crd_wait_timeout) => Some(r),
                () = shutdown_requested.waiter() => None,
            };
            match waited {
                None => return Ok(()),
                Some(r) => r?,
            }
            health.set_started();

            let mut elector_task = elector.map(|e| {
                let stop = release.waiter();
                tokio::spawn(e.run(stop))
            });

            // Wait for leadership.
            let became_leader = tokio::select! {
                r = leadership.wait_for(|l| *l) => r.is_ok(),
                () = shutdown_requested.waiter() => false,
            };
            if !became_leader {
                release.fire();
                if let Some(t) = elector_task.take() {
                    return join_elector(t).await;
                }
                return Ok(());
            }
            tracing::info!("leading: starting controllers");
            metrics.set_leader(true);
            health.set_leader(true);

            let ctx = Arc::new(Context {
                client: client.clone(),
                metrics: Arc::clone(&metrics),
                settings: options.settings.clone(),
                proxmox: Arc::new(ProxmoxClients::new(
                    global_proxmox.clone(),
                    metrics.proxmox_observer(),
                )),
            });
            let mut tasks = JoinSet::new();
            for (name, fut) in controllers(ctx, &controllers_stop) {
                metrics.init_controller(name);
                tasks.spawn(async move {
                    fut.await;
                    name
                });
            }

            let outcome = supervise(&mut tasks, &mut elector_task, &shutdown_requested).await;
            controllers_stop.fire();
            // In-flight reconciles may finish, within the pod's grace period; after lost
            // leadership another replica may already lead, so stop much faster.
            let grace = if outcome.is_ok() {
                GRACEFUL_STOP_TIMEOUT
            } else {
                FAILED_STOP_TIMEOUT
            };
            stop_controllers(&mut tasks, grace).await;
            metrics.set_leader(false);
            health.set_leader(false);
            tracing::info!("controllers stopped");
            if let Err(e) = &outcome {
                health.set_dead();
                tracing::error!(error = %e, "manager stopping");
            }
            release.fire();
            let released = match elector_task {
                Some(t) => join_elector(t).await,
                None => Ok(()),
            };
            outcome.and(released)
        }
        .await;

        servers_stop.fire();
        while let Some(joined) = servers.join_next().await {
            if let Ok((what, Err(source))) = joined {
                tracing::warn!(what, error = %source, "HTTP server ended with an error");
            }
        }
        result
    }
}

/// What ended the supervised phase.
enum Ended {
    Shutdown,
    Controller(Option<Result<&'static str, tokio::task::JoinError>>),
    Elector(Result<Result<(), LeaderError>, tokio::task::JoinError>),
}

/// Waits for whichever ends first: shutdown, a controller, the elector.
async fn supervise(
    tasks: &mut JoinSet<&'static str>,
    elector_task: &mut Option<tokio::task::JoinHandle<Result<(), LeaderError>>>,
    shutdown_requested: &Signal,
) -> Result<(), ManagerError> {
    let ended = {
        let elector_done = async {
            match elector_task.as_mut() {
                Some(t) => t.await,
                None => std::future::pending().await,
            }
        };
        let controller_done = async {
            if tasks.is_empty() {
                std::future::pending::<()>().await;
            }
            tasks.join_next().await
        };
        tokio::select! {
            () = shutdown_requested.waiter() => Ended::Shutdown,
            joined = controller_done => Ended::Controller(joined),
            r = elector_done => Ended::Elector(r),
        }
    };
    match ended {
        Ended::Shutdown => {
            tracing::info!("shutdown requested");
            Ok(())
        }
        Ended::Controller(joined) => {
            let name = match joined {
                Some(Ok(name)) => name.to_owned(),
                Some(Err(e)) => format!("<task failed: {e}>"),
                None => "<none>".to_owned(),
            };
            Err(ManagerError::ControllerStopped(name))
        }
        Ended::Elector(r) => {
            // The handle completed; it must not be awaited again.
            *elector_task = None;
            match r {
                Ok(Err(e)) => Err(ManagerError::Leader(e)),
                Ok(Ok(())) => Err(ManagerError::ControllerStopped("leader election".into())),
                Err(e) => Err(ManagerError::Leader(LeaderError::Config(format!(
                    "leader election task failed: {e}"
                )))),
            }
        }
    }
}

/// Waits up to `grace` for the controller tasks, then aborts the rest.
async fn stop_controllers(tasks: &mut JoinSet<&'static str>, grace: Duration) {
    let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            ?grace,
            remaining = tasks.len(),
            "controllers did not stop in time, aborting them"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

async fn join_elector(t: tokio::task::JoinHandle<Result<(), LeaderError>>) -> Result<(), ManagerError> {
    match t.await {
        Ok(r) => r.map_err(ManagerError::Leader),
        Err(e) => Err(ManagerError::Leader(LeaderError::Config(format!(
            "leader election task failed: {e}"
        )))),
    }
}

async fn bind_opt(
    what: &'static str,
    addr: Option<SocketAddr>,
) -> Result<Option<tokio::net::TcpListener>, ManagerError> {
    match addr {
        Some(addr) => health::bind(addr)
            .await
            .map(Some)
            .map_err(|source| ManagerError::Bind { what, addr, source }),
        None => Ok(None),
    }
}

/// Probes the global Proxmox client now and then every [`PROXMOX_PROBE_INTERVAL`].
async fn probe_loop(client: proxmox::Client, health: Arc<HealthState>) {
    let mut interval = tokio::time::interval(PROXMOX_PROBE_INTERVAL);
    let mut last_ok: Option<bool> = None;
    loop {
        interval.tick().await;
        match client.version().await {
            Ok(v) => {
                if last_ok != Some(true) {
                    tracing::info!(version = %v.version, url = %client.base_url(), "global Proxmox API reachable");
                }
                last_ok = Some(true);
                health.set_proxmox(ProxmoxProbe::Reachable(v.version));
            }
            Err(e) => {
                if last_ok != Some(false) {
                    tracing::error!(error = %e, url = %client.base_url(),
                        "global Proxmox API unreachable; continuing, clusters using it report ProxmoxAvailable=False");
                }
                last_ok = Some(false);
                health.set_proxmox(ProxmoxProbe::Unreachable(e.to_string()));
            }
        }
    }
}

/// Waits until the capmox v1alpha2 CRDs are served, listing each with `limit=1`.
pub async fn wait_for_crds(client: &kube::Client, timeout: Duration) -> Result<(), ManagerError> {
    let resources = [
        ApiResource::erase::<ProxmoxCluster>(&()),
        ApiResource::erase::<ProxmoxMachine>(&()),
    ];
    let deadline = tokio::time::Instant::now() + timeout;
    for ar in resources {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let crd = format!("{}.{}/{}", ar.plural, ar.group, ar.version);
        let mut logged = false;
        loop {
            match api.list(&ListParams::default().limit(1)).await {
                Ok(_) => {
                    tracing::debug!(%crd, "CRD served");
                    break;
                }
                Err(e) => {
                    if !logged {
                        tracing::warn!(%crd, error = %e, ?timeout, "waiting for CRD to be served");
                        logged = true;
                    }
                    if tokio::time::Instant::now() + CRD_POLL_INTERVAL > deadline {
                        return Err(ManagerError::CrdsMissing {
                            crd,
                            timeout,
                            last_error: e.to_string(),
                        });
                    }
                    tokio::time::sleep(CRD_POLL_INTERVAL).await;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_elector() -> Option<tokio::task::JoinHandle<Result<(), LeaderError>>> {
        None
    }

    #[tokio::test]
    async fn shutdown_ends_supervision_cleanly() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async {
            std::future::pending::<()>().await;
            "forever"
        });
        let stop = Signal::new();
        stop.fire();
        assert!(supervise(&mut tasks, &mut no_elector(), &stop).await.is_ok());
        stop_controllers(&mut tasks, Duration::from_millis(10)).await;
        assert!(
            tasks.is_empty(),
            "a stuck controller is aborted after the grace period"
        );
    }

    #[tokio::test]
    async fn a_controller_ending_is_an_error() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async { "proxmoxcluster" });
        let r = supervise(&mut tasks, &mut no_elector(), &Signal::new()).await;
        assert!(
            matches!(&r, Err(ManagerError::ControllerStopped(n)) if n == "proxmoxcluster"),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn lost_leadership_is_an_error_and_the_handle_is_consumed() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async {
            std::future::pending::<()>().await;
            "forever"
        });
        let mut elector = Some(tokio::spawn(async {
            Err(LeaderError::Lost {
                namespace: "ns".into(),
                name: "lease".into(),
            })
        }));
        let r = supervise(&mut tasks, &mut elector, &Signal::new()).await;
        assert!(
            matches!(r, Err(ManagerError::Leader(LeaderError::Lost { .. }))),
            "{r:?}"
        );
        assert!(elector.is_none());
        tasks.abort_all();
    }

    #[tokio::test]
    async fn without_controllers_only_shutdown_ends_supervision() {
        let mut tasks: JoinSet<&'static str> = JoinSet::new();
        let stop = Signal::new();
        let waiter = stop.clone();
        let handle = tokio::spawn(async move {
            let mut tasks2: JoinSet<&'static str> = JoinSet::new();
            supervise(&mut tasks2, &mut no_elector(), &waiter).await
        });
        stop.fire();
        assert!(handle.await.unwrap().is_ok());
        assert!(tasks.join_next().await.is_none());
    }
}

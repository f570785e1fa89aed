//! The manager: HTTP endpoints, CRD readiness, leader election, controllers and shutdown.
//!
//! Sequence of [`Manager::run`]:
//! 1. serve `/healthz`, `/readyz`, `/metrics` and the webhooks (regardless of leadership; the
//!    webhook server's certificate is loaded and its port bound in [`Manager::new`]);
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

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::context::Context;
use crate::credentials::ProxmoxClients;
use crate::diagnostics::{DelegatingAuth, MetricsServer};
use crate::health::{self, HealthState, ProxmoxProbe};
use crate::leader::{LeaderElector, LeaderError};
use crate::metrics::Metrics;
use crate::proxmox;
use crate::webhooks::WebhookServer;

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
    /// The webhook server could not start (certificate, TLS settings or port).
    #[error(transparent)]
    Webhook(#[from] crate::webhooks::WebhookError),
    /// The diagnostics server could not start (certificate, TLS settings or port).
    #[error(transparent)]
    Diagnostics(#[from] crate::diagnostics::DiagnosticsError),
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

mod options;
mod startup;
mod supervise;

pub use options::{
    ManagerOptions, global_proxmox_config, metrics_security, options_from_cli, webhook_options,
};
pub use startup::wait_for_crds;

use startup::{bind_opt, probe_loop};
use supervise::{Signal, join_elector, stop_controllers, supervise};

/// A controller future with its name.
pub type ControllerTask = (&'static str, Pin<Box<dyn Future<Output = ()> + Send + 'static>>);

/// The controllers run by the leader. `stop` completes when they must shut down gracefully.
fn controllers(ctx: Arc<Context>, stop: &Signal) -> Vec<ControllerTask> {
    use crate::controllers::vm_operations::{clone, restore, snapshot};
    use crate::controllers::{cluster, machine, machine_template, virtual_machine, vm_image};
    vec![
        (
            cluster::CONTROLLER,
            Box::pin(cluster::run(ctx.clone(), stop.waiter())),
        ),
        (
            machine_template::CONTROLLER,
            Box::pin(machine_template::run(ctx.clone(), stop.waiter())),
        ),
        (
            machine::CONTROLLER,
            Box::pin(machine::run(ctx.clone(), stop.waiter())),
        ),
        (
            virtual_machine::CONTROLLER,
            Box::pin(virtual_machine::run(ctx.clone(), stop.waiter())),
        ),
        (
            vm_image::CONTROLLER,
            Box::pin(vm_image::run(ctx.clone(), stop.waiter())),
        ),
        (
            snapshot::CONTROLLER,
            Box::pin(snapshot::run(ctx.clone(), stop.waiter())),
        ),
        (
            restore::CONTROLLER,
            Box::pin(restore::run(ctx.clone(), stop.waiter())),
        ),
        (clone::CONTROLLER, Box::pin(clone::run(ctx, stop.waiter()))),
    ]
}

/// A configured manager with bound HTTP listeners, ready to [`run`](Manager::run).
pub struct Manager {
    client: kube::Client,
    options: ManagerOptions,
    metrics: Arc<Metrics>,
    health: Arc<HealthState>,
    health_listener: Option<tokio::net::TcpListener>,
    metrics_server: Option<MetricsServer>,
    webhook_server: Option<WebhookServer>,
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
            .field("webhook_addr", &self.webhook_addr())
            .finish_non_exhaustive()
    }
}

/// Probes the global Proxmox client for `/readyz` until `stop` fires.
fn start_probe(
    client: proxmox::Client,
    clients: &Arc<ProxmoxClients>,
    health: &Arc<HealthState>,
    stop: &Signal,
) {
    let h = Arc::clone(health);
    let stop = stop.waiter();
    let clients = Arc::clone(clients);
    tokio::spawn(async move {
        tokio::select! {
            () = probe_loop(client, clients, h) => {},
            () = stop => {},
        }
    });
}

/// The watched namespaces for the log: `a,b`, or `<all>`.
fn namespaces(settings: &crate::context::ControllerSettings) -> String {
    let list: Vec<String> = settings.watched_namespaces().into_iter().flatten().collect();
    if list.is_empty() {
        "<all>".to_owned()
    } else {
        list.join(",")
    }
}

/// One line with the manager's settings.
fn log_start(options: &ManagerOptions, global_proxmox: bool) {
    tracing::info!(
        namespace = %namespaces(&options.settings),
        watch_filter = options.settings.watch_filter.as_deref().unwrap_or("<none>"),
        sync_period = ?options.settings.sync_period,
        proxmoxmachine_concurrency = options.settings.machine_concurrency(),
        proxmoxcluster_concurrency = options.settings.cluster_concurrency(),
        leader_election = options.leader_election.is_some(),
        global_proxmox,
        feature_gates = ?options.feature_gates.0,
        cluster_topology = options.feature_gates.enabled("ClusterTopology"),
        "starting manager"
    );
}

/// What the controllers run with while this replica leads.
struct Leading<'a> {
    metrics: &'a Arc<Metrics>,
    health: &'a Arc<HealthState>,
    controllers_stop: &'a Signal,
    shutdown_requested: &'a Signal,
}

impl Leading<'_> {
    /// Runs the controllers until shutdown, a controller's end or lost leadership; returns how
    /// it ended, with the controllers stopped.
    async fn run(
        &self,
        ctx: Arc<Context>,
        elector_task: &mut Option<tokio::task::JoinHandle<Result<(), LeaderError>>>,
    ) -> Result<(), ManagerError> {
        let (metrics, health) = (self.metrics, self.health);
        let mut tasks = JoinSet::new();
        for (name, fut) in controllers(ctx, self.controllers_stop) {
            metrics.init_controller(name);
            tasks.spawn(async move {
                fut.await;
                name
            });
        }
        let outcome = supervise(&mut tasks, elector_task, self.shutdown_requested).await;
        self.controllers_stop.fire();
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
        outcome
    }
}

/// The HTTP servers the manager runs on every replica, leader or not.
struct Servers {
    health: Option<tokio::net::TcpListener>,
    metrics: Option<MetricsServer>,
    webhooks: Option<WebhookServer>,
}

/// The result of one server: its name and how it ended.
type ServerEnd = (&'static str, Result<(), std::io::Error>);

/// Starts the health probe, metrics and webhook servers until `stop` fires.
fn start_servers(
    s: Servers,
    health: &Arc<HealthState>,
    metrics: &Arc<Metrics>,
    stop: &Signal,
) -> JoinSet<ServerEnd> {
    let mut servers = JoinSet::new();
    if let Some(l) = s.health {
        tracing::info!(addr = ?l.local_addr().ok(), "serving health probes on /healthz and /readyz");
        let router = health::health_router(Arc::clone(health));
        let stop = stop.waiter();
        servers.spawn(async move { ("health probe", health::serve(l, router, stop).await) });
    }
    if let Some(server) = s.metrics {
        let m = Arc::clone(metrics);
        let stop = stop.waiter();
        servers.spawn(async move { ("metrics", server.serve(m, stop).await) });
    }
    if let Some(server) = s.webhooks {
        let h = Arc::clone(health);
        let stop = stop.waiter();
        servers.spawn(async move {
            server.serve(move || h.set_webhooks_serving(), stop).await;
            ("webhook", Ok(()))
        });
    }
    servers
}

impl Manager {
    /// Binds the HTTP listeners and the webhook server (loading its certificate), builds the
    /// global Proxmox client and the leader elector.
    pub async fn new(client: kube::Client, options: ManagerOptions) -> Result<Self, ManagerError> {
        let metrics = Arc::new(Metrics::new());
        let health = Arc::new(HealthState::default());
        let health_listener = bind_opt("health probe", options.health_addr).await?;
        let metrics_server = match options.metrics_addr {
            Some(addr) => Some(MetricsServer::bind(addr, &options.metrics_security, client.clone()).await?),
            None => None,
        };
        let webhook_server = match &options.webhooks {
            Some(opts) => {
                health.require_webhooks();
                Some(WebhookServer::bind(opts).await?)
            }
            None => None,
        };
        let global_proxmox = match &options.proxmox {
            Some(cfg) => {
                metrics.set_global_tls_insecure(!cfg.verifies_tls());
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
            metrics_server,
            webhook_server,
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
        self.metrics_server.as_ref().and_then(MetricsServer::local_addr)
    }

    /// The reviewer of the secured metrics endpoint (`None` without one, or with
    /// `--insecure-diagnostics`).
    pub fn metrics_auth(&self) -> Option<Arc<DelegatingAuth>> {
        self.metrics_server.as_ref().and_then(MetricsServer::auth)
    }

    /// The bound webhook server address (`None` when webhooks are disabled).
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook_server.as_ref().map(WebhookServer::local_addr)
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
            metrics_server,
            webhook_server,
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

        let mut servers = start_servers(
            Servers {
                health: health_listener,
                metrics: metrics_server,
                webhooks: webhook_server,
            },
            &health,
            &metrics,
            &servers_stop,
        );
        // One set of Proxmox clients (and shared resource lists) for the probe and the
        // controllers: the probe relies on the controllers' list reads when there are any.
        let proxmox_clients = Arc::new(ProxmoxClients::new(
            global_proxmox.clone(),
            metrics.proxmox_observer(),
        ));
        if let Some(c) = global_proxmox.clone() {
            start_probe(c, &proxmox_clients, &health, &servers_stop);
        }
        log_start(&options, global_proxmox.is_some());

        let result = async {
            let crds = wait_for_crds(
                &client,
                options.settings.namespace.as_deref(),
                options.crd_wait_timeout,
            );
            let waited = tokio::select! {
                r = crds => Some(r),
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

            let ctx = Arc::new(Context::new(
                client.clone(),
                Arc::clone(&metrics),
                options.settings.clone(),
                Arc::clone(&proxmox_clients),
            ));
            let leading = Leading {
                metrics: &metrics,
                health: &health,
                controllers_stop: &controllers_stop,
                shutdown_requested: &shutdown_requested,
            };
            let outcome = leading.run(ctx, &mut elector_task).await;
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

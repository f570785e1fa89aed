//! Shared state handed to every controller: the Kubernetes client, the Proxmox client source and
//! the shared views of each Proxmox cluster, metrics and the manager's settings.

use std::sync::Arc;
use std::time::Duration;

use crate::credentials::ProxmoxClients;
use crate::metrics::Metrics;
use crate::proxmox::Client;
use crate::proxmox::view::{ProxmoxView, Views};

/// Settings every controller reads (filled from the manager's command line).
#[derive(Debug, Clone, Default)]
pub struct ControllerSettings {
    /// Only watch objects in this namespace (`None`: all namespaces). With several namespaces
    /// (`namespaces`) this is the first of them; watches go through
    /// [`ControllerSettings::watched_namespaces`].
    pub namespace: Option<String>,
    /// Every namespace watched when there are several (`--namespace a,b`); empty: `namespace`.
    pub namespaces: Vec<String>,
    /// `--watch-filter`: only objects labelled `cluster.x-k8s.io/watch-filter=<value>` are
    /// reconciled (`None`: all).
    pub watch_filter: Option<String>,
    /// `--sync-period`: every object is reconciled again at least this often (`None`: only on
    /// changes and requested requeues).
    pub sync_period: Option<Duration>,
    /// Objects of one kind reconciled at the same time, unless a controller's own setting
    /// (`machine.concurrency`, `cluster.concurrency`) says otherwise.
    pub concurrency: u16,
    /// Timing of the ProxmoxCluster controller.
    pub cluster: ClusterSettings,
    /// Timing of the VM lifecycle (the ProxmoxMachine controller).
    pub machine: crate::vm::Settings,
}

impl ControllerSettings {
    /// The namespaces to watch, each `None` for all namespaces.
    pub fn watched_namespaces(&self) -> Vec<Option<String>> {
        if self.namespaces.is_empty() {
            vec![self.namespace.clone()]
        } else {
            self.namespaces.iter().cloned().map(Some).collect()
        }
    }

    /// `wc` for the kind a controller reconciles: with `--watch-filter`, only objects carrying
    /// the filter label are watched (so only they are cached and reconciled).
    pub fn primary_watch(&self, wc: kube::runtime::watcher::Config) -> kube::runtime::watcher::Config {
        match &self.watch_filter {
            Some(value) => wc.labels(&format!("{}={value}", capmox_api::consts::WATCH_FILTER_LABEL)),
            None => wc,
        }
    }

    /// Reconcile concurrency of the ProxmoxMachine controller (at least 1).
    pub fn machine_concurrency(&self) -> u16 {
        self.machine.concurrency.unwrap_or(self.concurrency).max(1)
    }

    /// Reconcile concurrency of the ProxmoxCluster controller (at least 1).
    pub fn cluster_concurrency(&self) -> u16 {
        self.cluster.concurrency.unwrap_or(self.concurrency).max(1)
    }
}

/// Timing of the ProxmoxCluster controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// ProxmoxClusters reconciled at the same time (`None`: the manager-wide `concurrency`).
    pub concurrency: Option<u16>,
    /// Requeue of a ready cluster (re-probe Proxmox).
    pub resync: Duration,
    /// Requeue while a deletion waits for its Cluster or its ProxmoxMachines.
    pub machine_wait: Duration,
    /// First retry delay after an error (doubles per consecutive error of the same object).
    pub backoff_base: Duration,
    /// Largest retry delay after errors.
    pub backoff_cap: Duration,
    /// Minimum time between two node-inventory refreshes of one cluster.
    pub inventory_interval: Duration,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            concurrency: None,
            resync: Duration::from_secs(60),
            machine_wait: Duration::from_secs(10),
            backoff_base: Duration::from_secs(5),
            backoff_cap: Duration::from_secs(60),
            inventory_interval: Duration::from_secs(60),
        }
    }
}

/// Everything a reconcile needs besides the object itself.
#[derive(Clone)]
pub struct Context {
    /// Kubernetes API client.
    pub client: kube::Client,
    /// Manager-wide Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Settings from the command line.
    pub settings: ControllerSettings,
    /// Source of Proxmox clients (global client or one per credentials Secret).
    pub proxmox: Arc<ProxmoxClients>,
    /// What the manager knows about each Proxmox cluster, shared by every controller.
    pub views: Arc<Views>,
    /// Turns of the snapshot and restore controllers per VM (`namespace/name` of its
    /// ProxmoxVirtualMachine): one operation of a VM at a time in this process.
    pub vm_turns: VmTurns,
}

/// Per-VM turns (see [`Context::vm_turns`]).
pub type VmTurns = Arc<std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>>;

impl Context {
    /// The context of the manager's controllers.
    pub fn new(
        client: kube::Client,
        metrics: Arc<Metrics>,
        settings: ControllerSettings,
        proxmox: Arc<ProxmoxClients>,
    ) -> Self {
        let views = Arc::new(Views::new(settings.machine.view_settings()));
        Self {
            client,
            metrics,
            settings,
            proxmox,
            views,
            vm_turns: VmTurns::default(),
        }
    }

    /// The view of the Proxmox cluster `client` talks to.
    pub fn view(&self, client: &Client) -> Arc<ProxmoxView> {
        self.views.of(client, || {
            (self.proxmox.resources(client), self.proxmox.cluster_name(client))
        })
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

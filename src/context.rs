//! Shared state handed to every controller: the Kubernetes client, the Proxmox client source,
//! the event reporter identity, metrics and the manager's settings.

use std::sync::Arc;

use crate::metrics::Metrics;

/// Settings every controller reads (filled from the manager's command line).
#[derive(Debug, Clone, Default)]
pub struct ControllerSettings {
    /// Only watch objects in this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Objects of one kind reconciled at the same time, unless a controller's own setting
    /// (`machine.concurrency`, `cluster.concurrency`) says otherwise.
    pub concurrency: u16,
    /// Timing of the ProxmoxCluster controller.
    pub cluster: crate::cluster::ClusterSettings,
    /// Timing of the ProxmoxMachine controller.
    pub machine: crate::machine::MachineSettings,
}

impl ControllerSettings {
    /// Reconcile concurrency of the ProxmoxMachine controller (at least 1).
    pub fn machine_concurrency(&self) -> u16 {
        self.machine.concurrency.unwrap_or(self.concurrency).max(1)
    }

    /// Reconcile concurrency of the ProxmoxCluster controller (at least 1).
    pub fn cluster_concurrency(&self) -> u16 {
        self.cluster.concurrency.unwrap_or(self.concurrency).max(1)
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
    pub proxmox: Arc<crate::credentials::ProxmoxClients>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

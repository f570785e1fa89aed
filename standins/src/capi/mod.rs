//! A stand-in for the parts of core Cluster API (the Cluster and Machine controllers) the Proxmox
//! provider depends on, for tests and the demo. It serves v1beta2 `Cluster`s and `Machine`s whose
//! infrastructure references name a `ProxmoxCluster` / `ProxmoxMachine`:
//!
//! * **Clusters**: adds the finalizer [`CLUSTER_FINALIZER`]; makes the ProxmoxCluster owned by the
//!   Cluster (controller owner reference + `cluster.x-k8s.io/cluster-name` label) if it is not;
//!   once the ProxmoxCluster has `status.initialization.provisioned: true`, copies its
//!   `spec.controlPlaneEndpoint` into the Cluster when the Cluster has none and sets the Cluster's
//!   `status.initialization.infrastructureProvisioned: true`.
//! * **Machines**: adds the finalizer [`MACHINE_FINALIZER`]; makes the ProxmoxMachine owned by the
//!   Machine (controller owner reference, cluster-name and control-plane labels); once the
//!   ProxmoxMachine is provisioned, copies `spec.providerID` into the Machine and — simulating the
//!   node joining — sets the Machine's `status.nodeRef.name` (the ProxmoxMachine's name),
//!   `status.addresses` (from the ProxmoxMachine), `status.initialization.infrastructureProvisioned`,
//!   the `Ready`/`Available` conditions and phase `Running`.
//! * **Deletion**: a deleted Machine gets its ProxmoxMachine deleted; once that is gone, its
//!   bootstrap data Secret is deleted (as the bootstrap config owning it would be) and the
//!   finalizer removed. A deleted Cluster gets its Machines deleted, then — once they are gone —
//!   its ProxmoxCluster; once that is gone the finalizer is removed.
//!
//! Simplifications: no v1beta1 objects, no pause handling, no MachineSets/control-plane providers,
//! no node drain, no health checks, no failure domains, no kubeconfig or control-plane
//! initialization; objects of other infrastructure kinds are ignored.

pub mod cluster;
pub mod machine;
pub mod objects;

use std::time::Duration;

use crate::handle::StandInHandle;

pub use objects::{bootstrap_secret, cluster, machine, set_cluster_owner, set_machine_owner};

/// Finalizer core CAPI puts on Clusters.
pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";
/// Finalizer core CAPI puts on Machines.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";

/// How often a deletion waiting for dependents is re-checked (besides watch events).
const DELETE_POLL: Duration = Duration::from_millis(500);
/// Retry interval after an error.
const ERROR_RETRY: Duration = Duration::from_millis(500);

/// The core Cluster API stand-in (see the [module docs](self)).
#[derive(Debug, Clone, Copy, Default)]
pub struct CapiStandIn;

impl CapiStandIn {
    /// Starts the Cluster and Machine stand-in controllers for `namespace` (all namespaces when
    /// `None`). They run until the returned handle is stopped or dropped.
    pub fn spawn(client: kube::Client, namespace: Option<String>) -> StandInHandle {
        StandInHandle::spawn("core-capi", move |stop| async move {
            tokio::join!(
                cluster::run(client.clone(), namespace.clone(), stop.clone()),
                machine::run(client, namespace, stop),
            );
        })
    }
}

/// An `Api` scoped to `ns` (all namespaces when `None`).
pub(crate) fn scoped<K>(client: &kube::Client, ns: Option<&str>) -> kube::Api<K>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match ns {
        Some(ns) => kube::Api::namespaced(client.clone(), ns),
        None => kube::Api::all(client.clone()),
    }
}

//! ProxmoxMachine as an owner of one VM: the adapter between the Cluster API kinds and the
//! CAPI-free lifecycle of [`crate::vm`].
//!
//! * [`spec`]: the Machine, ProxmoxMachine and ProxmoxCluster mapped to a [`crate::vm::VmSpec`];
//! * [`record`]: the ProxmoxMachine's spec and status as a [`crate::vm::VmRecord`], and the outcome
//!   of a pass mapped back to its status, conditions, labels and provider ID;
//! * [`adapter`]: what the lifecycle asks of a ProxmoxMachine ([`crate::vm::Adapter`]): IPAM claims
//!   ([`addresses`]), the bootstrap data ([`bootstrap`]), the node locations of its ProxmoxCluster
//!   ([`locations`]) and the VMIDs its siblings recorded;
//! * [`zone`]: the zone a machine lives in and the Proxmox cluster that zone names;
//! * [`provision`] and [`delete`]: one pass each (CAPI gates, the lifecycle's pass, the mapping
//!   back), called by the controller;
//! * [`restore`]: the addresses of a machine that came back from a backup or a move (its VM
//!   keeps its address; a different one from IPAM is said in a condition);
//! * [`caches`], [`latest`]: reads from the controller's watch caches, with its own writes.

pub mod adapter;
pub mod addresses;
pub mod bootstrap;
pub mod caches;
pub mod delete;
pub mod error;
pub mod latest;
pub mod locations;
pub mod provision;
pub mod record;
pub mod restore;
pub mod spec;
pub mod zone;

use std::time::Duration;

pub use error::MachineError;

/// Timing of the machine controller: the lifecycle's.
pub type MachineSettings = crate::vm::Settings;

/// The kind the lifecycle's view wakes for ProxmoxMachines.
pub const OWNER_KIND: &str = "ProxmoxMachine";

/// The view's key of a ProxmoxMachine.
pub fn owner_of(pm: &capmox_api::v1alpha2::ProxmoxMachine) -> crate::proxmox::view::Owner {
    use kube::ResourceExt;
    crate::proxmox::view::Owner::new(OWNER_KIND, pm.namespace().unwrap_or_default(), pm.name_any())
}

pub use crate::conditions::now;

/// `delay` from now as a Kubernetes timestamp (saturating at the far future).
pub fn later(delay: Duration) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    let later = k8s_openapi::jiff::SignedDuration::try_from(delay)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(k8s_openapi::jiff::Timestamp::MAX);
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(later)
}

/// How long until `at` (`None` when it has passed).
pub fn until(at: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Option<Duration> {
    let left = at.0.duration_since(k8s_openapi::jiff::Timestamp::now());
    Duration::try_from(left).ok().filter(|d| !d.is_zero())
}

/// Sets `VirtualMachineProvisioned=False` with `reason`/`message` and the `Ready` summary.
pub fn set_failure_condition(pm: &mut capmox_api::v1alpha2::ProxmoxMachine, reason: &str, message: String) {
    record::set_condition(
        pm,
        &crate::conditions::Desired::falsy(
            capmox_api::v1alpha2::VIRTUAL_MACHINE_PROVISIONED_CONDITION,
            reason,
            message,
        ),
    );
}

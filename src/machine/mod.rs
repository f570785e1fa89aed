//! The ProxmoxMachine VM lifecycle.
//!
//! * [`state`]: the pure decision — observed facts in, the single next step out — for provisioning
//!   and for deletion;
//! * [`desired`]: what the VM's config should be and how it differs from Proxmox's;
//! * [`template`], [`scheduling`], [`vmid`], [`zone`]: the pure placement rules applied before the clone;
//! * [`view`]: what the controller knows about each Proxmox cluster (shared reads, waits, timing);
//! * [`observe`], [`steps`], [`placement`], [`iso`], [`guest`] (+ [`dynamic`]: DHCP/SLAAC
//!   addresses from the guest agent), [`ha`], [`locations`]: the I/O around them;
//! * [`caches`], [`latest`]: reads from the watch caches, with this controller's own writes;
//! * [`reconcile::provision`] and [`delete::delete`]: one pass each, called by the controller.

pub mod boot;
pub mod caches;
pub mod delete;
pub mod desired;
pub mod devices;
pub mod dynamic;
pub mod error;
pub mod guest;
pub mod ha;
pub mod iso;
pub mod latest;
pub mod locations;
pub mod observe;
pub mod placement;
pub mod reconcile;
pub mod scheduling;
pub mod state;
pub mod steps;
pub mod template;
pub mod view;
pub mod vmid;
pub mod zone;

use std::time::Duration;

pub use error::MachineError;

/// Timing of the machine controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSettings {
    /// ProxmoxMachines reconciled at the same time (`None`: the manager-wide `concurrency`).
    pub concurrency: Option<u16>,
    /// Shortest delay before looking at a Proxmox task or a lock again (tasks are looked at when
    /// their type says they should be done; see [`view::timing`]).
    pub task_poll_initial: Duration,
    /// Longest delay between two looks at one task (and the safety margin of task waits).
    pub task_poll_max: Duration,
    /// How old a shared `/cluster/resources` list may be for a machine in flight, and the
    /// shortest time between two reads of it while machines wait for their VMs.
    pub observe_interval: Duration,
    /// How long a failed step waits before it is retried (`status.retryAfter`).
    pub retry_delay: Duration,
    /// How long after boot the QEMU guest agent may take to answer before the machine fails.
    pub agent_timeout: Duration,
    /// How long after boot cloud-init may run before the machine fails.
    pub cloud_init_timeout: Duration,
    /// Delay between guest checks of the machines that scout their cluster's guests.
    pub guest_poll: Duration,
    /// Within how long a just-started `cloud-init status --wait` is read again when the guest is
    /// probably done (a twentieth of it: the first read, right after the start).
    pub exec_poll_window: Duration,
    /// Safety-net requeue while waiting on watched objects (and how old a shared list may be
    /// for a provisioned machine).
    pub resync: Duration,
}

impl Default for MachineSettings {
    fn default() -> Self {
        Self {
            concurrency: None,
            task_poll_initial: Duration::from_millis(250),
            task_poll_max: Duration::from_secs(30),
            observe_interval: Duration::from_secs(1),
            retry_delay: Duration::from_secs(60),
            agent_timeout: Duration::from_secs(10 * 60),
            cloud_init_timeout: Duration::from_secs(30 * 60),
            guest_poll: Duration::from_secs(5),
            exec_poll_window: Duration::from_secs(2),
            resync: Duration::from_secs(10 * 60),
        }
    }
}

/// The current time as a Kubernetes timestamp.
pub fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

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
    use crate::conditions::{self, Desired};
    use capmox_api::v1alpha2 as api;
    let generation = pm.metadata.generation;
    let status = pm.status.get_or_insert_with(Default::default);
    let list = status.conditions.get_or_insert_with(Vec::new);
    let now = now();
    conditions::set(
        list,
        &Desired::falsy(api::VIRTUAL_MACHINE_PROVISIONED_CONDITION, reason, message),
        generation,
        &now,
    );
    let ready = conditions::ready_summary(list, &[api::VIRTUAL_MACHINE_PROVISIONED_CONDITION]);
    conditions::set(list, &ready, generation, &now);
}

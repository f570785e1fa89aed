//! The VM lifecycle, for every kind that owns Proxmox VMs — and knowing none of them: no Cluster
//! API or capmox type and no Kubernetes client here, only Proxmox (through the shared
//! [`crate::proxmox::view`]) and what the owner hands in.
//!
//! * [`spec`]: what the owner wants ([`VmSpec`]) and what has been done ([`VmRecord`]);
//! * [`decide`]: the pure decision — facts in, the single next step out — for provisioning and for
//!   deletion;
//! * [`desired`], [`devices`], [`boot`]: what the VM's config should hold and how it differs from
//!   Proxmox's; [`template`], [`scheduling`], [`vmid`]: the pure placement rules; [`ha`]: the HA
//!   resource; [`dynamic`]: addresses a guest got by DHCP/SLAAC;
//! * [`observe`] reads the facts from the view, [`exec`] carries out one step, [`pass`] is one
//!   pass of each (observe → decide → execute) returning an [`Outcome`];
//! * [`adapter`]: what the lifecycle asks of the owner ([`Adapter`]);
//! * [`operate`]: for owners that keep their VM running as their spec says (power intent, live
//!   reconfiguration, restarts): the decision the pass takes once provisioning has nothing left
//!   to do, selected by [`VmSpec::operation`];
//! * [`snapshot`]: taking, deleting and rolling back to snapshots of a created VM.
//!
//! **How a kind uses it.** A controller of a kind that owns VMs maps its object to a [`VmSpec`]
//! (template, clone options, placement, hardware, guest checks, HA) and a [`VmRecord`] (the VMID,
//! node, task, retry time, bootstrap delivery and HA it persisted, and the VM's identity — its
//! SMBIOS UUID, kept where it survives a restore), implements [`Adapter`] (its
//! addresses, its bootstrap data, where its siblings live), and runs [`pass::provision`] — or
//! [`pass::delete`] while the object is being deleted — with the [`crate::proxmox::view::ProxmoxView`]
//! of its Proxmox cluster and an [`Owner`](crate::proxmox::view::Owner) key naming the object. It
//! persists the returned record before anything else (a VMID reservation or a task must survive a
//! crash), then [`arms`](crate::proxmox::view::ProxmoxView::arm) the view's wait for the owner,
//! shows the outcome's phase, failure and warning in its own terms, and looks again when the
//! outcome's [`Next`] says (the view wakes owners of its kind through
//! [`Views::subscribe`](crate::proxmox::view::Views::subscribe)). ProxmoxMachine
//! ([`crate::machine`]) is such a kind.

pub mod adapter;
pub mod boot;
pub mod decide;
pub mod delete;
pub mod desired;
pub mod devices;
pub mod dynamic;
pub mod error;
pub mod exec;
pub mod ha;
pub mod iso;
pub mod observe;
pub mod operate;
pub mod pass;
pub mod scheduling;
pub mod snapshot;
pub mod spec;
pub mod template;
pub mod vmid;

use std::time::Duration;

pub use adapter::{Adapter, Addresses, Image, Provisioned, Report};
pub use decide::{AddressFacts, Failure, Phase, Reason, Step};
pub use error::VmError;
pub use exec::Next;
pub use pass::{DeleteOutcome, Outcome};
pub use spec::{VmRecord, VmSpec};

/// Timing of the lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Owners reconciled at the same time (`None`: the manager-wide `concurrency`).
    pub concurrency: Option<u16>,
    /// Shortest delay before looking at a Proxmox task or a lock again (tasks are looked at when
    /// their type says they should be done; see [`crate::proxmox::view::timing`]).
    pub task_poll_initial: Duration,
    /// Longest delay between two looks at one task (and the safety margin of task waits).
    pub task_poll_max: Duration,
    /// How old a shared `/cluster/resources` list may be for a VM in flight, and the shortest
    /// time between two reads of it while owners wait for their VMs.
    pub observe_interval: Duration,
    /// How long a failed step waits before it is retried.
    pub retry_delay: Duration,
    /// How long after boot the QEMU guest agent may take to answer before the VM fails.
    pub agent_timeout: Duration,
    /// How long after boot cloud-init may run before the VM fails.
    pub cloud_init_timeout: Duration,
    /// Delay between guest checks of the VMs that scout their cluster's guests.
    pub guest_poll: Duration,
    /// Within how long a just-started `cloud-init status --wait` is read again when the guest is
    /// probably done (a twentieth of it: the first read, right after the start).
    pub exec_poll_window: Duration,
    /// Safety-net requeue while waiting on watched objects (and how old a shared list may be
    /// for a provisioned VM).
    pub resync: Duration,
}

impl Default for Settings {
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

impl Settings {
    /// The settings of the shared views.
    pub fn view_settings(&self) -> crate::proxmox::view::ViewSettings {
        crate::proxmox::view::ViewSettings {
            observe_interval: self.observe_interval,
            look_min: self.task_poll_initial,
            look_max: self.task_poll_max,
        }
    }
}

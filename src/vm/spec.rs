//! What an owner wants of its VM ([`VmSpec`]) and what has been done about it ([`VmRecord`]):
//! the lifecycle's two inputs besides Proxmox's own state. An owner (a ProxmoxMachine, a
//! standalone VM, …) maps its spec to a [`VmSpec`] and keeps the [`VmRecord`] wherever it
//! persists state (a status, annotations); a pass returns the new record, which the owner must
//! persist before the next pass.

use std::time::{Duration, SystemTime};

use super::decide::Failure;
use super::desired::DesiredVm;
use super::dynamic::DynamicNicSpec;
use super::ha::{HaResource, HaWish};
use super::template::TemplateSource;
use super::vmid::VmidRange;

/// The VM an owner wants.
#[derive(Debug, Clone, PartialEq)]
pub struct VmSpec {
    /// The VM's name in Proxmox: a VM with another name at the recorded VMID is someone else's.
    pub name: String,
    /// The template to clone (`Err`: why the owner's spec names none).
    pub source: Result<TemplateSource, String>,
    /// How to clone it.
    pub clone: CloneOptions,
    /// Where the VM may go.
    pub placement: PlacementSpec,
    /// What its config should hold before the first boot.
    pub desired: DesiredVm,
    /// The bootstrap data's ISO.
    pub bootstrap: BootstrapSpec,
    /// What is checked inside the guest before the VM counts as provisioned.
    pub guest: GuestChecks,
    /// The HA resource the VM should be (`None`: none).
    pub ha: Option<HaWish>,
    /// A refusal of the owner (e.g. its spec names something that does not exist): reported
    /// instead of any step until the VM is provisioned.
    pub refusal: Option<Failure>,
    /// How the VM is operated once created (`None`: it is only provisioned, as a ProxmoxMachine's;
    /// see [`super::operate`]).
    pub operation: Option<super::operate::Operation>,
}

/// How the template is cloned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloneOptions {
    /// Full clone (else linked).
    pub full: bool,
    /// Target storage (full clones).
    pub storage: Option<String>,
    /// Target format (full clones).
    pub format: Option<String>,
    /// Resource pool.
    pub pool: Option<String>,
    /// Snapshot of the template to clone from.
    pub snap_name: Option<String>,
}

/// Where the VM may be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementSpec {
    /// The nodes it may go to (`Ok(None)`: the template's node; `Err`: why none can be, e.g. a
    /// zone without allowed nodes).
    pub allowed_nodes: Result<Option<Vec<String>>, String>,
    /// Percent of a node's memory that may be reserved (`None`: 100; 0: no memory check).
    pub memory_adjustment: Option<i64>,
    /// Memory the VM needs, in bytes (0: the template's, not checked).
    pub requested_memory: u64,
    /// The VMIDs it may get (`None`: Proxmox's next free one).
    pub vmid_range: Option<VmidRange>,
}

/// The bootstrap data's ISO.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootstrapSpec {
    /// Storage for the ISO (`None`: the node's first ISO-capable storage by name).
    pub iso_storage: Option<String>,
    /// The guest consumed the data (e.g. the node joined its cluster): the ISO may go.
    pub consumed: bool,
}

/// The guest checks before the VM counts as provisioned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestChecks {
    /// Skip the QEMU guest agent (and with it cloud-init and DHCP addresses).
    pub skip_agent: bool,
    /// Skip `cloud-init status`.
    pub skip_cloud_init: bool,
    /// NICs whose addresses the guest gets by DHCP or SLAAC (learnt from the agent).
    pub dynamic_nics: Vec<DynamicNicSpec>,
}

/// What has been done for the VM: the facts recorded *before* acting, so that every step is safe
/// to repeat after a crash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmRecord {
    /// The VMID reserved for (or holding) the VM.
    pub vmid: Option<u32>,
    /// The node it is (to be) created on, or lives on now.
    pub node: Option<String>,
    /// The Proxmox task in flight (UPID).
    pub task: Option<String>,
    /// A failed step is not retried before this time.
    pub retry_after: Option<SystemTime>,
    /// The bootstrap data was delivered.
    pub bootstrap_delivered: bool,
    /// The HA resource applied.
    pub ha: Option<HaResource>,
    /// The VM is provisioned.
    pub provisioned: bool,
    /// The VM failed for good (the owner derives it from what it persisted: a terminal failure).
    pub failed_terminally: bool,
    /// What was done in operating the VM (owners with an [`VmSpec::operation`]).
    pub operation: super::operate::OpRecord,
    /// The VM's SMBIOS UUID as the owner recorded it once the VM existed (e.g. a provider ID).
    /// It survives where the rest of the record may not (a backup restored without status, a
    /// `clusterctl move`): with an identity and no VM the VM was lost, never still to be made,
    /// and a VM at the VMID with another UUID is not this owner's.
    pub identity: Option<String>,
}

impl VmRecord {
    /// How long until the recorded retry time (`None`: none, or it passed).
    pub fn retry_left(&self) -> Option<Duration> {
        let at = self.retry_after?;
        at.duration_since(SystemTime::now()).ok().filter(|d| !d.is_zero())
    }
}

/// `delay` from now (saturating at a far future).
pub fn later(delay: Duration) -> SystemTime {
    SystemTime::now()
        .checked_add(delay)
        .unwrap_or_else(|| SystemTime::now() + Duration::from_secs(100 * 365 * 24 * 3600))
}

//! What the lifecycle asks of a VM's owner: the few things only the owning kind knows — its
//! addresses (e.g. IPAM claims), its bootstrap data, where its siblings live — behind one trait,
//! so the lifecycle itself knows no Kubernetes kind.

use std::future::Future;
use std::net::IpAddr;

use super::decide::{AddressFacts, Failure, Phase, Reason};
use super::error::VmError;
use super::scheduling::Placed;
use crate::proxmox::view::{ViewError, VmFacts};

/// The owner's addresses for the VM, as it knows them now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    /// Their state.
    pub facts: AddressFacts,
    /// Tags the VM carries for them once its bootstrap data is delivered (e.g. `ip_net0_<ip>`).
    pub tags: Vec<String>,
}

/// What a step reports besides the record it changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// A message for the step's phase (empty: none).
    pub message: String,
    /// The step failed; shown instead of the step's phase.
    pub failure: Option<Failure>,
    /// A Warning event to publish: `(reason, message)`.
    pub warning: Option<(Reason, String)>,
    /// The phase instead of the step's own (`None`: the step's).
    pub phase: Option<Phase>,
    /// Keep whatever the owner shows now (a pass that came early changed nothing).
    pub keep: bool,
}

impl Report {
    /// A report with `message`.
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            ..Self::default()
        }
    }

    /// A failure report.
    pub fn failed(failure: Failure) -> Self {
        Self {
            message: failure.message.clone(),
            failure: Some(failure),
            ..Self::default()
        }
    }
}

/// The bootstrap image an owner renders for its VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    /// The NoCloud ISO.
    Ready(Vec<u8>),
    /// Not yet (the message says what is missing, e.g. a NIC's MAC): look again later.
    Wait(String),
    /// It cannot be rendered.
    Failed(Failure),
}

/// What the guest check learnt when the VM became provisioned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provisioned {
    /// The VM's SMBIOS UUID (its instance and provider ID).
    pub uuid: Option<String>,
    /// Addresses learnt from the guest agent for DHCP/SLAAC NICs (empty without such NICs).
    pub learnt: Vec<IpAddr>,
}

/// The owner's side of the lifecycle. Every method is called from within a pass; an owner keeps
/// what a pass needs twice (e.g. the address resolution) itself.
pub trait Adapter: Send + Sync {
    /// The owner's error: the lifecycle's errors convert into it.
    type Error: From<VmError> + From<ViewError> + std::fmt::Display + Send + Sync + 'static;

    /// The VM's addresses as the owner knows them now (from its caches: no request). Asked only
    /// while the VM is ours and not provisioned.
    fn addresses(&self) -> Result<Addresses, Self::Error>;

    /// Asks for the VM's addresses (e.g. creates IPAM claims); the report says what happens next.
    fn obtain_addresses(&self) -> impl Future<Output = Result<Report, Self::Error>> + Send;

    /// Renders the bootstrap image of `vm` (its MACs and SMBIOS UUID are in its config; `region`
    /// is the Proxmox cluster's name).
    fn bootstrap_image(
        &self,
        vm: &VmFacts,
        region: Option<String>,
    ) -> impl Future<Output = Result<Image, Self::Error>> + Send;

    /// Chooses the VM's node with `choose`, given where the other VMs of the owner's group live,
    /// and records the choice, serialised with every other placement of the group (concurrent
    /// placements then spread over the nodes). `Err` inside: `choose`'s refusal.
    fn place<F>(&self, choose: F) -> impl Future<Output = Result<Result<String, String>, Self::Error>> + Send
    where
        F: FnOnce(&[Placed<'_>]) -> Result<String, String> + Send;

    /// The VM now lives on `node` (e.g. it migrated): the owner's record of where its VMs live
    /// follows.
    fn moved(&self, node: &str) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// VMIDs that other objects of the owner's kind have recorded (not free, even when Proxmox has
    /// no VM there yet).
    fn taken_vmids(&self) -> Vec<i64>;
}

//! `vm.capmox-rs.io/v1alpha1`: Proxmox VMs as Kubernetes objects, without Cluster API.
//!
//! [`ProxmoxVirtualMachine`] (short name `pvm`) is one Proxmox VE VM: cloned from a template (or
//! adopted as it is), configured with the hardware fields a `ProxmoxMachine` has (same names and
//! types, so a `ProxmoxMachineTemplate`'s spec can be copied) plus a VMID, template name, MAC
//! and firewall per NIC, OS type, protection and the guest agent; booted with a NoCloud ISO
//! carrying the user's cloud-init; powered as `spec.runStrategy` says (KubeVirt's names:
//! `Always`, `RerunOnFailure`, `Halted`, `Manual`), paused with `spec.paused`, restarted once by
//! the `vm.capmox-rs.io/restartedAt` annotation; reconfigured live where Proxmox hot-plugs;
//! deleted or retained as `spec.deletionPolicy` says.
//!
//! [`ProxmoxVMImage`] (short `pvmimage`) is a Proxmox VM template made from a disk image at a URL;
//! a ProxmoxVirtualMachine clones it through `spec.imageRef`.
//! [`ProxmoxVMSnapshot`] (`pvmsnap`), [`ProxmoxVMRestore`] (`pvmrestore`) and [`ProxmoxVMClone`]
//! (`pvmclone`) snapshot such a VM, roll it back to a snapshot and make a new one from it.

mod clone;
mod image;
mod restore;
mod snapshot;
mod spec;
mod status;

pub use clone::*;
pub use image::*;
pub use restore::*;
pub use snapshot::*;
pub use spec::*;
pub use status::*;

/// The API group.
pub const GROUP: &str = "vm.capmox-rs.io";
/// The API version name.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of the kind.
pub const API_VERSION: &str = "vm.capmox-rs.io/v1alpha1";
/// The kind.
pub const KIND: &str = "ProxmoxVirtualMachine";
/// The plural resource name.
pub const PLURAL: &str = "proxmoxvirtualmachines";
/// The finalizer the controller holds while the VM exists.
pub const FINALIZER: &str = "proxmoxvirtualmachine.vm.capmox-rs.io";
/// One-shot restart: a value (an RFC 3339 time) newer than `status.restartedAt` reboots the VM
/// once — what `capmox vm restart` writes, as `kubectl rollout restart` writes
/// `kubectl.kubernetes.io/restartedAt`.
pub const RESTARTED_AT_ANNOTATION: &str = "vm.capmox-rs.io/restartedAt";
/// A one-shot power request of a `Manual` VM: `start@<RFC 3339>` or `stop@<RFC 3339>`; acted on
/// once when it differs from `status.powerRequest` (what `capmox vm start|stop` writes there).
pub const POWER_REQUEST_ANNOTATION: &str = "vm.capmox-rs.io/powerRequest";
/// What the last ProxmoxVMRestore of the VM wrote (`<restore UID>@<RFC 3339>`): the
/// ProxmoxVirtualMachine controller compares the rolled-back VM with the spec once and reports
/// what differs (`SpecDrift`) instead of re-applying the spec over the restored state.
pub const RESTORED_ANNOTATION: &str = "vm.capmox-rs.io/restored";
/// Pauses reconciliation (nothing is done in Proxmox while it is present).
pub const PAUSED_ANNOTATION: &str = "vm.capmox-rs.io/paused";

/// `Ready`: the VM runs (or is stopped, paused) as the spec asks and nothing fails.
pub const READY_CONDITION: &str = "Ready";
/// `VMCreated`: the VM exists in Proxmox (cloned and configured, or adopted).
pub const VM_CREATED_CONDITION: &str = "VMCreated";
/// `ResourcesAllocated`: the VM has the CPU, memory and disks the spec asks for.
pub const RESOURCES_ALLOCATED_CONDITION: &str = "ResourcesAllocated";
/// `NetworkConfigured`: the guest reported the addresses of its NICs.
pub const NETWORK_CONFIGURED_CONDITION: &str = "NetworkConfigured";
/// `RestartRequired`: changes Proxmox keeps pending until the next restart (named in the message).
pub const RESTART_REQUIRED_CONDITION: &str = "RestartRequired";
/// `SpecDrift`: after a restore, the VM's config differs from the spec in these keys (the spec
/// is applied again only once it is changed).
pub const SPEC_DRIFT_CONDITION: &str = "SpecDrift";
/// The finalizer of ProxmoxVMSnapshots (the Proxmox snapshot is deleted first).
pub const SNAPSHOT_FINALIZER: &str = "proxmoxvmsnapshot.vm.capmox-rs.io";
/// The label a ProxmoxVMClone puts on the ProxmoxVirtualMachine it creates (the clone's name).
pub const CLONED_BY_LABEL: &str = "vm.capmox-rs.io/cloned-by";
/// The annotation a ProxmoxVMClone puts on the ProxmoxVirtualMachine it creates (the clone's UID).
pub const CLONE_UID_ANNOTATION: &str = "vm.capmox-rs.io/clone-uid";

/// The Proxmox tag of a VM a `ProxmoxVirtualMachine` manages: `capmox-vm_<namespace>_<name>`
/// (Kubernetes names have no `_`, so the tag names one object; Proxmox keeps tags lower-case).
pub fn owner_tag(namespace: &str, name: &str) -> String {
    format!("{OWNER_TAG_PREFIX}{namespace}_{name}").to_ascii_lowercase()
}

/// The prefix of [`owner_tag`].
pub const OWNER_TAG_PREFIX: &str = "capmox-vm_";

//! ProxmoxVirtualMachine as an owner of one VM: the adapter between `vm.capmox-rs.io/v1alpha1`
//! and the CAPI-free lifecycle of [`crate::vm`] — provisioning, then operation
//! ([`crate::vm::operate`]: run strategy, pause, restarts, live reconfiguration).
//!
//! * [`spec`]: the object mapped to a [`crate::vm::VmSpec`] with its [`crate::vm::operate::Operation`];
//! * [`record`]: its status as a [`crate::vm::VmRecord`] and back;
//! * [`adapter`]: what the lifecycle asks of it ([`crate::vm::Adapter`]): inline, DHCP or IPAM
//!   pool addresses ([`addresses`]), the NoCloud image of the user's cloud-init, no siblings;
//! * [`provision`] and [`delete`]: one pass each (adoption, template, refusals; `Delete` or
//!   `Retain`), called by the controller; [`status`]: phase, conditions, events;
//! * [`drift`]: after a restore, what the rolled-back VM lacks of the spec (`SpecDrift`);
//! * [`operations`]: the snapshots, restores and clones of ProxmoxVirtualMachines.

pub mod adapter;
pub mod addresses;
pub mod delete;
pub mod drift;
pub mod error;
pub mod operations;
pub mod provision;
pub mod reasons;
pub mod record;
pub mod spec;
pub mod status;

pub use error::VirtualMachineError;

/// The kind the lifecycle's view wakes for ProxmoxVirtualMachines.
pub const OWNER_KIND: &str = "ProxmoxVirtualMachine";

/// The view's key of a ProxmoxVirtualMachine.
pub fn owner_of(pvm: &capmox_api::vm::ProxmoxVirtualMachine) -> crate::proxmox::view::Owner {
    use kube::ResourceExt;
    crate::proxmox::view::Owner::new(OWNER_KIND, pvm.namespace().unwrap_or_default(), pvm.name_any())
}

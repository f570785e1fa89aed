//! The VM lifecycle as one pure decision: [`decide`] maps what a pass observed ([`Facts`]) to the
//! single next [`Step`], and [`decide_delete`] does the same while the VM is being deleted
//! ([`DeleteFacts`] → [`DeleteStep`]).
//!
//! The decision never looks at what an earlier pass reported: it derives the next step from
//! Proxmox's state (the VM's existence, lock, power state and config) and from the few facts the
//! owner records *before* acting ([`super::VmRecord`]: the VMID, node, task, bootstrap delivery).
//! That makes every step safe to repeat after a crash: a clone is only issued for a recorded VMID
//! that does not exist yet, a VM left behind by an interrupted clone is adopted by VMID and name,
//! and nothing is re-done once observed done.
//!
//! ```text
//! ReserveVm → CloneVm → (task) → ConfigureVm (only for new data disks or NICs) → ResizeBootDisk
//!   → ObtainAddresses → DeliverBootstrapData (upload, then one write: the other options, ISO,
//!   address tags)
//!   → PowerOn → (task) → ApplyHa (with HA wanted) → CheckGuest (→ provisioned)
//!   → RemoveBootstrapIso (once the bootstrap data was consumed) → Idle
//! ```
//!
//! A record that lost its progress behind a VM that ran with the owner's data (a restore, a
//! `clusterctl move`) goes ObtainAddresses → Adopt → CheckGuest, or straight to provisioned once
//! the data was consumed, without a write to the VM; a recorded identity with no VM fails.

use std::time::Duration;

use super::desired::{DesiredVm, boot_disk_resize, config_changes, new_volumes};
use super::ha::{HaResource, HaWish};
use crate::proxmox::types::ConfigUpdate;

pub use crate::proxmox::view::{Power, TaskFacts, VmFacts};

/// The VM the recorded VMID points at.
#[derive(Debug, Clone, PartialEq)]
pub enum VmPresence {
    /// No VMID recorded yet.
    NotReserved,
    /// A VMID is recorded but no VM with it exists anywhere in the Proxmox cluster.
    Missing,
    /// The recorded VMID belongs to a VM with another name: someone else took it.
    Foreign {
        /// The other VM's name.
        name: Option<String>,
    },
    /// Our VM.
    Ours(Box<VmFacts>),
}

/// The state of the VM's addresses (what its bootstrap network configuration needs), as its
/// owner knows it (e.g. from IPAM claims).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressFacts {
    /// Not looked at in this pass (the VM is not ours yet).
    NotChecked,
    /// The owner has not asked for some of them yet.
    Missing,
    /// Asked for; some have not been given yet.
    Pending,
    /// They cannot be had without the user (the message says why).
    Conflict(String),
    /// Every address is known.
    Ready,
}

/// The facts [`decide`] works from.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// What the VM should look like.
    pub desired: DesiredVm,
    /// The recorded task and what became of it.
    pub task: Option<TaskFacts>,
    /// The recorded retry time is still in the future by this much.
    pub retry_after: Option<Duration>,
    /// The VM.
    pub vm: VmPresence,
    /// The VM's addresses.
    pub addresses: AddressFacts,
    /// The bootstrap data was delivered (recorded).
    pub bootstrap_delivered: bool,
    /// The VM failed for good (a failed cloud-init, a guest agent that never came up, a vanished
    /// VM): nothing is retried until the owner is replaced or deleted (capmox: "Error state
    /// detected").
    pub failed_terminally: bool,
    /// The VM was provisioned (recorded).
    pub provisioned: bool,
    /// The bootstrap data was consumed (e.g. the node joined its cluster): the ISO may go.
    pub bootstrap_consumed: bool,
    /// The VM's bootstrap ISO is attached (ide0 points at its file), or the VM still carries the
    /// `go-proxmox+cloud-init` tag (an ISO may exist).
    pub bootstrap_iso_attached: bool,
    /// The HA resource the VM should be.
    pub ha: Option<HaWish>,
    /// The HA resource recorded as applied.
    pub ha_applied: Option<HaResource>,
    /// The VM's SMBIOS UUID as the owner recorded it ([`super::VmRecord::identity`]).
    pub identity: Option<String>,
}

/// Why a VM cannot make progress (or, for a warning, what happened): the lifecycle's own reasons,
/// which an owner shows in its own terms, or one its owner reports (with the owner's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The VM cannot be provisioned (no template, no node, no VMID, a guest that failed, a VM
    /// that vanished, …).
    VmFailed,
    /// The clone failed.
    CloneFailed,
    /// The VM did not start.
    StartFailed,
    /// Another Proxmox task failed.
    TaskFailed,
    /// PCIe passthrough on a template whose machine type is not q35.
    PcieNeedsQ35,
    /// The additional data disks could not be created.
    VolumesFailed,
    /// No node has every PCI resource mapping the VM needs.
    PciMappingUnavailable,
    /// The HA resource could not be applied or removed.
    HaFailed,
    /// (A warning) the reserved VMID was taken by another VM before the clone.
    VmidTaken,
    /// (A warning) cloud-init finished with recoverable errors.
    CloudInitDegraded,
    /// A reason of the owner (its condition or event reason, as it names it).
    Owner(&'static str),
}

/// Why the VM cannot make progress and what happens next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Why.
    pub reason: Reason,
    /// Human-readable message.
    pub message: String,
    /// `None`: terminal until the owner changes something; `Some`: retried after this delay.
    pub retry_after: Option<Duration>,
}

/// Where a VM stands while a step is next: what an owner shows (e.g. as a condition reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Choosing a place, cloning, waiting for the clone.
    Cloning,
    /// Configuring disks, NICs and options before the first boot.
    ShapingDisks,
    /// Waiting for the VM's addresses.
    WaitingForAddresses,
    /// Delivering the bootstrap data.
    DeliveringBootstrap,
    /// Starting the VM.
    PoweringOn,
    /// Waiting for the guest agent and cloud-init.
    WaitingForGuest,
    /// Waiting for a DHCP/SLAAC address of the guest.
    WaitingForDynamicAddress,
    /// Provisioned.
    Provisioned,
}

/// The single next thing to do for a VM that is not being deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A failed Proxmox task was recorded and its retry delay is running.
    WaitForRetry(Duration),
    /// The VM failed for good; keep the failure and do nothing.
    StayFailed,
    /// Poll the recorded task.
    PollTask,
    /// Record the failed task (failure, retry time) and forget it.
    HandleFailedTask {
        /// Task type.
        kind: String,
        /// Exit status.
        exitstatus: String,
    },
    /// Forget a task Proxmox does not know.
    ForgetTask,
    /// Choose template, node and VMID and record VMID and node (no Proxmox write).
    ReserveVm,
    /// Clone the template into the recorded VMID on the recorded node.
    CloneVm,
    /// The recorded VMID was taken by another VM: forget it and reserve again.
    ForgetVmid {
        /// The other VM's name.
        holder: Option<String>,
    },
    /// The VM is locked (e.g. an interrupted clone still running): wait.
    WaitForUnlock(String),
    /// Allocate new data disks or set the NICs (Proxmox assigns their MACs), with every other
    /// option that differs (a task).
    ConfigureVm(ConfigUpdate),
    /// Grow the boot disk.
    ResizeBootDisk {
        /// Disk key (`scsi0`, …).
        disk: String,
        /// Target size in GiB.
        size_gib: u64,
    },
    /// Have the owner obtain the VM's addresses (e.g. create IPAM claims).
    ObtainAddresses,
    /// Wait for the owner's addresses.
    WaitForAddresses,
    /// The addresses conflict; the message tells the user what to fix.
    AddressConflict(String),
    /// Render the bootstrap ISO and upload it (unless already there); once it is there, set the
    /// options that still differ, attach it as ide0 and add the address tags in one write.
    DeliverBootstrapData,
    /// Start the stopped VM.
    PowerOn,
    /// Resume the paused VM.
    Resume,
    /// Register (or update) the VM as this HA resource after its first start.
    ApplyHa(HaResource),
    /// HA is no longer wanted: remove the VM's HA resource and forget it.
    RemoveHa(HaResource),
    /// Check the guest agent and `cloud-init status`; when they pass (or are skipped) the VM is
    /// provisioned in the same pass.
    CheckGuest,
    /// The bootstrap data was consumed: detach and delete the bootstrap ISO and drop the tag.
    RemoveBootstrapIso,
    /// The record lost what the VM shows was done (the owner came back from a backup or a
    /// `clusterctl move` without its status): the VM ran with the owner's bootstrap data, and
    /// with `provisioned` the data was consumed too. Recorded without writing to the VM.
    Adopt {
        /// The VM counts as provisioned (else the guest is checked next, as after a delivery).
        provisioned: bool,
    },
    /// Nothing to do until something changes.
    Idle,
    /// The VM cannot make progress.
    Fail(Failure),
    /// A step of operating the created VM (owners with an operation, see [`super::operate`]).
    Operate(super::operate::OpStep),
}

impl Step {
    /// The phase shown while this step is next (`None`: keep the current one).
    pub fn phase(&self) -> Option<Phase> {
        Some(match self {
            Self::WaitForRetry(_)
            | Self::ApplyHa(_)
            | Self::RemoveHa(_)
            | Self::StayFailed
            | Self::PollTask
            | Self::HandleFailedTask { .. }
            | Self::ForgetTask
            | Self::Fail(_)
            | Self::Operate(_) => {
                return None;
            }
            Self::ReserveVm | Self::CloneVm | Self::ForgetVmid { .. } | Self::WaitForUnlock(_) => {
                Phase::Cloning
            }
            Self::ConfigureVm(_) | Self::ResizeBootDisk { .. } => Phase::ShapingDisks,
            Self::ObtainAddresses | Self::WaitForAddresses | Self::AddressConflict(_) => {
                Phase::WaitingForAddresses
            }
            Self::DeliverBootstrapData => Phase::DeliveringBootstrap,
            Self::PowerOn | Self::Resume => Phase::PoweringOn,
            Self::CheckGuest => Phase::WaitingForGuest,
            Self::RemoveBootstrapIso | Self::Idle => Phase::Provisioned,
            Self::Adopt { provisioned: true } => Phase::Provisioned,
            Self::Adopt { provisioned: false } => return None,
        })
    }

    /// Whether the record this step changes may be written together with the next step's: it
    /// records nothing a later Proxmox write depends on surviving a crash (repeating the step is
    /// harmless; the VMID of a reservation is written at once by the owner).
    pub fn record_can_wait(&self) -> bool {
        matches!(
            self,
            Self::ReserveVm
                | Self::ForgetTask
                | Self::ForgetVmid { .. }
                | Self::DeliverBootstrapData
                | Self::CheckGuest
                | Self::RemoveBootstrapIso
                | Self::Operate(
                    super::operate::OpStep::Note(_)
                        | super::operate::OpStep::ReadGuest
                        | super::operate::OpStep::ReadPending
                )
                | Self::Adopt { .. }
        )
    }

    /// Whether this step writes to Proxmox (the owner persists its record before and after those).
    pub fn writes_to_proxmox(&self) -> bool {
        matches!(
            self,
            Self::CloneVm
                | Self::ConfigureVm(_)
                | Self::ResizeBootDisk { .. }
                | Self::DeliverBootstrapData
                | Self::PowerOn
                | Self::Resume
                | Self::ApplyHa(_)
                | Self::RemoveHa(_)
                | Self::RemoveBootstrapIso
        ) || matches!(self, Self::Operate(s) if s.writes_to_proxmox())
    }
}

/// How long a failed task blocks the step that issued it (capmox: one minute).
pub const TASK_RETRY_DELAY: Duration = Duration::from_secs(60);

/// The next step for a VM that is not being deleted.
pub fn decide(f: &Facts) -> Step {
    if f.failed_terminally && !f.provisioned {
        return Step::StayFailed;
    }
    match &f.task {
        Some(TaskFacts::Running) => return Step::PollTask,
        Some(TaskFacts::Failed { kind, exitstatus }) => {
            return Step::HandleFailedTask {
                kind: kind.clone(),
                exitstatus: exitstatus.clone(),
            };
        }
        Some(TaskFacts::Unknown) => return Step::ForgetTask,
        Some(TaskFacts::Succeeded) | None => {}
    }
    if let Some(left) = f.retry_after {
        return Step::WaitForRetry(left);
    }
    let vm = match &f.vm {
        VmPresence::NotReserved => return Step::ReserveVm,
        // Delivered, provisioned or identified (survives a restore): never silently cloned again.
        VmPresence::Missing if f.bootstrap_delivered || f.provisioned || f.identity.is_some() => {
            return Step::Fail(Failure {
                reason: Reason::VmFailed,
                message: VM_GONE.to_owned(),
                retry_after: None,
            });
        }
        VmPresence::Missing => return Step::CloneVm,
        VmPresence::Foreign { name } if !f.bootstrap_delivered && !f.provisioned => {
            return Step::ForgetVmid { holder: name.clone() };
        }
        VmPresence::Foreign { name } => {
            return Step::Fail(Failure {
                reason: Reason::VmFailed,
                message: format!(
                    "expected VM name to match the machine, found VM {:?} at the recorded VMID",
                    name.as_deref().unwrap_or_default()
                ),
                retry_after: None,
            });
        }
        VmPresence::Ours(vm) => vm,
    };
    if let Some(lock) = vm.config.lock.as_deref().filter(|l| !l.is_empty()) {
        return Step::WaitForUnlock(lock.to_owned());
    }
    if let Some(step) = adopt_step(f, vm) {
        return step;
    }
    // HA takes over a VM once it has run with our bootstrap data, and follows spec changes.
    if (f.provisioned || (f.bootstrap_delivered && vm.power != Power::Stopped))
        && let Some(step) = ha_step(f, vm.vmid)
    {
        return step;
    }
    if f.provisioned {
        // Addresses lost behind a provisioned VM (e.g. claims collected after a restore) are asked
        // for again: no write to the VM, whatever the owner gets.
        if f.addresses == AddressFacts::Missing {
            return Step::ObtainAddresses;
        }
        return if f.bootstrap_consumed && f.bootstrap_iso_attached {
            Step::RemoveBootstrapIso
        } else {
            Step::Idle
        };
    }
    if !f.bootstrap_delivered {
        // Shape the VM only while it has never run with our bootstrap data (no drift correction).
        if vm.power == Power::Stopped {
            if let Some(message) = super::devices::pcie_needs_q35(&f.desired.pci_devices, &vm.config) {
                return Step::Fail(Failure {
                    reason: Reason::PcieNeedsQ35,
                    message,
                    retry_after: Some(TASK_RETRY_DELAY),
                });
            }
            let volumes = match new_volumes(&f.desired, &vm.config) {
                Ok(v) => v,
                Err(message) => {
                    return Step::Fail(Failure {
                        reason: Reason::VolumesFailed,
                        message,
                        retry_after: Some(TASK_RETRY_DELAY),
                    });
                }
            };
            // Data disks are allocated by a task, and NICs get their MACs from Proxmox (the
            // bootstrap network config names them): such changes are written first, with the
            // other options. Any other change goes out with the bootstrap ISO in one write.
            let changes = config_changes(&f.desired, &vm.config);
            if !volumes.is_empty() || changes.sets_nics() {
                return Step::ConfigureVm(changes.merge(volumes));
            }
            if let Some((disk, size_gib)) = boot_disk_resize(&f.desired, &vm.config) {
                return Step::ResizeBootDisk { disk, size_gib };
            }
        }
        match &f.addresses {
            AddressFacts::NotChecked | AddressFacts::Missing => return Step::ObtainAddresses,
            AddressFacts::Pending => return Step::WaitForAddresses,
            AddressFacts::Conflict(message) => return Step::AddressConflict(message.clone()),
            AddressFacts::Ready => return Step::DeliverBootstrapData,
        }
    }
    match vm.power {
        Power::Stopped => Step::PowerOn,
        Power::Paused => Step::Resume,
        Power::Running if f.addresses == AddressFacts::Ready => Step::CheckGuest,
        Power::Running => match &f.addresses {
            AddressFacts::Conflict(m) => Step::AddressConflict(m.clone()),
            AddressFacts::NotChecked | AddressFacts::Missing => Step::ObtainAddresses,
            _ => Step::WaitForAddresses,
        },
    }
}

/// The failure message of a VM that is gone (capmox's words).
pub const VM_GONE: &str = "the VM of this machine no longer exists in Proxmox";

/// The step for a VM whose record says nothing was delivered (nor provisioned) although the VM shows it ran with
/// the owner's bootstrap data (`None`: it did not; the normal flow goes on). That is a record lost
/// behind a live VM — a backup restored without status, a `clusterctl move` — and the VM is
/// adopted, never shaped, re-delivered or started: its bootstrap ISO is attached (ide0 names its
/// file), or it runs and its SMBIOS UUID is the recorded identity, or its data was consumed (a
/// node joined). The owner's addresses come first (they touch no VM), then [`Step::Adopt`]. A VM
/// whose UUID is not the recorded identity is not the owner's VM.
fn adopt_step(f: &Facts, vm: &VmFacts) -> Option<Step> {
    if f.provisioned || f.bootstrap_delivered {
        return None;
    }
    let identified = match (f.identity.as_deref(), vm.config.smbios_uuid.as_deref()) {
        (Some(id), Some(uuid)) if !id.eq_ignore_ascii_case(uuid) => {
            return Some(Step::Fail(Failure {
                reason: Reason::VmFailed,
                message: format!(
                    "{VM_GONE}: VM {} has SMBIOS UUID {uuid}, the recorded provider ID names {id}",
                    vm.vmid
                ),
                retry_after: None,
            }));
        }
        (Some(_), Some(_)) => true,
        _ => false,
    };
    let iso_file = crate::bootstrap::iso_file_name(u64::from(vm.vmid));
    let iso_attached = vm.config.ide0.as_deref().is_some_and(|v| v.contains(&iso_file));
    let ran = iso_attached || (identified && vm.power != Power::Stopped) || f.bootstrap_consumed;
    if !ran {
        return None;
    }
    Some(match &f.addresses {
        AddressFacts::NotChecked | AddressFacts::Missing => Step::ObtainAddresses,
        AddressFacts::Pending => Step::WaitForAddresses,
        AddressFacts::Conflict(message) => Step::AddressConflict(message.clone()),
        AddressFacts::Ready => Step::Adopt {
            provisioned: f.bootstrap_consumed,
        },
    })
}

/// The HA step that brings Proxmox to the wanted HA resource (`None`: it is there).
fn ha_step(f: &Facts, vmid: u32) -> Option<Step> {
    let wanted = f.ha.as_ref().map(|h| h.resource(vmid));
    match (wanted, &f.ha_applied) {
        (Some(w), applied) if applied.as_ref() != Some(&w) => Some(Step::ApplyHa(w)),
        (None, Some(applied)) => Some(Step::RemoveHa(applied.clone())),
        _ => None,
    }
}

/// What the delete flow observed.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteFacts {
    /// The recorded task and what became of it.
    pub task: Option<TaskFacts>,
    /// The VM.
    pub vm: VmPresence,
    /// A bootstrap ISO of this VM's VMID still exists on some storage.
    pub bootstrap_iso: Option<IsoLocation>,
    /// The recorded retry time is still in the future by this much (a failed stop or destroy is
    /// not retried before; the rest of the cleanup does not wait).
    pub retry_after: Option<Duration>,
    /// The VM is an HA resource of this owner (recorded, or wanted and Proxmox lists the VM as
    /// HA-managed): it is removed from HA before the VM is stopped. A VM that someone else made
    /// HA-managed is left to the destroy's `purge=1`.
    pub ha_ours: bool,
}

pub use crate::proxmox::view::write::IsoLocation;

/// The single next thing to do for a VM being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteStep {
    /// Poll the recorded stop/destroy task.
    PollTask,
    /// Forget the failed or unknown task and look again.
    ForgetTask {
        /// Exit status of a failed task, for the condition message.
        failure: Option<String>,
    },
    /// Wait while the VM is locked by someone else's task.
    WaitForUnlock(String),
    /// A task of the delete flow failed; wait this long before trying again.
    WaitForRetry(Duration),
    /// Remove the VM's HA resource (so HA does not restart or relocate it while it goes away).
    RemoveHa {
        /// `vm:<vmid>`.
        sid: String,
    },
    /// Stop the running VM (hard stop; the VM is going away).
    StopVm,
    /// Destroy the stopped VM with `purge=1` (removes it from HA, backup jobs and replication).
    DestroyVm,
    /// Delete the bootstrap ISO.
    DeleteIso(IsoLocation),
    /// The VM and its ISO are gone: what the owner holds beside them (addresses, its place) can go.
    Finish,
}

/// The next step of the delete flow. A VMID that is not recorded, free, or held by another VM
/// means there is no VM of ours to delete.
pub fn decide_delete(f: &DeleteFacts) -> DeleteStep {
    match &f.task {
        Some(TaskFacts::Running) => return DeleteStep::PollTask,
        Some(TaskFacts::Failed { exitstatus, .. }) => {
            return DeleteStep::ForgetTask {
                failure: Some(exitstatus.clone()),
            };
        }
        Some(TaskFacts::Unknown) => return DeleteStep::ForgetTask { failure: None },
        Some(TaskFacts::Succeeded) | None => {}
    }
    if let VmPresence::Ours(vm) = &f.vm {
        if let Some(lock) = vm.config.lock.as_deref().filter(|l| !l.is_empty()) {
            return DeleteStep::WaitForUnlock(lock.to_owned());
        }
        // Only a stop or destroy is held back after a failure; cleanup without a VM is not.
        if let Some(left) = f.retry_after {
            return DeleteStep::WaitForRetry(left);
        }
        if f.ha_ours {
            return DeleteStep::RemoveHa {
                sid: format!("vm:{}", vm.vmid),
            };
        }
        return match vm.power {
            Power::Running | Power::Paused => DeleteStep::StopVm,
            Power::Stopped => DeleteStep::DestroyVm,
        };
    }
    if let Some(iso) = &f.bootstrap_iso {
        return DeleteStep::DeleteIso(iso.clone());
    }
    DeleteStep::Finish
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;

//! The ProxmoxMachine lifecycle as one pure decision: [`decide`] maps what the controller observed
//! ([`Facts`]) to the single next [`Step`], and [`decide_delete`] does the same while the machine is
//! being deleted ([`DeleteFacts`] → [`DeleteStep`]).
//!
//! The decision never looks at condition reasons from a previous pass: it derives the next step
//! from Proxmox's state (the VM's existence, lock, power state and config) and from the few facts the
//! controller records *before* acting (`spec.virtualMachineID`, `status.proxmoxNode`,
//! `status.taskRef`, `status.bootstrapDataProvided`). That makes every step safe to repeat after a
//! crash: a clone is only issued for a recorded VMID that does not exist yet, a VM left behind by an
//! interrupted clone is adopted by VMID and name, and nothing is re-done once observed done.
//!
//! ```text
//! ReserveVm → CloneVm → (task) → ConfigureVm (only for new data disks or NICs) → ResizeBootDisk
//!   → ClaimIpAddresses → DeliverBootstrapData (upload, then one write: the other options, ISO,
//!   IP tags)
//!   → PowerOn → (task) → ApplyHa (with spec.ha) → CheckGuest (→ provisioned)
//!   → RemoveBootstrapIso → Idle
//! ```

use std::time::Duration;

use capmox_api::v1alpha2 as reasons;
use capmox_api::v1alpha2::{HaResourceStatus, HaSpec};

use super::desired::{DesiredVm, boot_disk_resize, config_changes, new_volumes};
use crate::ipam::ResolvedAddress;
use crate::proxmox::types::{ConfigUpdate, VmConfig};

/// Power state of a VM (`GET …/status/current`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    /// `running` (and not paused).
    Running,
    /// `running` with QMP status `paused` or `suspended`.
    Paused,
    /// `stopped` (or anything else that is not running).
    Stopped,
}

/// What Proxmox says about the machine's VM.
#[derive(Debug, Clone, PartialEq)]
pub struct VmFacts {
    /// The VMID.
    pub vmid: u32,
    /// The node the VM lives on now.
    pub node: String,
    /// Power state.
    pub power: Power,
    /// Seconds since the VM started (0 when stopped).
    pub uptime_secs: u64,
    /// Whether Proxmox HA manages the VM.
    pub ha_managed: bool,
    /// The VM's configuration (`lock` included).
    pub config: VmConfig,
}

/// The VM the machine's recorded VMID points at.
#[derive(Debug, Clone, PartialEq)]
pub enum VmPresence {
    /// No VMID recorded yet (`spec.virtualMachineID` unset).
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

/// Outcome of the Proxmox task recorded in `status.taskRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskFacts {
    /// Still running.
    Running,
    /// Finished with `OK` or `WARNINGS: N`.
    Succeeded,
    /// Finished with another exit status.
    Failed {
        /// Task type from the UPID (`qmclone`, `qmstart`, …).
        kind: String,
        /// The exit status text.
        exitstatus: String,
    },
    /// Proxmox does not know the task (e.g. the node was reinstalled): forget it.
    Unknown,
}

/// State of the machine's IPAM claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpFacts {
    /// Not looked at in this pass (the VM does not exist yet).
    NotChecked,
    /// Some claims do not exist yet.
    ClaimsMissing,
    /// Claims exist but some have no address yet.
    Pending,
    /// A claim cannot make progress without the user.
    Conflict(String),
    /// Every claim has its address, in claim order.
    Resolved(Vec<ResolvedAddress>),
}

/// The facts [`decide`] works from.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// What the VM should look like (from the spec).
    pub desired: DesiredVm,
    /// The owner Cluster's infrastructure is provisioned.
    pub cluster_infrastructure_ready: bool,
    /// The Machine names a bootstrap data Secret.
    pub bootstrap_data_available: bool,
    /// `status.taskRef` and what became of it.
    pub task: Option<TaskFacts>,
    /// `status.retryAfter` is still in the future by this much.
    pub retry_after: Option<Duration>,
    /// The VM.
    pub vm: VmPresence,
    /// The IPAM claims.
    pub ips: IpFacts,
    /// `status.bootstrapDataProvided`.
    pub bootstrap_provided: bool,
    /// The machine failed for good (`VMProvisionFailed` without a `retryAfter`): a failed
    /// cloud-init, a guest agent that never came up, a vanished VM. Nothing is retried until the
    /// machine is replaced or deleted (capmox: "Error state detected").
    pub failed_terminally: bool,
    /// `status.initialization.provisioned`.
    pub provisioned: bool,
    /// The CAPI Machine has a `status.nodeRef` (the node joined).
    pub node_joined: bool,
    /// The bootstrap ISO of this VM is attached (ide0 points at `user-data-<vmid>.iso`), or the VM
    /// still carries the `go-proxmox+cloud-init` tag (an ISO may exist).
    pub bootstrap_iso_attached: bool,
    /// `spec.ha`: the HA resource the VM should be.
    pub ha: Option<HaSpec>,
    /// `status.haResource`: the HA resource this controller applied.
    pub ha_applied: Option<HaResourceStatus>,
}

/// Why the machine cannot make progress and what happens next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Condition reason (`VMProvisionFailed`, `CloningFailed`, `TaskFailed`, …).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `None`: terminal until the user changes something; `Some`: retried after this delay.
    pub retry_after: Option<Duration>,
}

/// The single next thing to do for a machine that is not being deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Wait until the Cluster's infrastructure is provisioned.
    WaitForClusterInfrastructure,
    /// Wait until the Machine names its bootstrap data Secret.
    WaitForBootstrapData,
    /// A failed Proxmox task was recorded and its retry delay is running.
    WaitForRetry(Duration),
    /// The machine failed for good; keep the failure condition and do nothing.
    StayFailed,
    /// Poll the task in `status.taskRef`.
    PollTask,
    /// Record the failed task (condition, `retryAfter`) and forget it.
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
    /// Create the missing IPAddressClaims.
    ClaimIpAddresses,
    /// Wait for the IPAM provider to fulfil the claims.
    WaitForIpAddresses,
    /// A claim conflicts; the message tells the user what to fix.
    IpConflict(String),
    /// Render the NoCloud ISO and upload it (unless already there); once it is there, set the
    /// options that still differ (sockets, cores, memory, description, tags, CPU, PCI devices),
    /// attach it as ide0 and add the `ip_net0_<ip>` tags for the default IPv4 addresses in one
    /// write.
    DeliverBootstrapData,
    /// Start the stopped VM.
    PowerOn,
    /// Resume the paused VM.
    Resume,
    /// Register (or update) the VM as this HA resource after its first start; recorded in
    /// `status.haResource`.
    ApplyHa(HaResourceStatus),
    /// `spec.ha` was removed: remove the VM's HA resource and forget it.
    RemoveHa(HaResourceStatus),
    /// Check the guest agent and `cloud-init status`; when they pass (or are skipped) the machine
    /// is marked provisioned in the same pass.
    CheckGuest,
    /// The node joined: detach and delete the bootstrap ISO and drop the tag.
    RemoveBootstrapIso,
    /// Nothing to do until something changes.
    Idle,
    /// The machine cannot make progress.
    Fail(Failure),
}

impl Step {
    /// The `VirtualMachineProvisioned` reason shown while this step is next (`None`: keep the current one).
    pub fn reason(&self) -> Option<&'static str> {
        Some(match self {
            Self::WaitForClusterInfrastructure => reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON,
            Self::WaitForBootstrapData => reasons::WAITING_FOR_BOOTSTRAP_DATA_REASON,
            Self::WaitForRetry(_)
            | Self::ApplyHa(_)
            | Self::RemoveHa(_)
            | Self::StayFailed
            | Self::PollTask
            | Self::HandleFailedTask { .. }
            | Self::ForgetTask => {
                return None;
            }
            Self::ReserveVm | Self::CloneVm | Self::ForgetVmid { .. } | Self::WaitForUnlock(_) => {
                reasons::CLONING_REASON
            }
            Self::ConfigureVm(_) | Self::ResizeBootDisk { .. } => {
                reasons::WAITING_FOR_DISK_RECONCILIATION_REASON
            }
            Self::ClaimIpAddresses | Self::WaitForIpAddresses | Self::IpConflict(_) => {
                reasons::WAITING_FOR_STATIC_IP_ALLOCATION_REASON
            }
            Self::DeliverBootstrapData => reasons::WAITING_FOR_BOOTSTRAP_DATA_RECONCILIATION_REASON,
            Self::PowerOn | Self::Resume => reasons::WAITING_FOR_VM_POWER_UP_REASON,
            Self::CheckGuest => reasons::WAITING_FOR_CLOUD_INIT_REASON,
            Self::RemoveBootstrapIso | Self::Idle => reasons::PROVISIONED_REASON,
            Self::Fail(f) => f.reason,
        })
    }

    /// Whether the status this step changes may be written together with the next step's: it
    /// records nothing a later Proxmox write depends on surviving a crash (repeating the step is
    /// harmless; the VMID of a reservation is spec, written at once).
    pub fn status_can_wait(&self) -> bool {
        matches!(
            self,
            Self::ReserveVm
                | Self::ForgetTask
                | Self::ForgetVmid { .. }
                | Self::DeliverBootstrapData
                | Self::CheckGuest
                | Self::RemoveBootstrapIso
        )
    }

    /// Whether this step writes to Proxmox (the controller persists status before and after those).
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
        )
    }
}

/// How long a failed task blocks the step that issued it (capmox: one minute).
pub const TASK_RETRY_DELAY: Duration = Duration::from_secs(60);

/// The next step for a machine that is not being deleted.
pub fn decide(f: &Facts) -> Step {
    // Gates before a VM exists; once provisioned, CAPI may flip them without affecting the VM.
    if !f.provisioned && !f.bootstrap_provided {
        if !f.cluster_infrastructure_ready {
            return Step::WaitForClusterInfrastructure;
        }
        if !f.bootstrap_data_available {
            return Step::WaitForBootstrapData;
        }
    }
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
        VmPresence::Missing if f.bootstrap_provided || f.provisioned => {
            return Step::Fail(Failure {
                reason: reasons::VM_PROVISION_FAILED_REASON,
                message: "the VM of this machine no longer exists in Proxmox".to_owned(),
                retry_after: None,
            });
        }
        VmPresence::Missing => return Step::CloneVm,
        VmPresence::Foreign { name } if !f.bootstrap_provided && !f.provisioned => {
            return Step::ForgetVmid { holder: name.clone() };
        }
        VmPresence::Foreign { name } => {
            return Step::Fail(Failure {
                reason: reasons::VM_PROVISION_FAILED_REASON,
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
    // HA takes over a VM once it has run with our bootstrap data, and follows spec changes.
    if (f.provisioned || (f.bootstrap_provided && vm.power != Power::Stopped))
        && let Some(step) = ha_step(f, vm.vmid)
    {
        return step;
    }
    if f.provisioned {
        return if f.node_joined && f.bootstrap_iso_attached {
            Step::RemoveBootstrapIso
        } else {
            Step::Idle
        };
    }
    if !f.bootstrap_provided {
        // Shape the VM only while it has never run with our bootstrap data (no drift correction).
        if vm.power == Power::Stopped {
            if let Some(message) = super::devices::pcie_needs_q35(&f.desired.pci_devices, &vm.config) {
                return Step::Fail(Failure {
                    reason: reasons::PCIE_REQUIRES_Q35_REASON,
                    message,
                    retry_after: Some(TASK_RETRY_DELAY),
                });
            }
            let volumes = match new_volumes(&f.desired, &vm.config) {
                Ok(v) => v,
                Err(message) => {
                    return Step::Fail(Failure {
                        reason: reasons::ADDITIONAL_VOLUMES_FAILED_REASON,
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
        match &f.ips {
            IpFacts::NotChecked | IpFacts::ClaimsMissing => return Step::ClaimIpAddresses,
            IpFacts::Pending => return Step::WaitForIpAddresses,
            IpFacts::Conflict(message) => return Step::IpConflict(message.clone()),
            IpFacts::Resolved(_) => return Step::DeliverBootstrapData,
        }
    }
    match vm.power {
        Power::Stopped => Step::PowerOn,
        Power::Paused => Step::Resume,
        Power::Running if matches!(f.ips, IpFacts::Resolved(_)) => Step::CheckGuest,
        Power::Running => match &f.ips {
            IpFacts::Conflict(m) => Step::IpConflict(m.clone()),
            IpFacts::NotChecked | IpFacts::ClaimsMissing => Step::ClaimIpAddresses,
            _ => Step::WaitForIpAddresses,
        },
    }
}

/// The HA step that brings Proxmox to `spec.ha` (`None`: it is there).
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
    /// `status.taskRef` and what became of it.
    pub task: Option<TaskFacts>,
    /// The VM.
    pub vm: VmPresence,
    /// A bootstrap ISO of this machine's VMID still exists on some storage.
    pub bootstrap_iso: Option<IsoLocation>,
    /// IPAddressClaims owned by the machine still exist.
    pub claims_left: bool,
    /// `status.retryAfter` is still in the future by this much (a failed stop or destroy is not
    /// retried before; the rest of the cleanup does not wait).
    pub retry_after: Option<Duration>,
    /// The VM is an HA resource of this machine (`status.haResource`, or `spec.ha` and Proxmox
    /// lists the VM as HA-managed): it is removed from HA before the VM is stopped. A VM that
    /// someone else made HA-managed is left to the destroy's `purge=1`.
    pub ha_ours: bool,
}

/// Where a bootstrap ISO lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsoLocation {
    /// Node the storage was listed on.
    pub node: String,
    /// Storage ID.
    pub storage: String,
    /// Volume ID (`<storage>:iso/user-data-<vmid>.iso`).
    pub volid: String,
}

/// The single next thing to do for a machine being deleted.
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
    /// Stop the running VM (hard stop; the machine is going away).
    StopVm,
    /// Destroy the stopped VM with `purge=1` (removes it from HA, backup jobs and replication).
    DestroyVm,
    /// Delete the bootstrap ISO.
    DeleteIso(IsoLocation),
    /// Delete the machine's IPAddressClaims.
    ReleaseIpAddresses,
    /// Everything is gone: drop the node location and the finalizer.
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
    if f.claims_left {
        return DeleteStep::ReleaseIpAddresses;
    }
    DeleteStep::Finish
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;

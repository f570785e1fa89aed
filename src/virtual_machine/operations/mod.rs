//! The operations on a ProxmoxVirtualMachine's VM that are objects of their own: snapshots
//! ([`snapshot`]: `ProxmoxVMSnapshot`), restores ([`restore`]: `ProxmoxVMRestore`) and clones
//! ([`clone`]: `ProxmoxVMClone`). Each pass maps its object (and the ProxmoxVirtualMachine it
//! names) onto the pure decisions of [`crate::vm::snapshot`], carries out the one step they
//! choose through the view and records it in the working copy's status, which the controller
//! persists before the next pass. A clone makes no Proxmox call of its own: it creates the new
//! ProxmoxVirtualMachine, whose controller clones the VM.

pub mod clone;
pub mod restore;
pub mod snapshot;

use std::time::Duration;

use capmox_api::vm::{ProxmoxVirtualMachine, VmPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::conditions::{self, Desired};
use crate::proxmox::view::{Freshness, ProxmoxView, TaskFacts, ViewError};
use crate::vm::snapshot::VmNow;

/// Ready: the snapshot was taken / the restore is complete / the clone runs.
pub const SUCCEEDED_REASON: &str = "Succeeded";
/// Ready is false: Proxmox is working on it (snapshot, rollback) or the new VM is being made.
pub const IN_PROGRESS_REASON: &str = "InProgress";
/// Ready is false: the VM is busy (locked by a Proxmox task, its ProxmoxVirtualMachine has a
/// task in flight, or another snapshot or restore of the same VM runs first); it goes on by itself.
pub const WAITING_FOR_VM_REASON: &str = "WaitingForVM";
/// Ready is false: the named ProxmoxVirtualMachine or ProxmoxVMSnapshot does not exist (yet).
pub const SOURCE_NOT_FOUND_REASON: &str = "SourceNotFound";
/// Ready is false: the named ProxmoxVirtualMachine has no VM yet, or the snapshot is not ready.
pub const SOURCE_NOT_READY_REASON: &str = "SourceNotReady";
/// Ready is false for good: the request cannot be carried out (the message says why).
pub const INVALID_REASON: &str = "Invalid";
/// Ready is false for good: `includeMemory` on a stopped VM.
pub const VM_NOT_RUNNING_REASON: &str = "VMNotRunning";
/// Ready is false for good: Proxmox's task failed (the message has its error).
pub const FAILED_REASON: &str = "Failed";
/// Event: the Proxmox snapshot was deleted with its object.
pub const SNAPSHOT_DELETED_REASON: &str = "SnapshotDeleted";
/// Warning event: deleting the Proxmox snapshot failed (retried).
pub const SNAPSHOT_DELETE_FAILED_REASON: &str = "SnapshotDeleteFailed";

/// When to look again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Again {
    /// Right after the status is persisted.
    Now,
    /// After this long.
    After(Duration),
    /// When something watched changes (or the safety resync).
    Watch,
}

/// A VM as an operation addresses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// VMID.
    pub vmid: u32,
    /// Node (as the ProxmoxVirtualMachine recorded it).
    pub node: String,
}

/// The VM of `pvm` once it was created.
pub fn target_of(pvm: &ProxmoxVirtualMachine) -> Option<Target> {
    let s = pvm.status.as_ref()?;
    Some(Target {
        vmid: s.vmid.and_then(|v| u32::try_from(v).ok())?,
        node: s.node.clone()?,
    })
}

/// Why the ProxmoxVirtualMachine wants its VM left alone now, if it does: a task of its own in
/// flight, or a phase in which it changes the VM.
pub fn owner_busy(pvm: &ProxmoxVirtualMachine) -> Option<String> {
    let name = pvm.metadata.name.as_deref().unwrap_or_default();
    let s = pvm.status.as_ref()?;
    if s.task_ref.is_some() {
        return Some(format!(
            "ProxmoxVirtualMachine {name} has a Proxmox task in flight"
        ));
    }
    match s.phase {
        Some(p @ (VmPhase::Creating | VmPhase::Starting | VmPhase::Stopping | VmPhase::Deleting)) => {
            Some(format!("ProxmoxVirtualMachine {name} is {}", p.as_str()))
        }
        _ => None,
    }
}

/// [`owner_busy`], or a spec the ProxmoxVirtualMachine has not applied yet — what a snapshot or
/// a rollback waits for: the controller's pass may be writing the VM's config (a snapshot would
/// catch it half-applied), and a pass after a rollback would write the spec over the restored
/// state before the restore is marked (`SpecDrift` would then show nothing). A VM in `Error` is
/// not waited for: restoring it may be what repairs it.
pub fn owner_changing(pvm: &ProxmoxVirtualMachine) -> Option<String> {
    if let Some(why) = owner_busy(pvm) {
        return Some(why);
    }
    let name = pvm.metadata.name.as_deref().unwrap_or_default();
    let s = pvm.status.as_ref()?;
    let generation = pvm.metadata.generation?;
    (s.provisioned == Some(true)
        && s.phase != Some(VmPhase::Error)
        && s.applied_generation != Some(generation))
    .then(|| format!("ProxmoxVirtualMachine {name} is applying generation {generation} of its spec"))
}

/// The VM now (lock, power, node) from the shared list, read after this process's last write to
/// it (`None`: it does not exist).
pub async fn look(
    view: &ProxmoxView,
    vmid: u32,
    max_age: Duration,
) -> Result<Option<(VmNow, String)>, ViewError> {
    let look = view.look(vmid, Freshness::within(max_age), None).await?;
    Ok(look.vm.map(|v| {
        (
            VmNow {
                lock: v.config.lock.clone().filter(|l| !l.is_empty()),
                power: v.power,
            },
            v.node,
        )
    }))
}

/// What became of the recorded task (`None`: none recorded), and how long it has run.
pub async fn task(
    view: &ProxmoxView,
    task_ref: Option<&str>,
    vmid: u32,
    max_age: Duration,
) -> Result<Option<(TaskFacts, String, Duration)>, ViewError> {
    let look = view
        .look_at_task(
            task_ref,
            Some(vmid),
            Freshness::within(max_age),
            str::to_owned,
            None,
        )
        .await?;
    Ok(look.map(|l| (l.facts, l.task_type, l.age)))
}

/// Sets `desired` in `list` for `generation`.
pub fn set_condition(list: &mut Option<Vec<Condition>>, desired: &Desired, generation: Option<i64>) {
    conditions::set(
        list.get_or_insert_with(Vec::new),
        desired,
        generation,
        &crate::machine::now(),
    );
}

/// The current time in Unix seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// A Kubernetes time from Unix seconds.
pub fn time_of(secs: u64) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> {
    let secs = i64::try_from(secs).ok()?;
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .ok()
        .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::vm::ProxmoxVirtualMachineStatus;

    fn pvm(phase: VmPhase, generation: i64, applied: Option<i64>) -> ProxmoxVirtualMachine {
        let mut pvm = ProxmoxVirtualMachine::new("db", Default::default());
        pvm.metadata.generation = Some(generation);
        pvm.status = Some(ProxmoxVirtualMachineStatus {
            phase: Some(phase),
            provisioned: Some(true),
            applied_generation: applied,
            ..Default::default()
        });
        pvm
    }

    #[test]
    fn a_vm_applying_its_spec_is_changing_an_applied_or_failed_one_is_not() {
        assert_eq!(
            owner_busy(&pvm(VmPhase::Running, 3, Some(2))),
            None,
            "deleting a snapshot need not wait"
        );
        let busy = owner_changing(&pvm(VmPhase::Running, 3, Some(2)));
        assert_eq!(
            busy.as_deref(),
            Some("ProxmoxVirtualMachine db is applying generation 3 of its spec")
        );
        assert_eq!(owner_changing(&pvm(VmPhase::Running, 3, Some(3))), None);
        assert_eq!(owner_changing(&pvm(VmPhase::Error, 3, Some(2))), None);
        let starting = owner_changing(&pvm(VmPhase::Starting, 3, Some(3)));
        assert_eq!(starting.as_deref(), Some("ProxmoxVirtualMachine db is Starting"));
    }
}

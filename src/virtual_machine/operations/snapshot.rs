//! One pass of a ProxmoxVMSnapshot: taken once (its Proxmox name chosen from the object's name
//! and UID, with the VM's memory when asked and the VM runs), waiting while the VM is busy, and
//! — with `deletionPolicy: Delete` — deleted from Proxmox before the object goes.

use std::time::Duration;

use capmox_api::vm::{
    self as api, OperationPhase, ProxmoxVMSnapshot, ProxmoxVMSnapshotStatus, ProxmoxVirtualMachine,
};
use kube::ResourceExt;

use super::{
    Again, FAILED_REASON, IN_PROGRESS_REASON, INVALID_REASON, SOURCE_NOT_READY_REASON, SUCCEEDED_REASON,
    Target, VM_NOT_RUNNING_REASON, WAITING_FOR_VM_REASON, look, owner_busy, owner_changing, set_condition,
    target_of, task, time_of,
};
use crate::conditions::Desired;
use crate::proxmox::types::{CreateSnapshotRequest, Snapshot};
use crate::proxmox::view::{ProxmoxView, TaskFacts, ViewError};
use crate::vm::Settings;
use crate::vm::snapshot::{DeleteStep, SnapFacts, TakeStep, decide_delete, decide_take, proxmox_name};

/// The Proxmox name of `snap`'s snapshot: the recorded one, else the one it will take.
pub fn name_of(snap: &ProxmoxVMSnapshot) -> String {
    snap.status
        .as_ref()
        .and_then(|s| s.snapshot_name.clone())
        .unwrap_or_else(|| proxmox_name(&snap.name_any(), snap.metadata.uid.as_deref().unwrap_or_default()))
}

/// Whether the snapshot is over (succeeded or failed): nothing more is done until deletion.
pub fn finished(snap: &ProxmoxVMSnapshot) -> bool {
    matches!(
        snap.status.as_ref().and_then(|s| s.phase),
        Some(OperationPhase::Succeeded | OperationPhase::Failed)
    )
}

/// Whether the snapshot is being taken (its VM is busy with it).
pub fn in_progress(snap: &ProxmoxVMSnapshot) -> bool {
    snap.status.as_ref().and_then(|s| s.phase) == Some(OperationPhase::InProgress)
}

fn show(
    status: &mut ProxmoxVMSnapshotStatus,
    generation: Option<i64>,
    phase: OperationPhase,
    desired: &Desired,
) {
    status.phase = Some(phase);
    status.ready_to_use = Some(phase == OperationPhase::Succeeded);
    set_condition(&mut status.conditions, desired, generation);
}

/// Shows that the snapshot waits for its source (`reason`, `message`).
pub fn waiting(snap: &mut ProxmoxVMSnapshot, reason: &str, message: String) {
    let generation = snap.metadata.generation;
    let status = snap.status.get_or_insert_with(Default::default);
    let phase = status.phase.unwrap_or(OperationPhase::Pending);
    show(
        status,
        generation,
        phase,
        &Desired::falsy(api::READY_CONDITION, reason, message),
    );
}

/// Marks the snapshot failed for good.
pub fn fail(snap: &mut ProxmoxVMSnapshot, reason: &str, message: String) {
    let generation = snap.metadata.generation;
    let status = snap.status.get_or_insert_with(Default::default);
    status.task_ref = None;
    show(
        status,
        generation,
        OperationPhase::Failed,
        &Desired::falsy(api::READY_CONDITION, reason, message),
    );
}

/// Our snapshot in the VM's listing, and whether the VM exists there.
async fn listed(view: &ProxmoxView, t: &Target, name: &str) -> Result<(bool, Option<Snapshot>), ViewError> {
    let list = view
        .snapshots(&t.node, t.vmid)
        .await
        .map_err(ViewError::proxmox(format!(
            "listing the snapshots of VM {}",
            t.vmid
        )))?;
    Ok(match list {
        None => (false, None),
        Some((all, _)) => (true, all.into_iter().find(|s| s.name == name)),
    })
}

/// One pass of taking `snap` of `source`'s VM; `earlier` is another snapshot or restore of the
/// same VM that goes first, if any.
pub async fn take(
    view: &ProxmoxView,
    settings: &Settings,
    snap: &mut ProxmoxVMSnapshot,
    source: &ProxmoxVirtualMachine,
    earlier: Option<String>,
) -> Result<Again, ViewError> {
    let recorded = snap.status.as_ref().and_then(|s| s.vmid.zip(s.node.clone()));
    let target = match recorded {
        Some((vmid, node)) => u32::try_from(vmid).ok().map(|vmid| Target { vmid, node }),
        None => target_of(source),
    };
    let Some(mut t) = target else {
        waiting(
            snap,
            SOURCE_NOT_READY_REASON,
            format!("ProxmoxVirtualMachine {} has no VM yet", source.name_any()),
        );
        return Ok(Again::Watch);
    };
    let name = name_of(snap);
    let memory = snap.spec.include_memory == Some(true);
    let max_age = settings.observe_interval;
    let task_ref = snap.status.as_ref().and_then(|s| s.task_ref.clone());
    let looked = task(view, task_ref.as_deref(), t.vmid, max_age).await?;
    if let Some((TaskFacts::Running, kind, age)) = &looked {
        return Ok(Again::After(view.next_look(kind, *age)));
    }
    let vm = look(view, t.vmid, max_age).await?;
    if let Some((_, node)) = &vm {
        t.node.clone_from(node);
    }
    let (exists, entry) = if vm.is_some() {
        listed(view, &t, &name).await?
    } else {
        (false, None)
    };
    let busy = earlier.or_else(|| owner_changing(source));
    let facts = SnapFacts {
        vm: vm.as_ref().filter(|_| exists).map(|(v, _)| v),
        task: looked.as_ref().map(|(f, _, _)| f),
        listed: entry.as_ref(),
        owner_busy: busy,
    };
    let generation = snap.metadata.generation;
    let step = decide_take(&facts, memory);
    let status = snap.status.get_or_insert_with(Default::default);
    status.snapshot_name = Some(name.clone());
    status.vmid = Some(i64::from(t.vmid));
    status.node = Some(t.node.clone());
    let poll = settings.task_poll_max;
    Ok(match step {
        TakeStep::Wait(why) | TakeStep::Retry(why) => {
            status.task_ref = None;
            let phase = status.phase.unwrap_or(OperationPhase::Pending);
            show(
                status,
                generation,
                phase,
                &Desired::falsy(api::READY_CONDITION, WAITING_FOR_VM_REASON, why),
            );
            Again::After((settings.task_poll_initial * 4).min(poll))
        }
        TakeStep::PollTask => Again::After(settings.task_poll_initial),
        TakeStep::Take => issue(view, snap, &t, &name, memory).await?,
        TakeStep::Done => {
            taken(status, generation, &t, &name, entry);
            Again::Watch
        }
        TakeStep::Fail(message) => {
            let reason = if message.contains("includeMemory") {
                VM_NOT_RUNNING_REASON
            } else if looked.is_some() {
                FAILED_REASON
            } else {
                INVALID_REASON
            };
            fail(snap, reason, message);
            Again::Watch
        }
    })
}

/// Takes the snapshot: the task recorded, `InProgress`.
async fn issue(
    view: &ProxmoxView,
    snap: &mut ProxmoxVMSnapshot,
    t: &Target,
    name: &str,
    memory: bool,
) -> Result<Again, ViewError> {
    let req = CreateSnapshotRequest {
        snapname: name.to_owned(),
        description: snap.spec.description.clone(),
        vmstate: memory.then_some(true),
    };
    let upid = view
        .take_snapshot(&t.node, t.vmid, &req)
        .await
        .map_err(ViewError::proxmox(format!(
            "taking snapshot {name} of VM {}",
            t.vmid
        )))?;
    let generation = snap.metadata.generation;
    let status = snap.status.get_or_insert_with(Default::default);
    status.task_ref = Some(upid.as_str().to_owned());
    let message = format!("taking snapshot {name} of VM {}", t.vmid);
    show(
        status,
        generation,
        OperationPhase::InProgress,
        &Desired::falsy(api::READY_CONDITION, IN_PROGRESS_REASON, message),
    );
    Ok(Again::After(view.next_look("qmsnapshot", Duration::ZERO)))
}

/// Records the snapshot as taken, from its listing entry.
fn taken(
    status: &mut ProxmoxVMSnapshotStatus,
    generation: Option<i64>,
    t: &Target,
    name: &str,
    entry: Option<Snapshot>,
) {
    status.task_ref = None;
    if let Some(e) = entry {
        status.creation_time = e.snaptime.and_then(time_of);
        status.parent = e.parent;
        status.memory = Some(e.vmstate);
    }
    let message = format!("snapshot {name} of VM {} taken", t.vmid);
    show(
        status,
        generation,
        OperationPhase::Succeeded,
        &Desired::truthy(api::READY_CONDITION, SUCCEEDED_REASON, message),
    );
}

/// What a deletion pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The Proxmox snapshot is gone (or was never taken): the finalizer may go.
    Done,
    /// Not yet: look again.
    Again(Again),
    /// The deletion task failed (`message`); retried.
    Failed(String),
}

/// One pass of deleting `snap`'s Proxmox snapshot (its policy is `Delete`); `earlier` as for
/// [`take`], `source` when its ProxmoxVirtualMachine still exists.
pub async fn delete(
    view: &ProxmoxView,
    settings: &Settings,
    snap: &mut ProxmoxVMSnapshot,
    source: Option<&ProxmoxVirtualMachine>,
    earlier: Option<String>,
) -> Result<Deleted, ViewError> {
    let status = snap.status.clone().unwrap_or_default();
    let (Some(vmid), Some(node), Some(name)) = (
        status.vmid.and_then(|v| u32::try_from(v).ok()),
        status.node.clone(),
        status.snapshot_name.clone(),
    ) else {
        return Ok(Deleted::Done);
    };
    let max_age = settings.observe_interval;
    let looked = task(view, status.task_ref.as_deref(), vmid, max_age).await?;
    if let Some((TaskFacts::Running, kind, age)) = &looked {
        return Ok(Deleted::Again(Again::After(view.next_look(kind, *age))));
    }
    let vm = look(view, vmid, max_age).await?;
    let t = Target {
        vmid,
        node: vm.as_ref().map_or(node, |(_, n)| n.clone()),
    };
    let entry = match &vm {
        Some(_) => listed(view, &t, &name).await?.1,
        None => None,
    };
    let facts = SnapFacts {
        vm: vm.as_ref().map(|(v, _)| v),
        task: looked.as_ref().map(|(f, _, _)| f),
        listed: entry.as_ref(),
        owner_busy: earlier.or_else(|| source.and_then(owner_busy)),
    };
    let s = snap.status.get_or_insert_with(Default::default);
    Ok(match decide_delete(&facts) {
        DeleteStep::Done => Deleted::Done,
        DeleteStep::PollTask => Deleted::Again(Again::After(settings.task_poll_initial)),
        DeleteStep::Wait(_) => Deleted::Again(Again::After(
            (settings.task_poll_initial * 4).min(settings.task_poll_max),
        )),
        DeleteStep::Failed(message) => {
            s.task_ref = None;
            Deleted::Failed(message)
        }
        DeleteStep::Delete => {
            let upid = view
                .delete_snapshot(&t.node, vmid, &name)
                .await
                .map_err(ViewError::proxmox(format!(
                    "deleting snapshot {name} of VM {vmid}"
                )))?;
            s.task_ref = Some(upid.as_str().to_owned());
            s.node = Some(t.node);
            Deleted::Again(Again::After(view.next_look("qmdelsnapshot", Duration::ZERO)))
        }
    })
}

//! One pass of a ProxmoxVMRestore: the snapshot checked (it must be a ready snapshot of the
//! target), the decision to start the VM afterwards recorded with the time *before* the rollback
//! is issued (a rollback whose answer a crash lost is found again among the VM's tasks), the
//! rollback issued and waited for. The controller then marks the ProxmoxVirtualMachine restored
//! (it compares the VM with its spec instead of re-applying it) and the restore complete.

use std::time::Duration;

use capmox_api::vm::{
    self as api, OperationPhase, ProxmoxVMRestore, ProxmoxVMSnapshot, ProxmoxVirtualMachine,
};
use kube::ResourceExt;

use super::{
    Again, FAILED_REASON, IN_PROGRESS_REASON, INVALID_REASON, SOURCE_NOT_READY_REASON, WAITING_FOR_VM_REASON,
    look, owner_changing, set_condition, target_of, task, unix_now,
};
use crate::conditions::Desired;
use crate::proxmox::view::{Power, ProxmoxView, TaskFacts, ViewError};
use crate::vm::Settings;
use crate::vm::snapshot::{RollbackStep, SnapFacts, decide_rollback, start_after_rollback};

/// How much earlier than the recorded time a rollback task may have started and still be this
/// restore's (clocks of Proxmox and the manager differ a little).
const CLOCK_SLACK_SECS: i64 = 2;

/// Whether the restore is over (complete or failed).
pub fn finished(r: &ProxmoxVMRestore) -> bool {
    r.status
        .as_ref()
        .is_some_and(|s| s.complete == Some(true) || s.failed == Some(true))
}

/// Whether the rollback was decided on (and may run): its VM is busy with it.
pub fn in_progress(r: &ProxmoxVMRestore) -> bool {
    !finished(r) && r.status.as_ref().is_some_and(|s| s.issued_after.is_some())
}

/// Shows that the restore waits (`reason`, `message`).
pub fn waiting(r: &mut ProxmoxVMRestore, reason: &str, message: String) {
    let generation = r.metadata.generation;
    let status = r.status.get_or_insert_with(Default::default);
    status.complete = Some(false);
    set_condition(
        &mut status.conditions,
        &Desired::falsy(api::READY_CONDITION, reason, message),
        generation,
    );
}

/// Marks the restore failed for good.
pub fn fail(r: &mut ProxmoxVMRestore, reason: &str, message: String) {
    let generation = r.metadata.generation;
    let status = r.status.get_or_insert_with(Default::default);
    status.complete = Some(false);
    status.failed = Some(true);
    status.task_ref = None;
    set_condition(
        &mut status.conditions,
        &Desired::falsy(api::READY_CONDITION, reason, message),
        generation,
    );
}

/// Marks the restore complete (after the ProxmoxVirtualMachine was marked restored).
pub fn complete(r: &mut ProxmoxVMRestore) {
    let generation = r.metadata.generation;
    let status = r.status.get_or_insert_with(Default::default);
    let message = format!(
        "VM {} rolled back to snapshot {}",
        status.vmid.unwrap_or_default(),
        status.proxmox_snapshot.as_deref().unwrap_or_default()
    );
    status.complete = Some(true);
    status.task_ref = None;
    status.restore_time = Some(crate::machine::now());
    set_condition(
        &mut status.conditions,
        &Desired::truthy(api::READY_CONDITION, super::SUCCEEDED_REASON, message),
        generation,
    );
}

/// Why `snap` cannot be restored onto `target` (`Err((reason, message, final))`), else the
/// Proxmox snapshot name and whether it holds memory.
pub fn check_snapshot(
    r: &ProxmoxVMRestore,
    snap: &ProxmoxVMSnapshot,
    target: &ProxmoxVirtualMachine,
) -> Result<(String, bool), (&'static str, String, bool)> {
    let sname = snap.name_any();
    if snap.spec.source.name != r.spec.target.name {
        return Err((
            INVALID_REASON,
            format!(
                "ProxmoxVMSnapshot {sname} is a snapshot of ProxmoxVirtualMachine {}, not of {}",
                snap.spec.source.name, r.spec.target.name
            ),
            true,
        ));
    }
    let s = snap.status.clone().unwrap_or_default();
    match s.phase {
        Some(OperationPhase::Succeeded) if s.ready_to_use == Some(true) => {}
        Some(OperationPhase::Failed) => {
            return Err((INVALID_REASON, format!("ProxmoxVMSnapshot {sname} failed"), true));
        }
        _ => {
            return Err((
                SOURCE_NOT_READY_REASON,
                format!("ProxmoxVMSnapshot {sname} is not ready yet"),
                false,
            ));
        }
    }
    let here = target_of(target).map(|t| i64::from(t.vmid));
    if here.is_some() && s.vmid != here {
        return Err((
            INVALID_REASON,
            format!(
                "ProxmoxVMSnapshot {sname} was taken of VM {}, and the ProxmoxVirtualMachine's VM is now {}",
                s.vmid.unwrap_or_default(),
                here.unwrap_or_default()
            ),
            true,
        ));
    }
    Ok((s.snapshot_name.unwrap_or_default(), s.memory == Some(true)))
}

/// The recorded rollback task; after a crash that lost its answer, the VM's rollback newer than
/// the one before this restore's, started since (give or take the clocks' difference).
async fn recorded_task(
    view: &ProxmoxView,
    status: &capmox_api::vm::ProxmoxVMRestoreStatus,
    t: &super::Target,
) -> Result<Option<String>, ViewError> {
    let (None, Some(at)) = (&status.task_ref, status.issued_after) else {
        return Ok(status.task_ref.clone());
    };
    let since = at - CLOCK_SLACK_SECS;
    let previous = status.previous_rollback.clone().unwrap_or_default();
    Ok(newest_rollback(view, t)
        .await?
        .filter(|e| {
            e.upid != previous
                && e.starttime
                    .is_some_and(|s| i64::try_from(s).unwrap_or(0) >= since)
        })
        .map(|e| e.upid))
}

/// The Proxmox snapshot `name` of the VM as listed.
async fn listed(
    view: &ProxmoxView,
    t: &super::Target,
    name: &str,
) -> Result<Option<crate::proxmox::types::Snapshot>, ViewError> {
    Ok(view
        .snapshots(&t.node, t.vmid)
        .await
        .map_err(ViewError::proxmox(format!(
            "listing the snapshots of VM {}",
            t.vmid
        )))?
        .and_then(|(all, _)| all.into_iter().find(|s| s.name == name)))
}

/// The VM's newest rollback task.
async fn newest_rollback(
    view: &ProxmoxView,
    t: &super::Target,
) -> Result<Option<crate::proxmox::endpoints::operate::TaskEntry>, ViewError> {
    view.newest_task(&t.node, t.vmid, "qmrollback")
        .await
        .map_err(ViewError::proxmox(format!("listing the tasks of VM {}", t.vmid)))
}

/// One pass of rolling `target`'s VM back to the Proxmox snapshot `proxmox_snapshot` (with
/// memory when `memory`). `Ok(None)`: the rollback is done (the controller marks the
/// ProxmoxVirtualMachine restored, then the restore complete).
pub async fn rollback(
    view: &ProxmoxView,
    settings: &Settings,
    r: &mut ProxmoxVMRestore,
    target: &ProxmoxVirtualMachine,
    (proxmox_snapshot, memory): (&str, bool),
    earlier: Option<String>,
) -> Result<Option<Again>, ViewError> {
    let Some(mut t) = target_of(target) else {
        waiting(
            r,
            SOURCE_NOT_READY_REASON,
            format!("ProxmoxVirtualMachine {} has no VM", target.name_any()),
        );
        return Ok(Some(Again::Watch));
    };
    let max_age = settings.observe_interval;
    let status = r.status.clone().unwrap_or_default();
    let task_ref = recorded_task(view, &status, &t).await?;
    let looked = task(view, task_ref.as_deref(), t.vmid, max_age).await?;
    if let Some((TaskFacts::Failed { exitstatus, .. }, _, _)) = &looked
        && exitstatus.contains("is locked")
    {
        // Proxmox found the VM locked before it did anything: decided and issued again.
        let s = r.status.get_or_insert_with(Default::default);
        s.task_ref = None;
        s.issued_after = None;
        return Ok(Some(Again::After(settings.task_poll_initial)));
    }
    if let Some((TaskFacts::Running, kind, age)) = &looked {
        r.status.get_or_insert_with(Default::default).task_ref = task_ref;
        return Ok(Some(Again::After(view.next_look(kind, *age))));
    }
    let vm = look(view, t.vmid, max_age).await?;
    if let Some((_, node)) = &vm {
        t.node.clone_from(node);
    }
    let entry = match &vm {
        Some(_) => listed(view, &t, proxmox_snapshot).await?,
        None => None,
    };
    let facts = SnapFacts {
        vm: vm.as_ref().map(|(v, _)| v),
        task: looked.as_ref().map(|(f, _, _)| f),
        listed: entry.as_ref(),
        owner_busy: if status.issued_after.is_some() {
            None
        } else {
            earlier.or_else(|| owner_changing(target))
        },
    };
    let generation = r.metadata.generation;
    let step = decide_rollback(&facts);
    let s = r.status.get_or_insert_with(Default::default);
    s.vmid = Some(i64::from(t.vmid));
    s.node = Some(t.node.clone());
    s.proxmox_snapshot = Some(proxmox_snapshot.to_owned());
    Ok(match step {
        RollbackStep::Done => None,
        RollbackStep::PollTask => Some(Again::After(settings.task_poll_initial)),
        RollbackStep::Wait(why) => {
            s.complete = Some(false);
            set_condition(
                &mut s.conditions,
                &Desired::falsy(api::READY_CONDITION, WAITING_FOR_VM_REASON, why),
                generation,
            );
            Some(Again::After(
                (settings.task_poll_initial * 4).min(settings.task_poll_max),
            ))
        }
        RollbackStep::Fail(message) => {
            let reason = if looked.is_some() {
                FAILED_REASON
            } else {
                INVALID_REASON
            };
            fail(r, reason, message);
            Some(Again::Watch)
        }
        RollbackStep::Rollback if s.issued_after.is_none() => {
            // Decided and recorded first (with the VM's newest rollback so far); issued by the
            // next pass.
            let previous = newest_rollback(view, &t)
                .await?
                .map(|e| e.upid)
                .unwrap_or_default();
            let s = r.status.get_or_insert_with(Default::default);
            s.previous_rollback = Some(previous);
            let was_running = vm.as_ref().is_some_and(|(v, _)| v.power != Power::Stopped);
            let run = crate::virtual_machine::spec::operation(target).run;
            s.start = Some(start_after_rollback(run, memory, was_running));
            s.issued_after = Some(unix_now());
            s.complete = Some(false);
            set_condition(
                &mut s.conditions,
                &Desired::falsy(api::READY_CONDITION, IN_PROGRESS_REASON, "rolling the VM back"),
                generation,
            );
            Some(Again::Now)
        }
        RollbackStep::Rollback => Some(issue(view, r, &t, proxmox_snapshot).await?),
    })
}

/// Issues the rollback decided on: the task recorded.
async fn issue(
    view: &ProxmoxView,
    r: &mut ProxmoxVMRestore,
    t: &super::Target,
    name: &str,
) -> Result<Again, ViewError> {
    let generation = r.metadata.generation;
    let s = r.status.get_or_insert_with(Default::default);
    let upid = view
        .rollback(&t.node, t.vmid, name, s.start == Some(true))
        .await
        .map_err(ViewError::proxmox(format!(
            "rolling VM {} back to {name}",
            t.vmid
        )))?;
    s.task_ref = Some(upid.as_str().to_owned());
    let message = format!("rolling VM {} back to snapshot {name}", t.vmid);
    set_condition(
        &mut s.conditions,
        &Desired::falsy(api::READY_CONDITION, IN_PROGRESS_REASON, message),
        generation,
    );
    Ok(Again::After(view.next_look("qmrollback", Duration::ZERO)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj<K: serde::de::DeserializeOwned>(
        kind: &str,
        name: &str,
        spec: serde_json::Value,
        status: serde_json::Value,
    ) -> K {
        serde_json::from_value(json!({
            "apiVersion": api::API_VERSION, "kind": kind,
            "metadata": {"name": name, "namespace": "apps"}, "spec": spec, "status": status
        }))
        .unwrap()
    }

    #[test]
    fn only_a_ready_snapshot_of_the_same_vm_is_restored() {
        let r: ProxmoxVMRestore = obj(
            "ProxmoxVMRestore",
            "r",
            json!({"target": {"name": "db"}, "snapshotName": "s"}),
            json!({}),
        );
        let db: ProxmoxVirtualMachine = obj(
            api::KIND,
            "db",
            json!({"templateID": 100}),
            json!({"vmid": 120, "node": "pve1"}),
        );
        let ready = json!({"phase": "Succeeded", "readyToUse": true, "vmid": 120, "snapshotName": "s-1234", "memory": true});
        let snap: ProxmoxVMSnapshot = obj(
            "ProxmoxVMSnapshot",
            "s",
            json!({"source": {"name": "db"}}),
            ready.clone(),
        );
        assert_eq!(check_snapshot(&r, &snap, &db), Ok(("s-1234".to_owned(), true)));
        let other: ProxmoxVMSnapshot = obj(
            "ProxmoxVMSnapshot",
            "s",
            json!({"source": {"name": "web"}}),
            ready,
        );
        let (reason, message, terminal) = check_snapshot(&r, &other, &db).unwrap_err();
        assert_eq!((reason, terminal), (INVALID_REASON, true));
        assert!(
            message.contains("is a snapshot of ProxmoxVirtualMachine web, not of db"),
            "{message}"
        );
        let pending: ProxmoxVMSnapshot = obj(
            "ProxmoxVMSnapshot",
            "s",
            json!({"source": {"name": "db"}}),
            json!({"phase": "InProgress"}),
        );
        assert_eq!(
            check_snapshot(&r, &pending, &db).unwrap_err().0,
            SOURCE_NOT_READY_REASON
        );
        let recreated: ProxmoxVirtualMachine = obj(
            api::KIND,
            "db",
            json!({"templateID": 100}),
            json!({"vmid": 121, "node": "pve1"}),
        );
        let snap: ProxmoxVMSnapshot = obj(
            "ProxmoxVMSnapshot",
            "s",
            json!({"source": {"name": "db"}}),
            json!({"phase": "Succeeded", "readyToUse": true, "vmid": 120, "snapshotName": "s-1234"}),
        );
        assert!(
            check_snapshot(&r, &snap, &recreated)
                .unwrap_err()
                .1
                .contains("is now 121")
        );
    }
}

//! A ProxmoxVirtualMachine's status as the lifecycle's [`VmRecord`] (`status.vmid`, `node`,
//! `taskRef`, `retryAfter`, `bootstrapDataProvided`, `haResource`, `provisioned`, `failed`, and
//! the operation's `restartedAt`, `powerRequest`, `powerState`, `stoppedByGuest`,
//! `pendingChanges`, …), and a pass's record written back.

use std::time::SystemTime;

use capmox_api::vm::{ProxmoxVirtualMachine, ProxmoxVirtualMachineStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::machine::record::{ha_resource, ha_status};
use crate::vm::VmRecord;
use crate::vm::decide::Power;
use crate::vm::operate::OpRecord;

fn to_system(t: &Time) -> SystemTime {
    SystemTime::from(t.0)
}

fn to_time(t: SystemTime) -> Time {
    Time(k8s_openapi::jiff::Timestamp::try_from(t).unwrap_or(k8s_openapi::jiff::Timestamp::MAX))
}

/// The spelling of a power state in `status.powerState`.
pub fn power_name(p: Power) -> &'static str {
    match p {
        Power::Running => "running",
        Power::Paused => "paused",
        Power::Stopped => "stopped",
    }
}

fn power_of(s: &str) -> Option<Power> {
    match s {
        "running" => Some(Power::Running),
        "paused" => Some(Power::Paused),
        "stopped" => Some(Power::Stopped),
        _ => None,
    }
}

/// The record `pvm` persisted.
pub fn record_of(pvm: &ProxmoxVirtualMachine) -> VmRecord {
    let st = pvm.status.clone().unwrap_or_default();
    VmRecord {
        vmid: st.vmid.and_then(|v| u32::try_from(v).ok()).filter(|v| *v >= 100),
        node: st.node,
        task: st.task_ref.filter(|t| !t.is_empty()),
        retry_after: st.retry_after.as_ref().map(to_system),
        bootstrap_delivered: st.bootstrap_data_provided == Some(true),
        ha: st.ha_resource.as_ref().map(ha_resource),
        provisioned: st.provisioned == Some(true),
        failed_terminally: st.failed == Some(true),
        // No SMBIOS UUID is kept in a ProxmoxVirtualMachine's status (yet): a VM lost after a
        // restore without status is re-created, not reported lost.
        identity: None,
        operation: OpRecord {
            restarted: st.restarted_at,
            power_request: st.power_request,
            state: st.power_state.as_deref().and_then(power_of),
            stays_stopped: st.stopped_by_guest == Some(true),
            restarting: st.restarting == Some(true),
            pending: st.pending_changes.unwrap_or_default(),
            pending_unread: st.pending_unread == Some(true),
            applied: st.applied_generation,
            guest_read: st.guest_read == Some(true),
        },
    }
}

/// Writes `after` into `status` (every field: the record is small).
pub fn apply(status: &mut ProxmoxVirtualMachineStatus, after: &VmRecord) {
    let some = |b: bool| b.then_some(true);
    status.vmid = after.vmid.map(i64::from);
    status.node.clone_from(&after.node);
    status.task_ref.clone_from(&after.task);
    status.retry_after = after.retry_after.map(to_time);
    status.bootstrap_data_provided = some(after.bootstrap_delivered);
    status.ha_resource = after.ha.as_ref().map(ha_status);
    status.provisioned = some(after.provisioned);
    status.failed = some(after.failed_terminally);
    let op = &after.operation;
    status.restarted_at.clone_from(&op.restarted);
    status.power_request.clone_from(&op.power_request);
    status.power_state = op.state.map(|p| power_name(p).to_owned());
    status.stopped_by_guest = some(op.stays_stopped);
    status.restarting = some(op.restarting);
    status.pending_changes = (!op.pending.is_empty()).then(|| op.pending.clone());
    status.pending_unread = some(op.pending_unread);
    status.applied_generation = op.applied;
    status.guest_read = some(op.guest_read);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_through_the_status() {
        let record = VmRecord {
            vmid: Some(301),
            node: Some("pve2".into()),
            task: Some("UPID:pve2:00000001:00000002:65000000:qmstart:301:root@pam:".into()),
            bootstrap_delivered: true,
            provisioned: true,
            operation: OpRecord {
                restarted: Some("t".into()),
                state: Some(Power::Paused),
                pending: vec!["cores".into()],
                applied: Some(4),
                guest_read: true,
                ..OpRecord::default()
            },
            ..VmRecord::default()
        };
        let mut status = ProxmoxVirtualMachineStatus::default();
        apply(&mut status, &record);
        let pvm = ProxmoxVirtualMachine {
            metadata: Default::default(),
            spec: Default::default(),
            status: Some(status),
        };
        assert_eq!(record_of(&pvm), record);
    }
}

//! What a pass of a ProxmoxVirtualMachine shows: its phase (KubeVirt's `printableStatus` with
//! Viti's names), the conditions `Ready`, `VMCreated`, `ResourcesAllocated`, `NetworkConfigured`
//! and `RestartRequired`, the guest's addresses and OS, the console URL, and the event of the step.

use capmox_api::vm::{self as api, ProxmoxVirtualMachine, ProxmoxVirtualMachineStatus, RunStrategy, VmPhase};

use super::reasons;
use crate::conditions::{self, Desired};
use crate::proxmox::Upid;
use crate::vm::decide::{Power, Step};
use crate::vm::operate::{GuestFacts, OpStep};
use crate::vm::{Report, VmRecord};

/// What the pass saw and did, as the status shows it.
#[derive(Debug, Clone, Default)]
pub struct Shown<'a> {
    /// The step (`None`: no lifecycle step ran, e.g. an adoption was recorded).
    pub step: Option<&'a Step>,
    /// The task recorded before the pass (what a poll waited for).
    pub task_before: Option<&'a str>,
    /// The VM's power state (`None`: not looked at).
    pub power: Option<Power>,
    /// What the step reported.
    pub report: Option<&'a Report>,
    /// The guest facts read.
    pub guest: Option<&'a GuestFacts>,
    /// The error of the step (shown in `Ready`).
    pub error: Option<String>,
}

fn task_type(upid: Option<&str>) -> Option<String> {
    upid.and_then(|u| Upid::parse(u).ok()).map(|u| u.task_type)
}

/// The phase after a pass.
pub fn phase(record: &VmRecord, shown: &Shown<'_>, previous: Option<VmPhase>) -> VmPhase {
    let failure = shown.report.and_then(|r| r.failure.as_ref());
    if record.failed_terminally || failure.is_some_and(|f| f.retry_after.is_none()) {
        return VmPhase::Error;
    }
    let starting = |t: &str| matches!(t, "qmstart" | "qmresume" | "qmreboot" | "hastart");
    let stopping = |t: &str| matches!(t, "qmshutdown" | "qmstop" | "hastop");
    if let Some(Step::Operate(op)) = shown.step {
        match op {
            OpStep::Start(_)
            | OpStep::Resume
            | OpStep::Reboot(_)
            | OpStep::StopForRestart(_)
            | OpStep::ClassifyStop => return VmPhase::Starting,
            OpStep::Shutdown(_) | OpStep::Stop(_) => return VmPhase::Stopping,
            _ => {}
        }
    }
    if let Some(t) = task_type(shown.task_before).or_else(|| task_type(record.task.as_deref())) {
        if starting(&t) {
            return VmPhase::Starting;
        }
        if stopping(&t) {
            return VmPhase::Stopping;
        }
    }
    if !record.provisioned {
        return match (record.vmid, shown.step) {
            (None, _) => VmPhase::Pending,
            (_, Some(Step::PowerOn | Step::CheckGuest)) => VmPhase::Starting,
            _ => VmPhase::Creating,
        };
    }
    match shown.power {
        Some(Power::Running) => VmPhase::Running,
        Some(Power::Paused) => VmPhase::Paused,
        Some(Power::Stopped) => VmPhase::Stopped,
        None => previous.unwrap_or(VmPhase::Pending),
    }
}

/// The Proxmox web console of VM `vmid` on `node` behind the API at `base` (`https://host:8006`).
pub fn console_url(base: &url::Url, vmid: u32, node: &str) -> String {
    let host = base.host_str().unwrap_or("localhost");
    let port = base.port_or_known_default().unwrap_or(8006);
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    format!("https://{host}:{port}/?console=kvm&novnc=1&vmid={vmid}&node={node}")
}

fn set(status: &mut ProxmoxVirtualMachineStatus, generation: Option<i64>, d: &Desired) {
    let list = status.conditions.get_or_insert_with(Vec::new);
    conditions::set(list, d, generation, &crate::machine::now());
}

/// Whether the phase is what the spec asks for.
fn settled(pvm: &ProxmoxVirtualMachine, phase: VmPhase) -> bool {
    let paused = pvm.spec.paused == Some(true);
    match (pvm.spec.run_strategy(), phase) {
        (RunStrategy::Halted, VmPhase::Stopped) => true,
        (RunStrategy::Manual | RunStrategy::RerunOnFailure, VmPhase::Stopped) => true,
        (_, VmPhase::Running) => !paused,
        (_, VmPhase::Paused) => paused,
        _ => false,
    }
}

/// Writes the NICs' pool addresses into `pvm`'s status; while they are `waiting`,
/// `NetworkConfigured` says so (`WaitingForIPAddress`).
pub fn show_pool_addresses(
    pvm: &mut ProxmoxVirtualMachine,
    pools: &super::addresses::PoolAddresses,
    waiting: bool,
) {
    let generation = pvm.metadata.generation;
    let status = pvm.status.get_or_insert_with(Default::default);
    if let Some(list) = pools.status() {
        status.pool_addresses = Some(list);
    }
    if waiting {
        let claims: Vec<&str> = pools.resolution.pending.iter().map(String::as_str).collect();
        set(
            status,
            generation,
            &Desired::falsy(
                api::NETWORK_CONFIGURED_CONDITION,
                reasons::WAITING_FOR_IP_ADDRESS_REASON,
                format!("waiting for the IPAddresses of the claims {}", claims.join(", ")),
            ),
        );
    }
}

/// Writes the phase, conditions and guest facts of a pass into `pvm`'s status (the record is
/// already written).
pub fn show(pvm: &mut ProxmoxVirtualMachine, record: &VmRecord, shown: &Shown<'_>, console: Option<String>) {
    let generation = pvm.metadata.generation;
    let agent = pvm.spec.agent_enabled();
    let adopted = pvm.spec.adopts();
    let previous = pvm.status.as_ref().and_then(|s| s.phase);
    let phase = phase(record, shown, previous);
    let ready = settled(pvm, phase);
    let status = pvm.status.get_or_insert_with(Default::default);
    status.phase = Some(phase);
    status.console_url = console.or(status.console_url.take());
    status.observed_generation = generation;
    if let Some(g) = shown.guest {
        status.ip_addresses = Some(g.addresses.iter().map(ToString::to_string).collect());
        if g.os.is_some() {
            status.guest_os.clone_from(&g.os);
        }
    }
    if !record.operation.guest_read && phase != VmPhase::Running && phase != VmPhase::Paused {
        status.ip_addresses = None;
    }
    let failure = shown.report.and_then(|r| r.failure.as_ref());
    let message = shown.report.map(|r| r.message.clone()).unwrap_or_default();
    let created = record.provisioned || record.bootstrap_delivered;
    set(
        status,
        generation,
        &if created {
            Desired::truthy(
                api::VM_CREATED_CONDITION,
                if adopted {
                    reasons::ADOPTED_REASON
                } else {
                    reasons::CREATED_REASON
                },
                "",
            )
        } else {
            match failure {
                Some(f) => Desired::falsy(
                    api::VM_CREATED_CONDITION,
                    crate::machine::record::reason(f.reason),
                    f.message.clone(),
                ),
                None => Desired::falsy(
                    api::VM_CREATED_CONDITION,
                    reasons::CREATING_REASON,
                    message.clone(),
                ),
            }
        },
    );
    let applied = record.operation.applied == generation && generation.is_some();
    set(
        status,
        generation,
        &if applied || (record.provisioned && !adopted && record.operation.applied.is_none()) {
            Desired::truthy(api::RESOURCES_ALLOCATED_CONDITION, reasons::ALLOCATED_REASON, "")
        } else {
            Desired::falsy(
                api::RESOURCES_ALLOCATED_CONDITION,
                reasons::RECONFIGURING_REASON,
                "",
            )
        },
    );
    let has_ips = status.ip_addresses.as_ref().is_some_and(|i| !i.is_empty());
    set(
        status,
        generation,
        &match (agent, has_ips) {
            (_, true) => Desired::truthy(
                api::NETWORK_CONFIGURED_CONDITION,
                reasons::ADDRESSES_REPORTED_REASON,
                "",
            ),
            (false, false) => Desired::truthy(
                api::NETWORK_CONFIGURED_CONDITION,
                reasons::AGENT_DISABLED_REASON,
                "the guest agent is off: addresses are not reported",
            ),
            (true, false) => Desired::falsy(
                api::NETWORK_CONFIGURED_CONDITION,
                reasons::WAITING_FOR_GUEST_AGENT_REASON,
                "waiting for the guest agent to report the addresses",
            ),
        },
    );
    set(
        status,
        generation,
        &if record.operation.pending.is_empty() {
            Desired::falsy(
                api::RESTART_REQUIRED_CONDITION,
                reasons::NOTHING_PENDING_REASON,
                "",
            )
        } else {
            Desired::truthy(
                api::RESTART_REQUIRED_CONDITION,
                reasons::CHANGES_PENDING_REASON,
                format!(
                    "Proxmox applies these changes at the next restart: {}",
                    record.operation.pending.join(", ")
                ),
            )
        },
    );
    let ready = match (&shown.error, failure) {
        (Some(e), _) => Desired::falsy(api::READY_CONDITION, reasons::ERROR_REASON, e.clone()),
        (None, Some(f)) => Desired::falsy(
            api::READY_CONDITION,
            crate::machine::record::reason(f.reason),
            f.message.clone(),
        ),
        (None, None) if ready => Desired::truthy(api::READY_CONDITION, phase.as_str(), ""),
        (None, None) => Desired::falsy(api::READY_CONDITION, phase.as_str(), message),
    };
    set(status, generation, &ready);
}

/// The event of a step: `(warning, reason, message)` (`None`: the step is not worth one).
pub fn event(step: &Step, vmid: Option<u32>) -> Option<(bool, &'static str, String)> {
    let id = vmid.map(|v| v.to_string()).unwrap_or_default();
    Some(match step {
        Step::CloneVm => (false, "Cloning", format!("cloning VM {id}")),
        Step::DeliverBootstrapData => (
            false,
            reasons::BOOTSTRAP_DELIVERED_REASON,
            format!("NoCloud ISO attached to VM {id}"),
        ),
        Step::PowerOn => (false, reasons::STARTING_REASON, format!("starting VM {id}")),
        Step::Operate(op) => match op {
            OpStep::Created => (
                false,
                reasons::CREATED_REASON,
                format!("VM {id} created (stopped, as its run strategy says)"),
            ),
            OpStep::Start(_) => (false, reasons::STARTING_REASON, format!("starting VM {id}")),
            OpStep::Shutdown(_) => (
                false,
                reasons::SHUTTING_DOWN_REASON,
                format!("shutting VM {id} down"),
            ),
            OpStep::Stop(_) => (false, reasons::STOPPING_REASON, format!("stopping VM {id}")),
            OpStep::ClassifyStop => (
                false,
                reasons::STOPPED_UNEXPECTEDLY_REASON,
                format!("VM {id} stopped"),
            ),
            OpStep::Pause => (false, reasons::PAUSING_REASON, format!("pausing VM {id}")),
            OpStep::Resume => (false, reasons::RESUMING_REASON, format!("resuming VM {id}")),
            OpStep::Reboot(_) => (false, reasons::RESTARTING_REASON, format!("rebooting VM {id}")),
            OpStep::StopForRestart(_) => (
                false,
                reasons::RESTARTING_REASON,
                format!("restarting VM {id} (stop, then start)"),
            ),
            OpStep::Reconfigure(u) => (
                false,
                reasons::RECONFIGURING_REASON,
                format!(
                    "writing {} to VM {id}",
                    u.params()
                        .keys()
                        .filter(|k| *k != "digest")
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            OpStep::GrowDisk { disk, size_gib } => (
                false,
                reasons::DISK_GROWING_REASON,
                format!("growing {disk} of VM {id} to {size_gib} GiB"),
            ),
            _ => return None,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_steps_tasks_and_power() {
        let provisioned = VmRecord {
            vmid: Some(200),
            provisioned: true,
            ..VmRecord::default()
        };
        let shown = |power| Shown {
            power,
            ..Shown::default()
        };
        assert_eq!(
            phase(&provisioned, &shown(Some(Power::Running)), None),
            VmPhase::Running
        );
        assert_eq!(
            phase(&provisioned, &shown(Some(Power::Paused)), None),
            VmPhase::Paused
        );
        assert_eq!(
            phase(&provisioned, &shown(None), Some(VmPhase::Stopped)),
            VmPhase::Stopped
        );
        let step = Step::Operate(OpStep::Shutdown(None));
        let s = Shown {
            step: Some(&step),
            ..shown(Some(Power::Running))
        };
        assert_eq!(phase(&provisioned, &s, None), VmPhase::Stopping);
        let polling = VmRecord {
            task: Some("UPID:pve1:00000001:00000002:65000000:qmreboot:200:root@pam:".into()),
            ..provisioned.clone()
        };
        assert_eq!(
            phase(&polling, &shown(Some(Power::Running)), None),
            VmPhase::Starting
        );
        assert_eq!(phase(&VmRecord::default(), &shown(None), None), VmPhase::Pending);
        let url = url::Url::parse("https://pve.example:8006/api2/json").unwrap();
        assert_eq!(
            console_url(&url, 101, "pve1"),
            "https://pve.example:8006/?console=kvm&novnc=1&vmid=101&node=pve1"
        );
    }
}

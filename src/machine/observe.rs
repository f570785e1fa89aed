//! Reads what the state machine decides on: the recorded task, the VM behind the recorded VMID
//! (found on its recorded node or anywhere in the Proxmox cluster), and the IPAM claims.

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;

use super::error::MachineError;
use super::state::{IpFacts, Power, TaskFacts, VmFacts, VmPresence};
use crate::bootstrap::{CLOUD_INIT_TAG, iso_file_name};
use crate::ipam;
use crate::proxmox::types::VmConfig;
use crate::proxmox::{Client, Upid};

/// Smallest VMID Proxmox hands out; lower recorded values (capmox writes `-1`) mean "none".
const MIN_VMID: i64 = 100;

/// The VMID recorded in `spec.virtualMachineID`, if it is a real one.
pub fn recorded_vmid(pm: &ProxmoxMachine) -> Option<u32> {
    pm.spec
        .virtual_machine_id
        .filter(|v| *v >= MIN_VMID)
        .and_then(|v| u32::try_from(v).ok())
}

/// Looks up `status.taskRef`. A malformed or unknown UPID reads as [`TaskFacts::Unknown`].
pub async fn task_facts(proxmox: &Client, task_ref: Option<&str>) -> Result<Option<TaskFacts>, MachineError> {
    let Some(raw) = task_ref.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let Ok(upid) = Upid::parse(raw) else {
        return Ok(Some(TaskFacts::Unknown));
    };
    match proxmox.task_status(&upid).await {
        Ok(s) if !s.is_finished() => Ok(Some(TaskFacts::Running)),
        Ok(s) if s.is_success() => Ok(Some(TaskFacts::Succeeded)),
        Ok(s) => {
            let mut exitstatus = s.exitstatus.clone().unwrap_or_else(|| "unknown error".to_owned());
            // A failed start names its cause only in the task log (an unknown bridge, ...).
            if let Some(detail) = proxmox.task_failure_detail(&upid, &exitstatus).await {
                exitstatus = format!("{exitstatus} ({detail})");
            }
            Ok(Some(TaskFacts::Failed {
                kind: upid.task_type.clone(),
                exitstatus,
            }))
        }
        Err(e) if e.is_not_found() => Ok(Some(TaskFacts::Unknown)),
        Err(e) => Err(MachineError::proxmox(format!("reading task {raw}"))(e)),
    }
}

async fn read_vm(proxmox: &Client, node: &str, vmid: u32) -> Result<Option<VmFacts>, MachineError> {
    let status = match proxmox.vm_status(node, vmid).await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(MachineError::proxmox(format!("reading VM {vmid} on {node}"))(e)),
    };
    let config = match proxmox.vm_config(node, vmid).await {
        Ok(c) => c,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => {
            return Err(MachineError::proxmox(format!(
                "reading config of VM {vmid} on {node}"
            ))(e));
        }
    };
    let power = if status.is_paused() {
        Power::Paused
    } else if status.is_running() {
        Power::Running
    } else {
        Power::Stopped
    };
    Ok(Some(VmFacts {
        vmid,
        node: node.to_owned(),
        power,
        uptime_secs: if power == Power::Stopped {
            0
        } else {
            status.uptime.unwrap_or(0)
        },
        ha_managed: status.ha.managed,
        config,
    }))
}

fn classify(name: &str, vm: VmFacts) -> VmPresence {
    // A clone still running has a temporary config without a name (its answer may never have
    // been recorded: a crash or a lost response). It is not someone else's VM yet: both flows
    // wait while a VM is locked and classify it again by name once the clone is done.
    let cloning = vm.config.lock.as_deref() == Some("clone") && vm.config.name.is_none();
    if !cloning && (vm.config.template || vm.config.name.as_deref() != Some(name)) {
        VmPresence::Foreign {
            name: vm.config.name.clone(),
        }
    } else {
        VmPresence::Ours(Box::new(vm))
    }
}

/// Whether `node` is certainly not a node of the Proxmox cluster (`false` when the node list
/// cannot be read).
pub async fn node_unknown(proxmox: &Client, node: &str) -> bool {
    proxmox
        .nodes()
        .await
        .is_ok_and(|nodes| !nodes.iter().any(|n| n.node == node))
}

/// The VM behind the recorded VMID: looked up on `node_hint` first, then located through
/// `GET /cluster/resources` (the VM may have been migrated).
pub async fn vm_presence(
    proxmox: &Client,
    name: &str,
    vmid: Option<u32>,
    node_hint: Option<&str>,
) -> Result<VmPresence, MachineError> {
    let Some(vmid) = vmid else {
        return Ok(VmPresence::NotReserved);
    };
    if let Some(node) = node_hint.filter(|n| !n.is_empty()) {
        match read_vm(proxmox, node, vmid).await {
            Ok(Some(vm)) => return Ok(classify(name, vm)),
            Ok(None) => {}
            // A node the Proxmox cluster does not have (a typo in `sourceNode`: PVE answers 500
            // `hostname lookup '<node>' failed`) holds no VM: look elsewhere, or deletion never ends.
            // Any other failure (the node is down, a network error) is not evidence of absence.
            Err(e) => {
                if !node_unknown(proxmox, node).await {
                    return Err(e);
                }
            }
        }
    }
    let located = proxmox
        .locate_vm(vmid)
        .await
        .map_err(MachineError::proxmox(format!("locating VM {vmid}")))?;
    match located {
        Some(node) if Some(node.as_str()) != node_hint => Ok(read_vm(proxmox, &node, vmid)
            .await?
            .map_or(VmPresence::Missing, |vm| classify(name, vm))),
        _ => Ok(VmPresence::Missing),
    }
}

/// Whether the VM has our bootstrap ISO attached or still carries the tag that says one may exist.
pub fn bootstrap_iso_attached(vmid: u32, config: &VmConfig) -> bool {
    let file = iso_file_name(u64::from(vmid));
    config.ide0.as_deref().is_some_and(|v| v.contains(&file))
        || config.tags.iter().any(|t| t.eq_ignore_ascii_case(CLOUD_INIT_TAG))
}

/// The state of the machine's IPAM claims, with the resolution it was derived from.
pub async fn ip_facts(
    kube: &kube::Client,
    version: ipam::IpamApiVersion,
    pm: &ProxmoxMachine,
    pc: &ProxmoxCluster,
) -> Result<(IpFacts, ipam::Resolution), MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let desired = ipam::desired_claims(pm, pc)?;
    let (claims, addresses) = ipam::load(kube, version, &ns, &desired).await?;
    let resolution = ipam::resolve(&desired, &claims, &addresses);
    let facts = if !resolution.missing.is_empty() {
        IpFacts::ClaimsMissing
    } else if let Some(message) = resolution.conflict_message() {
        IpFacts::Conflict(message)
    } else if !resolution.is_complete() {
        IpFacts::Pending
    } else {
        IpFacts::Resolved(resolution.resolved.clone())
    };
    Ok((facts, resolution))
}

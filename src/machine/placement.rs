//! Reserving a machine's place before the clone: the template to clone, the node to clone to and a
//! free VMID, recorded in `spec.virtualMachineID`, `status.proxmoxNode` and the ProxmoxCluster's
//! `status.nodeLocations` before any Proxmox write happens.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use capmox_api::consts::CLUSTER_NAME_LABEL;
use capmox_api::v1alpha2::{self as api, ProxmoxMachine};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

use super::error::MachineError;
use super::locations;
use super::scheduling::{self, NodeInfo, SchedulingRequest};
use super::steps::{Next, StepEnv, StepResult};
use super::template::{TemplateRef, TemplateSource};
use super::vmid::{VmidChoice, plan_vmid};
use crate::proxmox::types::{ClusterResource, ResourceType};

/// How many VMIDs one reservation probes before giving up for this pass.
const VMID_PROBES: usize = 64;

fn failed(message: impl Into<String>, env: &StepEnv<'_>) -> StepResult {
    StepResult::failed(
        api::VM_PROVISION_FAILED_REASON,
        message,
        Some(env.settings.retry_delay),
    )
}

/// The template to clone (`Err(message)` when none or several match).
pub async fn template(
    env: &StepEnv<'_>,
    pm: &ProxmoxMachine,
) -> Result<Result<TemplateRef, String>, MachineError> {
    let source = match TemplateSource::from_spec(&pm.spec) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let resources = match &source {
        TemplateSource::Fixed(_) => Vec::new(),
        TemplateSource::Selector { .. } => env
            .proxmox
            .cluster_resources(Some(ResourceType::Vm))
            .await
            .map_err(MachineError::proxmox("listing VM templates"))?,
    };
    Ok(source.select(&resources).map_err(|e| e.to_string()))
}

/// VMIDs recorded on the other ProxmoxMachines of the same cluster. Read untyped: a sibling our
/// types cannot read (see `controllers::decoded`) must not stop this machine, and its VMID still
/// counts.
async fn recorded_vmids(env: &StepEnv<'_>, pm: &ProxmoxMachine) -> Result<Vec<i64>, MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let Some(cluster) = pm.labels().get(CLUSTER_NAME_LABEL) else {
        return Ok(Vec::new());
    };
    let ar = ApiResource::erase::<ProxmoxMachine>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(env.kube.clone(), &ns, &ar);
    let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}"));
    let list = api.list(&lp).await.map_err(MachineError::kube(format!(
        "listing ProxmoxMachines of cluster {ns}/{cluster}"
    )))?;
    Ok(list
        .items
        .iter()
        .filter(|m| m.uid() != pm.uid())
        .filter_map(|m| {
            m.data
                .pointer("/spec/virtualMachineID")
                .and_then(serde_json::Value::as_i64)
        })
        .collect())
}

/// How long a VMID handed out by this process stays off-limits to other machines: until then the
/// reservation is visible in the ProxmoxMachine (and usually as a VM) anyway.
const IN_PROCESS_RESERVATION: Duration = Duration::from_secs(120);

/// VMIDs this process reserved recently, per Proxmox API endpoint: `(endpoint, vmid) → (machine, when)`.
/// Concurrent reservations read the same `nextid` and the same ProxmoxMachine list before either
/// is persisted; this keeps them apart (capmox lets both clone into one VMID and one fails).
static RESERVED: LazyLock<Mutex<Reservations>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// `(endpoint, vmid) → (machine, reserved at)`.
type Reservations = HashMap<(String, u32), (String, Instant)>;

fn reserved() -> std::sync::MutexGuard<'static, Reservations> {
    RESERVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `vmid` was recently reserved by another machine of this process.
fn recently_reserved(endpoint: &str, vmid: u32, machine: &str) -> bool {
    let mut m = reserved();
    m.retain(|_, (_, at)| at.elapsed() < IN_PROCESS_RESERVATION);
    m.get(&(endpoint.to_owned(), vmid))
        .is_some_and(|(owner, _)| owner != machine)
}

/// Claims `vmid` for `machine` in this process; `false` when another machine got it first.
fn reserve_in_process(endpoint: &str, vmid: u32, machine: &str) -> bool {
    let mut m = reserved();
    let key = (endpoint.to_owned(), vmid);
    match m.get(&key) {
        Some((owner, at)) if owner != machine && at.elapsed() < IN_PROCESS_RESERVATION => false,
        _ => {
            m.insert(key, (machine.to_owned(), Instant::now()));
            true
        }
    }
}

async fn free_vmid(
    env: &StepEnv<'_>,
    pm: &ProxmoxMachine,
    resources: &[ClusterResource],
) -> Result<Result<u32, String>, MachineError> {
    let recorded = recorded_vmids(env, pm).await?;
    let taken: BTreeSet<u32> = recorded.iter().filter_map(|v| u32::try_from(*v).ok()).collect();
    let vms: Vec<ClusterResource> = resources.iter().filter(|r| r.vmid.is_some()).cloned().collect();
    let candidates: Box<dyn Iterator<Item = u32> + Send> =
        match plan_vmid(pm.spec.vm_id_range.as_ref(), recorded, &vms) {
            Err(e) => return Ok(Err(e.to_string())),
            Ok(VmidChoice::Candidates(c)) => Box::new(c),
            Ok(VmidChoice::ProxmoxNext) => {
                let first = env
                    .proxmox
                    .next_id()
                    .await
                    .map_err(MachineError::proxmox("asking Proxmox for the next free VMID"))?;
                Box::new((first..).filter(move |v| !taken.contains(v)))
            }
        };
    let endpoint = env.proxmox.base_url().to_string();
    let me = format!("{}/{}", pm.namespace().unwrap_or_default(), pm.name_any());
    for vmid in candidates
        .filter(|v| !recently_reserved(&endpoint, *v, &me))
        .take(VMID_PROBES)
    {
        let free = env
            .proxmox
            .is_vmid_free(vmid)
            .await
            .map_err(MachineError::proxmox(format!("checking VMID {vmid}")))?;
        if free && reserve_in_process(&endpoint, vmid, &me) {
            return Ok(Ok(vmid));
        }
    }
    Ok(Err(
        super::vmid::VmidError::NoFreeVmid { start: 0, end: 0 }.to_string()
    ))
}

/// Chooses template, node and VMID and records them on `pm` and in the ProxmoxCluster.
pub async fn reserve(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let resources = env
        .proxmox
        .cluster_resources(None)
        .await
        .map_err(MachineError::proxmox("listing cluster resources"))?;
    let source = match TemplateSource::from_spec(&pm.spec) {
        Ok(s) => s,
        Err(e) => return Ok(failed(e.to_string(), env)),
    };
    let template = match source.select(&resources) {
        Ok(t) => t,
        Err(e) => return Ok(failed(e.to_string(), env)),
    };
    let allowed = scheduling::effective_allowed_nodes(
        pm.spec.allowed_nodes.as_deref(),
        env.pc.spec.allowed_nodes.as_deref(),
    );
    let scheduled = allowed.is_some();
    let node = match allowed {
        None => template.node.clone(),
        Some(allowed) => {
            let nodes = NodeInfo::from_cluster_resources(&resources);
            let guests: Vec<ClusterResource> = resources
                .iter()
                .filter(|r| r.resource_type == "qemu" || r.resource_type == "lxc")
                .cloned()
                .collect();
            let locations = env.pc.status.as_ref().and_then(|s| s.node_locations.as_ref());
            let name = pm.name_any();
            let request = SchedulingRequest {
                allowed_nodes: allowed,
                memory_adjustment: env
                    .pc
                    .spec
                    .scheduler_hints
                    .as_ref()
                    .and_then(|h| h.memory_adjustment),
                requested_memory: scheduling::requested_memory_bytes(pm.spec.memory_mib),
                nodes: &nodes,
                guests: &guests,
                placements: scheduling::placements_for(locations, env.machine.control_plane),
                machine_name: Some(&name),
            };
            match scheduling::schedule(&request) {
                Ok(p) => p.node,
                Err(e) => return Ok(failed(e.to_string(), env)),
            }
        }
    };
    let vmid = match free_vmid(env, pm, &resources).await? {
        Ok(v) => v,
        Err(message) => return Ok(failed(message, env)),
    };
    let (name, zone, cp) = (
        pm.name_any(),
        pm.spec.network.zone.clone(),
        env.machine.control_plane,
    );
    if scheduled {
        // The node was chosen from this pass's node locations: record it only if they are still
        // current, otherwise schedule again (concurrent reservations would pick the same node).
        if !locations::record_if_unchanged(env.kube, env.pc, &name, &node, zone, cp).await? {
            return Ok(StepResult::next(Next::Now)
                .with_message("node locations changed while scheduling; scheduling again"));
        }
    } else {
        locations::record(env.kube, env.pc, &name, &node, zone, cp).await?;
    }
    tracing::info!(machine = %name, vmid, node = %node, template = template.vmid, "reserved VMID and node");
    pm.spec.virtual_machine_id = Some(i64::from(vmid));
    let status = pm.status.get_or_insert_with(Default::default);
    status.proxmox_node = Some(node.clone());
    status.vm_status = Some("pending".to_owned());
    Ok(StepResult::next(Next::Now).with_message(format!(
        "cloning template {} on {} to VM {vmid} on {node}",
        template.vmid, template.node
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_process_reservations_keep_concurrent_machines_apart() {
        let ep = "https://unit-test.invalid:8006/api2/json";
        assert!(reserve_in_process(ep, 4242, "ns/a"));
        assert!(
            reserve_in_process(ep, 4242, "ns/a"),
            "the same machine may re-reserve"
        );
        assert!(!reserve_in_process(ep, 4242, "ns/b"));
        assert!(recently_reserved(ep, 4242, "ns/b"));
        assert!(!recently_reserved(ep, 4242, "ns/a"));
        assert!(reserve_in_process(
            "https://other.invalid/api2/json",
            4242,
            "ns/b"
        ));
    }
}

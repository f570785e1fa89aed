//! Reserving a machine's place before the clone: the template to clone, the node to clone to and a
//! free VMID, recorded in `spec.virtualMachineID`, `status.proxmoxNode` and the ProxmoxCluster's
//! `status.nodeLocations` before any Proxmox write happens.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use capmox_api::consts::CLUSTER_NAME_LABEL;
use capmox_api::v1alpha2::{self as api, ProxmoxMachine};
use kube::ResourceExt;

use super::error::MachineError;
use super::locations;
use super::scheduling::{self, NodeInfo, SchedulingRequest};
use super::steps::{Next, StepEnv, StepResult};
use super::template::{TemplateRef, TemplateSource};
use super::vmid::{VmidChoice, plan_vmid};
use crate::proxmox::types::ClusterResource;

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
        TemplateSource::Selector { .. } => env.view.snapshot(env.fresh).await?.1.resources.clone(),
    };
    Ok(source.select(&resources).map_err(|e| e.to_string()))
}

/// VMIDs recorded on the other ProxmoxMachines of the same cluster (from the watch cache).
fn recorded_vmids(env: &StepEnv<'_>, pm: &ProxmoxMachine) -> Vec<i64> {
    let ns = pm.namespace().unwrap_or_default();
    let Some(cluster) = pm.labels().get(CLUSTER_NAME_LABEL) else {
        return Vec::new();
    };
    env.caches
        .recorded_vmids(&ns, cluster, pm.metadata.uid.as_deref())
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
    let recorded = recorded_vmids(env, pm);
    let mut taken: BTreeSet<u32> = recorded.iter().filter_map(|v| u32::try_from(*v).ok()).collect();
    taken.extend(resources.iter().filter_map(|r| r.vmid));
    let endpoint = env.view.client().base_url().to_string();
    let me = format!("{}/{}", pm.namespace().unwrap_or_default(), pm.name_any());
    let candidates = match plan_vmid(pm.spec.vm_id_range.as_ref(), recorded, resources) {
        Err(e) => return Ok(Err(e.to_string())),
        Ok(VmidChoice::Candidates(c)) => c,
        Ok(VmidChoice::ProxmoxNext) => {
            let first = env
                .view
                .client()
                .next_id()
                .await
                .map_err(MachineError::proxmox("asking Proxmox for the next free VMID"))?;
            // Proxmox's answer is free right now; a VMID after it that is neither listed nor
            // recorded nor handed out here is free as far as anyone can tell (the clone refuses
            // a taken one, and the machine then reserves again).
            let vmid = (first..)
                .filter(|v| *v == first || !taken.contains(v))
                .filter(|v| !recently_reserved(&endpoint, *v, &me))
                .take(VMID_PROBES)
                .find(|v| reserve_in_process(&endpoint, *v, &me));
            return Ok(
                vmid.ok_or_else(|| super::vmid::VmidError::NoFreeVmid { start: 0, end: 0 }.to_string())
            );
        }
    };
    for vmid in candidates
        .filter(|v| !recently_reserved(&endpoint, *v, &me))
        .take(VMID_PROBES)
    {
        let free = env
            .view
            .client()
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

/// The allowed nodes narrowed to those that have every PCI resource mapping of
/// `spec.pciDevices` (unchanged for a machine without devices; no restriction becomes "every
/// online node"). Reads `/cluster/mapping/pci` once per reservation of such a machine.
async fn pci_nodes(
    env: &StepEnv<'_>,
    pm: &ProxmoxMachine,
    allowed: Option<Vec<String>>,
    resources: &[ClusterResource],
) -> Result<Result<Option<Vec<String>>, String>, MachineError> {
    let devices = pm.spec.pci_devices.as_deref().unwrap_or_default();
    if devices.is_empty() {
        return Ok(Ok(allowed));
    }
    let candidates = allowed.unwrap_or_else(|| {
        NodeInfo::from_cluster_resources(resources)
            .into_iter()
            .filter(|n| n.online)
            .map(|n| n.name)
            .collect()
    });
    let mappings: Vec<(String, BTreeSet<String>)> = env
        .view
        .client()
        .pci_mappings()
        .await
        .map_err(MachineError::proxmox("reading the PCI resource mappings"))?
        .into_iter()
        .map(|m| {
            let nodes = super::devices::mapping_nodes(&m.map);
            (m.id, nodes)
        })
        .collect();
    Ok(super::devices::nodes_with_mappings(&candidates, devices, &mappings).map(Some))
}

/// Chooses template, node and VMID and records them on `pm` and in the ProxmoxCluster. The node
/// is chosen and recorded in one step serialised with every other reservation of the cluster,
/// so concurrent reservations spread over the nodes.
pub async fn reserve(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let (_, snap) = env.view.snapshot(env.fresh).await?;
    let resources = &snap.resources;
    let source = match TemplateSource::from_spec(&pm.spec) {
        Ok(s) => s,
        Err(e) => return Ok(failed(e.to_string(), env)),
    };
    let template = match source.select(resources) {
        Ok(t) => t,
        Err(e) => return Ok(failed(e.to_string(), env)),
    };
    let allowed = scheduling::effective_allowed_nodes(
        pm.spec.allowed_nodes.as_deref(),
        env.pc.spec.allowed_nodes.as_deref(),
    );
    // A zone with `nodes` (e.g. the failure domain CAPI chose) narrows the choice to them.
    let zone_name = pm.spec.network.zone_or_default();
    let allowed = match super::zone::restrict(
        allowed,
        zone_name,
        super::zone::zone_nodes(&env.pc.spec, zone_name),
    ) {
        Ok(a) => a,
        Err(message) => return Ok(failed(message, env)),
    };
    // PCI passthrough: only nodes with an entry in every mapping (read once, only for such machines).
    let allowed = match pci_nodes(env, pm, allowed, resources).await? {
        Ok(a) => a,
        Err(message) => {
            return Ok(StepResult::failed(
                api::PCI_MAPPING_UNAVAILABLE_REASON,
                message,
                Some(env.settings.retry_delay),
            ));
        }
    };
    let (name, zone, cp) = (
        pm.name_any(),
        pm.spec.network.zone.clone(),
        env.machine.control_plane,
    );
    let node = match allowed {
        None => {
            let node = template.node.clone();
            env.locations
                .record(env.kube, env.pc, &name, &node, zone, cp)
                .await?;
            node
        }
        Some(allowed) => {
            let nodes = NodeInfo::from_cluster_resources(resources);
            let memory_adjustment = env
                .pc
                .spec
                .scheduler_hints
                .as_ref()
                .and_then(|h| h.memory_adjustment);
            let requested_memory = scheduling::requested_memory_bytes(pm.spec.memory_mib);
            let scheduled = env
                .locations
                .update(env.kube, env.pc, |locations| {
                    let request = SchedulingRequest {
                        allowed_nodes: &allowed,
                        memory_adjustment,
                        requested_memory,
                        nodes: &nodes,
                        // The whole list: only its guests count (no copy of a thousand entries).
                        guests: resources,
                        placements: scheduling::placements_for(Some(&*locations), cp),
                        machine_name: Some(&name),
                    };
                    let node = scheduling::schedule(&request).map(|p| p.node)?;
                    locations::place(locations, &name, &node, zone.as_ref(), cp);
                    Ok::<_, scheduling::SchedulingError>(node)
                })
                .await?;
            match scheduled {
                Ok(node) => node,
                Err(e) => return Ok(failed(e.to_string(), env)),
            }
        }
    };
    let vmid = match free_vmid(env, pm, resources).await? {
        Ok(v) => v,
        Err(message) => return Ok(failed(message, env)),
    };
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

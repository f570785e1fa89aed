//! Reserving a VM's place before the clone — the template to clone, the node to clone to (chosen
//! and recorded by the owner, serialised with its group's other placements) and a free VMID,
//! recorded before any Proxmox write happens — and the clone itself.

use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use super::{Env, Next, StepResult, record_task};
use crate::proxmox::ErrorClass;
use crate::proxmox::types::{CloneRequest, ClusterResource};
use crate::vm::adapter::Adapter;
use crate::vm::decide::Reason;
use crate::vm::error::VmError;
use crate::vm::scheduling::{self, NodeInfo, SchedulingRequest};
use crate::vm::spec::VmRecord;
use crate::vm::template::TemplateRef;
use crate::vm::vmid::{VmidChoice, VmidError, plan_vmid};

/// How many VMIDs one reservation probes before giving up for this pass.
const VMID_PROBES: usize = 64;

fn failed<A: Adapter>(message: impl Into<String>, env: &Env<'_, A>) -> StepResult {
    StepResult::failed(Reason::VmFailed, message, Some(env.settings.retry_delay))
}

/// The template to clone (`Err(message)` when none or several match).
pub async fn template<A: Adapter>(env: &Env<'_, A>) -> Result<Result<TemplateRef, String>, VmError> {
    let source = match &env.spec.source {
        Ok(s) => s,
        Err(e) => return Ok(Err(e.clone())),
    };
    let resources = match source {
        crate::vm::template::TemplateSource::Fixed(_) => Vec::new(),
        crate::vm::template::TemplateSource::Selector { .. } => {
            env.view.snapshot(env.fresh).await?.1.resources.clone()
        }
    };
    Ok(source.select(&resources).map_err(|e| e.to_string()))
}

/// How long a VMID handed out by this process stays off-limits to other owners: until then the
/// reservation is visible in the owner's record (and usually as a VM) anyway.
const IN_PROCESS_RESERVATION: Duration = Duration::from_secs(120);

/// VMIDs this process reserved recently, per Proxmox API endpoint: `(endpoint, vmid) → (owner, when)`.
/// Concurrent reservations read the same `nextid` and the same ProxmoxMachine list before either
/// is persisted; this keeps them apart (capmox lets both clone into one VMID and one fails).
static RESERVED: LazyLock<Mutex<Reservations>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// `(endpoint, vmid) → (owner, reserved at)`.
type Reservations = HashMap<(String, u32), (String, Instant)>;

fn reserved() -> std::sync::MutexGuard<'static, Reservations> {
    RESERVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `vmid` was recently reserved by another owner of this process.
fn recently_reserved(endpoint: &str, vmid: u32, machine: &str) -> bool {
    let mut m = reserved();
    m.retain(|_, (_, at)| at.elapsed() < IN_PROCESS_RESERVATION);
    m.get(&(endpoint.to_owned(), vmid))
        .is_some_and(|(owner, _)| owner != machine)
}

/// Claims `vmid` for `machine` in this process; `false` when another owner got it first.
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

/// How long an answer of `/cluster/nextid` serves further reservations of this process.
const NEXT_ID_REUSE: Duration = Duration::from_secs(2);

/// The last `/cluster/nextid` answer per Proxmox API endpoint, and when it came.
static NEXT_ID: LazyLock<Mutex<HashMap<String, (u32, Instant)>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn recent_next_id(endpoint: &str) -> Option<u32> {
    NEXT_ID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(endpoint)
        .filter(|(_, at)| at.elapsed() < NEXT_ID_REUSE)
        .map(|(v, _)| *v)
}

fn remember_next_id(endpoint: &str, vmid: u32) {
    NEXT_ID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(endpoint.to_owned(), (vmid, Instant::now()));
}

async fn free_vmid<A: Adapter>(
    env: &Env<'_, A>,
    resources: &[ClusterResource],
) -> Result<Result<u32, String>, VmError> {
    let recorded = env.adapter.taken_vmids();
    let mut taken: BTreeSet<u32> = recorded.iter().filter_map(|v| u32::try_from(*v).ok()).collect();
    taken.extend(resources.iter().filter_map(|r| r.vmid));
    let endpoint = env.view.client().base_url().to_string();
    let me = format!("{}/{}", env.owner.namespace, env.owner.name);
    let candidates = match plan_vmid(env.spec.placement.vmid_range.as_ref(), recorded, resources) {
        Err(e) => return Ok(Err(e.to_string())),
        Ok(VmidChoice::Candidates(c)) => c,
        Ok(VmidChoice::ProxmoxNext) => {
            let (first, asked) = match recent_next_id(&endpoint) {
                Some(first) => (first, false),
                None => {
                    let first = env
                        .view
                        .client()
                        .next_id()
                        .await
                        .map_err(VmError::proxmox("asking Proxmox for the next free VMID"))?;
                    remember_next_id(&endpoint, first);
                    (first, true)
                }
            };
            // Proxmox's answer is free right now; a VMID after it that is neither listed nor
            // recorded nor handed out here is free as far as anyone can tell (the clone refuses
            // a taken one, and the machine then reserves again). An answer a moment old serves
            // the reservations that come with it: one `nextid` for a batch of machines.
            let vmid = (first..)
                .filter(|v| (asked && *v == first) || !taken.contains(v))
                .filter(|v| !recently_reserved(&endpoint, *v, &me))
                .take(VMID_PROBES)
                .find(|v| reserve_in_process(&endpoint, *v, &me));
            return Ok(vmid.ok_or_else(|| VmidError::NoFreeVmid { start: 0, end: 0 }.to_string()));
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
            .map_err(VmError::proxmox(format!("checking VMID {vmid}")))?;
        if free && reserve_in_process(&endpoint, vmid, &me) {
            return Ok(Ok(vmid));
        }
    }
    Ok(Err(VmidError::NoFreeVmid { start: 0, end: 0 }.to_string()))
}

/// The allowed nodes narrowed to those that have every PCI resource mapping of the VM's PCI
/// devices (unchanged for a VM without devices; no restriction becomes "every online node").
/// Reads `/cluster/mapping/pci` once per reservation of such a VM.
async fn pci_nodes<A: Adapter>(
    env: &Env<'_, A>,
    allowed: Option<Vec<String>>,
    resources: &[ClusterResource],
) -> Result<Result<Option<Vec<String>>, String>, VmError> {
    let devices = &env.spec.desired.pci_devices;
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
        .map_err(VmError::proxmox("reading the PCI resource mappings"))?
        .into_iter()
        .map(|m| {
            let nodes = crate::vm::devices::mapping_nodes(&m.map);
            (m.id, nodes)
        })
        .collect();
    Ok(crate::vm::devices::nodes_with_mappings(&candidates, devices, &mappings).map(Some))
}

/// Chooses template, node and VMID and records VMID and node in `record` (the owner records the
/// node among its group's placements). The node is chosen and recorded in one step serialised
/// with every other placement of the group, so concurrent reservations spread over the nodes.
pub async fn reserve<A: Adapter>(env: &Env<'_, A>, record: &mut VmRecord) -> Result<StepResult, A::Error> {
    let (_, snap) = env.view.snapshot(env.fresh).await?;
    let resources = &snap.resources;
    let source = match &env.spec.source {
        Ok(s) => s,
        Err(e) => return Ok(failed(e.clone(), env)),
    };
    let template = match source.select(resources) {
        Ok(t) => t,
        Err(e) => return Ok(failed(e.to_string(), env)),
    };
    let placement = &env.spec.placement;
    let allowed = match &placement.allowed_nodes {
        Ok(a) => a.clone(),
        Err(message) => return Ok(failed(message.clone(), env)),
    };
    // PCI passthrough: only nodes with an entry in every mapping (read once, only for such VMs).
    let allowed = match pci_nodes(env, allowed, resources).await? {
        Ok(a) => a,
        Err(message) => {
            return Ok(StepResult::failed(
                Reason::PciMappingUnavailable,
                message,
                Some(env.settings.retry_delay),
            ));
        }
    };
    let name = env.owner.name.as_str();
    let scheduled = match allowed {
        None => {
            let node = template.node.clone();
            env.adapter.place(move |_| Ok(node)).await?
        }
        Some(allowed) => {
            let nodes = NodeInfo::from_cluster_resources(resources);
            env.adapter
                .place(|placements| {
                    let request = SchedulingRequest {
                        allowed_nodes: &allowed,
                        memory_adjustment: placement.memory_adjustment,
                        requested_memory: placement.requested_memory,
                        nodes: &nodes,
                        // The whole list: only its guests count (no copy of a thousand entries).
                        guests: resources,
                        placements,
                        owner_name: Some(name),
                    };
                    scheduling::schedule(&request)
                        .map(|p| p.node)
                        .map_err(|e| e.to_string())
                })
                .await?
        }
    };
    let node = match scheduled {
        Ok(node) => node,
        Err(message) => return Ok(failed(message, env)),
    };
    let vmid = match free_vmid(env, resources).await? {
        Ok(v) => v,
        Err(message) => return Ok(failed(message, env)),
    };
    tracing::info!(owner = %env.owner, vmid, node = %node, template = template.vmid, "reserved VMID and node");
    record.vmid = Some(vmid);
    record.node = Some(node.clone());
    Ok(StepResult::next(Next::Now).with_message(format!(
        "cloning template {} on {} to VM {vmid} on {node}",
        template.vmid, template.node
    )))
}

/// Clones the template into the recorded VMID on the recorded node.
pub async fn clone<A: Adapter>(env: &Env<'_, A>, record: &mut VmRecord) -> Result<StepResult, A::Error> {
    let (Some(vmid), Some(target)) = (record.vmid, record.node.clone()) else {
        // The VMID was recorded but the node was not (an owner may persist them in two writes; a
        // crash can fall between them). No VM exists at that VMID, so reserving again is safe.
        return reserve(env, record).await;
    };
    let template = match template(env).await? {
        Ok(t) => t,
        Err(message) => {
            return Ok(StepResult::failed(
                Reason::VmFailed,
                message,
                Some(env.settings.retry_delay),
            ));
        }
    };
    let spec = &env.spec;
    let mut req = CloneRequest::new(vmid);
    req.name = Some(spec.name.clone());
    req.description = spec.desired.description.clone();
    req.full = spec.clone.full.then_some(true);
    req.storage = spec.clone.storage.clone();
    req.format = spec.clone.format.clone();
    req.pool = spec.clone.pool.clone();
    req.snapname = spec.clone.snap_name.clone();
    req.target = (target != template.node).then(|| target.clone());
    match env.view.clone_vm(&template.node, template.vmid, &req).await {
        Ok(upid) => Ok(StepResult::next(record_task(record, env, vmid, &upid, None))),
        // Someone (or an interrupted earlier pass) created the VMID meanwhile: look again.
        Err(e) if e.class() == ErrorClass::AlreadyExists => existing(env, &target, vmid).await,
        Err(e) if e.is_retryable() => {
            Err(VmError::proxmox(format!("cloning template {}", template.vmid))(e).into())
        }
        Err(e) => {
            let mut message = format!("cloning template {} on {}: {e}", template.vmid, template.node);
            if e.class() == ErrorClass::Auth && !e.message().contains(", ") {
                // PVE names the privilege for some of the clone's checks only.
                message.push_str(&format!(
                    " (a clone needs VM.Clone on /vms/{}, VM.Allocate on /vms/{vmid} or its pool, Datastore.AllocateSpace on the target storage and SDN.Use on the VM's bridges)",
                    template.vmid
                ));
            }
            Ok(StepResult::failed(
                Reason::CloneFailed,
                message,
                Some(env.settings.retry_delay),
            ))
        }
    }
}

/// The clone found VMID `vmid` taken although the shared list shows no VM there: the VM is read
/// directly on `node` — ours (the list hides it: a token without `VM.Audit` sees no VMs in
/// `/cluster/resources`), someone else's, or unreadable (the error names the privilege).
async fn existing<A: Adapter>(env: &Env<'_, A>, node: &str, vmid: u32) -> Result<StepResult, A::Error> {
    match env.view.read_config_of(node, vmid, &env.spec.name).await {
        // Someone else's (or gone again): the next pass reads a newer list.
        Ok(None) => Ok(StepResult::next(Next::Now)),
        Ok(Some(_)) => Ok(StepResult::failed(
            Reason::VmFailed,
            format!(
                "VM {vmid} exists on {node} but /cluster/resources does not show it: the Proxmox token may lack VM.Audit on it"
            ),
            Some(env.settings.retry_delay),
        )),
        Err(e) => Err(VmError::from(e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nextid_answer_serves_the_reservations_that_come_with_it() {
        let ep = "https://nextid-unit-test.invalid:8006/api2/json";
        assert_eq!(recent_next_id(ep), None);
        remember_next_id(ep, 123);
        assert_eq!(recent_next_id(ep), Some(123));
        assert_eq!(recent_next_id("https://other-nextid.invalid/api2/json"), None);
    }

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

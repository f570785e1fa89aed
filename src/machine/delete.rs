//! One deletion pass: observe → [`decide_delete`] → execute one step. Stop and destroy are tasks
//! recorded in `status.taskRef` and awaited before anything else happens, so a pass never issues a
//! second stop or destroy while one is running; a VM that no longer exists means that part is done.

use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams};
use kube::core::GroupVersionKind;

use super::MachineSettings;
use super::error::MachineError;
use super::observe::{self, recorded_vmid};
use super::state::{DeleteFacts, DeleteStep, TaskFacts, VmPresence, decide_delete};
use super::steps::{Next, record_task};
use super::{iso, locations};
use crate::ipam::IpamApiVersion;
use crate::proxmox::Client;
use crate::proxmox::types::{DeleteVmOptions, StopRequest};
use capmox_api::capi::IPAM_GROUP;

/// What a deletion pass did.
#[derive(Debug)]
pub struct DeleteOutcome {
    /// The step that ran.
    pub step: DeleteStep,
    /// When to look again (ignored when `finished`).
    pub next: Next,
    /// Everything is gone: the controller may drop the finalizer.
    pub finished: bool,
}

/// The IPAddressClaim API in the served `version`.
fn claims_api(kube: &kube::Client, version: IpamApiVersion, ns: &str) -> Api<DynamicObject> {
    let version = match version {
        IpamApiVersion::V1beta2 => "v1beta2",
        IpamApiVersion::V1beta1 => "v1beta1",
    };
    let gvk = GroupVersionKind::gvk(IPAM_GROUP, version, "IPAddressClaim");
    Api::namespaced_with(
        kube.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "ipaddressclaims"),
    )
}

/// Names of the IPAddressClaims controlled by the machine that are not being deleted yet.
async fn live_claims(
    kube: &kube::Client,
    version: IpamApiVersion,
    pm: &ProxmoxMachine,
) -> Result<Vec<String>, MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let uid = pm.uid().unwrap_or_default();
    let list = claims_api(kube, version, &ns)
        .list_metadata(&ListParams::default())
        .await
        .map_err(MachineError::kube(format!("listing IPAddressClaims in {ns}")))?;
    Ok(list
        .items
        .into_iter()
        .filter(|c| {
            c.metadata.deletion_timestamp.is_none()
                && c.owner_references()
                    .iter()
                    .any(|r| r.uid == uid && r.kind == "ProxmoxMachine")
        })
        .map(|c| c.name_any())
        .collect())
}

async fn release_claims(
    kube: &kube::Client,
    version: IpamApiVersion,
    pm: &ProxmoxMachine,
    names: &[String],
) -> Result<(), MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let api = claims_api(kube, version, &ns);
    for name in names {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(MachineError::kube(format!("deleting IPAddressClaim {ns}/{name}"))(e)),
        }
    }
    Ok(())
}

fn set_condition(pm: &mut ProxmoxMachine, reason: &str, message: String) {
    super::set_failure_condition(pm, reason, message);
}

/// Runs one deletion pass on `pm`. `proxmox` is `None` when no credentials are available; then
/// only a machine that never got a VMID can finish.
pub async fn delete(
    kube: &kube::Client,
    ipam_version: IpamApiVersion,
    proxmox: Option<&Client>,
    pc: Option<&ProxmoxCluster>,
    settings: &MachineSettings,
    pm: &mut ProxmoxMachine,
) -> Result<DeleteOutcome, MachineError> {
    let name = pm.name_any();
    let vmid = recorded_vmid(pm);
    let st = pm.status.clone().unwrap_or_default();
    let (task, vm, bootstrap_iso) = match (proxmox, vmid) {
        (Some(px), Some(id)) => {
            let task = observe::task_facts(px, st.task_ref.as_deref()).await?;
            if task == Some(TaskFacts::Succeeded) {
                pm.status.get_or_insert_with(Default::default).task_ref = None;
            }
            let vm = observe::vm_presence(px, &name, Some(id), st.proxmox_node.as_deref()).await?;
            let node = match &vm {
                VmPresence::Ours(v) => Some(v.node.clone()),
                _ => st.proxmox_node.clone(),
            };
            let iso = match (&vm, node) {
                (VmPresence::Ours(_), _) | (_, None) => None,
                (_, Some(node)) => match iso::find(px, &node, id).await {
                    Ok(found) => found,
                    // A node the cluster does not have (a `sourceNode` typo) holds no ISO.
                    Err(_) if observe::node_unknown(px, &node).await => None,
                    Err(e) => return Err(e),
                },
            };
            (task, vm, iso)
        }
        (None, Some(id)) => {
            set_condition(
                pm,
                api::DELETION_FAILED_REASON,
                format!("no Proxmox credentials to delete VM {id}; waiting for them"),
            );
            return Ok(DeleteOutcome {
                step: DeleteStep::PollTask,
                next: Next::After(settings.retry_delay),
                finished: false,
            });
        }
        (_, None) => (None, VmPresence::NotReserved, None),
    };
    let claims = live_claims(kube, ipam_version, pm).await?;
    let retry_after = st.retry_after.as_ref().and_then(super::until);
    if retry_after.is_none() && st.retry_after.is_some() {
        pm.status.get_or_insert_with(Default::default).retry_after = None;
    }
    let facts = DeleteFacts {
        task,
        vm: vm.clone(),
        bootstrap_iso,
        claims_left: !claims.is_empty(),
        retry_after,
    };
    let step = decide_delete(&facts);
    tracing::debug!(machine = %name, ?step, "next delete step");
    let vm_facts = match &vm {
        VmPresence::Ours(v) => Some(v.as_ref()),
        _ => None,
    };
    let mut message = String::new();
    let mut finished = false;
    let next = match (&step, proxmox, vm_facts) {
        (DeleteStep::PollTask, _, _) => Next::After(settings.task_poll_initial),
        (DeleteStep::ForgetTask { failure }, _, _) => {
            let status = pm.status.get_or_insert_with(Default::default);
            status.task_ref = None;
            if let Some(f) = failure {
                // Not retried at once: a stop or destroy that keeps failing must not flood
                // Proxmox with tasks (capmox #96).
                status.retry_after = Some(super::later(settings.retry_delay));
                set_condition(
                    pm,
                    api::DELETION_FAILED_REASON,
                    format!("Proxmox task failed: {f}"),
                );
                let next = if vm_facts.is_some() {
                    Next::After(settings.retry_delay)
                } else {
                    Next::Now
                };
                return Ok(DeleteOutcome {
                    step,
                    next,
                    finished: false,
                });
            }
            Next::Now
        }
        // The condition keeps showing the failure until the retry.
        (DeleteStep::WaitForRetry(left), _, _) => {
            return Ok(DeleteOutcome {
                step: step.clone(),
                next: Next::After(*left),
                finished: false,
            });
        }
        (DeleteStep::WaitForUnlock(lock), _, _) => {
            message = format!("VM is locked ({lock})");
            Next::After(settings.task_poll_initial)
        }
        (DeleteStep::StopVm, Some(px), Some(v)) => {
            message = format!("stopping VM {}", v.vmid);
            match px.stop_vm(&v.node, v.vmid, &StopRequest::default()).await {
                Ok(upid) => record_task(pm, Some(upid), settings),
                Err(e) if e.is_not_found() => Next::Now,
                Err(e) => return Err(MachineError::proxmox(format!("stopping VM {}", v.vmid))(e)),
            }
        }
        (DeleteStep::DestroyVm, Some(px), Some(v)) => {
            message = format!("destroying VM {}", v.vmid);
            let opts = DeleteVmOptions {
                purge: Some(true),
                destroy_unreferenced_disks: Some(true),
            };
            match px.delete_vm(&v.node, v.vmid, &opts).await {
                Ok(upid) => record_task(pm, Some(upid), settings),
                Err(e) if e.is_not_found() => Next::Now,
                Err(e) => return Err(MachineError::proxmox(format!("destroying VM {}", v.vmid))(e)),
            }
        }
        (DeleteStep::DeleteIso(loc), Some(px), _) => {
            message = format!("deleting {}", loc.volid);
            iso::delete(px, loc).await?;
            Next::Now
        }
        (DeleteStep::ReleaseIpAddresses, _, _) => {
            message = "releasing IP addresses".to_owned();
            release_claims(kube, ipam_version, pm, &claims).await?;
            Next::Now
        }
        (DeleteStep::Finish, _, _) => {
            if let Some(pc) = pc {
                locations::forget(kube, pc, &name).await?;
            }
            finished = true;
            Next::Now
        }
        (other, _, _) => {
            return Err(MachineError::Invalid(format!(
                "delete step {other:?} without a Proxmox client or VM"
            )));
        }
    };
    set_condition(pm, api::DELETING_REASON, message);
    Ok(DeleteOutcome { step, next, finished })
}

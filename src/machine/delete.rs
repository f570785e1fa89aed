//! One deletion pass: observe → [`decide_delete`] → execute one step. Stop and destroy are tasks
//! recorded in `status.taskRef` and awaited before anything else happens, so a pass never issues a
//! second stop or destroy while one is running; a VM that no longer exists means that part is done.

use std::sync::Arc;
use std::time::Duration;

use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::reflector::ObjectRef;

use super::MachineSettings;
use super::caches::Caches;
use super::error::MachineError;
use super::iso;
use super::locations::Locations;
use super::observe::{self, recorded_vmid};
use super::state::{DeleteFacts, DeleteStep, TaskFacts, VmFacts, VmPresence, decide_delete};
use super::steps::Next;
use super::view::ProxmoxView;
use super::view::watch::Expect;
use crate::ipam::IpamApiVersion;
use crate::proxmox::Upid;
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

/// Inputs of a deletion pass besides the machine.
pub struct DeleteInputs<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// The IPAM API version served.
    pub ipam_version: IpamApiVersion,
    /// The view of the machine's Proxmox cluster; `None` when no credentials are available (then
    /// only a machine that never got a VMID can finish).
    pub view: Option<&'a Arc<ProxmoxView>>,
    /// The machine's ProxmoxCluster.
    pub pc: Option<&'a Arc<ProxmoxCluster>>,
    /// Timing.
    pub settings: &'a MachineSettings,
    /// Watch caches.
    pub caches: &'a dyn Caches,
    /// The node-location writer.
    pub locations: &'a Locations,
}

/// Records a stop or destroy task and has the view wake the machine when its effect shows.
fn wait_for(
    view: &Arc<ProxmoxView>,
    pm: &mut ProxmoxMachine,
    vmid: u32,
    upid: &Upid,
    expect: Expect,
    s: &MachineSettings,
) -> Next {
    view.started(upid.as_str(), vmid);
    pm.status.get_or_insert_with(Default::default).task_ref = Some(upid.to_string());
    wait_again(view, pm, vmid, &upid.task_type, expect, Duration::ZERO, s)
}

fn wait_again(
    view: &Arc<ProxmoxView>,
    pm: &ProxmoxMachine,
    vmid: u32,
    task_type: &str,
    expect: Expect,
    age: Duration,
    s: &MachineSettings,
) -> Next {
    let look = view.next_look(task_type, age);
    view.expect(vmid, ObjectRef::from_obj(pm), expect, task_type, age);
    Next::After(look * 3 + s.task_poll_max)
}

/// The config of VM `vmid` on `node` if it still is this machine's, read fresh: nothing is
/// stopped or destroyed on the word of a shared list that may be a moment old.
async fn still_ours(
    view: &ProxmoxView,
    name: &str,
    vmid: u32,
    node: &str,
) -> Result<Option<crate::proxmox::types::VmConfig>, MachineError> {
    match view.client().vm_config(node, vmid).await {
        Ok(c) => Ok((!c.template && c.name.as_deref() == Some(name)).then_some(c)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(MachineError::proxmox(format!(
            "reading config of VM {vmid} on {node}"
        ))(e)),
    }
}

/// Whether the stop or destroy `step` may act on VM `v`: a destroy right after this machine's
/// own stop acts on the list that showed the stop's effect (read after it, naming the VM ours);
/// anything else first reads the config ([`still_ours`]) — which also tells whether the bootstrap
/// ISO of a machine whose data was delivered is gone (detached and untagged).
async fn may_act(
    view: &ProxmoxView,
    step: &DeleteStep,
    v: &VmFacts,
    name: &str,
    own_stop_done: bool,
    delivered: bool,
) -> Result<bool, MachineError> {
    if *step == DeleteStep::DestroyVm && own_stop_done {
        return Ok(true);
    }
    let Some(config) = still_ours(view, name, v.vmid, &v.node).await? else {
        return Ok(false);
    };
    if delivered && !observe::bootstrap_iso_attached(v.vmid, &config) {
        view.iso_removed(v.vmid);
    }
    Ok(true)
}

/// Runs one deletion pass on `pm`.
pub async fn delete(inp: &DeleteInputs<'_>, pm: &mut ProxmoxMachine) -> Result<DeleteOutcome, MachineError> {
    let settings = inp.settings;
    let name = pm.name_any();
    let vmid = recorded_vmid(pm);
    let st = pm.status.clone().unwrap_or_default();
    let mut task_type = String::new();
    let mut task_age = Duration::ZERO;
    let (task, vm, bootstrap_iso) = match (inp.view, vmid) {
        (Some(view), Some(id)) => {
            let fresh = view.freshness(Some(id), settings.observe_interval);
            let look = observe::task_look(view, st.task_ref.as_deref(), Some(id), fresh, str::to_owned, None)
                .await?;
            if let Some(l) = &look {
                task_type.clone_from(&l.task_type);
                task_age = l.age;
            }
            let task = look.map(|l| l.facts);
            if task == Some(TaskFacts::Succeeded) {
                pm.status.get_or_insert_with(Default::default).task_ref = None;
            }
            let (vm, iso) = if task == Some(TaskFacts::Running) {
                (VmPresence::NotReserved, None)
            } else {
                let look = observe::vm_look(view, &name, Some(id), fresh, false).await?;
                let node = match &look.presence {
                    VmPresence::Ours(v) => Some(v.node.clone()),
                    _ => st.proxmox_node.clone(),
                };
                let iso = match (&look.presence, node) {
                    (VmPresence::Ours(_), _) | (_, None) => None,
                    _ if view.iso_known_removed(id) => None,
                    (_, Some(node)) => {
                        let (_, snap) = view.snapshot(fresh).await?;
                        iso::find(view, &snap, &node, id, fresh).await?
                    }
                };
                (look.presence, iso)
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
    let ns = pm.namespace().unwrap_or_default();
    let claims = inp.caches.claims_of(&ns, &pm.uid().unwrap_or_default());
    let retry_after = st.retry_after.as_ref().and_then(super::until);
    if retry_after.is_none() && st.retry_after.is_some() {
        pm.status.get_or_insert_with(Default::default).retry_after = None;
    }
    // Our HA resource: recorded, or asked for and listed (a crash may fall between the
    // registration and its record).
    let ha_ours = st.ha_resource.is_some()
        || (pm.spec.ha.is_some() && matches!(&vm, VmPresence::Ours(v) if v.ha_managed));
    let facts = DeleteFacts {
        task,
        vm: vm.clone(),
        bootstrap_iso,
        claims_left: !claims.is_empty(),
        retry_after,
        ha_ours,
    };
    let step = decide_delete(&facts);
    tracing::debug!(machine = %name, ?step, "next delete step");
    let vm_facts = match &vm {
        VmPresence::Ours(v) => Some(v.as_ref()),
        _ => None,
    };
    // This pass saw the machine's own stop take effect.
    let own_stop_done = task_type == "qmstop" && facts.task == Some(TaskFacts::Succeeded);
    let delivered = st.bootstrap_data_provided == Some(true);
    let mut message = String::new();
    let mut finished = false;
    let next = match (&step, inp.view, vm_facts) {
        (DeleteStep::PollTask, Some(view), _) => match (vmid, observe::effect_of(&task_type)) {
            (Some(id), Some(expect)) => wait_again(view, pm, id, &task_type, expect, task_age, settings),
            _ => Next::After(view.next_look(&task_type, task_age)),
        },
        (DeleteStep::PollTask, None, _) => Next::After(settings.task_poll_initial),
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
        (DeleteStep::WaitForUnlock(lock), Some(view), Some(v)) => {
            message = format!("VM is locked ({lock})");
            if lock == "clone" {
                wait_again(
                    view,
                    pm,
                    v.vmid,
                    "qmclone",
                    Expect::CloneDone,
                    Duration::ZERO,
                    settings,
                )
            } else {
                Next::After(settings.task_poll_max)
            }
        }
        (DeleteStep::StopVm | DeleteStep::DestroyVm, Some(view), Some(v))
            if !may_act(view, &step, v, &name, own_stop_done, delivered).await? =>
        {
            // The shared list was older than a change of the VM: look again with a fresh one.
            view.wrote(v.vmid);
            Next::Now
        }
        (DeleteStep::RemoveHa { sid }, Some(view), Some(v)) => {
            message = format!("removing HA resource {sid}");
            let result = super::ha::delete(view.client(), sid).await;
            // The VM's `hastate` in the shared list changes: the next pass reads a newer one.
            view.wrote(v.vmid);
            result.map_err(MachineError::proxmox(format!("removing HA resource {sid}")))?;
            pm.status.get_or_insert_with(Default::default).ha_resource = None;
            Next::Now
        }
        (DeleteStep::StopVm, Some(view), Some(v)) => {
            message = format!("stopping VM {}", v.vmid);
            let result = view
                .client()
                .stop_vm(&v.node, v.vmid, &StopRequest::default())
                .await;
            view.wrote(v.vmid);
            match result {
                Ok(upid) => wait_for(view, pm, v.vmid, &upid, Expect::Stopped, settings),
                Err(e) if e.is_not_found() => Next::Now,
                Err(e) => return Err(MachineError::proxmox(format!("stopping VM {}", v.vmid))(e)),
            }
        }
        (DeleteStep::DestroyVm, Some(view), Some(v)) => {
            message = format!("destroying VM {}", v.vmid);
            let opts = DeleteVmOptions {
                purge: Some(true),
                destroy_unreferenced_disks: Some(true),
            };
            let result = view.client().delete_vm(&v.node, v.vmid, &opts).await;
            view.wrote(v.vmid);
            match result {
                Ok(upid) => wait_for(view, pm, v.vmid, &upid, Expect::Gone, settings),
                Err(e) if e.is_not_found() => Next::Now,
                Err(e) => return Err(MachineError::proxmox(format!("destroying VM {}", v.vmid))(e)),
            }
        }
        (DeleteStep::DeleteIso(loc), Some(view), _) => {
            message = format!("deleting {}", loc.volid);
            let id = vmid.unwrap_or_default();
            match iso::delete(view, id, loc).await? {
                Some(upid) => {
                    pm.status.get_or_insert_with(Default::default).task_ref = Some(upid.to_string());
                    Next::After(view.next_look("imgdel", Duration::ZERO))
                }
                None => Next::Now,
            }
        }
        (DeleteStep::ReleaseIpAddresses, _, _) => {
            message = "releasing IP addresses".to_owned();
            release_claims(inp.kube, inp.ipam_version, pm, &claims).await?;
            Next::Now
        }
        (DeleteStep::Finish, _, _) => {
            if let Some(pc) = inp.pc {
                inp.locations.forget(inp.kube, pc, &name).await?;
            }
            if let (Some(view), Some(id)) = (inp.view, vmid) {
                view.forget_vm(id);
                view.guests.forget(&ObjectRef::from_obj(&*pm));
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

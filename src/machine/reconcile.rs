//! One provisioning pass: observe → [`decide`] → execute one step → derive status. The caller (the
//! controller) persists the working copy of the ProxmoxMachine afterwards (and runs the next pass
//! at once when the step says so).

use std::sync::Arc;

use capmox_api::capi::views::MachineView;
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::MachineSettings;
use super::caches::Caches;
use super::desired::DesiredVm;
use super::error::MachineError;
use super::locations::Locations;
use super::observe::{self, TaskLook, VmLook, recorded_vmid};
use super::state::{Facts, Failure, IpFacts, Power, Step, TaskFacts, VmPresence, decide};
use super::steps::{self, Next, StepEnv, StepResult};
use super::view::{Freshness, ProxmoxView};
use super::{iso, view::timing};
use crate::conditions::{self, Desired};
use crate::ipam;

/// What a provisioning pass did.
#[derive(Debug)]
pub struct PassOutcome {
    /// The step that ran.
    pub step: Step,
    /// When to look again.
    pub next: Next,
    /// A Warning event to record: `(reason, message)`.
    pub warning: Option<(String, String)>,
    /// The step's error (already reflected in the condition message).
    pub error: Option<MachineError>,
}

/// Inputs of a pass besides the machine itself.
pub struct PassInputs<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// What the controller knows about the machine's Proxmox cluster.
    pub view: &'a Arc<ProxmoxView>,
    /// The owner Machine.
    pub machine: &'a MachineView,
    /// The owner Cluster's infrastructure is provisioned.
    pub cluster_infrastructure_ready: bool,
    /// The machine's ProxmoxCluster.
    pub pc: &'a Arc<ProxmoxCluster>,
    /// Timing.
    pub settings: &'a MachineSettings,
    /// The IPAM API version the API server serves (discovered once at startup).
    pub ipam_version: ipam::IpamApiVersion,
    /// Watch caches.
    pub caches: &'a dyn Caches,
    /// The node-location writer.
    pub locations: &'a Locations,
}

fn remaining_retry(pm: &ProxmoxMachine) -> Option<std::time::Duration> {
    let at = pm.status.as_ref()?.retry_after.as_ref()?;
    super::until(at)
}

/// Where the ISO an import or deletion recorded in `task_ref` works on lives: remembered by the
/// view, else (an import) the storage the machine's ISO goes to.
async fn iso_task_location(
    inp: &PassInputs<'_>,
    pm: &ProxmoxMachine,
    upid: &crate::proxmox::Upid,
    vmid: u32,
    fresh: Freshness,
) -> Result<Option<(String, String)>, MachineError> {
    if let Some(at) = inp.view.iso_at(vmid) {
        return Ok(Some(at));
    }
    if upid.task_type != "imgcopy" {
        return Ok(None);
    }
    let (_, snap) = inp.view.snapshot(fresh).await?;
    Ok(
        iso::choose_storage(&snap, &upid.node, pm.spec.cloud_init_storage.as_deref())
            .ok()
            .map(|s| (upid.node.clone(), s)),
    )
}

/// Whether the ISO task recorded in `task_ref` shows its effect in the storage listing (`None`:
/// not an ISO task), and where its ISO lives.
async fn iso_task_effect(
    inp: &PassInputs<'_>,
    pm: &ProxmoxMachine,
    task_ref: Option<&str>,
    fresh: Freshness,
) -> Result<(Option<bool>, Option<(String, String)>), MachineError> {
    let (Some(upid), Some(vmid)) = (
        task_ref.and_then(|t| crate::proxmox::Upid::parse(t).ok()),
        recorded_vmid(pm),
    ) else {
        return Ok((None, None));
    };
    if !iso::is_iso_task(&upid.task_type) {
        return Ok((None, None));
    }
    // The ISO listings are read after the last storage write (`iso::present`).
    let at = iso_task_location(inp, pm, &upid, vmid, fresh).await?;
    let seen = match (&at, upid.task_type.as_str()) {
        (Some((node, storage)), "imgcopy") => iso::present(inp.view, node, storage, vmid, fresh).await?,
        (Some((node, storage)), _) => !iso::present(inp.view, node, storage, vmid, fresh).await?,
        (None, _) => {
            let (_, snap) = inp.view.snapshot(fresh).await?;
            iso::find(inp.view, &snap, &upid.node, vmid, fresh)
                .await?
                .is_none()
        }
    };
    Ok((Some(seen), at))
}

/// Runs one provisioning pass on `pm` (a working copy that receives every spec/status change).
pub async fn provision(inp: &PassInputs<'_>, pm: &mut ProxmoxMachine) -> Result<PassOutcome, MachineError> {
    // The failure domain CAPI chose selects the zone (pools, meta-data, nodes) in the working copy.
    let unknown_domain =
        super::zone::apply(&mut pm.spec, &inp.pc.spec, inp.machine.failure_domain.as_deref()).err();
    let st = pm.status.clone().unwrap_or_default();
    let name = pm.name_any();
    let machine_ref = ObjectRef::from_obj(&*pm);
    let vmid = recorded_vmid(pm);
    let provisioned = st.initialization.as_ref().and_then(|i| i.provisioned) == Some(true);
    let bootstrap_provided = st.bootstrap_data_provided == Some(true);
    // Provisioned machines are only looked at by the safety resync: any list of that age will
    // do. Between its tasks a VM in flight changes only by this controller's writes, which
    // already demand a newer list (`ProxmoxView::freshness`); a VM waiting for its guest changes
    // little (the guest agent tells when it stopped): a list a dozen guest checks old will do.
    // The placement of a machine without a VMID and the effect of a running clone or stop want
    // a list of the moment (ISO and config tasks do not show in it; a start is confirmed by its
    // task).
    let task_shows_in_list = st
        .task_ref
        .as_deref()
        .and_then(|t| crate::proxmox::Upid::parse(t).ok())
        .is_some_and(|u| observe::effect_of(&u.task_type).is_some());
    let max_age = if provisioned {
        inp.settings.resync
    } else if vmid.is_some() && !task_shows_in_list {
        inp.settings.observe_interval.max(inp.settings.guest_poll * 12)
    } else {
        inp.settings.observe_interval
    };
    let fresh = inp.view.freshness(vmid, max_age);
    let full_clone = pm.spec.is_full_clone();
    let key = |t: &str| {
        if t == "qmclone" {
            timing::clone_key(full_clone).to_owned()
        } else {
            t.to_owned()
        }
    };
    let (effect, iso_at) = iso_task_effect(inp, pm, st.task_ref.as_deref(), fresh).await?;
    let look: Option<TaskLook> =
        observe::task_look(inp.view, st.task_ref.as_deref(), vmid, fresh, key, effect).await?;
    let task = look.as_ref().map(|l| l.facts.clone());
    // A task that ended counts as a write: what is read from here on must be newer.
    let fresh = inp.view.freshness(vmid, max_age);
    if task == Some(TaskFacts::Succeeded) {
        pm.status.get_or_insert_with(Default::default).task_ref = None;
    }
    let retry_after = remaining_retry(pm);
    let failed_terminally = st.retry_after.is_none()
        && pm
            .condition(api::VIRTUAL_MACHINE_PROVISIONED_CONDITION)
            .is_some_and(|c| c.status == conditions::FALSE && c.reason == api::VM_PROVISION_FAILED_REASON);
    if retry_after.is_none() && st.retry_after.is_some() {
        pm.status.get_or_insert_with(Default::default).retry_after = None;
    }
    // While a task runs the decision is to wait for it: the VM is not looked at.
    let running = task == Some(TaskFacts::Running);
    let VmLook { presence: vm, booted } = if running {
        VmLook {
            presence: VmPresence::NotReserved,
            booted: None,
        }
    } else {
        observe::vm_look(inp.view, &name, vmid, fresh, !provisioned && !bootstrap_provided).await?
    };
    let mut resolution = None;
    let ips = match &vm {
        VmPresence::Ours(_) if !provisioned => {
            let (facts, res) = observe::ip_facts(inp.caches, inp.ipam_version, pm, inp.pc)?;
            resolution = Some(res);
            facts
        }
        _ => IpFacts::NotChecked,
    };
    let vm_facts = match &vm {
        VmPresence::Ours(v) => Some(v.as_ref()),
        _ => None,
    };
    if let Some(v) = vm_facts {
        let status = pm.status.get_or_insert_with(Default::default);
        if status.proxmox_node.as_deref() != Some(v.node.as_str()) {
            status.proxmox_node = Some(v.node.clone());
            // The VM moved (e.g. migrated): the scheduler's round-robin input follows it.
            let zone = pm.spec.network.zone.clone();
            inp.locations
                .record(inp.kube, inp.pc, &name, &v.node, zone, inp.machine.control_plane)
                .await?;
        }
    }
    let facts = Facts {
        desired: DesiredVm::from_spec(&pm.spec),
        cluster_infrastructure_ready: inp.cluster_infrastructure_ready,
        bootstrap_data_available: inp.machine.bootstrap_data_secret_name.is_some(),
        task: task.clone(),
        retry_after,
        ips: ips.clone(),
        bootstrap_provided,
        failed_terminally,
        provisioned,
        node_joined: inp.machine.node_ref.is_some(),
        bootstrap_iso_attached: vm_facts.is_some_and(|v| observe::bootstrap_iso_attached(v.vmid, &v.config)),
        vm: vm.clone(),
        ha: pm.spec.ha.clone(),
        ha_applied: st.ha_resource.clone(),
    };
    let step = match unknown_domain {
        Some(e) if !provisioned => Step::Fail(Failure {
            reason: api::UNKNOWN_FAILURE_DOMAIN_REASON,
            message: e.to_string(),
            retry_after: Some(inp.settings.retry_delay),
        }),
        _ => decide(&facts),
    };
    tracing::debug!(machine = %name, ?step, "next step");
    let env = StepEnv {
        kube: inp.kube,
        view: inp.view,
        fresh,
        machine: inp.machine,
        machine_ref,
        pc: inp.pc,
        settings: inp.settings,
        ipam_version: inp.ipam_version,
        resolution: resolution.as_ref(),
        vm: vm_facts,
        booted,
        caches: inp.caches,
        locations: inp.locations,
    };
    let (mut result, error) = match steps::execute(&step, &env, pm).await {
        Ok(r) => (r, None),
        Err(e) => (
            StepResult {
                next: Next::After(inp.settings.task_poll_initial),
                message: e.to_string(),
                failure: None,
                warning: None,
                reason: None,
            },
            Some(e),
        ),
    };
    if step == Step::PollTask
        && let Some(l) = &look
    {
        result.next = steps::wait_for_task(
            &env,
            vmid,
            &l.task_type,
            &key(&l.task_type),
            l.age,
            iso_at.clone(),
        );
    }
    // A retried failure records when it may be retried, so the next pass waits instead of
    // repeating it, and a failure without one is recognisably terminal.
    if let Some(delay) = result.failure.as_ref().and_then(|f| f.retry_after) {
        let status = pm.status.get_or_insert_with(Default::default);
        if status.retry_after.is_none() {
            status.retry_after = Some(super::later(delay));
        }
    }
    derive_status(pm, &step, &result, &ips, vm_facts.map(|v| v.power));
    Ok(PassOutcome {
        step,
        next: result.next,
        warning: result.warning,
        error,
    })
}

/// Sets the condition, addresses and `vmStatus` that follow from the pass.
fn derive_status(
    pm: &mut ProxmoxMachine,
    step: &Step,
    result: &StepResult,
    ips: &IpFacts,
    power: Option<Power>,
) {
    let name = pm.name_any();
    let generation = pm.metadata.generation;
    let dynamic = pm.spec.network.uses_dynamic_addresses();
    let status = pm.status.get_or_insert_with(Default::default);
    let provisioned = status.initialization.as_ref().and_then(|i| i.provisioned) == Some(true);
    if let IpFacts::Resolved(resolved) = ips {
        status.ip_addresses = Some(ipam::ip_addresses_status(resolved));
        // With DHCP/SLAAC NICs the guest check writes the addresses (static and learnt).
        if power == Some(Power::Running)
            && !dynamic
            && let Ok(addresses) = ipam::machine_addresses(&name, resolved)
        {
            status.addresses = Some(addresses);
        }
    }
    status.vm_status = Some(if provisioned { "ready" } else { "pending" }.to_owned());
    let desired = match (&result.failure, provisioned) {
        (Some(f), _) => Some(Desired::falsy(
            api::VIRTUAL_MACHINE_PROVISIONED_CONDITION,
            f.reason,
            f.message.clone(),
        )),
        (None, true) => Some(Desired::truthy(
            api::VIRTUAL_MACHINE_PROVISIONED_CONDITION,
            api::PROVISIONED_REASON,
            "",
        )),
        (None, false) => result.reason.or_else(|| step.reason()).map(|reason| {
            Desired::falsy(
                api::VIRTUAL_MACHINE_PROVISIONED_CONDITION,
                reason,
                result.message.clone(),
            )
        }),
    };
    let now = super::now();
    let list = status.conditions.get_or_insert_with(Vec::new);
    if let Some(d) = desired {
        conditions::set(list, &d, generation, &now);
    }
    let ready = conditions::ready_summary(list, &[api::VIRTUAL_MACHINE_PROVISIONED_CONDITION]);
    conditions::set(list, &ready, generation, &now);
}

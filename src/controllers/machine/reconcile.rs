//! One reconcile of a ProxmoxMachine: the newest copy (this controller's last write or the
//! cache's), its owner objects from the caches and the pause rules, then [`reconcile_delete`] or
//! [`reconcile_normal`] — each running passes of the machine adapter in a row while a pass says
//! "go on now", persisting after each.

use std::sync::Arc;
use std::time::Duration;

use capmox_api::capi::views::{ClusterView, MachineView};
use capmox_api::capi::{CLUSTER_GROUP, MACHINE_KIND};
use capmox_api::consts::{CLUSTER_NAME_LABEL, MACHINE_FINALIZER, PAUSED_ANNOTATION};
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::clients::{proxmox_client, recorded_credentials, rotation_secret};
use super::persist::{
    own_generation, persist, persist_meta, persist_status, publish, record_phase, restamp, set_paused,
};
use super::{CONTROLLER, MachineCtx, Watched, key_of};
use crate::cluster;
use crate::context::Context;
use crate::controllers::decoded::{self, Decoded};
use crate::machine::delete::{DeleteInputs, delete};
use crate::machine::provision::{PassInputs, provision};
use crate::machine::{MachineError, MachineSettings, owner_of, zone};
use crate::proxmox::view::ProxmoxView;
use crate::vm::Next;

/// Passes one reconcile runs in a row while each step says "go on now".
const MAX_CHAINED_PASSES: usize = 8;

/// The owner Machine (from the cache).
fn owner_machine(mc: &MachineCtx, pm: &ProxmoxMachine) -> Option<MachineView> {
    let r = pm.owner_references().iter().find(|r| {
        r.kind == MACHINE_KIND && capmox_api::capi::api_version_in_group(&r.api_version, CLUSTER_GROUP)
    })?;
    let ns = pm.namespace().unwrap_or_default();
    mc.stores
        .machine(&ns, &r.name)
        .map(|o| MachineView::from_dynamic(&o))
}

/// The newest copy of the machine: the cache's or this controller's last write.
fn current(mc: &MachineCtx, cached: &ProxmoxMachine) -> Option<Arc<ProxmoxMachine>> {
    let r = ObjectRef::from_obj(cached);
    let from_cache = mc.stores.pm(&r)?;
    Some(mc.latest.pick(from_cache))
}

/// One reconcile. An error that stops it outside a provisioning step (those record their own
/// reasons) is published as a Warning event and, unless the machine is provisioned, shown as
/// `VirtualMachineProvisioned=False` with the error's reason (`DeletionFailed` while deleting).
pub(super) async fn reconcile(watched: Arc<Watched>, mc: Arc<MachineCtx>) -> Result<Action, MachineError> {
    let cached = match watched.as_ref() {
        Decoded::Ok(pm) => pm.clone(),
        Decoded::Unreadable(u) => {
            decoded::report(&mc.recorder, &watched, u).await;
            return Ok(Action::await_change());
        }
    };
    let result = reconcile_inner(cached.clone(), &mc).await;
    if let Err(e) = &result {
        report_failure(&mc, &cached, e).await;
    }
    result
}

async fn report_failure(mc: &MachineCtx, cached: &ProxmoxMachine, e: &MachineError) {
    let deleting = cached.metadata.deletion_timestamp.is_some();
    let reason = if deleting && !e.is_auth() {
        api::DELETION_FAILED_REASON
    } else {
        e.reason()
    };
    publish(&mc.recorder, cached, true, reason, e.to_string()).await;
    let Some(fresh) = current(mc, cached) else {
        return;
    };
    if fresh.is_provisioned() && !deleting {
        return;
    }
    let mut work = (*fresh).clone();
    crate::machine::set_failure_condition(&mut work, reason, e.to_string());
    if let Err(pe) = persist_status(mc, &fresh, &work).await {
        tracing::debug!(object = %key_of(cached), error = %pe, "recording the failure in the status failed");
    }
}

/// What a reconcile reads besides the machine: its owner objects.
struct Owners {
    machine: Option<MachineView>,
    cluster: Option<ClusterView>,
    pc: Option<Arc<ProxmoxCluster>>,
}

/// The machine's Machine, Cluster and ProxmoxCluster, from the caches.
fn owners(mc: &MachineCtx, pm: &ProxmoxMachine) -> Owners {
    let ns = pm.namespace().unwrap_or_default();
    let machine = owner_machine(mc, pm);
    let cluster_name = machine
        .as_ref()
        .and_then(|m| m.cluster_name.clone())
        .or_else(|| pm.labels().get(CLUSTER_NAME_LABEL).cloned());
    let cluster = cluster_name
        .as_ref()
        .and_then(|c| mc.stores.cluster(&ns, c))
        .map(|o| ClusterView::from_dynamic(&o));
    let pc_name = cluster
        .as_ref()
        .and_then(|c| c.infrastructure_ref.as_ref())
        .map(|r| r.name.clone());
    let pc = match (&pc_name, &cluster_name) {
        (Some(n), _) => mc.stores.pc(&ns, n),
        // The Cluster is gone (e.g. deleted before its machines): find its ProxmoxCluster by label.
        (None, Some(c)) => mc.stores.readable_pcs().into_iter().find(|pc| {
            pc.namespace().as_deref() == Some(ns.as_str()) && pc.labels().get(CLUSTER_NAME_LABEL) == Some(c)
        }),
        (None, None) => None,
    }
    .map(|pc| mc.locations.latest.pick(pc));
    Owners { machine, cluster, pc }
}

async fn reconcile_inner(cached: Arc<ProxmoxMachine>, mc: &Arc<MachineCtx>) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    mc.caches_ready().await?;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    let ns = cached.namespace().unwrap_or_default();
    // The newest copy, not the one that triggered this pass: every decision (above all "no VMID
    // recorded yet") must see this controller's last write.
    let Some(pm) = current(mc, &cached) else {
        ctx.metrics.remove_machine(&ns, &cached.name_any());
        mc.latest.forget(&ObjectRef::from_obj(cached.as_ref()));
        return Ok(Action::await_change());
    };
    // One line per pass; the kube-runtime span around it names what triggered the pass.
    tracing::debug!(object = %key_of(pm.as_ref()), "proxmoxmachine pass");
    // clusterctl moved it: the target's copy owns the VM now; never touch or delete it from here.
    if pm
        .annotations()
        .contains_key(crate::controllers::DELETE_FOR_MOVE_ANNOTATION)
    {
        tracing::debug!(object = %key_of(pm.as_ref()), "moved by clusterctl; leaving the source object alone");
        return Ok(Action::await_change());
    }
    let deleting = pm.metadata.deletion_timestamp.is_some();
    let has_finalizer = pm.finalizers().iter().any(|f| f == MACHINE_FINALIZER);
    if deleting && !has_finalizer {
        ctx.metrics.remove_machine(&ns, &pm.name_any());
        return Ok(Action::await_change());
    }
    let owners = owners(mc, &pm);
    let cluster_paused = owners.cluster.as_ref().is_some_and(|c| c.paused);
    let paused = cluster_paused
        || owners.machine.as_ref().is_some_and(|m| m.paused)
        || pm.annotations().contains_key(PAUSED_ANNOTATION);
    let mut work = (*pm).clone();
    set_paused(&mut work, cluster_paused, paused);
    if paused {
        persist(mc, &pm, &work).await?;
        return Ok(Action::await_change());
    }
    if deleting {
        return reconcile_delete(mc, pm, owners.pc).await;
    }
    reconcile_normal(mc, pm, work, owners).await
}

/// A machine being deleted: the VM is deleted where it was created (`status.credentialsRef`), not
/// where its zone points now.
async fn reconcile_delete(
    mc: &MachineCtx,
    pm: Arc<ProxmoxMachine>,
    pc: Option<Arc<ProxmoxCluster>>,
) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    let recorded = recorded_credentials(&pm);
    let rotation = rotation_secret(ctx, pc.as_deref(), recorded.as_ref());
    // Without the ProxmoxCluster a recorded zone Secret still reaches the VM.
    let view = match (&pc, &recorded) {
        (None, None) => ctx.proxmox.global().cloned(),
        _ => proxmox_client(mc, pc.as_deref(), recorded.as_ref()).await.ok(),
    }
    .map(|c| ctx.view(&c));
    delete_passes(mc, pm, view.as_ref(), pc.as_ref(), rotation.as_ref()).await
}

/// A machine that is not being deleted: the finalizer, the zone's Proxmox cluster (recorded before
/// any VMID is reserved), then provisioning passes.
async fn reconcile_normal(
    mc: &MachineCtx,
    mut pm: Arc<ProxmoxMachine>,
    mut work: ProxmoxMachine,
    owners: Owners,
) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    let Some(machine) = owners.machine else {
        tracing::info!(object = %key_of(pm.as_ref()), "Machine Controller has not yet set OwnerRef");
        return Ok(Action::await_change());
    };
    let (Some(cluster), Some(pc)) = (owners.cluster, owners.pc) else {
        tracing::info!(object = %key_of(pm.as_ref()), "waiting for the Cluster and its ProxmoxCluster");
        return Ok(Action::requeue(ctx.settings.machine.resync));
    };
    if !pm.finalizers().iter().any(|f| f == MACHINE_FINALIZER) {
        work.finalizers_mut().push(MACHINE_FINALIZER.to_owned());
        // Written with the reservation (before any Proxmox write); a machine that already has a
        // VMID gets it at once.
        if work.spec.virtual_machine_id.is_some() {
            pm = persist_meta(mc, &pm, &work).await?;
            work = (*pm).clone();
        }
    }
    // The machine's zone (the failure domain's, when it selects one) decides its Proxmox cluster;
    // where the VM is created is recorded in the status before any VMID is reserved.
    let _ = zone::apply(&mut work.spec, &pc.spec, machine.failure_domain.as_deref());
    if zone::pin_credentials(&mut work, &pc) {
        pm = persist_status(mc, &pm, &work).await?;
    }
    let zone_secret = zone::machine_credentials(&work, &pc);
    let zoned = Zoned {
        label: zone_secret
            .as_ref()
            .map(|r| (zone::machine_zone(&work.spec).to_owned(), zone::secret_label(r))),
        rotation: rotation_secret(ctx, Some(&pc), zone_secret.as_ref()),
    };
    let proxmox = proxmox_client(mc, Some(&pc), zone_secret.as_ref()).await?;
    let view = ctx.view(&proxmox);
    let inputs = PassInputs {
        kube: &ctx.client,
        view: &view,
        machine: &machine,
        cluster_infrastructure_ready: cluster.infrastructure_provisioned,
        pc: &pc,
        settings: &ctx.settings.machine,
        ipam_version: mc.ipam_version,
        caches: &mc.stores,
        locations: &mc.locations,
    };
    provision_passes(mc, pm, work, &inputs, &view, &zoned).await
}

/// The zone Secret a machine's Proxmox cluster is reached with, for its messages and rotations.
struct Zoned {
    /// `(zone, Secret)` when the zone has its own Proxmox cluster.
    label: Option<(String, String)>,
    /// The Secret whose change requeues the machine after Proxmox refused it.
    rotation: Option<(String, String)>,
}

impl Zoned {
    fn name(&self, e: MachineError) -> MachineError {
        match &self.label {
            Some((z, s)) => e.in_zone(z, s),
            None => e,
        }
    }
}

/// Provisioning passes, several in a row while each says "go on now".
async fn provision_passes(
    mc: &MachineCtx,
    mut pm: Arc<ProxmoxMachine>,
    mut work: ProxmoxMachine,
    inputs: &PassInputs<'_>,
    view: &Arc<ProxmoxView>,
    zoned: &Zoned,
) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    let settings = &ctx.settings.machine;
    for pass in 1.. {
        let was_provisioned = pm.is_provisioned();
        let mut outcome = provision(inputs, &mut work)
            .await
            .map_err(|e| zoned.name(e))
            .inspect_err(|e| note_auth_failure(ctx, zoned.rotation.as_ref(), &pm, e))?;
        outcome.error = outcome.error.map(|e| zoned.name(e));
        if let Some(err) = outcome.error.as_ref().filter(|e| e.is_auth())
            && !work.is_provisioned()
        {
            crate::machine::set_failure_condition(&mut work, err.reason(), err.to_string());
        }
        let phase = work
            .condition(api::VIRTUAL_MACHINE_PROVISIONED_CONDITION)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        record_phase(ctx, &work, &phase);
        let go_on = outcome.next == Next::Now && pass < MAX_CHAINED_PASSES && outcome.error.is_none();
        // Metadata and spec (a reserved VMID) now; with `go_on`, the status with the next step's.
        pm = if go_on && outcome.status_can_wait() {
            let after = persist_meta(mc, &pm, &work).await?;
            // The status written with the next step's describes the spec just written.
            if let Some((was, now)) = own_generation(&pm, &work, &after) {
                restamp(&mut work, was, now);
            }
            after
        } else {
            persist(mc, &pm, &work).await?
        };
        view.arm(&owner_of(&pm));
        if let Some((reason, note)) = &outcome.warning {
            publish(&mc.recorder, &pm, true, reason, note.clone()).await;
        }
        for (reason, note) in &outcome.notices {
            publish(&mc.recorder, &pm, false, reason, note.clone()).await;
        }
        if go_on && outcome.status_can_wait() {
            continue;
        }
        if !was_provisioned && work.is_provisioned() {
            publish(
                &mc.recorder,
                &pm,
                false,
                api::PROVISIONED_REASON,
                "VM is provisioned".into(),
            )
            .await;
        }
        if let Some(err) = &outcome.error {
            ctx.metrics.reconcile_error(CONTROLLER, err.class());
            if err.is_auth() {
                note_auth_failure(ctx, zoned.rotation.as_ref(), &pm, err);
                publish(&mc.recorder, &pm, true, err.reason(), err.to_string()).await;
            }
            let key = key_of(pm.as_ref());
            let delay =
                mc.errors
                    .next_jittered(&key, settings.task_poll_initial, error_backoff_cap(err, settings));
            tracing::warn!(object = %key, error = %err, retry_in = ?delay, "proxmoxmachine step failed");
            return Ok(Action::requeue(delay));
        }
        mc.errors.reset(&key_of(pm.as_ref()));
        if go_on {
            work = (*pm).clone();
            continue;
        }
        return Ok(action(outcome.next, settings));
    }
    Ok(Action::await_change())
}

/// Deletion passes, several in a row while each says "go on now".
async fn delete_passes(
    mc: &MachineCtx,
    mut pm: Arc<ProxmoxMachine>,
    view: Option<&Arc<ProxmoxView>>,
    pc: Option<&Arc<ProxmoxCluster>>,
    rotation: Option<&(String, String)>,
) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    let ns = pm.namespace().unwrap_or_default();
    let inputs = DeleteInputs {
        kube: &ctx.client,
        ipam_version: mc.ipam_version,
        view,
        pc,
        settings: &ctx.settings.machine,
        caches: &mc.stores,
        locations: &mc.locations,
    };
    for pass in 1.. {
        let mut work = (*pm).clone();
        let out = delete(&inputs, &mut work)
            .await
            .inspect_err(|e| note_auth_failure(ctx, rotation, &pm, e))?;
        if out.finished {
            work.finalizers_mut().retain(|f| f != MACHINE_FINALIZER);
            pm = persist_status(mc, &pm, &work).await?;
            persist_meta(mc, &pm, &work).await?;
            ctx.metrics.remove_machine(&ns, &pm.name_any());
            mc.latest.forget(&ObjectRef::from_obj(pm.as_ref()));
            publish(
                &mc.recorder,
                &pm,
                false,
                "Deleted",
                "VM, bootstrap ISO and IP claims removed".into(),
            )
            .await;
            return Ok(Action::await_change());
        }
        record_phase(ctx, &work, "Deleting");
        pm = persist(mc, &pm, &work).await?;
        if let Some(view) = view {
            view.arm(&owner_of(&pm));
        }
        if out.next == Next::Now && pass < MAX_CHAINED_PASSES {
            continue;
        }
        return Ok(action(out.next, &ctx.settings.machine));
    }
    Ok(Action::await_change())
}

/// Turns a pass's `Next` into a controller action.
fn action(next: Next, s: &MachineSettings) -> Action {
    match next {
        Next::Now => Action::requeue(Duration::from_millis(1)),
        Next::After(d) => Action::requeue(d),
        Next::Watch => Action::requeue(s.resync),
    }
}

/// The longest a machine waits after a streak of errors: 5 minutes when Proxmox refused the
/// credentials (a rotated Secret requeues the machine at once); else the longest task poll, at
/// least 5 s (faults come in bursts; a machine that failed a few times in a row must not sit out
/// a minute once Proxmox answers again — the shared list keeps the request rate low anyway).
pub(super) fn error_backoff_cap(err: &MachineError, s: &MachineSettings) -> Duration {
    if err.is_auth() {
        cluster::error::AUTH_BACKOFF_CAP.max(s.task_poll_max)
    } else {
        s.task_poll_max.max(Duration::from_secs(5))
    }
}

/// Remembers that Proxmox refused the credentials `pm` uses, so that a change of that credentials
/// Secret (`secret`, see [`rotation_secret`]) requeues it at once.
fn note_auth_failure(
    ctx: &Context,
    secret: Option<&(String, String)>,
    pm: &ProxmoxMachine,
    e: &MachineError,
) {
    if !e.is_auth() {
        return;
    }
    if let Some(secret) = secret.cloned() {
        let object = (pm.namespace().unwrap_or_default(), pm.name_any());
        ctx.proxmox.wait_for_rotation(secret, object);
    }
}

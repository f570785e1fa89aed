//! One reconcile of a ProxmoxVirtualMachine: the newest copy, the pause annotation, then the
//! deletion passes or — with the finalizer in place and a Proxmox client from the object's
//! credentials Secret (or the manager's global credentials) — provisioning and operation passes,
//! several in a row while each says "go on now", persisting after each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capmox_api::vm::{self as api, FINALIZER, PAUSED_ANNOTATION, ProxmoxVirtualMachine, VmPhase};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use super::persist::{persist, persist_meta, persist_status, publish, record_phase};
use super::{CONTROLLER, CREDENTIALS_TTL, VmCtx, key_of};
use crate::conditions::{self, Desired};
use crate::proxmox::Client;
use crate::proxmox::view::ProxmoxView;
use crate::virtual_machine::VirtualMachineError;
use crate::virtual_machine::delete::delete;
use crate::virtual_machine::owner_of;
use crate::virtual_machine::provision::{PassInputs, provision};
use crate::vm::Next;

/// Passes one reconcile runs in a row while each step says "go on now".
const MAX_CHAINED_PASSES: usize = 8;

/// The newest copy of the object: the cache's or this controller's last write.
fn current(vc: &VmCtx, cached: &ProxmoxVirtualMachine) -> Option<Arc<ProxmoxVirtualMachine>> {
    let from_cache = vc.store.get(&ObjectRef::from_obj(cached))?;
    Some(vc.latest.pick(from_cache))
}

/// The Proxmox client of `pvm`: its credentials Secret, else the global one.
async fn client(vc: &VmCtx, pvm: &ProxmoxVirtualMachine) -> Result<Client, VirtualMachineError> {
    let ctx = &vc.ctx;
    let Some(r) = pvm.spec.credentials_ref.as_ref() else {
        return ctx.proxmox.global().cloned().ok_or_else(|| {
            VirtualMachineError::Credentials(
                "no Proxmox credentials: set spec.credentialsRef or the manager's PROXMOX_URL".into(),
            )
        });
    };
    let ns = pvm.namespace().unwrap_or_default();
    let key = (ns.clone(), r.name.clone());
    if let Some((c, at)) = vc
        .credentials
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&key)
        && at.elapsed() < CREDENTIALS_TTL
    {
        return Ok(c.clone());
    }
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&r.name)
        .await
        .map_err(VirtualMachineError::kube(format!(
            "getting credentials Secret {ns}/{}",
            r.name
        )))?
        .ok_or_else(|| {
            VirtualMachineError::Credentials(format!("credentials Secret {ns}/{} not found", r.name))
        })?;
    let client = ctx.proxmox.for_secret(&secret)?;
    vc.credentials
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(key, (client.clone(), Instant::now()));
    Ok(client)
}

/// Turns a pass's `Next` into a controller action.
fn action(next: Next, resync: Duration) -> Action {
    match next {
        Next::Now => Action::requeue(Duration::from_millis(1)),
        Next::After(d) => Action::requeue(d),
        Next::Watch => Action::requeue(resync),
    }
}

/// Shows an error that stopped a reconcile in `Ready` (and as a Warning event).
async fn report_failure(vc: &VmCtx, cached: &ProxmoxVirtualMachine, e: &VirtualMachineError) {
    publish(vc, cached, true, e.reason(), e.to_string()).await;
    let Some(fresh) = current(vc, cached) else {
        return;
    };
    let mut work = (*fresh).clone();
    let generation = work.metadata.generation;
    let status = work.status.get_or_insert_with(Default::default);
    if status.phase.is_none() {
        status.phase = Some(VmPhase::Pending);
    }
    let list = status.conditions.get_or_insert_with(Vec::new);
    conditions::set(
        list,
        &Desired::falsy(api::READY_CONDITION, e.reason(), e.to_string()),
        generation,
        &crate::machine::now(),
    );
    if let Err(pe) = persist_status(vc, &fresh, &work).await {
        tracing::debug!(object = %key_of(cached), error = %pe, "recording the failure failed");
    }
}

/// One reconcile.
pub(super) async fn reconcile(
    cached: Arc<ProxmoxVirtualMachine>,
    vc: Arc<VmCtx>,
) -> Result<Action, VirtualMachineError> {
    let result = reconcile_inner(&cached, &vc).await;
    if let Err(e) = &result {
        report_failure(&vc, &cached, e).await;
    }
    result
}

async fn reconcile_inner(
    cached: &ProxmoxVirtualMachine,
    vc: &Arc<VmCtx>,
) -> Result<Action, VirtualMachineError> {
    let ctx = &vc.ctx;
    let ns = cached.namespace().unwrap_or_default();
    let Some(pvm) = current(vc, cached) else {
        ctx.metrics.remove_virtual_machine(&ns, &cached.name_any());
        vc.latest.forget(&ObjectRef::from_obj(cached));
        return Ok(Action::await_change());
    };
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if pvm.annotations().contains_key(PAUSED_ANNOTATION) {
        return Ok(Action::await_change());
    }
    let has_finalizer = pvm.finalizers().iter().any(|f| f == FINALIZER);
    if pvm.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            ctx.metrics.remove_virtual_machine(&ns, &pvm.name_any());
            return Ok(Action::await_change());
        }
        let view = client(vc, &pvm).await.ok().map(|c| ctx.view(&c));
        return delete_passes(vc, pvm, view.as_ref()).await;
    }
    let mut pvm = pvm;
    if !has_finalizer {
        let mut work = (*pvm).clone();
        work.finalizers_mut().push(FINALIZER.to_owned());
        pvm = persist_meta(vc, &pvm, &work).await?;
    }
    let client = client(vc, &pvm).await?;
    let view = ctx.view(&client);
    provision_passes(vc, pvm, &view).await
}

/// The VMIDs other ProxmoxVirtualMachines recorded (not free even without a VM yet).
fn taken(vc: &VmCtx, pvm: &ProxmoxVirtualMachine) -> Vec<i64> {
    vc.store
        .state()
        .iter()
        .filter(|o| o.metadata.uid != pvm.metadata.uid)
        .filter_map(|o| o.status.as_ref().and_then(|s| s.vmid))
        .collect()
}

async fn provision_passes(
    vc: &VmCtx,
    mut pvm: Arc<ProxmoxVirtualMachine>,
    view: &Arc<ProxmoxView>,
) -> Result<Action, VirtualMachineError> {
    let settings = &vc.ctx.settings.machine;
    let mut work = (*pvm).clone();
    for pass in 1.. {
        let inputs = PassInputs {
            kube: &vc.ctx.client,
            view,
            settings,
            taken: taken(vc, &pvm),
        };
        let outcome = provision(&inputs, &mut work).await?;
        record_phase(vc, &work);
        let go_on = outcome.next == Next::Now && pass < MAX_CHAINED_PASSES && outcome.error.is_none();
        // The record of a step that writes nothing a later Proxmox write depends on may go out
        // with the next step's.
        if !(go_on && outcome.status_can_wait()) {
            pvm = persist(vc, &pvm, &work).await?;
            work = (*pvm).clone();
            view.arm(&owner_of(&pvm));
        }
        for (warning, reason, message) in &outcome.events {
            publish(vc, &pvm, *warning, reason, message.clone()).await;
        }
        if let Some(err) = &outcome.error {
            vc.ctx.metrics.reconcile_error(CONTROLLER, err.class());
            let delay = vc.errors.next_jittered(
                &key_of(&pvm),
                settings.task_poll_initial,
                settings.task_poll_max.max(Duration::from_secs(5)),
            );
            tracing::warn!(object = %key_of(&pvm), error = %err, retry_in = ?delay, "proxmoxvirtualmachine step failed");
            return Ok(Action::requeue(delay));
        }
        vc.errors.reset(&key_of(&pvm));
        if go_on {
            continue;
        }
        return Ok(action(outcome.next, settings.resync));
    }
    Ok(Action::await_change())
}

async fn delete_passes(
    vc: &VmCtx,
    mut pvm: Arc<ProxmoxVirtualMachine>,
    view: Option<&Arc<ProxmoxView>>,
) -> Result<Action, VirtualMachineError> {
    let ctx = &vc.ctx;
    let settings = &ctx.settings.machine;
    let ns = pvm.namespace().unwrap_or_default();
    for pass in 1.. {
        let mut work = (*pvm).clone();
        let out = delete(view, settings, &mut work).await?;
        if out.finished {
            // The IPAM claims go with the object, whatever became of the VM (Delete or Retain).
            crate::virtual_machine::addresses::release(&ctx.client, &pvm).await?;
            work.finalizers_mut().retain(|f| f != FINALIZER);
            pvm = persist_status(vc, &pvm, &work).await?;
            persist_meta(vc, &pvm, &work).await?;
            ctx.metrics.remove_virtual_machine(&ns, &pvm.name_any());
            vc.latest.forget(&ObjectRef::from_obj(pvm.as_ref()));
            let what = if out.message.is_empty() {
                "VM and bootstrap ISO removed".to_owned()
            } else {
                out.message.clone()
            };
            publish(
                vc,
                &pvm,
                false,
                crate::virtual_machine::reasons::DELETED_REASON,
                what,
            )
            .await;
            return Ok(Action::await_change());
        }
        let generation = work.metadata.generation;
        let status = work.status.get_or_insert_with(Default::default);
        status.phase = Some(VmPhase::Deleting);
        let (reason, message) = match &out.failure {
            Some(f) => ("DeletionFailed", format!("Proxmox task failed: {f}")),
            None => ("Deleting", out.message.clone()),
        };
        conditions::set(
            status.conditions.get_or_insert_with(Vec::new),
            &Desired::falsy(api::READY_CONDITION, reason, message),
            generation,
            &crate::machine::now(),
        );
        record_phase(vc, &work);
        pvm = persist(vc, &pvm, &work).await?;
        if let Some(view) = view {
            view.arm(&owner_of(&pvm));
        }
        if out.next == Next::Now && pass < MAX_CHAINED_PASSES {
            continue;
        }
        return Ok(action(out.next, settings.resync));
    }
    Ok(Action::await_change())
}

//! The ProxmoxVMRestore controller: checks the snapshot, runs passes of
//! [`crate::virtual_machine::operations::restore`] in the VM's turn until the rollback is done,
//! then marks the ProxmoxVirtualMachine restored (`vm.capmox-rs.io/restored`: its controller
//! compares the VM with the spec instead of re-applying it) and the restore complete — in that
//! order, so a crash between the two repeats only the mark.

use std::future::Future;
use std::sync::Arc;

use capmox_api::vm::{ProxmoxVMRestore, ProxmoxVMSnapshot, ProxmoxVirtualMachine, RESTORED_ANNOTATION};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef, Store};
use serde_json::json;

use super::{OpCtx, action, client_of, pvm, retry, wait_served};
use crate::context::Context;
use crate::virtual_machine::VirtualMachineError;
use crate::virtual_machine::operations::restore as op;
use crate::virtual_machine::operations::{self as ops, Again};

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxvmrestore";
/// Field manager of this controller's patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxvmrestore";

struct Ctx {
    oc: OpCtx<ProxmoxVMRestore>,
    store: Store<ProxmoxVMRestore>,
}

/// Runs the ProxmoxVMRestore controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let stop = futures::FutureExt::shared(super::super::shutdown_signal(shutdown));
    if !wait_served(&client, "proxmoxvmrestores", stop.clone()).await {
        return;
    }
    let settings = &ctx.settings;
    let (store, writer) = reflector::store::<ProxmoxVMRestore>();
    let (own, woken) = super::watches(
        &ctx,
        writer,
        store.clone(),
        |r: &ProxmoxVMRestore, s: &ProxmoxVMSnapshot| {
            r.spec.snapshot_name == s.name_any() && !op::finished(r)
        },
    );
    let c = Arc::new(Ctx {
        oc: OpCtx::new(ctx.clone(), FIELD_MANAGER),
        store: store.clone(),
    });
    Controller::for_stream(own, store)
        .reconcile_on(woken)
        .with_config(Config::default().concurrency(settings.machine_concurrency()))
        .graceful_shutdown_on(stop)
        .run(reconcile, |_, e, c: Arc<Ctx>| retry(&c.oc.ctx, CONTROLLER, e), c)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxvmrestore reconcile failed");
            }
        })
        .await;
}

/// Marks `target` restored by `r` (idempotent: the value is the restore's UID).
async fn mark_restored(
    ctx: &Context,
    r: &ProxmoxVMRestore,
    target: &ProxmoxVirtualMachine,
) -> Result<(), VirtualMachineError> {
    let token = r.metadata.uid.clone().unwrap_or_default();
    if target.annotations().get(RESTORED_ANNOTATION) == Some(&token) {
        return Ok(());
    }
    let ns = target.namespace().unwrap_or_default();
    let body = json!({"metadata": {"annotations": {RESTORED_ANNOTATION: token}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    Api::<ProxmoxVirtualMachine>::namespaced(ctx.client.clone(), &ns)
        .patch(&target.name_any(), &params, &Patch::Merge(&body))
        .await
        .map_err(VirtualMachineError::kube(format!(
            "marking ProxmoxVirtualMachine {ns}/{} restored",
            target.name_any()
        )))?;
    Ok(())
}

async fn reconcile(cached: Arc<ProxmoxVMRestore>, c: Arc<Ctx>) -> Result<Action, VirtualMachineError> {
    let oc = &c.oc;
    let Some(fresh) = c.store.get(&ObjectRef::from_obj(cached.as_ref())) else {
        return Ok(Action::await_change());
    };
    let r = oc.current(fresh);
    if op::finished(&r) || r.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let r = (*r).clone();
    let ns = r.namespace().unwrap_or_default();
    let settings = &oc.ctx.settings.machine;
    let mut work = r.clone();
    let target = pvm(&oc.ctx, &ns, &r.spec.target.name).await?;
    let snap = Api::<ProxmoxVMSnapshot>::namespaced(oc.ctx.client.clone(), &ns)
        .get_opt(&r.spec.snapshot_name)
        .await
        .map_err(VirtualMachineError::kube(format!(
            "getting ProxmoxVMSnapshot {ns}/{}",
            r.spec.snapshot_name
        )))?;
    let (target, snap) = match (target, snap) {
        (Some(t), Some(s)) => (t, s),
        (t, _) => {
            let what = if t.is_none() {
                format!("ProxmoxVirtualMachine {ns}/{}", r.spec.target.name)
            } else {
                format!("ProxmoxVMSnapshot {ns}/{}", r.spec.snapshot_name)
            };
            op::waiting(
                &mut work,
                ops::SOURCE_NOT_FOUND_REASON,
                format!("{what} not found"),
            );
            oc.persist_status(&r, &work).await?;
            return Ok(Action::requeue(settings.resync));
        }
    };
    let checked = match op::check_snapshot(&r, &snap, &target) {
        Ok(c) => c,
        Err((reason, message, terminal)) => {
            if terminal {
                op::fail(&mut work, reason, message.clone());
                oc.publish(&r, true, reason, message).await;
            } else {
                op::waiting(&mut work, reason, message);
            }
            oc.persist_status(&r, &work).await?;
            return Ok(Action::requeue(settings.resync));
        }
    };
    let client = client_of(&oc.ctx, Some(&target)).await?;
    let view = oc.ctx.view(&client);
    let turn = oc.turn(&ns, &target.name_any());
    let _turn = turn.lock().await;
    let again = op::rollback(&view, settings, &mut work, &target, (&checked.0, checked.1), None).await?;
    let again = match again {
        Some(a) => a,
        None => {
            mark_restored(&oc.ctx, &r, &target).await?;
            op::complete(&mut work);
            Again::Watch
        }
    };
    let written = oc.persist_status(&r, &work).await?;
    if op::finished(&written) {
        let s = written.status.clone().unwrap_or_default();
        let message = s
            .conditions
            .as_ref()
            .and_then(|l| l.first())
            .map(|c| c.message.clone())
            .unwrap_or_default();
        let (warning, reason) = if s.complete == Some(true) {
            (false, ops::SUCCEEDED_REASON)
        } else {
            (true, ops::FAILED_REASON)
        };
        oc.publish(&written, warning, reason, message).await;
        return Ok(Action::await_change());
    }
    Ok(action(again, settings.resync))
}

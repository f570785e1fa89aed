//! The ProxmoxVMSnapshot controller: a finalizer first (a `Delete` snapshot goes from Proxmox
//! before its object), then passes of [`crate::virtual_machine::operations::snapshot`] until the
//! snapshot succeeded or failed, each in the VM's turn and persisted before the next.

use std::future::Future;
use std::sync::Arc;

use capmox_api::vm::{
    OperationPhase, ProxmoxVMSnapshot, ProxmoxVirtualMachine, SNAPSHOT_FINALIZER, SnapshotDeletionPolicy,
};
use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef, Store};

use super::{OpCtx, action, client_of, pvm, retry, wait_served};
use crate::context::Context;
use crate::virtual_machine::VirtualMachineError;
use crate::virtual_machine::operations::snapshot::{self as op, Deleted};
use crate::virtual_machine::operations::{self as ops, Again};

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxvmsnapshot";
/// Field manager of this controller's patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxvmsnapshot";

struct Ctx {
    oc: OpCtx<ProxmoxVMSnapshot>,
    store: Store<ProxmoxVMSnapshot>,
}

/// Runs the ProxmoxVMSnapshot controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let stop = futures::FutureExt::shared(super::super::shutdown_signal(shutdown));
    if !wait_served(&client, "proxmoxvmsnapshots", stop.clone()).await {
        return;
    }
    let settings = &ctx.settings;
    let (store, writer) = reflector::store::<ProxmoxVMSnapshot>();
    let (own, woken) = super::watches(
        &ctx,
        writer,
        store.clone(),
        |s: &ProxmoxVMSnapshot, p: &ProxmoxVirtualMachine| s.spec.source.name == p.name_any(),
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
                tracing::debug!(error = %e, "proxmoxvmsnapshot reconcile failed");
            }
        })
        .await;
}

/// Another snapshot of the same VM being taken (it goes first).
fn earlier(c: &Ctx, snap: &ProxmoxVMSnapshot) -> Option<String> {
    c.store
        .state()
        .iter()
        .filter(|s| s.metadata.uid != snap.metadata.uid && s.namespace() == snap.namespace())
        .filter(|s| s.spec.source.name == snap.spec.source.name && op::in_progress(s))
        .map(|s| format!("snapshot {} of the same VM is being taken", s.name_any()))
        .next()
}

async fn reconcile(cached: Arc<ProxmoxVMSnapshot>, c: Arc<Ctx>) -> Result<Action, VirtualMachineError> {
    let oc = &c.oc;
    let Some(fresh) = c.store.get(&ObjectRef::from_obj(cached.as_ref())) else {
        return Ok(Action::await_change());
    };
    let snap = oc.current(fresh);
    let ns = snap.namespace().unwrap_or_default();
    let resync = oc.ctx.settings.machine.resync;
    let source = pvm(&oc.ctx, &ns, &snap.spec.source.name).await?;
    if snap.metadata.deletion_timestamp.is_some() {
        return delete(&c, &snap, source.as_ref()).await;
    }
    let snap = oc.finalizer(&snap, SNAPSHOT_FINALIZER, true).await?;
    if op::finished(&snap) {
        return Ok(Action::await_change());
    }
    let mut work = snap.clone();
    let Some(source) = source else {
        op::waiting(
            &mut work,
            ops::SOURCE_NOT_FOUND_REASON,
            format!("ProxmoxVirtualMachine {ns}/{} not found", snap.spec.source.name),
        );
        oc.persist_status(&snap, &work).await?;
        return Ok(Action::requeue(resync));
    };
    let client = client_of(&oc.ctx, Some(&source)).await?;
    let view = oc.ctx.view(&client);
    let turn = oc.turn(&ns, &source.name_any());
    let _turn = turn.lock().await;
    let again = op::take(
        &view,
        &oc.ctx.settings.machine,
        &mut work,
        &source,
        earlier(&c, &snap),
    )
    .await?;
    let written = oc.persist_status(&snap, &work).await?;
    let phase = |s: &ProxmoxVMSnapshot| s.status.as_ref().and_then(|s| s.phase);
    if phase(&written) != phase(&snap) {
        let message = written
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|l| l.first())
            .map(|c| c.message.clone())
            .unwrap_or_default();
        match phase(&written) {
            Some(OperationPhase::Succeeded) => {
                oc.publish(&written, false, ops::SUCCEEDED_REASON, message).await
            }
            Some(OperationPhase::Failed) => oc.publish(&written, true, ops::FAILED_REASON, message).await,
            _ => {}
        }
    }
    Ok(action(again, resync))
}

async fn delete(
    c: &Ctx,
    snap: &ProxmoxVMSnapshot,
    source: Option<&ProxmoxVirtualMachine>,
) -> Result<Action, VirtualMachineError> {
    let oc = &c.oc;
    if !snap.finalizers().iter().any(|f| f == SNAPSHOT_FINALIZER) {
        oc.latest.forget(&ObjectRef::from_obj(snap));
        return Ok(Action::await_change());
    }
    let outcome = if snap.spec.deletion_policy() == SnapshotDeletionPolicy::Retain {
        Deleted::Done
    } else {
        // The credentials are the source's; without it, the manager's global ones (the VM
        // may be gone with it).
        match client_of(&oc.ctx, source).await {
            Ok(client) => {
                let view = oc.ctx.view(&client);
                let ns = snap.namespace().unwrap_or_default();
                let turn = oc.turn(&ns, &snap.spec.source.name);
                let _turn = turn.lock().await;
                let mut work = snap.clone();
                let out = op::delete(
                    &view,
                    &oc.ctx.settings.machine,
                    &mut work,
                    source,
                    earlier(c, snap),
                )
                .await?;
                oc.persist_status(snap, &work).await?;
                out
            }
            Err(e) if source.is_none() => {
                tracing::info!(error = %e, "the snapshot's VM cannot be reached without its ProxmoxVirtualMachine; its object goes");
                Deleted::Done
            }
            Err(e) => return Err(e),
        }
    };
    match outcome {
        Deleted::Done => {
            let name = snap
                .status
                .as_ref()
                .and_then(|s| s.snapshot_name.clone())
                .unwrap_or_default();
            let gone = oc.finalizer(snap, SNAPSHOT_FINALIZER, false).await?;
            oc.latest.forget(&ObjectRef::from_obj(&gone));
            if snap.spec.deletion_policy() == SnapshotDeletionPolicy::Delete && !name.is_empty() {
                oc.publish(
                    snap,
                    false,
                    ops::SNAPSHOT_DELETED_REASON,
                    format!("Proxmox snapshot {name} deleted"),
                )
                .await;
            }
            Ok(Action::await_change())
        }
        Deleted::Again(again) => Ok(action(again, oc.ctx.settings.machine.resync)),
        Deleted::Failed(message) => {
            oc.publish(snap, true, ops::SNAPSHOT_DELETE_FAILED_REASON, message)
                .await;
            Ok(action(
                Again::After(oc.ctx.settings.machine.retry_delay),
                oc.ctx.settings.machine.resync,
            ))
        }
    }
}

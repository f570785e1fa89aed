//! The ProxmoxVMClone controller: resolves the source (a ProxmoxVirtualMachine, or a ready
//! ProxmoxVMSnapshot of one), creates the new ProxmoxVirtualMachine once (marked with the
//! clone's UID, so a crash between its creation and the clone's status write finds it again),
//! and follows it until it runs. It makes no Proxmox call: the new object's controller clones.

use std::future::Future;
use std::sync::Arc;

use capmox_api::vm::{
    CloneSourceKind, OperationPhase, ProxmoxVMClone, ProxmoxVMSnapshot, ProxmoxVirtualMachine,
};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef, Store};

use super::{OpCtx, pvm, retry, wait_served};
use crate::conditions::Desired;
use crate::context::Context;
use crate::virtual_machine::VirtualMachineError;
use crate::virtual_machine::operations::clone as op;
use crate::virtual_machine::operations::{self as ops, Target, target_of};

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxvmclone";
/// Field manager of this controller's writes.
pub const FIELD_MANAGER: &str = "capmox-proxmoxvmclone";

struct Ctx {
    oc: OpCtx<ProxmoxVMClone>,
    store: Store<ProxmoxVMClone>,
}

/// Runs the ProxmoxVMClone controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let stop = futures::FutureExt::shared(super::super::shutdown_signal(shutdown));
    if !wait_served(&client, "proxmoxvmclones", stop.clone()).await {
        return;
    }
    let settings = &ctx.settings;
    let (store, writer) = reflector::store::<ProxmoxVMClone>();
    let (own, woken) = super::watches(
        &ctx,
        writer,
        store.clone(),
        |c: &ProxmoxVMClone, p: &ProxmoxVirtualMachine| {
            let name = p.name_any();
            c.spec.target.name == name || c.spec.source.name == name
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
                tracing::debug!(error = %e, "proxmoxvmclone reconcile failed");
            }
        })
        .await;
}

/// The source ProxmoxVirtualMachine, its VM and the Proxmox snapshot to clone at. `Err`: what
/// the clone waits for (`reason`, `message`, `terminal`).
async fn source(
    ctx: &Context,
    clone: &ProxmoxVMClone,
) -> Result<
    Result<(ProxmoxVirtualMachine, Target, Option<String>), (&'static str, String, bool)>,
    VirtualMachineError,
> {
    let ns = clone.namespace().unwrap_or_default();
    let name = &clone.spec.source.name;
    let (pvm_name, snap_name) = match clone.spec.source_kind() {
        CloneSourceKind::ProxmoxVirtualMachine => (name.clone(), None),
        CloneSourceKind::ProxmoxVMSnapshot => {
            let snap = Api::<ProxmoxVMSnapshot>::namespaced(ctx.client.clone(), &ns)
                .get_opt(name)
                .await
                .map_err(VirtualMachineError::kube(format!(
                    "getting ProxmoxVMSnapshot {ns}/{name}"
                )))?;
            let Some(snap) = snap else {
                return Ok(Err((
                    ops::SOURCE_NOT_FOUND_REASON,
                    format!("ProxmoxVMSnapshot {ns}/{name} not found"),
                    false,
                )));
            };
            let s = snap.status.clone().unwrap_or_default();
            match s.phase {
                Some(OperationPhase::Succeeded) => {}
                Some(OperationPhase::Failed) => {
                    return Ok(Err((
                        ops::INVALID_REASON,
                        format!("ProxmoxVMSnapshot {name} failed"),
                        true,
                    )));
                }
                _ => {
                    return Ok(Err((
                        ops::SOURCE_NOT_READY_REASON,
                        format!("ProxmoxVMSnapshot {name} is not ready yet"),
                        false,
                    )));
                }
            }
            (snap.spec.source.name.clone(), s.snapshot_name)
        }
    };
    let Some(source) = pvm(ctx, &ns, &pvm_name).await? else {
        return Ok(Err((
            ops::SOURCE_NOT_FOUND_REASON,
            format!("ProxmoxVirtualMachine {ns}/{pvm_name} not found"),
            false,
        )));
    };
    let Some(at) = target_of(&source) else {
        return Ok(Err((
            ops::SOURCE_NOT_READY_REASON,
            format!("ProxmoxVirtualMachine {pvm_name} has no VM yet"),
            false,
        )));
    };
    Ok(Ok((source, at, snap_name)))
}

async fn reconcile(cached: Arc<ProxmoxVMClone>, c: Arc<Ctx>) -> Result<Action, VirtualMachineError> {
    let oc = &c.oc;
    let Some(fresh) = c.store.get(&ObjectRef::from_obj(cached.as_ref())) else {
        return Ok(Action::await_change());
    };
    let clone = oc.current(fresh);
    let phase = clone.status.as_ref().and_then(|s| s.phase);
    if matches!(phase, Some(OperationPhase::Succeeded | OperationPhase::Failed))
        || clone.metadata.deletion_timestamp.is_some()
    {
        return Ok(Action::await_change());
    }
    let clone = (*clone).clone();
    let ns = clone.namespace().unwrap_or_default();
    let settings = &oc.ctx.settings.machine;
    let mut work = clone.clone();
    let target_name = &clone.spec.target.name;
    let again = match pvm(&oc.ctx, &ns, target_name).await? {
        Some(t) if op::made_by(&t, &clone) => {
            op::follow(&mut work, &t);
            settings.resync
        }
        Some(_) => {
            let message =
                format!("ProxmoxVirtualMachine {target_name} exists already (not made by this clone)");
            op::show(
                &mut work,
                OperationPhase::Failed,
                &Desired::falsy(capmox_api::vm::READY_CONDITION, ops::INVALID_REASON, message),
            );
            settings.resync
        }
        None if phase == Some(OperationPhase::InProgress) => {
            let message = format!("the new ProxmoxVirtualMachine {target_name} was deleted");
            op::show(
                &mut work,
                OperationPhase::Failed,
                &Desired::falsy(capmox_api::vm::READY_CONDITION, ops::FAILED_REASON, message),
            );
            settings.resync
        }
        None => match source(&oc.ctx, &clone).await? {
            Err((reason, message, terminal)) => {
                let phase = if terminal {
                    OperationPhase::Failed
                } else {
                    OperationPhase::Pending
                };
                op::show(
                    &mut work,
                    phase,
                    &Desired::falsy(capmox_api::vm::READY_CONDITION, reason, message),
                );
                settings.task_poll_max
            }
            Ok((source, at, snap_name)) => {
                match op::target_spec(&clone, &source, &at, snap_name.as_deref()) {
                    Err(message) => {
                        op::show(
                            &mut work,
                            OperationPhase::Failed,
                            &Desired::falsy(capmox_api::vm::READY_CONDITION, ops::INVALID_REASON, message),
                        );
                        settings.resync
                    }
                    Ok(spec) => {
                        let obj = op::target_object(&clone, spec);
                        let created = Api::<ProxmoxVirtualMachine>::namespaced(oc.ctx.client.clone(), &ns)
                            .create(
                                &PostParams {
                                    field_manager: Some(FIELD_MANAGER.to_owned()),
                                    ..PostParams::default()
                                },
                                &obj,
                            )
                            .await;
                        match created {
                            Ok(t) => op::follow(&mut work, &t),
                            // Made by a pass whose status write a crash lost: found by the next pass.
                            Err(kube::Error::Api(e)) if e.code == 409 => {}
                            Err(e) => {
                                return Err(VirtualMachineError::kube(format!(
                                    "creating ProxmoxVirtualMachine {ns}/{target_name}"
                                ))(e));
                            }
                        }
                        settings.task_poll_initial
                    }
                }
            }
        },
    };
    let written = oc.persist_status(&clone, &work).await?;
    let now = written.status.as_ref().and_then(|s| s.phase);
    if now != phase && matches!(now, Some(OperationPhase::Succeeded | OperationPhase::Failed)) {
        let message = written
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|l| l.first())
            .map(|c| c.message.clone())
            .unwrap_or_default();
        let failed = now == Some(OperationPhase::Failed);
        let reason = if failed {
            ops::FAILED_REASON
        } else {
            ops::SUCCEEDED_REASON
        };
        oc.publish(&written, failed, reason, message).await;
    }
    Ok(Action::requeue(again))
}
